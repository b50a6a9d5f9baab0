"""experiments/acceptance.py: one command re-measures every GPU figure; at tiny scale on
the CPU here, so the script cannot rot."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from helpers.tiny_training import FAST_COMPILE_FLAG

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "experiments", "acceptance.py")


def acceptance(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    # Cheap XLA optimisation: at tiny scale the parts spend most of their time compiling.
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, XLA_FLAGS=FAST_COMPILE_FLAG))


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("acceptance")
    # Two parts at a time: the figures only have to exist here, not to be comparable.
    proc = acceptance("--out", str(out), "--scale", "tiny", "--jobs", "2", "--commit", "0123abc")
    with open(out / "report.json") as f:
        return proc, out, json.load(f)


@pytest.mark.slow
def test_tiny_scale_runs_every_part_and_reports_each_figure(tiny_report):
    proc, out, report = tiny_report
    parts = {p["part"]: p for p in report["parts"]}
    assert list(parts) == ["conformance", "engine", "search", "learner", "iteration", "strength", "gpu_tests"]
    failed = {name: p.get("why") for name, p in parts.items() if p["status"] != "ok"}
    assert not failed and proc.returncode == 0, (failed, proc.stdout[-2000:], proc.stderr[-2000:])
    figures = {f["name"]: f for p in report["parts"] for f in p["figures"]}
    # The engine on this device replays the reference corpus exactly, and the target says so.
    assert figures["conformance_mismatches"]["value"] == 0 and figures["conformance_mismatches"]["met"] is True
    for name in ("engine_step_steps_per_second", "engine_mask_obs_steps_per_second", "search_sims_per_second",
                 "learner_sims_per_second", "ppo_env_steps_per_second"):
        assert figures[name]["value"] > 0, name
        assert figures[name].get("compile_seconds", 1.0) > 0, name  # compile time is reported apart
    compile_s = figures["alphazero_compile_seconds"]
    assert 0 < compile_s["trace_seconds"] < compile_s["value"]  # and of it JAX's tracing, before XLA's compiler
    assert figures["ppo_env_steps_per_second"]["met"] in (True, False)  # a target sits next to the figure
    assert 0.0 <= figures["strength_raw_vs_heuristic"]["value"] <= 1.0
    assert figures["strength_raw_vs_heuristic"]["games"] == 10
    for label in ("raw", "sims4"):
        shares = [figures[f"endgames_{label}_{m}"]["value"] for m in ("keeps_result", "throws_win", "throws_draw")]
        assert all(0.0 <= x <= 1.0 for x in shares) and sum(shares) <= 1.0 + 1e-6
    assert "tests collected" in figures["gpu_tests"]["value"]
    assert report["machine"]["backend"] and report["machine"]["date"]
    assert report["commit"] == "0123abc"  # as given (--commit)
    # report.md and --table show the same figures as report.json.
    markdown = (out / "report.md").read_text()
    table = acceptance("--table", str(out / "report.json"), timeout=120)
    assert table.returncode == 0
    for name in figures:
        assert f"| {name} |" in markdown and f"| {name} |" in table.stdout, name


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "experiments", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_report_names_the_checkouts_commit_and_whether_its_files_differ(tmp_path, monkeypatch):
    """Without ``--commit`` the report names the checkout's commit, ``-dirty`` where a
    tracked file differs from it: a GPU machine sent the working tree with older git
    metadata once reported the older commit as if it had measured it."""
    module = load_script("acceptance")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run(git + ["init", "-q"], check=True)
    (tmp_path / "code.py").write_text("x = 1\n")
    subprocess.run(git + ["add", "code.py"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "first"], check=True)
    head = subprocess.run(git + ["rev-parse", "--short=7", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    monkeypatch.setattr(module, "REPO", str(tmp_path))
    assert module.git_commit() == head
    (tmp_path / "code.py").write_text("x = 2\n")
    assert module.git_commit() == f"{head}-dirty"
    monkeypatch.setattr(module, "REPO", str(tmp_path / "nowhere"))
    assert module.git_commit() == "unknown"


def test_the_full_scale_strength_part_asks_evaluate_for_what_it_accepts(tmp_path, monkeypatch):
    """The tiny scale runs the part here; the full scale's own command lines (the whole
    endgame suite, matches with search) must parse too, or a GPU run fails at its end."""
    module, evaluate = load_script("acceptance"), load_script("evaluate")
    commands = []

    def fake_cli(args, log, timeout):  # record the command, write what evaluate.py would
        commands.append(args)
        path = args[args.index("--json") + 1]
        row = dict(opponent="heuristic", win_rate=0.9, games=2, score=0.9, keeps_result=0.9, throws_win=0.05,
                   throws_draw=0.05, positions=2)
        with open(path, "w") as f:
            json.dump(dict(results=[row, row]), f)

    monkeypatch.setattr(module, "run_cli", fake_cli)
    monkeypatch.setattr(module, "_train_for", lambda s, run_dir, log: dict(seconds=1.0, iterations=1))
    figures = list(module.part_strength(module.SCALES["full"], str(tmp_path), print))
    assert len(commands) == 3 and len(figures) == 2 * 2 + 2 * 3
    for args in commands:
        assert args[0].endswith("evaluate.py")
        evaluate.parse_args(args[1:])  # an argparse error exits


def test_each_documented_gpu_slot_fits_a_ten_minute_command():
    """docs/performance.md splits the full scale into commands for a device machine that runs
    a command for at most 10 minutes: the budgets of each command's parts must fit, with half
    a minute to spare for starting the script, or a part is cut off."""
    module = load_script("acceptance")
    with open(os.path.join(REPO, "docs", "performance.md")) as f:
        slots = re.findall(r"python experiments/acceptance.py --out \S+ --parts (\S+)\n", f.read())
    assert len(slots) >= 2, slots
    assert sorted(p for slot in slots for p in slot.split(",")) == sorted(module.PARTS)
    for slot in slots:
        assert sum(module.BUDGETS["full"][part] for part in slot.split(",")) <= 600 - 30, slot


def test_the_table_opens_with_the_machine_line_and_each_parts_status(tmp_path, capsys):
    """``--table`` prints what a table in the docs needs above the figures: one line with the
    report's date, machine, versions, commit and command, and each part's status and seconds
    (a part that ran out of time keeps the figures it finished)."""
    module = load_script("acceptance")
    machine = dict(backend="gpu", device="NVIDIA H100", num_devices=1, python="3.12.3", jax="0.11.2",
                   date="2026-11-26")
    report = dict(scale="full", commit="abc1234", command="python experiments/acceptance.py --out x", machine=machine,
                  parts=[dict(part="engine", status="ok", seconds=20.4,
                              figures=[module.figure("engine_step_steps_per_second", 5.72e7, "steps/s", batch_size=4096)]),
                         dict(part="search", status="timed out", why="after 70 s", seconds=70.0, figures=[])])
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    assert module.main(["--table", str(path)]) == 0
    first, blank, *table = capsys.readouterr().out.splitlines()
    assert first == ("2026-11-26, NVIDIA H100 x1 (gpu), jax 0.11.2, python 3.12.3, commit abc1234; command: "
                     "`python experiments/acceptance.py --out x`. Parts: engine ok (20 s), search timed out (70 s).")
    assert blank == "" and table[2].startswith("| engine | engine_step_steps_per_second | 57.2 M steps/s |")


def test_the_docs_show_each_devices_latest_report_as_generated():
    """docs/acceptance/<device>/ holds one device's latest ``report.json`` beside a README
    naming the run, and docs/performance.md shows exactly what ``--table`` prints for it
    (regenerate, never edit)."""
    module = load_script("acceptance")
    with open(os.path.join(REPO, "docs", "performance.md")) as f:
        page = f.read()
    devices = sorted(glob.glob(os.path.join(REPO, "docs", "acceptance", "*", "report.json")))
    assert devices
    for path in devices:
        folder = os.path.dirname(path)
        with open(path) as f:
            report = json.load(f)
        assert os.path.isfile(os.path.join(folder, "README.md")), folder
        assert module.docs_table(report) in page, f"docs/performance.md does not show --table {path}"


def test_a_part_past_its_budget_is_reported_and_the_run_goes_on(tmp_path):
    module = load_script("acceptance")
    os.makedirs(tmp_path / "parts")
    # One second is not enough to start JAX, let alone compile: the part is stopped.
    result = module.spawn_part("engine", "tiny", str(tmp_path), budget=1.0)
    assert result["status"] == "timed out" and result["why"] == "after 1 s"
    assert result["figures"] == []
    assert module.table(dict(parts=[result])).count("\n") == 1  # header only: no figure to show


@pytest.mark.parametrize("args, message", [
    (["--out", "{tmp}", "--parts", "engine,godzilla"], "unknown part(s) godzilla"),
    (["--scale", "huge", "--out", "{tmp}"], "invalid choice: 'huge'"),
    (["--out", "{tmp}", "--jobs", "0"], "--jobs: must be at least 1, not 0"),
    ([], "give --out DIR"),
    (["--table", "{tmp}/list.json"], "not an acceptance report"),
])
def test_bad_arguments_end_in_one_line(tmp_path, args, message):
    (tmp_path / "list.json").write_text("[]")  # JSON, but no report (a TypeError traceback once)
    proc = acceptance(*[a.format(tmp=tmp_path) for a in args], timeout=120)
    assert proc.returncode == 2
    assert [message in line for line in proc.stderr.strip().splitlines()] == [True]  # one line, no usage first


def test_an_unwritable_out_directory_is_refused_before_any_part(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = acceptance("--out", str(blocker / "report"), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: --out {blocker / 'report'} cannot be written: Not a directory"]


def _processes_naming(text: str) -> list[str]:
    """Command lines of the live processes that contain ``text``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(cmdline)
    return found


