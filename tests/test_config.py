"""The typed training config: YAML files, --set overrides and precise errors."""

from __future__ import annotations

import pathlib

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


def test_h100_config_is_a_large_default_network_run():
    config = load_config(CONFIGS / "h100.yaml")
    assert config.num_games >= 2048 and config.search.num_simulations == 64
    assert (config.network.width, config.network.depth) == (NetworkConfig().width, NetworkConfig().depth)
    validate(config, num_devices=8)  # splits evenly over up to 8 GPUs


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
    (["search.algorithm=alphabeta"], "search.algorithm"),
    (["alphazero.batch_size=0"], "'alphazero.batch_size' must be >= 1"),
    (["game=chess"], "'game' must be one of beastybar"),
    (["algorithm=dqn"], "'algorithm' must be one of alphazero"),
    (["seed=9223372036854775808"], "'seed' must be an integer in [0, 2**63)"),
    (["alphazero=3"], "section 'alphazero' must be a mapping"),
    (["network=3"], "section 'network' must be a mapping"),
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
