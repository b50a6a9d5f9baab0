"""The typed training config: YAML files, --set overrides and precise errors."""

from __future__ import annotations

import pathlib
import re

import pytest

from beastybar_jax.config import (ConfigError, TrainConfig, apply_overrides, config_diff, load_config,
                                  parse_override, validate)
from beastybar_jax.network import NetworkConfig
from beastybar_jax.search import SearchConfig

CONFIGS = pathlib.Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.parametrize("name", ["tiny", "quick", "h100", "ppo_quick", "ppo_h100"])
def test_shipped_configs_load_and_validate(name):
    config = load_config(CONFIGS / f"{name}.yaml")
    assert config.name == name
    assert isinstance(config.network, NetworkConfig) and isinstance(config.search, SearchConfig)
    validate(config, num_devices=1)


def test_h100_config_is_a_large_default_network_run_with_the_champions_levers():
    config = load_config(CONFIGS / "h100.yaml")
    assert config.num_games >= 2048
    assert (config.network.width, config.network.depth) == (NetworkConfig().width, NetworkConfig().depth)
    validate(config, num_devices=8)  # splits evenly over up to 8 GPUs
    champion = load_config(CONFIGS / "champion.yaml")
    assert config.network.afterstates and champion.network.afterstates
    assert config.network.afterstates.replies == champion.network.afterstates.replies
    assert config.alphazero.exact_value_targets and config.alphazero.exact_policy_targets
    reuse = lambda c: c.alphazero.updates_per_iteration * c.alphazero.batch_size / (c.num_games * c.alphazero.moves_per_iteration)  # noqa: E731
    assert reuse(config) == pytest.approx(reuse(champion))  # SGD samples per new position


def test_overrides_reach_nested_sections_and_parse_yaml_values():
    config = load_config(CONFIGS / "tiny.yaml", [
        "search.num_simulations=8", "network.width=48", "learning_rate=1e-2", "eval_opponents=[random]",
        "tensorboard=false", "name=other",
    ])
    assert config.search.num_simulations == 8
    assert config.network.width == 48
    assert config.learning_rate == pytest.approx(1e-2)  # "1e-2" is a string in YAML 1.1: converted
    assert config.eval_opponents == ("random",)
    assert config.tensorboard is False
    assert config.resolved_run_dir == "runs/other"


def test_to_dict_from_dict_round_trip():
    config = load_config(CONFIGS / "quick.yaml", ["network.torso=attention", "search.algorithm=puct"])
    again = TrainConfig.from_dict(config.to_dict())
    assert again == config
    assert config_diff(config, again) == {}
    other = again.replace(num_games=128)
    assert config_diff(config, other) == {"num_games": (64, 128)}


@pytest.mark.parametrize("overrides, fragment", [
    (["num_gmaes=3"], "unknown config key 'num_gmaes'"),
    (["search.num_sims=3"], "unknown config key 'search.num_sims'"),
    (["num_games=lots"], "'num_games' must be an integer"),
    (["tensorboard=1"], "'tensorboard' must be true or false"),
    (["learning_rate=fast"], "'learning_rate' must be a number"),
    (["search.num_simulations=0"], "search.num_simulations"),
    (["alphazero.min_buffer_size=2048", "alphazero.buffer_size=1024"],
     "'alphazero.min_buffer_size' (2048) must not exceed buffer_size (1024)"),
    (["alphazero.buffer_size=100", "alphazero.min_buffer_size=10"],
     "'alphazero.buffer_size' (100) must hold at least one finished game"),
    (["network.torso=cnn"], "network.torso"),
    (["network.torso_kernel=pallas"], "'network.torso_kernel' must be one of auto, xla"),
    (["search.algorithm=alphabeta"], "search.algorithm"),
    (["search.value_scale=.inf"], "'search.value_scale' must be a finite number"),  # NaN root values, rc 0
    (["search.gumbel_scale=.nan"], "'search.gumbel_scale' must be a finite number"),
    (["search.pb_c_base=0"], "'search.pb_c_base' must be a finite number > 0"),
    (["eval_every=2", "eval_opponents=[]"], "would evaluate nothing"),
    (["alphazero.batch_size=0"], "'alphazero.batch_size' must be >= 1"),
    (["game=chess"], "'game' must be one of beastybar"),
    (["algorithm=dqn"], "'algorithm' must be one of alphazero"),
    (["seed=9223372036854775808"], "'seed' must be an integer in [0, 2**63)"),
    (["alphazero=3"], "section 'alphazero' must be a mapping"),
    (["network=3"], "section 'network' must be a mapping"),
    (["alphazero.exact_policy_weight=3"], "'alphazero.exact_policy_weight' (3.0) weighs positions with exact targets: "
                                          "it needs exact_value_targets: true"),
    (["alphazero.exact_value_targets=true", "alphazero.exact_policy_weight=0"],
     "'alphazero.exact_policy_weight' must be a finite number > 0"),
    (["network.afterstates={answers: true}"], "'network.afterstates.answers' scores the mover's answers to each "
                                              "of the opponent's replies: it needs network.afterstates.replies: true"),
    (["network.replies=true"], "'network.replies' (or 'network.answers') scores the replies to each move's "
                               "afterstate: it needs network.afterstates"),
    (["game=tictactoe", "network.afterstates={replies: true}"], "network.afterstates"),
    (["network=null"], "config key 'network' is null"),
])
def test_bad_values_name_the_key(overrides, fragment):
    with pytest.raises(ConfigError) as info:
        load_config(CONFIGS / "tiny.yaml", overrides)
    assert fragment in str(info.value)


