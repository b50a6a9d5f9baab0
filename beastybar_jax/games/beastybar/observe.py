"""What a player may know: ``observe`` and ``sample_world`` (determinization)."""

import jax
import jax.numpy as jnp

from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.games.beastybar.state import State
from beastybar_jax.games.base import as_player

QUEUE_TOKENS = 4  # queue places visible between turns
QUEUE_FEATURES = C.NUM_SPECIES + 2  # species one-hot, mine, theirs

# Layout of the flat observation vector, relative to the observing player.
OBSERVATION_LAYOUT = {
    "own_hand": (0, 12),
    "own_deck": (12, 24),            # contents, not order
    "opponent_unseen": (24, 36),     # opponent hand and deck together
    "queue": (36, 36 + QUEUE_TOKENS * QUEUE_FEATURES),  # [4, 14] front first
    "own_bar": (92, 104),
    "opponent_bar": (104, 116),
    "own_thats_it": (116, 128),
    "opponent_thats_it": (128, 140),
    # own hand/4, own deck/8, opponent hand/4, opponent deck/8, queue/4,
    # turn/24, own score/20, opponent score/20, observer is to move
    "counts": (140, 149),
}
OBSERVATION_SIZE = 149


def observe(state: State, player) -> jax.Array:
    """``float32[149]`` what ``player`` knows, laid out as ``OBSERVATION_LAYOUT``.

    Never depends on how the opponent's unseen cards split between hand and
    deck, nor on either deck's order. ``player`` must be 0 or 1: a concrete other
    value raises ``GameInputError``; a traced one is not checked.
    """
    player = as_player(player, C.NUM_PLAYERS)
    is_first = player == 0
    # ``x[player]`` / ``x[1 - player]`` of a ``[2, ...]`` array as selects: a dynamic
    # gather per game is much slower under vmap on CPU.
    mine = lambda x: jnp.where(is_first, x[0], x[1])
    theirs = lambda x: jnp.where(is_first, x[1], x[0])
    species = jnp.arange(C.NUM_SPECIES)
    in_deck = jnp.any(state.deck[:, :, None] == species[None, None, :], axis=1)  # [2, 12]
    queue_cards = state.queue[:QUEUE_TOKENS].astype(jnp.int32)
    occupied = queue_cards >= 0
    queue_species = jnp.where(occupied, queue_cards % C.NUM_SPECIES, -1)
    owned_by_first = queue_cards < C.NUM_SPECIES
    queue = jnp.concatenate([
        queue_species[:, None] == species[None, :],
        (occupied & (owned_by_first == is_first))[:, None],
        (occupied & (owned_by_first != is_first))[:, None],
    ], axis=1)
    hand_sizes = jnp.sum(state.hand, axis=1)
    deck_sizes = jnp.sum(state.deck >= 0, axis=-1)
    scores = jnp.sum(jnp.where(state.bar, jnp.asarray(C.POINTS), 0), axis=-1)
    counts = jnp.stack([
        mine(hand_sizes) / C.HAND_SIZE,
        mine(deck_sizes) / C.DECK_SIZE,
        theirs(hand_sizes) / C.HAND_SIZE,
        theirs(deck_sizes) / C.DECK_SIZE,
        jnp.sum(occupied) / QUEUE_TOKENS,
        state.turn / C.NUM_CARDS,
        mine(scores) / 20.0,
        theirs(scores) / 20.0,
        (state.current_player == player).astype(jnp.float32),
    ])
    parts = [
        mine(state.hand), mine(in_deck), theirs(state.hand) | theirs(in_deck),
        queue.reshape(-1), mine(state.bar), theirs(state.bar),
        mine(state.thats_it), theirs(state.thats_it),
    ]
    return jnp.concatenate([p.astype(jnp.float32) for p in parts] + [counts.astype(jnp.float32)])


def split_observation(observation: jax.Array) -> dict:
    """Named views of a ``[..., 149]`` observation; ``queue`` is ``[..., 4, 14]``."""
    parts = {name: observation[..., a:b] for name, (a, b) in OBSERVATION_LAYOUT.items()}
    parts["queue"] = parts["queue"].reshape(*observation.shape[:-1], QUEUE_TOKENS, QUEUE_FEATURES)
    return parts


def _shuffle_hidden(key, hidden, keep_in_hand):
    """Deal the species in ``hidden`` (bool[12]) at random: ``keep_in_hand`` to a
    hand (bool[12]), the rest to a deck in random order (int8[8], -1 padded)."""
    priority = jax.random.uniform(key, (C.NUM_SPECIES,))
    order = jnp.argsort(jnp.where(hidden, priority, 2.0))  # hidden species first, shuffled
    rank = jnp.argsort(order)  # rank of each species in the shuffle
    hand = hidden & (rank < keep_in_hand)
    deck_slot = jnp.arange(C.DECK_SIZE)
    deck_species = order[jnp.clip(deck_slot + keep_in_hand, 0, C.NUM_SPECIES - 1)]
    deck = jnp.where(deck_slot < jnp.sum(hidden) - keep_in_hand, deck_species, -1)
    return hand, deck.astype(jnp.int8)


def sample_world(state: State, player, key: jax.Array) -> State:
    """A full state consistent with everything ``player`` knows.

    The public table and ``player``'s hand are kept; the opponent's unseen cards
    are dealt uniformly between their hand (same size) and their deck (random
    order), and ``player``'s own deck is reshuffled. Every consistent world is
    equally likely. ``player`` is checked as in :func:`observe`.
    """
    player = as_player(player, C.NUM_PLAYERS)
    own_key, opponent_key = jax.random.split(key)
    species = jnp.arange(C.NUM_SPECIES)
    in_deck = jnp.any(state.deck[:, :, None] == species[None, None, :], axis=1)
    opponent = 1 - player
    _, own_deck = _shuffle_hidden(own_key, in_deck[player], 0)
    opp_hand, opp_deck = _shuffle_hidden(
        opponent_key, state.hand[opponent] | in_deck[opponent], jnp.sum(state.hand[opponent])
    )
    is_player = (jnp.arange(C.NUM_PLAYERS) == player)[:, None]
    hand = jnp.where(is_player, state.hand, opp_hand[None, :])
    deck = jnp.where(is_player, own_deck[None, :], opp_deck[None, :])
    return state.replace(hand=hand, deck=deck)


