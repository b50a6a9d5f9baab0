"""The rules: ``init``, ``init_from_deal``, ``legal_action_mask`` and ``play``, one legal
turn; ``step`` is ``play`` inside the step protocol every game shares
(:func:`beastybar_jax.games.base.protocol_step`).

All functions act on a single game and are pure, jittable and vmappable; batch
them with ``jax.vmap``.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.games import tracing
from beastybar_jax.games.beastybar import actions as A
from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.games.beastybar import queue as Q
from beastybar_jax.games.beastybar.state import State
from beastybar_jax.games.base import as_action, protocol_step

# Built with NumPy and put on the device once: an eager jnp op here would compile a program at import.
_CARD_SPECIES, _ACTING_SPECIES, _PARAM, _SPECIES = jax.device_put(
    (A.ACTION_CARD_SPECIES, A.ACTION_ACTING_SPECIES, A.ACTION_PARAM, np.arange(C.NUM_SPECIES, dtype=np.int32)))


def _lookup(table, index):
    """``table[index]`` for a small constant table, as a one-hot sum: under vmap on
    CPU a per-game dynamic gather costs far more than a few dozen selects."""
    return jnp.sum(jnp.where(jnp.arange(table.shape[0]) == index, table, 0))


def _row(rows, player):
    """``rows[player]`` of a ``[2, ...]`` array, without a dynamic gather."""
    return jnp.where(player == 0, rows[0], rows[1])


def init_from_deal(hands, decks, starting_player) -> State:
    """A game from a known deal.

    Args:
      hands: ``int[2, 4]`` species in each player's starting hand.
      decks: ``int[2, 8]`` species of each deck, drawn first to last.
      starting_player: ``int[]`` the player who moves first.
    """
    hands = jnp.asarray(hands)
    hand = jnp.any(hands[:, :, None] == _SPECIES[None, None, :], axis=1)
    return State(
        queue=jnp.full(C.QUEUE_SLOTS, -1, dtype=jnp.int8),
        hand=hand,
        deck=jnp.asarray(decks, dtype=jnp.int8),
        bar=jnp.zeros((C.NUM_PLAYERS, C.NUM_SPECIES), dtype=bool),
        thats_it=jnp.zeros((C.NUM_PLAYERS, C.NUM_SPECIES), dtype=bool),
        current_player=jnp.asarray(starting_player, dtype=jnp.int8),
        turn=jnp.zeros((), dtype=jnp.int8),
        terminated=jnp.zeros((), dtype=bool),
        rewards=jnp.zeros(C.NUM_PLAYERS, dtype=jnp.float32),
    )


def init(key: jax.Array) -> State:
    """A new game: each player's 12 cards shuffled (4 in hand, 8 in the deck) and
    a uniformly random starting player.

    The shuffle ranks 12 random 32-bit words per player (ties, with probability
    about 1.5e-8, go to the lower species id) instead of calling
    ``jax.random.permutation``: one batch of 25 random words and a 12x12
    comparison cost a fraction of two sorts, and auto-reset loops call ``init``
    for every game at every step.
    """
    bits = jax.random.bits(key, (C.NUM_PLAYERS * C.NUM_SPECIES + 1,), jnp.uint32)
    words = bits[:-1].reshape(C.NUM_PLAYERS, C.NUM_SPECIES)  # [2, 12]
    before = (words[:, None, :] < words[:, :, None]) | (
        (words[:, None, :] == words[:, :, None]) & (_SPECIES[None, :] < _SPECIES[:, None])
    )
    rank = jnp.sum(before, axis=-1)  # [2, 12] place of each species in the shuffle
    deck_place = jnp.arange(C.DECK_SIZE) + C.HAND_SIZE
    at_place = rank[:, None, :] == deck_place[None, :, None]  # [2, 8, 12]
    deck = jnp.sum(jnp.where(at_place, _SPECIES, 0), axis=-1)
    return State(
        queue=jnp.full(C.QUEUE_SLOTS, -1, dtype=jnp.int8),
        hand=rank < C.HAND_SIZE,
        deck=deck.astype(jnp.int8),
        bar=jnp.zeros((C.NUM_PLAYERS, C.NUM_SPECIES), dtype=bool),
        thats_it=jnp.zeros((C.NUM_PLAYERS, C.NUM_SPECIES), dtype=bool),
        current_player=(bits[-1] & 1).astype(jnp.int8),
        turn=jnp.zeros((), dtype=jnp.int8),
        terminated=jnp.zeros((), dtype=bool),
        rewards=jnp.zeros(C.NUM_PLAYERS, dtype=jnp.float32),
    )


def legal_action_mask(state: State) -> jax.Array:
    """``bool[31]`` actions the player to move may take; all False once terminated."""
    hand = _row(state.hand, state.current_player)  # [12]
    queue_species = Q.species_of(state.queue)
    queue_length = jnp.sum(state.queue >= 0)
    in_queue = jnp.any(queue_species[:, None] == _SPECIES[None, :], axis=0)  # [12]

    holds = hand[_CARD_SPECIES]
    parrot_ok = _PARAM < queue_length  # the target must exist
    hop_ok = jnp.where(queue_length == 0, _PARAM == 0, (_PARAM >= 1) & (_PARAM <= jnp.minimum(2, queue_length)))
    param_ok = jnp.where(_ACTING_SPECIES == C.PARROT, parrot_ok,
                         jnp.where(_ACTING_SPECIES == C.KANGAROO, hop_ok, True))
    copy_ok = jnp.where(_CARD_SPECIES == C.CHAMELEON, in_queue[_ACTING_SPECIES], True)
    return holds & param_ok & copy_ok & ~state.terminated


def _card_mask(cards):
    """``bool[2, 12]`` of a ``bool[24]`` card mask."""
    return cards.reshape(C.NUM_PLAYERS, C.NUM_SPECIES)


def play(state: State, action) -> State:
    """One legal turn (``action`` an ``int32`` id the mover may play): play, on-play
    ability, recurring, five-animal check, draw."""
    player = state.current_player.astype(jnp.int32)
    card_species = _lookup(_CARD_SPECIES, action)
    acting_species = _lookup(_ACTING_SPECIES, action)
    card = player * C.NUM_SPECIES + card_species
    queue = state.queue.astype(jnp.int32)
    queue = jnp.where(Q.INDEX == jnp.sum(queue >= 0), card, queue)

    keys, remove = Q.on_play(queue, acting_species, _lookup(_PARAM, action))
    queue, gone = Q.apply(queue, keys, remove)
    skip_giraffe = jnp.where(card_species == C.GIRAFFE, card, -1)
    queue, eaten = Q.recurring(queue, skip_giraffe)
    gone = gone | eaten

    # Five animals: the front two enter the bar, the last one is thrown out.
    full = jnp.sum(queue >= 0) == C.QUEUE_SLOTS
    is_card = queue[:, None] == jnp.arange(C.NUM_CARDS)[None, :]  # [5, 24]
    to_bar = full & jnp.any(is_card & (Q.INDEX < 2)[:, None], axis=0)
    gone = gone | (full & is_card[C.QUEUE_SLOTS - 1])
    middle_two = jnp.where(Q.INDEX < 2, jnp.roll(queue, -2), -1)
    queue = jnp.where(full, middle_two, queue)

    # Draw: the mover takes the top of their deck, if any.
    is_mover = jnp.arange(C.NUM_PLAYERS) == player
    top = state.deck[:, 0].astype(jnp.int32)  # [2]
    drawn = is_mover[:, None] & (top[:, None] == _SPECIES[None, :])
    hand = state.hand & ~(is_mover[:, None] & (_SPECIES == card_species)[None, :])
    hand = hand | drawn
    shifted = jnp.concatenate([state.deck[:, 1:], jnp.full((C.NUM_PLAYERS, 1), -1, jnp.int8)], axis=1)
    deck = jnp.where(is_mover[:, None], shifted, state.deck)

    bar = state.bar | _card_mask(to_bar)
    thats_it = state.thats_it | _card_mask(gone)
    in_reserve = jnp.sum(hand) + jnp.sum(deck >= 0)
    remaining = jnp.sum(queue >= 0) + in_reserve
    terminated = (remaining < 5) | (in_reserve == 0)
    scores = jnp.sum(jnp.where(bar, jnp.asarray(C.POINTS), 0), axis=-1)
    outcome = jnp.sign(scores[0] - scores[1]).astype(jnp.float32)
    rewards = jnp.where(terminated, jnp.stack([outcome, -outcome]), 0.0)
    return State(
        queue=queue.astype(jnp.int8),
        hand=hand,
        deck=deck,
        bar=bar,
        thats_it=thats_it,
        current_player=(1 - player).astype(jnp.int8),
        turn=state.turn + 1,
        terminated=terminated,
        rewards=rewards,
    )


def step(state: State, action) -> State:
    """Play ``action`` (an integer id) for the player to move: :func:`play` inside the step
    protocol every game shares. A finished game is returned unchanged; an illegal action
    (or an id outside ``0..30``, of any integer width) ends the game with the mover
    losing, the table as it was; a non-integer action raises ``GameInputError``, at trace
    time under jit."""
    return _step(state, as_action(action, A.NUM_ACTIONS), (tracing.traced_for_gpu(), tracing.pallas_kernels()))


# A jitted function, so that JAX traces the rules once for every step a program takes (an
# ``h100.yaml`` iteration's searches, lists, roots and learner took 13, a quarter of its
# tracing) and batches that one trace where vmapped. ``traced_as``: JAX keeps one trace
# per static value, and the rules are written one way per backend (``games/tracing.py``).
@functools.partial(jax.jit, static_argnums=2)
def _step(state: State, action: jax.Array, traced_as) -> State:
    return protocol_step(play, legal_action_mask, A.NUM_ACTIONS, C.NUM_PLAYERS, state, action)
