"""The acceptance run: every GPU figure the project claims, re-measured by one command.

Usage::

    python experiments/acceptance.py --out DIR [--scale full|tiny] [--parts a,b,...] [--jobs N] [--commit ID]
    python experiments/acceptance.py --table DIR/report.json     # machine line and Markdown table for the docs

On whatever devices JAX sees, the parts below run one after another (``--jobs N``: N at a
time; the figures of parts that share the machine are not comparable, so measure with the
default 1), each in a child process of its own with a time budget (a part that fails,
crashes or runs out of time is reported as such and the next one starts), and write

- ``DIR/report.json``: every figure with the device, versions, configs, batch sizes,
  compile seconds (always apart from the timed runs), the date, and the target it is
  held to (``met``: true / false / null where no target applies);
- ``DIR/report.md``: the same as tables;
- ``DIR/parts/<part>.json`` and ``DIR/parts/<part>.log``: each part's own output.

Parts (``--scale full`` takes about 20 minutes on one H100 or H200, in 10-minute slots, each
command with its own ``--out``: ``--parts engine,search,learner,iteration`` (the speed of the
hot loop, at most 9 minutes of budgets), ``--parts conformance,gpu_tests`` and ``--parts
strength``; ``--scale tiny`` does the same on a CPU in about two minutes, one and a half with
``--jobs 2``, and runs in the test suite, so the script cannot rot):

==============  ==============================================================================
conformance     the engine replays the reference corpus on the device: 0 mismatches required
engine          random legal play, ``step`` and ``step+mask+obs`` steps/s at 4,096 / 65,536 /
                1,048,576 games
search          the search alone with the device's loop (the static one on a GPU) at 4,096
                games x 8..256 simulations and 16,384 / 65,536 games x 64; 0.2's dynamic
                loop at 16 and 64 and stock mctx at 64 for comparison (tiny scale: the
                device's loop only): simulations/s, ops per simulation, the cost per
                simulation at 256 relative to 16
learner         whole AlphaZero iterations (self-play with search + replay + SGD) at
                16,384 games x 64 simulations and 64 updates with ``configs/h100.yaml``'s
                network, without its afterstate inputs and exact targets
                (``MACHINERY_OVERRIDES``; so is ``search``)
iteration       one ``configs/h100.yaml`` and one ``configs/ppo_h100.yaml`` iteration as shipped
                (``benchmark.py profile``): compile seconds, iteration seconds, games/s or
                env steps/s, ops per simulation, and on a GPU the kernels, the device's busy
                share (a ``jax.profiler`` trace) and NVML's utilization, memory and power
strength        150 s of ``configs/h100.yaml`` training (a time budget, then
                SIGTERM: the run saves its checkpoint), then the network raw and with 32
                simulations: win rates vs heuristic and outcome_heuristic and the endgame suite
gpu_tests       the tests marked ``gpu`` (``pytest -m gpu``); at tiny scale only collected
==============  ==============================================================================

Bad arguments end in one line and exit code 2. The exit code is 0 when every part ran
(whatever its figures), 1 when a part failed or ran out of time. SIGINT (Ctrl-C) or SIGTERM
stops every running part and writes the report (the parts it stopped marked ``interrupted``
with the figures they had finished, those it kept from starting ``not started``), then
exits with 130 / 143, also where the signal was ignored when the script started (a shell's
background job).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPERIMENTS = os.path.join(REPO, "experiments")
CORPUS = os.path.join(REPO, "tests", "data", "reference_random_games.jsonl.gz")

# Targets set by the project's issues; a figure is "met" when it reaches its target.
TARGETS = {
    "engine_mask_obs_steps_per_second_1M": (1e9, "engine >= 1 B step+mask+obs steps/s at >= 1 M games"),
    "search_sims_per_second_4096x64": (25e6, "search >= 25 M simulations/s at 4,096 games x 64"),
    "search_sims_per_second_65536x64": (100e6, "search >= 100 M simulations/s at 65,536 games x 64"),
    "search_ops_per_simulation": (85, "the simulation loop's body at most 85 ops (a third of 0.2's 253)"),
    "learner_sims_per_second_16384x64": (60e6, ">= 60 M simulations/s at 16,384 x 64 with the learner"),
    "search_cost_256_vs_16": (1.2, "cost per simulation at 256 within 1.2x of 16 (at most)"),
    "alphazero_games_per_second": (5 * 4096 / 1.15, "h100.yaml: games per second of training >= 5x 0.2's "
                                                     "(4,096 games in 1.15 s)"),
    "alphazero_compile_seconds": (30, "h100.yaml: one iteration compiles in at most 30 s"),
    "alphazero_ops_per_simulation": (190, "h100.yaml: the simulation loop's body at most 190 ops"),
    "alphazero_device_busy_share": (0.8, "h100.yaml: the device busy >= 80% of an iteration's wall time"),
    "ppo_env_steps_per_second": (40e6, "PPO >= 40 M env steps/s"),
    "strength_raw_vs_heuristic": (0.95, "after ~3 minutes of training, raw network >= 95% wins vs heuristic"),
    "conformance_mismatches": (0, "0 mismatches against the reference corpus (at most)"),
}
AT_MOST = {"search_cost_256_vs_16", "conformance_mismatches", "search_ops_per_simulation",
           "alphazero_compile_seconds", "alphazero_ops_per_simulation"}

# The search and learner parts measure the search machinery, so they hold the network and
# targets their speed targets were set for: the plain MLP, no afterstate inputs (an engine
# step per legal move per evaluation), no solver in the iteration (and, at full scale, the learner's 64
# updates: ``learner_updates``). The iteration and strength parts run the shipped configs
# as they are, levers included.
MACHINERY_OVERRIDES = ["network.afterstates=false", "alphazero.exact_value_targets=false",
                       "alphazero.exact_policy_targets=false"]

# Sizes per scale. tiny: the same code paths on a CPU, small enough for the test suite.
SCALES = {
    "full": dict(
        engine_batches=[4096, 65536, 1048576], engine_steps=64,
        search_batch=4096, search_sims=[8, 16, 64, 256], dynamic_sims=[16, 64], stock_sims=[64],
        search_batches=[16384, 65536], search_config="configs/h100.yaml",
        learner_batch=16384, learner_sims=64, learner_updates=64, learner_config="configs/h100.yaml",
        az_config="configs/h100.yaml", ppo_config="configs/ppo_h100.yaml", ppo_batch=None,
        train_config="configs/h100.yaml", train_seconds=150.0, train_iterations=100_000,
        eval_games=1000, eval_sims=32, searched_matches=True, endgame_positions=0, repeats=3, gpu_tests_collect_only=False,
    ),
    "tiny": dict(
        engine_batches=[64], engine_steps=16,
        # No stock-mctx search at tiny scale: each search compiles for seconds on a CPU, and
        # tests/test_docs.py runs the first documented `benchmark.py search`, which has
        # `--mctx both` (that test asserts it).
        search_batch=32, search_sims=[16, 32], dynamic_sims=[], stock_sims=[], search_batches=[],
        search_config="configs/tiny.yaml",
        learner_batch=16, learner_sims=4, learner_updates=None, learner_config="configs/tiny.yaml",
        az_config="configs/tiny.yaml", ppo_config="configs/ppo_quick.yaml", ppo_batch=32,
        train_config="configs/tiny.yaml", train_seconds=None, train_iterations=2,
        eval_games=10, eval_sims=4, searched_matches=False, endgame_positions=32, repeats=1, gpu_tests_collect_only=True,
    ),
}

# Seconds each part may take. Full scale, from the H100 and H200 runs of 2026-11-26
# (docs/performance.md): 1,040 s in all, so two 10-minute slots with room to start the
# machine: the first five parts and gpu_tests (560 s), then strength (480 s: 150 s of
# training, then its matches and the endgame suite, each evaluation compiling the network
# again; 438 s in all on an H200). `search` took 120 s with stock mctx up to 64 simulations
# (its 128 and 256 would take a minute more; they are left out). `iteration` compiles
# configs/h100.yaml (afterstates and replies: 70 s on an H100, 97 s on an H200), as does the
# training in `strength`; `pytest -m gpu` took 80 s on an H200. tiny: generous, so a busy CI
# machine never times a part out.
BUDGETS = {
    "full": dict(conformance=20, engine=40, search=180, learner=50, iteration=240, strength=480, gpu_tests=120),
    "tiny": dict(conformance=300, engine=300, search=300, learner=300, iteration=300, strength=600,
                 gpu_tests=300),
}


TRAIN_SECONDS_ENV = "BEASTYBAR_ACCEPTANCE_TRAIN_SECONDS"


class UsageError(Exception):
    """Bad command-line input: one line, exit code 2."""


# --------------------------------------------------------------------------- helpers


def machine() -> dict:
    import jax

    device = jax.devices()[0]
    return dict(
        backend=jax.default_backend(), device=getattr(device, "device_kind", str(device)),
        num_devices=jax.device_count(), python=platform.python_version(), jax=jax.__version__,
        platform=platform.platform(), date=datetime.date.today().isoformat(),
    )


def peak_memory_bytes() -> int | None:
    """The device's peak bytes in use so far in this process (None on backends without
    memory statistics, e.g. the CPU)."""
    import jax

    stats = jax.local_devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def figure(name: str, value, unit: str = "", **context) -> dict:
    """A figure of the report, with its target when the issues set one."""
    row = dict(name=name, value=value, unit=unit, **context)
    if name in TARGETS:
        target, text = TARGETS[name]
        row.update(target=target, target_text=text,
                   met=None if value is None else bool(value <= target if name in AT_MOST else value >= target))
    return row


def benchmarks():
    """``experiments/bench/``: the benchmark subcommands' measuring functions (this script
    runs from experiments/, so ``bench`` is importable as it is for benchmark.py)."""
    from bench import env, ppo, search, selfplay

    return dict(env=env.bench_env, search=search.bench_search, selfplay=selfplay.bench_selfplay,
                ppo=ppo.bench_ppo)


def run_cli(args: list[str], log, timeout: float) -> subprocess.CompletedProcess:
    """Run one of the project's command lines (a script in experiments/ or ``-m``), its
    output into the part's log."""
    proc = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    log(f"$ {' '.join(args)}  (exit {proc.returncode})\n{proc.stdout[-4000:]}{proc.stderr[-4000:]}")
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:2])} exited {proc.returncode}: "
                           f"{(proc.stderr.strip().splitlines() or ['(no output)'])[-1]}")
    return proc


