"""Branch-free queue manipulation: every ability is (new order keys, removals).

The queue is a ``[5]`` array of card ids, front first, ``-1`` for empty slots.
An ability describes its effect as an integer sort key per slot (a card moves by
getting a key between its new neighbours') and a mask of slots sent to THAT'S IT.
``apply`` then ranks the keys with 5x5 comparisons and gathers with one-hot
products: no sorts, scatters or Python branches, so it vmaps well on any backend.
"""

import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.games.beastybar.lanes import lane_any, lane_count, lane_max, lane_sum, lanes_written_out

SLOTS = C.QUEUE_SLOTS
# Built with NumPy and put on the device once: an eager jnp op here would compile a program at import.
INDEX = jax.device_put(np.arange(SLOTS, dtype=np.int32))
BASE_KEYS = jax.device_put(4 * np.arange(SLOTS, dtype=np.int32))  # a card moved in front of place p gets key 4 * p - 2.
NO_REMOVAL = jax.device_put(np.zeros(SLOTS, dtype=bool))


def species_of(queue):
    return jnp.where(queue >= 0, queue % C.NUM_SPECIES, -1)


def apply(queue, keys, remove):
    """Reorder ``queue`` by ``keys`` (stable) after dropping ``remove`` slots.

    Returns:
      ``(new_queue [5] int32, removed_cards bool[24])``.
    """
    present = queue >= 0
    keep = present & ~remove
    # Unique keys: ties broken by slot index, empty and removed slots last.
    unique = jnp.where(keep, keys * 8 + INDEX, 10_000 + INDEX)
    rank = lane_sum(unique[None, :] < unique[:, None], axis=1)  # [5]
    moved = rank[:, None] == INDEX[None, :]  # [from, to]
    new_queue = lane_sum(jnp.where(moved, queue[:, None] + 1, 0), axis=0) - 1
    kept_count = lane_count(keep)
    new_queue = jnp.where(INDEX < kept_count, new_queue, -1)
    removed = present & remove
    removed_cards = lane_any(removed[:, None] & (queue[:, None] == jnp.arange(C.NUM_CARDS)[None, :]), axis=0)
    return new_queue, removed_cards


def weaker_run(strength, species, position, actor_strength):
    """Mask of the run of cards directly ahead of ``position`` that are weaker
    than ``actor_strength`` and not zebras (hippo and crocodile reach)."""
    ahead = INDEX < position
    blocks = ahead & ((strength >= actor_strength) | (species == C.ZEBRA) | (species < 0))
    last_block = lane_max(jnp.where(blocks, INDEX, -1))
    return (INDEX > last_block) & ahead, last_block


def hippo(queue, strength, species, position, actor_strength):
    _, last_block = weaker_run(strength, species, position, actor_strength)
    keys = jnp.where(INDEX == position, 4 * (last_block + 1) - 2, BASE_KEYS)
    return keys, NO_REMOVAL


def crocodile(queue, strength, species, position, actor_strength):
    run, _ = weaker_run(strength, species, position, actor_strength)
    return BASE_KEYS, run


def giraffe(queue, strength, species, position, actor_strength):
    ahead_strength = lane_sum(jnp.where(INDEX == position - 1, strength, 0))
    jumps = (position > 0) & (ahead_strength < actor_strength)
    keys = jnp.where(jumps & (INDEX == position), 4 * (position - 1) - 2, BASE_KEYS)
    return keys, NO_REMOVAL


