"""What every learning algorithm builds on, below the algorithms. Import from the submodules:

- :mod:`~beastybar_jax.learning.algorithm`: the ``Algorithm`` record an algorithm package
  provides (as optax's ``GradientTransformation``), and the names of metrics it logs;
- :mod:`~beastybar_jax.learning.sharding`: one ``data`` mesh axis, batch-leading arrays split;
- :mod:`~beastybar_jax.learning.optimizer`: clipping, then AdamW on a warmup-cosine schedule.

The run that drives an algorithm (network, mesh, the loop, checkpoints, logs, evaluation)
is :mod:`beastybar_jax.training`, above the algorithms; their registry is
:mod:`beastybar_jax.algorithms`. This module imports nothing, so an algorithm importing one
piece (``sharding``) loads only that piece.
"""
