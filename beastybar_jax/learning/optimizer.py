"""The optimizer every algorithm uses: clipping, then AdamW on a warmup-cosine schedule (optax)."""

from __future__ import annotations

import jax
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


def make_optimizer(config, total_updates: int) -> optax.GradientTransformation:
    """Gradient clipping then AdamW on the schedule; weight decay on matrices only
    (not biases or LayerNorm scales)."""
    decay_mask = lambda params: jax.tree.map(lambda p: p.ndim > 1, params)  # noqa: E731
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adamw(make_schedule(config, total_updates), weight_decay=config.weight_decay, mask=decay_mask),
    )
