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
    """A directory or a binary file as ``--config``, and a seed >= 2**63 (also with
    ``--dry-run``, which compiles nothing): one line and exit code 2."""
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
    """An unwritable ``--json`` (a directory; a path below a file) is an error before the
    first game."""
    monkeypatch.setattr(evaluate, "play_match", lambda *a, **k: pytest.fail("played before checking --json"))
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for target in (tmp_path, a_file / "results.json"):
        assert evaluate.main(["--agent", "random", "--opponents", "greedy", "--json", str(target)]) == 2
        assert "--json" in one_line(capsys.readouterr().err)


def test_ctrl_c_in_evaluate_keeps_and_prints_the_finished_pairings(tmp_path, monkeypatch, capsys):
    """Ctrl-C during the second pairing: the first one is printed and written (marked
    interrupted), exit code 130."""
    def play_match(agent, opponent, num_deals, key, game=None, record_entry=False):
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
    assert "interrupted by SIGINT after 1 of 3 pairings" in captured.err and "Traceback" not in captured.err
    saved = json.loads(report.read_text())
    assert saved["interrupted"] and [r["opponent"] for r in saved["results"]] == ["greedy"]


def test_ctrl_c_in_evaluate_endgames_keeps_and_prints_the_agents_scored(tmp_path, monkeypatch, capsys):
    """Ctrl-C while the second agent is scored on the suite: the first is printed and
    written (marked interrupted), exit code 130 (it said nothing was finished)."""
    from beastybar_jax.games.beastybar.endgame import suite as endgame_suite

    def agent_moves(agent, suite, key, chunk=None):
        if agent.name == "heuristic":
            raise KeyboardInterrupt
        return suite.legal.argmax(axis=1)

    monkeypatch.setattr(endgame_suite, "agent_moves", agent_moves)
    report = tmp_path / "report.json"
    code = evaluate.main(["--endgames", "--agent", "random,heuristic,greedy", "--games", "16", "--plain",
                          "--json", str(report)])
    captured = capsys.readouterr()
    assert code == 130
    assert "random" in captured.out and "heuristic" not in captured.out and "greedy" not in captured.out
    assert "interrupted by SIGINT after 1 of 3 agents" in captured.err and "Traceback" not in captured.err
    saved = json.loads(report.read_text())
    assert saved["interrupted"] and [r["agent"] for r in saved["results"]] == ["random"]
    assert saved["results"][0]["positions"] == 16


def test_evaluate_tables_are_not_cut_when_piped():
    """A long agent spec stays whole in the rich table written to a pipe or file."""
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
    (["search", "--repeats", "0"], "argument --repeats: must be at least 1, got 0"),
    (["ppo", "--config", str(tiny_training.REPO_ROOT / "configs" / "ppo_quick.yaml"), "--set", "no_such_key=1"], "unknown config key 'no_such_key'"),
    # a PPO config timed as AlphaZero self-play reported millions of simulations a second
    (["selfplay", "--config", str(tiny_training.REPO_ROOT / "configs" / "ppo_quick.yaml")],
     "selfplay times AlphaZero iterations; "),
    (["env", "--batch-sizes", "2^3,0"], "argument --batch-sizes: expected comma-separated integers in [1, "),
    (["env", "--batch-sizes", "2^70"], "argument --batch-sizes: expected comma-separated integers in [1, "),
    (["env", "--steps", "20"], "--steps 20: above 16, a multiple of 16"),  # it ran 16, the report said 20
    # sizes the devices or the opponent pool cannot take: before the first row is measured, not a traceback
    (["ppo", "--config", str(tiny_training.REPO_ROOT / "configs" / "ppo_quick.yaml"), "--batch-sizes", "128,8"],
     "--batch-sizes 8: "),
    (["endgames", "--modes", "best,exact"], "argument --modes: expected comma-separated names from results, best"),
    (["matches", "--agents", "random,champ"], "unknown agent 'champ'"),
    (["matches", "--agents", " , "], "argument --agents: expected comma-separated agent specs"),
    (["matches", "--deals", "0"], "argument --deals: must be at least 1, got 0"),
    (["network", "--turns", "30"], "--turns 30: a game of beastybar lasts at most 24 moves"),
    (["network", "--batch-sizes", "4096", "--tiers", "3"], "--tiers 3: 4096 states have tiers 0 to 2"),
])
def test_benchmark_argument_errors_leave_the_results_alone(argv, expected, tmp_path, capsys):
    """A bad argument is one line and exit code 2, and the results file is not touched."""
    out = tmp_path / "env.json"
    out.write_text('{"kept": true}')
    with pytest.raises(SystemExit) as exit_info:
        code = benchmark.main(argv + ["--out", str(out)])
        raise SystemExit(code)
    assert exit_info.value.code == 2
    assert expected in one_line(capsys.readouterr().err)
    assert json.loads(out.read_text()) == {"kept": True}


