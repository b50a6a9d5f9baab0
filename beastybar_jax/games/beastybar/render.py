"""Text rendering of states and moves for the CLI, notebooks and logs."""

from __future__ import annotations

import numpy as np

from beastybar_jax.games.beastybar import actions as A
from beastybar_jax.games.beastybar import cards as C


def _card(card: int, viewer: int | None = None) -> str:
    owner, species = divmod(int(card), C.NUM_SPECIES)
    who = f"P{owner}" if viewer is None else ("you" if owner == viewer else "opp")
    return f"{C.SPECIES_NAMES[species]}({who})"


def _species_list(mask) -> str:
    names = [C.SPECIES_NAMES[s] for s in np.flatnonzero(np.asarray(mask))]
    return ", ".join(names) if names else "-"


def render_state(state, viewer: int | None = None) -> str:
    """A multi-line description of one (unbatched) state.

    With ``viewer`` set, the opponent's hand and both deck orders are hidden and
    owners read "you"/"opp"; with ``viewer=None`` everything is shown.
    """
    s = {k: np.asarray(v) for k, v in state.items()}
    queue = [c for c in s["queue"] if c >= 0]
    scores = (s["bar"] * C.POINTS).sum(-1)
    deck_sizes = (s["deck"] >= 0).sum(-1)
    mover = int(s["current_player"])
    lines = []
    status = "game over" if s["terminated"] else f"player {mover} to move"
    lines.append(f"turn {int(s['turn'])}, {status}; score P0 {scores[0]} - P1 {scores[1]}")
    lines.append("queue (front first): " + (" ".join(_card(c, viewer) for c in queue) or "empty"))
    for title, key in (("bar", "bar"), ("THAT'S IT", "thats_it")):
        lines.append(f"{title}: P0 [{_species_list(s[key][0])}]  P1 [{_species_list(s[key][1])}]")
    for p in range(C.NUM_PLAYERS):
        if viewer is None or p == viewer:
            hand = _species_list(s["hand"][p])
        else:
            hand = _cards(int(s['hand'][p].sum()), "hidden card")
        lines.append(f"P{p} hand: {hand}; deck: {_cards(int(deck_sizes[p]), 'card')}")
    if s["terminated"]:
        r = s["rewards"]
        result = "draw" if r[0] == 0 else f"P{0 if r[0] > 0 else 1} wins"
        lines.append(f"result: {result}")
    return "\n".join(lines)


def render_action(action: int, state=None, viewer: int | None = None) -> str:
    """The name of ``action``; with the state before it, the parrot's target is named too:
    ``"parrot on queue place 1 (lion of P1)"``, or from ``viewer``'s side
    ``"parrot on queue place 1 (the lion (yours))"``."""
    text = A.action_name(action)
    if state is None:
        return text
    queue = [int(c) for c in np.asarray(state["queue"]) if c >= 0]
    acting = int(A.ACTION_ACTING_SPECIES[action])
    place = int(A.ACTION_PARAM[action])
    if acting == C.PARROT and place < len(queue):
        text += f" ({_card(queue[place])})" if viewer is None else f" (the {_owned(queue[place], viewer)})"
    return text


def _owned(card: int, viewer: int | None) -> str:
    owner, species = divmod(int(card), C.NUM_SPECIES)
    if viewer is None:
        return f"{C.SPECIES_NAMES[species]} (P{owner}'s)"
    return f"{C.SPECIES_NAMES[species]} ({'yours' if owner == viewer else 'opponent' + chr(39) + 's'})"


def _cards(count: int, noun: str) -> str:
    """``"1 hidden card"``, ``"3 hidden cards"``, ``"0 cards"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _new_cards(before, after, viewer: int) -> list[str]:
    """Cards in ``after`` (bool[2, 12]) but not ``before``, named from ``viewer``'s side."""
    new = np.asarray(after) & ~np.asarray(before)
    return [_owned(p * C.NUM_SPECIES + s, viewer) for p, s in zip(*np.nonzero(new))]


def describe_move(before, after, action: int, viewer: int | None) -> str:
    """What ``action`` did, told from ``viewer``'s side: who played what, the cards that
    entered the bar or went to THAT'S IT, the queue after it, and (for the viewer's own
    move) the card they drew. ``viewer=None``: a spectator's account ("P0 plays ...",
    every drawn card told)."""
    mover = int(before["current_player"])
    who = f"P{mover} plays" if viewer is None else ("You play" if mover == viewer else "Opponent plays")
    lines = [f"{who} {render_action(action, before, viewer)}."]
    entered = _new_cards(before["bar"], after["bar"], viewer)
    gone = _new_cards(before["thats_it"], after["thats_it"], viewer)
    if entered:
        lines.append("  Entered the bar: " + ", ".join(entered) + ".")
    if gone:
        lines.append("  Sent to THAT'S IT: " + ", ".join(gone) + ".")
    queue = [int(c) for c in np.asarray(after["queue"]) if c >= 0]
    lines.append("  Queue now (front first): " + (", ".join(_owned(c, viewer) for c in queue) or "empty") + ".")
    if viewer is None or mover == viewer:
        drawn = np.asarray(after["hand"][mover]) & ~np.asarray(before["hand"][mover])
        for species in np.flatnonzero(drawn):
            lines.append(f"  {'You draw' if viewer is not None else f'P{mover} draws'} the {C.SPECIES_NAMES[species]}.")
    return "\n".join(lines)
