"""PPO (``algorithm: ppo``): advantages along each seat's own decisions against a plain
reference, the opponent split, a policy that sees observations only, exact resume,
checkpoints usable as agents and as an exploiter's opponent."""

from __future__ import annotations

import atexit
import functools
import pathlib
import shutil
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import tiny_training
from helpers import random_playout
from beastybar_jax.training.loop import TrainLoop
from beastybar_jax.training.trainer import Trainer, make_trainer
from beastybar_jax.agents import make_agent
from beastybar_jax.arena import play_match
from beastybar_jax.config import ConfigError, load_config
from beastybar_jax.games import get_game
from beastybar_jax.network import NetworkConfig, init_params, make_network
from beastybar_jax.ppo import rollout
from beastybar_jax.ppo.algorithm import build_opponents
from beastybar_jax.ppo.loss import advantages
from beastybar_jax.checkpoint import Checkpointer, load_agent
from beastybar_jax.training.metrics import read_jsonl

PPO_QUICK = tiny_training.REPO_ROOT / "configs" / "ppo_quick.yaml"
# A few seconds of PPO: 8 games (4 self-play, 2 against a 2-snapshot pool refreshed every
# iteration, 2 against random) x 8 moves, 2 epochs x 2 minibatches.
TINY_PPO = ["num_games=8", "ppo.rollout_length=8", "ppo.num_epochs=2", "ppo.num_minibatches=2",
            "network.width=32", "network.depth=1", "ppo.opponents=[self,pool,random]",
            "ppo.opponent_weights=[2,1,1]", "ppo.pool_size=2", "ppo.pool_refresh_every=1", "num_iterations=6",
            "checkpoint_every=3", "tensorboard=false", "decay_steps=100"]


def tiny_ppo_config(run_dir, *overrides: str):
    return load_config(PPO_QUICK, [f"run_dir={run_dir}", *TINY_PPO, *overrides])


@functools.lru_cache(maxsize=None)
def tiny_trainer() -> Trainer:
    return make_trainer(tiny_ppo_config("unused"), compiler_options=tiny_training.FAST_COMPILE)


@functools.lru_cache(maxsize=None)
def tiny_full_run() -> dict:
    run_dir = pathlib.Path(tempfile.mkdtemp(prefix="tiny_ppo_"))
    atexit.register(shutil.rmtree, run_dir, ignore_errors=True)
    config = tiny_ppo_config(run_dir)
    loop = TrainLoop(config, trainer=tiny_trainer(), console=False)
    initial_pool = jax.device_get(loop.state.pool)
    state = jax.device_get(loop.run())
    loop.close()
    return dict(config=config, run_dir=run_dir, state=state, initial_pool=initial_pool,
                metrics=read_jsonl(str(run_dir / "metrics.jsonl")))


# ----------------------------------------------------------------------------- advantages


def reference_advantages(t, gamma, lam):
    """Per slot, cut the moves into games at ``done``; per game and seat, list the seat's
    learner decisions and walk them backwards: the successor of the last one is the
    game's end (reward = the seat's outcome) or, when the game runs past the rollout,
    unknown (weight 0, advantage 0, its value still bootstraps the one before)."""
    steps, slots = t["value"].shape
    advantage, weight = np.zeros((steps, slots)), np.zeros((steps, slots))
    aux_target, aux_weight = np.zeros((steps, slots)), np.zeros((steps, slots))
    for b in range(slots):
        games, start = [], 0
        for i in range(steps):
            if t["done"][i, b]:
                games.append((start, i, True))
                start = i + 1
        if start < steps:
            games.append((start, steps - 1, False))
        for first, last, ended in games:
            for seat in range(t["outcome"].shape[-1]):
                decisions = [i for i in range(first, last + 1) if t["learner"][i, b] and t["player"][i, b] == seat]
                following_value, following_advantage = None, None
                for n, i in enumerate(reversed(decisions)):
                    if n == 0 and not ended:
                        following_value, following_advantage = t["value"][i, b], 0.0
                        continue
                    if n == 0:
                        delta = t["outcome"][last, b, seat] - t["value"][i, b]
                        advantage[i, b] = delta
                    else:
                        delta = gamma * following_value - t["value"][i, b]
                        advantage[i, b] = delta + gamma * lam * following_advantage
                    weight[i, b] = 1.0
                    if ended:
                        aux_target[i, b], aux_weight[i, b] = t["margin"][last, b, seat], 1.0
                    following_value, following_advantage = t["value"][i, b], advantage[i, b]
    return advantage, weight, aux_target, aux_weight


