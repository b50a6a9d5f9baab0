"""``observe`` shows exactly what a player may know; ``sample_world`` re-deals the
rest uniformly."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from beastybar_jax.games import beastybar as game
from beastybar_jax.games.beastybar import cards as C

from helpers import random_playout

observe = jax.jit(jax.vmap(game.observe))
sample_world = jax.jit(jax.vmap(game.sample_world))


@pytest.fixture(scope="module")
def positions():
    """Live mid-game states ``[N]`` (numpy) from random play."""
    before, _, _ = random_playout(64)(jax.random.key(11))
    flat = jax.tree.map(lambda x: np.asarray(x).reshape((-1,) + x.shape[2:]), before)
    return jax.tree.map(lambda x: x[~flat.terminated], flat)


def redeal_hidden(states, player, rng):
    """Same states, with ``player``'s unknowns changed: the opponent's unseen cards
    split differently between hand and deck, and both decks reordered (numpy)."""
    hand, deck = states.hand.copy(), states.deck.copy()
    for i in range(len(hand)):
        p, o = player[i], 1 - player[i]
        unseen = np.concatenate([np.flatnonzero(hand[i, o]), deck[i, o][deck[i, o] >= 0]])
        rng.shuffle(unseen)
        k = hand[i, o].sum()
        hand[i, o] = False
        hand[i, o, unseen[:k]] = True
        deck[i, o] = -1
        deck[i, o, : len(unseen) - k] = unseen[k:]
        own = deck[i, p][deck[i, p] >= 0]
        deck[i, p, : len(own)] = rng.permutation(own)
    return states.replace(hand=hand, deck=deck)


@pytest.mark.parametrize("who", ["mover", "waiting player"])
def test_observation_ignores_what_the_player_cannot_see(positions, who):
    player = positions.current_player.astype(np.int32)
    if who == "waiting player":
        player = 1 - player
    rng = np.random.default_rng(0)
    other = redeal_hidden(positions, player, rng)
    changed = np.any(other.hand != positions.hand, axis=(1, 2)) | np.any(other.deck != positions.deck, axis=(1, 2))
    assert changed.mean() > 0.5  # the test really changes hidden things
    np.testing.assert_array_equal(np.asarray(observe(positions, player)), np.asarray(observe(other, player)))


def test_observation_layout(positions):
    player = positions.current_player.astype(np.int32)
    obs = np.asarray(observe(positions, player))
    assert obs.shape == (len(player), game.OBSERVATION_SIZE)
    parts = game.split_observation(obs)
    i = np.arange(len(player))
    in_deck = (positions.deck[..., None] == np.arange(C.NUM_SPECIES)).any(-2)  # [N, 2, 12]
    np.testing.assert_array_equal(parts["own_hand"], positions.hand[i, player])
    np.testing.assert_array_equal(parts["own_deck"], in_deck[i, player])
    np.testing.assert_array_equal(parts["opponent_unseen"], positions.hand[i, 1 - player] | in_deck[i, 1 - player])
    np.testing.assert_array_equal(parts["own_bar"], positions.bar[i, player])
    np.testing.assert_array_equal(parts["opponent_thats_it"], positions.thats_it[i, 1 - player])
    queue = parts["queue"]  # [N, 4, 14]
    cards = positions.queue[:, :4].astype(int)
    occupied = cards >= 0
    np.testing.assert_array_equal(queue[..., :12].argmax(-1)[occupied], cards[occupied] % 12)
    np.testing.assert_array_equal(queue[..., 12][occupied], cards[occupied] // 12 == player[:, None].repeat(4, 1)[occupied])
    assert (queue[~occupied] == 0).all()
    np.testing.assert_array_equal(parts["counts"][:, -1], 1.0)  # observer is to move


def test_observation_changes_with_what_is_visible(positions):
    q = positions.queue.astype(int)
    k = int(np.flatnonzero((q[:, 2] >= 0) & (q[:, 0] % 12 != q[:, 1] % 12))[0])  # 3+ cards, front two differ
    base = jax.tree.map(lambda x: x[k:k + 1], positions)
    state = jax.tree.map(lambda x: x[k], positions)
    player = np.asarray([int(state.current_player)], np.int32)
    queue = np.asarray(state.queue)
    n = int((queue >= 0).sum())
    variants = []
    assert n >= 3
    q = queue.copy(); q[[0, 1]] = q[[1, 0]]  # swap two queue places
    variants.append(base.replace(queue=q[None]))
    q = queue.copy(); q[0] = (q[0] + 12) % 24  # the front card changes owner
    variants.append(base.replace(queue=q[None]))
    bar = np.asarray(state.bar).copy(); bar[1, 0] = ~bar[1, 0]
    variants.append(base.replace(bar=bar[None]))
    out = np.asarray(state.thats_it).copy(); out[0, 11] = ~out[0, 11]
    variants.append(base.replace(thats_it=out[None]))
    variants.append(base.replace(turn=base.turn + 1))
    hand = np.asarray(state.hand).copy(); p = player[0]
    held, free = np.flatnonzero(hand[p])[0], np.flatnonzero(~hand[p])[0]
    hand[p, held], hand[p, free] = False, True
    variants.append(base.replace(hand=hand[None]))
    reference = np.asarray(observe(base, player))
    for v in variants:
        assert not np.array_equal(np.asarray(observe(v, player)), reference)


def test_sample_world_keeps_what_the_player_knows(positions):
    player = positions.current_player.astype(np.int32)
    keys = jax.random.split(jax.random.key(5), len(player))
    worlds = jax.device_get(sample_world(positions, player, keys))
    i = np.arange(len(player))
    for field in ("queue", "bar", "thats_it", "current_player", "turn", "terminated", "rewards"):
        np.testing.assert_array_equal(getattr(worlds, field), getattr(positions, field), err_msg=field)
    np.testing.assert_array_equal(worlds.hand[i, player], positions.hand[i, player])
    np.testing.assert_array_equal(worlds.hand.sum(-1), positions.hand.sum(-1))
    np.testing.assert_array_equal((worlds.deck >= 0).sum(-1), (positions.deck >= 0).sum(-1))
    in_deck = lambda s: (s.deck[..., None] == np.arange(C.NUM_SPECIES)).any(-2)
    np.testing.assert_array_equal(in_deck(worlds)[i, player], in_deck(positions)[i, player])
    unseen = lambda s: s.hand[i, 1 - player] | in_deck(s)[i, 1 - player]
    np.testing.assert_array_equal(unseen(worlds), unseen(positions))
    np.testing.assert_array_equal(np.asarray(observe(worlds, player)), np.asarray(observe(positions, player)))
    # Hidden things do change.
    assert np.mean(np.any(worlds.deck != positions.deck, axis=(1, 2))) > 0.5
    # A world is a sound game state: stepping it with a legal move keeps every card once.
    from helpers.positions import invariants

    checks = jax.jit(jax.vmap(invariants))(worlds)
    assert all(bool(np.all(v)) for v in jax.device_get(checks).values())


def _position_for_uniformity():
    """P1 to move; P0 (the observer) holds 4 and has 2 in the deck; P1 holds 4 with
    3 in the deck: 35 splits x 3! orders for P1, 2! orders for P0 = 420 worlds."""
    hand = np.zeros((2, 12), bool)
    hand[0, [0, 1, 2, 3]] = True            # P0: skunk parrot kangaroo monkey
    hand[1, [5, 6, 7, 8]] = True            # P1: seal zebra giraffe snake
    deck = np.full((2, 8), -1, np.int8)
    deck[0, :2] = [4, 5]                    # P0: chameleon, seal
    deck[1, :3] = [9, 10, 11]               # P1: crocodile hippo lion
    thats_it = np.zeros((2, 12), bool)
    bar = np.zeros((2, 12), bool)
    bar[0, [6, 7, 8, 9, 10, 11]] = True     # P0 has played 6 cards, P1 5
    bar[1, [0, 1, 2, 3]] = True
    queue = np.asarray([12 + 4, -1, -1, -1, -1], np.int8)  # P1's chameleon
    return game.State(queue=jnp.asarray(queue), hand=jnp.asarray(hand), deck=jnp.asarray(deck),
                      bar=jnp.asarray(bar), thats_it=jnp.asarray(thats_it),
                      current_player=jnp.asarray(1, jnp.int8), turn=jnp.asarray(11, jnp.int8),
                      terminated=jnp.asarray(False), rewards=jnp.zeros(2, jnp.float32))


def test_sample_world_is_uniform_over_consistent_worlds():
    state = _position_for_uniformity()
    unseen = [5, 6, 7, 8, 9, 10, 11]
    worlds = {}
    for held in itertools.combinations(unseen, 4):
        rest = [s for s in unseen if s not in held]
        for opp_order in itertools.permutations(rest):
            for own_order in itertools.permutations([4, 5]):
                worlds[(held, opp_order, own_order)] = len(worlds)
    assert len(worlds) == 420
    n = 42_000
    batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), state)
    sampled = jax.device_get(sample_world(batch, jnp.zeros(n, jnp.int32), jax.random.split(jax.random.key(2026), n)))
    counts = np.zeros(len(worlds))
    for hand1, deck1, deck0 in zip(sampled.hand[:, 1], sampled.deck[:, 1], sampled.deck[:, 0]):
        key = (tuple(np.flatnonzero(hand1)), tuple(int(s) for s in deck1[:3]), tuple(int(s) for s in deck0[:2]))
        counts[worlds[key]] += 1  # KeyError = an inconsistent world
    result = stats.chisquare(counts)  # uniform expectation: 100 per world
    assert result.pvalue > 1e-3, result
    # The true deal is not favoured.
    true_world = worlds[((5, 6, 7, 8), (9, 10, 11), (4, 5))]
    assert counts[true_world] < 150


def test_sample_world_marginals_at_the_start():
    """From the first mover's view at the deal: each opponent species is in the
    opponent's hand with probability 1/3, each own deck species first with 1/8."""
    n = 24_000
    deal = game.init(jax.random.key(3))
    batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), deal)
    player = int(deal.current_player)
    worlds = jax.device_get(sample_world(batch, jnp.full(n, player), jax.random.split(jax.random.key(4), n)))
    opp_hand = worlds.hand[:, 1 - player].sum(0)  # [12]
    assert stats.chisquare(opp_hand, np.full(12, opp_hand.sum() / 12)).pvalue > 1e-3
    first = np.bincount(worlds.deck[:, player, 0], minlength=12)
    own_deck = np.asarray(deal.deck[player])
    assert set(np.flatnonzero(first)) == set(own_deck.tolist())
    assert stats.chisquare(first[own_deck]).pvalue > 1e-3