def test_benchmark_keys_are_made_before_the_timer_starts(monkeypatch):
    """The first ``fold_in`` compiles: made inside a timed run, it took a sweep's first row
    (and every row with ``--repeats 1``) down to a sixtieth of its rate."""
    import jax

    from bench import common

    timing, fold_in, best_of = [False], jax.random.fold_in, common.best_of

    def watched_fold_in(*args):
        assert not timing[0], "a key was made inside a timed run"
        return fold_in(*args)

    def watched_best_of(repeats, run):
        def timed(r):
            timing[0] = True
            try:
                return run(r)
            finally:
                timing[0] = False
        return best_of(repeats, timed)

    monkeypatch.setattr(jax.random, "fold_in", watched_fold_in)
    monkeypatch.setattr(common, "best_of", watched_best_of)
    row = benchmark.env.bench_env(batch_size=2, num_steps=2, repeats=2, with_observation=False)
    assert row["steps"] == 4 and row["seconds"] > 0


def test_ctrl_c_in_a_benchmark_stops_before_the_next_row(tmp_path, monkeypatch, capsys):
    """A signal noted while a row is measured stops the sweep at the next row (it waited
    for the watchdog, or was ignored when the work ended first): exit code 130, nothing
    written."""
    from beastybar_jax.training.interrupt import Interrupted

    from bench import common, env

    measured = []

    def bench_env(batch, *args, **kwargs):
        measured.append(batch)
        return dict(variant="step", sampler="uniform", batch_size=batch, num_steps=16, steps=16 * batch, seconds=1.0,
                    steps_per_second=16.0 * batch, compile_seconds=0.0, checksum=0.0)

    def check_signals():
        if measured:  # the signal came during the first row
            raise Interrupted(2)

    monkeypatch.setattr(env, "bench_env", bench_env)
    monkeypatch.setattr(common, "check_signals", check_signals)
    out = tmp_path / "env.json"
    assert benchmark.main(["env", "--batch-sizes", "1,2,4", "--variant", "step", "--out", str(out)]) == 130
    assert measured == [1] and not out.exists()
    assert "interrupted by SIGINT: no results written" in capsys.readouterr().err


def test_benchmark_never_times_zero_repeats():
    with pytest.raises(ValueError, match="repeats"):
        benchmark.env.bench_env(batch_size=1, num_steps=1, repeats=0, with_observation=False)


# ----------------------------------------------------------------------------- conformance tool


def test_conformance_tool_on_bad_files(tmp_path, capsys):
    """A trace file that is missing, a directory, binary, not gzip, not JSON or not a
    trace: one line naming the file, exit code 2."""
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


# ----------------------------------------------------------------------------- bad numbers and paths

import exploit  # noqa: E402  (experiments/)
import make_endgame_suite  # noqa: E402
import play  # noqa: E402


def _exit_code(main, argv) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # argparse
        return e.code