@pytest.mark.parametrize("gamma, lam", [(1.0, 0.95), (0.9, 0.5)])
def test_advantages_follow_each_seats_own_decisions(gamma, lam):
    rng = np.random.default_rng(0)
    steps, slots = 40, 6
    player = rng.integers(0, 2, (steps, slots))
    # slots 0-2: self-play (every move is a learner decision), 3-5: a learner seat per game
    learner = np.concatenate([np.ones((steps, 3), bool), rng.random((steps, 3)) < 0.5], axis=1)
    done = rng.random((steps, slots)) < 0.12
    first = rng.integers(-1, 2, (steps, slots)).astype(np.float32)
    outcome = np.where(done[..., None], np.stack([first, -first], -1), 0.0).astype(np.float32)
    margin = np.where(done[..., None], rng.normal(size=(steps, slots, 2)), 0.0).astype(np.float32)
    t = dict(value=rng.uniform(-1, 1, (steps, slots)).astype(np.float32), player=player, learner=learner,
             done=done, outcome=outcome, margin=margin)
    transitions = rollout.Transitions(
        observation=jnp.zeros((steps, slots, 1)), legal_mask=jnp.ones((steps, slots, 2), bool),
        action=jnp.zeros((steps, slots), jnp.int32), log_prob=jnp.zeros((steps, slots)),
        value=jnp.asarray(t["value"]), player=jnp.asarray(player, jnp.int32), learner=jnp.asarray(learner),
        done=jnp.asarray(done), outcome=jnp.asarray(outcome), margin=jnp.asarray(margin))
    got = jax.device_get(jax.jit(advantages, static_argnums=(1, 2))(transitions, gamma, lam))
    advantage, weight, aux_target, aux_weight = reference_advantages(t, gamma, lam)
    assert 0 < weight.sum() < learner.sum()  # some decisions truncated, most trained
    np.testing.assert_array_equal(got.weight, weight)
    np.testing.assert_allclose(got.advantage, advantage, atol=1e-5)
    np.testing.assert_allclose(got.returns, np.where(weight > 0, advantage + t["value"], got.returns), atol=1e-5)
    np.testing.assert_array_equal(got.aux_weight, aux_weight)
    np.testing.assert_allclose(got.aux_target * aux_weight, aux_target, atol=1e-6)


def test_a_winning_last_move_is_credited_to_the_winner_and_charged_to_the_loser():
    # One game: seat 0, seat 1, seat 0 moves; seat 0's last move wins. Values all 0.
    steps = 3
    transitions = rollout.Transitions(
        observation=jnp.zeros((steps, 1, 1)), legal_mask=jnp.ones((steps, 1, 2), bool),
        action=jnp.zeros((steps, 1), jnp.int32), log_prob=jnp.zeros((steps, 1)), value=jnp.zeros((steps, 1)),
        player=jnp.asarray([[0], [1], [0]], jnp.int32), learner=jnp.ones((steps, 1), bool),
        done=jnp.asarray([[False], [False], [True]]),
        outcome=jnp.asarray([[[0, 0]], [[0, 0]], [[1, -1]]], jnp.float32), margin=jnp.zeros((steps, 1, 2)))
    got = advantages(transitions, 1.0, 1.0)
    np.testing.assert_allclose(got.advantage[:, 0], [1.0, -1.0, 1.0])  # the loser's move led to the loss
    np.testing.assert_array_equal(got.weight[:, 0], [1, 1, 1])


