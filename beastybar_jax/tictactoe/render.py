"""Action names and text rendering of states and moves for the CLI, notebooks and logs.

Cells are named by column letter and row number, rows counted from the top::

       a b c
    1  . . .      a1 b1 c1   = actions 0 1 2
    2  . . .      a2 b2 c2   = actions 3 4 5
    3  . . .      a3 b3 c3   = actions 6 7 8
"""

from __future__ import annotations

import numpy as np

from beastybar_jax.tictactoe.core import NUM_ACTIONS

MARKS = ("X", "O")  # player 0 plays X, player 1 plays O
ACTION_NAMES = tuple(f"{'abc'[a % 3]}{a // 3 + 1}" for a in range(NUM_ACTIONS))


def action_name(action: int) -> str:
    """``"b2"`` for action 4; a ``ValueError`` outside 0..8."""
    action = int(action)
    if not 0 <= action < NUM_ACTIONS:
        raise ValueError(f"tic-tac-toe actions are 0..{NUM_ACTIONS - 1}, got {action}")
    return ACTION_NAMES[action]


def action_id(name: str) -> int:
    """The action named ``name`` (``"b2"`` -> 4), case-insensitive."""
    key = name.strip().lower()
    if key not in ACTION_NAMES:
        raise ValueError(f"unknown tic-tac-toe cell {name!r}; write a column a-c and a row 1-3, e.g. b2")
    return ACTION_NAMES.index(key)


def _player(player: int, viewer: int | None) -> str:
    text = f"{MARKS[player]} (player {player})"
    return text + (" (you)" if viewer == player else "")


def render_state(state, viewer: int | None = None) -> str:
    """A multi-line picture of one (unbatched) state.

    Nothing is hidden; with ``viewer`` set, that player's mark is labelled "you".
    """
    board = np.asarray(state["board"])
    mover = int(state["current_player"])
    if bool(state["terminated"]):
        rewards = np.asarray(state["rewards"])
        winner = int(np.argmax(rewards))
        status = "game over: draw" if rewards[0] == 0 else f"game over: {_player(winner, viewer)} wins"
    else:
        status = f"{_player(mover, viewer)} to move"
    lines = [status, "   a b c"]
    for row in range(3):
        cells = [MARKS[c] if c >= 0 else "." for c in board[3 * row: 3 * row + 3]]
        lines.append(f"{row + 1}  " + " ".join(cells))
    return "\n".join(lines)


def render_action(action: int, state=None, viewer: int | None = None) -> str:
    """The cell's name (``"b2"``); with the state before the move, the mark too (``"X b2"``).
    ``viewer`` changes nothing: nothing is hidden."""
    name = action_name(action)
    if state is None:
        return name
    return f"{MARKS[int(state['current_player'])]} {name}"
