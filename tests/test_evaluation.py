"""Training-time evaluation: every ``eval_every`` iterations (and after the last) the
network plays the configured opponents and the results are logged with the metrics."""


import pytest

from helpers import tiny_training, experiment
from beastybar_jax.config import ConfigError
from beastybar_jax.training.loop import TrainLoop
from beastybar_jax.training.metrics import read_jsonl

pytestmark = pytest.mark.slow  # training runs with evaluation (CI runs it; the quick loop skips it)



def test_training_logs_win_rates_every_eval_every_iterations(tmp_path):
    """... and, with ``eval_endgames``, the yardstick of solved endgames (computed in the
    same compiled function as the matches)."""
    config = tiny_training.tiny_config(tmp_path, "num_iterations=5", "eval_every=2", "eval_games=4",
                                       "eval_opponents=[random, greedy]", "eval_endgames=true",
                                       "eval_endgame_positions=64")
    seen_by_hook = {}
    # User hooks run after the evaluation hook, so they see this iteration's win rates.
    record = lambda loop, iteration, metrics: seen_by_hook.update({iteration: dict(metrics)})
    loop = TrainLoop(config, trainer=tiny_training.trainer(), hooks=[record], console=False)
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
        endgames = {k[len("eval_endgames_"):]: v for k, v in rows[i].items() if k.startswith("eval_endgames_")}
        assert set(endgames) == {"keeps_result", "throws_win", "throws_draw", "best_margin", "margin_lost"}
        assert 0.0 <= endgames["best_margin"] <= endgames["keeps_result"] < 1.0  # an untrained network errs
        assert endgames["throws_win"] + endgames["throws_draw"] == pytest.approx(1.0 - endgames["keeps_result"])
        assert endgames["margin_lost"] > 0.0


def test_unknown_eval_opponent_fails_before_compiling(tmp_path, capsys):
    """The config is plain data (it loads); the registry check runs where the opponents
    are used, before anything compiles, with the same one-line error in the CLI."""
    config = tiny_training.tiny_config(tmp_path, "eval_every=1", "eval_opponents=[random, grandmaster]")
    with pytest.raises(ConfigError, match="eval_opponents.*grandmaster"):
        TrainLoop(config, console=False)
    assert not (tmp_path / "checkpoints").exists()

    train_cli = experiment("train")

    argv = ["--config", str(tiny_training.TINY), "--set", f"run_dir={tmp_path}", "--set", "eval_every=1",
            "--set", "eval_opponents=[grandmaster]"]
    for extra in (["--dry-run"], []):
        assert train_cli.main(argv + extra) == 2
        err = capsys.readouterr().err
        assert "eval_opponents" in err and "grandmaster" in err and "Traceback" not in err


def test_endgame_options_need_a_game_that_has_them(tmp_path):
    """The yardstick and the exact targets are reached through the Game; a game without
    them (tic-tac-toe) is a one-line config error naming the key."""
    from beastybar_jax.config import load_config

    tictactoe = tiny_training.REPO_ROOT / "configs" / "tictactoe.yaml"
    for key in ("eval_endgames", "alphazero.exact_value_targets"):
        with pytest.raises(ConfigError, match=f"'{key}'.*tictactoe has none"):
            load_config(tictactoe, [f"{key}=true"])
        load_config(tiny_training.TINY, [f"{key}=true"])  # Beasty Bar has both
    with pytest.raises(ConfigError, match="eval_endgame_positions"):
        load_config(tiny_training.TINY, ["eval_endgame_positions=-1"])


def test_opponents_are_named_in_the_log_without_characters_that_nest_tensorboard_tags():
    """``eval_checkpoint:/tmp/run_win_rate`` split into nested TensorBoard tags at each "/"."""
    from beastybar_jax.learning.algorithm import metric_name

    assert metric_name("checkpoint:/tmp/run@sims=8") == "checkpoint_tmp_run_sims_8"
    assert [metric_name(n) for n in ("outcome_heuristic", "mcts-32", "solver+heuristic")] == [
        "outcome_heuristic", "mcts_32", "solver_heuristic"]

    from beastybar_jax.config import ConfigError
    from beastybar_jax.games import get_game
    from beastybar_jax.training.evaluation import make_opponents

    config = tiny_training.tiny_config("unused", "eval_every=2", "eval_opponents=[mcts-2, mcts_2]")
    with pytest.raises(ConfigError, match="two opponents would be logged as eval_mcts_2_"):
        make_opponents(config, get_game("beastybar"))
