"""What an algorithm gives the run that trains it (the registry: :mod:`beastybar_jax.algorithms`), and
the names of the metrics it logs.

An algorithm package (``beastybar_jax.alphazero``, ``beastybar_jax.ppo``) holds only
what is specific to it: its train state, its one jitted iteration, its loss and its
config section. It exposes an :class:`Algorithm` record as ``ALGORITHM`` in its
``algorithm`` module; the shared code (:mod:`~beastybar_jax.training.trainer`,
:mod:`~beastybar_jax.training.loop`, checkpoints, metrics, evaluation) does the rest.

The train state of every algorithm is a pytree with at least ``params`` (network
variables, replicated), ``opt_state``, ``rng`` (the run's key data), ``iteration``
and ``num_updates`` (``int32[]``); checkpoints store ``params`` apart so
:func:`~beastybar_jax.checkpoint.load_agent` can restore the network alone.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """An algorithm's hooks into the shared training code.

    Attributes:
      name: the config's ``algorithm`` value.
      init: ``init(config, game, network, optimizer, key) -> state``.
      make_iteration: ``make_iteration(config, game, network, optimizer, mesh) ->
        iteration(state, key) -> (state, metrics)``, un-jitted; ``metrics`` is a dict of
        float32 scalars that includes ``moves`` (game moves played) and ``loss``.
      state_shardings: ``state_shardings(abstract_state, mesh)``: a state-shaped tree
        of ``NamedSharding`` (batch-leading arrays split, the rest replicated).
      updates_per_iteration: ``updates_per_iteration(config) -> int`` optimizer steps
        an iteration takes (sizes the learning-rate schedule).
      simulations_per_move: ``simulations_per_move(config) -> int`` search
        simulations behind each move (0 without search), for throughput logging.
      unmeasured: ``unmeasured(metrics) -> names`` of an iteration's metrics that
        measured nothing there (the losses of an iteration that did not train, a rate
        over no finished game): the log leaves them out rather than write a placeholder
        0 that would read as a measurement. Hooks still see every metric.
      check: ``check(config, game)``: raise ``ConfigError`` for what the run could not
        start with (PPO: an opponent spec that names no agent), without compiling; part
        of the run's pre-flight (:mod:`beastybar_jax.training.preflight`).
    """

    name: str
    init: Callable[..., Any]
    make_iteration: Callable[..., Callable]
    state_shardings: Callable[[Any, Any], Any]
    updates_per_iteration: Callable[[Any], int]
    simulations_per_move: Callable[[Any], int] = lambda config: 0
    unmeasured: Callable[[Any], Any] = lambda metrics: ()
    check: Callable[[Any, Any], None] = lambda config, game: None


GAME_METRICS = ("mean_game_length", "draw_rate", "first_player_score")
"""Metrics over the games an iteration finished: unmeasured when it finished none."""


def unmeasured_game_metrics(metrics) -> tuple[str, ...]:
    """:data:`GAME_METRICS` where ``metrics["games_finished"]`` is 0."""
    return GAME_METRICS if metrics.get("games_finished", 1) == 0 else ()


def metric_name(kind: str) -> str:
    """An opponent as a metric-name fragment: ``checkpoint:runs/x`` -> ``checkpoint_runs_x``
    (a "/" would nest TensorBoard's tags; plain names such as ``outcome_heuristic`` stay)."""
    return re.sub(r"[^0-9A-Za-z_]+", "_", kind).strip("_") or "opponent"
