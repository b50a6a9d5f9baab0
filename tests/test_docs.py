"""Every command shown in README.md and docs/*.md is exercised here (or, for the
Quickstart's install and test commands, by CI's ``.ci/run``).

Commands are read from the fenced code blocks, so a renamed flag, config or file in
the docs fails this test. Training commands run with ``--dry-run`` (config files and
overrides load and validate; real training runs are covered by test_train.py and
test_learning.py); evaluation commands run against a tiny trained checkpoint in place
of ``runs/quick``: their arguments parse and every agent they name is built (checkpoints
loaded), but the matches are stubbed (each pairing of heuristics compiled for minutes on
CI; real matches run in test_arena.py, the evaluate command line for real in
``test_evaluate_cli``); play commands run for real; benchmark commands run with tiny
sizes appended (argparse keeps the last value).
"""

from __future__ import annotations

import json
import pathlib
import re
import shlex

import pytest

from helpers import tictactoe_training, experiment
from helpers import tiny_training

pytestmark = pytest.mark.slow  # every documented command, on trained runs (CI runs it; the quick loop skips it)

REPO = tiny_training.REPO_ROOT
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


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


def with_trained_runs(argv: list[str], trained_run: str) -> list[str]:
    """The documented run directories replaced by runs trained in this session:
    ``runs/quick`` and the GPU runs ``runs/h100*`` by the tiny run, ``runs/tictactoe`` by
    tests/helpers/tictactoe_training.py's."""
    out = []
    for word in argv:
        if "runs/tictactoe" in word:
            word = word.replace("runs/tictactoe", str(tictactoe_training.trained_run()["run_dir"]))
        out.append(re.sub(r"runs/(quick|h100\w*)", trained_run, word))
    return out


def test_the_docs_show_the_main_commands():
    shown = " ".join(c for _, c in COMMANDS)
    for needed in ("experiments/train.py", "experiments/evaluate.py", "experiments/play.py",
                   "experiments/benchmark.py env", "experiments/benchmark.py selfplay", "experiments/benchmark.py ppo",
                   "experiments/benchmark.py search", "experiments/exploit.py", "pytest"):
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
    train_cli = experiment("train")

    argv = argv_of(command, "experiments/train.py")
    assert train_cli.main(argv + ["--dry-run"]) == 0, capsys.readouterr().err
    assert "config ok" in capsys.readouterr().out


