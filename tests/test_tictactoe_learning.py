"""Ground truth for the whole AlphaZero pipeline: configs/tictactoe.yaml, trained as a user
would, learns perfect play. Search signs for both players, value targets, replay, the
learner, checkpoints and the arena all have to be right for the raw network to never
lose to the perfect player from either seat and to value the empty board as a draw."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import tictactoe_training
from beastybar_jax import arena
from beastybar_jax.agents import make_agent
from beastybar_jax.games import minimax

pytestmark = pytest.mark.slow  # the tic-tac-toe training run (CI runs it; the quick loop skips it)


@pytest.fixture(scope="module")
def run():
    return tictactoe_training.trained_run()


def test_the_raw_network_never_loses_to_minimax_from_either_seat(run):
    game = run["game"]
    network = make_agent(f"checkpoint:{run['run_dir']}", game=game)  # the checkpoint, as users load it
    minimax = make_agent("minimax", game=game)
    deal_key, play_key = jax.random.split(jax.random.key(2026))
    play = jax.jit(lambda deals, key: arena.play_games(network, minimax, deals, key, game=game))
    outcomes = jax.device_get(play(jax.random.split(deal_key, 500), play_key))  # 1,000 games
    seat, reward = np.asarray(outcomes.agent_seat), np.asarray(outcomes.reward)
    assert outcomes.terminated.all() and not outcomes.illegal.any()
    for first_or_second in (0, 1):
        assert (seat == first_or_second).sum() == 500
        assert (reward[seat == first_or_second] >= 0).all(), f"lost from seat {first_or_second}"
    assert (reward == 0).all()  # minimax never loses either: perfect play on both sides


def test_the_empty_board_is_valued_as_a_draw(run):
    game = run["game"]
    empty = game.init(jax.random.key(0))
    value = run["network"].apply(run["params"], game.observe(empty, empty.current_player)[None]).value[0]
    assert abs(float(value)) <= 0.15, float(value)  # for the player to move: the game is a draw


def test_the_network_plays_optimal_moves_in_most_positions(run):
    """Not needed for never losing, but a learning signal on the whole game tree: the raw
    policy's move is optimal in most of the 4,520 reachable positions with a move to make,
    far above an untrained network's share."""
    game, network = run["game"], run["network"]
    states = jax.tree.map(jnp.asarray, minimax.solve(game).states)
    live = ~np.asarray(states.terminated)

    def optimal_share(params):
        logits = network.apply(params, jax.vmap(game.observe)(states, states.current_player)).policy_logits
        legal = jax.vmap(game.legal_action_mask)(states)
        choice = jnp.argmax(jnp.where(legal, logits, -jnp.inf), axis=-1)
        good = jnp.take_along_axis(jax.vmap(lambda s: minimax.optimal_actions(game, s))(states), choice[:, None], axis=1)[:, 0]
        return float(np.asarray(good)[live].mean())

    fresh = network.init(jax.random.key(1), jnp.zeros((1, game.observation_size)))
    trained, untrained = optimal_share(run["params"]), optimal_share(fresh)
    assert trained >= 0.8 and trained >= untrained + 0.2, (trained, untrained)
