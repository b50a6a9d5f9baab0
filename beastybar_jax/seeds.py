"""Seeds to PRNG keys: every seed in ``[0, 2**63)`` its own key.

``jax.random.key(seed)`` keeps only the low 32 bits of a Python int unless 64-bit
mode is on: seed ``2**32 + 11`` gives seed 11's key, and ``2**62`` seed 0's. Configs,
scripts and deals accept 63-bit seeds, so they all turn seeds into keys here: the low
32 bits make ``jax.random.key`` (a seed below ``2**32`` gives exactly its key, so
every figure measured with a small seed is unchanged) and the high bits, where there
are any, are folded in.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jax

SEED_LIMIT = 2**63
"""Seeds are integers in ``[0, SEED_LIMIT)``."""

DEAL_SEED_LIMIT = 2**53
"""Deal seeds (``beastybar_jax.playing``: game records, ``play.py``, the web app) are in
``[0, DEAL_SEED_LIMIT)``: a browser reads JSON numbers as doubles, which hold every
integer below ``2**53`` exactly, so a record passes through the page unchanged."""


def is_seed(value, limit: int = SEED_LIMIT) -> bool:
    """Whether ``value`` is an integer (not a bool) in ``[0, limit)``."""
    if isinstance(value, bool):
        return False
    try:
        return 0 <= operator.index(value) < limit
    except TypeError:  # a float, a string, ...
        return False


def _halves(seed: int) -> tuple[int, int]:
    """``(low 32 bits, high bits)`` of a seed in ``[0, SEED_LIMIT)``; ``ValueError`` else."""
    if not is_seed(seed):
        raise ValueError(f"a seed must be an integer in [0, 2**63), got {seed!r}")
    seed = operator.index(seed)
    return seed & 0xFFFFFFFF, seed >> 32


def _fold_high(key, high: int):
    import jax

    return key if high == 0 else jax.random.fold_in(key, high)


def seed_key(seed: int) -> jax.Array:
    """The PRNG key of ``seed``, an integer in ``[0, SEED_LIMIT)`` (``ValueError`` else):
    ``jax.random.key(seed)`` below ``2**32``, a key of its own above."""
    import jax  # here, so that the scripts' argument parsing (``beastybar_jax.cli``) loads no jax

    low, high = _halves(seed)
    return _fold_high(jax.random.key(low), high)


def fold_in_seed(key: jax.Array, seed: int) -> jax.Array:
    """``key`` with the integer ``seed`` (in ``[0, 2**63)``) folded in:
    ``jax.random.fold_in(key, seed)`` below ``2**32`` (which takes 32 bits only), then
    the high bits where there are any."""
    import jax

    low, high = _halves(seed)
    return _fold_high(jax.random.fold_in(key, low), high)