@pytest.mark.parametrize("main, argv, expected", [
    (exploit.main, ["--minutes", "nan"], "argument --minutes: must be a finite number"),
    (exploit.main, ["--minutes", "inf"], "argument --minutes: must be a finite number"),
    (exploit.main, ["--minutes", "0"], "argument --minutes: must be greater than 0"),
    (exploit.main, ["--deals", "0"], "argument --deals: must be at least 1"),
    (exploit.main, ["--iterations", "0"], "argument --iterations: must be at least 1"),
    (exploit.main, ["--seed", "-1"], "argument --seed: must be at least 0"),
    # an exploiter is PPO, against --agent, with its own seed and budget: no config says otherwise unheard
    (exploit.main, ["--agent", "random", "--config", TINY], "is an alphazero config; the exploiter trains PPO"),
    (exploit.main, ["--agent", "random", "--set", "seed=3"], "--set seed: exploit.py sets it itself (use --seed)"),
    (exploit.main, ["--agent", "random", "--set", "ppo.opponent=greedy"], "name the agent to exploit twice"),
    (evaluate.main, ["--agent", "random", "--games", "0"], "argument --games: must be at least 1"),
    (evaluate.main, ["--agent", "random", "--games", "99999999999"], "argument --games: must be at most"),
    (evaluate.main, ["--agent", "random", "--seed", "99999999999999999999999"], "argument --seed: a seed must be"),
    (play.main, ["--seed", "99999999999999999999999"], "argument --seed: a deal seed must be"),
    # options a command would ignore, or a list it would read wrong
    (evaluate.main, ["--round-robin", "random,heuristic", "--opponents", "random"], "no --agent or --opponents with"),
    (evaluate.main, ["--endgames", "--agent", "random", "--opponents", "heuristic"], "--opponents applies to matches"),
    (evaluate.main, ["--agent", "random", "--opponents", ""], "--opponents needs at least one agent name"),
    (evaluate.main, ["--agent", "random", "--by", "turn"], "--by groups the endgame suite's positions"),
    (evaluate.main, ["--agent", "random", "--opponents", "greedy,greedy"], "--opponents names an agent twice"),
    (evaluate.main, ["--endgames", "--agent", "random,random"], "--agent names an agent twice"),
    (evaluate.main, ["--endgames", "--agent", "random", "--by", "depth"], "argument --by: invalid choice"),
    (make_endgame_suite.main, ["--seed", "x"], "argument --seed: expected an integer seed"),
    (make_endgame_suite.main, ["--games", "-3"], "argument --games: must be at least 1"),
    (make_endgame_suite.main, ["--label", "x"], "--label names the --network's pairings"),
    (benchmark.main, ["search", "--repeats", "0"], "argument --repeats: must be at least 1"),
    (benchmark.main, ["ppo", "--repeats", "-1"], "argument --repeats: must be at least 1"),
    (benchmark.main, ["env", "--seed", "1e3"], "argument --seed: expected an integer seed"),
    (train.main, ["--config", TINY, "--num-processes", "0"], "argument --num-processes: must be at least 1"),
])
def test_every_numeric_argument_is_checked_in_one_line(main, argv, expected, capsys):
    """Every numeric argument is finite and in range, or one line and exit code 2 before
    any work."""
    assert _exit_code(main, argv) == 2
    assert expected in one_line(capsys.readouterr().err)


def test_make_endgame_suite_checks_its_agents_and_out_before_the_games(tmp_path, monkeypatch, capsys):
    """Seven pairings of games (an hour at the default size) came before a traceback for a
    --network that is not there or an --out that cannot be written."""
    monkeypatch.setattr(make_endgame_suite, "make_suite", lambda *a, **k: pytest.fail("played before checking"))
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for argv, expected in ((["--network", f"checkpoint:{tmp_path / 'no_run'}", "--out", str(tmp_path / "s.npz")],
                            "no_run"),
                           (["--out", str(a_file / "s.npz")], "--out")):
        assert make_endgame_suite.main(["--games", "2", *argv]) == 2
        assert expected in one_line(capsys.readouterr().err)


def test_a_match_takes_one_agent_and_says_where_lists_go(capsys):
    """``--agent A,B`` lists agents for ``--endgames`` only; in a match it was read as one
    checkpoint path ("no such run directory or checkpoint: A,B")."""
    assert _exit_code(evaluate.main, ["--agent", "random,greedy", "--opponents", "heuristic"]) == 2
    message = one_line(capsys.readouterr().err)
    assert "a match measures one --agent" in message and "--round-robin" in message


OVER_THE_CAP = ("mcts-100000@worlds=100", "mcts-20000", "mcts-5000@worlds=3", "mcts-10@playouts=2000",
                "mcts-99999999999", "mcts-8@worlds=100001", "mcts-" + "9" * 5000, "champion@sims=100000",
                "champion@sims=5000@worlds=3", "checkpoint:/no/such/run@sims=20000", "solver+mcts-20000")


