"""Deprecated alias of :mod:`beastybar_jax.training.evaluation`."""
from beastybar_jax._deprecation import moved

moved(__name__, "beastybar_jax.training.evaluation")
from beastybar_jax.training.evaluation import *  # noqa: E402,F401,F403
