"""Species, strengths and points of the 2-player Beasty Bar deck.

A card is identified by ``card = owner * NUM_SPECIES + species`` (0..23); ``-1``
marks an empty slot. Species ids are ordered by strength: ``strength = species + 1``.
"""

import numpy as np

SPECIES_NAMES = (
    "skunk", "parrot", "kangaroo", "monkey", "chameleon", "seal",
    "zebra", "giraffe", "snake", "crocodile", "hippo", "lion",
)
NUM_SPECIES = len(SPECIES_NAMES)
NUM_PLAYERS = 2
NUM_CARDS = NUM_PLAYERS * NUM_SPECIES
HAND_SIZE = 4
DECK_SIZE = NUM_SPECIES - HAND_SIZE
QUEUE_SLOTS = 5  # the queue holds at most 4 cards between turns, 5 mid-turn.

(SKUNK, PARROT, KANGAROO, MONKEY, CHAMELEON, SEAL,
 ZEBRA, GIRAFFE, SNAKE, CROCODILE, HIPPO, LION) = range(NUM_SPECIES)

STRENGTH = np.arange(1, NUM_SPECIES + 1, dtype=np.int32)
POINTS = np.array([4, 4, 4, 3, 3, 2, 4, 3, 2, 3, 2, 2], dtype=np.int32)

SPECIES_INDEX = {name: i for i, name in enumerate(SPECIES_NAMES)}


def species_id(name: str) -> int:
    """The species id of a species name such as ``"lion"``; ValueError if unknown."""
    try:
        return SPECIES_INDEX[name]
    except KeyError:
        raise ValueError(
            f"unknown species {name!r}; expected one of {', '.join(SPECIES_NAMES)}"
        ) from None