# --------------------------------------------------------------------------- parts
# Each part takes (scale sizes, part output dir, log) and yields its figures one by one:
# a part stopped by its budget keeps the figures it had finished.


def part_conformance(s: dict, out: str, log) -> list[dict]:
    from beastybar_jax.games.beastybar import conformance

    corpus = CORPUS
    start = time.perf_counter()
    report = conformance.check(conformance.load_traces(str(corpus)))
    seconds = time.perf_counter() - start
    log(f"conformance: {report.games} games, {report.turns} turns, {len(report.mismatches)} mismatches")
    yield figure("conformance_mismatches", len(report.mismatches), "mismatches", games=report.games,
                 turns=report.turns, seconds_including_compile=seconds)


def part_engine(s: dict, out: str, log) -> list[dict]:
    import jax

    bench = benchmarks()
    for batch in s["engine_batches"]:
        for with_observation in (False, True):
            r = bench["env"](batch, s["engine_steps"], s["repeats"], with_observation)
            log(f"engine batch {batch} {r['variant']}: {r['steps_per_second']:.4g} steps/s, "
                f"compile {r['compile_seconds']:.1f} s")
            name = "engine_mask_obs_steps_per_second" if with_observation else "engine_step_steps_per_second"
            if with_observation and batch >= 1_000_000:
                name += "_1M"
            yield figure(name, r["steps_per_second"], "steps/s", batch_size=batch, num_steps=r["num_steps"],
                         compile_seconds=r["compile_seconds"])
    if jax.default_backend() == "gpu":  # what the engine's Pallas kernel gains: the XLA form beside it
        batch = s["engine_batches"][len(s["engine_batches"]) // 2]
        r = bench["env"](batch, s["engine_steps"], s["repeats"], True, kernels="xla")
        log(f"engine batch {batch} {r['variant']}, XLA form: {r['steps_per_second']:.4g} steps/s")
        yield figure("engine_mask_obs_steps_per_second", r["steps_per_second"], "steps/s", batch_size=batch,
                     num_steps=r["num_steps"], compile_seconds=r["compile_seconds"], kernels="xla")


def part_search(s: dict, out: str, log) -> list[dict]:
    """The search alone: the device's own loop (``auto``: static on a GPU) over the
    simulation counts and batch sizes, and for comparison 0.2's dynamic loop and stock mctx."""
    from beastybar_jax.config import load_config

    bench = benchmarks()
    base = load_config(os.path.join(REPO, s["search_config"]), MACHINERY_OVERRIDES)
    batch = s["search_batch"]
    runs = [("patched", "auto", batch, n) for n in s["search_sims"]]
    runs += [("patched", "auto", b, 64) for b in s["search_batches"]]
    runs += [("patched", "dynamic", batch, n) for n in s["dynamic_sims"]]
    runs += [("stock", "auto", batch, n) for n in s["stock_sims"]]
    per_sim = {}
    for mctx, loop, games, sims in runs:
        r = bench["search"](base, games, sims, "network", mctx, s["repeats"], loop=loop)
        per_sim[(r["loop"], games, sims)] = r["seconds_per_simulation"]
        log(f"search {r['loop']} batch {games} sims {sims}: {r['simulations_per_second']:.4g} sims/s, "
            f"{r['body_ops']} ops per simulation (loops inside: {r['body_nested_loops']}), "
            f"compile {r['compile_seconds']:.1f} s")
        main_loop = mctx == "patched" and loop == "auto"
        name = "search_sims_per_second"
        if main_loop and sims == 64 and games in (4096, 65536):
            name += f"_{games}x64"
        yield figure(name, r["simulations_per_second"], "simulations/s", loop=r["loop"], batch_size=games,
                     num_simulations=sims, network=r["network"], ops_per_simulation=r["body_ops"],
                     loops_inside=r["body_nested_loops"], compile_seconds=r["compile_seconds"])
        if main_loop and (games, sims) == (batch, 64):
            yield figure("search_ops_per_simulation", r["body_ops"], "ops", loop=r["loop"], batch_size=games,
                         loops_inside=r["body_nested_loops"])
    loop = next((r for (r, g, n) in per_sim if g == batch), None)
    sims = sorted(n for (r, g, n) in per_sim if (r, g) == (loop, batch))
    if len(sims) > 1:
        low, high = min(sims, key=lambda n: abs(n - 16)), max(sims)
        name = "search_cost_256_vs_16" if (low, high) == (16, 256) else "search_cost_most_vs_16"
        yield figure(name, per_sim[(loop, batch, high)] / per_sim[(loop, batch, low)], "x", loop=loop,
                     batch_size=batch, simulations=[low, high])


def part_learner(s: dict, out: str, log) -> list[dict]:
    from beastybar_jax.config import load_config

    bench = benchmarks()
    base = load_config(os.path.join(REPO, s["learner_config"]), MACHINERY_OVERRIDES)
    updates = s["learner_updates"] or base.alphazero.updates_per_iteration
    r = bench["selfplay"](base, s["learner_batch"], s["learner_sims"], base.alphazero.moves_per_iteration,
                             updates, s["repeats"])
    log(f"learner: {r}")
    name = "learner_sims_per_second"
    if (s["learner_batch"], s["learner_sims"]) == (16384, 64):
        name += "_16384x64"
    yield figure(name, r["simulations_per_second"], "simulations/s", batch_size=s["learner_batch"],
                 num_simulations=s["learner_sims"], updates=r["num_updates"], network=r["network"],
                 iteration_seconds=r["iteration_seconds"], compile_seconds=r["compile_seconds"],
                 peak_device_memory_bytes=peak_memory_bytes())


def part_iteration(s: dict, out: str, log) -> list[dict]:
    """One ``h100.yaml`` and one ``ppo_h100.yaml`` iteration as shipped (``benchmark.py
    profile``): compile seconds, the best of the timed iterations, one traced (ops per
    simulation, the device's kernels and busy share), NVML's utilization and power."""
    from beastybar_jax.config import load_config
    from bench.profile import profile_iteration

    az = load_config(os.path.join(REPO, s["az_config"]))
    r = profile_iteration(az, os.path.join(out, "trace_alphazero"), 1, s["repeats"])
    log(f"alphazero iteration: {r}")
    gpu = {k: r[k] for k in ("gpu_utilization", "gpu_memory_gb", "gpu_power_w", "gpu_power_share") if k in r}
    context = dict(config=s["az_config"], batch_size=az.num_games, **gpu)
    yield figure("alphazero_iteration_seconds", r["iteration_seconds"], "s", simulations_per_second=r[
        "simulations_per_second"], peak_device_memory_bytes=peak_memory_bytes(), **context)
    yield figure("alphazero_games_per_second", r["games_per_second"], "games/s", **context)
    yield figure("alphazero_compile_seconds", r["compile_seconds"], "s", trace_seconds=r["trace_seconds"], **context)
    yield figure("alphazero_ops_per_simulation", r["body_ops"], "ops", loops_inside=r["body_nested_loops"], **context)
    if "device_busy_share" in r:
        yield figure("alphazero_device_busy_share", r["device_busy_share"], "share",
                     kernels_per_simulation=r["kernels_per_simulation"], **context)
    ppo = load_config(os.path.join(REPO, s["ppo_config"]), ["algorithm=ppo"] + (
        [f"num_games={s['ppo_batch']}"] if s["ppo_batch"] else []))
    p = profile_iteration(ppo, os.path.join(out, "trace_ppo"), 1, s["repeats"])
    log(f"ppo iteration: {p}")
    gpu = {k: p[k] for k in ("gpu_utilization", "gpu_power_w", "gpu_power_share") if k in p}
    context = dict(config=s["ppo_config"], batch_size=ppo.num_games, **gpu)
    yield figure("ppo_iteration_seconds", p["iteration_seconds"], "s", compile_seconds=p["compile_seconds"],
                 trace_seconds=p["trace_seconds"],
                 peak_device_memory_bytes=peak_memory_bytes(), rollout_step_ops=p["body_ops"], **context)
    yield figure("ppo_env_steps_per_second", p["env_steps_per_second"], "steps/s",
                 device_busy_share=p.get("device_busy_share"), **context)


def _train_for(s: dict, run_dir: str, log) -> dict:
    """``s["train_config"]`` trained for ``train_seconds`` (then SIGTERM: the run saves
    its last finished iteration) or ``train_iterations``, whichever ends first."""
    args = [os.path.join(EXPERIMENTS, "train.py"), "--config", s["train_config"], "--no-console",
            "--set", f"run_dir={run_dir}", "--set", f"num_iterations={s['train_iterations']}",
            "--set", "eval_every=0", "--set", "checkpoint_every=0"]
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        output, _ = proc.communicate(timeout=s["train_seconds"])
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=120)
    seconds = time.perf_counter() - start
    log(f"$ {' '.join(args)}  (exit {proc.returncode} after {seconds:.0f} s)\n{output[-4000:]}")
    if proc.returncode not in (0, 128 + signal.SIGTERM):
        raise RuntimeError(f"training exited {proc.returncode}: {(output.strip().splitlines() or [''])[-1]}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if not lines:
        raise RuntimeError("training finished no iteration within its budget")
    return dict(seconds=seconds, iterations=lines[-1].get("iteration", len(lines)))


def part_strength(s: dict, out: str, log) -> list[dict]:
    run_dir = os.path.join(out, "strength_run")
    trained = _train_for(s, run_dir, log)
    raw, searched = f"checkpoint:{run_dir}", f"checkpoint:{run_dir}@sims={s['eval_sims']}"
    for spec, label in ((raw, "raw"), (searched, f"sims{s['eval_sims']}"))[: 2 if s["searched_matches"] else 1]:
        path = os.path.join(out, f"strength_matches_{label}.json")
        run_cli([os.path.join(EXPERIMENTS, "evaluate.py"), "--agent", spec, "--opponents",
                 "heuristic,outcome_heuristic", "--games", str(s["eval_games"]), "--json", path, "--plain"],
                log, timeout=600)
        with open(path) as f:
            for r in json.load(f)["results"]:
                yield figure(f"strength_{label}_vs_{r['opponent']}", r["win_rate"], "win rate",
                             games=r["games"], score=r["score"], training_seconds=trained["seconds"],
                             training_iterations=trained["iterations"], config=s["train_config"])
    path = os.path.join(out, "strength_endgames.json")
    positions = ["--games", str(s["endgame_positions"])] if s["endgame_positions"] else []  # 0: all of them
    run_cli([os.path.join(EXPERIMENTS, "evaluate.py"), "--endgames", "--agent", f"{raw},{searched}",
             *positions, "--json", path, "--plain"], log, timeout=600)
    with open(path) as f:
        for r, label in zip(json.load(f)["results"], ("raw", f"sims{s['eval_sims']}")):
            for metric in ("keeps_result", "throws_win", "throws_draw"):
                yield figure(f"endgames_{label}_{metric}", r[metric], "share", positions=r["positions"],
                             training_iterations=trained["iterations"], config=s["train_config"])


def part_gpu_tests(s: dict, out: str, log) -> list[dict]:
    collect_only = s["gpu_tests_collect_only"]
    args = ["-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"] + (["--collect-only"] if collect_only else [])
    proc = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True)
    log(f"$ {' '.join(args)}  (exit {proc.returncode})\n{proc.stdout[-6000:]}{proc.stderr[-2000:]}")
    summary = (proc.stdout.strip().splitlines() or [""])[-1]
    if proc.returncode != 0:
        raise RuntimeError(f"pytest -m gpu: {summary}")
    yield figure("gpu_tests", summary, "", collect_only=collect_only)


