"""Run ``experiments/train.py`` (or ``$PAUSE_SCRIPT``; arguments as given) with a pause at
one chosen moment, so a test can send a signal or ``kill -9`` exactly there.

Environment:
  PAUSE_AT: where to pause:
    ``compile``: inside the training iteration's compile (in its thread; it lasts
      until the process ends);
    ``hook:N``: after iteration N ran, before its metrics line is written;
    ``save:N``: right after the save of checkpoint N started (orbax still writing);
    ``logged:N``: after iteration N's metrics line is written;
    ``call:MODULE:NAME:N``: before the N-th call of ``MODULE.NAME`` (any command line);
    ``import:MODULE``: when the command line first imports ``MODULE`` (its start-up).
  PAUSE_MARKER: a file written (with this process's pid) when the pause starts.
  PAUSE_STUCK: when set, a pause ignores signals (like a long compile or device call,
    during which Python runs no handler): only the command's watchdog can end it.
  PAUSE_SCRIPT: the command line to run (default experiments/train.py).

A pause in the main thread ends when the loop's (or the command's) handler has noted a
signal, or after ``PAUSE_LIMIT`` seconds (default 300).
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
    if os.environ.get("PAUSE_STUCK"):
        should_stop = lambda: False  # noqa: E731
    while time.monotonic() < deadline and not should_stop():
        time.sleep(0.02)


def install(spec: str) -> None:
    kind, _, number = spec.partition(":")
    at = int(number) if number.isdigit() else None
    if kind == "import":  # before anything here imports JAX
        class PauseOnImport:
            """A finder that finds nothing: it pauses the first import of ``number``."""

            def find_spec(self, name, path=None, target=None):
                if name == number:
                    sys.meta_path.remove(self)
                    pause()
                return None

        sys.meta_path.insert(0, PauseOnImport())
        return
    from beastybar_jax.training import loop as loop_module
    from beastybar_jax.checkpoint import Checkpointer
    from beastybar_jax.training.metrics import MetricsLogger

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
    elif kind == "call":
        import functools
        import importlib

        module_name, name, count = number.split(":")
        module = importlib.import_module(module_name)
        real_call, calls = getattr(module, name), []

        @functools.wraps(real_call)
        def call(*args, **kwargs):
            calls.append(1)
            if len(calls) == int(count):
                pause()
            return real_call(*args, **kwargs)

        setattr(module, name, call)
    else:
        raise SystemExit(f"PAUSE_AT: unknown place {spec!r}")


if __name__ == "__main__":
    install(os.environ["PAUSE_AT"])
    script = os.path.join(REPO_ROOT, os.environ.get("PAUSE_SCRIPT", os.path.join("experiments", "train.py")))
    sys.path.insert(0, os.path.dirname(script))
    sys.argv = [script, *sys.argv[1:]]
    runpy.run_path(script, run_name="__main__")
