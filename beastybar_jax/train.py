"""Deprecated: the loop moved to :mod:`beastybar_jax.training`, AlphaZero's state to :mod:`beastybar_jax.alphazero`."""
from beastybar_jax._deprecation import moved

moved(__name__, "beastybar_jax.training (TrainLoop, make_trainer, ...) and beastybar_jax.alphazero")
from beastybar_jax.alphazero.algorithm import AlphaZeroState as TrainState  # noqa: E402,F401
from beastybar_jax.training import *  # noqa: E402,F401,F403