PARTS: dict[str, Callable] = dict(
    conformance=part_conformance, engine=part_engine, search=part_search, learner=part_learner,
    iteration=part_iteration, strength=part_strength, gpu_tests=part_gpu_tests,
)


# --------------------------------------------------------------------------- driver


def run_part(name: str, scale: str, out: str) -> int:
    """The child process: one part, its figures into ``out/parts/<name>.json``."""
    parts_dir = os.path.join(out, "parts")
    log_file = open(os.path.join(parts_dir, f"{name}.log"), "a")

    def log(text: str) -> None:
        print(text, file=log_file, flush=True)

    result = dict(part=name, status="running", machine=machine(), figures=[])
    sizes = dict(SCALES[scale])
    if os.environ.get(TRAIN_SECONDS_ENV):  # --train-seconds, handed down to the part's process
        sizes["train_seconds"] = float(os.environ[TRAIN_SECONDS_ENV])
    for fig in PARTS[name](sizes, out, log):
        result["figures"].append(fig)
        _write_json(os.path.join(parts_dir, f"{name}.json"), result)
    result["status"] = "ok"
    _write_json(os.path.join(parts_dir, f"{name}.json"), result)
    return 0


def _write_json(path: str, data: dict) -> None:
    """Whole files only: a part killed while writing leaves the previous version."""
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=2, default=str)
    os.replace(path + ".tmp", path)


