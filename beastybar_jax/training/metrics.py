"""Run logging: JSON lines, TensorBoard event files and a rich console progress view.

Every iteration's scalars go to ``<run_dir>/metrics.jsonl`` (one JSON object per
line, with ``iteration`` and ``time``) and, when enabled, to TensorBoard event
files in ``<run_dir>/tensorboard``. The console shows a progress bar and one line
per iteration: losses, policy entropy, games and moves, simulations per second,
iteration time and device memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Mapping

import jax
from rich.progress import ProgressColumn
from rich.text import Text

# Grouping of metric names in TensorBoard ("section/name").
_SECTIONS = {
    "loss": "loss", "policy_loss": "loss", "value_loss": "loss", "aux_loss": "loss",
    "policy_entropy": "learner", "grad_norm": "learner", "learning_rate": "learner", "num_updates": "learner",
    "trained": "learner",
    "buffer_size": "replay", "buffer_fill": "replay", "positions_inserted": "replay",
    "gpu_utilization": "device", "gpu_memory_gb": "device", "gpu_power_w": "device", "gpu_power_share": "device",
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
    if "eval_endgames_keeps_result" in m:
        parts.append(f"endgames {m['eval_endgames_keeps_result']:.1%} kept")
    if "simulations_per_second" in m:
        parts.append(f"{format_rate(m['simulations_per_second'])} sims/s")
    elif "moves_per_second" in m:
        parts.append(f"{format_rate(m['moves_per_second'])} moves/s")
    if "iteration_seconds" in m:
        parts.append(f"{m['iteration_seconds']:.2f} s")
    if "device_memory_bytes" in m:
        parts.append(f"mem {_gib(m['device_memory_bytes'])}")
    if "gpu_utilization" in m:
        parts.append(f"gpu {m['gpu_utilization']:.0f}% {m['gpu_power_w']:.0f} W")
    return " | ".join(parts)


class _StatusColumn(ProgressColumn):
    """The progress bar's status: e.g. ``compiling the training iteration 12 s``, the
    seconds ticking (rich redraws from its own thread while the main one waits)."""

    def render(self, task) -> Text:
        since = task.fields.get("status_since")
        if since is None:
            return Text("")
        return Text(f"{task.fields['status']} {time.monotonic() - since:.0f} s", style="yellow")


class MetricsLogger:
    """Writes each iteration's scalars to JSON lines, TensorBoard and the console.

    A resumed run continues the files of the run: ``metrics.jsonl`` is first cut back
    to the checkpoint's iteration (lines of iterations that will run again, and a
    partial last line from a crash or a full disk, are dropped), and TensorBoard is
    told to hide events from that iteration on (``purge_step``), so each iteration
    appears once (a new run, ``start_iteration`` 0, starts from an empty file). A
    failed write (full disk) raises ``OSError`` and leaves the file as it was before
    the line, never half a line.

    Args:
      run_dir: the run directory (created).
      total_iterations: for the progress bar.
      start_iteration: iterations already done (a resumed run's checkpoint).
      tensorboard: write TensorBoard event files.
      console: show the rich progress bar and per-iteration lines (only on process 0).
        When the output is not a terminal (a log file), lines are printed whole (no
        wrapping at 80 columns) and without the animated bar.
    """

    def __init__(self, run_dir: str, total_iterations: int, start_iteration: int = 0, tensorboard: bool = True,
                 console: bool = True):
        self.run_dir = run_dir
        self.total = total_iterations
        self.is_main = jax.process_index() == 0
        self.jsonl_path = os.path.join(run_dir, "metrics.jsonl")
        self._jsonl_fd = None
        self._writer = None
        self._progress = None
        self._console = None
        if not self.is_main:
            return
        os.makedirs(run_dir, exist_ok=True)
        dropped = rewind_jsonl(self.jsonl_path, start_iteration)
        if dropped:  # said once the console is up (below)
            self._dropped_note = (f"{self.jsonl_path}: dropped {len(dropped)} line(s) that were not JSON records "
                                  f"(line {', '.join(map(str, dropped[:5]))}{', ...' if len(dropped) > 5 else ''})")
        self._jsonl_fd = os.open(self.jsonl_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if tensorboard:
            from tensorboardX import SummaryWriter

            # purge_step: TensorBoard hides events at this step and later from earlier
            # sessions (those iterations run again after a resume).
            self._writer = SummaryWriter(os.path.join(run_dir, "tensorboard"), purge_step=start_iteration + 1)
        if console:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._console = Console()
            if not self._console.is_terminal:
                self._console = Console(soft_wrap=True)  # a log file: whole lines
            self._progress = Progress(
                TextColumn("[bold]training"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("eta"), TimeRemainingColumn(), _StatusColumn(), console=self._console, transient=False,
            )
            self._task = self._progress.add_task("training", total=total_iterations, completed=start_iteration)
            self._progress.start()
        if getattr(self, "_dropped_note", None):
            self.message(self._dropped_note, important=True)

    def write_config(self, config, run_info: dict | None = None) -> None:
        """``config.json`` (the resolved config) and ``run.json`` (devices, versions)."""
        if not self.is_main:
            return
        if run_info is not None:
            _write_json(os.path.join(self.run_dir, "run.json"), run_info)
        _write_json(os.path.join(self.run_dir, "config.json"), config.to_dict())
        if self._writer is not None:
            self._writer.add_text("config", "```\n" + json.dumps(config.to_dict(), indent=2) + "\n```", 0)

    def message(self, text: str, important: bool = False) -> None:
        """A line on the console; ``important`` ones go to stderr when there is none."""
        if self._console is not None:
            self._console.print(text)
        elif important and self.is_main:
            print(text, file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def status(self, text: str):
        """Show ``text`` with the seconds it has lasted in the progress bar (a terminal),
        or print it once (a log file)."""
        if self._progress is not None and self._console.is_terminal:
            self._progress.update(self._task, status=text, status_since=time.monotonic())
            try:
                yield
            finally:
                self._progress.update(self._task, status=None, status_since=None)
        else:
            self.message(f"{text} ...")
            yield

    def log(self, iteration: int, metrics: Mapping[str, float]) -> None:
        if not self.is_main:
            return
        metrics = dict(metrics)
        metrics.update(device_memory())
        record = {"iteration": iteration, "time": time.time(), **{k: float(v) for k, v in metrics.items()}}
        _append_line(self._jsonl_fd, self.jsonl_path, json.dumps(record) + "\n")
        if self._writer is not None:
            for name, value in metrics.items():
                section = "eval" if name.startswith("eval_") else _SECTIONS.get(name, "selfplay")
                self._writer.add_scalar(f"{section}/{name}", float(value), iteration)
            self._writer.flush()
        if self._progress is not None:
            self._console.print(format_line(iteration, self.total, metrics))
            self._progress.update(self._task, completed=iteration)

    def stop_progress(self) -> None:
        """Stop the live progress bar (it is drawn one last time)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def close(self) -> None:
        self.stop_progress()
        if self._writer is not None:
            try:
                self._writer.close()
            except OSError:
                pass  # a full disk: the events written so far stay
            self._writer = None
        if self._jsonl_fd is not None:
            os.close(self._jsonl_fd)
            self._jsonl_fd = None


def _write_json(path: str, data) -> None:
    """Write a JSON file whole or not at all (a full disk leaves the old one)."""
    _write_text(path, json.dumps(data, indent=2))


def _append_line(fd: int, path: str, line: str) -> None:
    """Append ``line`` to the file open as ``fd`` (``O_APPEND``); on failure cut the
    file back to its size before, so no partial line stays, and raise ``OSError``."""
    data = line.encode()
    size = os.fstat(fd).st_size
    try:
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
    except OSError as e:
        try:
            os.ftruncate(fd, size)
        except OSError:
            pass
        raise OSError(e.errno, f"cannot write {path}: {e.strerror or e}") from None


def _parse_lines(lines: list[str], path: str, strict: bool, dropped: list | None = None) -> list[dict]:
    """The records of ``lines``. A line that is not a JSON object: the last one is a
    partial write (skipped); elsewhere ``ValueError`` when ``strict``, else its number
    goes to ``dropped``."""
    records = []
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict):
            records.append(record)
            continue
        if i == last:
            continue  # a partial last line (a crash or a full disk while writing it)
        if strict:
            raise ValueError(f"{path}:{i + 1} is not a JSON record: {line[:80]!r}")
        if dropped is not None:
            dropped.append(i + 1)
    return records


def rewind_jsonl(path: str, iteration: int) -> list[int]:
    """Cut a ``metrics.jsonl`` back to the records of iterations ``<= iteration`` (and
    drop lines that are not JSON records, e.g. a partial last line), replacing the file
    atomically; nothing happens when it is already so. Returns the numbers of the
    dropped lines other than a partial last one (damage the caller should report)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    dropped: list[int] = []
    records = _parse_lines(text.split("\n"), path, strict=False, dropped=dropped)
    kept = [r for r in records if r.get("iteration", 0) <= iteration]
    new_text = "".join(json.dumps(r) + "\n" for r in kept)
    if new_text != text:
        _write_text(path, new_text)
    return dropped


def _write_text(path: str, text: str) -> None:
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise OSError(e.errno, f"cannot write {path}: {e.strerror or e}") from None


def read_jsonl(path: str) -> list[dict]:
    """The records of a ``metrics.jsonl`` file. A partial last line (a run killed or
    out of disk while writing it) is skipped; a bad line elsewhere raises ``ValueError``."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not UTF-8 text (byte {e.start}): not a metrics.jsonl file, or a damaged "
                         f"one") from None
    return _parse_lines(text.split("\n"), path, strict=True)