# The script started with SIGINT ignored, as a shell starts a background job (exec keeps it).
IGNORING_SIGINT = ["-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                         "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table from /proc")
@pytest.mark.parametrize("signum, start", [(signal.SIGINT, IGNORING_SIGINT), (signal.SIGTERM, [])],
                         ids=["ctrl-c, started as a background job", "sigterm"])
def test_a_signal_stops_every_running_part_and_writes_the_report(tmp_path, signum, start):
    out = tmp_path / "interrupted"
    proc = subprocess.Popen([sys.executable, *start, SCRIPT, "--out", str(out), "--scale", "tiny", "--parts",
                             "engine,search,learner", "--jobs", "2"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    def running_parts() -> int:
        return sum("--run-part" in c for c in _processes_naming(str(out)))

    deadline = time.monotonic() + 600  # generous: only a stuck start ends the wait
    while running_parts() < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert running_parts() == 2, "the two workers never started their parts"
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, stderr[-2000:]
    assert "interrupted: the report names every part (finished, interrupted or not started)" in stderr
    assert _processes_naming(str(out)) == []  # no part left running in the background ...
    for name in ("engine", "search"):  # ... nor waited for: both were stopped unfinished
        path = out / "parts" / f"{name}.json"
        assert not path.exists() or json.loads(path.read_text())["status"] != "ok", name
    with open(out / "report.json") as f:
        report = json.load(f)
    assert report["interrupted"] is True
    parts = {p["part"]: p for p in report["parts"]}  # every part asked for, each with what became of it
    assert parts["engine"]["status"] == parts["search"]["status"] == "interrupted"
    assert parts["learner"]["status"] == "not started"  # queued behind the two
    assert parts["engine"]["why"] == f"stopped by {signal.Signals(signum).name}"
    assert "**Interrupted**" in (out / "report.md").read_text()
