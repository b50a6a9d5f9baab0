"""mctx's search loop with no host round trip inside a simulation.

mctx (0.0.71) walks each tree down and back up with ``lax.while_loop``s whose trip
count is the depth of the deepest new leaf in the batch. On a GPU XLA's runtime
copies such a loop's predicate to the host and waits for the device at every
iteration (``WhileThunk``): ~25 us of an idle GPU per tree level, twice per
simulation. This loop keeps mctx's semantics (the same trees, actions and weights)
with a fixed amount of device work per simulation:

* **Cached interior choices.** mctx's interior selection rules (Gumbel's and PUCT's)
  depend only on the node's own row: its visits and values, its children's prior,
  visits, values, rewards and discounts. A simulation changes the rows of the nodes
  on its path and of the new leaf, and nothing else. So each node keeps the action
  the interior rule picks there (``links[..., SELECTED]``) and the child it leads to
  (``links[..., NEXT]``), recomputed for those rows after each simulation, and the
  walk down is pointer chasing: ``node = next[node]``, a static number of steps
  (``max_depth``) with the finished walks idling. On a GPU both the walk and the
  recomputation (Gumbel's rule) are Pallas kernels (:func:`walk_pallas`,
  :mod:`beastybar_jax.search.choice_kernel`) that loop on the device.
* **A closed-form backup.** The walk records its path (``[B, max_depth]``), so the
  backup is a static recurrence over it and one scatter of the new node rows, with
  mctx's arithmetic in mctx's order.
* **A packed tree.** A node is one row of statistics (visits, raw value, value, and
  the reward and discount of the edge into it), one row of links and its children's
  indices and prior logits; a child's visits, value, reward and discount are read
  from the child's own row instead of being stored again in its parent (mctx's
  ``children_visits`` / ``children_values`` / ``children_rewards`` /
  ``children_discounts`` always equal them). The state is packed into one byte row.
  An expansion is five scatters.

The root rule runs once per simulation on the root row, as in mctx; Gumbel's (which
draws no random numbers) runs in the choice kernel with the path's rows, at the end of
the previous simulation, and the walk starts from the root's cached choice. The interior
rule's random key (PUCT's 1e-7 tie-breaking noise) is drawn when the row is
recomputed rather than when it is visited: the same distribution, other draws.

:func:`search` returns mctx's own :class:`mctx.Tree`, unpacked once after the last
simulation, so mctx's policies (``gumbel_muzero_policy``, ``muzero_policy``) and
everything that reads their trees work unchanged.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple, Optional

import chex
import jax
import jax.numpy as jnp
import numpy as np
from mctx._src import base
from mctx._src import tree as tree_lib

from beastybar_jax.per_game import on_each_device, set_each, split_each, take_each
from beastybar_jax.search import choice_kernel

Tree = tree_lib.Tree

# Columns of PackedTree.stats.
VISITS, RAW_VALUE, VALUE, REWARD, DISCOUNT = range(5)
NUM_STATS = 5
STAT_COLUMNS = choice_kernel.StatColumns(VISITS, RAW_VALUE, VALUE, REWARD, DISCOUNT)
# Columns of PackedTree.links.
PARENT, ACTION, SELECTED, NEXT = range(4)
NUM_LINKS = 4


@chex.dataclass(frozen=True)
class PackedTree:
    """``B`` search trees of ``N + 1`` nodes over ``A`` actions, packed.

    Attributes:
      stats: ``float[B, N+1, 5]`` per node: visits, raw value (the evaluator's),
        value (the running mean), and the reward and discount of the edge from its
        parent into it. Visits are stored as floats (exact below 2**24).
      links: ``int32[B, N+1, 4]`` per node: parent, action from the parent, the
        action the interior rule picks there, and the child that action leads to
        (``Tree.UNVISITED`` if none yet).
      children_index: ``int32[B, N+1, A]`` each child's node index or ``Tree.UNVISITED``.
      children_prior_logits: ``float[B, N+1, A]``.
      embeddings: ``uint8[B, N+1, S]`` each node's state packed into ``S`` bytes
        (:class:`StatePacker`).
      root_invalid_actions: ``[B, A]``.
      extra_data: the policy's extra data (Gumbel's ``root_gumbel``).
    """

    stats: chex.Array
    links: chex.Array
    children_index: chex.Array
    children_prior_logits: chex.Array
    embeddings: chex.Array
    root_invalid_actions: chex.Array
    extra_data: Any


class StatePacker(NamedTuple):
    """Packs a pytree of ``[B, ...]`` arrays into one ``uint8[B, S]`` row per element and
    back, bit for bit (bools as one byte, wider types as their bytes)."""

    treedef: Any
    shapes: tuple  # per leaf, without the batch axis
    dtypes: tuple
    sizes: tuple  # bytes per leaf

    @classmethod
    def of(cls, batched) -> "StatePacker":
        leaves, treedef = jax.tree.flatten(batched)
        shapes = tuple(tuple(x.shape[1:]) for x in leaves)
        dtypes = tuple(jnp.dtype(x.dtype) for x in leaves)
        sizes = tuple(int(np.prod(s, dtype=np.int64)) * (1 if d == jnp.bool_ else d.itemsize)
                      for s, d in zip(shapes, dtypes))
        return cls(treedef, shapes, dtypes, sizes)

    @property
    def num_bytes(self) -> int:
        return sum(self.sizes)

    def pack(self, batched) -> jax.Array:
        rows = []
        for x in jax.tree.leaves(batched):
            x = x.reshape(x.shape[0], -1)
            if x.dtype == jnp.bool_:
                rows.append(x.astype(jnp.uint8))
            else:
                rows.append(jax.lax.bitcast_convert_type(x, jnp.uint8).reshape(x.shape[0], -1))
        return jnp.concatenate(rows, axis=1) if len(rows) > 1 else rows[0]

    def unpack(self, rows: jax.Array):
        leaves, start = [], 0
        lead = rows.shape[:-1]
        for shape, dtype, size in zip(self.shapes, self.dtypes, self.sizes):
            chunk = rows[..., start:start + size]
            start += size
            if dtype == jnp.bool_:
                leaves.append((chunk != 0).reshape(lead + shape))
            elif dtype.itemsize == 1:
                leaves.append(jax.lax.bitcast_convert_type(chunk, dtype).reshape(lead + shape))
            else:
                chunk = chunk.reshape(lead + (-1, dtype.itemsize))
                leaves.append(jax.lax.bitcast_convert_type(chunk, dtype).reshape(lead + shape))
        return jax.tree.unflatten(self.treedef, leaves)


def _take_rows(array: chex.Array, index: chex.Array) -> chex.Array:
    """``array[b, index[b, ...]]`` for ``array [B, M, ...]`` and ``index [B, ...]``
    (indices clamped into range: padded entries read a real row, results unused)."""
    return take_each(array, jnp.clip(index, 0, array.shape[1] - 1))


def _node_view(own_stats, children_index, children_stats, prior_logits, root_invalid_actions, extra_data) -> Tree:
    """One node's row as an unbatched one-node mctx :class:`Tree` (the node is index 0),
    for mctx's selection functions. Children that do not exist read zeros, as mctx
    initialises them."""
    visited = children_index >= 0
    child = jnp.where(visited[:, None], children_stats, 0)
    one = lambda x: x[None]
    return Tree(
        node_visits=one(own_stats[VISITS].astype(jnp.int32)),
        raw_values=one(own_stats[RAW_VALUE]),
        node_values=one(own_stats[VALUE]),
        parents=jnp.zeros((1,), jnp.int32),
        action_from_parent=jnp.zeros((1,), jnp.int32),
        children_index=one(children_index),
        children_prior_logits=one(prior_logits),
        children_visits=one(child[:, VISITS].astype(jnp.int32)),
        children_rewards=one(child[:, REWARD]),
        children_discounts=one(child[:, DISCOUNT]),
        children_values=one(child[:, VALUE]),
        embeddings=jnp.zeros((1,), jnp.int32),
        root_invalid_actions=root_invalid_actions,
        extra_data=extra_data,
    )


def _views(tree: PackedTree, rows: chex.Array):
    """The arguments of :func:`_node_view` for the nodes ``rows [B, R]``."""
    children_index = _take_rows(tree.children_index, rows)  # [B, R, A]
    return (_take_rows(tree.stats, rows), children_index, _take_rows(tree.stats, jnp.maximum(children_index, 0)),
            _take_rows(tree.children_prior_logits, rows))


def instantiate(root: base.RootFnOutput, num_simulations: int, root_invalid_actions: chex.Array,
                extra_data: Any, packer: StatePacker) -> PackedTree:
    """The packed tree with only its root evaluated (mctx's ``instantiate_tree_from_root``)."""
    batch_size, num_actions = root.prior_logits.shape
    num_nodes = num_simulations + 1
    dtype = root.value.dtype
    if dtype not in (jnp.float32, jnp.float64):
        raise ValueError(f"the search keeps visit counts beside the values, so root.value must be float32 or "
                         f"float64, got {dtype}: cast the evaluator's values (e.g. value.astype(jnp.float32))")
    stats = jnp.zeros((batch_size, num_nodes, NUM_STATS), dtype)
    root_stats = jnp.stack([jnp.ones_like(root.value), root.value, root.value,
                            jnp.zeros_like(root.value), jnp.zeros_like(root.value)], axis=-1)
    stats = stats.at[:, Tree.ROOT_INDEX].set(root_stats)
    links = jnp.broadcast_to(jnp.asarray([Tree.NO_PARENT, Tree.NO_PARENT, 0, Tree.UNVISITED], jnp.int32),
                             (batch_size, num_nodes, NUM_LINKS))
    prior = jnp.zeros((batch_size, num_nodes, num_actions), root.prior_logits.dtype)
    embeddings = jnp.zeros((batch_size, num_nodes, packer.num_bytes), jnp.uint8)
    return PackedTree(
        stats=stats,
        links=links,
        children_index=jnp.full((batch_size, num_nodes, num_actions), Tree.UNVISITED, jnp.int32),
        children_prior_logits=prior.at[:, Tree.ROOT_INDEX].set(root.prior_logits),
        embeddings=embeddings.at[:, Tree.ROOT_INDEX].set(packer.pack(root.embedding)),
        root_invalid_actions=root_invalid_actions,
        extra_data=extra_data,
    )


def walk(links: chex.Array, first: Optional[chex.Array], root_action: Optional[chex.Array], max_depth: int):
    """Follows the cached choices down from the root's child ``first [B]``, reached by
    ``root_action [B]`` (both ``None``: the root's own cached choice in ``links``).

    mctx's walk with ``max_depth``: one step below the root per iteration while the
    next node exists and the depth stays below ``max_depth``; ``max_depth - 1`` static
    steps, finished walks idling. Returns ``(path int32[B, max_depth], parent [B],
    action [B], parent_depth [B])``: the nodes walked through, root first (``N + 1``,
    out of range, past the parent), and the unvisited (or depth-capped) edge to expand.
    """
    batch_size, num_nodes = links.shape[:2]
    if first is None:
        first, root_action = links[:, Tree.ROOT_INDEX, NEXT], links[:, Tree.ROOT_INDEX, SELECTED]
    no_node = jnp.full((batch_size,), num_nodes, jnp.int32)
    node = jnp.full((batch_size,), Tree.ROOT_INDEX, jnp.int32)
    next_node = first
    depth = jnp.zeros((batch_size,), jnp.int32)
    continuing = (first != Tree.UNVISITED) & (1 < max_depth)
    path = [node]
    for step in range(1, max_depth):
        node = jnp.where(continuing, next_node, node)
        depth = jnp.where(continuing, step, depth)
        path.append(jnp.where(continuing, next_node, no_node))
        next_node = take_each(links, node)[:, NEXT]  # one links row per game: no copy of the column
        continuing = continuing & (next_node != Tree.UNVISITED) & (step + 1 < max_depth)
    action = jnp.where(node == Tree.ROOT_INDEX, root_action, take_each(links, node)[:, SELECTED])
    return jnp.stack(path, axis=1), node, action, depth


def backup_rows(path_stats: chex.Array, parent_depth: chex.Array, leaf_stats: chex.Array) -> chex.Array:
    """mctx's backward as new statistics rows for the path, ``[B, D, 5]``.

    ``path_stats [B, D, 5]``: the rows of the path's nodes, root first; ``leaf_stats
    [B, 5]``: the expanded leaf's row. Walks from the leaf's parent (at
    ``parent_depth``) up to the root with mctx's arithmetic in mctx's order: the
    backed-up value becomes ``reward + discount * value`` across each edge, and the
    node's value the running mean ``(value * visits + backed_up) / (visits + 1)``.
    Rows below the parent come back unchanged.
    """
    depth_limit = path_stats.shape[1]
    below = jnp.arange(depth_limit)[None, :] <= parent_depth[:, None]  # [B, D]: on the path
    at_parent = jnp.arange(depth_limit)[None, :] == parent_depth[:, None]
    # The edge into each path node's child: the next path node's, or the leaf's at the parent.
    shifted = jnp.concatenate([path_stats[:, 1:], leaf_stats[:, None]], axis=1)
    child_reward = jnp.where(at_parent, leaf_stats[:, None, REWARD], shifted[..., REWARD])
    child_discount = jnp.where(at_parent, leaf_stats[:, None, DISCOUNT], shifted[..., DISCOUNT])
    backed_up, value = [None] * depth_limit, leaf_stats[:, VALUE]
    for k in reversed(range(depth_limit)):  # elementwise over [B]: one fused chain
        value = jnp.where(below[:, k], child_reward[:, k] + child_discount[:, k] * value, value)
        backed_up[k] = value
    backed_up = jnp.stack(backed_up, axis=1)
    visits, values = path_stats[..., VISITS], path_stats[..., VALUE]
    new_values = jnp.where(below, (values * visits + backed_up) / (visits + 1.0), values)
    new_visits = jnp.where(below, visits + 1, visits)
    return jnp.stack([new_visits, path_stats[..., RAW_VALUE], new_values, path_stats[..., REWARD],
                      path_stats[..., DISCOUNT]], axis=-1)


def simulate_once(params, sim, simulate_key, expand_key, tree: PackedTree, *, recurrent_fn,
                  root_action_selection_fn, interior_action_selection_fn, max_depth: int,
                  packer: StatePacker, kernels: str = "auto") -> PackedTree:
    """One simulation for each of the ``B`` trees: root rule, cached walk, expansion,
    backup and the cached choices of the rows that changed. ``simulate_key`` and
    ``expand_key`` are mctx's keys of this simulation; ``kernels``: :data:`KERNELS`.
    Where the choice kernel takes Gumbel's root rule, the walk starts from the root's
    cached choice: :func:`search` writes the first one (:func:`with_root_choice`)."""
    kernels = _resolve(kernels)
    batch_size = tree.stats.shape[0]
    interior_key = jax.random.fold_in(simulate_key, 1)
    root_rule = _cached_root_rule(tree, root_action_selection_fn, interior_action_selection_fn, kernels)

    if root_rule is None:  # the root rule, fresh each simulation (mctx's keys: a split of each game's key)
        with jax.named_scope("root_rule"):
            root_action, first = root_choice(tree, simulate_key, root_action_selection_fn)
    else:  # cached in the root's row by the last simulation's choice kernel (or by search before the first)
        root_action = first = None

    with jax.named_scope("walk"):
        path, parent, action, parent_depth = _walk(tree.links, first, root_action, max_depth, kernels)

    # Expand: a new node, or the existing child when the walk stopped at max_depth.
    with jax.named_scope("expand"):
        existing = take_each(tree.children_index, parent, action)
        leaf = jnp.where(existing == Tree.UNVISITED, sim + 1, existing).astype(jnp.int32)
        parent_state = packer.unpack(take_each(tree.embeddings, parent))
        step, child_state = recurrent_fn(params, expand_key, action, parent_state)
        chex.assert_shape(step.prior_logits, (batch_size, tree.children_index.shape[-1]))
        dtype = tree.stats.dtype
        leaf_stats = jnp.stack([take_each(tree.stats, leaf)[:, VISITS] + 1, step.value.astype(dtype),
                                step.value.astype(dtype), step.reward.astype(dtype), step.discount.astype(dtype)],
                               axis=-1)

    # Back up through the path and write the changed rows: the path's and the leaf's.
    with jax.named_scope("backup"):
        path_stats = _take_rows(tree.stats, path)
        new_rows = jnp.concatenate([backup_rows(path_stats, parent_depth, leaf_stats), leaf_stats[:, None]], axis=1)
        changed = jnp.concatenate([path, leaf[:, None]], axis=1)  # [B, D + 1], out-of-range entries dropped
        tree = tree.replace(
            stats=set_each(tree.stats, new_rows, changed, mode="drop"),
            children_index=set_each(tree.children_index, leaf, parent, action),
            children_prior_logits=set_each(tree.children_prior_logits,
                                           step.prior_logits.astype(tree.children_prior_logits.dtype), leaf),
            embeddings=set_each(tree.embeddings, packer.pack(child_state), leaf),
        )

    # Recompute the cached interior choice of every changed row below the root (and the
    # root's own for the next simulation where the choice kernel takes the root rule too).
    with jax.named_scope("cached_choices"):
        if root_rule is None:
            rows = changed[:, 1:]  # [B, D]: the path below the root, then the leaf
            selected, next_node = _interior_choices(tree, rows, parent_depth, interior_key,
                                                    interior_action_selection_fn, kernels)
        else:
            rows = changed  # [B, D + 1]: the root, the path below it, then the leaf
            selected, next_node = choice_kernel.choices(
                tree.stats, tree.children_index, tree.children_prior_logits, rows,
                _kernel_rule(tree, interior_action_selection_fn, kernels), STAT_COLUMNS,
                interpret=kernels == "interpret",
                root=root_rule, root_gumbel=tree.extra_data.root_gumbel, root_invalid_actions=tree.root_invalid_actions)
        num_rows = rows.shape[1]
        old_links = _take_rows(tree.links, rows)
        is_leaf = jnp.arange(num_rows) == num_rows - 1
        row_parent = jnp.where(is_leaf, parent[:, None], old_links[..., PARENT])
        row_action = jnp.where(is_leaf, action[:, None], old_links[..., ACTION])
        new_links = jnp.stack([row_parent, row_action, selected, next_node], axis=-1)
        return tree.replace(links=set_each(tree.links, new_links, rows, mode="drop"))


def root_choice(tree: PackedTree, key: chex.PRNGKey, root_action_selection_fn):
    """The root rule's action in each of the ``B`` trees and the child it leads to, as
    mctx's function on each root's node view (``key``: the simulation's, split as mctx does)."""
    batch_size = tree.stats.shape[0]
    _, root_keys = split_each(jax.random.split(key, batch_size))
    root_rows = jnp.zeros((batch_size, 1), jnp.int32)
    own, children_index, children_stats, prior = (x[:, 0] for x in _views(tree, root_rows))
    root_action = jax.vmap(lambda key, *row: root_action_selection_fn(key, _node_view(*row), 0))(
        root_keys, own, children_index, children_stats, prior, tree.root_invalid_actions, tree.extra_data)
    return root_action, take_each(children_index, root_action)


def _kernel_rule(tree: PackedTree, interior_action_selection_fn, kernels: str):
    """Gumbel's interior rule if the choice kernel takes it here, else ``None``: float32
    rows, int32 offsets, a rule with constant arguments, ``kernels`` not ``"xla"``."""
    # int32 offsets: into the largest array, padded games' included (their loads are masked).
    batch_size, num_nodes, num_actions = tree.children_index.shape
    padded = (batch_size + choice_kernel.BLOCK) * num_nodes * max(num_actions, tree.stats.shape[-1])
    fits = padded < 2**31 and tree.stats.dtype == tree.children_prior_logits.dtype == jnp.float32
    return choice_kernel.rule_of(interior_action_selection_fn) if kernels != "xla" and fits else None


def _cached_root_rule(tree: PackedTree, root_action_selection_fn, interior_action_selection_fn, kernels: str):
    """Gumbel's root rule (Sequential Halving) if the choice kernel computes it with the
    interior rows, so that each simulation reads the root's choice from its links row
    (no root rule of ~10 XLA kernels a simulation); else ``None``. mctx's Gumbel root rule
    draws no random numbers, so choosing after the last simulation instead of before the
    next changes nothing."""
    root_rule = choice_kernel.root_rule_of(root_action_selection_fn)
    gumbel = getattr(tree.extra_data, "root_gumbel", None)
    if (root_rule is None or _kernel_rule(tree, interior_action_selection_fn, kernels) is None
            or gumbel is None or gumbel.shape != (tree.stats.shape[0], tree.children_index.shape[-1])):
        return None
    return root_rule


def with_root_choice(tree: PackedTree, key: chex.PRNGKey, root_action_selection_fn) -> PackedTree:
    """``tree`` with the root rule's choice written into each root's links row."""
    root_action, first = root_choice(tree, key, root_action_selection_fn)
    links = tree.links.at[:, Tree.ROOT_INDEX, SELECTED].set(root_action.astype(jnp.int32))
    return tree.replace(links=links.at[:, Tree.ROOT_INDEX, NEXT].set(first))


def _interior_choices(tree: PackedTree, rows: chex.Array, parent_depth: chex.Array, key: chex.PRNGKey,
                      interior_action_selection_fn, kernels: str):
    """The interior rule's action at each node of ``rows [B, D]`` (the path below the
    root, then the leaf, whose parent is at ``parent_depth``) and the child it leads to:
    Gumbel's rule as one Pallas kernel unless ``kernels == "xla"``, any other rule (and
    every rule on ``"xla"``) as mctx's function on each row's node view."""
    rule = _kernel_rule(tree, interior_action_selection_fn, kernels)
    if rule is not None:
        return choice_kernel.choices(tree.stats, tree.children_index, tree.children_prior_logits, rows, rule,
                                     STAT_COLUMNS, interpret=kernels == "interpret")
    batch_size, num_rows = rows.shape
    row_depth = jnp.concatenate([jnp.broadcast_to(jnp.arange(1, num_rows), (batch_size, num_rows - 1)),
                                 (parent_depth + 1)[:, None]], axis=1).astype(tree.children_prior_logits.dtype)
    row_keys = jax.random.split(key, (batch_size, num_rows))
    own, children_index, children_stats, prior = _views(tree, rows)

    def choose(key, own, children_index, children_stats, prior, depth, invalid, extra):
        view = _node_view(own, children_index, children_stats, prior, invalid, extra)
        return interior_action_selection_fn(key, view, 0, depth)

    per_row = jax.vmap(choose, in_axes=(0, 0, 0, 0, 0, 0, None, None))
    selected = jax.vmap(per_row)(row_keys, own, children_index, children_stats, prior, row_depth,
                                 tree.root_invalid_actions, tree.extra_data).astype(jnp.int32)  # [B, D]
    return selected, jnp.take_along_axis(children_index, selected[..., None], axis=-1)[..., 0]


def unpack_tree(tree: PackedTree, packer: StatePacker) -> Tree:
    """mctx's :class:`Tree` of a packed tree: children's statistics copied into their
    parents' rows as mctx keeps them."""
    children_index = tree.children_index
    children = _take_rows(tree.stats, jnp.maximum(children_index, 0))  # [B, N+1, A, 5]
    children = jnp.where((children_index >= 0)[..., None], children, 0)
    return Tree(
        node_visits=tree.stats[..., VISITS].astype(jnp.int32),
        raw_values=tree.stats[..., RAW_VALUE],
        node_values=tree.stats[..., VALUE],
        parents=tree.links[..., PARENT],
        action_from_parent=tree.links[..., ACTION],
        children_index=children_index,
        children_prior_logits=tree.children_prior_logits,
        children_visits=children[..., VISITS].astype(jnp.int32),
        children_rewards=children[..., REWARD],
        children_discounts=children[..., DISCOUNT],
        children_values=children[..., VALUE],
        embeddings=packer.unpack(tree.embeddings),
        root_invalid_actions=tree.root_invalid_actions,
        extra_data=tree.extra_data,
    )


def search(
    params: base.Params,
    rng_key: chex.PRNGKey,
    *,
    root: base.RootFnOutput,
    recurrent_fn: base.RecurrentFn,
    root_action_selection_fn: base.RootActionSelectionFn,
    interior_action_selection_fn: base.InteriorActionSelectionFn,
    num_simulations: int,
    max_depth: Optional[int] = None,
    invalid_actions: Optional[chex.Array] = None,
    extra_data: Any = None,
    loop_fn: base.LoopFn = jax.lax.fori_loop,
    kernels: str = "auto",
) -> Tree:
    """``mctx.search`` (same arguments, same tree) with the device-side loop above.

    ``kernels`` (:data:`KERNELS`): ``"pallas"``: the walk and Gumbel's cached choices
    as Pallas kernels compiled by Triton (a GPU program); ``"interpret"``: the same
    kernels run by Pallas's interpreter (any backend: tests of the GPU's program);
    ``"xla"``: XLA operations (:func:`walk`, mctx's rule); ``"auto"``: the Pallas
    kernels where JAX's default backend is a GPU, XLA operations elsewhere.

    ``max_depth`` (mctx's: walks stop at that depth; default ``num_simulations``) is
    also the number of static walk steps, so a tight bound (the game's length) makes
    each simulation cheaper without changing any tree that stays within it.
    """
    if max_depth is None:
        max_depth = num_simulations
    max_depth = int(max(1, min(max_depth, num_simulations)))  # no tree of N simulations is deeper than N
    if invalid_actions is None:
        invalid_actions = jnp.zeros_like(root.prior_logits)
    packer = StatePacker.of(root.embedding)
    tree = instantiate(root, num_simulations, invalid_actions, extra_data, packer)
    if _cached_root_rule(tree, root_action_selection_fn, interior_action_selection_fn, _resolve(kernels)) is not None:
        tree = with_root_choice(tree, rng_key, root_action_selection_fn)  # the first simulation's (no key used)
        # The kernel's dtype, once: XLA would convert the mask inside the loop.
        tree = tree.replace(root_invalid_actions=tree.root_invalid_actions.astype(jnp.float32))

    def body_fun(sim, loop_state):
        rng_key, tree = loop_state
        rng_key, simulate_key, expand_key = jax.random.split(rng_key, 3)
        tree = simulate_once(params, sim, simulate_key, expand_key, tree, recurrent_fn=recurrent_fn,
                             root_action_selection_fn=root_action_selection_fn,
                             interior_action_selection_fn=interior_action_selection_fn,
                             max_depth=max_depth, packer=packer, kernels=kernels)
        return rng_key, tree

    _, tree = loop_fn(0, num_simulations, body_fun, (rng_key, tree))
    return unpack_tree(tree, packer).replace(root_invalid_actions=invalid_actions)


# ----------------------------------------------------------------------------- the walk as a Pallas kernel

KERNELS = ("auto", "xla", "pallas", "interpret")


def _resolve(kernels: str) -> str:
    if kernels not in KERNELS:
        raise ValueError(f"kernels must be one of {KERNELS}, got {kernels!r}")
    if kernels == "auto":  # chosen when traced, as the loop is: no platform switch in the program
        return "pallas" if jax.default_backend() == "gpu" else "xla"
    return kernels


def _walk(links, first, root_action, max_depth: int, kernels: str):
    if kernels == "xla":
        return walk(links, first, root_action, max_depth)
    return walk_pallas(links, first, root_action, max_depth, interpret=kernels == "interpret")


WALK_BLOCK = 128  # games per kernel program: one thread each


def _walk_kernel(*refs, num_nodes: int, max_depth: int, block: int, cached_root: bool):
    from jax.experimental.pallas import triton as plgpu  # noqa: F401  (the Triton dialect's load/store)
    from jax.experimental import pallas as pl

    start = pl.program_id(0) * block
    games = start + jnp.arange(block, dtype=jnp.int32)
    rows = games * num_nodes  # first node of each game in the flattened [B * (N+1), 4] links
    if cached_root:  # the root's own links row
        links_ref, path_ref, parent_ref, action_ref, depth_ref = refs
        first = links_ref[(rows + Tree.ROOT_INDEX) * NUM_LINKS + NEXT]
        root_action = links_ref[(rows + Tree.ROOT_INDEX) * NUM_LINKS + SELECTED]
    else:
        links_ref, first_ref, root_action_ref, path_ref, parent_ref, action_ref, depth_ref = refs
        first = first_ref[pl.ds(start, block)]
        root_action = root_action_ref[pl.ds(start, block)]
    path_rows = games * max_depth

    def clear(k, carry):
        path_ref[path_rows + k] = jnp.full((block,), num_nodes, jnp.int32)
        return carry

    jax.lax.fori_loop(1, max_depth, clear, 0)
    path_ref[path_rows] = jnp.zeros((block,), jnp.int32)

    def cond(carry):
        step, _, _, _, continuing = carry
        return (step < max_depth) & (jnp.max(continuing.astype(jnp.int32)) > 0)

    def body(carry):
        step, node, next_node, depth, continuing = carry
        node = jnp.where(continuing, next_node, node)
        depth = jnp.where(continuing, step, depth)
        path_ref[path_rows + step] = jnp.where(continuing, next_node, num_nodes)
        next_node = links_ref[(rows + node) * NUM_LINKS + NEXT]
        continuing = continuing & (next_node != Tree.UNVISITED) & (step + 1 < max_depth)
        return step + 1, node, next_node, depth, continuing

    init = (jnp.int32(1), jnp.zeros((block,), jnp.int32), first, jnp.zeros((block,), jnp.int32),
            (first != Tree.UNVISITED) & (1 < max_depth))
    _, node, _, depth, _ = jax.lax.while_loop(cond, body, init)
    selected = links_ref[(rows + node) * NUM_LINKS + SELECTED]
    parent_ref[pl.ds(start, block)] = node
    action_ref[pl.ds(start, block)] = jnp.where(node == Tree.ROOT_INDEX, root_action, selected)
    depth_ref[pl.ds(start, block)] = depth


def walk_pallas(links: chex.Array, first: Optional[chex.Array], root_action: Optional[chex.Array], max_depth: int,
                interpret: bool = False):
    """:func:`walk` as one Pallas kernel: each game's walk is a loop on the device that
    stops when every walk of its block has found its edge (with the games split over
    devices, each device walks its own: :func:`per_game.on_each_device`)."""
    kernel = functools.partial(_walk_games, max_depth=max_depth, interpret=interpret)
    return on_each_device(kernel, links, *(() if first is None else (first, root_action)))


def _walk_games(links, first=None, root_action=None, *, max_depth: int, interpret: bool):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    batch_size, num_nodes = links.shape[:2]
    block = min(WALK_BLOCK, pl.next_power_of_2(batch_size))
    padded = pl.cdiv(batch_size, block) * block
    pad = padded - batch_size
    # A padded game's links are all UNVISITED: its walk ends at its root.
    inputs = [jnp.pad(links.reshape(-1), (0, pad * num_nodes * NUM_LINKS), constant_values=Tree.UNVISITED)]
    if first is not None:
        inputs += [jnp.pad(first.astype(jnp.int32), (0, pad), constant_values=Tree.UNVISITED),
                   jnp.pad(root_action.astype(jnp.int32), (0, pad))]
    out_shape = (jax.ShapeDtypeStruct((padded * max_depth,), jnp.int32),
                 jax.ShapeDtypeStruct((padded,), jnp.int32),
                 jax.ShapeDtypeStruct((padded,), jnp.int32),
                 jax.ShapeDtypeStruct((padded,), jnp.int32))
    kernel = functools.partial(_walk_kernel, num_nodes=num_nodes, max_depth=max_depth, block=block,
                               cached_root=first is None)
    path, parent, action, depth = pl.pallas_call(
        kernel, out_shape=out_shape, grid=(padded // block,), interpret=interpret,
        compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1), name="search_walk")(*inputs)
    return (path.reshape(padded, max_depth)[:batch_size], parent[:batch_size], action[:batch_size],
            depth[:batch_size])


def tree_bytes(num_simulations: int, num_actions: int, state_bytes: int, value_bytes: int = 4) -> int:
    """Bytes of one game's :class:`PackedTree` (``num_simulations + 1`` nodes): what a
    search of ``B`` games holds on the device is ``B`` times this (plus the network's
    activations for ``B`` evaluations at a time)."""
    per_node = NUM_STATS * value_bytes + NUM_LINKS * 4 + num_actions * (4 + value_bytes) + state_bytes
    return (num_simulations + 1) * per_node
