"""Runs that survive interrupts, crashes, damaged checkpoints, a second writer and a
full disk (the contract in docs/training.md, "Interrupts, crashes and resume").

Signals and ``kill -9`` go to real ``experiments/train.py`` processes on the tiny
config, paused at a chosen moment by ``tests/helpers/train_paused.py``; every resume is
compared with the session's uninterrupted tiny run (``tiny_training.full_run``). The
processes share the session's compilation cache, so only the first one compiles.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from helpers import tiny_training, experiment
from beastybar_jax.checkpoint import Checkpointer, failure_reason, load_agent
from beastybar_jax.training.loop import TrainLoop
from beastybar_jax.training.metrics import read_jsonl
from beastybar_jax.checkpoint import (CHECKSUMS_FILE, RESUMABLE_CHANGES, CheckpointError,
                                               DamagedCheckpointError, DamagedCheckpointWarning, check_resume_config)
from beastybar_jax.training.interrupt import Interrupted
from beastybar_jax.training.metrics import MetricsLogger, rewind_jsonl
from beastybar_jax.training.rundir import RunDirError, RunLockedError
from beastybar_jax.training.trainer import abstract_state

pytestmark = pytest.mark.slow  # training processes signalled and killed (CI runs it; the quick loop skips it)

REPO_ROOT = tiny_training.REPO_ROOT
PAUSED = REPO_ROOT / "tests" / "helpers" / "train_paused.py"
CLI = REPO_ROOT / "experiments" / "train.py"
# Generous: the machine running the tests may be busy; nothing waits this long unless broken.
START_TIMEOUT = 600
STOP_TIMEOUT = 300


@pytest.fixture(scope="module")
def full_run():
    return tiny_training.full_run()


def shared_trainer():
    return tiny_training.trainer()


def iterations(run_dir) -> list[int]:
    return [int(r["iteration"]) for r in read_jsonl(str(pathlib.Path(run_dir) / "metrics.jsonl"))]


def assert_same_params(a, b):
    jax.tree.map(np.testing.assert_array_equal, jax.device_get(a), jax.device_get(b))


class PausedCommand:
    """A command line (``script``, default experiments/train.py) in a subprocess, paused at
    ``pause_at`` (see tests/helpers/train_paused.py); ``env`` adds environment variables."""

    def __init__(self, tmp_path, pause_at: str, args: list[str], script: str = "experiments/train.py", **env: str):
        self.marker = tmp_path / "paused"
        self.argv = [sys.executable, str(PAUSED), *args]
        # The watchdog waits long unless a test asks otherwise: an orderly stop must not race it on a busy machine.
        env.setdefault("BEASTYBAR_STOP_SECONDS", str(START_TIMEOUT))
        env = tiny_training.cli_env(PAUSE_AT=pause_at, PAUSE_MARKER=str(self.marker), PAUSE_SCRIPT=script, **env)
        self.process = subprocess.Popen(self.argv, env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)

    def wait_for(self, predicate, what: str, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.process.poll() is not None:
                out, err = self.process.communicate()
                pytest.fail(f"the run ended (code {self.process.returncode}) before {what}:\n{err[-3000:]}")
            if time.monotonic() > deadline:
                self.process.kill()
                pytest.fail(f"no {what} after {timeout} s")
            time.sleep(0.05)

    def wait_paused(self) -> None:
        self.wait_for(self.marker.exists, "pause")

    def send(self, signum: int) -> tuple[int, str, str, float]:
        """Send ``signum``; returns (exit code, stdout, stderr, seconds to exit)."""
        start = time.monotonic()
        self.process.send_signal(signum)
        try:
            out, err = self.process.communicate(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
            pytest.fail(f"still running {STOP_TIMEOUT} s after {signal.Signals(signum).name}:\n{err[-3000:]}")
        return self.process.returncode, out, err, time.monotonic() - start


class PausedRun(PausedCommand):
    """``experiments/train.py`` on the tiny config in a subprocess, paused at ``pause_at``."""

    def __init__(self, tmp_path, pause_at: str, *overrides: str, **env: str):
        self.run_dir = tmp_path / "run"
        super().__init__(tmp_path, pause_at, ["--config", str(tiny_training.TINY), "--set", f"run_dir={self.run_dir}",
                                              "--set", "tensorboard=false", *overrides], **env)


def assert_one_clear_line(err: str, expected: str) -> None:
    assert "Traceback" not in err and "ERROR" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], lines


def assert_the_line(err: str, expected: str) -> None:
    """The command's one line is there, once. What a library may print around it (a
    thread's traceback whose timing depends on the machine's load) is not judged here."""
    lines = [line for line in err.splitlines() if expected in line]
    assert len(lines) == 1, err[-3000:]


# ----------------------------------------------------------------------------- signals


def test_sigint_while_a_checkpoint_is_being_saved_keeps_it(tmp_path):
    """Ctrl-C while orbax writes checkpoint 3: no second save of the same step, no
    tracebacks, no hang; checkpoint 3 is complete (with checksums)."""
    run = PausedRun(tmp_path, "save:3")
    run.wait_paused()
    code, out, err, seconds = run.send(signal.SIGINT)
    assert code == 130, err[-3000:]
    assert_one_clear_line(err, "interrupted by SIGINT: checkpoint 3 saved")
    assert Checkpointer(run.run_dir).all_steps() == [3]
    assert (run.run_dir / "checkpoints" / "3" / CHECKSUMS_FILE).exists()
    assert load_agent(run.run_dir).iteration == 3
    assert iterations(run.run_dir) == [1, 2, 3]


def test_sigterm_mid_iteration_saves_that_iteration_refuses_a_second_writer_and_resumes_exactly(
        tmp_path, full_run):
    """SIGTERM after iteration 4 ran but before its metrics line:
    the line is written, then iteration 4 is checkpointed (they agree), exit 143. While
    it runs, a second training in the run_dir is refused naming the holder's pid. The
    log is not wrapped at 80 columns. Resuming gives the uninterrupted run, bit for bit,
    with each iteration logged once."""
    run = PausedRun(tmp_path, "hook:4")
    run.wait_paused()
    config = tiny_training.tiny_config(run.run_dir)
    with pytest.raises(RunLockedError, match=f"pid {run.process.pid} on host"):
        TrainLoop(config, resume=True, trainer=shared_trainer(), console=False)
    code, out, err, seconds = run.send(signal.SIGTERM)
    assert code == 143, err[-3000:]
    assert_one_clear_line(err, "interrupted by SIGTERM: checkpoint 4 saved")
    assert "compiling the training iteration ..." in out  # a log file gets a line, not a spinner
    logged = [line for line in out.splitlines() if line.startswith("it 4/6 | loss")]
    assert len(logged) == 1 and len(logged[0]) > 80 and logged[0].rstrip().endswith(" s"), out
    assert Checkpointer(run.run_dir).latest_step() == 4 and iterations(run.run_dir) == [1, 2, 3, 4]

    loop = TrainLoop(config, resume=True, trainer=shared_trainer(), console=False)
    assert loop.start_iteration == 4
    state = loop.run()
    loop.close()
    assert_same_params(state.params, full_run["state"].params)
    assert iterations(run.run_dir) == list(range(1, 7))


def test_kill_9_then_resume_logs_each_iteration_once(tmp_path, full_run):
    """kill -9 after iteration 5 (checkpoint 3), with half a line at the end of
    metrics.jsonl: the lock is not stuck, the resume
    redoes 4..6 bit for bit and the metrics hold each iteration once."""
    run = PausedRun(tmp_path, "logged:5")
    run.wait_paused()
    run.wait_for(lambda: (run.run_dir / "checkpoints" / "3").is_dir(), "checkpoint 3")
    code, *_ = run.send(signal.SIGKILL)
    assert code == -signal.SIGKILL
    with open(run.run_dir / "metrics.jsonl", "a") as f:
        f.write('{"iteration": 6, "time": 17')  # a write cut short by the crash
    assert iterations(run.run_dir) == [1, 2, 3, 4, 5]  # read_jsonl skips the partial last line

    loop = TrainLoop(tiny_training.tiny_config(run.run_dir), resume=True, trainer=shared_trainer(), console=False)
    assert loop.start_iteration == 3
    state = loop.run()
    loop.close()
    assert_same_params(state.params, full_run["state"].params)
    assert iterations(run.run_dir) == list(range(1, 7))
    reference = {r["iteration"]: r for r in full_run["metrics"]}
    for r in read_jsonl(str(run.run_dir / "metrics.jsonl")):
        assert r.get("loss") == reference[r["iteration"]].get("loss")  # absent where it did not train


def test_interrupt_during_the_first_compile_leaves_nothing_that_blocks_a_new_run(tmp_path):
    """Ctrl-C while the first compile runs stops within seconds (the compile is
    left in its thread), without a crash at exit and without a checkpoint 0; the same
    command then starts a new run."""
    run = PausedRun(tmp_path, "compile")
    run.wait_paused()
    code, out, err, seconds = run.send(signal.SIGINT)
    assert code == 130, err[-3000:]  # a segfault would be -11 (the process ended: the compile thread did not hold it)
    assert_one_clear_line(err, "interrupted by SIGINT before the first iteration finished: nothing to save")
    assert Checkpointer(run.run_dir).all_steps() == []
    loop = TrainLoop(tiny_training.tiny_config(run.run_dir), trainer=shared_trainer(), console=False)
    assert loop.start_iteration == 0
    loop.close()


def test_a_signal_the_loop_cannot_see_ends_the_run_with_its_one_line(tmp_path):
    """A signal while the main thread runs no Python handler
    (a long compile or device call; here a pause deaf to signals, after iteration 4
    ran): the command's watchdog ends it after BEASTYBAR_STOP_SECONDS with the loop's
    one line and exit code 143, no crash, checkpoint 3 intact."""
    run = PausedRun(tmp_path, "hook:4", PAUSE_STUCK="1", BEASTYBAR_STOP_SECONDS="1")
    run.wait_paused()
    run.wait_for((run.run_dir / "checkpoints" / "3").is_dir, "checkpoint 3")  # orbax renames it when complete
    code, out, err, seconds = run.send(signal.SIGTERM)
    assert code == 143, err[-3000:]
    assert_one_clear_line(err, "interrupted by SIGTERM during iteration 4: the newest checkpoint is 3")
    assert load_agent(run.run_dir).iteration == 3 and iterations(run.run_dir) == [1, 2, 3]


def test_a_signal_while_the_run_is_set_up_is_noted_not_raised_inside_jax(tmp_path):
    """SIGINT while the trainer is built (tracing, the first compiles, where a
    KeyboardInterrupt raised inside JAX could be swallowed by a callback or crash the
    process): noted, acted on once the set-up returns: one line, exit code 130, nothing
    saved, no lock left."""
    run = PausedRun(tmp_path, "call:beastybar_jax.training.loop:make_trainer:1")
    run.wait_paused()
    code, out, err, seconds = run.send(signal.SIGINT)
    assert code == 130, err[-3000:]
    assert_one_clear_line(err, "interrupted by SIGINT before training started: nothing was saved")
    assert Checkpointer(run.run_dir).all_steps() == [] and not (run.run_dir / "run.lock").exists()


OPPONENTS = ["greedy", "heuristic", "aggressive"]
# Where a signal reaches evaluate.py: (pause point, deaf to signals while paused (a compile
# or a device call, where Python runs no handler), the signal, the pairings finished, the line).
EVALUATE_STOPS = [
    ("import:jax", False, signal.SIGTERM, 0, "interrupted by SIGTERM after 0 of 3 pairings: nothing to report"),
    ("call:beastybar_jax.arena:play_match:1", True, signal.SIGINT, 0,
     "interrupted by SIGINT before the first pairing finished: nothing to report"),
    ("call:beastybar_jax.arena:play_match:2", False, signal.SIGINT, 2,
     "interrupted by SIGINT after 2 of 3 pairings: the tables show the finished ones"),
    ("call:beastybar_jax.arena:play_match:2", True, signal.SIGTERM, 1,
     "interrupted by SIGTERM after 1 finished pairing (the pairing being played is lost)"),
    ("call:beastybar_jax.arena:elo_table:1", False, signal.SIGTERM, 3,
     "interrupted by SIGTERM after all 3 pairings finished: the tables show them"),
    ("call:beastybar_jax.arena:elo_table:1", True, signal.SIGINT, 3,
     "interrupted by SIGINT after all 3 pairings finished: the tables show them"),
    ("call:rich.table:Table:1", False, signal.SIGINT, 3,
     "interrupted by SIGINT after all 3 pairings finished: the tables show them"),
    ("call:json:dump:1", False, signal.SIGTERM, 3,
     "interrupted by SIGTERM after all 3 pairings finished: the tables show them"),
]


@pytest.mark.parametrize("pause_at, deaf, signum, done, line", EVALUATE_STOPS,
                         ids=[f"{p[0].split(':')[-2] if p[0].startswith('call') else p[0]}{'-deaf' if p[1] else ''}-"
                              f"{signal.Signals(p[2]).name}" for p in EVALUATE_STOPS])
def test_evaluate_stopped_at_any_moment_keeps_what_finished(tmp_path, pause_at, deaf, signum, done, line):
    """SIGINT or SIGTERM at any moment of evaluate.py (its imports, a pairing's compile or
    match, whether or not Python can run a handler there, the report, the tables, the
    JSON): the pairings finished by then are printed and written to --json (marked
    interrupted while some are missing; no JSON when none finished), one line says what
    was kept, and the exit code is 128 + signal."""
    report = tmp_path / "report.json"
    argv = ["--agent", "random", "--opponents", ",".join(OPPONENTS), "--games", "2", "--json", str(report)]
    env = dict(PAUSE_STUCK="1", BEASTYBAR_STOP_SECONDS="1") if deaf else {}
    command = PausedCommand(tmp_path, pause_at, argv + ([] if "rich" in pause_at else ["--plain"]),
                            script="experiments/evaluate.py", **env)
    command.wait_paused()
    code, out, err, seconds = command.send(signum)
    assert code == 128 + signum, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert_the_line(err, line)
    assert [name for name in OPPONENTS if name in out] == OPPONENTS[:done], out
    if not done:
        assert not report.exists()
        return
    saved = json.loads(report.read_text())
    assert [r["opponent"] for r in saved["results"]] == OPPONENTS[:done]
    assert saved["interrupted"] == (done < len(OPPONENTS))
    assert not list(tmp_path.glob("report.json.*"))  # no temporary file left beside it


TINY_EXPLOIT = ["--agent", "random", "--deals", "2", "--quiet", "--set", "num_games=8", "--set", "ppo.rollout_length=4",
                "--set", "network.width=16", "--set", "network.depth=1", "--set", "ppo.num_minibatches=2"]


def test_exploit_stopped_while_training_keeps_the_exploiter(tmp_path):
    """Ctrl-C while the exploiter trains (before its third iteration):
    that iteration finishes, the exploiter is saved in --save, one line, exit code 130."""
    save = tmp_path / "exploiter"
    command = PausedCommand(tmp_path, "call:beastybar_jax.training.trainer:iteration_key:3",
                            ["--minutes", "60", "--save", str(save), *TINY_EXPLOIT], script="experiments/exploit.py")
    command.wait_paused()
    code, out, err, seconds = command.send(signal.SIGINT)
    assert code == 130, err[-3000:]
    assert_one_clear_line(err, f"interrupted by SIGINT after 3 training iterations: the exploiter is saved in {save}")
    assert load_agent(save).iteration == 3


def _unshare_works() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt 2>/dev/null || "
                            "mount -t tmpfs -o size=1m tmpfs \"$0\"", "/tmp"], capture_output=True)
    return probe.returncode == 0


FULL_DISK_SCRIPT = r"""
set -e
mount -t tmpfs -o size=4m tmpfs "$DISK"
cp -a "$SOURCE" "$DISK/run"
avail=$(df -k --output=avail "$DISK" | tail -1)
fallocate -l $(( (avail - 16) * 1024 )) "$DISK/filler" 2>/dev/null || \
    dd if=/dev/zero of="$DISK/filler" bs=1024 count=$(( avail - 16 )) 2>/dev/null || true
