"""``profile``: one training iteration of a config under ``jax.profiler``: the trace to
open in TensorBoard's profile plugin or Perfetto, the operations each simulation's loop
body runs (each a kernel launch on a GPU), and, on a GPU, the kernels the device ran and
the share of the iteration's wall time it was busy.

The iteration is the one ``train.py`` runs (``--loop``: the search loop it traces;
``static-xla`` runs the walk and Gumbel's choices as XLA operations, not Pallas kernels):
compiled first (compile time apart, and of it the time JAX spent tracing and lowering,
in Python, before XLA's compiler), then enough warm-up iterations that the timed one
learns (AlphaZero's replay buffer holds games), then ``--iterations`` traced ones, each
ended with ``block_until_ready``. The device's busy time is the union of its kernels'
intervals on its streams; on a CPU the trace has no device timeline, so the busy share
is not measured there.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import time

import jax

from bench import common
from beastybar_jax.search import mctx_patch, programs
from beastybar_jax.training.trainer import make_trainer

DEFAULT_CONFIG = "configs/h100.yaml"


def device_timeline(trace_dir: str) -> dict | None:
    """``{"kernels": n, "busy_us": t}`` of the device streams in the newest Perfetto trace
    under ``trace_dir`` (``jax.profiler.trace(..., create_perfetto_trace=True)``), or None
    when it has no device timeline (a CPU run)."""
    paths = sorted(glob.glob(os.path.join(trace_dir, "**", "perfetto_trace.json.gz"), recursive=True))
    if not paths:
        return None
    with gzip.open(paths[-1], "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    processes = {e["pid"]: e["args"]["name"] for e in events
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    devices = {pid for pid, name in processes.items() if "/device:" in name}
    # The streams' kernels; the "XLA Ops"/"XLA Modules" lines restate them.
    intervals = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in events
                       if e.get("ph") == "X" and e.get("pid") in devices
                       and threads.get((e["pid"], e.get("tid")), "").startswith("Stream"))
    if not intervals:
        return None
    busy, start, end = 0.0, *intervals[0]
    for a, b in intervals[1:]:
        if a > end:
            busy, start, end = busy + end - start, a, b
        else:
            end = max(end, b)
    return dict(kernels=len(intervals), busy_us=busy + end - start)


def profile_iteration(config, trace_dir: str, iterations: int, repeats: int = 0) -> dict:
    """Compile, warm up, time ``repeats`` iterations of ``config`` (the best kept; the
    GPU's NVML readings over them where there are some), then trace ``iterations``; the row."""
    from beastybar_jax.training.device_monitor import DeviceMonitor

    trainer = make_trainer(config)
    state = common.initial_state(trainer, config)
    compiled, trace_s, xla_s = common.compile_parts(trainer.iteration, state, jax.random.key(1))
    if config.algorithm == "alphazero":
        warmup = -(-trainer.game.max_game_length // config.alphazero.moves_per_iteration) + 1
        loop_trips = config.search.num_simulations
        simulations = config.num_games * config.alphazero.moves_per_iteration * config.search.num_simulations * \
            config.search.num_determinizations
    else:
        warmup, loop_trips, simulations = 1, config.ppo.rollout_length, 0
    for i in range(warmup):
        state, metrics = compiled(state, jax.random.key(100 + i))
    jax.block_until_ready(metrics)
    best, finished, gpu = float("inf"), 0.0, {}
    monitor = DeviceMonitor.create() if repeats else None
    for r in range(repeats):
        start = time.perf_counter()
        state, metrics = compiled(state, jax.random.key(500 + r))
        jax.block_until_ready((state, metrics))
        if time.perf_counter() - start < best:
            best, finished = time.perf_counter() - start, float(metrics.get("games_finished", 0))
    if monitor is not None:
        gpu = monitor.take()
        monitor.close()
    with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
        start = time.perf_counter()
        for i in range(iterations):
            state, metrics = compiled(state, jax.random.key(1000 + i))
        jax.block_until_ready((state, metrics))
        wall = (time.perf_counter() - start) / iterations
    body = programs.loop_ops(compiled.as_text(), loop_trips)
    timeline = device_timeline(trace_dir)
    row = dict(config=config.name, algorithm=config.algorithm, num_games=config.num_games,
               loop="simulation" if simulations else "rollout step", loop_trips=loop_trips,
               body_ops=body.total, body_by_opcode=body.by_opcode,
               body_nested_loops=[list(loop) for loop in body.nested_loops], body_bytes=body.bytes,
               body_bytes_by_scope=body.bytes_by_scope, iteration_seconds=best if repeats else wall, traced_iteration_seconds=wall,
               compile_seconds=trace_s + xla_s, trace_seconds=trace_s, simulations=simulations, trace_dir=trace_dir,
               **gpu)
    if repeats:
        row.update(games_per_second=finished / best, simulations_per_second=simulations / best if simulations else None)
        if config.algorithm != "alphazero":
            row.update(env_steps_per_second=config.num_games * config.ppo.rollout_length / best)
    if timeline is not None:
        row.update(kernels_per_iteration=timeline["kernels"] / iterations,
                   device_busy_share=timeline["busy_us"] / 1e6 / (wall * iterations),
                   kernels_per_simulation=timeline["kernels"] / iterations / simulations if simulations else None)
    return row


def compile_only(config, target: str, loop: str = "auto") -> dict:
    """The row of ``config``'s iteration compiled for GPU ``target`` (not run), with the
    search loop ``loop`` as traced there: ops in the simulation (or rollout step) loop's
    body, compile seconds."""
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from beastybar_jax.games import tracing
    from beastybar_jax.training.trainer import abstract_state

    mesh = Mesh(np.array([common.target_device(target)]), ("data",))
    with tracing.for_gpu(), mctx_patch.installed(common.loop_as_on_gpu(loop)):
        trainer = make_trainer(config, mesh=mesh)
        key = jax.ShapeDtypeStruct((), jax.random.key(0).dtype, sharding=NamedSharding(mesh, PartitionSpec()))
        compiled, trace_s, xla_s = common.compile_parts(trainer.iteration, abstract_state(trainer), key)
    trips = config.search.num_simulations if config.algorithm == "alphazero" else config.ppo.rollout_length
    body = programs.loop_ops(compiled.as_text(), trips)
    return dict(config=config.name, algorithm=config.algorithm, num_games=config.num_games, compiled_for=target,
                loop="simulation" if config.algorithm == "alphazero" else "rollout step", loop_trips=trips,
                body_ops=body.total, body_by_opcode=body.by_opcode,
                body_nested_loops=[list(loop) for loop in body.nested_loops], body_bytes=body.bytes,
                body_bytes_by_scope=body.bytes_by_scope, compile_seconds=trace_s + xla_s, trace_seconds=trace_s)


def _bytes_progress(row: dict) -> None:
    common.progress(f"  ~{row['body_bytes'] / 1e6:.0f} MB moved per {row['loop']} (estimated from the HLO), by scope: "
                    f"{programs.scope_label(row['body_bytes_by_scope'])}")


def run(args: argparse.Namespace) -> int:
    base = common.load_base_config(args.config, args.overrides)
    common.check_trainer_configs([base], lambda c: args.config)
    machine = dict(common.machine_info(), compiled_for=args.compile_for)
    if args.compile_for:
        row = compile_only(base, args.compile_for, args.loop)
        nested = "".join(f" + a loop of {ops} x {trips or 'a data-dependent count'}"
                         for ops, trips in row["body_nested_loops"])
        common.progress(f"{row['loop']} loop body compiled for {args.compile_for}: {row['body_ops']} ops{nested}; "
                        f"compile {row['compile_seconds']:.1f} s ({row['trace_seconds']:.1f} s of it tracing)")
        _bytes_progress(row)
        common.print_table(machine, [("config", lambda r: r["config"]), ("games", lambda r: r["num_games"]),
                                     (f"ops per {row['loop']}", lambda r: r["body_ops"]),
                                     ("MB per step", lambda r: f"{r['body_bytes'] / 1e6:.0f}"),
                                     ("compile s", lambda r: f"{r['compile_seconds']:.1f}"),
                                     ("of it tracing", lambda r: f"{r['trace_seconds']:.1f}")], [row])
        return common.write_report(args.out, "profile", machine, args, [row], base_config=base.to_dict())
    trace_dir = args.trace_dir or os.path.join("bench_results", "profile", base.name)
    with mctx_patch.installed(args.loop):
        row = profile_iteration(base, trace_dir, args.iterations, args.repeats)
    nested = "".join(f" + a loop of {ops} x {trips or 'a data-dependent count'}" for ops, trips in row["body_nested_loops"])
    common.progress(f"{row['loop']} loop body: {row['body_ops']} ops{nested}")
    _bytes_progress(row)
    if "device_busy_share" in row:
        per_sim = f", {row['kernels_per_simulation']:.0f} per simulation" if row["kernels_per_simulation"] else ""
        common.progress(f"device: {row['kernels_per_iteration']:.0f} kernels per iteration{per_sim}, busy "
                        f"{100 * row['device_busy_share']:.0f}% of the iteration's wall time")
    else:
        common.progress("device: no device timeline in the trace (a CPU run): busy share not measured")
    common.progress(f"trace: {trace_dir} (tensorboard --logdir {trace_dir}, or perfetto_trace.json.gz in "
                    f"https://ui.perfetto.dev)")
    common.print_table(machine, [
        ("config", lambda r: r["config"]),
        ("games", lambda r: r["num_games"]),
        ("iteration s", lambda r: f"{r['iteration_seconds']:.3f}"),
        (f"ops per {row['loop']}", lambda r: r["body_ops"]),
        ("kernels/iteration", lambda r: f"{r['kernels_per_iteration']:.0f}" if "kernels_per_iteration" in r else "-"),
        ("device busy", lambda r: f"{100 * r['device_busy_share']:.0f}%" if "device_busy_share" in r else "-"),
        ("compile s", lambda r: f"{r['compile_seconds']:.1f}"),
        ("of it tracing", lambda r: f"{r['trace_seconds']:.1f}"),
    ], [row])
    return common.write_report(args.out, "profile", machine, args, [row], base_config=base.to_dict())


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "profile", help="one iteration under jax.profiler: trace, ops per simulation, device kernels and busy share",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_config_arguments(p, DEFAULT_CONFIG, "--set num_games=1024")
    p.add_argument("--iterations", type=common.int_at_least(1), default=1, help="traced iterations (default 1)")
    p.add_argument("--repeats", type=common.int_at_least(0), default=0,
                   help="timed iterations before the traced ones, the best kept, the GPU's NVML readings "
                        "averaged over them (default 0)")
    p.add_argument("--loop", choices=mctx_patch.LOOPS, default="auto",
                   help="the search loop the iteration traces (default auto: the device's own; static-xla: the GPU's "
                        "static loop with its walk and Gumbel's choices as XLA operations, not Pallas kernels)")
    p.add_argument("--compile-for", choices=common.COMPILE_TARGETS, default=None,
                   help="only compile the iteration for that GPU, without one (as benchmark.py search --compile-for) "
                        "and report its ops; no trace, no timing")
    p.add_argument("--trace-dir", default=None,
                   help="where the trace goes (default bench_results/profile/<config name>)")
    common.add_common_arguments(p, out="bench_results/profile.json", repeats_help=None, seed=False)
    p.set_defaults(func=run)
