"""Search: information-set fair mctx search over determinized worlds.

* :mod:`~beastybar_jax.config.search`: :class:`SearchConfig` (imports only
  :mod:`dataclasses`);
* :mod:`~beastybar_jax.search.determinized`: :func:`run_search` and its parts
  (evaluators, world sampling, the mctx recurrent function, the root combine);
* :mod:`~beastybar_jax.search.mctx_patch`: our replacement of mctx's search loop
  (``search``/``backward`` in ``mctx._src.search``), bitwise identical to stock
  mctx without its tree-sized copies.

Importing this package installs the mctx patch (``determinized`` calls
:func:`mctx_patch.install` when it is imported), so every search it builds is traced
with the patched mctx. Configuration code imports :mod:`~beastybar_jax.config.search`
alone, which loads nothing else.
"""

from beastybar_jax.search import mctx_patch
from beastybar_jax.config.search import ALGORITHMS, SearchConfig
from beastybar_jax.search.determinized import (Evaluator, SearchOutput, make_recurrent_fn, mask_logits,
                                               network_evaluator, run_search, sample_worlds, uniform_evaluator)

__all__ = ["ALGORITHMS", "Evaluator", "SearchConfig", "SearchOutput", "make_recurrent_fn", "mask_logits", "mctx_patch",
           "network_evaluator", "run_search", "sample_worlds", "uniform_evaluator"]
