"""Deprecated alias of :mod:`beastybar_jax.training.metrics`."""
from beastybar_jax._deprecation import moved

moved(__name__, "beastybar_jax.training.metrics")
from beastybar_jax.training.metrics import *  # noqa: E402,F401,F403
