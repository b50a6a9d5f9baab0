"""Perfect play: an exact minimax table of every position and the ``minimax`` agent.

A board is indexed by its base-3 code ``sum_c (board[c] + 1) * 3**c`` (0 is the empty
board), so the table has ``3**9 = 19683`` rows, of which the 5,478 positions reachable
from ``init`` are marked ``reachable``. X (player 0) always moves first, so the player
to move follows from the board: X when both have as many marks, else O.

The table is solved once, on first use, in numpy by backward induction over the
number of marks (a few milliseconds), and is looked up under ``jit`` by the board's
code: one gather per game.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.tictactoe.core import EMPTY, LINES, NUM_CELLS, legal_action_mask
from beastybar_jax.tictactoe.state import State

NUM_POSITIONS = 3 ** NUM_CELLS
POWERS = 3 ** np.arange(NUM_CELLS)
EMPTY_BOARD_INDEX = 0


class MinimaxTable(NamedTuple):
    """Every board of the ``3**9`` codes, solved. Rows are board codes (``board_index``).

    Attributes:
      boards: ``int8[19683, 9]`` the board of each code (``-1`` empty, 0 X, 1 O).
      mover: ``int8[19683]`` the player to move (0 when the mark counts are equal).
      reachable: ``bool[19683]`` reachable from the empty board by legal play
        (5,478 positions; rows that are not carry meaningless values).
      terminal: ``bool[19683]`` a line of three or a full board.
      winner: ``int8[19683]`` the player owning a line, ``-1`` if none.
      value: ``int8[19683]`` the outcome under perfect play for the player to move
        (+1 / 0 / -1); at a finished game, its outcome for the player who would move.
      action_values: ``int8[19683, 9]`` the outcome for the mover of each move under
        perfect play afterwards, ``-2`` on occupied cells and at finished games.
      optimal: ``bool[19683, 9]`` the moves achieving ``value`` (none when terminal).
      paths: ``int64[19683]`` move sequences from the empty board that reach the board.
    """

    boards: np.ndarray
    mover: np.ndarray
    reachable: np.ndarray
    terminal: np.ndarray
    winner: np.ndarray
    value: np.ndarray
    action_values: np.ndarray
    optimal: np.ndarray
    paths: np.ndarray


def board_index(board) -> jax.Array:
    """``int32[...]`` the base-3 code of ``int[..., 9]`` boards (jittable)."""
    return jnp.sum((jnp.asarray(board, jnp.int32) + 1) * jnp.asarray(POWERS, jnp.int32), axis=-1)


def _children(boards, mover, rows):
    """Codes of each row's successors ``int64[R, 9]`` (0 where the cell is taken)
    and which cells are empty ``bool[R, 9]``."""
    empty = boards[rows] == EMPTY
    child = rows[:, None] + (mover[rows, None].astype(np.int64) + 1) * POWERS[None, :]
    return np.where(empty, child, 0), empty


@functools.lru_cache(maxsize=None)
def minimax_table() -> MinimaxTable:
    """The solved table (computed once per process; the arrays are read-only)."""
    codes = np.arange(NUM_POSITIONS)
    boards = ((codes[:, None] // POWERS[None, :]) % 3 - 1).astype(np.int8)  # [N, 9]
    marks = (boards != EMPTY).sum(axis=1)
    mover = np.where((boards == 0).sum(axis=1) == (boards == 1).sum(axis=1), 0, 1).astype(np.int8)
    lines = boards[:, LINES]  # [N, 8, 3]
    x_line = np.all(lines == 0, axis=2).any(axis=1)
    o_line = np.all(lines == 1, axis=2).any(axis=1)
    winner = np.where(x_line, 0, np.where(o_line, 1, -1)).astype(np.int8)
    terminal = x_line | o_line | (marks == NUM_CELLS)

    # Forward: which boards legal play reaches, and by how many move sequences.
    reachable = np.zeros(NUM_POSITIONS, bool)
    paths = np.zeros(NUM_POSITIONS, np.int64)
    reachable[EMPTY_BOARD_INDEX], paths[EMPTY_BOARD_INDEX] = True, 1
    for count in range(NUM_CELLS):
        rows = np.flatnonzero((marks == count) & reachable & ~terminal)
        child, empty = _children(boards, mover, rows)
        reachable[child[empty]] = True
        np.add.at(paths, child[empty], np.broadcast_to(paths[rows, None], child.shape)[empty])

    # Backward: a finished game is lost by the player to move if the last mover made a
    # line, else drawn; otherwise the mover takes the best of the negated children.
    value = np.where(terminal, np.where(winner >= 0, -1, 0), 0).astype(np.int8)
    action_values = np.full((NUM_POSITIONS, NUM_CELLS), -2, np.int8)
    for count in range(NUM_CELLS - 1, -1, -1):
        rows = np.flatnonzero((marks == count) & ~terminal)
        child, empty = _children(boards, mover, rows)
        q = np.where(empty, -value[child], -2).astype(np.int8)
        action_values[rows] = q
        value[rows] = q.max(axis=1)
    optimal = (action_values == value[:, None]) & (action_values > -2)

    table = MinimaxTable(boards=boards, mover=mover, reachable=reachable, terminal=terminal,
                         winner=winner, value=value, action_values=action_values,
                         optimal=optimal, paths=paths)
    for array in table:
        array.setflags(write=False)
    return table


def reachable_states() -> State:
    """All 5,478 reachable positions as one batched :class:`State` ``[5478]``, in
    board-code order (terminated ones with their rewards)."""
    t = minimax_table()
    rows = np.flatnonzero(t.reachable)
    players = np.arange(2)[None, :]
    rewards = np.where(t.winner[rows, None] < 0, 0.0, np.where(players == t.winner[rows, None], 1.0, -1.0))
    return State(board=jnp.asarray(t.boards[rows]), current_player=jnp.asarray(t.mover[rows]),
                 terminated=jnp.asarray(t.terminal[rows]), rewards=jnp.asarray(rewards, jnp.float32))


def minimax_value(state: State) -> jax.Array:
    """``float32[]`` the perfect-play outcome for ``state``'s player to move (jittable)."""
    return jnp.asarray(minimax_table().value, jnp.float32)[board_index(state.board)]


def optimal_actions(state: State) -> jax.Array:
    """``bool[9]`` the moves that keep the perfect-play outcome (jittable); none once over."""
    return jnp.asarray(minimax_table().optimal)[board_index(state.board)] & legal_action_mask(state)


def minimax_act(state: State, key: jax.Array) -> jax.Array:
    """``int32[]`` a uniformly random optimal move (0 once the game is over): the act
    function of the ``minimax`` agent (``beastybar_jax.agents.perfect``)."""
    optimal = optimal_actions(state)
    choice = jax.random.categorical(key, jnp.where(optimal, 0.0, -jnp.inf))
    return jnp.where(jnp.any(optimal), choice, 0).astype(jnp.int32)
