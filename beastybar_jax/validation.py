"""The error every configuration check raises, and the one-line check helper.

A leaf module: the config sections of each algorithm (``config/alphazero.py``,
``config/ppo.py``) and the top-level :mod:`beastybar_jax.config` share it without
importing each other.
"""

from __future__ import annotations

import math


class ConfigError(ValueError):
    """A config key is unknown, has the wrong type or an impossible value."""


def check(ok: bool, key: str, message: str) -> None:
    """Raise ``ConfigError("config key '<key>' <message>")`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"config key {key!r} {message}")


def check_at_least(value, minimum, key: str, hint: str = "") -> None:
    check(value >= minimum, key, f"must be >= {minimum}{hint}, got {value}")


def check_finite_nonnegative(value: float, key: str) -> None:
    check(math.isfinite(value) and value >= 0, key, f"must be a finite number >= 0, got {value}")