def on_play(queue, acting_species, param):
    """Resolve the on-play ability of the card just put at the back of ``queue``.

    Args:
      queue: ``[5]`` cards, the played card last.
      acting_species: the species whose ability resolves (a chameleon's copy).
      param: parrot target place or kangaroo hop.

    Returns:
      ``(keys [5], remove bool[5])`` for ``apply``.
    """
    present = queue >= 0
    position = lane_count(present) - 1
    is_played = INDEX == position
    species = jnp.where(is_played, acting_species, species_of(queue))
    strength = jnp.where(present, species + 1, 0)
    others = present & ~is_played

    # Lion: a second lion leaves; otherwise monkeys leave and the lion goes first.
    lion_present = lane_any(others & (species == C.LION))
    lion_keys = jnp.where(is_played, -2, BASE_KEYS)
    lion_keys = jnp.where(lion_present, BASE_KEYS, lion_keys)
    lion_remove = jnp.where(lion_present, is_played, others & (species == C.MONKEY))

    # Monkey: with two or more monkeys, hippos and crocodiles leave and the
    # monkeys go first: the played one, then the others back to front.
    monkeys = present & (species == C.MONKEY)
    troop = lane_count(monkeys) >= 2
    monkey_keys = jnp.where(monkeys, -100 - INDEX, BASE_KEYS)
    monkey_keys = jnp.where(is_played, -200, monkey_keys)
    monkey_keys = jnp.where(troop, monkey_keys, BASE_KEYS)
    monkey_remove = troop & present & ((species == C.HIPPO) | (species == C.CROCODILE))

    # Skunk: the two highest distinct strengths among non-skunks leave.
    targets = present & (species != C.SKUNK)
    first = lane_max(jnp.where(targets, strength, 0))
    second = lane_max(jnp.where(targets & (strength < first), strength, 0))
    skunk_remove = targets & ((strength == first) | (strength == second))

    acting_strength = acting_species + 1
    hippo_keys, _ = hippo(queue, strength, species, position, acting_strength)
    _, croc_remove = crocodile(queue, strength, species, position, acting_strength)
    giraffe_keys, _ = giraffe(queue, strength, species, position, acting_strength)

    keys_by_species = jnp.stack([
        BASE_KEYS,                                                  # skunk
        BASE_KEYS,                                                  # parrot
        jnp.where(is_played, 4 * (position - param) - 2, BASE_KEYS),  # kangaroo
        monkey_keys,                                                # monkey
        BASE_KEYS,                                                  # chameleon
        -INDEX,                                                     # seal
        BASE_KEYS,                                                  # zebra
        giraffe_keys,                                               # giraffe
        -strength * 8 + INDEX,                                      # snake
        BASE_KEYS,                                                  # crocodile
        hippo_keys,                                                 # hippo
        lion_keys,                                                  # lion
    ])
    remove_by_species = jnp.stack([
        skunk_remove,
        others & (INDEX == param),  # parrot
        NO_REMOVAL, monkey_remove, NO_REMOVAL, NO_REMOVAL, NO_REMOVAL, NO_REMOVAL,
        NO_REMOVAL, croc_remove, NO_REMOVAL, lion_remove,
    ])
    # Select the acting species' row with a one-hot sum: a dynamic gather per game
    # is much slower than 12 selects under vmap on CPU.
    is_acting = (jnp.arange(C.NUM_SPECIES) == acting_species)[:, None]
    keys = lane_sum(jnp.where(is_acting, keys_by_species, 0), axis=0)
    remove = lane_any(is_acting & remove_by_species, axis=0)
    return keys, remove


# Visits the cursor can make: each slot once, plus rescans. A crocodile's rescan
# revisits nothing (the cards behind it move up to the cursor); a hippo that
# passes k cards revisits k - 1. Nothing can pass a hippo, so each of the two
# hippos passes at most 4 cards in a phase: at most 5 + 2 * 3 visits.
RECURRING_STEPS = SLOTS + 2 * 3

# The recurring phase runs on a packed queue: slot i holds ``card + 1`` in bits
# 5i..5i+4 of one int32 (0 = empty). Moving or eating cards is then a handful of
# shifts and masks per game instead of a 5x5 reordering per visit, which keeps
# the 11 unrolled visits cheap under vmap.
_BITS = 5
_SHIFTS = jax.device_put(_BITS * np.arange(SLOTS, dtype=np.int32))  # [5]


def pack(queue):
    """``int32[]`` of a ``[5]`` queue (``-1`` empty)."""
    return lane_sum((queue.astype(jnp.int32) + 1) << _SHIFTS)


def unpack(packed):
    """``int32[5]`` queue (``-1`` empty) of a packed queue."""
    return ((packed >> _SHIFTS) & 31) - 1


def _below(packed, n):
    """The slots before ``n`` (0 <= n <= 5)."""
    return packed & ((1 << (_BITS * n)) - 1)


def _card_set(packed):
    """``int32[]`` bit ``card`` set for each card in a packed queue."""
    slots = (packed >> _SHIFTS) & 31
    return lane_sum(jnp.where(slots > 0, 1 << jnp.maximum(slots - 1, 0), 0))


