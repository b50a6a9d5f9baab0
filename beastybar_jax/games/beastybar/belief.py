"""A belief over the opponent's hand, kept from their moves, and worlds drawn from it.

``sample_world`` deals the opponent's unseen cards uniformly between hand and deck. Their
moves say more: a player who held the lion would seldom have played the skunk there. This
module keeps, for one player (the *observer*), the probability that the opponent holds each
of their unseen species, and updates it by Bayes' rule after every move the opponent makes:

* the prior is the belief before the move: the most even distribution over the opponent's
  possible hands that holds each species with the belief's probability (a distribution
  proportional to a product of per-species weights, fitted to them);
* hands that contain the card played are drawn from it (``num_particles`` of them), each is
  put into the position the opponent faced, and ``policy`` -- a model of how the opponent
  chooses: a network's raw policy, or any function of that position -- gives the
  probability of the move they made; the hands, weighted by it, give the posterior;
* the card played leaves the hand and the opponent draws one card, uniformly from their
  deck: a species held with probability ``p`` is then held with ``p + (1 - p) / deck size``.

Only what the observer knows enters: the public table, the opponent's unseen species as a
set, their hand and deck sizes, and the observer's own cards, which the hypothetical
positions keep (both decks reshuffled). The belief is the per-species marginal of the
posterior (the correlations between species are dropped after each update), so it fits in
``float32[12]``; worlds are drawn from the same distribution as the prior.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.games.beastybar.actions import ACTION_CARD_SPECIES
from beastybar_jax.games.beastybar.observe import _shuffle_hidden
from beastybar_jax.games.beastybar.state import State
from beastybar_jax.games.base import as_player

Policy = Callable[[State], jax.Array]
"""``policy(states[N]) -> logits float32[N, A]`` for each state's player to move; the
observer's model of the opponent (it must only observe the state for its player to move)."""

_CERTAIN = 1e-6  # a probability this close to 1 is certainty; weights never fall below it
_FIT_STEPS = 40  # of iterative proportional scaling: enough for float32 on 12 species


def unseen_species(state: State, player) -> jax.Array:
    """``bool[12]`` the species of ``player``'s opponent not yet played: hand and deck
    together, known to ``player`` as a set."""
    opponent = 1 - jnp.asarray(player, jnp.int32)
    species = jnp.arange(C.NUM_SPECIES)
    in_deck = jnp.any(state.deck[opponent][:, None] == species[None, :], axis=0)
    return state.hand[opponent] | in_deck


def uniform_belief(state: State, player) -> jax.Array:
    """``float32[12]`` what ``player`` knows of the opponent's hand with no move seen: each
    unseen species held with probability hand size / unseen count (``sample_world``'s)."""
    opponent = 1 - jnp.asarray(player, jnp.int32)
    unseen = unseen_species(state, player)
    hand_size = jnp.sum(state.hand[opponent])
    return jnp.where(unseen, hand_size / jnp.maximum(jnp.sum(unseen), 1), 0.0).astype(jnp.float32)


def _elementary(weights: jax.Array, reverse: bool) -> jax.Array:
    """``float32[13, 5]``: row ``i`` holds the elementary symmetric sums ``e_0..e_4`` of
    ``weights[i:]`` (``reverse``) or of ``weights[:i]``: the weights of all hands of 0 to 4
    cards drawn from those species."""
    empty = jnp.zeros(C.HAND_SIZE + 1, jnp.float32).at[0].set(1.0)

    def add(sums, weight):  # e_k(S + {x}) = e_k(S) + w_x e_{k-1}(S)
        sums = sums + weight * jnp.concatenate([jnp.zeros(1), sums[:-1]])
        return sums, sums

    _, rows = jax.lax.scan(add, empty, weights, reverse=reverse)
    return jnp.concatenate([rows, empty[None]]) if reverse else jnp.concatenate([empty[None], rows])


def _inclusion(weights: jax.Array, size) -> jax.Array:
    """``float32[12]`` the probability that each species is in a hand of ``size`` drawn with
    probability proportional to the product of its species' ``weights``."""
    suffix, prefix = _elementary(weights, reverse=True), _elementary(weights, reverse=False)
    # e_{size-1} of every species but x: prefix before x times suffix after x.
    k = jnp.arange(C.HAND_SIZE + 1)
    pairs = (k[:, None] + k[None, :]) == (size - 1)  # [j, size-1-j]
    without = jnp.einsum("xj,xk,jk->x", prefix[:-1], suffix[1:], pairs.astype(jnp.float32))
    total = suffix[0, jnp.clip(size, 0, C.HAND_SIZE)]
    return jnp.where(size > 0, weights * without / jnp.maximum(total, jnp.finfo(jnp.float32).tiny), 0.0)


