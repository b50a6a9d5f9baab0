"""What every benchmark shares: argument types, the machine, timing, tables and the JSON report.

Timing: :func:`compile_seconds` times ``lower(...).compile()`` alone; :func:`best_of` then
runs the compiled function ``repeats`` times, each call ended with ``jax.block_until_ready``,
and keeps the fastest (wall and process CPU time). Warm-up calls are the caller's: they
differ per benchmark (one call, or enough iterations to fill a replay buffer).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from typing import Any, Callable, Sequence

import jax
from rich import box
from rich.console import Console
from rich.table import Table

from beastybar_jax.cli import seed as seed_arg
from beastybar_jax.config import ConfigError, TrainConfig, load_config
from beastybar_jax.network import gpu_torso
from beastybar_jax.training.metrics import format_rate

# --------------------------------------------------------------------------- arguments


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def list_of(minimum: int = 1, choices: Sequence[str] | None = None, maximum: int = 2**31 - 1) -> Callable[[str], list]:
    """An argparse type for a comma-separated list: integers in [``minimum``, ``maximum``]
    (powers written ``2^12`` allowed; the default maximum is what an int32 holds), or, with
    ``choices``, names from ``choices``."""

    def item(token: str):
        if choices is not None:
            if token not in choices:
                raise ValueError(token)
            return token
        base, _, exponent = token.partition("^")
        if exponent and int(exponent) > 64:  # no huge powers to compute
            raise ValueError(token)
        value = int(base) ** int(exponent) if exponent else int(base)
        if not minimum <= value <= maximum:
            raise ValueError(token)
        return value

    def parse(text: str) -> list:
        try:
            values = [item(t.strip()) for t in text.split(",") if t.strip()]
        except ValueError:
            values = []
        if not values:
            expected = (f"names from {', '.join(choices)}" if choices is not None else
                        f"integers in [{minimum}, {maximum}] (powers like 2^12 allowed)")
            raise argparse.ArgumentTypeError(f"expected comma-separated {expected}, got {text!r}")
        return values

    return parse


def add_config_arguments(parser: argparse.ArgumentParser, default: str, example: str) -> None:
    """``--config`` and repeatable ``--set KEY=VALUE``."""
    parser.add_argument("--config", default=default, help=f"training config (default {default})")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help=f"override a config key, e.g. {example}")


def add_common_arguments(parser: argparse.ArgumentParser, out: str, repeats_help: str | None = "timed runs",
                         seed: bool = True) -> None:
    """``--repeats`` (unless ``repeats_help`` is None), ``--seed`` (where the positions are
    random) and ``--out``."""
    if repeats_help is not None:
        parser.add_argument("--repeats", type=int_at_least(1), default=3,
                            help=f"{repeats_help} per configuration; the best is kept (default 3)")
    if seed:
        parser.add_argument("--seed", type=seed_arg, default=0)
    parser.add_argument("--out", default=out, help=f"JSON output path (default {out})")


def usage_error(text: str):
    """One line on stderr and exit code 2: an argument the benchmark cannot take, found
    before anything is measured."""
    print(f"error: {text}", file=sys.stderr)
    raise SystemExit(2)


def load_base_config(path: str, overrides: Sequence[str]) -> TrainConfig:
    """The config, or one line on stderr and exit code 2 (before anything compiles)."""
    try:
        return load_config(path, list(overrides))
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


# --------------------------------------------------------------------------- machine


def machine_info() -> dict:
    device = jax.devices()[0]
    return dict(
        backend=jax.default_backend(),
        device=getattr(device, "device_kind", str(device)),
        num_devices=jax.device_count(),
        cpu=_cpu_name(),
        cpu_count=os.cpu_count(),
        platform=platform.platform(),
        python=platform.python_version(),
        jax=jax.__version__,
        date=datetime.date.today().isoformat(),
    )


def machine_line(machine: dict) -> str:
    """The line naming the machine above every results table."""
    target = f"compiled for {machine['compiled_for']} (not run) on " if machine.get("compiled_for") else ""
    return (f"{target}backend: {machine['backend']} ({machine['device']}, {machine['num_devices']} device(s)); "
            f"cpu: {machine['cpu']} x{machine['cpu_count']}; jax {machine['jax']}; {machine['date']}")


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# --------------------------------------------------------------------------- timing


def initial_state(trainer, config):
    """``trainer``'s fresh train state, its parameters taken from ``config.warm_start`` where
    it names a source that is there (as ``train.py`` starts): a benchmark of a trained
    network, whose searches and afterstate lists differ from a fresh one's. A source not
    there yet (``configs/champion.yaml``'s, an earlier stage's run) is a note: the config's
    speed is still measured, with fresh parameters."""
    from beastybar_jax.checkpoint import CheckpointError, warm_start_path
    from beastybar_jax.training.loop import warm_started

    state = trainer.init(jax.random.key(0))
    if config.warm_start:
        try:
            warm_start_path(config.warm_start, trainer.game)
        except CheckpointError as e:
            progress(f"note: {e}; timing fresh parameters")
        else:
            state, note = warm_started(trainer, state, config.warm_start)
            progress(note)
    return jax.block_until_ready(state)


def compile_seconds(jitted, *args) -> tuple[Any, float]:
    """``(compiled, seconds)``: ``jitted.lower(*args).compile()`` and its wall time."""
    compiled, trace_s, xla_s = compile_parts(jitted, *args)
    return compiled, trace_s + xla_s


def compile_parts(jitted, *args) -> tuple[Any, float, float]:
    """``(compiled, trace seconds, XLA seconds)``: ``jitted.lower(*args)`` (JAX tracing and
    lowering, in Python) and ``.compile()`` (XLA's passes and code generation), timed apart."""
    start = time.perf_counter()
    lowered = jitted.lower(*args)
    traced = time.perf_counter()
    compiled = lowered.compile()
    return compiled, traced - start, time.perf_counter() - traced


TARGETS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets")
COMPILE_TARGETS = tuple(sorted(name[:-len(".pbtxt")] for name in os.listdir(TARGETS_DIR) if name.endswith(".pbtxt")))


def loop_as_on_gpu(loop: str) -> str:
    """The search loop ``--loop`` names as a GPU traces it, for a deviceless compile: the
    device's own (``auto``) and ``static`` are the static loop with its Pallas kernels."""
    return {"auto": "static-pallas", "static": "static-pallas"}.get(loop, loop)


def target_device(name: str):
    """A compile-only device of the GPU ``name`` (``targets/<name>.pbtxt``, XLA's
    ``GpuTargetConfig``): programs placed on it are compiled by XLA's GPU compiler on
    this machine, with no GPU here, and cannot run. Needs JAX's CUDA plugin
    (``pip install -e ".[cuda]"``); on a machine without a GPU, run with
    ``JAX_PLATFORMS=cpu`` so that JAX does not try to start one."""
    from jax.experimental import topologies

    with open(os.path.join(TARGETS_DIR, f"{name}.pbtxt")) as f:
        config = f.read()
    try:
        topology = topologies.get_topology_desc(name, "cuda", target_config=config, topology="1x1x1")
    except Exception as e:  # no CUDA plugin, or one that cannot compile without a device
        raise SystemExit(f"error: --compile-for {name} needs JAX's CUDA plugin (pip install -e \".[cuda]\"): {e}")
    return topology.devices[0]


def on_device(tree, device):
    """``tree``'s arrays as ``ShapeDtypeStruct``s placed on ``device`` (for ``lower``)."""
    sharding = jax.sharding.SingleDeviceSharding(device)
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), tree)