def test_device_divisibility_is_checked():
    config = load_config(CONFIGS / "tiny.yaml", ["alphazero.batch_size=30"])
    validate(config, num_devices=1)
    validate(config, num_devices=2)
    with pytest.raises(ConfigError, match=r"'alphazero.batch_size' \(30\) must be divisible by the number of devices \(4\)"):
        validate(config, num_devices=4)


def test_override_syntax_errors():
    with pytest.raises(ConfigError, match="key=value"):
        parse_override("num_games")
    assert parse_override("a.b=[1, 2]") == (["a", "b"], [1, 2])
    with pytest.raises(ConfigError, match="not a section"):
        apply_overrides({"num_games": 3}, ["num_games.x=1"])


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(bad)


def test_the_search_section_is_shared_and_checked_once(tmp_path):
    """``search:`` sits at the top level: AlphaZero, evaluation and agents read it, also in
    PPO runs; section keys in the wrong place are unknown keys, not silently moved."""
    config = load_config(CONFIGS / "ppo_quick.yaml", ["search.num_simulations=5", "eval_simulations=3"])
    assert config.algorithm == "ppo" and config.search.num_simulations == 5
    with pytest.raises(ConfigError, match="unknown config key 'alphazero.search'"):
        load_config(CONFIGS / "tiny.yaml", ["alphazero.search.num_simulations=5"])
    with pytest.raises(ConfigError, match="unknown config key 'batch_size'"):
        load_config(CONFIGS / "tiny.yaml", ["batch_size=16"])


def test_config_files_that_are_not_yaml_text_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(ConfigError, match=str(binary.name)):
        load_config(binary)


def test_config_files_that_would_be_misread_are_errors(tmp_path):
    """What a config file would have misread is an error: an empty file (not a default
    run), a key given twice, aliases that expand past a bound, keys of the algorithm the
    run does not use."""
    cases = {
        "empty.yaml": ("# nothing yet\n", "is empty"),
        "twice.yaml": ("num_games: 8\nseed: 1\nnum_games: 16\n", "key 'num_games' is given twice (lines 1 and 3)"),
        "nested_twice.yaml": ("network:\n  width: 8\n  width: 16\n", "key 'width' is given twice"),
        "bomb.yaml": ("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"a{i}: &a{i} [{', '.join([f'*a{i - 1}' if i > 1 else '*a'] * 9)}]\n" for i in range(1, 10)),
            "expand to more than"),
        "ppo_in_alphazero.yaml": ("algorithm: alphazero\nppo:\n  clip_eps: 0.3\n", "'ppo.clip_eps' has no effect"),
        "alphazero_in_ppo.yaml": ("algorithm: ppo\nalphazero:\n  batch_size: 16\n",
                                  "'alphazero.batch_size' has no effect with algorithm: ppo"),
    }
    for name, (text, fragment) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ConfigError, match=re.escape(fragment)):
            load_config(tmp_path / name)
    with pytest.raises(ConfigError, match="expand to more than"):
        load_config(CONFIGS / "tiny.yaml", ["network=" + (tmp_path / "bomb.yaml").read_text().replace("\n", ", ")
                                            .join("{}")])
    merged = tmp_path / "merged.yaml"  # a << merge may be overridden: that is no duplicate
    merged.write_text("base: &base {width: 8, depth: 1}\nnetwork:\n  <<: *base\n  width: 16\n")
    with pytest.raises(ConfigError, match="unknown config key 'base'"):
        load_config(merged)
    ppo = load_config(CONFIGS / "ppo_quick.yaml", ["search.num_simulations=4"])  # the shared section: eval_simulations
    assert ppo.search.num_simulations == 4
    with pytest.raises(ConfigError, match="'alphazero.batch_size' has no effect with algorithm: ppo"):
        load_config(CONFIGS / "ppo_quick.yaml", ["alphazero.batch_size=4"])


