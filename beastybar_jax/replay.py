"""Deprecated alias of :mod:`beastybar_jax.alphazero.replay`."""
from beastybar_jax._deprecation import moved

moved(__name__, "beastybar_jax.alphazero.replay")
from beastybar_jax.alphazero.replay import *  # noqa: E402,F401,F403