def spawn_part(name: str, scale: str, out: str, budget: float,
               running: dict[str, subprocess.Popen] | None = None) -> dict:
    """Run a part in a child process under ``budget`` seconds; its result, or why there is none.
    The child is in ``running`` while it runs, for the caller to stop on an interrupt."""
    path = os.path.join(out, "parts", f"{name}.json")
    if os.path.exists(path):
        os.remove(path)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--run-part", name, "--scale", scale,
                             "--out", out], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    if running is not None:
        running[name] = proc
    try:
        output, _ = proc.communicate(timeout=budget)
        status = "ok" if proc.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        _kill(proc)
        output, _ = proc.communicate()
        status = "timed out"
    finally:
        if running is not None:
            running.pop(name, None)
    seconds = time.perf_counter() - start
    result = dict(part=name, figures=[])
    if os.path.exists(path):  # the figures finished, even when the part did not
        with open(path) as f:
            result = json.load(f)
    if status == "ok" and result.get("status") != "ok":
        status = "failed"  # exited 0 without finishing (cannot happen unless a part returns early)
    result.update(status=status, seconds=seconds, exit_code=proc.returncode)
    if status != "ok":
        lines = [line for line in output.strip().splitlines() if line.strip()]
        result["why"] = f"after {budget:.0f} s" if status == "timed out" else (
            lines[-1] if lines else f"exit {proc.returncode}")
        with open(os.path.join(out, "parts", f"{name}.log"), "a") as f:
            f.write(output)
    return result


