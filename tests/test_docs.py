"""The docs match the code. Every command shown in README.md and docs/*.md is exercised
here (or, for the Quickstart's install and test commands, by CI's ``.ci/run``); every
config key is named in docs/training.md; every link resolves; the README's figures come
from the pages that give their machine, date and command, and those pages give them.

Commands are read from the fenced code blocks, so a renamed flag, config or file in
the docs fails this test. Training and endgame-fit commands run with ``--dry-run`` (config
files, networks and overrides load and validate; real training runs are covered by test_train.py and
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
import socket

import pytest

from helpers import tictactoe_training, experiment
from helpers import tiny_training

pytestmark = pytest.mark.slow  # every documented command, on trained runs (CI runs it; the quick loop skips it)

REPO = tiny_training.REPO_ROOT
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def documented_commands() -> list[tuple[str, str]]:
    """``(file name, command)`` for each shell command in a fenced code block, and for each
    ``python ...`` command quoted in a table's row (the levers' table gives one a row)."""
    commands = []
    for path in DOCS:
        in_block, language, pending = False, "", ""
        for line in path.read_text().splitlines():
            fence = re.match(r"^```(\w*)", line)
            if fence:
                in_block, language = (not in_block), fence.group(1)
                continue
            if not in_block and line.startswith("|"):
                commands += [(path.name, quoted) for quoted in re.findall(r"`(python [^`]+)`", line)]
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
    ``runs/quick``, the lever runs ``runs/levers*``, the GPU runs ``runs/h100*`` and ``runs/gpu*`` and the
    endgame fits ``runs/fit*`` (or one of their checkpoints) by the tiny run, ``runs/tictactoe`` by
    tests/helpers/tictactoe_training.py's short run."""
    out = []
    for word in argv:
        if "runs/tictactoe" in word:
            word = word.replace("runs/tictactoe", str(tictactoe_training.short_run()["run_dir"]))
        out.append(re.sub(r"runs/(quick|levers\w*|h100\w*|gpu\w*|fit\w*)(/checkpoints/\d+)?", trained_run, word))
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

    # A --resume command continues a run the test does not have: its config is checked alone.
    argv = [a for a in argv_of(command, "experiments/train.py") if a != "--resume"]
    assert train_cli.main(argv + ["--dry-run"]) == 0, capsys.readouterr().err
    assert "config ok" in capsys.readouterr().out


def stub_match(played: list):
    """``arena.play_match`` that plays nothing: it notes the pairing in ``played`` and
    returns a made-up result (with an entry table when asked for one)."""
    from beastybar_jax.arena import MatchResult

    def play_match(agent_a, agent_b, num_deals, key, game=None, record_entry=False):
        played.append((agent_a.name, agent_b.name))
        finals = {"win": num_deals, "draw": 0, "loss": 0}
        entry = {"win": finals, "draw": dict(finals, win=0), "loss": dict(finals, win=0, loss=num_deals),
                 "none": dict(finals, win=0)} if record_entry else None
        return MatchResult(agent=agent_a.name, opponent=agent_b.name, games=2 * num_deals, wins=num_deals, draws=0,
                           losses=num_deals, win_rate=0.5, score=0.5, score_ci95=(0.1, 0.9), mean_margin=0.0,
                           entry=entry)

    return play_match


