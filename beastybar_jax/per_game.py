"""Per-game reads and writes of batch-leading arrays ``[B, ...]``, for loops over a batch
of games (a search's walks through its trees, self-play's records).

``x[jnp.arange(B), i]`` is a gather whose batch index XLA's SPMD partitioner cannot tell
from any other: with the games split over devices (``learning.sharding``) it all-gathers
the indices and all-reduces the result, a collective per read in every step of a loop. A
``jax.vmap`` of the per-game read is a gather with batching dimensions, which stays on each
device's own games. On one device the two compile to the same gather. :func:`on_each_device`
keeps a kernel that XLA cannot see into (a Pallas kernel) on each device's own games too.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np


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


def on_each_device(fn: Callable[..., Any], *games: jax.Array, shared: Sequence[jax.Array] = ()) -> Any:
    """``fn(*games, *shared)`` for a kernel whose every game's results depend on that game's
    rows only (a Pallas kernel over a batch): ``games`` and the results (an array or a
    tuple of arrays) lead with the batch axis ``[B, ...]``, ``shared`` are read whole (weights).

    XLA's SPMD partitioner cannot look inside a custom call such as a Pallas kernel: with the
    games split over devices it would gather every device's games onto each and run the
    whole batch everywhere. Here the kernel tells it (``custom_partitioning``, a Shardy
    rule) that each device runs ``fn`` on its own games. On one device JAX inlines ``fn``
    unchanged. Under ``jax.vmap`` the mapped axis joins the games (one call on ``[V * B,
    ...]``: split games stay split where the mapped axis is the split one), or, where
    ``shared`` is mapped, ``fn`` is vmapped as it is. Not differentiable: where a program
    is (the learners'), no tangent may reach its arguments (the engine's are integers).

    Over several devices the program names the kernel by a callback of this process, which
    is all JAX's persistent compilation cache would see of it: so the kernel's own program
    (a hash of its jaxpr) goes in as one more replicated operand, and a cached program is
    only ever one with this very kernel.
    """
    from jax.custom_batching import custom_vmap

    num_games = len(games)
    partitioned = _partitioned(fn, num_games)

    @custom_vmap
    def call(*arrays):
        return partitioned(*arrays, _kernel_hash(fn, arrays))

    @call.def_vmap
    def call_mapped(axis_size, in_batched, *arrays):
        if any(in_batched[num_games:]):  # weights that differ along the mapped axis
            axes = [0 if batched else None for batched in in_batched]
            out = jax.vmap(fn, in_axes=axes)(*arrays)
            return out, jax.tree.map(lambda _: True, out)
        # The mapped axis joins the games: [V, B, ...] -> [V * B, ...] and back.
        merged = [jnp.broadcast_to(x, (axis_size,) + x.shape) if not batched else x
                  for x, batched in zip(arrays[:num_games], in_batched)]
        merged = [x.reshape((-1,) + x.shape[2:]) for x in merged]
        out = on_each_device(fn, *merged, shared=arrays[num_games:])
        num = arrays[in_batched.index(True)].shape[1]  # games a mapped call (the batch may be empty)
        out = jax.tree.map(lambda x: x.reshape((axis_size, num) + x.shape[1:]), out)
        return out, jax.tree.map(lambda _: True, out)

    return call(*games, *shared)


def _kernel_hash(fn: Callable[..., Any], arrays: Sequence[jax.Array]) -> jax.Array:
    """``uint32[4]``: a hash of ``fn``'s jaxpr on ``arrays``' shapes (a constant). Zeros where
    JAX has one device: the program is then never split, JAX inlines ``fn`` and the program
    holds the kernel itself (tracing ``fn`` again here cost ~1 s of an ``h100.yaml`` iteration's 16)."""
    if jax.device_count() == 1:
        return jnp.zeros(4, jnp.uint32)
    shapes = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in arrays]
    digest = hashlib.sha256(str(jax.make_jaxpr(fn)(*shapes)).encode()).digest()[:16]
    return jnp.asarray(np.frombuffer(digest, np.uint32))


def _partitioned(fn: Callable[..., Any], num_games: int) -> Callable[..., Any]:
    """``fn`` as a ``custom_partitioning`` function of ``(*arrays, kernel hash)`` whose first
    ``num_games`` arguments and every result are split along their leading axis, the rest
    replicated."""
    from jax.experimental.custom_partitioning import custom_partitioning
    from jax.sharding import NamedSharding, PartitionSpec

    arrays_only = lambda *arrays: fn(*arrays[:-1])  # noqa: E731  (custom_partitioning reads fn's signature)
    kernel = custom_partitioning(arrays_only)

    def batch_axis(arg_shapes):  # the mesh axes the first split game input is split along
        leading = (shape.sharding.spec[0] if len(shape.sharding.spec) else None for shape in arg_shapes[:num_games])
        return next((axis for axis in leading if axis is not None), None)

    def result_shardings(mesh, axis, result_shape):
        return jax.tree.map(lambda _: NamedSharding(mesh, PartitionSpec(axis)), result_shape)

    def infer(mesh, arg_shapes, result_shape):
        return result_shardings(mesh, batch_axis(arg_shapes), result_shape)

    def partition(mesh, arg_shapes, result_shape):
        axis = batch_axis(arg_shapes)
        args = tuple(NamedSharding(mesh, PartitionSpec(axis) if i < num_games else PartitionSpec())
                     for i in range(len(arg_shapes)))
        return mesh, arrays_only, result_shardings(mesh, axis, result_shape), args

    def rule(mesh, value_types, result_types):
        def operand(prefix, ndim, batched):
            return " ".join((["b"] if batched else []) + [f"{prefix}{d}" for d in range(int(batched), ndim)])
        ins = [operand(f"i{k}_", len(t.shape), k < num_games) for k, t in enumerate(value_types)]
        outs = [operand(f"o{k}_", len(t.shape), True) for k, t in enumerate(result_types)]
        return ", ".join(ins) + " -> " + ", ".join(outs)

    kernel.def_partition(partition, infer_sharding_from_operands=infer, sharding_rule=rule)
    return kernel