def _kill(proc: subprocess.Popen) -> None:
    """Stop a part and any command it started (its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_parts(names: list[str], scale: str, out: str, jobs: int) -> tuple[list[dict], int]:
    """Every part, ``jobs`` at a time, in child processes; the results in the order of
    ``names`` and the signal (SIGINT or SIGTERM; 0: none) that cut the run short. Then no
    child is left running, and the parts it stopped (``"interrupted"``, with the figures
    they had finished) or kept from starting (``"not started"``) are in the results too.

    Signals follow the command lines' contract (:class:`CommandSignals`): they are noted,
    also where the shell started the script with SIGINT ignored (a background job), and
    acted on between waits. Parts run in sessions of their own, so only this stops them."""
    from beastybar_jax.training.interrupt import CommandSignals, Interrupted, signal_name

    running: dict[str, subprocess.Popen] = {}
    results: dict[str, dict] = {}

    def one(name: str) -> dict:
        # One write per line (end=""): lines from two threads do not run into each other.
        print(f"[{name}] running (budget {BUDGETS[scale][name]} s) ...\n", end="", flush=True)
        return spawn_part(name, scale, out, BUDGETS[scale][name], running)

    def kill_running() -> None:
        for proc in list(running.values()):
            _kill(proc)

    pool = ThreadPoolExecutor(max_workers=jobs)
    futures = {pool.submit(one, name): name for name in names}
    pending = set(futures)
    stopped_by = 0
    with CommandSignals() as signals:
        # Should the loop below not reach its safe point in time, the watchdog stops the parts.
        signals.when_forced(lambda signum: kill_running() or "interrupted: parts stopped, no report written")
        try:
            while pending:
                signals.check()  # a safe point: every wait times out to reach it
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for future in done:
                    result = results[futures[future]] = future.result()
                    print(f"[{result['part']}] {result['status']}{(': ' + result['why']) if result.get('why') else ''} "
                          f"in {result['seconds']:.0f} s\n", end="", flush=True)
        except Interrupted as e:
            stopped_by = e.signum
            pool.shutdown(wait=False, cancel_futures=True)
            while not all(f.done() for f in futures):  # a part may start while the others are stopped
                kill_running()
                time.sleep(0.1)
            why = f"stopped by {signal_name(stopped_by)}"
            for future, name in futures.items():
                if name in results:
                    continue
                if future.cancelled():
                    results[name] = dict(part=name, status="not started", why=why, seconds=0.0, figures=[])
                elif future.exception() is not None:  # the part could not be run at all
                    results[name] = dict(part=name, status="failed", why=str(future.exception()), seconds=0.0,
                                         figures=[])
                else:  # finished just before the stop (whatever its status), or killed by it
                    result = results[name] = future.result()
                    if result.get("exit_code") == -signal.SIGKILL and result["status"] == "failed":
                        result.update(status="interrupted", why=why)
    pool.shutdown()
    return [results[name] for name in names if name in results], stopped_by


def _fmt(value) -> str:
    if isinstance(value, float):
        if abs(value) >= 1e3:
            for div, suffix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
                if abs(value) >= div:
                    return f"{value / div:.3g}{suffix}"
        return f"{value:.3g}"
    return str(value)


def machine_line(report: dict) -> str:
    """The date, the machine, the versions, the commit and the command of a report."""
    m = report["machine"]
    return (f"{m['date']}, {m['device']} x{m['num_devices']} ({m['backend']}), jax {m['jax']}, "
            f"python {m['python']}, commit {report['commit']}; command: `{report['command']}`")


def markdown(report: dict) -> str:
    """``report.md``: the machine, then one table of every figure with its target."""
    lines = [f"# Acceptance run ({report['scale']} scale)", "", machine_line(report), "",
             "| part | status | seconds |", "|---|---|---:|"]
    if report.get("interrupted"):
        lines[4:4] = ["**Interrupted** after "
                      f"{report.get('seconds', 0):.0f} s: the parts it stopped keep the figures they had finished.", ""]
    for p in report["parts"]:
        lines.append(f"| {p['part']} | {p['status']}{(': ' + p['why']) if p.get('why') else ''} | "
                     f"{p['seconds']:.0f} |")
    lines += ["", table(report)]
    return "\n".join(lines) + "\n"


def table(report: dict) -> str:
    """The figures as a Markdown table (also ``--table``, for docs/performance.md)."""
    lines = ["| part | figure | value | target | met | compile s | where |", "|---|---|---:|---|---|---:|---|"]
    context_keys = ("config", "loop", "batch_size", "num_simulations", "mctx", "network", "games", "positions")
    for p in report["parts"]:
        for f in p["figures"]:
            where = ", ".join(f"{k}={f[k]}" for k in context_keys if k in f)
            if f["name"].endswith("_iteration_seconds") and "gpu_power_w" in f:  # NVML's, once a program
                where += (f", NVML: {f['gpu_utilization']:.0f}% utilization, {f['gpu_power_w']:.0f} W "
                          f"({f['gpu_power_share']:.0%} of the power limit)")
            met = {True: "yes", False: "NO", None: ""}[f.get("met")]
            compile_s = f.get("compile_seconds")
            lines.append(f"| {p['part']} | {f['name']} | {_fmt(f['value'])} {f['unit']} | "
                         f"{f.get('target_text', '')} | {met} | {'' if compile_s is None else f'{compile_s:.1f}'} | "
                         f"{where} |")
    return "\n".join(lines)


def docs_table(report: dict) -> str:
    """What ``--table`` prints for docs/performance.md: the machine line with each part's
    status and seconds, then the figures' table."""
    parts = ", ".join(f"{p['part']} {p['status']} ({p['seconds']:.0f} s)" for p in report["parts"])
    stopped = " (interrupted)" if report.get("interrupted") else ""
    return f"{machine_line(report)}. Parts{stopped}: {parts}.\n\n{table(report)}"


