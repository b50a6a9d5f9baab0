"""Tic-tac-toe rules and perfect play in plain Python, written independently of
``beastybar_jax.games.tictactoe`` so the tests can check the engine and its minimax solution
against them.

A position is a 9-character string in reading order: ``"X"``, ``"O"`` or ``"."``.
X moves first, so X is to move when both have as many marks.
"""

from __future__ import annotations

import functools

EMPTY_BOARD = "." * 9


def mover(board: str) -> str:
    return "X" if board.count("X") == board.count("O") else "O"


def opponent(mark: str) -> str:
    return "O" if mark == "X" else "X"


def winner(board: str) -> str | None:
    """The mark owning a full row, column or diagonal, else ``None``."""
    rows = [board[3 * r: 3 * r + 3] for r in range(3)]
    columns = ["".join(row[c] for row in rows) for c in range(3)]
    diagonals = ["".join(rows[i][i] for i in range(3)), "".join(rows[i][2 - i] for i in range(3))]
    for line in rows + columns + diagonals:
        if line in ("XXX", "OOO"):
            return line[0]
    return None


def is_over(board: str) -> bool:
    return winner(board) is not None or "." not in board


def play(board: str, cell: int) -> str:
    return board[:cell] + mover(board) + board[cell + 1:]


def moves(board: str) -> list[int]:
    return [] if is_over(board) else [c for c, mark in enumerate(board) if mark == "."]


@functools.lru_cache(maxsize=1)
def all_positions() -> tuple[str, ...]:
    """Every position reachable from the empty board, sorted."""
    seen, stack = {EMPTY_BOARD}, [EMPTY_BOARD]
    while stack:
        board = stack.pop()
        for cell in moves(board):
            child = play(board, cell)
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return tuple(sorted(seen))


def rewards(board: str) -> tuple[float, float]:
    """(X's, O's) outcome of a finished position; zeros otherwise."""
    won = winner(board)
    if won is None:
        return (0.0, 0.0)
    return (1.0, -1.0) if won == "X" else (-1.0, 1.0)


def transition(board: str, mark_to_move: str, over: bool, result, action: int):
    """``(board, mark to move, over, rewards)`` after ``action`` under the engine's
    conventions: finished games stay as they are; an illegal action (occupied cell
    or an id outside 0..8) ends the game, lost by the mover, board unchanged."""
    if over:
        return board, mark_to_move, True, result
    if not (0 <= action < 9) or board[action] != ".":
        return board, mark_to_move, True, (-1.0, 1.0) if mark_to_move == "X" else (1.0, -1.0)
    child = play(board, action)
    return child, opponent(mark_to_move), is_over(child), rewards(child)


@functools.lru_cache(maxsize=None)
def value(board: str) -> int:
    """The perfect-play outcome for the player to move (negamax); a finished
    position is lost by the player to move if it has a line, else drawn."""
    if winner(board) is not None:
        return -1
    if "." not in board:
        return 0
    return max(-value(play(board, cell)) for cell in moves(board))


def optimal_moves(board: str) -> set[int]:
    return {cell for cell in moves(board) if -value(play(board, cell)) == value(board)}


def winning_cells(board: str, mark: str) -> set[int]:
    """Empty cells where ``mark`` would complete a line now."""
    return {c for c in range(9) if board[c] == "." and winner(board[:c] + mark + board[c + 1:]) == mark}


# ----------------------------------------------------------------------------- to the engine


def to_states(boards):
    """The engine's batched ``State`` ``[N]`` of reference positions, with the
    reference's mover, game-over flag and rewards (built in numpy: one transfer)."""
    import jax.numpy as jnp
    import numpy as np

    from beastybar_jax.games.tictactoe import State

    cells = np.array([[{".": -1, "X": 0, "O": 1}[c] for c in b] for b in boards], np.int8).reshape(-1, 9)
    return State(board=jnp.asarray(cells),
                 current_player=jnp.asarray([0 if mover(b) == "X" else 1 for b in boards], jnp.int8),
                 terminated=jnp.asarray([is_over(b) for b in boards], bool),
                 rewards=jnp.asarray([rewards(b) for b in boards], jnp.float32).reshape(-1, 2))
