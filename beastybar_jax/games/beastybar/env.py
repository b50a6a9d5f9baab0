"""Beasty Bar as a :class:`~beastybar_jax.games.Game`: the bundle search and training take."""

import pathlib

import jax
import jax.numpy as jnp

from beastybar_jax.games.base import UI, Afterstates, Agents, Game, Solver, TokenLayout, as_player
from beastybar_jax.games.beastybar import actions, afterstate, cards, core, heuristics, render, state, view
from beastybar_jax.games.beastybar.observe import (OBSERVATION_LAYOUT, OBSERVATION_SIZE, QUEUE_FEATURES, QUEUE_TOKENS,
                                                  observe, sample_world)
from beastybar_jax.games.beastybar.endgame import solver, suite
from beastybar_jax.games.beastybar.solver_agent import solver_act

# The networks shipped with the game (Game.agents.networks): exported runs in the package.
# ``champion`` was trained on a GPU; ``champion-cpu``, the best a 2-core CPU trained (and
# rebuilds bit for bit), stays for comparison and for those who train on a CPU.
CHAMPION_DIR = pathlib.Path(__file__).resolve().parent / "champion"
CHAMPION_CPU_DIR = pathlib.Path(__file__).resolve().parent / "champion_cpu"


def _score_margin(s: state.State, player) -> jax.Array:
    """Points of ``player`` minus the opponent's, in the bar now."""
    player = as_player(player, cards.NUM_PLAYERS)
    scores = s.scores
    return (scores[player] - scores[1 - player]).astype(jnp.float32)


_QUEUE_START, _QUEUE_END = OBSERVATION_LAYOUT["queue"]
BEASTYBAR_TOKENS = TokenLayout(_QUEUE_START, QUEUE_TOKENS, QUEUE_FEATURES)
assert BEASTYBAR_TOKENS.num_tokens * BEASTYBAR_TOKENS.features == _QUEUE_END - _QUEUE_START

BEASTYBAR = Game(
    name="beastybar",
    num_actions=actions.NUM_ACTIONS,
    observation_size=OBSERVATION_SIZE,
    num_players=cards.NUM_PLAYERS,
    max_game_length=cards.NUM_CARDS,  # one card per turn
    init=core.init,
    play=core.play,
    observe=observe,
    legal_action_mask=core.legal_action_mask,
    sample_world=sample_world,
    score_margin=_score_margin,
    score_margin_scale=10.0,  # bar points: margins of a few points to ~20
    tokens=BEASTYBAR_TOKENS,
    ui=UI(action_names=actions.ACTION_NAMES, render_state=render.render_state, render_action=render.render_action,
          describe_move=render.describe_move, points=lambda s: s.scores, table_view=view.table_view,
          move_group=view.move_group),
    agents=Agents(baselines=heuristics.AGENTS, wrappers=(("solver", solver_act),), networks=(("champion", CHAMPION_DIR), ("champion-cpu", CHAMPION_CPU_DIR)),
                  default_opponent="heuristic"),
    solver=Solver(exact_moves=view.exact_moves, exact_applies=view.exact_applies, exact_values=solver.exact_values,
                  exact_actions=solver.exact_actions, endgame_suite=suite.yardstick),
    afterstates=Afterstates(legal=afterstate.legal_afterstates, size=afterstate.AFTERSTATE_SIZE,
                            compact=afterstate.compact_afterstates, capacity=afterstate.afterstate_capacity,
                            replies=afterstate.legal_replies, answers=afterstate.legal_answers,
                            plies=afterstate.legal_plies, max_moves=afterstate.MAX_LEGAL_ACTIONS),
)
