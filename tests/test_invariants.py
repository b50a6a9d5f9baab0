"""Invariants of random play: 10,240 seeded games under jit/vmap/scan, and random
deals and (possibly illegal) action sequences with hypothesis."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beastybar_jax.games import beastybar as game
from beastybar_jax.games.beastybar import cards as C

from helpers import random_playout
from helpers.positions import invariants

NUM_GAMES = 10_240
POINTS = jnp.asarray(C.POINTS)


# Its checks are slow (a 10,000-game compile): CI runs them, the quick loop skips them.
@pytest.fixture(scope="module")
def random_games():
    play = random_playout(NUM_GAMES, num_turns=C.NUM_CARDS + 1)

    @jax.jit
    def run(key):
        before, actions, final = play(key)
        states = jax.tree.map(lambda b, f: jnp.concatenate([b, f[None]]), before, final)  # [T+1, G]
        checks = jax.vmap(jax.vmap(invariants))(states)
        ok = {name: jnp.all(value) for name, value in checks.items()}
        playing = ~before.terminated  # [T, G]
        stats = dict(
            turns=jnp.sum(playing, axis=0),
            alternates=jnp.all(jnp.where(playing[1:] & playing[:-1],
                                         before.current_player[1:] != before.current_player[:-1], True)),
            final_terminated=final.terminated,
            final_rewards=final.rewards,
            final_scores=final.scores,
            final_bar=final.bar,
        )
        return ok, stats

    return jax.device_get(run(jax.random.key(2026)))


@pytest.mark.slow
def test_invariants_hold_at_every_turn_of_10000_games(random_games):
    ok, _ = random_games
    failed = [name for name, value in ok.items() if not value]
    assert not failed, failed


@pytest.mark.slow
def test_every_game_ends_within_24_turns(random_games):
    _, stats = random_games
    assert stats["final_terminated"].all()
    assert stats["turns"].max() <= C.NUM_CARDS
    assert stats["turns"].min() >= 20  # a random game needs most of the cards
    assert stats["alternates"]


@pytest.mark.slow
def test_outcomes_are_zero_sum_and_follow_bar_points(random_games):
    _, stats = random_games
    rewards, scores = stats["final_rewards"], stats["final_scores"]
    np.testing.assert_array_equal(rewards.sum(-1), 0)
    np.testing.assert_array_equal(rewards[:, 0], np.sign(scores[:, 0] - scores[:, 1]))
    np.testing.assert_array_equal(scores, (stats["final_bar"] * C.POINTS).sum(-1))
    # Random play: roughly 10% draws, both players win often.
    draws = np.mean(rewards[:, 0] == 0)
    assert 0.05 < draws < 0.2
    assert 0.35 < np.mean(rewards[:, 0] > 0) < 0.6


# --- hypothesis: arbitrary deals and arbitrary (also illegal) action sequences ----------

check_state = jax.jit(invariants)


@jax.jit
def play_sequence(hands, decks, starting_player, actions):
    """Step ``actions`` (any ints) from a deal; returns the states before each and the last."""
    state = game.init_from_deal(hands, decks, starting_player)

    def turn(state, action):
        nxt = game.step(state, action)
        return nxt, (state, nxt)

    _, (before, after) = jax.lax.scan(turn, state, actions)
    return before, after, jax.vmap(invariants)(after)


deals = st.tuples(st.permutations(range(C.NUM_SPECIES)), st.permutations(range(C.NUM_SPECIES)), st.integers(0, 1))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(deal=deals, actions=st.lists(st.integers(-2, 32), min_size=C.NUM_CARDS, max_size=C.NUM_CARDS))
def test_any_action_sequence_keeps_the_state_sound(deal, actions):
    order0, order1, starting = deal
    hands = jnp.asarray([order0[:4], order1[:4]])
    decks = jnp.asarray([order0[4:], order1[4:]])
    before, after, checks = jax.device_get(play_sequence(hands, decks, starting, jnp.asarray(actions)))
    for name, values in checks.items():
        if name != "rewards_follow_the_scores":  # a forfeit decides the game, not the bar
            assert values.all(), name
    masks = np.asarray(jax.vmap(game.legal_action_mask)(before))
    for t, a in enumerate(actions):
        was_over = before.terminated[t]
        legal = 0 <= a < game.NUM_ACTIONS and masks[t, a]
        if was_over:
            assert after.turn[t] == before.turn[t]
            np.testing.assert_array_equal(after.rewards[t], before.rewards[t])
        elif not legal:  # forfeit: the mover loses, the table stays
            mover = before.current_player[t]
            assert after.terminated[t] and after.rewards[t][mover] == -1 and after.rewards[t][1 - mover] == 1
            np.testing.assert_array_equal(after.queue[t], before.queue[t])
            np.testing.assert_array_equal(after.hand[t], before.hand[t])
        else:
            assert after.turn[t] == before.turn[t] + 1
            assert checks["rewards_follow_the_scores"][t] or not after.terminated[t]
