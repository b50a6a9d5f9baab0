"""The shared training room: what every algorithm uses.

- :mod:`~beastybar_jax.training.algorithm`: the ``Algorithm`` record an algorithm package provides;
- :mod:`~beastybar_jax.training.trainer`: network, optimizer, mesh and the jitted init/iteration;
- :mod:`~beastybar_jax.training.loop`: ``TrainLoop``: iterations, progress, signals, checkpoints, hooks;
- :mod:`~beastybar_jax.training.checkpoint`: orbax checkpoints and ``load_agent``;
- :mod:`~beastybar_jax.training.metrics`: JSON lines, TensorBoard and the console;
- :mod:`~beastybar_jax.training.evaluation`: matches against fixed opponents during training;
- :mod:`~beastybar_jax.training.interrupt`, :mod:`~beastybar_jax.training.rundir`,
  :mod:`~beastybar_jax.training.compilation`: signals, the run directory's lock, the
  compilation cache;
- :mod:`~beastybar_jax.training.sharding`, :mod:`~beastybar_jax.training.optimizer`.

The names below are loaded on first use, so importing one submodule (the agents
registry needs only ``checkpoint``) does not load the loop and the evaluation hook.
"""

import importlib

_EXPORTS = {
    "CheckpointError": "checkpoint", "Checkpointer": "checkpoint", "TrainedModel": "checkpoint",
    "DamagedCheckpointWarning": "checkpoint", "load_agent": "checkpoint",
    "enable_compilation_cache": "compilation", "Interrupted": "interrupt",
    "RunDirError": "rundir", "RunLockedError": "rundir",
    "IterationHook": "loop", "TrainLoop": "loop", "train": "loop",
    "MetricsLogger": "metrics", "read_jsonl": "metrics",
    "make_mesh": "sharding",
    "Trainer": "trainer", "abstract_state": "trainer", "iteration_key": "trainer", "make_trainer": "trainer",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