set +e
"$PYTHON" "$CLI" --config "$CONFIG" --set run_dir="$DISK/run" --set tensorboard=false --resume --no-console \
    > "$OUT/stdout" 2> "$OUT/stderr"
echo $? > "$OUT/code"
cp -a "$DISK/run" "$OUT/run"
"""


@pytest.mark.skipif(not _unshare_works(), reason="needs `unshare -rm` (user and mount namespaces) for a small tmpfs")
def test_a_full_disk_ends_in_one_line_with_the_old_checkpoints_intact(tmp_path, full_run):
    """Resuming at checkpoint 3 on a disk with 16 KiB free: iterations 4..6 log,
    checkpoint 6 cannot be written: one line that names checkpoint 3 as the one still
    there, exit 1, checkpoint 3 intact, no partial metrics line."""
    source = tmp_path / "source"
    shutil.copytree(full_run["run_dir"], source)
    shutil.rmtree(source / "checkpoints" / "6")
    rewind_jsonl(str(source / "metrics.jsonl"), 3)
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    env = tiny_training.cli_env(DISK=str(disk), SOURCE=str(source), OUT=str(out), PYTHON=sys.executable,
                                CLI=str(CLI), CONFIG=str(tiny_training.TINY))
    subprocess.run(["unshare", "-rm", "bash", "-c", FULL_DISK_SCRIPT], env=env, cwd=REPO_ROOT, check=True,
                   timeout=START_TIMEOUT)
    err = (out / "stderr").read_text()
    assert int((out / "code").read_text()) == 1, err[-3000:]
    assert_the_line(err, "No space left on device")  # orbax's threads may add noise around it
    assert "cannot write checkpoint 6" in err and "the finished checkpoint (3) is intact" in err
    assert load_agent(out / "run").iteration == 3
    text = (out / "run" / "metrics.jsonl").read_text()
    assert text.endswith("\n") and iterations(out / "run") == [1, 2, 3, 4, 5, 6]


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class _TinyState:
    params: dict
    iteration: jax.Array


@pytest.fixture
def failing_writes(monkeypatch):
    """``fail(True)`` makes orbax's last step of a save, the rename of its temporary
    directory (in the save's background thread), raise ENOSPC, as on a full disk."""
    from orbax.checkpoint._src.path import atomicity

    real, failing = atomicity.AtomicRenameTemporaryPath.finalize, [False]

    async def finalize(self, *args, **kwargs):
        if failing[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(atomicity.AtomicRenameTemporaryPath, "finalize", finalize)
    return lambda on: failing.__setitem__(0, on)


def test_a_failed_save_with_no_finished_checkpoint_says_nothing_is_saved(tmp_path, failing_writes):
    """A save that fails before any checkpoint of the run was finished says so (one line,
    naming the checkpoints lost), never that earlier checkpoints are intact; the error
    of an asynchronous save that surfaces at the next save or at ``wait`` says the same."""
    from beastybar_jax.config import TrainConfig

    state, config = _TinyState(params={"w": jnp.ones(3)}, iteration=jnp.int32(3)), TrainConfig()
    failing_writes(True)
    checkpointer = Checkpointer(tmp_path / "run")
    checkpointer.save(3, state, config, {})  # its failure comes out at the next save
    with pytest.raises(CheckpointError) as caught:
        checkpointer.save(6, state, config, {})
    message = str(caught.value)
    assert "\n" not in message and "No space left on device" in message and "cannot write checkpoints 3, 6" in message
    assert "no checkpoint was ever finished" in message and "intact" not in message
    assert checkpointer.finished_steps() == []
    with pytest.raises(CheckpointError, match="holds no finished checkpoint"):
        load_agent(tmp_path / "run")  # what the line says, the loader finds

    other = Checkpointer(tmp_path / "other")
    other.save(3, state, config, {})
    with pytest.raises(CheckpointError, match=r"cannot write checkpoint 3 .*no checkpoint was ever finished"):
        other.wait()


def test_a_failed_save_after_a_finished_one_names_what_is_intact(tmp_path, failing_writes):
    """A save that fails after checkpoint 3 was finished names the lost checkpoint and
    the finished one, which stays restorable."""
    from beastybar_jax.config import TrainConfig

    state, config = _TinyState(params={"w": jnp.ones(3)}, iteration=jnp.int32(3)), TrainConfig()
    checkpointer = Checkpointer(tmp_path / "run")
    checkpointer.save(3, state, config, {})
    checkpointer.wait()
    failing_writes(True)
    checkpointer.save(6, state, config, {})
    with pytest.raises(CheckpointError) as caught:
        checkpointer.wait()
    message = str(caught.value)
    assert "cannot write checkpoint 6" in message and "the finished checkpoint (3) is intact" in message
    assert checkpointer.finished_steps() == [3]


def test_a_write_orbax_abandoned_is_not_reported_again_when_it_is_collected():
    """A failed write's noise: asyncio reports a failed write that nobody awaited ("Future
    exception was never retrieved") whenever the garbage collector finds it, possibly
    after the command's one line. Writes that went through orbax's code (or TensorStore)
    are dropped; other futures' errors are still reported."""
    import logging

    from beastybar_jax.checkpoint import _QUIET_ORBAX

    def raised(filename: str) -> BaseException:
        namespace = {}
        code = compile("def write():\n    raise OSError(28, 'No space left on device')\n", filename, "exec")
        exec(code, namespace)
        try:
            namespace["write"]()
        except OSError as e:
            return e

    def report(error: BaseException) -> logging.LogRecord:
        return logging.LogRecord("asyncio", logging.ERROR, "base_events.py", 1, "Future exception was never retrieved",
                                 None, (type(error), error, error.__traceback__))

    orbax_file = os.path.join(os.sep, "venv", "site-packages", "orbax", "checkpoint", "_src", "path", "async_path.py")
    assert not _QUIET_ORBAX.filter(report(raised(orbax_file)))
    assert not _QUIET_ORBAX.filter(report(RuntimeError("tensorstore write failed")))
    assert _QUIET_ORBAX.filter(report(raised(os.path.join(os.sep, "venv", "site-packages", "other", "io.py"))))


# ----------------------------------------------------------------------------- damaged checkpoints


def _copy_run(full_run, target) -> pathlib.Path:
    shutil.copytree(full_run["run_dir"], target)
    return pathlib.Path(target)


def _largest_data_file(step_dir: pathlib.Path, item: str) -> pathlib.Path:
    files = [p for p in (step_dir / item).rglob("*") if p.is_file() and p.parent.name == "d"]
    return max(files, key=lambda p: p.stat().st_size)


def test_a_flipped_byte_in_the_latest_checkpoint_falls_back_to_the_previous_one(tmp_path, full_run):
    """One flipped byte in checkpoint 6's parameters (orbax would restore it
    silently) fails its checksum: load_agent warns and loads checkpoint 3; a resume
    says so, moves checkpoint 6 aside and recomputes it bit for bit."""
    run_dir = _copy_run(full_run, tmp_path / "run")
    data = _largest_data_file(run_dir / "checkpoints" / "6", "params")
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    data.write_bytes(bytes(raw))

    with pytest.warns(DamagedCheckpointWarning, match="checkpoints/6 is damaged: .* differs from its checksum"):
        assert load_agent(run_dir).iteration == 3
    with pytest.raises(CheckpointError, match="differs from its checksum"):
        load_agent(run_dir / "checkpoints" / "6")  # named explicitly: no fallback

    messages = []
    loop = TrainLoop(tiny_training.tiny_config(run_dir), resume=True, trainer=shared_trainer(), console=False)
    loop.logger.message = lambda text, important=False: messages.append(text)
    assert loop.start_iteration == 3
    assert (run_dir / "damaged_checkpoints" / "6").is_dir() and not (run_dir / "checkpoints" / "6").exists()
    state = loop.run()
    loop.close()
    assert_same_params(state.params, full_run["state"].params)
    assert iterations(run_dir) == list(range(1, 7))


def test_a_failure_reason_is_one_line_that_says_what_went_wrong():
    """One line for messages and logs: the OS's words, or the first line of the error; of
    orbax's wrapper around a TensorStore error (its first line a cut-off spec dump), the
    error it wraps."""
    def chained(outer: str, inner: BaseException | None) -> BaseException:
        try:
            try:
                if inner is not None:
                    raise inner
            finally:
                raise Exception(outer)
        except Exception as e:  # noqa: BLE001
            return e

    wrapper = ("Encountered error while reading array index: (slice(0, 149, 1),). See full TensorStore details: "
               "<bound method spec of TensorStore({\n  'base': {\n    'driver': 'zarr',\n})>.")
    inner = ValueError('OUT_OF_RANGE: Error reading "params.Dense_0.kernel/0.0": byte range [7541, 25218) is not valid')
    assert failure_reason(chained(wrapper, inner)) == f"ValueError: {inner}"
    assert failure_reason(chained(wrapper, None)) == (
        "Exception: Encountered error while reading array index: (slice(0, 149, 1),).")
    assert failure_reason(chained("first line\nsecond", None)) == "Exception: first line"
    assert failure_reason(chained("x", OSError(28, "No space left on device"))) == "[Errno 28] No space left on device"
    assert failure_reason(RuntimeError("y" * 400), limit=10) == "RuntimeErr ..."


def test_a_failed_restore_of_an_intact_checkpoint_is_no_damage(tmp_path, full_run, monkeypatch):
    """A restore can fail for causes outside the files (a collective between processes that
    times out, memory). Where the files match their checksums, the checkpoint is intact:
    resuming and load_agent stop with the cause, and nothing is skipped or set aside."""
    run_dir = _copy_run(full_run, tmp_path / "run")

    original = ocp.CheckpointManager.restore

    def failing_restore(self, step, *args, **kwargs):  # checkpoint 6 only
        if step == 6:
            raise RuntimeError("DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: restore")
        return original(self, step, *args, **kwargs)

    monkeypatch.setattr(ocp.CheckpointManager, "restore", failing_restore)
    with pytest.raises(CheckpointError, match="checkpoints/6: .*Barrier timed out.*match their checksums") as raised:
        TrainLoop(tiny_training.tiny_config(run_dir), resume=True, trainer=shared_trainer(), console=False)
    assert not isinstance(raised.value, DamagedCheckpointError)
    with pytest.raises(CheckpointError, match="Barrier timed out") as raised:
        load_agent(run_dir)
    assert not isinstance(raised.value, DamagedCheckpointError)
    assert sorted(os.listdir(run_dir / "checkpoints")) == ["3", "6"]
    assert not (run_dir / "damaged_checkpoints").exists()

    # Without checksums the files cannot vouch for themselves: the same failure is damage.
    (run_dir / "checkpoints" / "6" / CHECKSUMS_FILE).unlink()
    with pytest.warns(DamagedCheckpointWarning, match="checkpoints/6 is damaged: .*Barrier timed out"):
        assert load_agent(run_dir).iteration == 3


def test_damage_without_checksums_is_found_by_restoring(tmp_path, full_run):
    """Damage in a checkpoint without checksums (one written before them, or a crash right
    after orbax finished): a truncated data file fails orbax's restore, non-finite
    parameters fail the restore-time check; both fall back to checkpoint 3."""
    # Truncated: orbax cannot read it.
    run_dir = _copy_run(full_run, tmp_path / "truncated")
    (run_dir / "checkpoints" / "6" / CHECKSUMS_FILE).unlink()
    data = _largest_data_file(run_dir / "checkpoints" / "6", "train_state")
    data.write_bytes(data.read_bytes()[:100])
    checkpointer = Checkpointer(run_dir)
    step, *_ , damaged = checkpointer.restore_latest(
        abstract_state(shared_trainer()), tiny_training.tiny_config(run_dir),
        updates_per_iteration=shared_trainer().algorithm.updates_per_iteration)
    checkpointer.close()
    assert step == 3 and [e.step for e in damaged] == [6] and "orbax cannot restore it" in damaged[0].reason
    # The reason is TensorStore's own error, naming the file (orbax's wrapper ends in a spec dump cut mid-way).
    assert "checkpoints/6/train_state" in damaged[0].reason and "TensorStore details" not in damaged[0].reason

    # Parameters of 1e29 or NaN, checksummed as they are: the restore-time check.
    run_dir = tmp_path / "nonfinite"
    config = tiny_training.tiny_config(run_dir)
    state = jax.tree.map(np.asarray, full_run["state"])
    poisoned = state.replace(params=jax.tree.map(lambda p: np.full_like(p, np.nan), state.params),
                             iteration=np.asarray(6, state.iteration.dtype))
    checkpointer = Checkpointer(run_dir)
    checkpointer.save(3, state.replace(iteration=np.asarray(3, state.iteration.dtype)), config, {})
    checkpointer.save(6, poisoned, config, {})
    checkpointer.close()
    with pytest.warns(DamagedCheckpointWarning, match="non-finite values"):
        assert load_agent(run_dir).iteration == 3

    # A flipped exponent bit makes a finite 2.5e38, and no checksums.json
    # says so (removed, or a checkpoint from before checksums): refused all the same.
    run_dir = tmp_path / "huge"
    checkpointer = Checkpointer(run_dir)
    checkpointer.save(3, state.replace(iteration=np.asarray(3, state.iteration.dtype)), config, {})
    checkpointer.save(6, poisoned.replace(params=jax.tree.map(lambda p: np.full_like(p, 2.5e38), state.params)),
                      config, {})
    checkpointer.close()
    (run_dir / "checkpoints" / "6" / CHECKSUMS_FILE).unlink()
    with pytest.warns(DamagedCheckpointWarning, match=r"beyond ±1e\+30\) in \['params'\]"):
        assert load_agent(run_dir).iteration == 3


def test_a_run_without_an_intact_checkpoint_cannot_resume(tmp_path, full_run):
    run_dir = _copy_run(full_run, tmp_path / "run")
    for step in (3, 6):
        (run_dir / "checkpoints" / str(step) / "params" / "_METADATA").write_text("{}")
    with pytest.raises(CheckpointError, match="no intact checkpoint"):
        TrainLoop(tiny_training.tiny_config(run_dir), resume=True, trainer=shared_trainer(), console=False)
    with pytest.raises(CheckpointError, match="no intact checkpoint"):
        load_agent(run_dir)


# ----------------------------------------------------------------------------- resume rules


def test_a_second_writer_is_refused_and_a_closed_run_frees_its_directory(tmp_path):
    """A second writer is refused in one process (the cross-process case is in the SIGTERM
    test); a closed (or failed) run leaves no run.lock behind."""
    config = tiny_training.tiny_config(tmp_path / "run")
    first = TrainLoop(config, trainer=shared_trainer(), console=False)
    with pytest.raises(RunLockedError, match=f"in use by another training \\(pid {os.getpid()} on host"):
        TrainLoop(config, trainer=shared_trainer(), console=False)
    first.close()
    assert not (tmp_path / "run" / "run.lock").exists()
    TrainLoop(config, trainer=shared_trainer(), console=False).close()
    with pytest.raises(CheckpointError, match="cannot resume"):  # fails after taking the lock
        TrainLoop(config, resume=True, trainer=shared_trainer(), console=False)
    assert not (tmp_path / "run" / "run.lock").exists()


def test_resuming_past_num_iterations_is_an_error_not_125_of_50(tmp_path, full_run):
    """Resuming a run at iteration 6 with num_iterations 3 is one line naming the fix (raise
    num_iterations), not a run past its end."""
    run_dir = _copy_run(full_run, tmp_path / "run")
    with pytest.raises(CheckpointError, match="at iteration 6, past num_iterations 3; .* --set num_iterations=12"):
        TrainLoop(tiny_training.tiny_config(run_dir, "num_iterations=3"), resume=True, trainer=shared_trainer(),
                  console=False)
    assert not (run_dir / "run.lock").exists()


# ----------------------------------------------------------------------------- non-finite numbers


def _poison(loop):
    loop.state = loop.state.replace(params=jax.tree.map(lambda p: jnp.full_like(p, jnp.nan), loop.state.params))


def test_a_non_finite_loss_stops_the_run_naming_the_iteration_and_saves_nothing_of_it(tmp_path):
    """Parameters gone NaN after iteration 1: iteration 2's loss is NaN:
    the run stops naming iteration 2, which is neither logged nor saved."""
    from beastybar_jax.training.guards import NonFiniteError

    def nan_after_1(loop, iteration, metrics):
        if iteration == 1:
            _poison(loop)

    loop = TrainLoop(tiny_training.tiny_config(tmp_path / "run"), trainer=shared_trainer(), console=False,
                     hooks=[nan_after_1])
    with pytest.raises(NonFiniteError, match=r"^iteration 2: non-finite .*\bloss nan.*no checkpoint was saved") as info:
        loop.run()
    loop.close()
    assert info.value.iteration == 2
    assert iterations(tmp_path / "run") == [1] and Checkpointer(tmp_path / "run").all_steps() == []


def test_non_finite_parameters_are_never_checkpointed(tmp_path):
    """Parameters gone NaN in iteration 3 (due for a checkpoint): no
    checkpoint 3; the one line names the iteration."""
    from beastybar_jax.training.guards import NonFiniteError

    def nan_at_3(loop, iteration, metrics):
        if iteration == 3:
            _poison(loop)

    loop = TrainLoop(tiny_training.tiny_config(tmp_path / "run"), trainer=shared_trainer(), console=False,
                     hooks=[nan_at_3])
    with pytest.raises(NonFiniteError, match=r"^iteration 3: non-finite .* in \['params'\].* checkpoint 3"):
        loop.run()
    loop.close()
    assert Checkpointer(tmp_path / "run").all_steps() == []


def test_resume_refuses_a_changed_learning_rate_schedule_and_names_the_fix(tmp_path, capsys):
    """With decay_steps 0 the cosine ends at the run's last update; more
    num_iterations on --resume would stretch it (the rate jumps). Refused, naming
    decay_steps=<the saved value> or --allow-schedule-change; both then work."""
    config = tiny_training.tiny_config(tmp_path / "run", "decay_steps=0", "num_iterations=3")
    loop = TrainLoop(config, trainer=shared_trainer(), console=False)
    loop.run()
    loop.close()
    longer = config.replace(num_iterations=6)
    updates = config.alphazero.updates_per_iteration * 3
    with pytest.raises(CheckpointError, match=f"learning-rate schedule .* --set decay_steps={updates}, or pass "
                                              f"--allow-schedule-change"):
        TrainLoop(longer, resume=True, trainer=shared_trainer(), console=False)
    TrainLoop(longer.replace(decay_steps=updates), resume=True, trainer=shared_trainer(), console=False).close()
    TrainLoop(longer, resume=True, trainer=shared_trainer(), console=False, allow_schedule_change=True).close()

    cli = _import_cli("train")
    argv = ["--config", str(tiny_training.TINY), "--set", f"run_dir={tmp_path / 'run'}", "--set", "tensorboard=false",
            "--set", "decay_steps=0", "--resume"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"--set decay_steps={updates}" in err and len(err.strip().splitlines()) == 1


def test_keys_that_may_change_on_resume_are_the_documented_ones(full_run):
    """eval_simulations only changes the evaluation, so it may change; a
    learner key may not; docs/training.md and the config docstring name the same keys."""
    saved = full_run["config"]
    per_iteration = shared_trainer().algorithm.updates_per_iteration
    for change in (dict(eval_simulations=8), dict(eval_every=2, eval_games=10), dict(compilation_cache=False),
                   dict(num_iterations=9), dict(keep_checkpoints=5, checkpoint_every=1)):
        check_resume_config(saved, saved.replace(**change), per_iteration, path="x")
    with pytest.raises(CheckpointError, match="learning_rate"):
        check_resume_config(saved, saved.replace(learning_rate=1.0), per_iteration, path="x")
    readme = (REPO_ROOT / "docs" / "training.md").read_text()
    section = readme.split("Keys that may change on `--resume`:", 1)[1].split("\n\n", 1)[0]
    documented = {key.strip("`") for key in section.replace(",", " ").split() if key.startswith("`")}
    assert documented == set(RESUMABLE_CHANGES)
    from beastybar_jax.config import TrainConfig
    assert all(f"``{key}``" in TrainConfig.__doc__ for key in RESUMABLE_CHANGES)


def test_resume_without_a_checkpoint_is_an_error_not_a_new_run(tmp_path, capsys):
    """--resume with a missing run_dir, an empty one, or one holding only the files of a
    run stopped before its first checkpoint is one line and exit code 2, not a new run."""
    cli = _import_cli("train")
    base = ["--config", str(tiny_training.TINY), "--set", "tensorboard=false", "--resume"]
    missing = tmp_path / "missing"
    assert cli.main(base + ["--set", f"run_dir={missing}"]) == 2
    assert "cannot resume" in capsys.readouterr().err and not missing.exists()
    (tmp_path / "started" / "checkpoints").mkdir(parents=True)
    (tmp_path / "started" / "metrics.jsonl").write_text("")
    for run_dir in (tmp_path, tmp_path / "started"):
        with pytest.raises(CheckpointError, match="cannot resume"):
            TrainLoop(tiny_training.tiny_config(run_dir), resume=True, trainer=shared_trainer(), console=False)


def test_unusable_run_dirs_end_in_one_line_and_exit_code_2(tmp_path, capsys):
    """A run_dir that is a file, below a file, or not writable: one line and exit code 2."""
    cli = _import_cli("train")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    places = [a_file, a_file / "run"]
    if os.geteuid() != 0:  # root writes anywhere
        read_only = tmp_path / "read_only"
        read_only.mkdir(mode=0o500)
        places.append(read_only / "run")
    for run_dir in places:
        assert cli.main(["--config", str(tiny_training.TINY), "--set", f"run_dir={run_dir}"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "run_dir" in err and len(err.strip().splitlines()) == 1, err
        with pytest.raises(RunDirError):
            TrainLoop(tiny_training.tiny_config(run_dir), trainer=shared_trainer(), console=False)


# ----------------------------------------------------------------------------- metrics file


def test_metrics_file_keeps_whole_lines_only(tmp_path, monkeypatch):
    """A failed append (full disk) leaves the file as it was, never half
    a line; a resume cuts the file back to the checkpoint's iteration and drops a
    partial last line; read_jsonl skips such a line."""
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"iteration": i, "loss": 1.0}) + "\n" for i in (1, 2, 3, 4)) + '{"iter')
    assert [r["iteration"] for r in read_jsonl(str(path))] == [1, 2, 3, 4]
    (tmp_path / "bad.jsonl").write_text('{"iteration": 1}\nnot json\n{"iteration": 2}\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        read_jsonl(str(tmp_path / "bad.jsonl"))

    logger = MetricsLogger(str(tmp_path), total_iterations=6, start_iteration=3, tensorboard=False, console=False)
    assert [r["iteration"] for r in read_jsonl(str(path))] == [1, 2, 3]
    logger.log(4, {"loss": 0.5})
    before = path.read_bytes()
    real_write = os.write

    def write_half_then_fail(fd, data):
        real_write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", write_half_then_fail)
    with pytest.raises(OSError, match="No space left on device"):
        logger.log(5, {"loss": 0.25})
    monkeypatch.undo()
    assert path.read_bytes() == before
    logger.close()


def test_a_damaged_line_in_the_middle_of_metrics_is_named_not_skipped(tmp_path, capsys):
    """A line that is not a JSON record, other than a partial last one:
    read_jsonl names file and line; a resume that drops it says so."""
    path = tmp_path / "metrics.jsonl"
    for garbage in ("\x00\x00\x00\x00", "42", "[1, 2]", "garbage {"):
        path.write_text('{"iteration": 1}\n' + garbage + '\n{"iteration": 2}\n{"iteration": 3}\n')
        with pytest.raises(ValueError, match="metrics.jsonl:2 is not a JSON record"):
            read_jsonl(str(path))
    MetricsLogger(str(tmp_path), total_iterations=6, start_iteration=2, tensorboard=False, console=False).close()
    assert "metrics.jsonl: dropped 1 line(s) that were not JSON records (line 2)" in capsys.readouterr().err
    assert [r["iteration"] for r in read_jsonl(str(path))] == [1, 2]
    assert rewind_jsonl(str(path), 1) == []
    path.write_text('{"iteration": 1}\nbad\n{"iteration": 2}\n')
    assert rewind_jsonl(str(path), 2) == [2]


def test_library_chatter_goes_to_the_run_log_not_the_terminal(tmp_path, capfd):
    """Orbax/asyncio logs, a background thread's exception and an
    "Exception ignored" report go to library.log; the terminal keeps the command's line."""
    import gc
    import logging
    import threading

    from beastybar_jax.training.library_log import send_library_output_to

    log = tmp_path / "library.log"
    undo = send_library_output_to(str(log))
    try:
        logging.getLogger("absl").error("orbax: a save failed")
        logging.getLogger("asyncio").error("Task exception was never retrieved")
        thread = threading.Thread(target=lambda: 1 / 0, name="orbax-worker")
        thread.start()
        thread.join()

        class Unraisable:
            def __del__(self):
                raise RuntimeError("cannot schedule new futures after shutdown")

        Unraisable()
        gc.collect()
    finally:
        undo()
    text = log.read_text()
    assert all(s in text for s in ("a save failed", "never retrieved", "ZeroDivisionError", "cannot schedule"))
    captured = capfd.readouterr()
    assert "ZeroDivisionError" not in captured.err and "cannot schedule" not in captured.err


def test_resumed_tensorboard_hides_the_iterations_that_run_again(tmp_path, monkeypatch):
    """A resumed run's TensorBoard events: ``purge_step`` hides those of the re-run iterations."""
    import tensorboardX

    seen = {}

    class Writer:
        def __init__(self, logdir, purge_step=None):
            seen.update(logdir=logdir, purge_step=purge_step)

        def close(self):
            pass

    monkeypatch.setattr(tensorboardX, "SummaryWriter", Writer)
    MetricsLogger(str(tmp_path), total_iterations=6, start_iteration=3, tensorboard=True, console=False).close()
    assert seen["purge_step"] == 4


# ----------------------------------------------------------------------------- in-process interrupts


def test_an_interrupt_raised_by_a_hook_is_logged_before_it_is_checkpointed(tmp_path):
    """An interrupt raised by a hook: the iteration whose hook raised is logged, then saved."""
    config = tiny_training.tiny_config(tmp_path / "run")

    def ctrl_c(loop, iteration, metrics):
        if iteration == 2:
            raise KeyboardInterrupt

    loop = TrainLoop(config, trainer=shared_trainer(), console=False, hooks=[ctrl_c])
    with pytest.raises(Interrupted, match="checkpoint 2 saved"):
        loop.run()
    loop.close()
    assert Checkpointer(tmp_path / "run").all_steps() == [2] and iterations(tmp_path / "run") == [1, 2]


def _import_cli(name: str):
    return experiment(name)


def test_the_progress_bar_says_compiling_with_the_seconds_so_far():
    """While the bar would sit at 0, it says what is compiling and
    for how long (rich redraws it from its own thread, so the seconds tick)."""
    from beastybar_jax.training.metrics import _StatusColumn

    class Task:
        fields = dict(status="compiling the training iteration", status_since=time.monotonic() - 12.3)

    assert _StatusColumn().render(Task()).plain == "compiling the training iteration 12 s"
    Task.fields = dict(status=None, status_since=None)
    assert _StatusColumn().render(Task()).plain == ""


def test_what_native_code_prints_during_a_compile_goes_to_the_library_log(tmp_path, capfd):
    """Within ``native_output_to_library_log`` (the training loop's compiles), bytes written
    to file descriptor 2, as XLA's C++ "Very slow compile?" alarms are, land in the run's
    library log, not the terminal; outside it, and with no library log set, they reach the
    terminal as before."""
    import os

    from beastybar_jax.training.library_log import native_output_to_library_log, send_library_output_to

    log = tmp_path / "library.log"
    with native_output_to_library_log():  # no library log set: nothing moves
        os.write(2, b"before\n")
    undo = send_library_output_to(str(log))
    try:
        with native_output_to_library_log():
            os.write(2, b"E0000 Very slow compile? If you want to file a bug\n")
        os.write(2, b"after\n")
    finally:
        undo()
    err = capfd.readouterr().err
    assert "before" in err and "after" in err and "Very slow compile" not in err
    assert "Very slow compile" in log.read_text()