def test_agent_size_is_capped_by_the_registrys_one_bound_before_anything_is_built(monkeypatch, capsys):
    """Every agent spec searches at most ``MAX_SEARCH_WORK`` simulations x worlds x
    playouts per move (the bound the web app uses too). A spec over it is refused as it is
    parsed, before a network is read or an agent built, in one line naming the cap; the
    command lines that take agents end there with exit code 2. A count that is no
    positive integer is refused the same way; the cap itself is allowed."""
    from beastybar_jax.agents import AgentSpecError, make_agent, registry

    assert registry.MAX_SEARCH_WORK == 10_000
    built = lambda *a, **k: pytest.fail("built an agent over the cap")  # noqa: E731
    for name in ("mcts_agent", "network_agent"):
        monkeypatch.setattr(registry, name, built)
    monkeypatch.setattr(registry.checkpoint, "load_exported", built)
    monkeypatch.setattr(registry.checkpoint, "load_agent", built)
    for spec in OVER_THE_CAP:
        with pytest.raises(AgentSpecError, match="over the cap: agents search at most 10,000 simulations x worlds x "
                                                 "playouts per move") as caught:
            make_agent(spec)
        assert "\n" not in str(caught.value)
    for spec in ("mcts-8@playouts=0", "mcts-0", "champion@sims=0"):
        with pytest.raises(AgentSpecError, match="must be a positive integer"):
            make_agent(spec)
    for main, argv in ((evaluate.main, ["--agent", "mcts-100000@worlds=100", "--opponents", "random"]),
                       (evaluate.main, ["--round-robin", "random,champion@sims=100000"]),
                       (evaluate.main, ["--endgames", "--agent", "random,mcts-20000"]),
                       (play.main, ["--opponent", "champion@sims=100000"]),
                       (exploit.main, ["--agent", "mcts-100000@worlds=100"])):
        assert _exit_code(main, argv) == 2
        assert "over the cap: agents search at most 10,000" in one_line(capsys.readouterr().err)
    monkeypatch.undo()
    assert make_agent("mcts-100@worlds=50@playouts=2").name == "mcts-100@worlds=50@playouts=2"  # at the cap


def test_a_networks_own_worlds_count_toward_the_cap(monkeypatch):
    """``@sims=N`` without ``@worlds``: the run's own worlds count, read with its config."""
    from beastybar_jax.agents import AgentSpecError, make_agent, registry

    real = registry.search_config_with
    monkeypatch.setattr(registry, "search_config_with",  # a network whose run searched 4 worlds
                        lambda search, **changes: real(search, **{"num_determinizations": 4, **changes}))
    with pytest.raises(AgentSpecError, match=r"searches 5000 simulations x 4 worlds = 20,000 per move, over the cap"):
        make_agent("champion@sims=5000")
    assert make_agent("champion@sims=2500").search_setup.search.num_determinizations == 4


def test_output_paths_are_checked_before_any_work(tmp_path, monkeypatch, capsys):
    """exploit.py's --json and --save, benchmark.py's --out: an unwritable place is one
    line and exit code 2 before any training, so no result is lost at the end."""
    monkeypatch.setattr(exploit, "exploiter_config", lambda *a, **k: pytest.fail("worked before checking outputs"))
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    run = tmp_path / "run"  # a training run's checkpoints would be replaced by the exploiter's
    (run / "checkpoints" / "40").mkdir(parents=True)
    for argv, flag in ((["--json", str(a_file / "x.json")], "--json"), (["--json", str(tmp_path)], "--json"),
                       (["--save", str(a_file)], "--save"), (["--save", str(a_file / "dir")], "--save"),
                       (["--save", str(run)], "--save")):
        assert exploit.main(["--agent", "random", *argv]) == 2
        assert one_line(capsys.readouterr().err).startswith(f"error: {flag} ")
    assert (run / "checkpoints" / "40").is_dir()
    assert benchmark.main(["env", "--out", str(tmp_path)]) == 2
    assert "--out" in one_line(capsys.readouterr().err)


