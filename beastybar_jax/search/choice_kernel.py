"""Gumbel MuZero's rules for the rows a simulation changed, as one Pallas kernel.

After each simulation the static loop (:mod:`beastybar_jax.search.device_loop`)
recomputes the cached interior choice of every row on the walked path: ``[B, D]`` rows,
``D`` the loop's depth bound, though most walks stop after a few steps. As XLA
operations the rule (two softmaxes, the mixed value, the rescaled Q-values, an argmax:
about ten reductions over each row's ``A`` children) is eight kernels, each writing
``[B, D, A]`` floats for the next to read back: at 4,096 games x 64 simulations ~345 of
the ~480 MB a simulation moves (``benchmark.py search --compile-for h100``). Here it is
one kernel: a program takes a block of games and one row of their paths (the rows are
independent: a grid of blocks x rows, not a loop over the rows, whose dependent loads made
a chain of ``D`` memory latencies), loads the row's children (their indices and prior
logits), gathers the visited children's statistics from their own rows and keeps
everything else in registers; rows past a walk's end are masked loads, which read nothing.

The rule is mctx's ``gumbel_muzero_interior_action_selection`` with
``qtransform_completed_by_mix_value`` (its keyword arguments read from the search's
``interior_action_selection_fn``): the same arithmetic in the same order, each
reduction over the row's ``A`` children (Triton's blocks are powers of two: the padded
columns are left out of every reduction). Sums may be added in another order than
XLA's, and Triton's division and ``exp`` may round the last bit otherwise, so a choice
between two children whose scores differ in the last bit can differ from stock mctx's on a
GPU (``tests/test_device_loop.py`` compares the two on random trees; the interpreter's
choices are mctx's).
:func:`rule_of` returns ``None`` for any other rule (PUCT draws random tie-breaking
noise, which a Triton kernel cannot): the XLA operations stay in use for it.

The root's row changes in every simulation too, and mctx's Gumbel root rule
(``gumbel_muzero_root_action_selection``: Sequential Halving's table of visit counts,
the Gumbel noise, the invalid actions; :func:`root_rule_of`) draws no random numbers, so
the same kernel takes the root as the first row and chooses the next simulation's root
action there: the ~10 XLA kernels of the root rule leave the simulation.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import chex
import jax
import jax.numpy as jnp
import numpy as np
from mctx._src import action_selection, qtransforms, seq_halving
from mctx._src.tree import Tree

from beastybar_jax.per_game import on_each_device

BLOCK = 32  # games per kernel program


class StatColumns(NamedTuple):
    """Where each statistic sits in a row of the packed tree's ``stats`` (``device_loop``'s)."""

    visits: int
    raw_value: int
    value: int
    reward: int
    discount: int


class GumbelRule(NamedTuple):
    """The keyword arguments of ``qtransform_completed_by_mix_value`` in use."""

    value_scale: float = 0.1
    maxvisit_init: float = 50.0
    rescale_values: bool = True
    use_mixed_value: bool = True
    epsilon: float = 1e-8


class GumbelRootRule(NamedTuple):
    """The keyword arguments of ``gumbel_muzero_root_action_selection`` in use."""

    num_simulations: int
    max_num_considered_actions: int
    qtransform: GumbelRule


def _qtransform_rule(qtransform) -> Optional[GumbelRule]:
    """The :class:`GumbelRule` of a ``qtransform_completed_by_mix_value`` (or a
    ``functools.partial`` of it with plain numbers), else ``None``."""
    if qtransform is qtransforms.qtransform_completed_by_mix_value:
        return GumbelRule()
    if not (isinstance(qtransform, functools.partial) and qtransform.func is qtransforms.qtransform_completed_by_mix_value
            and not qtransform.args and set(qtransform.keywords) <= set(GumbelRule._fields)):
        return None
    if not all(isinstance(v, (bool, int, float)) for v in qtransform.keywords.values()):
        return None  # a traced scale: not a constant of the kernel
    return GumbelRule(**qtransform.keywords)


def rule_of(interior_action_selection_fn) -> Optional[GumbelRule]:
    """The :class:`GumbelRule` of mctx's Gumbel interior rule as ``gumbel_muzero_policy``
    passes it (a ``functools.partial`` with its ``qtransform``), or ``None`` for any
    other rule or an argument that is not a plain number."""
    fn = interior_action_selection_fn
    if not (isinstance(fn, functools.partial) and fn.func is action_selection.gumbel_muzero_interior_action_selection
            and set(fn.keywords) <= {"qtransform"} and not fn.args):
        return None
    return _qtransform_rule(fn.keywords.get("qtransform", qtransforms.qtransform_completed_by_mix_value))


def root_rule_of(root_action_selection_fn) -> Optional[GumbelRootRule]:
    """The :class:`GumbelRootRule` of mctx's Gumbel root rule (Sequential Halving) as
    ``gumbel_muzero_policy`` passes it, or ``None`` for any other rule (PUCT's draws
    random tie-breaking noise) or an argument that is not a plain number."""
    fn = root_action_selection_fn
    if not (isinstance(fn, functools.partial) and fn.func is action_selection.gumbel_muzero_root_action_selection
            and not fn.args and {"num_simulations", "max_num_considered_actions"} <= set(fn.keywords)
            <= {"num_simulations", "max_num_considered_actions", "qtransform"}):
        return None
    sizes = fn.keywords["num_simulations"], fn.keywords["max_num_considered_actions"]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in sizes):
        return None
    qtransform = _qtransform_rule(fn.keywords.get("qtransform", qtransforms.qtransform_completed_by_mix_value))
    return None if qtransform is None else GumbelRootRule(*sizes, qtransform)


def _completed_qvalues(prior, visits, reward, discount, value, raw_value, real, rule: GumbelRule):
    """``qtransform_completed_by_mix_value`` on ``[G, W]`` rows, of which the columns
    ``real [W]`` are the row's ``A`` children: mctx's arithmetic, each reduction over
    the real columns only. Returns ``(completed Q-values [G, W], sum of visits [G, 1])``."""
    keep = lambda x, fill: jnp.where(real[None, :], x, fill)  # noqa: E731
    total = lambda x: jnp.sum(keep(x, 0.0), axis=-1, keepdims=True)  # noqa: E731
    visited = visits > 0
    qvalues = reward + discount * value  # Tree.qvalues: the children's rewards + discounts * values
    sum_visits = total(visits)
    if rule.use_mixed_value:  # qtransforms._compute_mixed_value
        prior_probs = jnp.maximum(jnp.finfo(jnp.float32).tiny, _softmax(prior, real))
        sum_probs = total(jnp.where(visited, prior_probs, 0.0))
        weighted_q = total(jnp.where(visited, prior_probs * qvalues / jnp.where(visited, sum_probs, 1.0), 0.0))
        mixed = (raw_value + sum_visits * weighted_q) / (sum_visits + 1)
    else:
        mixed = raw_value
    completed = jnp.where(visited, qvalues, mixed)
    if rule.rescale_values:
        low = jnp.min(keep(completed, jnp.inf), axis=-1, keepdims=True)
        high = jnp.max(keep(completed, -jnp.inf), axis=-1, keepdims=True)
        completed = (completed - low) / jnp.maximum(high - low, rule.epsilon)
    visit_scale = rule.maxvisit_init + jnp.max(keep(visits, 0.0), axis=-1, keepdims=True)
    return visit_scale * rule.value_scale * completed, sum_visits


def _softmax(logits, real):
    """jax.nn.softmax's ``exp(x - max) / sum`` over the real columns."""
    unnormalized = jnp.exp(logits - jnp.max(jnp.where(real[None, :], logits, -jnp.inf), axis=-1, keepdims=True))
    return unnormalized / jnp.sum(jnp.where(real[None, :], unnormalized, 0.0), axis=-1, keepdims=True)


