"""End-to-end training on the tiny config: the loss goes down, the aux head learns,
resume is exact, the CLI and load_agent (several devices and processes: test_distributed.py)."""

from __future__ import annotations

import pathlib
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import tiny_training, experiment
from beastybar_jax.alphazero.loss import loss_fn
from beastybar_jax.checkpoint import CheckpointError, Checkpointer, finished_steps, load_agent, warm_start_params
from beastybar_jax.games import get_game
from beastybar_jax.network import NetworkConfig, init_params, make_network
from beastybar_jax.training.loop import TrainLoop
from beastybar_jax.training.metrics import read_jsonl

pytestmark = pytest.mark.slow  # whole training runs and resumes (CI runs it; the quick loop skips it)

REPO_ROOT = tiny_training.REPO_ROOT
CLI = REPO_ROOT / "experiments" / "train.py"
COMPARED = ("loss", "policy_loss", "value_loss", "aux_loss", "games_finished", "buffer_size", "positions_inserted")


@pytest.fixture(scope="module")
def full_run():
    return tiny_training.full_run()


def _buffer_loss(params, run):
    state, config = run["state"], run["config"]
    size = int(state.replay.size)
    batch = jax.tree.map(lambda x: jnp.asarray(x[:size]), state.replay.records)
    loss, metrics = jax.jit(loss_fn, static_argnums=(1, 3, 4))(params, tiny_training.trainer().network, batch,
                                                                config.alphazero, config.network.aux_score_head)
    return {k: float(v) for k, v in metrics.items()}


def test_training_lowers_the_loss_on_its_replay_data(full_run):
    metrics = full_run["metrics"]
    assert [m["iteration"] for m in metrics] == list(range(1, full_run["config"].num_iterations + 1))
    trained = [m for m in metrics if m["trained"] == 1.0]
    assert len(trained) >= 3, "the tiny run should train on several iterations"
    assert all(np.isfinite(m["loss"]) and m["grad_norm"] > 0 for m in trained)
    # What an iteration did not measure is left out of the log, not written as a 0.
    filling = [m for m in metrics if m["trained"] == 0.0]
    assert filling and not any(k in m for m in filling for k in ("loss", "policy_loss", "grad_norm"))
    assert all("draw_rate" not in m and "mean_game_length" not in m for m in metrics if m["games_finished"] == 0)
    assert all("draw_rate" in m and "mean_game_length" in m for m in metrics if m["games_finished"] > 0)
    assert int(full_run["state"].num_updates) == len(trained) * full_run["config"].alphazero.updates_per_iteration
    before = _buffer_loss(full_run["initial_params"], full_run)
    after = _buffer_loss(full_run["state"].params, full_run)
    assert after["loss"] < before["loss"] - 0.05, (before, after)
    assert after["policy_loss"] < before["policy_loss"]
    assert after["value_loss"] < before["value_loss"]


def test_the_aux_loss_is_reported_only_where_it_counts(full_run):
    """Without the score-margin head the aux loss has weight 0: it was still logged and
    shown ("aux 0.924") beside parts that then did not add up to ``loss``."""
    state, config = full_run["state"], full_run["config"]
    batch = jax.tree.map(lambda x: jnp.asarray(x[:8]), state.replay.records)
    network = tiny_training.trainer().network
    with_head = loss_fn(state.params, network, batch, config.alphazero, True)[1]
    without = loss_fn(state.params, network, batch, config.alphazero, False)[1]
    assert "aux_loss" in with_head and "aux_loss" not in without
    assert float(without["loss"]) == pytest.approx(float(without["policy_loss"]) + config.alphazero.value_loss_weight
                                                   * float(without["value_loss"]), rel=1e-5)


def test_aux_score_head_learns_when_enabled(full_run):
    assert full_run["config"].network.aux_score_head
    initial = full_run["initial_params"]["params"]["score_head"]["kernel"]
    final = full_run["state"].params["params"]["score_head"]["kernel"]
    assert np.max(np.abs(final - initial)) > 1e-4
    assert _buffer_loss(full_run["state"].params, full_run)["aux_loss"] < \
        _buffer_loss(full_run["initial_params"], full_run)["aux_loss"]


