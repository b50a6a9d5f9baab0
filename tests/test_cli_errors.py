"""User errors at the command lines end in one line and exit code 2, before any work;
an interrupted evaluation keeps what it finished; output to a pipe is not cut.

Everything here runs in process with nothing compiled (a stubbed match stands in for
the arena where a result is needed), so the file takes seconds.
"""

from __future__ import annotations

import gzip
import io
import json

import pytest

from helpers import tiny_training, experiment
from beastybar_jax.arena import MatchResult

REPO_ROOT = tiny_training.REPO_ROOT
TINY = str(tiny_training.TINY)
benchmark, evaluate, train = (experiment(name) for name in ("benchmark", "evaluate", "train"))


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def fake_result(agent: str, opponent: str) -> MatchResult:
    return MatchResult(agent=agent, opponent=opponent, games=4, wins=3, draws=0, losses=1, win_rate=0.75, score=0.75,
                       score_ci95=(0.3, 0.95), mean_margin=1.5)


# ----------------------------------------------------------------------------- train.py


def test_train_config_errors(tmp_path, capsys):
    """Row 10: a directory or a binary file as --config, and a seed >= 2**63 (also with
    --dry-run, which compiles nothing)."""
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    for argv, expected in ((["--config", str(tmp_path)], "is a directory"),
                           (["--config", str(binary)], "binary.yaml"),
                           (["--config", TINY, "--set", f"seed={2**63}", "--dry-run"], "2**63"),
                           (["--config", TINY, "--set", f"seed={2**63}"], "2**63")):
        assert train.main(argv) == 2
        assert expected in one_line(capsys.readouterr().err)


# ----------------------------------------------------------------------------- evaluate.py


def test_evaluate_checks_the_json_path_before_playing(tmp_path, monkeypatch, capsys):
    """Row 10: an unwritable --json (a directory; a path below a file) is an error
    before the first game."""
    monkeypatch.setattr(evaluate, "play_match", lambda *a, **k: pytest.fail("played before checking --json"))
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for target in (tmp_path, a_file / "results.json"):
        assert evaluate.main(["--agent", "random", "--opponents", "greedy", "--json", str(target)]) == 2
        assert "--json" in one_line(capsys.readouterr().err)


def test_ctrl_c_in_evaluate_keeps_and_prints_the_finished_pairings(tmp_path, monkeypatch, capsys):
    """Row 10: Ctrl-C during the second pairing: the first one is printed and written
    (marked interrupted), exit code 130."""
    def play_match(agent, opponent, num_deals, key, game=None):
        if opponent.name == "heuristic":
            raise KeyboardInterrupt
        return fake_result(agent.name, opponent.name)

    monkeypatch.setattr(evaluate, "play_match", play_match)
    report = tmp_path / "report.json"
    code = evaluate.main(["--agent", "random", "--opponents", "greedy,heuristic,aggressive", "--games", "4",
                          "--plain", "--json", str(report)])
    captured = capsys.readouterr()
    assert code == 130
    assert "random" in captured.out and "greedy" in captured.out and "heuristic" not in captured.out
    assert "interrupted after 1 of 3 pairings" in captured.err and "Traceback" not in captured.err
    saved = json.loads(report.read_text())
    assert saved["interrupted"] and [r["opponent"] for r in saved["results"]] == ["greedy"]


def test_evaluate_tables_are_not_cut_when_piped():
    """Row 12: a long agent spec stays whole in the rich table written to a pipe or file."""
    spec = "checkpoint:/a/rather/long/path/to/some/training/run/of/the/quick/config@sims=64"
    out = io.StringIO()  # not a terminal, like a pipe
    evaluate.print_tables([fake_result(spec, "outcome_heuristic")], [], plain=False, out=out)
    text = out.getvalue()
    assert spec in text and "outcome_heuristic" in text and "75.0%" in text and "+1.50" in text


# ----------------------------------------------------------------------------- benchmark.py


@pytest.mark.parametrize("argv, expected", [
    (["selfplay", "--config", "configs/missing.yaml"], "does not exist"),
    (["selfplay", "--config", TINY, "--set", "no_such_key=1"], "unknown config key 'no_such_key'"),
    (["env", "--steps", "-5"], "argument --steps: must be at least 0, got -5"),
    (["env", "--repeats", "0"], "argument --repeats: must be at least 1, got 0"),
    (["selfplay", "--repeats", "0"], "argument --repeats: must be at least 1, got 0"),
    (["selfplay", "--moves", "0"], "argument --moves: must be at least 1, got 0"),
])
def test_benchmark_argument_errors_leave_the_results_alone(argv, expected, tmp_path, capsys):
    """Rows 10 and 11: one line, exit code 2, and the results file is not touched
    (``--repeats 0`` used to write rows of 0 steps/s over it)."""
    out = tmp_path / "env.json"
    out.write_text('{"kept": true}')
    with pytest.raises(SystemExit) as exit_info:
        code = benchmark.main(argv + ["--out", str(out)])
        raise SystemExit(code)
    assert exit_info.value.code == 2
    assert expected in one_line(capsys.readouterr().err)
    assert json.loads(out.read_text()) == {"kept": True}


def test_benchmark_never_times_zero_repeats():
    with pytest.raises(ValueError, match="repeats"):
        benchmark.bench_env(batch_size=1, num_steps=1, repeats=0, with_observation=False)


# ----------------------------------------------------------------------------- conformance tool


def test_conformance_tool_on_bad_files(tmp_path, capsys):
    """Row 10: missing, a directory, binary, not gzip, not JSON, not a trace: one line
    naming the file, exit code 2."""
    from beastybar_jax.games.beastybar import conformance

    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(bytes(range(256)))
    not_gzip = tmp_path / "plain.jsonl.gz"
    not_gzip.write_text('{"seed": 1}\n')
    not_json = tmp_path / "lines.jsonl"
    not_json.write_text('{"seed": 1, "hands": []}\nhello\n')
    not_trace = tmp_path / "other.jsonl.gz"
    with gzip.open(not_trace, "wt") as f:
        f.write('{"seed": 1, "hands": [["lion"]]}\n')
    for path in (tmp_path / "missing.jsonl", tmp_path, binary, not_gzip, not_json, not_trace):
        assert conformance.main([str(path)]) == 2
        line = one_line(capsys.readouterr().err)
        assert line.startswith("error: ") and str(path) in line
