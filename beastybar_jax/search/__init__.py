"""Search: information-set fair mctx search over determinized worlds.

* :mod:`~beastybar_jax.search.config`: :class:`SearchConfig` (imports only
  :mod:`dataclasses`);
* :mod:`~beastybar_jax.search.determinized`: :func:`run_search` and its parts
  (evaluators, world sampling, the mctx recurrent function, the root combine);
* :mod:`~beastybar_jax.search.mctx_patch`: our replacement of mctx's search loop
  (``search``/``backward`` in ``mctx._src.search``), bitwise identical to stock
  mctx without its tree-sized copies.

Importing ``SearchConfig`` stays cheap: the other names load on first use, and
loading them installs the mctx patch (``determinized`` calls
:func:`mctx_patch.install` when it is imported), so every search this package
builds is traced with the patched mctx.
"""

from __future__ import annotations

import importlib

from beastybar_jax.search.config import ALGORITHMS, SearchConfig

_LAZY = {
    "Evaluator": "determinized",
    "SearchOutput": "determinized",
    "make_recurrent_fn": "determinized",
    "mask_logits": "determinized",
    "network_evaluator": "determinized",
    "run_search": "determinized",
    "sample_worlds": "determinized",
    "uniform_evaluator": "determinized",
}

_SUBMODULES = ("determinized", "mctx_patch")

__all__ = ["ALGORITHMS", "SearchConfig", *_LAZY]


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