def test_dry_run_builds_the_ppo_opponents(capsys):
    """``--dry-run`` builds PPO's registry opponents as the run does: an unknown
    ``ppo.opponent`` is one line naming the key and exit code 2, a known one passes."""
    ppo = str(tiny_training.REPO_ROOT / "configs" / "ppo_quick.yaml")
    assert train.main(["--config", ppo, "--dry-run", "--set", "ppo.opponent=godzilla"]) == 2
    assert "ppo.opponent" in one_line(capsys.readouterr().err)
    assert train.main(["--config", ppo, "--dry-run", "--set", "ppo.opponent=heuristic"]) == 0


def test_a_search_that_cannot_fit_in_memory_is_refused_by_the_run_and_its_dry_run(tmp_path, capsys):
    """The search trees of one move (games x worlds x simulations + 1 nodes,
    ``search.device_loop.tree_bytes``) must fit in the device's memory: 10^8 simulations
    are one line naming the key and exit code 2, in the dry run and in the run itself
    (one pre-flight), before anything is written; a section set to null is refused too."""
    from beastybar_jax.config import ConfigError
    from beastybar_jax.games import get_game
    from beastybar_jax.training.loop import TrainLoop
    from beastybar_jax.training.preflight import check_search_memory

    huge = ["--set", "search.num_simulations=100000000", "--set", f"run_dir={tmp_path / 'run'}"]
    for extra in (["--dry-run"], []):
        assert train.main(["--config", TINY, *huge, *extra]) == 2
        line = one_line(capsys.readouterr().err)
        assert "'search.num_simulations' (100,000,000)" in line and "GiB" in line, line
    assert not (tmp_path / "run").exists()
    config = tiny_training.tiny_config(tmp_path / "run", "search.num_simulations=100000000")
    with pytest.raises(ConfigError, match="search.num_simulations"):
        TrainLoop(config, console=False)
    game = get_game("beastybar")
    check_search_memory(tiny_training.tiny_config(tmp_path), game, memory=2**30)  # 8 games x 5 nodes: bytes
    with pytest.raises(ConfigError, match="eval_simulations.*lower eval_simulations or eval_games"):
        check_search_memory(tiny_training.tiny_config(tmp_path, "eval_every=1", "eval_simulations=1000000"), game,
                            memory=2**30)
    assert train.main(["--config", TINY, "--set", "network=null", "--dry-run"]) == 2
    assert "config key 'network' is null" in one_line(capsys.readouterr().err)


def test_dry_run_reads_the_warm_start(tmp_path, capsys):
    """``--dry-run`` reads the warm start as the run does. A source that is not there yet
    is a note (an earlier stage may write it: configs/champion.yaml); one that is there but
    unreadable, or does not fit the network, is an error."""
    missing = str(tmp_path / "nonexistent")
    assert train.main(["--config", TINY, "--dry-run", "--set", f"warm_start={missing}"]) == 0
    assert "note: warm_start" in (message := capsys.readouterr().err) and "refuses to start until it is there" in message
    (tmp_path / "empty").mkdir()
    assert train.main(["--config", TINY, "--dry-run", "--set", f"warm_start={tmp_path / 'empty'}"]) == 2
    assert "warm_start" in one_line(capsys.readouterr().err)
    source = tiny_training.full_run()["run_dir"]  # width 32: refused at width 64, as the run would be
    assert train.main(["--config", TINY, "--dry-run", "--set", f"warm_start={source}", "--set", "network.width=64"]) == 2
    assert "other shapes" in one_line(capsys.readouterr().err)
    assert train.main(["--config", TINY, "--dry-run", "--set", f"warm_start={source}"]) == 0


