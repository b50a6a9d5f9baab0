"""Scale-out, run for real on the CPU: the training CLI as 2 processes x 2 devices (JAX's
multi-controller runtime, a local coordinator, gloo collectives) ends where 1 process x 4
devices ends, and that where 1 device ends; saves and resumes across processes; refuses
processes that disagree on the config and a coordinator that never answers, with one line.
A search over games split across devices keeps each game's tree on its device.

Every run is a subprocess on forced CPU devices, so runs are compared like with like on
any machine (also where JAX sees a GPU, whose floats differ from the CPU's).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from helpers import tiny_training
from beastybar_jax.checkpoint import load_agent
from beastybar_jax.training.metrics import read_jsonl

pytestmark = pytest.mark.slow  # several training processes (CI runs it; the quick loop skips it)

CLI = tiny_training.REPO_ROOT / "experiments" / "train.py"
COMPARED = ("loss", "policy_loss", "value_loss", "aux_loss", "games_finished", "buffer_size", "positions_inserted")
TIMEOUT = 600  # seconds per subprocess: generous, a loaded 2-core box is slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli_env(devices: int, cache_dir) -> dict:
    return dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1",
                XLA_FLAGS=f"--xla_force_host_platform_device_count={devices} {tiny_training.FAST_COMPILE_FLAG}",
                JAX_COMPILATION_CACHE_DIR=str(cache_dir), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")


def tiny_argv(run_dir, *extra: str) -> list[str]:
    return [sys.executable, str(CLI), "--config", str(tiny_training.TINY), "--set", f"run_dir={run_dir}",
            "--set", "tensorboard=false", "--no-console", *extra]


def run_processes(argv: list[str], num_processes: int, devices_each: int, cache_dir, *,
                  extra: dict[int, list[str]] | None = None) -> list[subprocess.CompletedProcess]:
    """``argv`` started as ``num_processes`` processes of one run; their results."""
    port = free_port()
    procs = []
    for pid in range(num_processes):
        flags = ["--coordinator", f"127.0.0.1:{port}", "--num-processes", str(num_processes), "--process-id", str(pid)]
        procs.append(subprocess.Popen(argv + flags + (extra or {}).get(pid, []), env=cli_env(devices_each, cache_dir),
                                      cwd=tiny_training.REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    results, deadline = [], time.monotonic() + TIMEOUT
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs:  # a hang: every process prints its Python stacks (faulthandler) and dies
                p.send_signal(signal.SIGABRT)
            stacks = [p.communicate()[1] for p in procs]
            pytest.fail("the processes hung:\n" + "\n".join(
                f"--- process {i}:\n" + "\n".join(l for l in e.splitlines() if not l.lstrip().startswith("@ 0x"))[-6000:]
                for i, e in enumerate(stacks)))
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def run_one(argv: list[str], devices: int, cache_dir) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=cli_env(devices, cache_dir), cwd=tiny_training.REPO_ROOT, capture_output=True,
                          text=True, timeout=TIMEOUT)


def failure(done: subprocess.CompletedProcess) -> str:
    """The useful part of a failed run's output (native stack frames left out)."""
    lines = [line for line in (done.stdout + done.stderr).splitlines() if not line.lstrip().startswith("@ 0x")]
    return f"exit {done.returncode}:\n" + "\n".join(lines[-60:])


def finished_run(run_dir) -> dict:
    model = load_agent(run_dir)
    return dict(params=jax.device_get(model.params), iteration=model.iteration,
                metrics=read_jsonl(str(run_dir / "metrics.jsonl")),
                run_info=json.loads((run_dir / "run.json").read_text()))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("jax_cache")


@pytest.fixture(scope="module")
def one_device(tmp_path_factory, cache_dir):
    """The tiny config's 6 iterations on one CPU device: in this process when JAX runs on
    the CPU (shared with the other training tests), else in a CPU subprocess."""
    if jax.default_backend() == "cpu" and jax.device_count() == 1:
        run = tiny_training.full_run()
        return dict(params=run["state"].params, metrics=run["metrics"])
    run_dir = tmp_path_factory.mktemp("one_device")
    done = run_one(tiny_argv(run_dir), 1, cache_dir)
    assert done.returncode == 0, failure(done)
    return finished_run(run_dir)


@pytest.fixture(scope="module")
def four_devices(tmp_path_factory, cache_dir):
    """The CLI on 4 CPU devices in one process, 6 iterations in one go (resuming across
    devices is checked by the two-process run, which saves and restores the same shards)."""
    run_dir = tmp_path_factory.mktemp("four_devices")
    done = run_one(tiny_argv(run_dir), 4, cache_dir)
    assert done.returncode == 0, failure(done)
    return finished_run(run_dir)


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory, cache_dir):
    """The CLI as 2 processes x 2 CPU devices: 3 iterations, then --resume to 6."""
    run_dir = tmp_path_factory.mktemp("two_processes")
    outputs = []
    for extra in (["--set", "num_iterations=3"], ["--resume"]):
        results = run_processes(tiny_argv(run_dir, *extra), 2, 2, cache_dir)
        for pid, done in enumerate(results):
            assert done.returncode == 0, f"process {pid}: {failure(done)}"
        outputs.append(results)
    return dict(finished_run(run_dir), run_dir=run_dir, outputs=outputs)


