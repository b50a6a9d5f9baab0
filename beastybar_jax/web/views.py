"""What the page draws: a state as JSON for one viewer, and the legal moves as things to click.

``table(game, state, viewer)`` is a function of what ``viewer`` may know and nothing
else (``viewer=None``: a spectator of a finished or watched game, who sees everything):
each game draws itself through ``Game.ui.table_view`` (Beasty Bar's opponent hand is a count
and no deck order is ever sent to a player); ``tests/test_web.py`` checks that a state and
any world ``game.sample_world`` draws for the viewer give the same JSON. Games without a
view of their own are drawn as the text of ``game.ui.render_state``.
"""

from __future__ import annotations

from typing import Any

from beastybar_jax.games import Game
from beastybar_jax.playing import move_text


def table(game: Game, state, viewer: int | None) -> dict:
    """The state as ``viewer`` may see it: the game's own view (``Game.ui.table_view``) or
    the text of ``render_state``."""
    ui = game.ui
    if ui.table_view is not None:
        return ui.table_view(state, viewer)
    text = ui.render_state(state, viewer) if ui.render_state is not None else ""
    return {"kind": "text", "text": text}


def _group(game: Game, action: int) -> str:
    """What the player clicks first for ``action`` (``Game.ui.move_group``): in Beasty Bar
    the card played (a parrot, then its target among the options), on a board the cell."""
    return game.ui.move_group(action) if game.ui.move_group is not None else f"move:{action}"


def legal_moves(game: Game, state, actions: list[int], viewer: int) -> list[dict[str, Any]]:
    """``[{"action", "label", "group"}]`` the viewer's legal moves: a label told from
    their side and the group of moves sharing a click (see ``_group``)."""
    return [{"action": a, "label": move_text(game, a, state, viewer), "group": _group(game, a)} for a in actions]