def test_a_benchmark_starts_from_the_warm_start():
    """``benchmark.py selfplay`` / ``profile`` / ``ppo`` with ``--set warm_start=...`` time the
    source's network, as ``train.py`` would start it, not a fresh one; with a source that is
    not there yet, fresh parameters (``configs/champion.yaml`` is still timed)."""
    import jax
    import numpy as np

    from bench import common
    from beastybar_jax.checkpoint import load_agent
    from beastybar_jax.config import load_config
    from beastybar_jax.training.trainer import make_trainer

    source = tiny_training.full_run()["run_dir"]
    config = load_config(TINY, [f"warm_start={source}"])
    started = common.initial_state(make_trainer(config), config).params
    fresh = common.initial_state(make_trainer(config.replace(warm_start="")), config.replace(warm_start="")).params
    trained = load_agent(source).params
    assert jax.tree.structure(started) == jax.tree.structure(trained)
    for a, b, c in zip(jax.tree.leaves(started), jax.tree.leaves(trained), jax.tree.leaves(fresh)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert any(not np.array_equal(np.asarray(b), np.asarray(c)) for b, c in zip(jax.tree.leaves(trained),
                                                                                jax.tree.leaves(fresh)))
    # A source not there yet (an earlier stage's run) times the config with fresh parameters.
    later = config.replace(warm_start=str(tiny_training.TINY) + ".missing")
    for a, c in zip(jax.tree.leaves(common.initial_state(make_trainer(later), later).params), jax.tree.leaves(fresh)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(c))


def test_run_names_outside_runs_are_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    """A run name that would put the run outside ``runs/`` (``--set name=..``) is one line
    and exit code 2, with nothing written."""
    monkeypatch.chdir(tmp_path)
    assert train.main(["--config", TINY, "--set", "name=.."]) == 2
    assert "config key 'name'" in one_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


def test_endgame_tables_are_not_cut_when_piped():
    """``evaluate.py --endgames ... > file`` writes the table whole, wider than 80 columns."""
    from beastybar_jax.games.beastybar.endgame.suite import EndgameScore

    names = ["checkpoint:/a/rather/long/path/to/a/run/number/one", "checkpoint:/a/rather/long/path/to/a/run/number/two"]
    fields = {f: 0.5 for f in EndgameScore.__dataclass_fields__ if f not in ("agent", "positions")}
    out = io.StringIO()
    evaluate.print_endgame_table([EndgameScore(agent=n, positions=10, **fields) for n in names], out=out)
    assert all(name in out.getvalue() for name in names)


def test_curves_refuses_labels_plots_and_opponents_it_would_get_wrong(tmp_path, capsys):
    """Two runs with one directory name were merged into one line; ``--out plot`` wrote
    ``plot.png`` (and ``--out x.xyz`` failed after the table); an unknown opponent gave an
    empty panel. Each is now one line and exit code 2 before any output."""
    import curves

    runs = [tmp_path / "a" / "run", tmp_path / "b" / "run"]
    for index, run in enumerate(runs):
        run.mkdir(parents=True)
        (run / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "iteration_seconds": 2.0, "total_games": 8,
                                                       "eval_random_win_rate": 0.5 + index / 4}) + "\n")
    for argv, words in (([], "share the label 'run'"),
                        (["--names", "x,x"], "share the label 'x'"),
                        (["--names", "x,y", "--out", str(tmp_path / "plot")], "a plot is a .png, .pdf, .svg file"),
                        (["--names", "x,y", "--out", str(tmp_path / "plot.xyz")], "a plot is a"),
                        (["--names", "x,y", "--opponents", "heuristic"], "no run was evaluated against 'heuristic'")):
        with pytest.raises(SystemExit) as exit_info:
            curves.main([*map(str, runs), *argv])
        captured = capsys.readouterr()
        assert exit_info.value.code == 2 and words in one_line(captured.err) and not captured.out
    assert curves.main([*map(str, runs), "--names", "x,y"]) == 0
    table = capsys.readouterr().out
    assert "| x | 1 | 2 | 8 | 50.0% |" in table and "| y | 1 | 2 | 8 | 75.0% |" in table


def test_curves_names_a_file_that_is_not_text(tmp_path, capsys):
    """A metrics.jsonl that is not UTF-8 text: one line that names the file."""
    import curves

    (tmp_path / "metrics.jsonl").write_bytes(b'{"iteration": 1}\n\xff\xfe\x00garbage\n')
    assert curves.main([str(tmp_path)]) == 2
    assert str(tmp_path / "metrics.jsonl") in one_line(capsys.readouterr().err)


