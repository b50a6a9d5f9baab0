"""Action names and text renderers built from a few primitives, for any game's
``action_names``, ``render_state`` and ``render_action`` (play.py, logs, notebooks)."""

from __future__ import annotations

from typing import Sequence


def grid_action_names(rows: int, columns: int) -> tuple[str, ...]:
    """Names of the cells of a board read row by row: column letter, row number from 1
    (``a1 b1 c1 a2 ...``), index = action id."""
    return tuple(f"{'abcdefghijklmnopqrstuvwxyz'[a % columns]}{a // columns + 1}" for a in range(rows * columns))


def action_name(names: Sequence[str], action, game: str) -> str:
    """``names[action]``; a ``ValueError`` naming the range outside it."""
    action = int(action)
    if not 0 <= action < len(names):
        raise ValueError(f"{game} actions are 0..{len(names) - 1}, got {action}")
    return names[action]


def action_id(names: Sequence[str], name: str, what: str, example: str) -> int:
    """The action called ``name`` (case-insensitive); a ``ValueError`` with an example otherwise."""
    key = name.strip().lower()
    lowered = [n.lower() for n in names]
    if key not in lowered:
        raise ValueError(f"unknown {what} {name!r}; {example}")
    return lowered.index(key)


def player_label(player: int, marks: Sequence[str], viewer: int | None) -> str:
    """``"X (player 0)"``, with ``" (you)"`` when ``viewer`` is that player."""
    return f"{marks[player]} (player {player})" + (" (you)" if viewer == player else "")


def outcome_line(rewards, marks: Sequence[str], viewer: int | None) -> str:
    """``"game over: draw"`` or ``"game over: <winner> wins"`` for final ``rewards``."""
    winner = max(range(len(rewards)), key=lambda p: rewards[p])
    if rewards[winner] == min(rewards):
        return "game over: draw"
    return f"game over: {player_label(winner, marks, viewer)} wins"


def render_grid(cells: Sequence[int], columns: int, marks: Sequence[str], empty: str = ".") -> list[str]:
    """A board's lines under a header of column letters: ``cells`` read row by row hold a
    player id (its mark) or a negative number (``empty``)."""
    lines = ["   " + " ".join("abcdefghijklmnopqrstuvwxyz"[:columns])]
    for row in range(len(cells) // columns):
        line = cells[columns * row: columns * (row + 1)]
        lines.append(f"{row + 1}  " + " ".join(marks[c] if c >= 0 else empty for c in line))
    return lines
