"""Every command shown in README.md and docs/*.md is exercised here (or, for the
Quickstart's install and test commands, by CI's ``.ci/run``).

Commands are read from the fenced code blocks, so a renamed flag, config or file in
the docs fails this test. Training commands run with ``--dry-run`` (config files and
overrides load and validate; real training runs are covered by test_train.py and
test_learning.py); evaluation and play commands run for real against a tiny trained
checkpoint in place of ``runs/quick``, with few games; benchmark commands run with
tiny sizes appended (argparse keeps the last value).
"""

from __future__ import annotations

import json
import pathlib
import re
import shlex
import sys

import pytest

import tiny_training

REPO = tiny_training.REPO_ROOT
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
sys.path.insert(0, str(REPO / "experiments"))


def documented_commands() -> list[tuple[str, str]]:
    """``(file name, command)`` for each shell command in a fenced code block."""
    commands = []
    for path in DOCS:
        in_block, language, pending = False, "", ""
        for line in path.read_text().splitlines():
            fence = re.match(r"^```(\w*)", line)
            if fence:
                in_block, language = (not in_block), fence.group(1)
                continue
            if not in_block or language not in ("", "bash", "sh"):
                continue
            line = pending + line.strip()
            pending = ""
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            line = re.sub(r"\s+#.*$", "", line)
            if re.match(r"^(\w+=\S+\s+)*(python|pip)\b", line):
                commands.append((path.name, line))
    return commands


COMMANDS = documented_commands()


def argv_of(command: str, script: str) -> list[str]:
    words = shlex.split(command)
    return words[words.index(script) + 1:]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A tiny trained run, standing in for ``runs/quick`` in the docs."""
    return str(tiny_training.full_run()["run_dir"])


def test_the_docs_show_the_main_commands():
    shown = " ".join(c for _, c in COMMANDS)
    for needed in ("experiments/train.py", "experiments/evaluate.py", "experiments/play.py",
                   "experiments/benchmark.py env", "experiments/benchmark.py selfplay",
                   "experiments/benchmark.py search", "pytest"):
        assert needed in shown, f"no documented command uses {needed}"


def test_quickstart_is_two_commands_and_ci_runs_the_second():
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = [l for l in block.strip().splitlines() if l.strip()]
    assert len(lines) == 2, lines
    install, tests = lines
    assert install.startswith('pip install -e ".[dev]" && python experiments/train.py --config configs/quick.yaml')
    ci = (REPO / ".ci" / "run").read_text()
    assert 'pip install --quiet -e ".[dev]"' in ci and tests.strip() in ci


@pytest.mark.parametrize("where,command", [c for c in COMMANDS if "experiments/train.py" in c[1]])
def test_training_commands_validate(where, command, capsys):
    import train as train_cli

    argv = argv_of(command, "experiments/train.py")
    assert train_cli.main(argv + ["--dry-run"]) == 0, capsys.readouterr().err
    assert "config ok" in capsys.readouterr().out


@pytest.mark.parametrize("where,command", [c for c in COMMANDS if "experiments/evaluate.py" in c[1]])
def test_evaluate_commands_run(where, command, trained_run, tmp_path, capsys):
    import evaluate

    argv = [w.replace("runs/quick", trained_run) for w in argv_of(command, "experiments/evaluate.py")]
    report = tmp_path / "results.json"
    assert evaluate.main(argv + ["--games", "4", "--plain", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "random" in out
    assert json.loads(report.read_text())


@pytest.mark.parametrize("where,command", [c for c in COMMANDS if "experiments/play.py" in c[1]])
def test_play_commands_run(where, command, trained_run):
    import play

    argv = [w.replace("runs/quick", trained_run) for w in argv_of(command, "experiments/play.py")]
    printed = []
    assert play.main(argv + ["--seed", "1"], input_fn=lambda prompt: "quit", print_fn=printed.append) == 0
    assert "Traceback" not in "\n".join(map(str, printed))


BENCHMARKS = [c for c in COMMANDS if "experiments/benchmark.py" in c[1]]
SELFPLAY_BENCHMARKS = [c for c in BENCHMARKS if "benchmark.py selfplay" in c[1]]
SEARCH_BENCHMARKS = [c for c in BENCHMARKS if "benchmark.py search" in c[1]]
TINY_RUN = {
    "env": ["--batch-sizes", "4", "--steps", "2", "--repeats", "1", "--variant", "step"],
    "selfplay": ["--batch-sizes", "4", "--simulations", "2", "--moves", "2", "--repeats", "1",
                 "--set", "network.width=16", "--set", "network.depth=1", "--set", "buffer_size=128",
                 "--set", "min_buffer_size=8", "--set", "batch_size=8", "--set", "num_games=4"],
    "search": ["--batch-sizes", "4", "--simulations", "2", "--repeats", "1", "--evaluator", "uniform"],
}


@pytest.mark.parametrize("where,command", BENCHMARKS)
def test_benchmark_commands_run(where, command, tmp_path):
    """Each command parses and its config loads; env commands and the first selfplay and
    search commands also run (tiny sizes appended). Every selfplay run compiles a whole
    training iteration and every search run a search, so the others stop after parsing
    to keep CI short."""
    import benchmark
    from beastybar_jax.config import load_config

    argv = argv_of(command, "experiments/benchmark.py")
    args = benchmark.build_parser().parse_args(argv)
    if args.command in ("selfplay", "search"):
        load_config(args.config, args.overrides)
        if (where, command) not in SELFPLAY_BENCHMARKS[:1] + SEARCH_BENCHMARKS[:1]:
            return
    out = tmp_path / "bench.json"
    assert benchmark.main(argv + TINY_RUN[args.command] + ["--out", str(out)]) == 0
    assert json.loads(out.read_text())


def test_readme_python_snippet_runs(trained_run):
    readme = (REPO / "README.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    namespace: dict = {}
    exec(snippet.replace('"runs/quick"', repr(trained_run)), namespace)
    assert namespace["agent"].name == "network"
