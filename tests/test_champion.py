"""The networks shipped in the package (agent specs ``champion``, trained on a GPU, and
``champion-cpu``, trained on a CPU): they load from the package's data files alone, their
configs are the documented commands', and the champion beats the heuristic clearly."""

from __future__ import annotations

import functools
import json
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import jax
import numpy as np
import pytest

from beastybar_jax import arena
from beastybar_jax.agents import AgentSpecError, make_agent
from beastybar_jax.checkpoint import ExportError, load_agent, load_exported
from beastybar_jax.games import get_game
from helpers import experiment, tiny_training

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = dict(get_game("beastybar").agents.networks)
CHAMPION_DIR, CHAMPION_CPU_DIR = Path(SHIPPED["champion"]), Path(SHIPPED["champion-cpu"])


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_shipped_networks_are_package_data(name):
    """An install (not only a checkout) carries them: pyproject's package-data globs
    match every file of each shipped network's directory."""
    directory = Path(SHIPPED[name])
    files = sorted(p for p in directory.iterdir() if p.is_file())
    assert {p.name for p in files} >= {"config.json", "params.msgpack"}
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "beastybar_jax.games.beastybar"]
    package = ROOT / "beastybar_jax" / "games" / "beastybar"
    for path in files:
        assert any(fnmatch(str(path.relative_to(package)), g) for g in globs), path
    assert json.loads((directory / "config.json").read_text())["game"] == "beastybar"


def test_the_champion_was_trained_by_configs_h100_yaml_for_a_time_budget():
    """The documented GPU command: ``configs/h100.yaml`` with a time budget, a checkpoint
    only at the end and the exact targets' solver as it then ran (500 iterations of the
    solver's own lanes), nothing else changed (docs/strength.md, "The champion")."""
    from beastybar_jax.config import config_diff, load_config

    shipped = load_exported(CHAMPION_DIR).config
    documented = load_config(ROOT / "configs" / "h100.yaml",
                             ["max_train_seconds=201", "checkpoint_every=0", "keep_checkpoints=1",
                              "alphazero.exact_value_budget=500", "alphazero.exact_value_lanes=0"])
    assert set(config_diff(shipped, documented)) <= {"run_dir"}


def test_the_cpu_champion_was_trained_by_configs_champion_yaml():
    """The documented CPU command rebuilds it bit for bit: the shipped config is
    ``configs/champion.yaml`` but for where and how often the run kept its checkpoints."""
    from beastybar_jax.config import config_diff, load_config

    shipped = load_exported(CHAMPION_CPU_DIR).config
    differences = config_diff(shipped, load_config(ROOT / "configs" / "champion.yaml"))
    assert set(differences) <= {"run_dir", "keep_checkpoints"}, differences


def test_the_cpu_champions_two_stages_are_one_run_continued_with_answers():
    """``configs/champion.yaml`` warm-starts from checkpoint 4,000 of
    ``configs/champion_replies.yaml`` (run with ``decay_steps`` of its 8,000 iterations),
    adds the mover's answers and goes on at the learning rate the first stage stopped at."""
    from beastybar_jax.config import config_diff, load_config
    from beastybar_jax.learning.optimizer import make_schedule

    first = load_config(ROOT / "configs" / "champion_replies.yaml", ["num_iterations=4000", "decay_steps=128000"])
    second = load_config(ROOT / "configs" / "champion.yaml")
    assert set(config_diff(first, second)) == {"name", "warm_start", "num_iterations", "learning_rate",
                                                 "decay_steps", "checkpoint_every",
                                                 "network.afterstates.answers"}
    assert second.warm_start == f"{first.resolved_run_dir}/checkpoints/{first.num_iterations}"
    updates = first.alphazero.updates_per_iteration
    assert first.decay_steps == 8000 * updates  # the first half of the 8,000-iteration run
    stopped_at = float(make_schedule(first, 0)(first.num_iterations * updates))
    assert second.learning_rate == pytest.approx(stopped_at, rel=0.01)
    assert second.network.afterstates.answers and not first.network.afterstates.answers


