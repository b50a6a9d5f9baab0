"""What the page draws: a state as JSON for one viewer, and the legal moves as things to click.

``table(game, state, viewer)`` is a function of what ``viewer`` may know and nothing
else (``viewer=None``: a spectator of a finished or watched game, who sees everything):
in Beasty Bar the opponent's hand is a count and no deck order is ever sent to a player.
``tests/test_web.py`` checks that a state and any world ``game.sample_world`` draws for
the viewer give the same JSON. Games without a view of their own are drawn as the text
of ``game.render_state``; a board game only needs its cells.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from beastybar_jax.game import actions as bb_actions
from beastybar_jax.game import cards as bb_cards
from beastybar_jax.games import Game
from beastybar_jax.playing import move_text
from beastybar_jax.tictactoe.render import MARKS as TTT_MARKS


def _card(card: int) -> dict:
    owner, species = divmod(int(card), bb_cards.NUM_SPECIES)
    return {"owner": owner, "species": int(species), "name": bb_cards.SPECIES_NAMES[species],
            "strength": int(bb_cards.STRENGTH[species]), "points": int(bb_cards.POINTS[species])}


def _cards(mask, owner: int) -> list[dict]:
    return [_card(owner * bb_cards.NUM_SPECIES + s) for s in np.flatnonzero(np.asarray(mask))]


def beastybar_table(state, viewer: int | None) -> dict:
    """The queue front first, and per player: bar, THAT'S IT pile, points, the hand
    (``None`` for a hand ``viewer`` may not see: only ``hand_count``), the deck size
    (and, for a spectator only, its order)."""
    queue = [_card(c) for c in np.asarray(state.queue) if c >= 0]
    scores = np.asarray(state.scores)
    players = []
    for p in range(bb_cards.NUM_PLAYERS):
        visible = viewer is None or viewer == p
        deck = [int(s) for s in np.asarray(state.deck[p]) if s >= 0]
        entry = {"seat": p, "points": int(scores[p]), "bar": _cards(state.bar[p], p),
                 "thats_it": _cards(state.thats_it[p], p), "hand_count": int(np.asarray(state.hand[p]).sum()),
                 "hand": _cards(state.hand[p], p) if visible else None, "deck_count": len(deck)}
        if viewer is None:
            entry["deck"] = [_card(p * bb_cards.NUM_SPECIES + s) for s in deck]
        players.append(entry)
    return {"kind": "beastybar", "queue": queue, "players": players}


def board_table(state, viewer: int | None) -> dict:
    """Tic-tac-toe's cells in reading order: ``{"mark": "X"|"O"|None, "owner": seat|None}``."""
    del viewer  # nothing is hidden
    cells = [{"mark": TTT_MARKS[c] if c >= 0 else None, "owner": int(c) if c >= 0 else None}
             for c in np.asarray(state.board)]
    return {"kind": "board", "rows": 3, "cols": 3, "cells": cells, "marks": list(TTT_MARKS)}


_TABLES = {"beastybar": beastybar_table, "tictactoe": board_table}


def table(game: Game, state, viewer: int | None) -> dict:
    """The state as ``viewer`` may see it, in the game's own view or as text."""
    if game.name in _TABLES:
        return _TABLES[game.name](state, viewer)
    text = game.render_state(state, viewer) if game.render_state is not None else ""
    return {"kind": "text", "text": text}


def _group(game: Game, action: int) -> str:
    """What the player clicks first for ``action``: in Beasty Bar the card played (a
    parrot, then its target among the options), on a board the cell."""
    if game.name == "beastybar":
        return f"card:{int(bb_actions.ACTION_CARD_SPECIES[action])}"
    if game.name == "tictactoe":
        return f"cell:{action}"
    return f"move:{action}"


def legal_moves(game: Game, state, actions: list[int], viewer: int) -> list[dict[str, Any]]:
    """``[{"action", "label", "group"}]`` the viewer's legal moves: a label told from
    their side and the group of moves sharing a click (see ``_group``)."""
    return [{"action": a, "label": move_text(game, a, state, viewer), "group": _group(game, a)} for a in actions]
