"""The optimizer every algorithm uses: clipping, then AdamW on a warmup-cosine schedule (optax)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from beastybar_jax.config.schedule import decay_steps


def make_schedule(config, total_updates: int) -> optax.Schedule:
    """Linear warmup to ``learning_rate`` then cosine decay to ``learning_rate * final_learning_rate_fraction``.

    ``total_updates`` is the run's number of optimizer steps (used when ``decay_steps`` is 0)."""
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0 if config.warmup_steps > 0 else config.learning_rate,
        peak_value=config.learning_rate,
        warmup_steps=config.warmup_steps,
        decay_steps=decay_steps(config, total_updates),
        end_value=config.learning_rate * config.final_learning_rate_fraction,
    )


def global_norm(tree) -> jax.Array:
    """The L2 norm of all of ``tree``'s leaves together, as clipping computes it: over their
    concatenation, one reduction (a norm of each leaf is a kernel each on a GPU, ~50 for
    an afterstate network, in every update)."""
    flat = jnp.concatenate([jnp.ravel(leaf) for leaf in jax.tree.leaves(tree)])
    return jnp.sqrt(jnp.sum(jnp.square(flat)))


def make_optimizer(config, total_updates: int) -> optax.GradientTransformation:
    """Gradient clipping then AdamW on the schedule; weight decay on matrices only
    (not biases or LayerNorm scales). The clipping sees the gradients as one vector
    (``optax.flatten``: its norm one reduction, not one a leaf; it keeps no state)."""
    decay_mask = lambda params: jax.tree.map(lambda p: p.ndim > 1, params)  # noqa: E731
    return optax.chain(
        optax.flatten(optax.clip_by_global_norm(config.max_grad_norm)),
        optax.adamw(make_schedule(config, total_updates), weight_decay=config.weight_decay, mask=decay_mask),
    )


def scan_updates(update, carry, xs):
    """``jax.lax.scan`` of ``update(carry, x) -> (carry, metrics)``, a dict of scalars each
    step; returns ``(carry, each metric's mean over the steps)``. The metrics leave the loop
    as one vector, one write a step (a write a metric is a kernel each on a GPU)."""
    names = []

    def step(carry, x):
        carry, metrics = update(carry, x)
        names[:] = metrics  # their order, known once the step is traced
        return carry, jnp.stack([jnp.asarray(metrics[name], jnp.float32) for name in names])

    carry, stacked = jax.lax.scan(step, carry, xs)
    return carry, dict(zip(names, jnp.mean(stacked, axis=0)))
