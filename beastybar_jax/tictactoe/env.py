"""Tic-tac-toe as a :class:`~beastybar_jax.games.Game`: the bundle search and training take."""

import jax
import jax.numpy as jnp

from beastybar_jax.games import Game, TokenLayout, as_player
from beastybar_jax.tictactoe import core, observe, render
from beastybar_jax.tictactoe.state import State


def score_margin(state: State, player) -> jax.Array:
    """``float32[]`` the outcome for ``player`` (+1/0/-1 once over, 0 before): the
    game has no points, so the margin is the result itself."""
    player = as_player(player, core.NUM_PLAYERS)
    return jnp.where(player == 0, state.rewards[0], state.rewards[1]).astype(jnp.float32)


# The nine cells are the tokens; the rest of the observation (the to-move flag)
# becomes the attention torso's table token. No cell token is all zeros.
TICTACTOE_TOKENS = TokenLayout(start=0, num_tokens=core.NUM_CELLS, features=observe.CELL_FEATURES)

TICTACTOE = Game(
    name="tictactoe",
    num_actions=core.NUM_ACTIONS,
    observation_size=observe.OBSERVATION_SIZE,
    num_players=core.NUM_PLAYERS,
    max_game_length=core.NUM_CELLS,  # one mark per turn
    init=core.init,
    step=core.step,
    observe=observe.observe,
    legal_action_mask=core.legal_action_mask,
    sample_world=observe.sample_world,
    score_margin=score_margin,
    observation_tokens=TICTACTOE_TOKENS,
    action_names=render.ACTION_NAMES,
    render_state=render.render_state,
    render_action=render.render_action,
)
