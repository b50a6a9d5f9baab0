"""Data parallelism with ``jax.sharding``: one mesh axis, batch-leading arrays split along it.

Every algorithm keeps its games, records and buffers with the batch as the leading
axis and replicates parameters and optimizer state; XLA's SPMD partitioner then
splits the work and averages the gradients (losses are means over the global
batch). The global computation is the same for any number of devices. A loop that reads
or writes one entry per game (a search's walk through its trees) does it with
:mod:`beastybar_jax.per_game`, which stays on each device's games.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA_AXIS = "data"


def make_mesh(devices=None) -> Mesh:
    """A 1-D mesh over ``devices`` (default: all devices of all hosts), axis ``"data"``."""
    devices = jax.devices() if devices is None else devices
    return Mesh(np.asarray(devices), (DATA_AXIS,))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def split(mesh: Mesh) -> NamedSharding:
    """Leading axis split over the ``data`` axis."""
    return NamedSharding(mesh, P(DATA_AXIS))


def replicate_tree(tree: Any, mesh: Mesh) -> Any:
    return jax.tree.map(lambda _: replicated(mesh), tree)


def split_tree(tree: Any, mesh: Mesh) -> Any:
    return jax.tree.map(lambda _: split(mesh), tree)


def constrain_split(mesh: Mesh | None) -> Callable[[Any], Any]:
    """``tree -> tree`` pinning every leaf's leading axis to the ``data`` axis inside jit
    (the identity without a mesh)."""
    if mesh is None:
        return lambda tree: tree
    sharding = split(mesh)
    return lambda tree: jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, sharding), tree)
