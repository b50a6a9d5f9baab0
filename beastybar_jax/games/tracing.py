"""How a game's functions are being traced: for which backend, and whether inside the
body of a hot loop.

A game may write a function two ways with the same results (Beasty Bar's reductions
over its queue's lanes, ``games/beastybar/lanes.py``): one that a GPU runs in few
kernels but whose program is large and slow to compile (XLA's priority fusion costs
more than linearly in a fusion's size), and one that is small. The few kernels pay
where the game's functions are much of a loop's body and the loop is where a training
step spends its time: a hot loop (a search's simulations, the endgame solver's
iterations, PPO's rollout steps, a learner's updates, and the engine's own benchmark and
conformance replay), which the code that owns the loop marks with :func:`hot_loop`.
Everywhere else (a search's root, self-play's and the arena's moves, whose time is their
searches and agents) a game traces the small form: a few more kernels that run once a
move, and a program that compiles faster (docs/performance.md, "The search on a GPU").

The backend is JAX's default one, or :func:`for_gpu`'s inside its block (the search's
loop and walk are chosen by JAX's default backend alone: ``search/mctx_patch.py``).
Both are read when a function is traced, so they hold for everything traced inside the
block; JAX reuses a jitted function's first trace, so trace a new function under each
setting.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Optional

import jax

# Per thread, as JAX's own trace state: the web app and play.py trace in several threads.
_FOR_GPU: contextvars.ContextVar[Optional[bool]] = contextvars.ContextVar("for_gpu", default=None)
_HOT: contextvars.ContextVar[bool] = contextvars.ContextVar("hot_loop", default=False)


@contextlib.contextmanager
def _set(variable: contextvars.ContextVar, value) -> Iterator[None]:
    token = variable.set(value)
    try:
        yield
    finally:
        variable.reset(token)


def for_gpu(enabled: bool = True) -> contextlib.AbstractContextManager[None]:
    """Within the block, trace as for a GPU (``True``) or for a CPU (``False``) whatever
    JAX's default backend: to compile for a GPU on a machine without one (``jax.export``,
    deviceless compilation) or to compare both forms."""
    return _set(_FOR_GPU, enabled)


def traced_for_gpu() -> bool:
    """Whether what is traced now is for a GPU (see :func:`for_gpu`)."""
    enabled = _FOR_GPU.get()
    return jax.default_backend() != "cpu" if enabled is None else enabled


def hot_loop() -> contextlib.AbstractContextManager[None]:
    """Trace the block (or, as a decorator, the function) as the body of a loop that the
    device runs many times a step."""
    return _set(_HOT, True)


def in_hot_loop() -> bool:
    """Whether what is traced now is inside a :func:`hot_loop` block."""
    return _HOT.get()
