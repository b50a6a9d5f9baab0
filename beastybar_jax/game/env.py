"""Beasty Bar as a :class:`~beastybar_jax.games.Game`: the bundle search and training take."""

import importlib

import jax
import jax.numpy as jnp

from beastybar_jax.game import actions, afterstate, cards, core, observe, render, state
from beastybar_jax.games import Game, TokenLayout, as_player


def _score_margin(s: state.State, player) -> jax.Array:
    """Points of ``player`` minus the opponent's, in the bar now."""
    player = as_player(player, cards.NUM_PLAYERS)
    scores = s.scores
    return (scores[player] - scores[1 - player]).astype(jnp.float32)


def _endgame(module: str):
    # The endgame solver builds on this package (it steps the engine), so the game
    # reaches it by name, on first use, like the registry of games reaches a game.
    return importlib.import_module(f"beastybar_jax.endgame.{module}")


def _endgame_suite(num_positions: int = 0):
    """The yardstick: ``num_positions`` solved endgames spread over the fixed suite (0: all)."""
    return _endgame("suite").yardstick(num_positions)


def _exact_values(states: state.State, budget: int = 0):
    """``(solved bool[N], value float32[N])``: exact results of the solvable positions."""
    return _endgame("solver").exact_values(states, budget)


def _exact_actions(states: state.State, budget: int = 0):
    """``(solved bool[N], value float32[N], keeps bool[N, 31])``: exact results and the
    moves that keep them, of the solvable positions."""
    return _endgame("solver").exact_actions(states, budget)


_QUEUE_START, _QUEUE_END = observe.OBSERVATION_LAYOUT["queue"]
BEASTYBAR_TOKENS = TokenLayout(_QUEUE_START, observe.QUEUE_TOKENS, observe.QUEUE_FEATURES)
assert BEASTYBAR_TOKENS.num_tokens * BEASTYBAR_TOKENS.features == _QUEUE_END - _QUEUE_START

BEASTYBAR = Game(
    name="beastybar",
    num_actions=actions.NUM_ACTIONS,
    observation_size=observe.OBSERVATION_SIZE,
    num_players=cards.NUM_PLAYERS,
    max_game_length=cards.NUM_CARDS,  # one card per turn
    init=core.init,
    step=core.step,
    observe=observe.observe,
    legal_action_mask=core.legal_action_mask,
    sample_world=observe.sample_world,
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
)