@pytest.mark.parametrize("where,command", [c for c in COMMANDS if "experiments/evaluate.py" in c[1]])
def test_evaluate_commands_run(where, command, trained_run, tmp_path, capsys, monkeypatch):
    evaluate = experiment("evaluate")
    from beastybar_jax.games.beastybar.endgame import suite as endgame_suite

    played = []

    def agent_moves(agent, suite, key, chunk=None):  # --endgames: agents built, their moves stubbed
        played.append(agent.name)
        return suite.legal.argmax(axis=1)

    monkeypatch.setattr(endgame_suite, "agent_moves", agent_moves)
    monkeypatch.setattr(evaluate, "play_match", stub_match(played))
    argv = with_trained_runs(argv_of(command, "experiments/evaluate.py"), trained_run)
    # Several documented runs stand in as the one tiny run: name each agent once (evaluate.py
    # refuses an agent named twice).
    argv = [",".join(dict.fromkeys(w.split(","))) if i and argv[i - 1] in ("--agent", "--opponents") else w
            for i, w in enumerate(argv)]
    report = tmp_path / "results.json"
    assert evaluate.main(argv + ["--games", "4", "--plain", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    listed = [flag for flag in ("--opponents", "--round-robin") if flag in argv]
    named = argv[argv.index(listed[0]) + 1].split(",") if listed else []
    assert played and all(name in out for name in named), (named, out)
    results = json.loads(report.read_text())["results"]
    assert len(results) == len(played)
    if "--by" in argv:  # each agent's groups split its positions
        by = argv[argv.index("--by") + 1]
        assert all(sum(g["positions"] for g in r["groups"]) == r["positions"] and by in r["groups"][0]
                   for r in results), results


@pytest.mark.parametrize("where,command", [c for c in COMMANDS if "experiments/play.py" in c[1]])
def test_play_commands_run(where, command, trained_run):
    play = experiment("play")

    argv = with_trained_runs(argv_of(command, "experiments/play.py"), trained_run)
    printed = []
    assert play.main(argv + ["--seed", "1"], input_fn=lambda prompt: "quit", print_fn=printed.append) == 0
    assert "Traceback" not in "\n".join(map(str, printed))


@pytest.mark.parametrize("where,command", [c for c in COMMANDS if "experiments/serve.py" in c[1]])
def test_serve_commands_build_their_app(where, command, trained_run):
    import serve

    argv = with_trained_runs(argv_of(command, "experiments/serve.py"), trained_run)
    with socket.socket() as s:  # --check binds the port: a free one, whichever the doc names
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert serve.main(argv + ["--check", "--port", str(port)]) == 0  # the app and its agents, without serving


BENCHMARKS = [c for c in COMMANDS if "experiments/benchmark.py" in c[1]]
SELFPLAY_BENCHMARKS = [c for c in BENCHMARKS if "benchmark.py selfplay" in c[1]]
PPO_BENCHMARKS = [c for c in BENCHMARKS if "benchmark.py ppo" in c[1]]
SEARCH_BENCHMARKS = [c for c in BENCHMARKS if "benchmark.py search" in c[1] and "--compile-for" not in c[1]]
TINY_RUN = {
    "env": ["--batch-sizes", "4", "--steps", "2", "--repeats", "1", "--variant", "step"],
    "selfplay": ["--batch-sizes", "4", "--simulations", "2", "--moves", "2", "--repeats", "1",
                 "--set", "network.width=16", "--set", "network.depth=1", "--set", "network.afterstates=false",
                 "--set", "alphazero.buffer_size=128",
                 "--set", "alphazero.min_buffer_size=8", "--set", "alphazero.batch_size=8", "--set", "num_games=4"],
    "ppo": ["--batch-sizes", "8", "--repeats", "1", "--set", "network.width=16", "--set", "network.depth=1",
            "--set", "ppo.rollout_length=4", "--set", "ppo.num_minibatches=2", "--set", "ppo.pool_size=2"],
    "search": ["--batch-sizes", "4", "--simulations", "2", "--repeats", "1", "--evaluator", "uniform"],
    "network": ["--batch-sizes", "8", "--turns", "2", "--repeats", "1", "--torso", "auto", "--set", "network.width=16",
                "--set", "network.depth=1", "--set", "network.afterstates=false"],
    "endgames": ["--positions", "64", "--source", "suite", "--modes", "results", "--lanes", "0", "--budgets", "20",
                 "--repeats", "1"],
    "matches": ["--agents", "random", "--opponent", "random", "--deals", "2", "--repeats", "1"],
}


STOCK_SEARCH_BENCHMARKS = [c for c in SEARCH_BENCHMARKS if "--mctx both" in c[1]]


def test_a_documented_search_benchmark_runs_stock_mctx_too():
    # The tiny acceptance run leaves stock mctx's search to test_benchmark_commands_run, which
    # runs the first documented search benchmark with `--mctx both` for real.
    assert STOCK_SEARCH_BENCHMARKS, SEARCH_BENCHMARKS


@pytest.mark.parametrize("where,command", BENCHMARKS)
def test_benchmark_commands_run(where, command, tmp_path):
    """Each command parses and its config loads; env commands, the first selfplay command and
    the first search command with stock mctx also run (tiny sizes appended). Every selfplay
    or profile run compiles a whole training iteration and every search run a search, so
    the others stop after parsing to keep CI short; so do those compiling for a GPU
    (``--compile-for``: JAX's CUDA plugin, not a dev extra)."""
    benchmark = experiment("benchmark")
    from beastybar_jax.config import load_config

    argv = argv_of(command, "experiments/benchmark.py")
    args = benchmark.build_parser().parse_args(argv)
    if args.command == "profile" or getattr(args, "compile_for", None):
        load_config(args.config, args.overrides)
        return
    if args.command in ("selfplay", "search"):
        load_config(args.config, args.overrides)
        if (where, command) not in SELFPLAY_BENCHMARKS[:1] + STOCK_SEARCH_BENCHMARKS[:1]:
            return
    if args.command == "ppo":  # like selfplay: each run compiles a whole iteration; run the first only
        load_config(args.config, ["algorithm=ppo", *args.overrides])
        if (where, command) != PPO_BENCHMARKS[0]:
            return
    out = tmp_path / "bench.json"
    assert benchmark.main(argv + TINY_RUN[args.command] + ["--out", str(out)]) == 0
    assert json.loads(out.read_text())


EXPLOITS = [c for c in COMMANDS if "experiments/exploit.py" in c[1]]
TINY_EXPLOIT = ["--iterations", "2", "--deals", "2", "--quiet", "--set", "num_games=8",
                "--set", "ppo.rollout_length=4", "--set", "network.width=16", "--set", "network.depth=1",
                "--set", "ppo.num_minibatches=2"]


@pytest.mark.parametrize("where,command", EXPLOITS)
def test_exploit_commands_run(where, command, trained_run, tmp_path, capsys):
    """Each command's config, agent and options load; one (against a checkpoint, if one
    is documented: the cheapest to compile) trains one iteration and plays its match."""
    exploit = experiment("exploit")
    from beastybar_jax.agents import make_agent

    argv = with_trained_runs(argv_of(command, "experiments/exploit.py"), trained_run)
    args = exploit.parse_args(argv)
    config = exploit.exploiter_config(args.config, args.overrides, args.agent, args.seed, args.warm_start)
    make_agent(config.ppo.opponent)
    chosen = next((c for c in EXPLOITS if "checkpoint:" in c[1]), EXPLOITS[0])
    if (where, command) != chosen:
        return
    report = tmp_path / "exploit.json"
    assert exploit.main(argv + TINY_EXPLOIT + ["--json", str(report)]) == 0
    assert "exploitability of" in capsys.readouterr().out
    report = json.loads(report.read_text())
    assert report["match"]["games"] == 4
    assert report["iterations"] == report["training"]["iterations"] == 2  # the budget, whatever --minutes says


@pytest.mark.parametrize("where,command", [c for c in COMMANDS if "experiments/curves.py" in c[1]])
def test_curves_commands_name_runs_the_docs_train_with_those_evaluations(where, command):
    """Each run a documented curves.py command reads is trained by a command of the same
    page that evaluates it periodically against every opponent the curves name: the
    configs evaluate nothing by default (``eval_every: 0``), so a curve of a plain run fails."""
    from beastybar_jax.config import load_config

    train_cli = experiment("train")
    trained = {}
    for page, other in COMMANDS:
        if page == where and "experiments/train.py" in other:
            args = train_cli.parse_args(argv_of(other, "experiments/train.py"))
            config = load_config(args.config, args.overrides)
            trained[config.resolved_run_dir.rstrip("/")] = config
    argv = argv_of(command, "experiments/curves.py")
    opponents = argv[argv.index("--opponents") + 1].split(",") if "--opponents" in argv else []
    for run in [w.rstrip("/") for w in argv if w.startswith("runs/")]:
        assert run in trained, f"{where}: no command on the page trains {run}"
        assert trained[run].eval_every > 0, f"{where}: {run} is trained without evaluations (eval_every: 0)"
        assert set(opponents) <= set(trained[run].eval_opponents), (run, opponents, trained[run].eval_opponents)


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


def test_the_smallest_game_of_adding_a_game_plays_everywhere():
    """The guide's Nim, as written: the shared step protocol holds for it (an illegal move
    loses for the mover, a finished game stays), search beats a random player at it in the
    arena with no illegal move, and a network takes it."""
    import jax
    import numpy as np

    from beastybar_jax.agents import make_agent
    from beastybar_jax.arena import play_match
    from beastybar_jax.network import NetworkConfig, init_params, make_network

    guide = (REPO / "docs" / "adding-a-game.md").read_text()
    namespace: dict = {}
    exec(re.search(r"```python\n(.*?)```", guide, re.S).group(1), namespace)
    nim = namespace["NIM"]
    state = nim.init(jax.random.key(0))
    taken = nim.step(state, 2)  # three stones
    assert int(taken.stones) == 7 and int(taken.current_player) == 1
    forfeited = nim.step(taken.replace(stones=np.int32(1)), 2)  # three of one stone: illegal, P1 loses
    assert bool(forfeited.terminated) and forfeited.rewards.tolist() == [1.0, -1.0]
    assert nim.step(forfeited, 0).rewards.tolist() == [1.0, -1.0]  # a finished game stays
    result = play_match(make_agent("mcts-32", game=nim), make_agent("random", game=nim), 8, jax.random.key(1),
                        game=nim)
    assert result.illegal_moves == 0 and result.wins > result.losses
    network = make_network(NetworkConfig(width=8, depth=1), nim)
    params = init_params(network, jax.random.key(2), nim.observation_size)
    assert network.apply(params, jax.vmap(nim.observe, (0, None))(jax.tree.map(lambda x: x[None], state), 0)
                         ).policy_logits.shape == (1, nim.num_actions)


GUIDES = ("training", "evaluating", "playing", "adding-a-game", "adding-an-algorithm", "architecture",
          "performance", "strength", "rules")


def _config_keys(cls, prefix=""):
    """Dotted names of every field of a config model and of its sections."""
    from pydantic import BaseModel

    keys = []
    for name, field in cls.model_fields.items():
        options = getattr(field.annotation, "__args__", None) or (field.annotation,)
        section = next((o for o in options if isinstance(o, type) and issubclass(o, BaseModel)), None)
        keys += _config_keys(section, f"{prefix}{name}.") if section else [prefix + name]
    return keys


def test_every_config_key_is_named_in_the_training_guide():
    from beastybar_jax.config import TrainConfig

    guide = (REPO / "docs" / "training.md").read_text()
    keys = _config_keys(TrainConfig)
    assert len(keys) > 50, keys
    missing = [key for key in keys if f"`{key.rsplit('.', 1)[-1]}`" not in guide]
    assert missing == [], f"config keys not documented in docs/training.md: {missing}"
    sections = {key.rsplit(".", 1)[0] for key in keys if "." in key}
    assert [s for s in sorted(sections) if f"`{s}:`" not in guide] == [], "a config section is not named"


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_resolve_and_the_readme_links_every_guide():
    pages = [*DOCS, REPO / "CHANGELOG.md"]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", linked.read_text(), flags=re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []
    readme = (REPO / "README.md").read_text()
    assert all(f"(docs/{guide}.md" in readme for guide in GUIDES)
    assert "(CHANGELOG.md)" in readme


def test_readme_figures_are_the_detail_pages_figures():
    """Each number in the figure column of the README's summary table appears on the page
    its row links to, where the figure has its machine, date and command."""
    readme = (REPO / "README.md").read_text()
    table = readme.split("## Where it stands", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) >= 8, rows
    for what, figure, details in rows[1:]:
        page = REPO / re.search(r"\((docs/[\w-]+\.md)", details).group(1)
        text = page.read_text()
        for number in re.findall(r"\d+(?:[.,]\d+)*(?:%| [kM]\b)?", figure):
            assert number in text, f"README figure {number!r} ({what.strip()}) is not on {page.name}"


@pytest.mark.parametrize("page", ["performance", "strength"])
def test_every_measured_table_says_machine_date_and_command(page):
    """Docs hold current figures only, each with its machine, date and the command that
    reproduces it: every section of these pages that holds a table of figures names them."""
    text = (REPO / "docs" / f"{page}.md").read_text()
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        title = section.splitlines()[0]
        table = [line for line in section.splitlines() if line.startswith("|") and re.search(r"\d", line)]
        if not table:
            continue
        assert re.search(r"\b(CPU|H100|H200)\b", section), f"{page}.md, {title}: no machine"
        assert re.search(r"\b20\d\d-\d\d-\d\d\b", section), f"{page}.md, {title}: no date"
        assert re.search(r"python (experiments/|-m )|\.ci/run", section), f"{page}.md, {title}: no command"


DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.? \d{1,2}\b")
MACHINE = re.compile(r"\b(CPU|GPU|H100|H200|A100)\b")


def _past_fence(lines: list[str], i: int) -> int:
    """The index after the fenced block that opens at line ``i``."""
    return next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines)) + 1


