"""What a player sees: ``observe`` (everything, from the observer's side) and
``sample_world`` (the identity: nothing is hidden)."""

import jax
import jax.numpy as jnp

from beastybar_jax.games import as_player
from beastybar_jax.tictactoe.core import EMPTY, NUM_CELLS, NUM_PLAYERS
from beastybar_jax.tictactoe.state import State

CELL_FEATURES = 3  # mine, the opponent's, empty
_CELLS_END = NUM_CELLS * CELL_FEATURES

# Layout of the flat observation vector, relative to the observing player.
OBSERVATION_LAYOUT = {
    "cells": (0, _CELLS_END),                  # [9, 3] reading order: mine, theirs, empty
    "to_move": (_CELLS_END, _CELLS_END + 1),   # 1.0 when the observer is to move
}
OBSERVATION_SIZE = _CELLS_END + 1  # 28


def observe(state: State, player) -> jax.Array:
    """``float32[28]`` the board from ``player``'s side, laid out as ``OBSERVATION_LAYOUT``.

    Marks are "mine" / "the opponent's", never X / O: X always moves first, so
    who plays X follows from the mark counts and the ``to_move`` flag. ``player``
    must be 0 or 1: a concrete other value raises ``GameInputError``; a traced one
    is not checked.
    """
    player = as_player(player, NUM_PLAYERS)
    board = state.board.astype(jnp.int32)
    cells = jnp.stack([board == player, (board != EMPTY) & (board != player), board == EMPTY], axis=1)
    to_move = (state.current_player == player)[None]
    return jnp.concatenate([cells.reshape(-1), to_move]).astype(jnp.float32)


def split_observation(observation: jax.Array) -> dict:
    """Named views of a ``[..., 28]`` observation; ``cells`` is ``[..., 9, 3]``."""
    parts = {name: observation[..., a:b] for name, (a, b) in OBSERVATION_LAYOUT.items()}
    parts["cells"] = parts["cells"].reshape(*observation.shape[:-1], NUM_CELLS, CELL_FEATURES)
    return parts


def sample_world(state: State, player, key: jax.Array) -> State:
    """``state`` itself: tic-tac-toe has perfect information, so the only world
    consistent with what ``player`` knows is the true one. ``player`` is checked as
    in :func:`observe`."""
    as_player(player, NUM_PLAYERS)
    del key
    return state
