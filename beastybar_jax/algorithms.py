"""The registry of algorithms: the config's ``algorithm`` value -> its :class:`~beastybar_jax.learning.algorithm.Algorithm`."""

from __future__ import annotations

from beastybar_jax.alphazero.algorithm import ALGORITHM as ALPHAZERO
from beastybar_jax.config import ALGORITHM_NAMES, ConfigError
from beastybar_jax.ppo.algorithm import ALGORITHM as PPO
from beastybar_jax.learning.algorithm import Algorithm

_REGISTRY = {algorithm.name: algorithm for algorithm in (ALPHAZERO, PPO)}
assert tuple(_REGISTRY) == ALGORITHM_NAMES


def get_algorithm(name: str) -> Algorithm:
    """The :class:`Algorithm` the config's ``algorithm`` names (``alphazero``, ``ppo``)."""
    if name not in _REGISTRY:
        raise ConfigError(f"config key 'algorithm' must be one of {', '.join(ALGORITHM_NAMES)}, got {name!r}")
    return _REGISTRY[name]