def dated_prose(text: str) -> list[str]:
    """The lines of a page that carry a date but are neither a table's row nor its machine
    line. A machine line is in the paragraph right before a table (a command block may sit
    between them), and that paragraph names the machine. Code blocks are not read."""
    lines, bad, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            i = _past_fence(lines, i)
            continue
        if not lines[i].strip() or lines[i].startswith("|"):
            i += 1
            continue
        end = i + 1  # a heading, or a paragraph up to a blank line, a fence, a table or a heading
        if not lines[i].startswith("#"):
            while end < len(lines) and lines[end].strip() and not lines[end].startswith(("```", "|", "#")):
                end += 1
        paragraph, after = lines[i:end], end  # after it: blank lines and command blocks, then a table?
        while after < len(lines) and (not lines[after].strip() or lines[after].startswith("```")):
            after = _past_fence(lines, after) if lines[after].startswith("```") else after + 1
        machine_line = (not paragraph[0].startswith("#") and after < len(lines) and lines[after].startswith("|")
                        and MACHINE.search(" ".join(paragraph)))
        bad += [line for line in paragraph if DATE.search(line) and not machine_line]
        i = end
    return bad


def test_dated_prose_is_found():
    """The rule below, on examples: a dated machine line before its table (or before the
    command block above the table) passes; a dated sentence anywhere else does not."""
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert dated_prose(f"CPU, 2026-11-26, load 1:\n\n```bash\npython x.py\n```\n\n{table}") == []
    assert dated_prose(f"Text.\n\n| run | 2026-11-26 |\n|---|---|\n") == []
    assert dated_prose(f"{table}\nA run on the CPU on Nov 26 was slower.\n") == ["A run on the CPU on Nov 26 was slower."]
    assert dated_prose(f"A second run (2026-11-27)\nwas faster.\n\n{table}") == ["A second run (2026-11-27)"]
    assert dated_prose(f"## The run of 2026-11-26\n\n{table}") == ["## The run of 2026-11-26"]


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_guides_keep_dates_on_machine_lines_only(page):
    """The guides hold current figures, not a run log: a date appears only in a table's rows
    or on its machine line. Dated history belongs in CHANGELOG.md and in the acceptance
    reports' READMEs (docs/acceptance/), which this does not read."""
    assert dated_prose(page.read_text()) == [], f"{page.name}: dated lines outside a table's machine line"


def test_the_repository_stands_alone():
    """The conformance corpus is in tests/data/ and nothing in the repository reads from
    outside it (the ``../shared`` directory beside a checkout)."""
    assert (REPO / "tests" / "data" / "reference_random_games.jsonl.gz").is_file()
    outside = re.compile(r"\.\./shared|parent\s*/\s*[\"']shared")
    readers = [str(path.relative_to(REPO)) for pattern in ("*.py", "*.md", "*.yaml", "*.toml", "run")
               for path in REPO.rglob(pattern)
               if path.is_file() and path != pathlib.Path(__file__)
               and not any(part.startswith(".") and part != ".ci" or part == "runs" for part in path.parts[len(REPO.parts):])
               and outside.search(path.read_text(errors="replace"))]
    assert readers == [], readers


def test_pyproject_license_is_an_spdx_expression():
    """``license`` is an SPDX expression, which needs setuptools >= 77 (the older
    ``{ text = ... }`` table makes builds warn and stops working after 2027-02-18)."""
    import tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "MIT"
    assert "setuptools>=77" in pyproject["build-system"]["requires"]