@pytest.mark.parametrize("override, fragment", [
    ("name=..", "config key 'name'"),  # runs/.. is the repository itself
    ("name=.", "config key 'name'"),
    ("name=a,b", "config key 'name'"),
    ("run_dir=/tmp/runs/a,b", "config key 'run_dir' must not contain ','"),  # no agent spec could name it
])
def test_run_names_that_would_misplace_the_run(override, fragment):
    with pytest.raises(ConfigError, match=fragment):
        load_config(CONFIGS / "tiny.yaml", [override])


@pytest.mark.parametrize("name", ["tiny.yaml", "ppo_quick.yaml"])
def test_a_runs_saved_config_json_is_a_config(name, tmp_path):
    """``config.json`` holds every section, the unused algorithm's at its defaults: it
    loads as the run's config (to resume it or train its like), where a changed key of
    the unused section is still refused."""
    import json

    config = load_config(CONFIGS / name)
    saved = tmp_path / "config.json"
    saved.write_text(json.dumps(config.to_dict()))
    assert load_config(saved) == config
    other = "ppo" if config.algorithm == "alphazero" else "alphazero"
    with pytest.raises(ConfigError, match=f"'{other}.num_minibatches' has no effect|'{other}.batch_size' has no"):
        load_config(saved, [f"{other}.{'num_minibatches' if other == 'ppo' else 'batch_size'}=3"])


def test_a_home_directory_in_run_dir_is_expanded(monkeypatch, tmp_path):
    """A config file's ``~`` reaches no shell: it made a directory named ``~`` beside the
    command. Run directories and ``checkpoint:`` paths expand it."""
    from beastybar_jax.checkpoint import CheckpointError, load_agent

    monkeypatch.setenv("HOME", str(tmp_path))
    config = load_config(CONFIGS / "tiny.yaml", ["run_dir=~/runs/{name}"])
    assert config.resolved_run_dir == str(tmp_path / "runs" / "tiny")
    with pytest.raises(CheckpointError, match=re.escape(str(tmp_path / "nowhere"))):
        load_agent("~/nowhere")


def test_search_config_takes_numpy_scalars_as_plain_numbers():
    """``SearchConfig(num_simulations=np.int64(8))`` keeps the plain int 8 (a numpy scalar
    is the number it holds, so configs serialize); a numpy bool is no integer."""
    import numpy as np

    from beastybar_jax.config import SearchConfig

    config = SearchConfig(num_simulations=np.int64(8), gumbel_scale=np.float32(0.5))
    assert (config.num_simulations, config.gumbel_scale) == (8, 0.5)
    assert type(config.num_simulations) is int and type(config.gumbel_scale) is float
    with pytest.raises(ValueError, match="'search.num_simulations' must be an integer, got True"):
        SearchConfig(num_simulations=np.bool_(True))


def test_evaluating_nothing_is_refused_in_new_configs_only():
    """``eval_every`` with no opponents trained without a word of evaluation; endgames
    alone are an evaluation; a saved run's config loads whatever it holds."""
    from beastybar_jax.config import TrainConfig

    assert load_config(CONFIGS / "tiny.yaml", ["eval_every=2", "eval_opponents=[]", "eval_endgames=true"]).eval_endgames
    saved = dict(load_config(CONFIGS / "tiny.yaml").to_dict(), eval_every=2, eval_opponents=[])
    assert TrainConfig.from_dict(saved).eval_every == 2