# ----------------------------------------------------------------------------- config


def test_opponent_slots_split_the_games_and_bad_mixtures_name_the_key():
    config = load_config(PPO_QUICK)
    assert config.algorithm == "ppo"
    assert config.ppo.opponent_slots(100) == (("self", 76), ("pool", 24))  # 25 -> a multiple of pool_size 4
    mixed = load_config(PPO_QUICK, ["ppo.opponents=[self,pool,heuristic,outcome_heuristic]",
                                    "ppo.opponent_weights=[0.5,0.25,0.125,0.125]"])
    assert mixed.ppo.opponent_slots(100) == (("self", 51), ("pool", 24), ("heuristic", 13), ("outcome_heuristic", 12))
    exploiter = load_config(PPO_QUICK, ["ppo.opponent=heuristic"])
    assert exploiter.ppo.opponent_slots(128) == (("heuristic", 128),)
    for overrides, fragment in [
        (["ppo.opponent_weights=[1,1,1]"], "'ppo.opponent_weights' needs one weight per entry"),
        (["ppo.opponents=[self,self]", "ppo.opponent_weights=[1,1]"], "'ppo.opponents' lists a kind twice"),
        (["num_games=4", "ppo.opponents=[self,pool]", "ppo.opponent_weights=[1,1]"],
         "leaves it no game slot (and the pool needs a multiple of pool_size = 4)"),
        (["ppo.num_minibatches=3"], "'ppo.num_minibatches' (3) must divide"),
        (["ppo.gae_lambda=1.5"], "'ppo.gae_lambda' must be in [0, 1]"),
        (["ppo.opponent=self"], "'ppo.opponent' must be a frozen agent spec"),
        (["ppo.clip=0.1"], "unknown config key 'ppo.clip'"),
    ]:
        with pytest.raises(ConfigError) as info:
            load_config(PPO_QUICK, overrides)
        assert fragment in str(info.value), (overrides, str(info.value))


def test_unknown_opponent_agents_fail_before_compiling():
    config = load_config(PPO_QUICK, ["ppo.opponent=heuristc"])
    game = get_game(config.game)
    with pytest.raises(ConfigError, match="config key 'ppo.opponent': unknown agent 'heuristc'"):
        build_opponents(config, game, make_network(config.network, game))


# ----------------------------------------------------------------------------- observations only


def test_the_learner_acts_on_its_observation_only():
    """Re-dealing every card the mover cannot see (sample_world for the mover) changes
    neither the rollout's learner move, nor its probability, nor its value."""
    game = get_game("beastybar")
    before, _, _ = random_playout(64)(jax.random.key(5))  # compiled once for test_observe.py too
    states = jax.tree.map(lambda x: x[9], before)  # turn 9 of 64 games, all still running
    assert not np.any(np.asarray(states.terminated))
    redeal = jax.jit(jax.vmap(game.sample_world), compiler_options=tiny_training.FAST_COMPILE)
    worlds = redeal(states, states.current_player, jax.random.split(jax.random.key(6), 64))
    opponent_hidden = lambda s: np.asarray(s.hand)[np.arange(64), 1 - np.asarray(s.current_player)]  # noqa: E731
    assert np.any(opponent_hidden(states) != opponent_hidden(worlds))  # the hidden cards did change

    network = make_network(NetworkConfig(width=32, depth=1), game)
    params = init_params(network, jax.random.key(0), game.observation_size)
    config = load_config(PPO_QUICK, ["num_games=64", "ppo.opponents=[self]", "ppo.opponent_weights=[1]"])
    opponents = rollout.make_opponents(config.ppo, 64, game, network, make_agent)

    @functools.partial(jax.jit, compiler_options=tiny_training.FAST_COMPILE)
    def first_move(states, key):
        games = rollout.Games(states=states, learner_seat=jnp.zeros(64, jnp.int32), length=jnp.zeros(64, jnp.int32))
        _, transitions, _ = rollout.play(game, network, params, None, opponents, games, key, 1)
        return transitions

    a, b = first_move(states, jax.random.key(7)), first_move(worlds, jax.random.key(7))
    assert np.all(np.asarray(a.learner))
    np.testing.assert_array_equal(a.observation, b.observation)
    np.testing.assert_array_equal(a.action, b.action)
    np.testing.assert_array_equal(a.log_prob, b.log_prob)
    np.testing.assert_array_equal(a.value, b.value)
    assert len(set(np.asarray(a.action[0]).tolist())) > 3  # a sampled, not a constant, policy


