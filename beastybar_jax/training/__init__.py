"""The shared training room: what every algorithm uses. Import from the submodules:

- :mod:`~beastybar_jax.training.algorithm`: the ``Algorithm`` record an algorithm package
  provides (the registry of algorithms, ``get_algorithm``, is :mod:`beastybar_jax.algorithms`);
- :mod:`~beastybar_jax.training.trainer`: network, optimizer, mesh and the jitted init/iteration
  (``make_trainer``);
- :mod:`~beastybar_jax.training.loop`: ``TrainLoop``: iterations, progress, signals, checkpoints, hooks;
- :mod:`~beastybar_jax.training.metrics`: JSON lines (``read_jsonl``), TensorBoard and the console;
- :mod:`~beastybar_jax.training.evaluation`: matches against fixed opponents during training;
- :mod:`~beastybar_jax.training.interrupt`, :mod:`~beastybar_jax.training.rundir`,
  :mod:`~beastybar_jax.training.compilation`: signals, the run directory's lock, the
  compilation cache;
- :mod:`~beastybar_jax.training.sharding`, :mod:`~beastybar_jax.training.optimizer`.

Checkpoints (``Checkpointer``, ``load_agent``) are :mod:`beastybar_jax.checkpoint`, below
the agents that load them. This module imports nothing, so an algorithm importing a
shared piece (``sharding``) loads only that piece.
"""