def test_the_exploiters_budget_is_minutes_or_iterations_whichever_ends_first():
    """exploit.py's training loop: ``--iterations`` alone trains exactly that many (no time
    limit, so the same exploiter at any load); a spent wall-clock budget still trains one."""
    import collections

    import jax
    import jax.numpy as jnp

    State = collections.namedtuple("State", "rng calls")

    class Trainer:  # the one method train_for uses: a compiled step that counts its calls
        def compiled_iteration(self, state):
            def step(state, key):
                return State(state.rng, state.calls + 1), dict(
                    moves=jnp.int32(10), games_vs_opponent=jnp.int32(1), score_vs_opponent=jnp.float32(0.25))
            return step, 0.0

    fresh = State(rng=jax.random.key_data(jax.random.key(0)), calls=0)
    state, info = exploit.train_for(Trainer(), 60.0, seed=0, report=None, state=fresh, max_iterations=3)
    assert state.calls == info["iterations"] == 3 and info["moves"] == 30 and info["training_score"] == 0.25
    state, info = exploit.train_for(Trainer(), 0.0, seed=0, report=None, state=fresh, max_iterations=3)
    assert state.calls == info["iterations"] == 1
    assert exploit.parse_args(["--iterations", "7"]).minutes is None  # no time limit
    assert exploit.parse_args([]).minutes == 5.0


# ----------------------------------------------------------------------------- several processes
# In process, with what JAX would say faked: the real multi-process runs are in test_distributed.py.


def test_a_coordinator_process_0_cannot_serve_is_one_line(monkeypatch):
    """Process 0 took any --coordinator: 'foo' was an IndexError inside JAX, a port in use
    a segmentation fault."""
    import socket

    from beastybar_jax.training import distributed

    monkeypatch.setattr(distributed.jax.distributed, "initialize",
                        lambda **kwargs: pytest.fail("reached JAX with a coordinator it cannot serve"))
    with pytest.raises(distributed.DistributedError, match="must be HOST:PORT"):
        distributed.initialize("foo", 2, 0)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(distributed.DistributedError, match=f"cannot serve the coordinator on port {port}"):
            distributed.initialize(f"127.0.0.1:{port}", 2, 0)


def test_processes_with_different_device_counts_are_refused_before_any_collective(monkeypatch):
    """A collective over processes with 2 and 1 devices failed inside JAX (a reshape error)."""
    from types import SimpleNamespace

    from beastybar_jax.config import ConfigError
    from beastybar_jax.training import distributed

    monkeypatch.setattr(distributed.jax, "process_count", lambda: 2)
    monkeypatch.setattr(distributed.jax, "devices", lambda: [SimpleNamespace(process_index=p) for p in (0, 0, 1)])
    monkeypatch.setattr(distributed, "_allgather_bytes", lambda data: pytest.fail("a collective came first"))
    with pytest.raises(ConfigError, match=r"different numbers of devices \(process 0: 2, process 1: 1\)"):
        distributed.check_same_config(tiny_training.tiny_config("unused"))


def _process_of_a_run_failing(monkeypatch, run_dir, message: str) -> list:
    """``train.py``'s loop replaced by one that fails with the runtime error ``message``,
    in a run of two processes; the list fills when the loop is closed."""
    import jax

    from beastybar_jax.training import loop as loop_module

    closed = []

    class Failing:
        def __init__(self, config, **kwargs):
            self.run_dir = str(run_dir)

        def run(self):
            raise jax.errors.JaxRuntimeError(message)

        def close(self):
            closed.append(True)

    monkeypatch.setattr(loop_module, "TrainLoop", Failing)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    return closed


def test_a_failed_collective_ends_a_process_of_the_run_in_one_line(tmp_path, monkeypatch, capsys):
    """A process killed mid-run left the others with a traceback, then a minute's hang in
    closing and an abort. Now: one line that says what to do, exit code 1, no close."""
    closed = _process_of_a_run_failing(monkeypatch, tmp_path,
                                       "INTERNAL: Gloo all-reduce failed: Connection reset by peer\nmore")
    assert train.main(["--config", TINY, "--set", f"run_dir={tmp_path}"]) == 1
    line = one_line(capsys.readouterr().err)
    assert "a collective between the run's processes failed (INTERNAL: Gloo all-reduce failed" in line
    assert "--resume" in line and not closed