def test_the_score_margin_target_is_in_the_games_own_scale():
    """The aux target is ``score_margin / game.score_margin_scale``, as in AlphaZero: for
    tic-tac-toe (margin = outcome, scale 1) the +1 / 0 / -1 result itself, not a tenth of it."""
    game = get_game("tictactoe")
    network = make_network(NetworkConfig(width=32, depth=1), game)
    params = init_params(network, jax.random.key(0), game.observation_size)
    config = load_config(PPO_QUICK, ["game=tictactoe", "num_games=32", "ppo.opponents=[self]", "ppo.opponent_weights=[1]"])
    opponents = rollout.make_opponents(config.ppo, 32, game, network, make_agent)
    games = rollout.Games(states=jax.vmap(game.init)(jax.random.split(jax.random.key(0), 32)),
                          learner_seat=jnp.zeros(32, jnp.int32), length=jnp.zeros(32, jnp.int32))
    play = jax.jit(lambda g, k: rollout.play(game, network, params, None, opponents, g, k, game.max_game_length)[1],
                   compiler_options=tiny_training.FAST_COMPILE)
    t = jax.device_get(play(games, jax.random.key(1)))
    done = np.asarray(t.done)
    assert done.sum() >= 32 and np.abs(np.asarray(t.outcome)[done]).max() == 1  # every game ended, some won
    np.testing.assert_array_equal(np.asarray(t.margin)[done], np.asarray(t.outcome)[done])
    assert not np.asarray(t.margin)[~done].any()


# ----------------------------------------------------------------------------- training, resume, agents


@pytest.mark.slow
def test_tiny_run_trains_refreshes_the_pool_and_reports_per_opponent():
    run = tiny_full_run()
    metrics = run["metrics"]
    assert [m["iteration"] for m in metrics] == list(range(1, 7))
    assert all(np.isfinite(m["loss"]) and m["grad_norm"] > 0 and m["moves"] == 64 for m in metrics)
    assert all(m["trained_moves"] <= m["learner_moves"] < m["moves"] for m in metrics)  # random's moves are not
    assert sum(m["games_vs_random"] for m in metrics) > 0 and "win_rate_vs_pool" in metrics[-1]
    assert int(run["state"].num_updates) == 6 * 2 * 2
    # With pool_refresh_every=1 and 2 snapshots, each ring entry now holds a trained network.
    for ring, initial in zip(jax.tree.leaves(run["state"].pool), jax.tree.leaves(run["initial_pool"])):
        assert not np.array_equal(ring[0], initial[0]) and not np.array_equal(ring[1], initial[1])


@pytest.mark.slow
def test_interrupt_then_resume_equals_one_uninterrupted_run(tmp_path):
    full = tiny_full_run()
    config = tiny_ppo_config(tmp_path / "resumed")

    def ctrl_c(loop, iteration, metrics):
        if iteration == 3:
            raise KeyboardInterrupt

    loop = TrainLoop(config, trainer=tiny_trainer(), console=False, hooks=[ctrl_c])
    with pytest.raises(KeyboardInterrupt):
        loop.run()
    loop.close()
    assert Checkpointer(tmp_path / "resumed").latest_step() == 3
    loop = TrainLoop(config, resume=True, trainer=tiny_trainer(), console=False)
    assert loop.start_iteration == 3
    state = jax.device_get(loop.run())
    loop.close()
    jax.tree.map(np.testing.assert_array_equal, state, full["state"])  # params, optimizer, games, pool, key
    resumed = read_jsonl(str(tmp_path / "resumed" / "metrics.jsonl"))
    for m in resumed:
        reference = full["metrics"][m["iteration"] - 1]
        assert {k: v for k, v in m.items() if not k.startswith(("time", "iteration_", "moves_per", "total_"))} == \
            {k: v for k, v in reference.items() if not k.startswith(("time", "iteration_", "moves_per", "total_"))}


