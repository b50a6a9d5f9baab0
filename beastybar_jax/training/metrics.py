"""Run logging: JSON lines, TensorBoard event files and a rich console progress view.

Every iteration's scalars go to ``<run_dir>/metrics.jsonl`` (one JSON object per
line, with ``iteration`` and ``time``) and, when enabled, to TensorBoard event
files in ``<run_dir>/tensorboard``. The console shows a progress bar and one line
per iteration: losses, policy entropy, games and moves, simulations per second,
iteration time and device memory.
"""

from __future__ import annotations

import json
import os
import time
from typing import Mapping

import jax

# Grouping of metric names in TensorBoard ("section/name").
_SECTIONS = {
    "loss": "loss", "policy_loss": "loss", "value_loss": "loss", "aux_loss": "loss",
    "policy_entropy": "learner", "grad_norm": "learner", "learning_rate": "learner", "num_updates": "learner",
    "trained": "learner",
    "buffer_size": "replay", "buffer_fill": "replay", "positions_inserted": "replay",
}


def device_memory() -> dict[str, float]:
    """Bytes in use / peak on the first local device, when the backend reports them
    (GPUs and TPUs do; the CPU backend may not)."""
    try:
        stats = jax.local_devices()[0].memory_stats()
    except Exception:  # noqa: BLE001 -- unsupported on some backends
        stats = None
    if not stats:
        return {}
    out = {}
    if "bytes_in_use" in stats:
        out["device_memory_bytes"] = float(stats["bytes_in_use"])
    if "peak_bytes_in_use" in stats:
        out["device_memory_peak_bytes"] = float(stats["peak_bytes_in_use"])
    return out


def _gib(x: float) -> str:
    return f"{x / 2**30:.2f} GiB"


def format_rate(x: float, unit_separator: str = "") -> str:
    """``1234567 -> "1.23M"``, ``45600 -> "45.6k"`` (with ``unit_separator`` before the unit)."""
    if x >= 1e6:
        return f"{x / 1e6:.2f}{unit_separator}M"
    if x >= 1e3:
        return f"{x / 1e3:.1f}{unit_separator}k"
    return f"{x:.0f}"


# Loss parts shown on the console line when an algorithm reports them: (metric, label).
_LOSS_PARTS = (("policy_loss", "pi"), ("value_loss", "v"), ("aux_loss", "aux"), ("entropy_loss", "ent"))


def format_line(iteration: int, total: int, m: Mapping[str, float]) -> str:
    """The per-iteration console line."""
    parts = [f"it {iteration}/{total}"]
    if m.get("trained", 0.0) > 0:
        shown = " ".join(f"{label} {m[key]:.3f}" for key, label in _LOSS_PARTS if key in m)
        parts.append(f"loss {m['loss']:.4f}" + (f" ({shown})" if shown else ""))
        if "policy_entropy" in m:
            parts.append(f"H {m['policy_entropy']:.3f}")
    else:
        parts.append(f"filling buffer {int(m.get('buffer_size', 0))}")
    parts.append(f"games {int(m.get('games_finished', 0))} moves {int(m.get('moves', 0))}")
    wins = [f"{k[5:-9]} {m[k]:.0%}" for k in m if k.startswith("eval_") and k.endswith("_win_rate")]
    if wins:
        parts.append("win rate vs " + ", ".join(wins))
    if "simulations_per_second" in m:
        parts.append(f"{format_rate(m['simulations_per_second'])} sims/s")
    elif "moves_per_second" in m:
        parts.append(f"{format_rate(m['moves_per_second'])} moves/s")
    if "iteration_seconds" in m:
        parts.append(f"{m['iteration_seconds']:.2f} s")
    if "device_memory_bytes" in m:
        parts.append(f"mem {_gib(m['device_memory_bytes'])}")
    return " | ".join(parts)


class MetricsLogger:
    """Writes each iteration's scalars to JSON lines, TensorBoard and the console.

    Args:
      run_dir: the run directory (created).
      total_iterations: for the progress bar.
      start_iteration: iterations already done (resumed runs append to the files).
      tensorboard: write TensorBoard event files.
      console: show the rich progress bar and per-iteration lines (only on process 0).
    """

    def __init__(self, run_dir: str, total_iterations: int, start_iteration: int = 0, tensorboard: bool = True,
                 console: bool = True):
        self.run_dir = run_dir
        self.total = total_iterations
        self.is_main = jax.process_index() == 0
        os.makedirs(run_dir, exist_ok=True)
        self.jsonl_path = os.path.join(run_dir, "metrics.jsonl")
        self._jsonl = open(self.jsonl_path, "a") if self.is_main else None
        self._writer = None
        if tensorboard and self.is_main:
            from tensorboardX import SummaryWriter

            self._writer = SummaryWriter(os.path.join(run_dir, "tensorboard"))
        self._progress = None
        self._console = None
        if console and self.is_main:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._console = Console()
            self._progress = Progress(
                TextColumn("[bold]training"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("eta"), TimeRemainingColumn(), console=self._console, transient=False,
            )
            self._task = self._progress.add_task("training", total=total_iterations, completed=start_iteration)
            self._progress.start()

    def write_config(self, config, run_info: dict | None = None) -> None:
        """``config.json`` (the resolved config) and ``run.json`` (devices, versions)."""
        if not self.is_main:
            return
        if run_info is not None:
            with open(os.path.join(self.run_dir, "run.json"), "w") as f:
                json.dump(run_info, f, indent=2)
        with open(os.path.join(self.run_dir, "config.json"), "w") as f:
            json.dump(config.to_dict(), f, indent=2)
        if self._writer is not None:
            self._writer.add_text("config", "```\n" + json.dumps(config.to_dict(), indent=2) + "\n```", 0)

    def message(self, text: str) -> None:
        if self._console is not None:
            self._console.print(text)

    def log(self, iteration: int, metrics: Mapping[str, float]) -> None:
        if not self.is_main:
            return
        metrics = dict(metrics)
        metrics.update(device_memory())
        record = {"iteration": iteration, "time": time.time(), **{k: float(v) for k, v in metrics.items()}}
        self._jsonl.write(json.dumps(record) + "\n")
        self._jsonl.flush()
        if self._writer is not None:
            for name, value in metrics.items():
                section = "eval" if name.startswith("eval_") else _SECTIONS.get(name, "selfplay")
                self._writer.add_scalar(f"{section}/{name}", float(value), iteration)
            self._writer.flush()
        if self._progress is not None:
            self._console.print(format_line(iteration, self.total, metrics))
            self._progress.update(self._task, completed=iteration)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None


def read_jsonl(path: str) -> list[dict]:
    """The records of a ``metrics.jsonl`` file."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
