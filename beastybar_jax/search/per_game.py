"""Per-game reads and writes of batch-leading arrays ``[B, ...]``, for loops over a batch
of games (a search's walks through its trees, self-play's records).

``x[jnp.arange(B), i]`` is a gather whose batch index XLA's SPMD partitioner cannot tell
from any other: with the games split over devices (``learning.sharding``) it all-gathers
the indices and all-reduces the result, a collective per read in every step of a loop. A
``jax.vmap`` of the per-game read is a gather with batching dimensions, which stays on each
device's own games. On one device the two compile to the same gather.
"""

from __future__ import annotations

import jax


def take_each(x: jax.Array, *index: jax.Array) -> jax.Array:
    """``x[b, index[0][b], index[1][b], ...]`` for each game ``b`` of ``x``'s leading axis."""
    return jax.vmap(lambda row, *i: row[i])(x, *index)


def set_each(x: jax.Array, value: jax.Array, *index: jax.Array, mode: str | None = None) -> jax.Array:
    """``x`` with ``x[b, index[0][b], ...] = value[b]`` for each game ``b`` (``mode`` as in
    ``x.at[...].set``: ``"drop"`` skips an index out of range)."""
    return jax.vmap(lambda row, v, *i: row.at[i].set(v, mode=mode))(x, value, *index)


def split_each(keys: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``jax.random.split`` of each game's key ``[B]``: ``(new keys [B], subkeys [B])``."""
    pairs = jax.vmap(jax.random.split)(keys)
    return pairs[:, 0], pairs[:, 1]
