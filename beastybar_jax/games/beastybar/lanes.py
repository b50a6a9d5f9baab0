"""Reductions over the few lanes of the engine's small arrays, written out lane by lane.

Under ``vmap``, ``jnp.sum(x, axis=-1)`` over a queue's 5 slots becomes a ``reduce`` of
``[B, 5]`` to ``[B]``, and on a GPU every ``reduce`` ends a kernel: the engine's ``step``
compiled to 34 kernels at 4,096 games, 22 of them the recurring phase's 11 visits.
Written as a chain of slices and elementwise operations, the same reduction is
elementwise in ``B``, and XLA fuses a whole step into a few kernels. The results are
the same values (integer and boolean reductions; a float sum adds in lane order).

XLA:CPU is the other way round: it duplicates cheap producers into every fusion that
reads them, and a step written lane by lane ran 130 times slower there. And the
written-out form makes a larger program, slower to compile for a GPU too. So the lanes
are written out where a function is traced for a GPU inside a hot loop's body
(:mod:`beastybar_jax.games.tracing`: the search's simulations, the endgame solver's
iterations, PPO's rollout steps, the learners' updates), and ``jnp``'s reductions are
used everywhere else.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from beastybar_jax.games.tracing import in_hot_loop, traced_for_gpu


def lanes_written_out() -> bool:
    """Whether lanes traced now are written out (see the module docstring)."""
    return traced_for_gpu() and in_hot_loop()


def _lanes(x, axis: int):
    x = jnp.asarray(x)
    axis = axis % x.ndim
    return [jax.lax.index_in_dim(x, i, axis, keepdims=False) for i in range(x.shape[axis])]


def lane_sum(x, axis: int = -1):
    """``jnp.sum(x, axis)`` (booleans count as ``int32``)."""
    if not lanes_written_out():
        return jnp.sum(x, axis=axis, dtype=jnp.int32 if jnp.asarray(x).dtype == jnp.bool_ else None)
    lanes = _lanes(x, axis)
    if lanes[0].dtype == jnp.bool_:
        lanes = [lane.astype(jnp.int32) for lane in lanes]
    return functools.reduce(jnp.add, lanes)


def lane_any(x, axis: int = -1):
    """``jnp.any(x, axis)``."""
    if not lanes_written_out():
        return jnp.any(x, axis=axis)
    return functools.reduce(jnp.logical_or, _lanes(x, axis))


def lane_max(x, axis: int = -1):
    """``jnp.max(x, axis)``."""
    if not lanes_written_out():
        return jnp.max(x, axis=axis)
    return functools.reduce(jnp.maximum, _lanes(x, axis))


def lane_count(mask) -> jax.Array:
    """``int32`` number of True entries of a small boolean array, all axes."""
    return lane_sum(jnp.ravel(mask))
