"""AlphaZero: self-play with mctx search, a device replay buffer and SGD on search targets.

- :mod:`~beastybar_jax.config.alphazero`: the ``alphazero:`` config section;
- :mod:`~beastybar_jax.alphazero.selfplay`: B games advanced with search, auto-reset, value labels,
  the finished games into the buffer;
- :mod:`~beastybar_jax.alphazero.exact_targets`: the solver's value and policy targets, a
  transform of the played records before they enter the buffer;
- :mod:`~beastybar_jax.alphazero.replay`: the device ring buffer;
- :mod:`~beastybar_jax.alphazero.loss`: policy cross-entropy + value (+ score-margin) loss;
- :mod:`~beastybar_jax.alphazero.algorithm`: the train state and the one jitted iteration.

This module imports nothing, so configuration code can import the config section alone.
"""
