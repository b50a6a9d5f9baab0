"""mctx's search loop, replaced: two loops with the same results as mctx's own, one for
each kind of device, installed in place of ``mctx._src.search.search`` before anything is
traced.

mctx (0.0.71) runs each simulation as ``simulate`` (a ``jax.vmap`` of a
``lax.while_loop`` walking down the tree), ``expand`` and ``backward`` (a ``jax.vmap``
of a ``lax.while_loop`` walking back up). Two costs follow:

* Under ``vmap`` a while loop whose condition differs per batch element runs until every
  element is done and, at every step, sets each carried array to ``select(running, new,
  old)``. ``backward`` carries the whole tree, so each step up rewrote ``[B, N+1, A]``
  arrays and a search of N simulations cost O(N²).
* On a GPU, XLA's runtime copies the condition of a loop whose trip count depends on data
  to the host and waits for the device at every iteration (``WhileThunk``; the same for
  ``lax.cond``): ~25 us with the whole batch idle, twice per tree level per simulation.

The two loops (``loop=`` of :func:`install` and :func:`search`):

* ``"dynamic"`` (the CPU's): :func:`simulate` and :func:`backward` below, one
  ``lax.while_loop`` each over the batch with ONE shared condition, carrying only
  ``[B]`` vectors and the four updated arrays, updated in place (a finished game writes
  to node ``N+1``, out of range, which the ``mode="drop"`` scatters discard). The root
  rule runs once before the walk and the step into the root once after the backup. On a
  CPU a loop iteration costs microseconds and the work per level is what the batch
  needs, so this is the cheapest loop there. They and :func:`expand` read and write
  each game's tree with per-game gathers (``per_game.take_each``): with the games split
  over devices, the only communication left in the loops is their shared condition.
* ``"static"`` (every other device's): :mod:`beastybar_jax.search.device_loop`, a fixed
  amount of device work per simulation with no data-dependent loop or branch: cached
  interior choices, a walk of ``max_depth`` static steps (a Pallas kernel on GPUs), a
  closed-form backup and a packed tree.
  ``"static-xla"`` and ``"static-pallas"`` are the same with the walk and the cached
  choices as XLA operations or as Pallas kernels (a GPU program: it lowers anywhere but
  runs on a GPU) whatever the backend, and ``"static-interpret"`` with the Pallas
  kernels run by Pallas's interpreter (any backend), for tests and benchmarks.
* ``"auto"`` (the default): ``"dynamic"`` when JAX's default backend is the CPU, else
  ``"static"``.

Both compute mctx's values with mctx's float operations in mctx's order, so the trees,
actions and weights are bitwise those of stock mctx (``tests/test_mctx_patch.py``; the
static loop draws PUCT's 1e-7 tie-breaking noise at other times, which changes no tree
there). :func:`install` puts :func:`search` and :func:`backward` in place of mctx's
(``mctx._src.search.search``, which the policies call through the module, and the public
``mctx.search``); :func:`stock_mctx` restores mctx's own functions for a comparison. Both
depend on private names, so the mctx version is pinned in pyproject.toml and
:func:`install` refuses (:class:`MctxPatchError`) any mctx whose internals differ from
what this module was written against.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
from typing import Any, Iterator, Optional

import chex
import jax
import jax.numpy as jnp
import mctx
from mctx._src import base
from mctx._src import policies as mctx_policies
from mctx._src import search as mctx_search
from mctx._src import tree as tree_lib

from beastybar_jax.per_game import set_each, split_each, take_each
from beastybar_jax.search import device_loop

Tree = tree_lib.Tree

SUPPORTED_MCTX_VERSIONS = ("0.0.71",)
"""mctx releases whose ``mctx/_src/search.py`` this module was checked against
(bitwise identity test included)."""

_EXPECTED_SEARCH_PARAMETERS = (
    "params", "rng_key", "root", "recurrent_fn", "root_action_selection_fn", "interior_action_selection_fn",
    "num_simulations", "max_depth", "invalid_actions", "extra_data", "loop_fn")
_EXPECTED_TREE_FIELDS = (
    "node_visits", "raw_values", "node_values", "parents", "action_from_parent", "children_index",
    "children_prior_logits", "children_visits", "children_rewards", "children_discounts", "children_values",
    "embeddings", "root_invalid_actions", "extra_data")


class MctxPatchError(RuntimeError):
    """The installed mctx is not the one :mod:`beastybar_jax.search.mctx_patch` expects."""


def backward(tree: Tree, leaf_index: chex.Array) -> Tree:
    """Backs up the value of ``leaf_index`` ``[B]`` to the roots of a batched tree.

    Same results as ``mctx._src.search.backward``; see the module docstring for how
    it differs (the ``"dynamic"`` loop).
    """
    num_nodes = tree.node_values.shape[1]
    leaf_index = jnp.asarray(leaf_index, dtype=jnp.int32)
    at_root = leaf_index == Tree.ROOT_INDEX  # nothing to back up (mctx's search never asks)

    def back_up(values, index, parent, leaf_value, child_value, target):
        """One step up, from ``index`` to ``parent`` ``[B]``, written at node ``target``
        (``num_nodes``: dropped). mctx's arithmetic, in mctx's order."""
        node_values, node_visits, children_values, children_visits = values
        action = take_each(tree.action_from_parent, index)
        count = take_each(node_visits, parent)
        reward = take_each(tree.children_rewards, parent, action)
        leaf_value = reward + take_each(tree.children_discounts, parent, action) * leaf_value
        parent_value = (take_each(node_values, parent) * count + leaf_value) / (count + 1.0)
        children_counts = take_each(children_visits, parent, action) + 1
        values = (set_each(node_values, parent_value, target, mode="drop"),
                  set_each(node_visits, count + 1, target, mode="drop"),
                  set_each(children_values, child_value, target, action, mode="drop"),
                  set_each(children_visits, children_counts, target, action, mode="drop"))
        return values, leaf_value, parent_value

    def cond_fun(state):
        *_, parent = state
        return jnp.any(parent != Tree.ROOT_INDEX)

    def step_up(state):
        values, leaf_value, child_value, index, parent = state
        running = parent != Tree.ROOT_INDEX
        values, new_leaf_value, parent_value = back_up(
            values, index, parent, leaf_value, child_value, jnp.where(running, parent, num_nodes))
        keep = lambda new, old: jnp.where(running, new, old)
        # The parent's new value is what the next step stores as its child's value.
        return (values, keep(new_leaf_value, leaf_value), keep(parent_value, child_value), keep(parent, index),
                keep(take_each(tree.parents, parent), parent))

    # Up to the root's children: games leave the loop at different steps.
    leaf_value = take_each(tree.node_values, leaf_index)
    parent = jnp.where(at_root, Tree.ROOT_INDEX, take_each(tree.parents, leaf_index))
    values = (tree.node_values, tree.node_visits, tree.children_values, tree.children_visits)
    values, leaf_value, child_value, index, parent = jax.lax.while_loop(
        cond_fun, step_up, (values, leaf_value, leaf_value, leaf_index, parent))
    # The last step, into the root, is the same for every game: all at once.
    values, _, _ = back_up(values, index, parent, leaf_value, child_value, jnp.where(at_root, num_nodes, parent))
    node_values, node_visits, children_values, children_visits = values
    return tree.replace(node_values=node_values, node_visits=node_visits,
                        children_values=children_values, children_visits=children_visits)


def expand(params, rng_key: chex.PRNGKey, tree: Tree, recurrent_fn: base.RecurrentFn, parent_index: chex.Array,
           action: chex.Array, next_node_index: chex.Array) -> Tree:
    """``mctx._src.search.expand`` (same arguments, same tree) with per-game reads and
    writes (:func:`~beastybar_jax.per_game.take_each`) that stay on each device's
    games when the batch is split over devices."""
    batch_size = tree.node_values.shape[0]
    chex.assert_shape([parent_index, action, next_node_index], (batch_size,))
    embedding = jax.tree.map(lambda x: take_each(x, parent_index), tree.embeddings)
    step, embedding = recurrent_fn(params, rng_key, action, embedding)
    chex.assert_shape(step.prior_logits, [batch_size, tree.num_actions])
    chex.assert_shape([step.reward, step.discount, step.value], [batch_size])
    node = next_node_index
    return tree.replace(
        children_prior_logits=set_each(tree.children_prior_logits, step.prior_logits, node),
        raw_values=set_each(tree.raw_values, step.value, node),
        node_values=set_each(tree.node_values, step.value, node),
        node_visits=set_each(tree.node_visits, take_each(tree.node_visits, node) + 1, node),
        embeddings=jax.tree.map(lambda t, s: set_each(t, s, node), tree.embeddings, embedding),
        children_index=set_each(tree.children_index, node, parent_index, action),
        children_rewards=set_each(tree.children_rewards, step.reward, parent_index, action),
        children_discounts=set_each(tree.children_discounts, step.discount, parent_index, action),
        parents=set_each(tree.parents, parent_index, node),
        action_from_parent=set_each(tree.action_from_parent, action, node))


def simulate(
    rng_key: chex.Array,
    tree: Tree,
    root_action_selection_fn: base.RootActionSelectionFn,
    interior_action_selection_fn: base.InteriorActionSelectionFn,
    max_depth: int,
) -> tuple[chex.Array, chex.Array]:
    """Walks each of ``B`` trees down from its root to an unvisited action or ``max_depth``.

    Same results as ``mctx._src.search.simulate`` with mctx's switching selection
    function. ``rng_key`` holds ``B`` keys; returns ``(parent_index [B], action [B])``.
    """
    batch_size = tree.node_values.shape[0]
    select_at_root = jax.vmap(root_action_selection_fn)
    select_inside = jax.vmap(interior_action_selection_fn)

    # Depth 0: every walk starts at the root, where only the root rule applies.
    rng_key, selection_key = split_each(rng_key)
    node_index = jnp.full([batch_size], Tree.ROOT_INDEX, dtype=jnp.int32)
    action = select_at_root(selection_key, tree, node_index)
    next_node_index = take_each(tree.children_index, node_index, action)
    depth = jnp.zeros([batch_size], dtype=tree.children_prior_logits.dtype) + 1
    is_continuing = jnp.logical_and(next_node_index != Tree.UNVISITED, depth < max_depth)

    def cond_fun(state):
        return jnp.any(state[-1])

    def step_down(state):
        rng_key, node_index, action, next_node_index, depth, is_continuing = state
        new_rng_key, selection_key = split_each(rng_key)
        # A finished walk selects from a meaningless node; the result is discarded.
        new_action = select_inside(selection_key, tree, next_node_index, depth)
        new_next_node_index = take_each(tree.children_index, next_node_index, new_action)
        new_depth = depth + 1
        new_is_continuing = jnp.logical_and(new_next_node_index != Tree.UNVISITED, new_depth < max_depth)
        keep = lambda new, old: jnp.where(is_continuing.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)
        return (keep(new_rng_key, rng_key), keep(next_node_index, node_index), keep(new_action, action),
                keep(new_next_node_index, next_node_index), keep(new_depth, depth),
                jnp.logical_and(is_continuing, new_is_continuing))

    state = (rng_key, node_index, action, next_node_index, depth, is_continuing)
    _, node_index, action, _, _, _ = jax.lax.while_loop(cond_fun, step_down, state)
    return node_index, action


LOOPS = ("auto", "dynamic", "static", "static-xla", "static-pallas", "static-interpret")


def resolve_loop(loop: str) -> str:
    """The loop ``loop`` names (``"auto"``: ``"dynamic"`` when JAX's default backend is the
    CPU, else ``"static"``)."""
    if loop not in LOOPS:
        raise ValueError(f"loop must be one of {LOOPS}, got {loop!r}")
    if loop == "auto":
        return "dynamic" if jax.default_backend() == "cpu" else "static"
    return loop


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
    loop: str = "auto",
) -> Tree:
    """``mctx.search`` (same arguments, same tree) with the ``loop`` of the module docstring.

    The ``"static"`` loop takes ``max_depth`` steps down in every simulation: pass the
    depth no walk can reach (``run_search`` passes the game's length plus two) rather
    than mctx's default, ``num_simulations``.
    """
    selection = dict(root=root, recurrent_fn=recurrent_fn, root_action_selection_fn=root_action_selection_fn,
                     interior_action_selection_fn=interior_action_selection_fn, num_simulations=num_simulations,
                     max_depth=max_depth, invalid_actions=invalid_actions, extra_data=extra_data, loop_fn=loop_fn)
    loop = resolve_loop(loop)
    if loop == "dynamic":
        return _dynamic_search(params, rng_key, **selection)
    kernels = {"static": "auto", "static-xla": "xla", "static-pallas": "pallas", "static-interpret": "interpret"}[loop]
    return device_loop.search(params, rng_key, kernels=kernels, **selection)


def _dynamic_search(params, rng_key, *, root, recurrent_fn, root_action_selection_fn, interior_action_selection_fn,
                    num_simulations, max_depth, invalid_actions, extra_data, loop_fn) -> Tree:
    """mctx's ``search`` calling :func:`simulate`, :func:`expand` and :func:`backward`."""
    batch_size = root.value.shape[0]
    if max_depth is None:
        max_depth = num_simulations
    if invalid_actions is None:
        invalid_actions = jnp.zeros_like(root.prior_logits)

    def body_fun(sim, loop_state):
        rng_key, tree = loop_state
        rng_key, simulate_key, expand_key = jax.random.split(rng_key, 3)
        simulate_keys = jax.random.split(simulate_key, batch_size)
        parent_index, action = simulate(
            simulate_keys, tree, root_action_selection_fn, interior_action_selection_fn, max_depth)
        # A node first expanded on simulation `i` has node index `i + 1`.
        next_node_index = take_each(tree.children_index, parent_index, action)
        next_node_index = jnp.where(next_node_index == Tree.UNVISITED, sim + 1, next_node_index)
        tree = expand(params, expand_key, tree, recurrent_fn, parent_index, action, next_node_index)
        tree = backward(tree, next_node_index)
        return rng_key, tree

    tree = mctx_search.instantiate_tree_from_root(
        root, num_simulations, root_invalid_actions=invalid_actions, extra_data=extra_data)
    _, tree = loop_fn(0, num_simulations, body_fun, (rng_key, tree))
    return tree


# ----------------------------------------------------------------------------- installation

_STOCK: dict[str, Any] = {}
"""mctx's own functions, saved by the first :func:`install`."""


def check_mctx() -> None:
    """Raises :class:`MctxPatchError` unless mctx's internals are what this module replaces."""
    fix = ("install a supported mctx (pyproject.toml pins it), or port beastybar_jax/search/mctx_patch.py "
           "to this mctx and run tests/test_mctx_patch.py")
    version = getattr(mctx, "__version__", "unknown")
    if version not in SUPPORTED_MCTX_VERSIONS:
        raise MctxPatchError(f"mctx {version} is installed; the search patch supports {SUPPORTED_MCTX_VERSIONS}: {fix}")
    stock_search = _STOCK.get("search", mctx_search.search)
    problems = []
    for name in ("search", "backward", "expand", "instantiate_tree_from_root"):
        if not callable(getattr(mctx_search, name, None)):
            problems.append(f"mctx._src.search.{name} is missing")
    if getattr(mctx_policies, "search", None) is not mctx_search:
        problems.append("mctx's policies no longer call the search through the mctx._src.search module")
    if tuple(inspect.signature(stock_search).parameters) != _EXPECTED_SEARCH_PARAMETERS:
        problems.append("mctx._src.search.search has new parameters")
    body = [c for c in stock_search.__code__.co_consts if inspect.iscode(c) and c.co_name == "body_fun"]
    if not body or not {"simulate", "expand", "backward"} <= set(body[0].co_names):
        problems.append("mctx's search loop no longer runs simulate, expand and backward")
    if tuple(f.name for f in dataclasses.fields(Tree)) != _EXPECTED_TREE_FIELDS:
        problems.append("mctx's Tree has new fields")
    if problems:
        raise MctxPatchError(f"mctx {version}: {'; '.join(problems)}: {fix}")


def installed_loop() -> Optional[str]:
    """The ``loop`` of the installed search, or None while mctx runs its own."""
    installed = mctx_search.search
    if isinstance(installed, functools.partial) and installed.func is search:
        return installed.keywords["loop"]
    return None


def is_installed() -> bool:
    return installed_loop() is not None


def install(loop: str = "auto") -> None:
    """Puts :func:`search` (with this ``loop``) and :func:`backward` in place of mctx's.
    Idempotent.

    Must run before the search is traced: an already compiled function keeps the
    search it was traced with, and ``"auto"`` picks its loop when the search is traced.
    """
    resolve_loop(loop)  # a bad name is refused before anything changes
    if installed_loop() == loop:
        return
    check_mctx()
    if not _STOCK:  # mctx's own functions, saved once
        _STOCK.update(search=mctx_search.search, backward=mctx_search.backward, public_search=mctx.search)
    patched = functools.partial(search, loop=loop)
    mctx_search.search = patched
    mctx_search.backward = backward
    mctx.search = patched


def uninstall() -> None:
    """Restores mctx's own functions (no-op if :func:`install` never ran)."""
    if not _STOCK:
        return
    mctx_search.search = _STOCK["search"]
    mctx_search.backward = _STOCK["backward"]
    mctx.search = _STOCK["public_search"]


@contextlib.contextmanager
def installed(loop: str = "auto") -> Iterator[None]:
    """Within the block, the patched search with this ``loop`` (for tests and benchmarks).
    As with :func:`stock_mctx`, only what is traced inside the block uses it."""
    previous = installed_loop()
    install(loop)
    try:
        yield
    finally:
        if previous is None:
            uninstall()
        else:
            install(previous)


@contextlib.contextmanager
def stock_mctx() -> Iterator[None]:
    """Within the block, mctx runs its own search (for comparisons and benchmarks).

    Only what is traced inside the block uses it: ``jax.jit`` caches traces per
    function, so jit a fresh function (or ``lower`` it) inside the block.
    """
    previous = installed_loop()
    uninstall()
    try:
        yield
    finally:
        if previous is not None:
            install(previous)
