"""The rules: ``init``, ``legal_action_mask`` and ``step``.

Action ``a`` (0..8) puts the mover's mark on cell ``a = 3 * row + column`` (row 0 at
the top). Player 0 plays X and always moves first; a line of three ends the game
with +1 for its owner and -1 for the other, a full board without a line is a draw.

All functions act on a single game and are pure, jittable and vmappable; batch
them with ``jax.vmap``.
"""

import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.games import as_action
from beastybar_jax.tictactoe.state import State

NUM_CELLS = 9
NUM_ACTIONS = NUM_CELLS
NUM_PLAYERS = 2
EMPTY = -1
# The eight lines of three: rows, columns, diagonals.
LINES = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8],
                  [0, 3, 6], [1, 4, 7], [2, 5, 8],
                  [0, 4, 8], [2, 4, 6]])
_IN_LINE = np.zeros((len(LINES), NUM_CELLS), bool)  # [8, 9] cell c is on line l
_IN_LINE[np.arange(len(LINES))[:, None], LINES] = True
_CELLS = jnp.arange(NUM_CELLS)
_PLAYERS = jnp.arange(NUM_PLAYERS)


def init(key: jax.Array) -> State:
    """A new game: an empty board, player 0 (X) to move.

    ``key`` is unused (tic-tac-toe has no chance); it is taken so that every game
    shares one ``init(key)`` signature. Seats alternate through the arena's
    duplicate format, which replays each game with the seats swapped.
    """
    del key
    return State(
        board=jnp.full(NUM_CELLS, EMPTY, jnp.int8),
        current_player=jnp.zeros((), jnp.int8),
        terminated=jnp.zeros((), bool),
        rewards=jnp.zeros(NUM_PLAYERS, jnp.float32),
    )


def has_line(board: jax.Array, player) -> jax.Array:
    """``bool[]`` ``player`` owns all three cells of some line of ``board`` (``[9]``)."""
    owned = board == player  # [9]
    return jnp.any(jnp.all(owned[None, :] | ~_IN_LINE, axis=1))


def legal_action_mask(state: State) -> jax.Array:
    """``bool[9]`` the empty cells; all False once terminated."""
    return (state.board == EMPTY) & ~state.terminated


def _play(state: State, action) -> State:
    """One legal move: mark the cell, then check for a line and a full board."""
    mover = state.current_player
    board = jnp.where(_CELLS == action, mover, state.board).astype(jnp.int8)
    won = has_line(board, mover)
    terminated = won | jnp.all(board != EMPTY)
    rewards = jnp.where(won, jnp.where(_PLAYERS == mover, 1.0, -1.0), 0.0)
    return State(
        board=board,
        current_player=(1 - mover).astype(jnp.int8),
        terminated=terminated,
        rewards=rewards.astype(jnp.float32),
    )


def step(state: State, action) -> State:
    """Play ``action`` (an int cell id) for the player to move.

    A finished game is returned unchanged. An illegal action (an occupied cell or
    an id outside 0..8) ends the game with the mover losing (-1, opponent +1) and
    leaves the board as it was; an id of any integer width counts by its value (an
    ``int64`` 2**32 + 8 is out of range, not 8). A non-integer action raises
    ``GameInputError``, at trace time under jit.
    """
    action = as_action(action, NUM_ACTIONS)  # -1 when out of range
    legal = jnp.any(legal_action_mask(state) & (_CELLS == action))  # False when out of range
    played = _play(state, action)
    mover_loses = jnp.where(_PLAYERS == state.current_player, -1.0, 1.0).astype(jnp.float32)
    forfeited = state.replace(terminated=jnp.ones((), bool), rewards=mover_loses)
    next_state = jax.tree.map(lambda p, f: jnp.where(legal, p, f), played, forfeited)
    return jax.tree.map(lambda old, new: jnp.where(state.terminated, old, new), state, next_state)
