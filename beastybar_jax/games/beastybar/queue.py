"""Branch-free queue manipulation: every ability is (new order keys, removals).

The queue is a ``[5]`` array of card ids, front first, ``-1`` for empty slots.
An ability describes its effect as an integer sort key per slot (a card moves by
getting a key between its new neighbours') and a mask of slots sent to THAT'S IT.
``apply`` then ranks the keys with 5x5 comparisons and gathers with one-hot
products: no sorts, scatters or Python branches, so it vmaps well on any backend.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.games.tracing import pallas_kernels, traced_for_gpu
from beastybar_jax.per_game import on_each_device

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
    rank = jnp.sum(unique[None, :] < unique[:, None], axis=1)  # [5]
    moved = rank[:, None] == INDEX[None, :]  # [from, to]
    new_queue = jnp.sum(jnp.where(moved, queue[:, None] + 1, 0), axis=0) - 1
    kept_count = jnp.sum(keep)
    new_queue = jnp.where(INDEX < kept_count, new_queue, -1)
    removed = present & remove
    removed_cards = jnp.any(removed[:, None] & (queue[:, None] == jnp.arange(C.NUM_CARDS)[None, :]), axis=0)
    return new_queue, removed_cards


def weaker_run(strength, species, position, actor_strength):
    """Mask of the run of cards directly ahead of ``position`` that are weaker
    than ``actor_strength`` and not zebras (hippo and crocodile reach)."""
    ahead = INDEX < position
    blocks = ahead & ((strength >= actor_strength) | (species == C.ZEBRA) | (species < 0))
    last_block = jnp.max(jnp.where(blocks, INDEX, -1))
    return (INDEX > last_block) & ahead, last_block


def hippo(queue, strength, species, position, actor_strength):
    _, last_block = weaker_run(strength, species, position, actor_strength)
    keys = jnp.where(INDEX == position, 4 * (last_block + 1) - 2, BASE_KEYS)
    return keys, NO_REMOVAL


def crocodile(queue, strength, species, position, actor_strength):
    run, _ = weaker_run(strength, species, position, actor_strength)
    return BASE_KEYS, run


def giraffe(queue, strength, species, position, actor_strength):
    ahead_strength = jnp.sum(jnp.where(INDEX == position - 1, strength, 0))
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
    position = jnp.sum(present) - 1
    is_played = INDEX == position
    species = jnp.where(is_played, acting_species, species_of(queue))
    strength = jnp.where(present, species + 1, 0)
    others = present & ~is_played

    # Lion: a second lion leaves; otherwise monkeys leave and the lion goes first.
    lion_present = jnp.any(others & (species == C.LION))
    lion_keys = jnp.where(is_played, -2, BASE_KEYS)
    lion_keys = jnp.where(lion_present, BASE_KEYS, lion_keys)
    lion_remove = jnp.where(lion_present, is_played, others & (species == C.MONKEY))

    # Monkey: with two or more monkeys, hippos and crocodiles leave and the
    # monkeys go first: the played one, then the others back to front.
    monkeys = present & (species == C.MONKEY)
    troop = jnp.sum(monkeys) >= 2
    monkey_keys = jnp.where(monkeys, -100 - INDEX, BASE_KEYS)
    monkey_keys = jnp.where(is_played, -200, monkey_keys)
    monkey_keys = jnp.where(troop, monkey_keys, BASE_KEYS)
    monkey_remove = troop & present & ((species == C.HIPPO) | (species == C.CROCODILE))

    # Skunk: the two highest distinct strengths among non-skunks leave.
    targets = present & (species != C.SKUNK)
    first = jnp.max(jnp.where(targets, strength, 0))
    second = jnp.max(jnp.where(targets & (strength < first), strength, 0))
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
    keys = jnp.sum(jnp.where(is_acting, keys_by_species, 0), axis=0)
    remove = jnp.any(is_acting & remove_by_species, axis=0)
    return keys, remove


# Visits the cursor can make: each slot once, plus rescans. A crocodile's rescan
# revisits nothing (the cards behind it move up to the cursor); a hippo that
# passes k cards revisits k - 1. Nothing can pass a hippo, so each of the two
# hippos passes at most 4 cards in a phase: at most 5 + 2 * 3 visits.
RECURRING_STEPS = SLOTS + 2 * 3

# The recurring phase runs on two packed words, moved alike: slot i holds, in bits
# 5i..5i+4, ``card + 1`` (0 = empty) in the first and the card's run code in the
# second. Moving or eating cards is then a handful of shifts and masks per game
# instead of a 5x5 reordering per visit, and finding the run a hippo or crocodile
# passes is a few operations on the second word for all five slots at once (SWAR),
# not a scan of the slots. On one GPU the visits are one Pallas kernel that loops on the
# device (:func:`_visits_kernel`): unrolled into one XLA fusion of ~1,150 operations they
# cost XLA's fusion pass ~2 s to compile in each of an iteration's ~21 engine steps (the
# pass costs more than linearly in a kernel's size; docs/performance.md).
_BITS = 5
_SHIFTS = jax.device_put(_BITS * np.arange(SLOTS, dtype=np.int32))  # [5]
_LOW = sum(1 << (_BITS * i) for i in range(SLOTS))  # bit 0 of every slot
_HIGH = _LOW << (_BITS - 1)  # bit 4 of every slot


def pack(queue):
    """``int32[]`` of a ``[5]`` queue (``-1`` empty)."""
    return jnp.sum((queue.astype(jnp.int32) + 1) << _SHIFTS)


def unpack(packed):
    """``int32[5]`` queue (``-1`` empty) of a packed queue."""
    return _card_at(packed, INDEX)


def _card_at(packed, slot):
    """The card (``-1``: none) in ``slot`` (an int array: every slot it names) of a packed queue."""
    return ((packed >> (_BITS * slot)) & 31) - 1


def _run_codes(queue):
    """``int32[]``: the run code of each card of a ``[5]`` queue, packed as :func:`pack`:
    12 - species, 0 for a zebra or an empty slot. A card stops the run of an actor of
    strength s (1..12; 0: none), being as strong, a zebra or a gap, exactly when its code
    is below 14 - s."""
    species = jnp.where(queue >= 0, queue.astype(jnp.int32) % C.NUM_SPECIES, C.ZEBRA)
    return jnp.sum(jnp.where(species == C.ZEBRA, 0, C.NUM_SPECIES - species) << _SHIFTS)


def _below(packed, n):
    """The slots before ``n`` (0 <= n <= 5)."""
    return packed & ((1 << (_BITS * n)) - 1)


def _card_set(packed):
    """``int32[]`` bit ``card`` set for each card in a packed queue."""
    cards = _card_at(packed, INDEX)
    return jnp.sum(jnp.where(cards >= 0, 1 << jnp.maximum(cards, 0), 0))


def _last_block(codes, cursor, actor_strength):
    """The last slot ahead of ``cursor`` that stops the run of an actor of
    ``actor_strength`` (a card as strong, a zebra, or a gap), -1 if none: from the packed
    run ``codes``, every slot at once. Adding 16 to a slot's code and taking away
    ``14 - actor_strength`` leaves its bit 4 clear exactly where the slot blocks, and no
    borrow crosses a slot (codes <= 12)."""
    blocks = ~((codes | _HIGH) - (14 - actor_strength) * _LOW) & _HIGH
    blocks = blocks & ((1 << (_BITS * jnp.clip(cursor, 0, SLOTS))) - 1)  # the slots ahead of the cursor
    # The highest set bit is bit 4 of the last blocking slot (32 leading zeros: none).
    return (32 - jax.lax.clz(blocks)) // _BITS - 1


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
    packed, codes = pack(queue), _run_codes(queue)
    skip_card = jnp.asarray(skip_card, jnp.int32)
    kernels = pallas_kernels()
    if kernels and jax.device_count() == 1:
        # The interpreter's or Triton's, fixed now (JAX may trace the kernel again later).
        kernel = functools.partial(_visits_kernel, interpret=kernels == "interpret")
        final = on_each_device(kernel, packed[None], codes[None], skip_card[None])[0]
    else:
        # Over several devices XLA may split a batch of games unevenly (the afterstate
        # scorer's groups: 2 over 4 devices) and a custom call's partitioning cannot follow
        # it: there a GPU runs the visits unrolled, one XLA fusion. The barrier hides the
        # first visit's constant cursor from XLA's constant folding, which would otherwise
        # evaluate batch-sized constant arrays at compile time: seconds more to compile the
        # afterstates of a large batch (100,000 observations and more).
        init = jax.lax.optimization_barrier((packed, codes, jnp.zeros((), jnp.int32)))
        final = _visits(*init, skip_card, unroll=traced_for_gpu())
    removed = _card_set(packed) & ~_card_set(final)
    removed_cards = ((removed >> jnp.arange(C.NUM_CARDS)) & 1).astype(bool)
    return unpack(final), removed_cards


def _visits(cards, codes, cursor, skip_card, unroll: bool = False):
    """The packed cards after the recurring phase's visits from ``cursor`` (0: the front),
    given the packed cards and run codes: elementwise, for one game or a block of games
    (the kernel's). ``unroll``: the visits written out, not a loop."""

    def visit(_, carry):
        cards, codes, cursor = carry  # the packed cards and their packed run codes
        at = jnp.minimum(cursor, SLOTS)  # slot 5 reads as empty
        actor = _card_at(cards, at)
        actor_species = species_of(actor)
        actor_strength = actor_species + 1
        last_block = _last_block(codes, cursor, actor_strength)
        ahead_species = species_of(_card_at(cards, jnp.clip(cursor - 1, 0, SLOTS - 1)))  # a giraffe's
        run_start = last_block + 1  # first card of the weaker run ahead
        has_run = run_start < cursor
        is_hippo = actor_species == C.HIPPO
        is_croc = actor_species == C.CROCODILE
        jumps = ((actor_species == C.GIRAFFE) & (actor != skip_card) & (cursor > 0)
                 & (ahead_species + 1 < actor_strength))
        # Hippo or giraffe: the actor moves to slot ``to``, the cards from ``to`` up to the
        # cursor move back one slot. Crocodile: the run from ``run_start`` up to the cursor
        # is eaten. (Every shift is below 32 bits, as a GPU kernel needs; two words of the
        # batch's shape, not one [2] array: XLA fuses unrolled visits into one kernel only
        # where they have one shape.)
        to = jnp.where(is_hippo & has_run, run_start, jnp.where(jumps, cursor - 1, at))
        eats = is_croc & has_run

        def rearranged(word):
            moved = (_below(word, to)
                     | (((word >> (_BITS * at)) & 31) << (_BITS * to))
                     | ((_below(word, at) >> (_BITS * to)) << (_BITS * (to + 1)))
                     | ((word >> (_BITS * (at + 1))) << (_BITS * (at + 1))))
            eaten = _below(word, run_start) | ((word >> (_BITS * at)) << (_BITS * run_start))
            return jnp.where(eats, eaten, moved)

        cursor = jnp.where((is_hippo | is_croc) & has_run, last_block + 2, cursor + 1)
        return rearranged(cards), rearranged(codes), cursor

    final, _, _ = jax.lax.fori_loop(0, RECURRING_STEPS, visit, (cards, codes, cursor), unroll=unroll)
    return final


KERNEL_BLOCK = 128  # games per kernel program, one a thread


def _visits_kernel(cards, codes, skip_card, *, interpret: bool):
    """:func:`_visits` of a batch of games ``int32[N]`` as one Pallas kernel: Triton's, or
    with ``interpret`` Pallas's interpreter (``tracing.for_gpu(kernels="interpret")``: a CPU runs it so)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    num = cards.shape[0]
    if num == 0:  # no kernel to launch
        return cards

    def kernel(cards_ref, codes_ref, skip_ref, out_ref):
        rows = pl.program_id(0) * KERNEL_BLOCK + jnp.arange(KERNEL_BLOCK, dtype=jnp.int32)
        present = rows < num
        load = lambda ref: plgpu.load(ref.at[rows], mask=present, other=0)  # noqa: E731
        cards = load(cards_ref)
        plgpu.store(out_ref.at[rows], _visits(cards, load(codes_ref), jnp.zeros_like(cards), load(skip_ref)),
                    mask=present)

    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((num,), jnp.int32),
                          grid=(pl.cdiv(num, KERNEL_BLOCK),), interpret=interpret, name="recurring",
                          compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1))(cards, codes, skip_card)