def _blockers(packed, cursor, actor_strength):
    """``(last_block, ahead_species)`` for the actor at ``cursor``: the last slot ahead of
    it that stops its run (a card as strong, a zebra, or a gap), -1 if none, and the
    species of the card right ahead of it (0 if none)."""
    if lanes_written_out():
        # Slot by slot from the packed word, no [5] array: every op is elementwise in the
        # batch, so the 11 visits fuse into one kernel on a GPU (see lanes.py).
        last_block, ahead_species = jnp.int32(-1), jnp.int32(0)
        for i in range(SLOTS):
            card = ((packed >> (_BITS * i)) & 31) - 1
            species = jnp.where(card >= C.NUM_SPECIES, card - C.NUM_SPECIES, card)
            blocks = (i < cursor) & ((species + 1 >= actor_strength) | (species == C.ZEBRA) | (card < 0))
            last_block = jnp.where(blocks, i, last_block)
            ahead_species = jnp.where(i == cursor - 1, species, ahead_species)
        return last_block, ahead_species
    slots = ((packed >> _SHIFTS) & 31) - 1  # [5] cards
    species = jnp.where(slots >= C.NUM_SPECIES, slots - C.NUM_SPECIES, slots)
    blocks = (INDEX < cursor) & ((species + 1 >= actor_strength) | (species == C.ZEBRA) | (slots < 0))
    return jnp.max(jnp.where(blocks, INDEX, -1)), jnp.sum(jnp.where(INDEX == cursor - 1, species, 0))


def recurring(queue, skip_card):
    """Recurring phase: every hippo, crocodile and giraffe acts, front to back.

    A cursor walks the queue from the front. When a hippo or crocodile moves
    ahead, the walk resumes right behind its new place, so animals it passed get
    their turn again (this is how the reference engine orders the phase; a
    giraffe can then jump twice in one turn). ``skip_card`` (the giraffe just
    played, or -1) does not act.

    Returns:
      ``(new_queue [5], removed_cards bool[24])``.
    """

    def visit(_, carry):
        packed, cursor = carry
        at = jnp.minimum(cursor, SLOTS)  # slot 5 reads as empty
        actor = ((packed >> (_BITS * at)) & 31) - 1  # card, -1 if none
        actor_species = jnp.where(actor >= C.NUM_SPECIES, actor - C.NUM_SPECIES, actor)
        actor_strength = actor_species + 1
        last_block, ahead_species = _blockers(packed, cursor, actor_strength)
        run_start = last_block + 1  # first card of the weaker run ahead
        has_run = run_start < cursor
        is_hippo = actor_species == C.HIPPO
        is_croc = actor_species == C.CROCODILE
        jumps = ((actor_species == C.GIRAFFE) & (actor != skip_card) & (cursor > 0)
                 & (ahead_species + 1 < actor_strength))
        # Hippo or giraffe: the actor moves to slot ``to``, the cards from ``to``
        # up to the cursor move back one slot.
        to = jnp.where(is_hippo & has_run, run_start, jnp.where(jumps, cursor - 1, at))
        moved = (_below(packed, to)
                 | ((actor + 1) << (_BITS * to))
                 | ((_below(packed, at) >> (_BITS * to)) << (_BITS * (to + 1)))
                 | ((packed >> (_BITS * (at + 1))) << (_BITS * (at + 1))))
        # Crocodile: the run from ``run_start`` up to the cursor is eaten.
        eaten = _below(packed, run_start) | ((packed >> (_BITS * at)) << (_BITS * run_start))
        packed = jnp.where(is_croc & has_run, eaten, moved)
        cursor = jnp.where((is_hippo | is_croc) & has_run, last_block + 2, cursor + 1)
        return packed, cursor

    packed = pack(queue)
    # The barrier hides the first visit's constant cursor from XLA's constant folding,
    # which would otherwise evaluate batch-sized constant arrays at compile time: seconds
    # more to compile the afterstates of a large batch (100,000 observations and more).
    init = jax.lax.optimization_barrier((packed, jnp.zeros((), jnp.int32)))
    final, _ = jax.lax.fori_loop(0, RECURRING_STEPS, visit, init, unroll=True)
    removed = _card_set(packed) & ~_card_set(final)
    removed_cards = ((removed >> jnp.arange(C.NUM_CARDS)) & 1).astype(bool)
    return unpack(final), removed_cards
