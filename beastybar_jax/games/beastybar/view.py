"""Beasty Bar for a person's eyes: the table as JSON for one viewer, what a click picks,
and every move's exact result where the endgame can be solved (the web app's hooks,
``Game.ui.table_view``, ``Game.ui.move_group``, ``Game.solver.exact_moves``).

``table_view(state, viewer)`` is a function of what ``viewer`` may know and nothing else
(``viewer=None``: a spectator of a finished game, who sees everything): the opponent's
hand is a count and no deck order is ever given to a player. ``tests/test_web.py`` checks
that a state and any world ``sample_world`` draws for the viewer give the same JSON.
"""

from __future__ import annotations

import jax
import numpy as np

from beastybar_jax.games.beastybar import actions, cards
from beastybar_jax.games.beastybar.endgame import SolverConfig, is_solvable, solve_position
from beastybar_jax.games.beastybar.observe import sample_world


def _card(card: int) -> dict:
    owner, species = divmod(int(card), cards.NUM_SPECIES)
    return {"owner": owner, "species": int(species), "name": cards.SPECIES_NAMES[species],
            "strength": int(cards.STRENGTH[species]), "points": int(cards.POINTS[species])}


def _cards(mask, owner: int) -> list[dict]:
    return [_card(owner * cards.NUM_SPECIES + s) for s in np.flatnonzero(np.asarray(mask))]


def table_view(state, viewer: int | None) -> dict:
    """The queue front first, and per player: bar, THAT'S IT pile, points, the hand
    (``None`` for a hand ``viewer`` may not see: only ``hand_count``), the deck size
    (and, for a spectator only, its order)."""
    queue = [_card(c) for c in np.asarray(state.queue) if c >= 0]
    scores = np.asarray(state.scores)
    players = []
    for p in range(cards.NUM_PLAYERS):
        visible = viewer is None or viewer == p
        deck = [int(s) for s in np.asarray(state.deck[p]) if s >= 0]
        entry = {"seat": p, "points": int(scores[p]), "bar": _cards(state.bar[p], p),
                 "thats_it": _cards(state.thats_it[p], p), "hand_count": int(np.asarray(state.hand[p]).sum()),
                 "hand": _cards(state.hand[p], p) if visible else None, "deck_count": len(deck)}
        if viewer is None:
            entry["deck"] = [_card(p * cards.NUM_SPECIES + s) for s in deck]
        players.append(entry)
    return {"kind": "beastybar", "queue": queue, "players": players}


def move_group(action: int) -> str:
    """What the player clicks first for ``action``: the card played (a parrot, then its
    target among the options)."""
    return f"card:{int(actions.ACTION_CARD_SPECIES[action])}"


_EXACT_CONFIG = SolverConfig(mode="margins")


def exact_moves(state, key: jax.Array) -> dict:
    """Exact result and margin of every move of a solvable position (jittable), solved on
    a world drawn for the mover: in a solvable position nothing is hidden, so that world
    is the position itself. ``solved`` is False where the solver does not apply."""
    world = sample_world(state, state.current_player, key)
    solution = solve_position(world, _EXACT_CONFIG)
    return {"solved": solution.solved & is_solvable(state), "result": solution.result,
            "margin": solution.margin, "action_result": solution.action_result,
            "action_margin": solution.action_margin, "action_exact": solution.action_exact}


def exact_applies(state) -> bool:
    """Whether :func:`exact_moves` solves ``state`` (from deck sizes, which both players see)."""
    return bool(is_solvable(state))