def _hand_weights(belief: jax.Array, pool: jax.Array, size) -> jax.Array:
    """``float32[12]`` weights (0 off ``pool``) under which a hand of ``size`` species of
    ``pool``, drawn with probability proportional to the product of its weights, holds each
    species with probability ``belief``: the most even distribution over hands with the
    belief's per-card probabilities (fitted by iterative proportional scaling)."""
    target = jnp.clip(belief, _CERTAIN, 1.0 - _CERTAIN)

    def scale(weights, _):
        weights = jnp.where(pool, weights * target / jnp.maximum(_inclusion(weights, size), _CERTAIN), 0.0)
        return jnp.where(pool, jnp.maximum(weights / jnp.max(weights), _CERTAIN), 0.0), None

    weights, _ = jax.lax.scan(scale, jnp.where(pool, target / (1.0 - target), 0.0), None, length=_FIT_STEPS)
    return weights


def _draw(weights: jax.Array, size, key: jax.Array) -> jax.Array:
    """``bool[12]`` a hand of ``size`` species with positive ``weights``, drawn with probability
    proportional to the product of its weights (species by species, each kept with its exact
    conditional probability)."""
    suffix = _elementary(weights, reverse=True)
    uniform = jax.random.uniform(key, weights.shape)

    def visit(left, species):
        keep_weight = weights[species] * suffix[species + 1, jnp.maximum(left - 1, 0)]
        keep = (left > 0) & (uniform[species] * suffix[species, left] < keep_weight)
        return left - keep.astype(left.dtype), keep

    _, hand = jax.lax.scan(visit, jnp.asarray(size, jnp.int32), jnp.arange(C.NUM_SPECIES))
    return hand


def _certain_and_weights(belief: jax.Array, unseen: jax.Array, hand_size):
    """The unseen species the belief is sure of (``bool[12]``) and the weights of the others
    (:func:`_hand_weights`) for the rest of a hand of ``hand_size``."""
    certain = unseen & (belief >= 1.0 - _CERTAIN)
    pool = unseen & ~certain
    return certain, _hand_weights(belief, pool, hand_size - jnp.sum(certain))


def draw_hand(belief: jax.Array, unseen: jax.Array, hand_size, key: jax.Array) -> jax.Array:
    """``bool[12]`` a hand of ``hand_size`` of the ``unseen`` species drawn from ``belief``:
    from the most even distribution over hands that holds each species with the probability
    the belief gives it (species the belief is sure of are always in it)."""
    certain, weights = _certain_and_weights(belief, unseen, hand_size)
    return certain | _draw(weights, hand_size - jnp.sum(certain), key)


def with_opponent_hand(state: State, player, hand: jax.Array, key: jax.Array) -> State:
    """``state`` as ``player`` may imagine it: the opponent holding ``hand`` (``bool[12]``, a
    subset of their unseen species of their hand's size), the rest of their unseen species
    their deck, and both decks in random order."""
    player = as_player(player, C.NUM_PLAYERS)
    own_key, opponent_key = jax.random.split(key)
    species = jnp.arange(C.NUM_SPECIES)
    # sample_world's shuffle, with no card kept for a hand.
    _, own_deck = _shuffle_hidden(own_key, jnp.any(state.deck[player][:, None] == species[None, :], axis=0), 0)
    _, opponent_deck = _shuffle_hidden(opponent_key, unseen_species(state, player) & ~hand, 0)
    is_player = (jnp.arange(C.NUM_PLAYERS) == player)[:, None]
    return state.replace(hand=jnp.where(is_player, state.hand, hand[None, :]),
                         deck=jnp.where(is_player, own_deck[None, :], opponent_deck[None, :]))


def sample_world_from_belief(state: State, player, key: jax.Array, belief: jax.Array) -> State:
    """A full state for ``player``: their hand kept, their deck reshuffled, the opponent's
    hand drawn from ``belief`` (:func:`draw_hand`) and the opponent's other unseen species
    their deck in random order. With :func:`uniform_belief` this is ``sample_world``'s
    distribution. ``player`` is checked as in ``sample_world``."""
    player = as_player(player, C.NUM_PLAYERS)
    hand_key, deck_key = jax.random.split(key)
    hand = draw_hand(belief, unseen_species(state, player), jnp.sum(state.hand[1 - player]), hand_key)
    return with_opponent_hand(state, player, hand, deck_key)


