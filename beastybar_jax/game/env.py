"""Beasty Bar as a :class:`~beastybar_jax.games.Game`: the bundle search and training take."""

import jax
import jax.numpy as jnp

from beastybar_jax.game import actions, cards, core, observe, render, state
from beastybar_jax.games import Game, TokenLayout, as_player


def _score_margin(s: state.State, player) -> jax.Array:
    """Points of ``player`` minus the opponent's, in the bar now."""
    player = as_player(player, cards.NUM_PLAYERS)
    scores = s.scores
    return (scores[player] - scores[1 - player]).astype(jnp.float32)


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
)
