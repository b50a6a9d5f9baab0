"""How a game's functions are being traced: for which backend, and whether inside the
body of a hot loop.

A game may write a function two ways with the same results (Beasty Bar's reductions
over its queue's lanes, ``games/beastybar/lanes.py``): one that a GPU runs in few
kernels but whose program is large and slow to compile (XLA's priority fusion costs
more than linearly in a fusion's size), and one that is small. The few kernels pay
only where a GPU runs the code many times a step: in the body of a hot loop (a
search's simulations, the endgame solver's iterations, PPO's rollout steps, a learner's
updates), which the code that owns the loop marks with :func:`hot_loop`. Everywhere
else (a search's root, self-play's moves) a game traces the small form: a few more
kernels that run once a move, and a program that compiles faster (docs/performance.md,
"The search on a GPU").

The backend is JAX's default one, or :func:`for_gpu`'s inside its block. Both are read
when a function is traced, so they hold for everything traced inside the block; JAX
reuses a jitted function's first trace, so trace a new function under each setting.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import jax

_FOR_GPU: list[bool] = []  # for_gpu()'s override, innermost last
_HOT: list[None] = []  # one entry per hot_loop() block being traced


@contextlib.contextmanager
def _pushed(stack: list, entry) -> Iterator[None]:
    stack.append(entry)
    try:
        yield
    finally:
        stack.pop()


def for_gpu(enabled: bool = True) -> contextlib.AbstractContextManager[None]:
    """Within the block, trace as for a GPU (``True``) or for a CPU (``False``) whatever
    JAX's default backend: to compile for a GPU on a machine without one (``jax.export``,
    deviceless compilation) or to compare both forms."""
    return _pushed(_FOR_GPU, enabled)


def traced_for_gpu() -> bool:
    """Whether what is traced now is for a GPU (see :func:`for_gpu`)."""
    return _FOR_GPU[-1] if _FOR_GPU else jax.default_backend() != "cpu"


def hot_loop() -> contextlib.AbstractContextManager[None]:
    """Trace the block as the body of a loop that the device runs many times a step."""
    return _pushed(_HOT, None)


def in_hot_loop() -> bool:
    """Whether what is traced now is inside a :func:`hot_loop` block."""
    return bool(_HOT)