def _argmax(scores, index, columns, real):
    """The first best real column of each row and the child it leads to."""
    action = jnp.argmax(jnp.where(real[None, :], scores, -jnp.inf), axis=-1).astype(jnp.int32)
    return action, jnp.sum(jnp.where(columns[None, :] == action[:, None], index, 0), axis=-1)


def _choose(index, prior, visits, reward, discount, value, raw_value, columns, real, rule: GumbelRule):
    """Gumbel's interior rule on ``[G, W]`` rows: ``(action [G], next node [G])``."""
    completed, sum_visits = _completed_qvalues(prior, visits, reward, discount, value, raw_value, real, rule)
    to_argmax = _softmax(prior + completed, real) - visits / (1 + sum_visits)  # action_selection._prepare_argmax_input
    return _argmax(to_argmax, index, columns, real)


def _choose_root(index, prior, visits, reward, discount, value, raw_value, gumbel, invalid, considered, columns,
                 real, rule: GumbelRootRule):
    """Gumbel's root rule (Sequential Halving) on ``[G, W]`` root rows, ``considered
    [G, 1]`` the visit count the table allows this simulation: ``(action [G], next node [G])``."""
    completed, _ = _completed_qvalues(prior, visits, reward, discount, value, raw_value, real, rule.qtransform)
    logits = prior - jnp.max(jnp.where(real[None, :], prior, -jnp.inf), axis=-1, keepdims=True)
    penalty = jnp.where(visits == considered, 0.0, -jnp.inf)  # seq_halving.score_considered
    to_argmax = jnp.maximum(-1e9, gumbel + logits + completed) + penalty
    return _argmax(jnp.where(invalid, -jnp.inf, to_argmax), index, columns, real)  # action_selection.masked_argmax


