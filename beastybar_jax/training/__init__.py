"""A training run, for any algorithm: above the algorithms, below the command lines.
Import from the submodules:

- :mod:`~beastybar_jax.training.trainer`: network, optimizer, mesh and the jitted init/iteration
  (``make_trainer``);
- :mod:`~beastybar_jax.training.preflight`: every check a run makes before it writes or compiles
  anything (``train.py --dry-run`` runs the same);
- :mod:`~beastybar_jax.training.loop`: ``TrainLoop``: set-up, iterations, progress, signals,
  checkpoints, hooks;
- :mod:`~beastybar_jax.training.metrics`: JSON lines (``read_jsonl``), TensorBoard and the console;
- :mod:`~beastybar_jax.training.evaluation`: matches against fixed opponents during training;
- :mod:`~beastybar_jax.training.interrupt`, :mod:`~beastybar_jax.training.rundir`,
  :mod:`~beastybar_jax.training.compilation`, :mod:`~beastybar_jax.training.distributed`,
  :mod:`~beastybar_jax.training.guards`, :mod:`~beastybar_jax.training.library_log`: signals,
  the run directory's lock, the compilation cache, several processes, the non-finite guard,
  library logs.

What the algorithms build on (the ``Algorithm`` record, sharding, the optimizer, metric
names) is :mod:`beastybar_jax.learning`, below them; checkpoints (``Checkpointer``,
``load_agent``) are :mod:`beastybar_jax.checkpoint`, below the agents that load them. This
module imports nothing, so a command line importing one piece (``interrupt``) loads only
that piece.
"""
