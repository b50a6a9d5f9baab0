"""PPO: rollouts of the policy network against a mixture of opponents, GAE and clipped
policy-gradient updates, all in one compiled iteration.

- :mod:`~beastybar_jax.config.ppo`: the ``ppo:`` config section and the opponent mixture;
- :mod:`~beastybar_jax.ppo.rollout`: B games advanced T moves, auto-reset, the learner's
  seat against self-play, past snapshots or registry agents;
- :mod:`~beastybar_jax.ppo.loss`: generalized advantage estimation along each seat's own
  decisions, clipped policy loss, value loss, entropy bonus;
- :mod:`~beastybar_jax.ppo.algorithm`: the train state and the one jitted iteration.

This module imports nothing, so configuration code can import the config section alone.
"""