def _kernel(*refs, num_nodes: int, num_actions: int, width: int, num_rows: int, columns_of: StatColumns,
            num_stats: int, rule: GumbelRule, root: Optional[GumbelRootRule]):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    if root is None:
        stats_ref, index_ref, prior_ref, rows_ref, action_ref, next_ref = refs
    else:
        stats_ref, index_ref, prior_ref, rows_ref, gumbel_ref, invalid_ref, table_ref, action_ref, next_ref = refs
    games = pl.program_id(0) * BLOCK + jnp.arange(BLOCK, dtype=jnp.int32)
    columns = jnp.arange(width, dtype=jnp.int32)
    real = columns < num_actions

    def load(d):
        """Row ``d`` of each game's path: its node's children (index, prior; the columns
        in use) and their statistics, and the node's own raw value."""
        node = rows_ref[games * num_rows + d]  # [G]; num_nodes and beyond: past the walk's end
        on_path = node < num_nodes
        first = (games * num_nodes + jnp.where(on_path, node, 0)) * num_actions  # [G]
        present = on_path[:, None] & real[None, :]
        index = plgpu.load(index_ref.at[first[:, None] + columns[None, :]], mask=present, other=Tree.UNVISITED)
        prior = plgpu.load(prior_ref.at[first[:, None] + columns[None, :]], mask=present, other=-jnp.inf)
        own = (games * num_nodes + jnp.where(on_path, node, 0)) * num_stats
        raw_value = plgpu.load(stats_ref.at[own + columns_of.raw_value], mask=on_path, other=0.0)[:, None]
        visited = index >= 0
        child = (games[:, None] * num_nodes + jnp.maximum(index, 0)) * num_stats
        stat = lambda k: plgpu.load(stats_ref.at[child + k], mask=visited, other=0.0)  # noqa: E731  unvisited: zeros
        return (on_path, present, index, prior, stat(columns_of.visits), stat(columns_of.reward),
                stat(columns_of.discount), stat(columns_of.value), raw_value)

    def store(d, action, next_node):
        action_ref[games * num_rows + d] = action
        next_ref[games * num_rows + d] = next_node

    d = pl.program_id(1)  # the path's row this program chooses at: the rows are independent

    def root_row():  # the first row is the root: Sequential Halving's table and the Gumbel noise
        on_path, present, index, prior, visits, *rest = load(0)
        cells = games[:, None] * num_actions + columns[None, :]
        gumbel = plgpu.load(gumbel_ref.at[cells], mask=present, other=0.0)
        invalid = plgpu.load(invalid_ref.at[cells], mask=present, other=0.0)
        num_valid = jnp.sum(jnp.where(present, 1.0 - invalid, 0.0), axis=-1).astype(jnp.int32)
        num_considered = jnp.clip(num_valid, 0, root.max_num_considered_actions)
        # The simulation's index is the root's visits; past the last simulation the
        # choice is never used, and the index stays in the table.
        simulation = jnp.clip(jnp.sum(visits, axis=-1).astype(jnp.int32), 0, root.num_simulations - 1)
        considered = plgpu.load(table_ref.at[num_considered * root.num_simulations + simulation], mask=on_path,
                                other=0)
        store(0, *_choose_root(index, prior, visits, *rest, gumbel, invalid != 0,
                               considered.astype(jnp.float32)[:, None], columns, real, root))

    def interior_row():
        _, _, index, prior, visits, reward, discount, value, raw_value = load(d)
        store(d, *_choose(index, prior, visits, reward, discount, value, raw_value, columns, real, rule))

    if root is None:
        interior_row()
    else:
        pl.when(d == 0)(root_row)
        pl.when(d > 0)(interior_row)


