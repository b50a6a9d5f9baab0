"""A replay buffer that lives on the device: a fixed-capacity ring of training positions.

Everything is a pure function of arrays with fixed shapes, so insertion and sampling
run inside the compiled training iteration. Insertion takes a batch of candidate
records with a validity mask (e.g. all positions of all games, valid only where a
game just ended): valid records are packed in order into the ring with a cumulative
sum, invalid ones are dropped by the scatter.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp


@chex.dataclass(frozen=True)
class Records:
    """Training positions; every field has the same leading axis ``[N]``.

    Attributes:
      observation: ``float32[N, O]`` what the player to move saw.
      legal_mask: ``bool[N, A]`` the legal actions.
      policy: ``float32[N, A]`` the search's policy target (zero on illegal actions).
      player: ``int8[N]`` the player to move.
      value: ``float32[N]`` the game's final outcome for ``player`` (+1, 0, -1).
      score_margin: ``float32[N]`` the final ``game.score_margin`` of ``player`` / ``game.score_margin_scale``.
      exact: ``bool[N]`` whether ``value`` (and, with exact policy targets, ``policy``) is
        the solver's exact target rather than the game's outcome and the search's policy.
    """

    observation: chex.Array
    legal_mask: chex.Array
    policy: chex.Array
    player: chex.Array
    value: chex.Array
    score_margin: chex.Array
    exact: chex.Array


@chex.dataclass(frozen=True)
class ReplayBuffer:
    """A ring of ``capacity`` records. Slots ``[0, size)`` hold data.

    Attributes:
      records: :class:`Records` with leading axis ``[capacity]``.
      write_index: ``int32[]`` where the next record goes.
      size: ``int32[]`` number of filled slots (saturates at capacity).
      total_inserted: ``int32[]`` records ever inserted (wraps at 2^31; a counter only).
    """

    records: Records
    write_index: chex.Array
    size: chex.Array
    total_inserted: chex.Array

    @property
    def capacity(self) -> int:
        return self.records.player.shape[0]


def empty_records(shape: tuple[int, ...], observation_size: int, num_actions: int) -> Records:
    """Zero-filled records with leading axes ``shape``."""
    return Records(
        observation=jnp.zeros(shape + (observation_size,), jnp.float32),
        legal_mask=jnp.zeros(shape + (num_actions,), bool),
        policy=jnp.zeros(shape + (num_actions,), jnp.float32),
        player=jnp.zeros(shape, jnp.int8),
        value=jnp.zeros(shape, jnp.float32),
        score_margin=jnp.zeros(shape, jnp.float32),
        exact=jnp.zeros(shape, bool),
    )


def init(capacity: int, observation_size: int, num_actions: int) -> ReplayBuffer:
    """An empty buffer of ``capacity`` positions."""
    return ReplayBuffer(
        records=empty_records((capacity,), observation_size, num_actions),
        write_index=jnp.zeros((), jnp.int32),
        size=jnp.zeros((), jnp.int32),
        total_inserted=jnp.zeros((), jnp.int32),
    )


def insert(buffer: ReplayBuffer, records: Records, valid: jax.Array, rank: jax.Array | None = None) -> ReplayBuffer:
    """Append the valid ones of ``records`` (``[M]``, mask ``valid: bool[M]``) in order: as
    they come, or (``rank``, ``int32[M]``: ``0 .. count - 1`` over the valid records, each
    once) in the order of their ranks.

    When more than ``capacity`` records are valid only the last ``capacity`` are kept,
    as a ring of that size would. Invalid records leave the buffer untouched.
    """
    capacity = buffer.capacity
    valid = valid.astype(bool)
    count = jnp.sum(valid, dtype=jnp.int32)
    if rank is None:
        rank = jnp.cumsum(valid, dtype=jnp.int32) - 1  # position among the valid records
    keep = valid & (rank >= count - capacity)
    slots = jnp.where(keep, (buffer.write_index + rank) % capacity, capacity)  # capacity = out of bounds: dropped
    new_records = jax.tree.map(
        lambda store, new: store.at[slots].set(new.astype(store.dtype), mode="drop"), buffer.records, records
    )
    return buffer.replace(
        records=new_records,
        write_index=(buffer.write_index + count) % capacity,
        size=jnp.minimum(buffer.size + count, capacity),
        total_inserted=buffer.total_inserted + count,
    )


def sample(buffer: ReplayBuffer, key: jax.Array, batch_size: int) -> Records:
    """``batch_size`` records drawn uniformly (with replacement) from the filled slots.

    An empty buffer returns copies of slot 0 (zeros); callers gate learning on ``size``.
    """
    indices = jax.random.randint(key, (batch_size,), 0, jnp.maximum(buffer.size, 1))
    return jax.tree.map(lambda store: store[indices], buffer.records)