def test_exact_policy_weight_weighs_the_policy_loss_of_exactly_labelled_positions(full_run):
    """``alphazero.exact_policy_weight``: the policy loss is the cross-entropy's mean over
    the batch weighted by it where ``Records.exact`` (1 elsewhere), recomputed here from
    the network's own logits."""

    state, config = full_run["state"], full_run["config"]
    network, params = tiny_training.trainer().network, state.params
    size = int(state.replay.size)
    batch = jax.tree.map(lambda x: jnp.asarray(x[:size]), state.replay.records)
    batch = batch.replace(exact=jnp.arange(size) % 3 == 0)  # every third position labelled exactly
    logits = np.where(batch.legal_mask, np.asarray(network.apply(params, batch.observation).policy_logits), -np.inf)
    shifted = logits - logits.max(-1, keepdims=True)
    log_policy = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    cross_entropy = -np.sum(np.asarray(batch.policy) * np.where(batch.legal_mask, log_policy, 0.0), axis=-1)
    for weight in (1.0, 4.0):
        az = config.alphazero.replace(exact_value_targets=True, exact_policy_weight=weight)
        _, metrics = loss_fn(params, network, batch, az, config.network.aux_score_head)
        weights = np.where(np.asarray(batch.exact), weight, 1.0)
        np.testing.assert_allclose(float(metrics["policy_loss"]), np.sum(weights * cross_entropy) / weights.sum(),
                                   rtol=1e-5)
    assert not np.isclose(cross_entropy[::3].mean(), cross_entropy.mean(), rtol=1e-3)  # so the weight shows


def test_interrupt_then_resume_equals_one_uninterrupted_run(full_run, tmp_path):
    config = tiny_training.tiny_config(tmp_path / "resumed")
    half = config.num_iterations // 2

    def ctrl_c(loop, iteration, metrics):
        if iteration == half:
            raise KeyboardInterrupt

    loop = TrainLoop(config, trainer=tiny_training.trainer(), console=False, hooks=[ctrl_c])
    with pytest.raises(KeyboardInterrupt):
        loop.run()
    loop.close()
    assert Checkpointer(tmp_path / "resumed").latest_step() == half

    with pytest.raises(CheckpointError, match="--resume"):  # refuses to overwrite a run
        TrainLoop(config, trainer=tiny_training.trainer(), console=False)

    loop = TrainLoop(config, resume=True, trainer=tiny_training.trainer(), console=False)
    assert loop.start_iteration == half
    state = jax.device_get(loop.run())
    loop.close()
    jax.tree.map(np.testing.assert_array_equal, state.params, full_run["state"].params)
    jax.tree.map(np.testing.assert_array_equal, state.replay, full_run["state"].replay)
    resumed = read_jsonl(str(tmp_path / "resumed" / "metrics.jsonl"))
    for m in resumed:
        reference = full_run["metrics"][m["iteration"] - 1]
        assert {k: m.get(k) for k in COMPARED} == {k: reference.get(k) for k in COMPARED}


def test_a_warm_start_takes_the_parameters_the_source_shares(full_run, tmp_path):
    """``warm_start`` starts a new run from another's parameters (with a fresh optimizer
    state): all of them where the networks match; where they differ, those with the same
    path and shape, the rest fresh (a deeper torso's new block). Clear errors for a source
    that cannot be read or whose network is of another size."""
    config = tiny_training.tiny_config(tmp_path / "warm", f"warm_start={full_run['run_dir']}")
    loop = TrainLoop(config, trainer=tiny_training.trainer(), console=False)
    jax.tree.map(np.testing.assert_array_equal, jax.device_get(loop.state.params), full_run["state"].params)
    assert not any(np.asarray(x).any() for x in jax.tree.leaves(jax.device_get(loop.state.opt_state)))  # fresh
    loop.close()
    game = get_game("beastybar")

    def fresh(**network):
        return jax.device_get(init_params(make_network(NetworkConfig(**network), game), jax.random.key(1),
                                          game.observation_size))

    deeper = fresh(width=32, depth=2)
    params, taken, kept = warm_start_params(deeper, str(full_run["run_dir"]))
    assert kept and all("_1" in k for k in kept) and taken == len(jax.tree.leaves(deeper)) - len(kept)
    source = full_run["state"].params["params"]
    np.testing.assert_array_equal(params["params"]["policy_head"]["kernel"], source["policy_head"]["kernel"])
    for name in kept:  # the new block as initialized
        new = [v for k, v in jax.tree_util.tree_flatten_with_path(params)[0] if jax.tree_util.keystr(k) == name]
        old = [v for k, v in jax.tree_util.tree_flatten_with_path(deeper)[0] if jax.tree_util.keystr(k) == name]
        np.testing.assert_array_equal(new[0], old[0])
    with pytest.raises(CheckpointError, match="other shapes"):
        warm_start_params(fresh(width=16, depth=1), str(full_run["run_dir"]))
    with pytest.raises(CheckpointError, match="warm_start"):
        warm_start_params(deeper, str(tmp_path / "missing"))
    # A run whose source is missing is refused before it writes anything.
    missing = tiny_training.tiny_config(tmp_path / "refused", f"warm_start={tmp_path / 'missing'}")
    with pytest.raises(CheckpointError, match="no such run directory or checkpoint"):
        TrainLoop(missing, trainer=tiny_training.trainer(), console=False)
    assert not (tmp_path / "refused").exists()
    # A deeper source into a shallower network: its last block has no place (it was dropped
    # without a word); refused on the shapes alone, before the run writes anything.
    from beastybar_jax.checkpoint import TrainedModel, save_exported

    deep_config = tiny_training.tiny_config(tmp_path / "unused", "network.depth=2")
    exported = save_exported(TrainedModel(network=make_network(deep_config.network, game), params=deeper,
                                          config=deep_config, iteration=0, path="", game=game), tmp_path / "deep")
    with pytest.raises(CheckpointError, match="parameter arrays have no place in this run's network"):
        warm_start_params(fresh(width=32, depth=1), exported)
    too_deep = tiny_training.tiny_config(tmp_path / "refused_deep", f"warm_start={exported}")
    with pytest.raises(CheckpointError, match="have no place"):
        TrainLoop(too_deep, trainer=tiny_training.trainer(), console=False)
    assert not (tmp_path / "refused_deep").exists()
    with pytest.raises(CheckpointError, match="a beastybar network; this run plays tictactoe"):
        warm_start_params(deeper, exported, get_game("tictactoe"))


