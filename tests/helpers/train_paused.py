"""Run ``experiments/train.py`` (arguments as given) with a pause at one chosen moment,
so a test can send a signal or ``kill -9`` exactly there.

Environment:
  PAUSE_AT: where to pause:
    ``compile``: inside the training iteration's compile (in its thread; it lasts
      until the process ends);
    ``hook:N``: after iteration N ran, before its metrics line is written;
    ``save:N``: right after the save of checkpoint N started (orbax still writing);
    ``logged:N``: after iteration N's metrics line is written.
  PAUSE_MARKER: a file written (with this process's pid) when the pause starts.

A pause in the main thread ends when the loop's handler has noted a signal, or after
``PAUSE_LIMIT`` seconds (default 300).
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def stop_requested() -> bool:
    """Whether the loop's SIGINT/SIGTERM handler (a ``StopRequest`` method) noted a signal."""
    handler = signal.getsignal(signal.SIGINT)
    return bool(getattr(getattr(handler, "__self__", None), "requested", False))


def pause(should_stop=stop_requested) -> None:
    marker = os.environ["PAUSE_MARKER"]
    with open(marker + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(marker + ".tmp", marker)
    deadline = time.monotonic() + float(os.environ.get("PAUSE_LIMIT", "300"))
    while time.monotonic() < deadline and not should_stop():
        time.sleep(0.02)


def install(spec: str) -> None:
    from beastybar_jax.training import loop as loop_module
    from beastybar_jax.checkpoint import Checkpointer
    from beastybar_jax.training.metrics import MetricsLogger

    kind, _, number = spec.partition(":")
    at = int(number) if number else None
    if kind == "compile":
        real = loop_module.compile_in_thread

        class SlowLowered:
            def __init__(self, lowered):
                self.lowered = lowered

            def compile(self):
                pause(lambda: False)  # in the compile's thread: the process ends around it
                return self.lowered.compile()

        loop_module.compile_in_thread = lambda lowered, check: real(SlowLowered(lowered), check)
    elif kind == "hook":
        real_hooks = loop_module.TrainLoop.on_iteration_end

        def on_iteration_end(self, iteration, metrics):
            if iteration == at:
                pause()
            return real_hooks(self, iteration, metrics)

        loop_module.TrainLoop.on_iteration_end = on_iteration_end
    elif kind == "save":
        real_save = Checkpointer.save

        def save(self, step, *args, **kwargs):
            saved = real_save(self, step, *args, **kwargs)
            if step == at:
                pause()
            return saved

        Checkpointer.save = save
    elif kind == "logged":
        real_log = MetricsLogger.log

        def log(self, iteration, metrics):
            real_log(self, iteration, metrics)
            if iteration == at:
                pause()

        MetricsLogger.log = log
    else:
        raise SystemExit(f"PAUSE_AT: unknown place {spec!r}")


if __name__ == "__main__":
    install(os.environ["PAUSE_AT"])
    train = os.path.join(REPO_ROOT, "experiments", "train.py")
    sys.argv = [train, *sys.argv[1:]]
    runpy.run_path(train, run_name="__main__")