def git_commit() -> str:
    """The checkout's commit, ``-dirty`` where its tracked files differ from it (as on a
    machine that was sent the working tree and an older copy of the git metadata)."""
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7", "--exclude=*"], cwd=REPO,
                              capture_output=True, text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def parse_args(argv) -> argparse.Namespace:
    from beastybar_jax.cli import OneLineParser

    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="directory for report.json, report.md and parts/")
    parser.add_argument("--scale", choices=tuple(SCALES), default="full")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated subset of: " + ", ".join(PARTS))
    parser.add_argument("--train-seconds", type=float, default=None,
                        help="strength: seconds of training (default 150 at full scale); its budget grows alike")
    parser.add_argument("--jobs", type=int, default=1,
                        help="parts at a time (default 1: only then are timed figures comparable)")
    parser.add_argument("--commit", help="the commit to name in the report (default: the checkout's, from git; "
                                         "give it where the code was copied without its git history)")
    parser.add_argument("--table", metavar="REPORT_JSON",
                        help="print a report's machine line and its figures as a Markdown table")
    parser.add_argument("--run-part", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.table:
        return args
    if not args.out:
        parser.error("give --out DIR (or --table REPORT_JSON)")
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown or not args.parts:
        parser.error(f"--parts: unknown part(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(PARTS)}")
    if args.jobs < 1:
        parser.error(f"--jobs: must be at least 1, not {args.jobs}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.table:
        try:
            with open(args.table) as f:
                report = json.load(f)
            if not isinstance(report, dict) or not isinstance(report.get("parts"), list):
                raise ValueError("not an acceptance report (an object with a list of parts)")
            print(docs_table(report))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            print(f"error: cannot read the report {args.table}: {e}", file=sys.stderr)
            return 2
        return 0
    out = os.path.abspath(args.out)
    # This process, each part's process and the command lines a part runs all hold the device
    # at once (and with --jobs, several parts): JAX's default of taking 75% of a GPU's memory
    # at start would leave the later ones without. Children inherit the setting.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if args.train_seconds is not None:
        if not args.train_seconds > 0:
            print(f"error: --train-seconds must be > 0, got {args.train_seconds:g}", file=sys.stderr)
            return 2
        os.environ[TRAIN_SECONDS_ENV] = repr(args.train_seconds)
        BUDGETS[args.scale]["strength"] += args.train_seconds - (SCALES[args.scale]["train_seconds"] or 0)
    if args.run_part:
        return run_part(args.run_part, args.scale, out)
    try:
        os.makedirs(os.path.join(out, "parts"), exist_ok=True)
        with open(os.path.join(out, "report.json"), "a"):
            pass
    except OSError as e:
        print(f"error: --out {out} cannot be written: {e.strerror or e}", file=sys.stderr)
        return 2
    command = " ".join(["python", "experiments/acceptance.py", *(argv if argv is not None else sys.argv[1:])])
    report = dict(scale=args.scale, commit=args.commit or git_commit(), command=command, machine=machine(), parts=[])
    started = time.perf_counter()
    report["parts"], stopped_by = run_parts(args.parts, args.scale, out, args.jobs)
    if stopped_by:
        print("interrupted: the report names every part (finished, interrupted or not started)", file=sys.stderr)
        report["interrupted"] = True
    report["seconds"] = time.perf_counter() - started
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2, default=str)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(markdown(report))
    print(table(report))
    print(f"wrote {os.path.join(out, 'report.md')} and report.json in {report['seconds']:.0f} s")
    if stopped_by:
        return 128 + stopped_by
    return 0 if all(p["status"] == "ok" for p in report["parts"]) else 1


if __name__ == "__main__":
    sys.exit(main())
