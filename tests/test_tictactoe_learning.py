"""Ground truth for the whole AlphaZero pipeline: configs/tictactoe.yaml, trained as a user
would, learns perfect play. Search signs for both players, value targets, replay, the
learner, checkpoints and the arena all have to be right for the raw network to never
lose to the perfect player from either seat and to value the empty board as a draw.
PPO, on the same config with half its games against ``minimax``, learns to draw too."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from helpers import tictactoe_training
from beastybar_jax import arena
from beastybar_jax.agents import make_agent, network_agent
from beastybar_jax.checkpoint import load_agent
from beastybar_jax.config import load_config, read_yaml
from beastybar_jax.training.loop import TrainLoop
from beastybar_jax.games import minimax
from beastybar_jax.network import init_params

pytestmark = pytest.mark.slow  # the tic-tac-toe training run (CI runs it; the quick loop skips it)


@pytest.fixture(scope="module")
def run():
    return tictactoe_training.trained_run()


@functools.lru_cache(maxsize=None)
def match_against_minimax(game, network):
    """``play(params, deal_keys, key) -> MatchOutcomes``: the raw policy against the perfect
    player, compiled once per network (the AlphaZero and PPO runs share theirs)."""
    minimax = make_agent("minimax", game=game)
    return jax.jit(lambda params, deals, key: arena.play_games(network_agent(network, params, game=game), minimax,
                                                               deals, key, game=game))


def losses_to_minimax(game, network, params, num_deals: int = 500) -> np.ndarray:
    """``int[2]`` games lost to minimax out of ``num_deals`` from the first and the second seat."""
    deal_key, play_key = jax.random.split(jax.random.key(2026))
    outcomes = jax.device_get(match_against_minimax(game, network)(params, jax.random.split(deal_key, num_deals),
                                                                   play_key))
    seat, reward = np.asarray(outcomes.agent_seat), np.asarray(outcomes.reward)
    assert outcomes.terminated.all() and not outcomes.illegal.any()
    assert (reward <= 0).all()  # minimax never loses
    return np.array([int((reward[seat == first_or_second] < 0).sum()) for first_or_second in (0, 1)])


def assert_never_loses_to_minimax(game, network, params, num_deals: int = 500) -> None:
    """``num_deals`` games from each seat: no loss (and, as minimax never loses either,
    nothing but draws: perfect play on both sides)."""
    lost = losses_to_minimax(game, network, params, num_deals)
    assert (lost == 0).all(), f"lost {lost[0]} games from the first seat, {lost[1]} from the second"


def test_the_raw_network_never_loses_to_minimax_from_either_seat(run):
    model = load_agent(run["run_dir"])  # the checkpoint, as users load it
    assert_never_loses_to_minimax(run["game"], model.network, model.params)


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

    fresh = init_params(network, jax.random.key(1), game.observation_size)
    trained, untrained = optimal_share(run["params"]), optimal_share(fresh)
    assert trained >= 0.8 and trained >= untrained + 0.2, (trained, untrained)


def test_ppo_learns_to_draw_against_minimax(tmp_path):
    """PPO on tic-tac-toe (the score-margin target in the game's own scale), half its games
    in self-play and half against minimax: the raw policy then loses at most a fifth of its
    games from either seat, and a quarter as many as an untrained network at most."""
    # The tic-tac-toe config's network and search, without its alphazero: section (a PPO run
    # refuses keys it would ignore).
    data = {k: v for k, v in read_yaml(tictactoe_training.CONFIG).items() if k != "alphazero"}
    (tmp_path / "ppo_tictactoe.yaml").write_text(yaml.safe_dump(data))
    config = load_config(tmp_path / "ppo_tictactoe.yaml", [
        f"run_dir={tmp_path / 'run'}", "tensorboard=false", "algorithm=ppo", "num_iterations=240", "checkpoint_every=0",
        "warmup_steps=0", "num_games=64", "ppo.rollout_length=9", "ppo.opponents=[self, minimax]",
        "ppo.opponent_weights=[0.5, 0.5]", "ppo.num_epochs=4", "ppo.num_minibatches=2"])
    loop = TrainLoop(config, console=False)
    state = jax.device_get(loop.run())
    loop.close()
    game, network = loop.trainer.game, loop.trainer.network
    trained = losses_to_minimax(game, network, state.params)
    untrained = losses_to_minimax(game, network, init_params(network, jax.random.key(1), game.observation_size))
    print("losses to minimax from the first / second seat, trained", trained, "untrained", untrained)
    # Whether this short run ends in perfect play from the second seat depends on the seed and
    # on the CPU's floating point (seen: 0 to 57 losses in 500); that it has learned does not.
    assert trained.max() <= 100 and trained.sum() <= untrained.sum() / 4, (trained, untrained)
