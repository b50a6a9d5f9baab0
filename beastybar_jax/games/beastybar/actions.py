"""The action space: 31 actions named by species, never by hand slot.

Each player owns exactly one card per species, so "play the lion" names a move
without reference to hand order. Parameters are queue places counted *before*
the card is played (0 = front) or hop lengths, as in the rules.

=====  ===============================================================
ids    action
=====  ===============================================================
0      skunk
1-4    parrot, sends queue place t = 0..3 to THAT'S IT
5-7    kangaroo, hop h = 0..2 (0 only into an empty queue)
8      monkey
9-23   chameleon copying a species in the queue: skunk (9); parrot on
       place 0..3 (10-13); kangaroo hop 1..2 (14-15); monkey (16);
       seal (17); zebra (18); giraffe (19); snake (20); crocodile (21);
       hippo (22); lion (23)
24-30  seal, zebra, giraffe, snake, crocodile, hippo, lion
=====  ===============================================================

A chameleon copies a *species*, not a queue place: copying either of two zebras
has the same effect, so both trace moves map to one id (see ``from_notation``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from beastybar_jax.games.beastybar import cards as C


def _build_table():
    rows = []  # (card species, acting species, parameter)
    rows.append((C.SKUNK, C.SKUNK, 0))
    rows += [(C.PARROT, C.PARROT, t) for t in range(4)]
    rows += [(C.KANGAROO, C.KANGAROO, h) for h in range(3)]
    rows.append((C.MONKEY, C.MONKEY, 0))
    rows.append((C.CHAMELEON, C.SKUNK, 0))
    rows += [(C.CHAMELEON, C.PARROT, t) for t in range(4)]
    rows += [(C.CHAMELEON, C.KANGAROO, h) for h in (1, 2)]
    for s in (C.MONKEY, C.SEAL, C.ZEBRA, C.GIRAFFE, C.SNAKE, C.CROCODILE, C.HIPPO, C.LION):
        rows.append((C.CHAMELEON, s, 0))
    for s in (C.SEAL, C.ZEBRA, C.GIRAFFE, C.SNAKE, C.CROCODILE, C.HIPPO, C.LION):
        rows.append((s, s, 0))
    table = np.array(rows, dtype=np.int32)
    return table[:, 0], table[:, 1], table[:, 2]


ACTION_CARD_SPECIES, ACTION_ACTING_SPECIES, ACTION_PARAM = _build_table()
NUM_ACTIONS = len(ACTION_CARD_SPECIES)
ACTION_CARD_SPECIES.setflags(write=False)
ACTION_ACTING_SPECIES.setflags(write=False)
ACTION_PARAM.setflags(write=False)


def _describe(action: int) -> str:
    card = C.SPECIES_NAMES[ACTION_CARD_SPECIES[action]]
    acting = ACTION_ACTING_SPECIES[action]
    param = int(ACTION_PARAM[action])
    if card == "chameleon":
        text = f"chameleon as {C.SPECIES_NAMES[acting]}"
    else:
        text = card
    if acting == C.PARROT:
        text += f" on queue place {param}"
    elif acting == C.KANGAROO:
        text += f" hop {param}"
    return text


ACTION_NAMES = tuple(_describe(a) for a in range(NUM_ACTIONS))


def action_name(action: int) -> str:
    """A readable name for an action id, e.g. ``"parrot on queue place 2"``."""
    action = int(action)
    if not 0 <= action < NUM_ACTIONS:
        raise ValueError(f"action id {action} out of range 0..{NUM_ACTIONS - 1}")
    return ACTION_NAMES[action]


def action_id(card: int, acting: int | None = None, param: int = 0) -> int:
    """The id of the action that plays ``card`` acting as ``acting`` with ``param``."""
    acting = card if acting is None else acting
    hits = np.flatnonzero(
        (ACTION_CARD_SPECIES == card) & (ACTION_ACTING_SPECIES == acting) & (ACTION_PARAM == param)
    )
    if hits.size != 1:
        raise ValueError(
            f"no action plays {C.SPECIES_NAMES[card]} as {C.SPECIES_NAMES[acting]} with parameter {param}"
        )
    return int(hits[0])


def from_notation(move: Sequence, queue_species: Sequence[int]) -> int:
    """Action id of a trace move ``[species, params]``.

    Args:
      move: ``[species_name, [params...]]`` as in the conformance traces.
      queue_species: species ids of the queue front first, before the move.
    """
    name, params = move[0], list(move[1])
    card = C.species_id(name)
    if card == C.CHAMELEON:
        if not params or params[0] >= len(queue_species):
            raise ValueError(f"chameleon move {move!r} needs a target in the queue")
        acting = int(queue_species[params[0]])
        extra = params[1] if len(params) > 1 else 0
        return action_id(card, acting, extra)
    if card in (C.PARROT, C.KANGAROO):
        return action_id(card, card, params[0] if params else 0)
    if params:
        raise ValueError(f"{name} takes no parameters, got {move!r}")
    return action_id(card)


def to_notation(action: int, queue_species: Sequence[int]) -> list:
    """Trace notation ``[species, params]`` of an action id.

    Args:
      action: an action id.
      queue_species: species ids of the queue front first, before the move. A
        chameleon copy names the first queue place holding the copied species.
    """
    action = int(action)
    action_name(action)  # range check
    card = int(ACTION_CARD_SPECIES[action])
    acting = int(ACTION_ACTING_SPECIES[action])
    param = int(ACTION_PARAM[action])
    name = C.SPECIES_NAMES[card]
    if card == C.CHAMELEON:
        places = [i for i, s in enumerate(queue_species) if int(s) == acting]
        if not places:
            raise ValueError(f"{action_name(action)!r} needs a {C.SPECIES_NAMES[acting]} in the queue")
        params = [places[0]]
        if acting in (C.PARROT, C.KANGAROO):
            params.append(param)
        return [name, params]
    if card == C.PARROT:
        return [name, [param]]
    if card == C.KANGAROO:
        return [name, [param] if param else []]
    return [name, []]