def repeat_keys(key: jax.Array, repeats: int, offset: int = 1) -> list:
    """``fold_in(key, offset + r)`` for each timed run ``r``, made before any timer starts:
    the first ``fold_in`` compiles, which timed inside a run made the first of a sweep's
    rows (and every row with ``--repeats 1``) report a rate up to 60 times too low."""
    return jax.block_until_ready([jax.random.fold_in(key, offset + r) for r in range(repeats)])


def check_signals() -> None:
    """A safe point between measurements: a Ctrl-C or SIGTERM that came stops the command
    here (``Interrupted``), before the next row, instead of by the watchdog after its
    grace period (or not at all, when the work ended within it)."""
    from beastybar_jax.training.interrupt import active_command

    signals = active_command()
    if signals is not None:
        signals.check()


def check_trainer_configs(configs: Sequence[TrainConfig], what: Callable[[TrainConfig], str]) -> None:
    """Validate every configuration of a sweep before the first is measured (one line
    naming the one that fails, exit code 2: a batch size the devices or the opponent pool
    cannot take), so a bad size costs no compilation and loses no measured row."""
    from beastybar_jax.config import validate
    from beastybar_jax.games import get_game

    for config in configs:
        try:
            validate(config, num_devices=jax.device_count(), game=get_game(config.game))
        except ConfigError as e:
            usage_error(f"{what(config)}: {e}")


