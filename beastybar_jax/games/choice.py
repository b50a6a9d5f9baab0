"""Random choices among moves, shared by every game's agents: ``uniform_choice`` and
``random_best`` (ties broken at random, within the reference baselines' tolerance)."""

import jax
import jax.numpy as jnp

TIE_TOLERANCE = 1e-6


def random_best(scores: jax.Array, mask: jax.Array, key: jax.Array, tolerance: float = TIE_TOLERANCE) -> jax.Array:
    """``int32[]`` a uniformly random choice among the legal actions of maximal score.

    Args:
      scores: ``float32[A]`` higher is better (values on illegal actions ignored).
      mask: ``bool[A]`` legal actions.
      key: breaks ties.
      tolerance: scores within this of the best count as tied; the default,
        1e-6, is the reference baselines' own. Their float64 scores carry
        rounding noise far below it; float32 scores must be computed so that
        equal moves score bit-equal (the heuristics snap theirs to an exact
        grid) or noise of ~1e-5 would decide between equal moves.

    With no legal action (a finished game) returns 0.
    """
    masked = jnp.where(mask, scores, -jnp.inf)
    best = mask & (masked >= jnp.max(masked) - tolerance)
    return uniform_choice(best, key)


def uniform_choice(mask: jax.Array, key: jax.Array) -> jax.Array:
    """``int32[]`` a uniformly random index where ``mask`` holds; 0 if none does."""
    logits = jnp.where(mask, 0.0, -jnp.inf)
    choice = jax.random.categorical(key, jnp.where(jnp.any(mask), logits, 0.0))
    return jnp.where(jnp.any(mask), choice, 0).astype(jnp.int32)
