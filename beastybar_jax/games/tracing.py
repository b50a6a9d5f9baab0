"""For which backend a function is being traced.

A few functions are written two ways with the same results (the torso's within float rounding),
one for each kind of device: the MLP torso as one Pallas kernel on a GPU, XLA operations elsewhere
(``network.py``), the afterstate lists' ``searchsorted`` and rows (``games/beastybar/afterstate.py``)
and the recurring phase's visits, one Pallas kernel on a GPU (``games/beastybar/queue.py``).
The backend is JAX's default one, or :func:`for_gpu`'s inside its block: to compile for a
GPU on a machine without one (``jax.export``, deviceless compilation) or to compare both
forms. It is read when a function is traced, so it holds for everything traced inside
the block (a kernel that JAX may trace again later, outside it, binds it first); JAX
reuses a jitted function's first trace, so trace a new function under each setting.
(The search's loop and walk are chosen by JAX's default backend alone:
``search/mctx_patch.py``.)
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Optional

import jax

# Per thread, as JAX's own trace state: the web app and play.py trace in several threads.
_FOR_GPU: contextvars.ContextVar[Optional[bool]] = contextvars.ContextVar("for_gpu", default=None)
_KERNELS: contextvars.ContextVar[str] = contextvars.ContextVar("pallas_kernels", default="triton")
KERNELS = ("triton", "interpret", "xla")


@contextlib.contextmanager
def for_gpu(enabled: bool = True, *, kernels: str = "triton") -> Iterator[None]:
    """Within the block, trace as for a GPU (``True``) or for a CPU (``False``) whatever
    JAX's default backend: to compile for a GPU on a machine without one (``jax.export``,
    deviceless compilation) or to compare both forms. ``kernels``: how the GPU forms run
    their Pallas kernels (:func:`pallas_kernels`): ``"triton"`` (only a GPU runs them),
    ``"interpret"`` (Pallas's interpreter, so that a CPU can) or ``"xla"`` (the XLA
    operations they replace, to measure what a kernel gains)."""
    if kernels not in KERNELS:
        raise ValueError(f"kernels must be one of {KERNELS}, got {kernels!r}")
    tokens = _FOR_GPU.set(enabled), _KERNELS.set(kernels)
    try:
        yield
    finally:
        _FOR_GPU.reset(tokens[0])
        _KERNELS.reset(tokens[1])


def traced_for_gpu() -> bool:
    """Whether what is traced now is for a GPU (see :func:`for_gpu`)."""
    enabled = _FOR_GPU.get()
    return jax.default_backend() != "cpu" if enabled is None else enabled


def pallas_kernels() -> Optional[str]:
    """How the Pallas kernels of what is traced now run (see :func:`for_gpu`): ``"triton"``
    or ``"interpret"``; None where there are none (traced for a CPU, or ``kernels="xla"``)."""
    kernels = _KERNELS.get()
    return kernels if traced_for_gpu() and kernels != "xla" else None
