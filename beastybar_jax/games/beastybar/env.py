"""Beasty Bar as a :class:`~beastybar_jax.games.Game`: the bundle search and training take."""

import pathlib

import jax
import jax.numpy as jnp

from beastybar_jax.games.base import Game, TokenLayout, as_player
from beastybar_jax.games.beastybar import actions, afterstate, cards, core, heuristics, render, state, view
from beastybar_jax.games.beastybar.observe import (OBSERVATION_LAYOUT, OBSERVATION_SIZE, QUEUE_FEATURES, QUEUE_TOKENS,
                                                  observe, sample_world)
from beastybar_jax.games.beastybar.endgame import solver, suite
from beastybar_jax.games.beastybar.solver_agent import solver_act

# The networks shipped with the game (Game.networks): exported runs in the package.
CHAMPION_DIR = pathlib.Path(__file__).resolve().parent / "champion"


def _score_margin(s: state.State, player) -> jax.Array:
    """Points of ``player`` minus the opponent's, in the bar now."""
    player = as_player(player, cards.NUM_PLAYERS)
    scores = s.scores
    return (scores[player] - scores[1 - player]).astype(jnp.float32)


def _endgame_suite(num_positions: int = 0):
    """The yardstick: ``num_positions`` solved endgames spread over the fixed suite (0: all)."""
    return suite.yardstick(num_positions)


def _exact_values(states: state.State, budget: int = 0):
    """``(solved bool[N], value float32[N])``: exact results of the solvable positions."""
    return solver.exact_values(states, budget)


def _exact_actions(states: state.State, budget: int = 0):
    """``(solved bool[N], value float32[N], keeps bool[N, 31])``: exact results and the
    moves that keep them, of the solvable positions."""
    return solver.exact_actions(states, budget)


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
    step=core.step,
    observe=observe,
    legal_action_mask=core.legal_action_mask,
    sample_world=sample_world,
    score_margin=_score_margin,
    observation_tokens=BEASTYBAR_TOKENS,
    action_names=actions.ACTION_NAMES,
    render_state=render.render_state,
    render_action=render.render_action,
    describe_move=render.describe_move,
    points=lambda s: s.scores,
    score_margin_scale=10.0,  # bar points: margins of a few points to ~20
    endgame_suite=_endgame_suite,
    exact_values=_exact_values,
    exact_actions=_exact_actions,
    afterstate_features=afterstate.afterstate_features,
    afterstate_size=afterstate.AFTERSTATE_SIZE,
    agents=heuristics.AGENTS,
    agent_wrappers=(("solver", solver_act),),
    default_opponent="heuristic",
    table_view=view.table_view,
    move_group=view.move_group,
    exact_moves=view.exact_moves,
    exact_applies=view.exact_applies,
    networks=(("champion", CHAMPION_DIR),),
)
