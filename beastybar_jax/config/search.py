"""The ``search:`` config section, shared by AlphaZero's self-play, training-time
evaluation (``eval_simulations``) and search agents: a frozen model that checks its own
values (the only place they are checked). Imports nothing of the package but
:mod:`beastybar_jax.validation`."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from beastybar_jax.validation import ConfigModel, Float, Int

ALGORITHMS = ("gumbel", "puct")
DEPTH_MARGIN = 2
"""Levels below a finished game that a walk of up to 992 (= 31 + 31**2) simulations can reach."""
Positive = Annotated[Int, Field(ge=1)]
Nonnegative = Annotated[Float, Field(ge=0, allow_inf_nan=False)]


class SearchConfig(ConfigModel):
    """Which mctx policy to run and its parameters.

    Attributes:
      algorithm: ``"gumbel"`` (``mctx.gumbel_muzero_policy``) or ``"puct"``
        (``mctx.muzero_policy`` with Dirichlet root noise).
      num_simulations: simulations per world.
      num_determinizations: ``K`` worlds drawn with ``sample_world`` per decision.
      max_num_considered_actions: Gumbel: actions sampled at the root for
        sequential halving.
      gumbel_scale: Gumbel: scale of the root Gumbel noise (exploration).
      pb_c_init, pb_c_base: PUCT exploration constants.
      dirichlet_alpha, dirichlet_fraction: PUCT root noise.
      value_scale, maxvisit_init: Gumbel ``qtransform_completed_by_mix_value``.
      max_depth: walks down the tree stop at this depth (mctx's ``max_depth``). None:
        the game's ``max_game_length`` plus :data:`DEPTH_MARGIN`, deeper than any walk of
        up to 992 simulations goes (below a finished game a walk can only enter the
        breadth-first subtree of its ``A`` identical children), so the trees are those of
        an unbounded search; on a GPU the search takes this many steps down per
        simulation, so the bound is also its cost.
    """

    location: ClassVar[str] = "search"

    algorithm: Literal["gumbel", "puct"] = "gumbel"
    num_simulations: Positive = 32
    num_determinizations: Positive = 1
    max_num_considered_actions: Positive = 16
    gumbel_scale: Nonnegative = 1.0
    pb_c_init: Nonnegative = 1.25
    pb_c_base: Annotated[Float, Field(gt=0, allow_inf_nan=False, description="PUCT divides by it")] = 19652.0
    dirichlet_alpha: Annotated[Float, Field(gt=0, allow_inf_nan=False)] = 0.3
    dirichlet_fraction: Annotated[Float, Field(ge=0, le=1)] = 0.25
    value_scale: Nonnegative = 0.1
    maxvisit_init: Nonnegative = 50.0
    max_depth: Positive | None = None