def test_load_agent_restores_a_usable_network(full_run):
    model = load_agent(full_run["run_dir"])
    assert model.iteration == full_run["config"].num_iterations
    assert model.config == full_run["config"]
    jax.tree.map(np.testing.assert_array_equal, model.params, full_run["state"].params)
    observations = full_run["state"].replay.records.observation[:5]
    out = model.network.apply(model.params, observations)
    assert out.policy_logits.shape == (5, 31) and out.value.shape == (5,)
    step_dir = pathlib.Path(model.path)
    assert load_agent(step_dir).iteration == model.iteration  # one checkpoint directory works too


def test_load_agent_errors_are_clear(full_run, tmp_path):
    with pytest.raises(CheckpointError, match="no such run directory"):
        load_agent(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        load_agent(tmp_path / "empty")
    corrupt = tmp_path / "corrupt"
    shutil.copytree(full_run["run_dir"], corrupt)
    steps = sorted(int(p.name) for p in (corrupt / "checkpoints").iterdir() if p.name.isdigit())
    for step in steps:  # every checkpoint damaged (a damaged latest one alone falls back: test_reliability)
        for f in (corrupt / "checkpoints" / str(step) / "params").rglob("*"):
            if f.is_file() and f.stat().st_size > 0 and f.name != "_CHECKPOINT_METADATA":
                f.write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="no intact checkpoint .* is damaged"):
        load_agent(corrupt)


def test_cli_rejects_bad_configs_before_compiling(tmp_path, capsys):
    cli = experiment("train")
    assert cli.__file__ == str(CLI)
    code = cli.main(["--config", str(tiny_training.TINY), "--set", "search.num_simulations=0"])
    assert code == 2 and "search.num_simulations" in capsys.readouterr().err
    code = cli.main(["--config", str(tiny_training.TINY), "--set", "alphazero.min_buffer_size=4096"])
    assert code == 2 and "alphazero.min_buffer_size" in capsys.readouterr().err
    code = cli.main(["--config", str(tmp_path / "nope.yaml")])
    assert code == 2 and "does not exist" in capsys.readouterr().err


def test_a_time_budget_ends_the_run_saved_and_resume_goes_on(tmp_path, monkeypatch):
    """``max_train_seconds``: the run ends, with a checkpoint of its last iteration, once its
    iterations took that long (each is timed here at a fixed 1 s), and ``--resume`` with a
    fresh budget goes on from there."""
    import itertools
    import types

    from beastybar_jax.config import load_config
    from beastybar_jax.training import loop as loop_module

    ticks = itertools.count()
    monkeypatch.setattr(loop_module, "time", types.SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    config = load_config("configs/tiny.yaml", [f"run_dir={tmp_path}", "num_iterations=6", "max_train_seconds=2",
                                                "checkpoint_every=0", "tensorboard=false"])
    for resume, iteration in ((False, 2), (True, 4)):
        loop = TrainLoop(config, console=False, resume=resume)
        try:
            loop.run()
        finally:
            loop.close()
        assert loop.iteration == iteration and finished_steps(tmp_path)[-1] == iteration