def _move_probability(logits: jax.Array, legal: jax.Array, action: jax.Array, epsilon: float) -> jax.Array:
    """``float32[N]`` the probability of ``action`` under the softmax of ``logits`` over the
    ``legal`` actions, mixed with a uniform choice among them (weight ``epsilon``), so a
    model that is sure and wrong cannot rule a hand out."""
    masked = jnp.where(legal, logits, -jnp.inf)
    probabilities = jax.nn.softmax(masked, axis=-1)
    chosen = jnp.take_along_axis(probabilities, action[:, None], axis=-1)[:, 0]
    return (1.0 - epsilon) * chosen + epsilon / jnp.maximum(jnp.sum(legal, axis=-1), 1)


def update_belief(belief: jax.Array, observer: jax.Array, state: State, action: jax.Array, key: jax.Array,
                  policy: Policy,
                  legal_action_mask: Callable[[State], jax.Array], *, num_particles: int = 32,
                  epsilon: float = 0.1) -> jax.Array:
    """The observer's belief after the opponent plays ``action`` in ``state``.

    Args:
      belief: ``float32[G, 12]`` the observer's, before the move.
      observer: ``int32[G]`` whose belief it is (0 or 1).
      state: ``[G]`` states before the move. Rows where the observer is to move, or the game
        is over, come back unchanged: the caller may pass every game of a match.
      action: ``int32[G]`` the opponent's move.
      key: PRNG key.
      policy: the model of the opponent (:data:`Policy`), applied to ``G * num_particles``
        hypothetical states.
      legal_action_mask: the game's, for one state.
      num_particles: hands drawn per game.
      epsilon: weight of a uniform choice in the model (:func:`_move_probability`).

    Returns:
      ``float32[G, 12]``: the posterior per-species probabilities, after the played card left
      the hand and the opponent drew from their deck.
    """
    games = action.shape[0]
    observer = observer.astype(jnp.int32)
    played = jnp.asarray(ACTION_CARD_SPECIES)[jnp.clip(action, 0, len(ACTION_CARD_SPECIES) - 1)]
    played_mask = jnp.arange(C.NUM_SPECIES)[None, :] == played[:, None]  # [G, 12]
    unseen = jax.vmap(unseen_species)(state, observer)  # [G, 12]
    hand_size = jnp.sum(jnp.take_along_axis(state.hand, (1 - observer)[:, None, None], axis=1)[:, 0], axis=-1)
    hand_keys, deck_keys = jax.random.split(key)
    hand_keys = jax.random.split(hand_keys, (games, num_particles))
    deck_keys = jax.random.split(deck_keys, (games, num_particles))

    def particles_of(belief, unseen, hand_size, played_mask, keys):
        # The prior over hands (draw_hand's) given that it holds the card played: the same
        # weights, one card fewer to draw.
        certain, weights = _certain_and_weights(belief, unseen, hand_size)
        required = certain | played_mask
        weights = jnp.where(required, 0.0, weights)
        return jax.vmap(lambda k: required | _draw(weights, hand_size - jnp.sum(required), k))(keys)

    hands = jax.vmap(particles_of)(belief, unseen, hand_size, played_mask, hand_keys)  # [G, M, 12]

    def positions_of(state, observer, hands, keys):
        return jax.vmap(lambda h, k: with_opponent_hand(state, observer, h, k))(hands, keys)

    positions = jax.vmap(positions_of)(state, observer, hands, deck_keys)  # [G, M]
    flat = jax.tree.map(lambda x: x.reshape(games * num_particles, *x.shape[2:]), positions)
    logits = policy(flat).astype(jnp.float32)
    legal = jax.vmap(legal_action_mask)(flat)
    likelihood = _move_probability(logits, legal, jnp.repeat(action, num_particles), epsilon)
    weights = likelihood.reshape(games, num_particles)
    total = jnp.sum(weights, axis=-1, keepdims=True)
    # A model that rules out every hand drawn (possible with epsilon 0) teaches nothing.
    weights = jnp.where(total > 0, weights / jnp.where(total > 0, total, 1.0), 1.0 / num_particles)
    posterior = jnp.sum(weights[:, :, None] * hands, axis=1)  # [G, 12], 1 on the played card

    # The card played leaves the hand; the opponent draws one of their deck, uniformly.
    deck_size = jnp.sum(unseen, axis=-1) - hand_size
    left = unseen & ~played_mask
    drawn = jnp.where(deck_size[:, None] > 0, (1.0 - posterior) / jnp.maximum(deck_size, 1)[:, None], 0.0)
    after = jnp.where(left, jnp.clip(posterior + drawn, 0.0, 1.0), 0.0)
    moved = ~state.terminated & (observer != state.current_player)
    return jnp.where(moved[:, None], after, belief).astype(jnp.float32)