@pytest.mark.slow
def test_the_champion_beats_the_heuristic_clearly():
    """32 deals (64 games, seats swapped): the raw policy wins at least 70% (it wins
    about 90% over 1,000 games, docs/strength.md; the heuristic wins about 50% against
    its peers). ``play_match``'s core, compiled with cheap XLA optimisation: the
    champion's network compiles for most of a minute and runs the match in seconds."""
    champion, heuristic = make_agent("champion"), make_agent("heuristic")
    deal_keys = jax.random.split(jax.random.key(19), 32)
    match = functools.partial(arena.play_games, champion, heuristic, game=get_game("beastybar"))
    outcomes = jax.jit(match).lower(deal_keys, jax.random.key(20)).compile(tiny_training.FAST_COMPILE)(
        deal_keys, jax.random.key(20))
    result = arena.summarize(outcomes, champion.name, heuristic.name)
    assert result.illegal_moves == 0
    assert result.win_rate >= 0.70, result


def test_champion_specs_and_a_missing_champion(tmp_path):
    model = load_exported(CHAMPION_DIR)
    assert model.config.network.afterstates == model.network.config.afterstates
    assert model.iteration == json.loads((CHAMPION_DIR / "info.json").read_text())["iteration"]
    with pytest.raises(AgentSpecError, match="unknown option"):
        make_agent("champion@depth=3")
    with pytest.raises(AgentSpecError, match="plays beastybar"):
        make_agent("champion", game=get_game("tictactoe"))
    with pytest.raises(ExportError, match="no exported network"):
        load_exported(tmp_path)
    # checkpoint:<dir> names an exported network too (load_agent reads it).
    exported = tmp_path / "exported"
    exported.mkdir()
    for name in ("config.json", "params.msgpack"):
        (exported / name).write_bytes((CHAMPION_DIR / name).read_bytes())
    copy = load_agent(str(exported))
    assert copy.config == model.config
    assert jax.tree.all(jax.tree.map(np.array_equal, copy.params, model.params))
    assert make_agent(f"checkpoint:{exported}").name == f"checkpoint:{exported}"
    (tmp_path / "config.json").write_text((CHAMPION_DIR / "config.json").read_text())
    (tmp_path / "params.msgpack").write_bytes(b"not msgpack")
    with pytest.raises(ExportError, match="does not match the network"):
        load_exported(tmp_path)



def test_exported_parameters_match_the_network_exactly_and_never_shadow_a_run(tmp_path):
    """A parameter file with a key more, a dtype of its own or no tree at all is refused
    (the extra key was dropped, int32 weights loaded as int32, a list was an
    AttributeError); an export into a run directory is refused, as ``checkpoint:<run>``
    would then load the export instead of the run's checkpoints."""
    from flax import serialization, traverse_util

    from beastybar_jax.checkpoint import save_exported

    model = load_exported(CHAMPION_DIR)
    flat = traverse_util.flatten_dict(serialization.to_state_dict(jax.device_get(model.params)), sep="/")
    first = sorted(flat)[0]
    variants = {
        "extra": dict(flat, **{"params/spare/kernel": np.zeros(3, np.float32)}),
        "dtype": dict(flat, **{first: flat[first].astype(np.int32)}),
        "missing": {k: v for k, v in flat.items() if k != first},
    }
    (tmp_path / "config.json").write_text((CHAMPION_DIR / "config.json").read_text())
    for name, tree in variants.items():
        (tmp_path / "params.msgpack").write_bytes(serialization.msgpack_serialize(
            traverse_util.unflatten_dict(tree, sep="/")))
        with pytest.raises(ExportError, match="does not match the network") as error:
            load_exported(tmp_path)
        assert {"extra": "has the parameter params/spare/kernel", "dtype": "int32",
                "missing": f"lacks the parameter {first}"}[name] in str(error.value)
    (tmp_path / "params.msgpack").write_bytes(serialization.msgpack_serialize([1, 2, 3]))
    with pytest.raises(ExportError, match="holds a list"):
        load_exported(tmp_path)
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    with pytest.raises(ExportError, match="is a run directory"):
        save_exported(model, run)
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints"]


@pytest.mark.slow
def test_export_writes_a_champion_that_loads_to_the_same_parameters(tmp_path):
    """experiments/export_champion.py on a trained run: the files load back, with
    nothing but themselves, to the checkpoint's parameters."""
    import numpy as np

    run = tiny_training.full_run()
    export = experiment("export_champion")
    assert export.main([str(run["run_dir"]), "--out", str(tmp_path)]) == 0
    # Into a run directory: one line and exit code 2 (was a traceback), nothing written.
    assert export.main([str(tmp_path), "--out", str(run["run_dir"])]) == 2
    assert not (run["run_dir"] / "params.msgpack").exists()
    model = load_exported(tmp_path)
    assert model.config.network == run["config"].network
    for a, b in zip(jax.tree.leaves(model.params), jax.tree.leaves(run["state"].params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