def assert_same_training(run, reference, rtol, atol):
    """Parameters and per-iteration metrics agree up to float reduction order (a real
    divergence, other games or other minibatches, moves parameters by ~1e-2 or more)."""
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=rtol, atol=atol), run["params"], reference["params"])
    assert [m["iteration"] for m in run["metrics"]] == list(range(1, 7))  # each iteration logged once
    for m, ref in zip(run["metrics"], reference["metrics"]):
        assert [k for k in COMPARED if k in m] == [k for k in COMPARED if k in ref]  # losses once trained
        for k in COMPARED:
            if k in ref:
                np.testing.assert_allclose(m[k], ref[k], rtol=1e-3, atol=1e-4, err_msg=k)


def test_four_devices_compute_what_one_device_computes(four_devices, one_device):
    assert four_devices["run_info"]["num_devices"] == 4 and four_devices["iteration"] == 6
    assert_same_training(four_devices, one_device, rtol=1e-3, atol=2e-4)  # diffs ~4e-6 seen


def test_two_processes_compute_what_one_process_on_four_devices_computes(two_processes, four_devices):
    info = two_processes["run_info"]
    assert (info["num_processes"], info["num_devices"]) == (2, 4) and two_processes["iteration"] == 6
    assert_same_training(two_processes, four_devices, rtol=1e-4, atol=1e-5)
    checkpoints = sorted(int(p.name) for p in (two_processes["run_dir"] / "checkpoints").iterdir() if p.name.isdigit())
    assert checkpoints[-1] == 6 and 3 in checkpoints  # saved by both, restored by both
    for first, resumed in zip(*two_processes["outputs"]):
        assert "Traceback" not in first.stderr + resumed.stderr


def test_a_split_batch_searches_without_talking_between_devices_but_to_end_its_loops(cache_dir):
    """The games split over 4 devices, a search's loops read and write each game's tree on
    its own device, and compute what one device computes. In the CPU's loop the only
    collectives inside them are the all-reduces of the loops' shared conditions (every game
    done?); the GPU's program (static loops, Pallas kernels, here interpreted) has none. A
    tree read like ``x[jnp.arange(B), i]`` (not ``per_game.take_each``) makes XLA
    all-gather its indices at every step of a walk; a Pallas kernel not wrapped in
    ``per_game.on_each_device`` gathers every device's games onto each."""
    script = tiny_training.REPO_ROOT / "tests" / "helpers" / "sharded_search_loops.py"
    env = dict(cli_env(4, cache_dir), PYTHONPATH=str(tiny_training.REPO_ROOT))
    done = subprocess.run([sys.executable, str(script), "dynamic", "static-interpret"], env=env, capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode == 0, failure(done)
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["devices"] == 4
    dynamic, static = found["dynamic"], found["static-interpret"]
    # The simulations' loop holds the walks down and back up (XLA:CPU's scatters are loops too).
    walks = [name for name in dynamic["loops"] if "/while/body/" in name and name.endswith("/while")]
    assert len(walks) >= 2, dynamic["loops"]
    conditions = [c for c in dynamic["collectives"] if c["op"] == "all-reduce" and c["name"].endswith("cond/reduce_or")]
    assert conditions and len(conditions) == len(dynamic["collectives"]), dynamic["collectives"]
    # The kernels' own loops (the walk's, the choices') are among those read.
    assert {"search_walk", "search_choices"} <= {part for name in static["loops"] for part in name.split("/")}
    assert static["collectives"] == [], static["collectives"]
    for loop in (dynamic, static):  # the same weights, up to the evaluator's sums over other shapes
        assert loop["difference"] <= 1e-5, loop["difference"]
    # A split kernel is a callback's number in its program: the program must also say which
    # kernel, or JAX's compilation cache could hand one kernel's executable to another.
    assert found["kernel_programs"] == [True, True]
    # The engine traced for a GPU compiles where XLA splits a batch of games unevenly.
    assert found["gpu_engine_on_uneven_groups"] is True


def test_processes_with_different_configs_are_refused(tmp_path, cache_dir):
    results = run_processes(tiny_argv(tmp_path / "run"), 2, 1, cache_dir, extra={1: ["--set", "seed=7"]})
    for pid, done in enumerate(results):
        assert done.returncode == 2, (pid, done.stderr[-2000:])
        assert "different configs" in done.stderr and "seed" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_processes_with_different_options_are_refused(tmp_path, cache_dir):
    """``--resume`` given to one process only: it waited for the other forever."""
    results = run_processes(tiny_argv(tmp_path / "run"), 2, 1, cache_dir, extra={1: ["--resume"]})
    for pid, done in enumerate(results):
        assert done.returncode == 2, (pid, done.stderr[-2000:])
        assert "different options (--resume)" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_an_unreachable_coordinator_is_a_timeout_with_a_message(tmp_path, cache_dir):
    port = free_port()  # nobody listens there
    done = run_one(tiny_argv(tmp_path / "run", "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2",
                             "--process-id", "1", "--set", "distributed_timeout=3"), 1, cache_dir)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"could not reach the coordinator at 127.0.0.1:{port} within 3 s" in done.stderr
    assert "Traceback" not in done.stderr  # (the subprocess timeout catches a hang; no verdict on seconds)


def test_incomplete_settings_name_what_is_missing(tmp_path, cache_dir):
    done = run_one(tiny_argv(tmp_path / "run", "--coordinator", "127.0.0.1:1"), 1, cache_dir)
    assert done.returncode == 2 and "number of processes, process id is missing" in done.stderr