def test_a_local_runtime_error_in_a_run_of_processes_is_not_blamed_on_a_peer(tmp_path, monkeypatch):
    """Only a failed collective is a lost process: running out of memory is this one's
    own error, raised as it is (and resuming would not help)."""
    import jax

    _process_of_a_run_failing(monkeypatch, tmp_path, "RESOURCE_EXHAUSTED: Out of memory allocating 1 GiB")
    with pytest.raises(jax.errors.JaxRuntimeError, match="RESOURCE_EXHAUSTED"):
        train.main(["--config", TINY, "--set", f"run_dir={tmp_path}"])


def test_a_process_started_for_another_number_of_processes_is_refused(monkeypatch):
    """Process 1 started with --num-processes 3 joined process 0's run of 2 and trained on."""
    import socket

    from beastybar_jax.training import distributed

    monkeypatch.setattr(distributed.jax.distributed, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed.jax.distributed, "initialize", lambda **kwargs: None)  # joined: a run of 2
    monkeypatch.setattr(distributed.jax.config, "update", lambda *args: None)  # no gloo for this test process
    monkeypatch.setattr(distributed.jax, "process_count", lambda: 2)
    with socket.socket() as coordinator:
        coordinator.bind(("127.0.0.1", 0))
        coordinator.listen()
        with pytest.raises(distributed.DistributedError, match="started for 3 processes, the run has 2"):
            distributed.initialize(f"127.0.0.1:{coordinator.getsockname()[1]}", 3, 1, timeout_seconds=10)


def test_a_process_stopped_by_another_ones_signal_knows_which(monkeypatch):
    """The stop is agreed by an allgather of each process's signal (it was a bool, and a
    process that got none said SIGTERM)."""
    from types import SimpleNamespace

    import numpy as np
    from jax.experimental import multihost_utils

    from beastybar_jax.training import loop as loop_module

    monkeypatch.setattr(loop_module.jax, "process_count", lambda: 2)
    gathered = []

    def allgather(value):
        gathered.append(int(value))
        return np.asarray([int(value), 2])  # process 1 got SIGINT

    monkeypatch.setattr(multihost_utils, "process_allgather", allgather)
    here = SimpleNamespace(_stop=SimpleNamespace(requested=False, signum=None), _run_signum=None)
    assert loop_module.TrainLoop.stop_requested.fget(here) is True
    assert here._run_signum == 2 and gathered == [0]


def test_a_failed_command_of_a_run_of_processes_exits_at_once(monkeypatch):
    """JAX's distributed shutdown waits for the other processes, which may be gone (a
    minute, then an abort): a failed command of such a run leaves without it."""
    from beastybar_jax.training import interrupt

    class Exited(Exception):
        pass

    def fast_exit(code):
        raise Exited(code)

    monkeypatch.setattr(interrupt.os, "_exit", fast_exit)
    monkeypatch.setattr(interrupt, "_in_multiprocess_run", lambda: True)
    with pytest.raises(Exited, match="^1$"):
        interrupt.exit_command(1)
    with pytest.raises(SystemExit):  # a finished run shuts down in order
        interrupt.exit_command(0)


def test_benchmark_repeat_keys_are_the_keys_the_runs_used():
    """Made ahead of the timer, the keys are those the timed runs made for themselves."""
    import jax

    from bench import common

    key = jax.random.key(7)
    for offset in (0, 1):
        made = common.repeat_keys(key, 3, offset=offset)
        for r, k in enumerate(made):
            assert (jax.random.key_data(k) == jax.random.key_data(jax.random.fold_in(key, offset + r))).all()


def test_endgame_evaluation_without_eval_every_is_noted(capsys):
    """eval_endgames: true with eval_every: 0 trained without a word and evaluated nothing."""
    assert train.main(["--config", TINY, "--set", "eval_endgames=true", "--set", "eval_every=0", "--dry-run"]) == 0
    assert "note: eval_endgames is on but eval_every is 0" in capsys.readouterr().err
    assert train.main(["--config", TINY, "--set", "eval_endgames=true", "--set", "eval_every=5", "--dry-run"]) == 0
    assert "note:" not in capsys.readouterr().err