@pytest.mark.parametrize("where,command", [c for c in COMMANDS if "experiments/evaluate.py" in c[1]])
def test_evaluate_commands_run(where, command, trained_run, tmp_path, capsys, monkeypatch):
    evaluate = experiment("evaluate")
    from beastybar_jax.arena import MatchResult
    from beastybar_jax.games.beastybar.endgame import suite as endgame_suite

    played = []

    def evaluate_agent(agent, suite, key, chunk=None):  # --endgames: agents built, their moves stubbed
        played.append(agent.name)
        return endgame_suite.score_moves(suite, suite.legal.argmax(axis=1), agent.name)

    monkeypatch.setattr(endgame_suite, "evaluate_agent", evaluate_agent)

    def play_match(agent_a, agent_b, num_deals, key, game=None):
        played.append((agent_a.name, agent_b.name))
        return MatchResult(agent=agent_a.name, opponent=agent_b.name, games=2 * num_deals, wins=num_deals, draws=0,
                           losses=num_deals, win_rate=0.5, score=0.5, score_ci95=(0.1, 0.9), mean_margin=0.0)

    monkeypatch.setattr(evaluate, "play_match", play_match)
    argv = with_trained_runs(argv_of(command, "experiments/evaluate.py"), trained_run)
    report = tmp_path / "results.json"
    assert evaluate.main(argv + ["--games", "4", "--plain", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert ("random" in out or "--endgames" in argv) and played
    assert len(json.loads(report.read_text())["results"]) == len(played)


@pytest.mark.parametrize("where,command", [c for c in COMMANDS if "experiments/play.py" in c[1]])
def test_play_commands_run(where, command, trained_run):
    play = experiment("play")

    argv = with_trained_runs(argv_of(command, "experiments/play.py"), trained_run)
    printed = []
    assert play.main(argv + ["--seed", "1"], input_fn=lambda prompt: "quit", print_fn=printed.append) == 0
    assert "Traceback" not in "\n".join(map(str, printed))


BENCHMARKS = [c for c in COMMANDS if "experiments/benchmark.py" in c[1]]
SELFPLAY_BENCHMARKS = [c for c in BENCHMARKS if "benchmark.py selfplay" in c[1]]
PPO_BENCHMARKS = [c for c in BENCHMARKS if "benchmark.py ppo" in c[1]]
SEARCH_BENCHMARKS = [c for c in BENCHMARKS if "benchmark.py search" in c[1]]
TINY_RUN = {
    "env": ["--batch-sizes", "4", "--steps", "2", "--repeats", "1", "--variant", "step"],
    "selfplay": ["--batch-sizes", "4", "--simulations", "2", "--moves", "2", "--repeats", "1",
                 "--set", "network.width=16", "--set", "network.depth=1", "--set", "alphazero.buffer_size=128",
                 "--set", "alphazero.min_buffer_size=8", "--set", "alphazero.batch_size=8", "--set", "num_games=4"],
    "ppo": ["--batch-sizes", "8", "--repeats", "1", "--set", "network.width=16", "--set", "network.depth=1",
            "--set", "ppo.rollout_length=4", "--set", "ppo.num_minibatches=2", "--set", "ppo.pool_size=2"],
    "search": ["--batch-sizes", "4", "--simulations", "2", "--repeats", "1", "--evaluator", "uniform"],
    "endgames": ["--positions", "64", "--source", "suite", "--modes", "results", "--lanes", "0", "--repeats", "1"],
}


@pytest.mark.parametrize("where,command", BENCHMARKS)
def test_benchmark_commands_run(where, command, tmp_path):
    """Each command parses and its config loads; env commands and the first selfplay and
    search commands also run (tiny sizes appended). Every selfplay run compiles a whole
    training iteration and every search run a search, so the others stop after parsing
    to keep CI short."""
    benchmark = experiment("benchmark")
    from beastybar_jax.config import load_config

    argv = argv_of(command, "experiments/benchmark.py")
    args = benchmark.build_parser().parse_args(argv)
    if args.command in ("selfplay", "search"):
        load_config(args.config, args.overrides)
        if (where, command) not in SELFPLAY_BENCHMARKS[:1] + SEARCH_BENCHMARKS[:1]:
            return
    if args.command == "ppo":  # like selfplay: each run compiles a whole iteration; run the first only
        load_config(args.config, ["algorithm=ppo", *args.overrides])
        if (where, command) != PPO_BENCHMARKS[0]:
            return
    out = tmp_path / "bench.json"
    assert benchmark.main(argv + TINY_RUN[args.command] + ["--out", str(out)]) == 0
    assert json.loads(out.read_text())


EXPLOITS = [c for c in COMMANDS if "experiments/exploit.py" in c[1]]
TINY_EXPLOIT = ["--minutes", "0.0001", "--deals", "2", "--quiet", "--set", "num_games=8",
                "--set", "ppo.rollout_length=4", "--set", "network.width=16", "--set", "network.depth=1",
                "--set", "ppo.num_minibatches=2"]


@pytest.mark.parametrize("where,command", EXPLOITS)
def test_exploit_commands_run(where, command, trained_run, tmp_path, capsys):
    """Each command's config, agent and options load; one (against a checkpoint, if one
    is documented: the cheapest to compile) trains one iteration and plays its match."""
    exploit = experiment("exploit")
    from beastybar_jax.agents import make_agent

    argv = [w.replace("runs/quick", trained_run) for w in argv_of(command, "experiments/exploit.py")]
    args = exploit.parse_args(argv)
    config = exploit.exploiter_config(args.config, args.overrides, args.agent, args.seed, args.warm_start)
    make_agent(config.ppo.opponent)
    chosen = next((c for c in EXPLOITS if "checkpoint:" in c[1]), EXPLOITS[0])
    if (where, command) != chosen:
        return
    report = tmp_path / "exploit.json"
    assert exploit.main(argv + TINY_EXPLOIT + ["--json", str(report)]) == 0
    assert "exploitability of" in capsys.readouterr().out
    assert json.loads(report.read_text())["match"]["games"] == 4


@pytest.mark.parametrize("where,command", [c for c in COMMANDS if "experiments/curves.py" in c[1]])
def test_curves_commands_run(where, command, tmp_path, capsys):
    """Run directories named in the command get a small metrics.jsonl with evaluations."""
    curves = experiment("curves")

    argv = argv_of(command, "experiments/curves.py")
    for i, word in enumerate(argv):
        if word.startswith("runs/"):
            (tmp_path / word).mkdir(parents=True)
            rows = [dict(iteration=k, iteration_seconds=1.5, total_games=10 * k, eval_random_win_rate=0.5 + k / 10,
                         eval_heuristic_win_rate=0.3 + k / 10, eval_outcome_heuristic_win_rate=0.2 + k / 10)
                    for k in (1, 2)]
            (tmp_path / word / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
            argv[i] = str(tmp_path / word)
        elif i and argv[i - 1] == "--out":
            argv[i] = str(tmp_path / pathlib.Path(word).name)
    assert curves.main(argv) == 0
    assert "| 2 | 3 |" in capsys.readouterr().out  # iteration 2 after 3 training seconds
    out = argv[argv.index("--out") + 1] if "--out" in argv else None
    assert out is None or pathlib.Path(out).stat().st_size > 0


def test_readme_python_snippet_runs(trained_run):
    readme = (REPO / "README.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    namespace: dict = {}
    exec(snippet.replace('"runs/quick"', repr(trained_run)), namespace)
    assert namespace["agent"].name == "network"


def test_ci_requires_the_conformance_corpus_and_the_readme_says_so():
    """Issue 14, row 17: the conformance tests read ../shared; CI runs with CI=true so a
    missing corpus fails instead of skipping."""
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^export CI=true$", ci, re.M), ci
    readme = (REPO / "README.md").read_text()
    assert "../shared/conformance/" in readme and "`CI=true`" in readme


def test_pyproject_license_is_an_spdx_expression():
    """Issue 14, row 16: ``license = { text = ... }`` is deprecated by setuptools (builds
    warn, and stop working after 2027-02-18); an SPDX string needs setuptools >= 77."""
    import tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "MIT"
    assert "setuptools>=77" in pyproject["build-system"]["requires"]
