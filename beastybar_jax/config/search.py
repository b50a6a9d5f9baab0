"""The ``search:`` config section, shared by AlphaZero's self-play, training-time
evaluation (``eval_simulations``) and search agents: a plain frozen dataclass that
checks its own values (the only place they are checked). Imports nothing but
:mod:`dataclasses`, :mod:`math` and :mod:`numbers`."""

from __future__ import annotations

import dataclasses
import math
import numbers

ALGORITHMS = ("gumbel", "puct")
DEPTH_MARGIN = 2
"""Levels below a finished game that a walk of up to 992 (= 31 + 31**2) simulations can reach."""


@dataclasses.dataclass(frozen=True)
class SearchConfig:
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

    algorithm: str = "gumbel"
    num_simulations: int = 32
    num_determinizations: int = 1
    max_num_considered_actions: int = 16
    gumbel_scale: float = 1.0
    pb_c_init: float = 1.25
    pb_c_base: float = 19652.0
    dirichlet_alpha: float = 0.3
    dirichlet_fraction: float = 0.25
    value_scale: float = 0.1
    maxvisit_init: float = 50.0
    max_depth: int | None = None

    def __post_init__(self):
        for field in dataclasses.fields(self):  # numpy scalars as the plain numbers they are
            value = getattr(self, field.name)
            if isinstance(value, numbers.Integral) and not isinstance(value, int):  # np.int64
                object.__setattr__(self, field.name, int(value))
            elif isinstance(value, numbers.Real) and not isinstance(value, (int, float)):  # np.float32
                object.__setattr__(self, field.name, float(value))
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"search.algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        for name in ("num_simulations", "num_determinizations", "max_num_considered_actions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"search.{name} must be a positive integer, got {value!r}")
        if self.max_depth is not None and (isinstance(self.max_depth, bool) or not isinstance(self.max_depth, int)
                                           or self.max_depth < 1):
            raise ValueError(f"search.max_depth must be a positive integer or null (the game's length), "
                             f"got {self.max_depth!r}")
        for name in ("gumbel_scale", "pb_c_init", "pb_c_base", "dirichlet_alpha", "value_scale", "maxvisit_init"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"search.{name} must be a finite number >= 0, got {value!r}")
        if self.pb_c_base <= 0:  # PUCT divides by it
            raise ValueError(f"search.pb_c_base must be > 0, got {self.pb_c_base!r}")
        if self.dirichlet_alpha <= 0:
            raise ValueError(f"search.dirichlet_alpha must be > 0, got {self.dirichlet_alpha!r}")
        if not 0.0 <= self.dirichlet_fraction <= 1.0:
            raise ValueError(f"search.dirichlet_fraction must be in [0, 1], got {self.dirichlet_fraction!r}")