def best_of(repeats: int, run: Callable[[int], Any]) -> tuple[float, float, Any]:
    """``(wall seconds, process CPU seconds, output)`` of the fastest of ``run(0)`` ..
    ``run(repeats - 1)``, each ended with ``jax.block_until_ready`` on its output; the
    output is that of the fastest run, the CPU time the least of any run."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    best, best_cpu, best_output = float("inf"), float("inf"), None
    for r in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        output = jax.block_until_ready(run(r))
        seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        if seconds < best:
            best, best_output = seconds, output
        best_cpu = min(best_cpu, cpu)
    return best, best_cpu, best_output


def unless_out_of_memory(label: str, measure: Callable[[], dict]) -> dict | None:
    """``measure()``, or None (with a note) when the device runs out of memory, so the
    largest sizes of a sweep can fail without losing the rest."""
    try:
        return measure()
    except Exception as e:
        if "RESOURCE_EXHAUSTED" not in str(e) and "Out of memory" not in str(e):
            raise
        print(f"{label}: out of memory, skipped", file=sys.stderr)
        return None


# --------------------------------------------------------------------------- output


def rate(x: float) -> str:
    """``1234567 -> "1.23 M"``."""
    return format_rate(x, unit_separator=" ")


def progress(text: str) -> None:
    """One line per measured configuration, as soon as it is measured."""
    print(f"  {text}", flush=True)


Column = tuple[str, Callable[[dict], Any]]


def print_table(machine: dict, columns: Sequence[Column], rows: Sequence[dict]) -> None:
    """The machine line, then one table row per result: ``columns`` are ``(header,
    cell(row))``; cells are right-aligned."""
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console.width = max(console.width, 160)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for header, _ in columns:
        table.add_column(header, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*(str(cell(row)) for _, cell in columns))
    console.print(machine_line(machine), markup=False)
    console.print(table)


def write_report(out: str, benchmark: str, machine: dict, args: argparse.Namespace, rows: list[dict],
                 **extra) -> int:
    """Writes ``{benchmark, machine, config (the arguments), **extra, results}`` as JSON to
    ``out``; with no rows (every size ran out of memory) leaves ``out`` alone and returns 1."""
    if not rows:
        print(f"error: nothing was measured (every size ran out of memory); {out} left as it was", file=sys.stderr)
        return 1
    config = {k: v for k, v in vars(args).items() if k != "func"}
    report = dict(benchmark=benchmark, machine=machine, config=config, **extra, results=rows)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {out}")
    return 0


def network_name(config: TrainConfig) -> str:
    """E.g. ``mlp 256x4 bfloat16 + afterstates``; ``(XLA torso)`` where a GPU's search applies an MLP
    torso as XLA operations, not the torso kernel (``network.gpu_torso``)."""
    net = config.network
    return (f"{net.torso} {net.width}x{net.depth} {net.dtype}" + (" + afterstates" if net.afterstates else "")
            + (" (XLA torso)" if net.torso == "mlp" and gpu_torso(net) == "xla" else ""))