@pytest.mark.slow
def test_a_ppo_checkpoint_is_an_agent_and_an_exploiters_opponent():
    run = tiny_full_run()
    model = load_agent(run["run_dir"])
    assert model.config.algorithm == "ppo" and model.iteration == 6
    jax.tree.map(np.testing.assert_array_equal, model.params, run["state"].params)
    agent = make_agent(f"checkpoint:{run['run_dir']}")
    result = play_match(agent, make_agent("random"), 4, jax.random.key(0), game=get_game("beastybar"))
    assert result.games == 8 and result.illegal_moves == 0
    exploiter = tiny_ppo_config("unused", f"ppo.opponent=checkpoint:{run['run_dir']}")
    game = get_game(exploiter.game)
    (slots,) = build_opponents(exploiter, game, make_network(exploiter.network, game))
    assert (slots.name, slots.start, slots.count) == (f"checkpoint:{run['run_dir']}", 0, 8)
    with pytest.raises(ConfigError, match="'ppo.opponent': no such run directory"):
        missing = exploiter.replace(ppo=exploiter.ppo.replace(opponent="checkpoint:/nonexistent"))
        build_opponents(missing, game, make_network(exploiter.network, game))



# ----------------------------------------------------------------------------- learning

LEARNING_ITERATIONS = 40  # of the quick config's 300: about 160 k moves


@pytest.mark.slow
def test_a_short_quick_run_beats_random_clearly(tmp_path):
    """The quick config, optimised, for a few seconds of training: the raw policy wins
    clearly more often against random than the untrained network does on the same
    duplicate deals (the untrained network plays about as random does, ~45% wins)."""
    from beastybar_jax.training.evaluation import make_evaluator

    config = load_config(PPO_QUICK, [f"run_dir={tmp_path}", "tensorboard=false", "eval_games=200"])
    loop = TrainLoop(config, console=False)
    initial_params = jax.device_get(loop.state.params)
    trained_params = jax.device_get(loop.run(until_iteration=LEARNING_ITERATIONS).params)
    loop.close()
    evaluate = make_evaluator(config, loop.trainer.game, loop.trainer.network, [make_agent("random")])  # one compile for both
    untrained, trained = evaluate(initial_params), evaluate(trained_params)  # host arrays: one signature
    assert trained["eval_random_win_rate"] >= 0.7, trained
    assert trained["eval_random_win_rate"] >= untrained["eval_random_win_rate"] + 0.15, (trained, untrained)


def test_what_an_iteration_did_not_measure_is_left_out_of_the_log():
    """Results against an opponent no game finished against, and game metrics of an
    iteration that finished none, read as 0 wins and a 0.5 score in the curves."""
    from beastybar_jax.ppo.algorithm import ALGORITHM

    metrics = dict(games_finished=0, mean_game_length=0.0, draw_rate=0.0, games_vs_random=0, win_rate_vs_random=0.0,
                   score_vs_random=0.5, games_vs_pool=3, win_rate_vs_pool=1.0, score_vs_pool=1.0, loss=0.3)
    assert set(ALGORITHM.unmeasured(metrics)) == {"win_rate_vs_random", "score_vs_random", "mean_game_length",
                                                  "draw_rate", "first_player_score"}
    assert ALGORITHM.unmeasured(dict(metrics, games_finished=4, games_vs_random=1)) == ()
