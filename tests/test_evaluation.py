"""Training-time evaluation: every ``eval_every`` iterations (and after the last) the
network plays the configured opponents and the results are logged with the metrics."""

import pytest

import tiny_training
from beastybar_jax import train
from beastybar_jax.config import ConfigError
from beastybar_jax.metrics import read_jsonl


def test_training_logs_win_rates_every_eval_every_iterations(tmp_path):
    config = tiny_training.tiny_config(tmp_path, "num_iterations=5", "eval_every=2", "eval_games=4",
                                       "eval_opponents=[random, greedy]")
    seen_by_hook = {}
    # User hooks run after the evaluation hook, so they see this iteration's win rates.
    record = lambda loop, iteration, metrics: seen_by_hook.update({iteration: dict(metrics)})
    loop = train.TrainLoop(config, trainer=tiny_training.trainer(), hooks=[record], console=False)
    loop.run()
    loop.close()

    rows = {r["iteration"]: r for r in read_jsonl(str(tmp_path / "metrics.jsonl"))}
    evaluated = sorted(i for i, r in rows.items() if "eval_random_win_rate" in r)
    assert evaluated == [2, 4, 5]  # every 2nd iteration and the last one
    for i in evaluated:
        for opponent in ("random", "greedy"):
            win_rate = rows[i][f"eval_{opponent}_win_rate"]
            score = rows[i][f"eval_{opponent}_score"]
            assert 0.0 <= win_rate <= score <= 1.0
            assert f"eval_{opponent}_margin" in rows[i]
        assert seen_by_hook[i]["eval_random_win_rate"] == rows[i]["eval_random_win_rate"]


def test_unknown_eval_opponent_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="eval_opponents"):
        tiny_training.tiny_config(tmp_path, "eval_every=1", "eval_opponents=[random, grandmaster]")
