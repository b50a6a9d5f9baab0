"""Deprecated alias of :mod:`beastybar_jax.alphazero.selfplay`."""
from beastybar_jax._deprecation import moved

moved(__name__, "beastybar_jax.alphazero.selfplay")
from beastybar_jax.alphazero.selfplay import *  # noqa: E402,F401,F403