def choices(stats: chex.Array, children_index: chex.Array, prior_logits: chex.Array, rows: chex.Array,
            rule: GumbelRule, columns: StatColumns, interpret: bool = False, root: Optional[GumbelRootRule] = None,
            root_gumbel: Optional[chex.Array] = None, root_invalid_actions: Optional[chex.Array] = None):
    """The rule's action and the child it leads to (``Tree.UNVISITED`` if none) for each of
    the nodes ``rows int32[B, D]`` of a packed tree (``stats float32[B, N+1, S]`` with its
    ``columns``, ``children_index int32[B, N+1, A]``, ``prior_logits float32[B, N+1, A]``);
    a row ``>= N+1`` is skipped (its outputs are unspecified). With ``root``, each game's
    first row is its root, chosen by Gumbel's root rule instead (with ``root_gumbel
    [B, A]`` and ``root_invalid_actions [B, A]``, mctx's ``extra_data.root_gumbel`` and
    ``tree.root_invalid_actions``). ``interpret``: run the kernel with Pallas's
    interpreter (any backend), else compiled by Triton (a GPU)."""
    if stats.dtype != jnp.float32 or prior_logits.dtype != jnp.float32:
        raise ValueError(f"the choice kernel takes float32 statistics and priors, got {stats.dtype} and "
                         f"{prior_logits.dtype}")
    games, shared = (stats, children_index, prior_logits, rows.astype(jnp.int32)), ()
    if root is not None:
        chex.assert_shape([root_gumbel, root_invalid_actions], (children_index.shape[0], children_index.shape[-1]))
        games += (root_gumbel.astype(jnp.float32), root_invalid_actions.astype(jnp.float32))
        table = seq_halving.get_table_of_considered_visits(root.max_num_considered_actions, root.num_simulations)
        shared = (jnp.asarray(np.asarray(table, np.int32).reshape(-1)),)
    kernel = functools.partial(_choices_of_games, rule=rule, columns=columns, interpret=interpret, root=root)
    return on_each_device(kernel, *games, shared=shared)  # with the games split over devices, each device's own


def _choices_of_games(stats, children_index, prior_logits, rows, root_gumbel=None, root_invalid_actions=None,
                      table=None, *,
                      rule: GumbelRule, columns: StatColumns, interpret: bool, root: Optional[GumbelRootRule]):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    batch_size, num_nodes, num_actions = children_index.shape
    num_rows = rows.shape[1]
    # Only the rows are padded to whole blocks: a padded game's rows are past its walk's
    # end, so the kernel reads nothing of the tree for it (padding the tree would copy it).
    padded = pl.cdiv(batch_size, BLOCK) * BLOCK
    rows = jnp.pad(rows, ((0, padded - batch_size), (0, 0)), constant_values=num_nodes)
    flat = lambda x: x.reshape(-1)  # noqa: E731
    inputs = [flat(stats), flat(children_index), flat(prior_logits), flat(rows)]
    if root is not None:
        inputs += [flat(root_gumbel), flat(root_invalid_actions), table]
    kernel = functools.partial(_kernel, num_nodes=num_nodes, num_actions=num_actions,
                               width=pl.next_power_of_2(num_actions), num_rows=num_rows, columns_of=columns,
                               num_stats=stats.shape[-1], rule=rule, root=root)
    out = jax.ShapeDtypeStruct((padded * num_rows,), jnp.int32)
    action, next_node = pl.pallas_call(
        kernel, out_shape=(out, out), grid=(padded // BLOCK, num_rows), interpret=interpret,
        compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1), name="search_choices",
    )(*inputs)
    unflat = lambda x: x.reshape(padded, num_rows)[:batch_size]  # noqa: E731
    return unflat(action), unflat(next_node)
