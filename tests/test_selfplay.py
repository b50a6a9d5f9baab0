"""Self-play: value targets for each record's own player, only finished games reach
the buffer, and the temperature schedule."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import tiny_training
from beastybar_jax import search
from beastybar_jax.alphazero import replay, selfplay
from beastybar_jax.games.beastybar import BEASTYBAR, OBSERVATION_LAYOUT

GAME = BEASTYBAR
COUNTS = OBSERVATION_LAYOUT["counts"][0]
TURN, OBSERVER_TO_MOVE = COUNTS + 5, COUNTS + 8  # turn / 24, "observer is to move"


# ----------------------------------------------------------------------------- labelling


def test_label_trajectory_uses_each_records_own_player():
    games = jax.vmap(GAME.init)(jax.random.split(jax.random.key(0), 2))
    bar = np.zeros((2, 2, 12), bool)
    bar[0, 0, [0, 1]] = True   # game 0: player 0 has skunk + parrot = 8 points, player 1 has 0
    bar[1, 1, [11]] = True     # game 1: player 1 has the lion = 2 points
    final = games.replace(bar=jnp.asarray(bar), terminated=jnp.ones(2, bool),
                          rewards=jnp.asarray([[1.0, -1.0], [-1.0, 1.0]]))
    trajectory = replay.empty_records((2, 4), GAME.observation_size, GAME.num_actions)
    players = jnp.asarray([[0, 1, 0, 1], [1, 0, 1, 0]], jnp.int8)
    labelled = selfplay.label_trajectory(GAME, trajectory.replace(player=players), final)
    np.testing.assert_array_equal(labelled.value, [[1, -1, 1, -1], [1, -1, 1, -1]])
    np.testing.assert_allclose(labelled.score_margin, [[0.8, -0.8, 0.8, -0.8], [0.2, -0.2, 0.2, -0.2]])


# ----------------------------------------------------------------------------- temperature


def test_temperature_schedule_drops_at_the_given_move():
    moves = jnp.arange(6)
    np.testing.assert_allclose(selfplay.temperature_schedule(moves, 1.5, 3, 0.25), [1.5, 1.5, 1.5, .25, .25, .25])


def _output(weights, action):
    weights = jnp.asarray(weights, jnp.float32)
    n = weights.shape[0]
    return search.SearchOutput(action=jnp.full((n,), action, jnp.int32), action_weights=weights,
                               visit_counts=jnp.zeros(weights.shape, jnp.int32), root_value=jnp.zeros(n))


@pytest.mark.parametrize("temperature, expected_first", [(1.0, 0.7), (0.5, 0.49 / 0.58)])
def test_positive_temperature_samples_the_sharpened_search_policy(temperature, expected_first):
    n = 20000
    weights = jnp.tile(jnp.asarray([[0.7, 0.3, 0.0, 0.0]]), (n, 1))
    legal = jnp.asarray([[True, True, True, False]] * n)
    actions = jax.jit(selfplay.select_action)(_output(weights, 3), legal, jnp.full((n,), temperature),
                                              jax.random.key(1))
    actions = np.asarray(actions)
    assert set(actions.tolist()) <= {0, 1}  # zero-weight and illegal actions are never drawn
    assert abs(np.mean(actions == 0) - expected_first) < 0.02


def test_zero_temperature_plays_the_search_choice():
    weights = jnp.asarray([[0.7, 0.3, 0.0, 0.0]] * 64)
    legal = jnp.ones((64, 4), bool)
    temperature = jnp.asarray([0.0] * 32 + [1.0] * 32)
    actions = np.asarray(selfplay.select_action(_output(weights, 1), legal, temperature, jax.random.key(2)))
    assert np.all(actions[:32] == 1)  # the search's own action, not the argmax of the weights
    assert np.any(actions[32:] == 0)


# ----------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def played():
    """The self-play side of the shared tiny training run (8 games x 72 moves, Gumbel
    search, a network that trains as it goes): every slot has finished games and is
    part-way through another."""
    run = tiny_training.full_run()
    config, state = run["config"], run["state"]
    totals = dict(
        moves=sum(m["moves"] for m in run["metrics"]),
        games_finished=sum(m["games_finished"] for m in run["metrics"]),
        positions_inserted=sum(m["positions_inserted"] for m in run["metrics"]),
    )
    assert totals["moves"] == config.num_games * config.alphazero.moves_per_iteration * config.num_iterations
    assert totals["positions_inserted"] < config.alphazero.buffer_size  # nothing overwritten: all games still there
    return state.selfplay, state.replay, totals


def _games_in_buffer(buffer):
    """Split the buffer's records into games (a game starts at turn 0)."""
    size = int(buffer.size)
    records = jax.tree.map(lambda x: np.asarray(x)[:size], buffer.records)
    turns = np.rint(records.observation[:, TURN] * 24).astype(int)
    starts = np.flatnonzero(turns == 0).tolist() + [size]
    assert starts[0] == 0
    return [jax.tree.map(lambda x: x[a:b], records) for a, b in zip(starts[:-1], starts[1:])], turns


def test_only_finished_games_enter_the_buffer(played):
    state, buffer, totals = played
    games, _ = _games_in_buffer(buffer)
    assert totals["games_finished"] == len(games) >= len(state.length)  # every slot finished a game
    assert int(buffer.size) == totals["positions_inserted"] == sum(len(g.value) for g in games)
    # Each stored game is whole: turns 0, 1, ..., L-1 with 21 <= L <= 24.
    for g in games:
        length = len(g.value)
        assert 21 <= length <= 24
        np.testing.assert_array_equal(np.rint(g.observation[:, TURN] * 24), np.arange(length))
    # The moves of the games still running are held back, not in the buffer.
    pending = np.asarray(state.length)
    assert pending.sum() > 0 and np.all(pending < 21)
    assert int(buffer.size) + int(pending.sum()) == totals["moves"]


def test_value_targets_are_the_outcome_for_each_records_player(played):
    _, buffer, _ = played
    games, _ = _games_in_buffer(buffer)
    for g in games:
        assert np.all(g.observation[:, OBSERVER_TO_MOVE] == 1)  # recorded from the mover's view
        players = g.player.astype(int)
        np.testing.assert_array_equal(players[1:], 1 - players[:-1])  # Beasty Bar alternates
        # The outcome is the sign of the final bar-point margin, for the record's own player:
        np.testing.assert_array_equal(g.value, np.sign(g.score_margin))
        for p in (0, 1):
            mine, theirs = g.value[players == p], g.value[players != p]
            assert np.all(mine == mine[0]) and np.all(theirs == -mine[0])
            margins = g.score_margin[players == p]
            assert np.all(margins == margins[0])
    assert np.all(np.isin(buffer.records.value[: int(buffer.size)], [-1.0, 0.0, 1.0]))


def test_policy_targets_are_distributions_over_legal_actions(played):
    _, buffer, _ = played
    size = int(buffer.size)
    policy, legal = buffer.records.policy[:size], buffer.records.legal_mask[:size]
    np.testing.assert_allclose(policy.sum(-1), 1.0, atol=1e-5)
    assert np.all(policy[~legal] == 0)
    assert np.all(legal.sum(-1) >= 1)
