"""Gumbel MuZero's interior rule for the rows a simulation changed, as one Pallas kernel.

After each simulation the static loop (:mod:`beastybar_jax.search.device_loop`)
recomputes the cached interior choice of every row on the walked path: ``[B, D]`` rows,
``D`` the loop's depth bound, though most walks stop after a few steps. As XLA
operations the rule (two softmaxes, the mixed value, the rescaled Q-values, an argmax:
about ten reductions over each row's ``A`` children) is eight kernels, each writing
``[B, D, A]`` floats for the next to read back: at 4,096 games x 64 simulations ~345 of
the ~480 MB a simulation moves (``benchmark.py search --compile-for h100``). Here it is
one kernel: a program takes a block of games and, for each row of their paths, loads
the row's children (their indices and prior logits), gathers the visited children's
statistics from their own rows and keeps everything else in registers; rows past a
walk's end are masked loads, which read nothing.

The rule is mctx's ``gumbel_muzero_interior_action_selection`` with
``qtransform_completed_by_mix_value`` (its keyword arguments read from the search's
``interior_action_selection_fn``): the same arithmetic in the same order, each
reduction over the row's ``A`` children (Triton's blocks are powers of two: the padded
columns are left out of every reduction). Sums may be added in another order than
XLA's, so a choice between two children whose scores differ in the last bit can differ
from stock mctx's (``tests/test_device_loop.py`` compares the two on random trees).
:func:`rule_of` returns ``None`` for any other rule (PUCT draws random tie-breaking
noise, which a Triton kernel cannot): the XLA operations stay in use for it.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import chex
import jax
import jax.numpy as jnp
from mctx._src import action_selection, qtransforms
from mctx._src.tree import Tree

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


def rule_of(interior_action_selection_fn) -> Optional[GumbelRule]:
    """The :class:`GumbelRule` of mctx's Gumbel interior rule as ``gumbel_muzero_policy``
    passes it (a ``functools.partial`` with its ``qtransform``), or ``None`` for any
    other rule or an argument that is not a plain number."""
    fn = interior_action_selection_fn
    if not (isinstance(fn, functools.partial) and fn.func is action_selection.gumbel_muzero_interior_action_selection
            and set(fn.keywords) <= {"qtransform"} and not fn.args):
        return None
    qtransform = fn.keywords.get("qtransform", qtransforms.qtransform_completed_by_mix_value)
    if qtransform is qtransforms.qtransform_completed_by_mix_value:
        return GumbelRule()
    if not (isinstance(qtransform, functools.partial) and qtransform.func is qtransforms.qtransform_completed_by_mix_value
            and not qtransform.args and set(qtransform.keywords) <= set(GumbelRule._fields)):
        return None
    if not all(isinstance(v, (bool, int, float)) for v in qtransform.keywords.values()):
        return None  # a traced scale: not a constant of the kernel
    return GumbelRule(**qtransform.keywords)


def _choose(index, prior, visits, reward, discount, value, raw_value, columns, real, rule: GumbelRule):
    """The rule on ``[G, W]`` rows (``columns [W]``, of which ``real [W]`` are the row's
    ``A`` children): mctx's arithmetic, each reduction over the real columns only.
    Returns ``(action [G], next node [G])``."""
    keep = lambda x, fill: jnp.where(real[None, :], x, fill)  # noqa: E731
    total = lambda x: jnp.sum(keep(x, 0.0), axis=-1, keepdims=True)  # noqa: E731

    def softmax(logits):  # jax.nn.softmax's: exp(x - max) / sum
        unnormalized = jnp.exp(logits - jnp.max(keep(logits, -jnp.inf), axis=-1, keepdims=True))
        return unnormalized / total(unnormalized)

    visited = visits > 0
    qvalues = reward + discount * value  # Tree.qvalues: the children's rewards + discounts * values
    sum_visits = total(visits)
    if rule.use_mixed_value:  # qtransforms._compute_mixed_value
        prior_probs = jnp.maximum(jnp.finfo(jnp.float32).tiny, softmax(prior))
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
    completed = visit_scale * rule.value_scale * completed
    to_argmax = softmax(prior + completed) - visits / (1 + sum_visits)  # action_selection._prepare_argmax_input
    action = jnp.argmax(keep(to_argmax, -jnp.inf), axis=-1).astype(jnp.int32)
    next_node = jnp.sum(jnp.where(columns[None, :] == action[:, None], index, 0), axis=-1)
    return action, next_node


def _kernel(stats_ref, index_ref, prior_ref, rows_ref, action_ref, next_ref, *, num_nodes: int, num_actions: int,
            width: int, num_rows: int, columns_of: StatColumns, num_stats: int, rule: GumbelRule):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    games = pl.program_id(0) * BLOCK + jnp.arange(BLOCK, dtype=jnp.int32)
    columns = jnp.arange(width, dtype=jnp.int32)
    real = columns < num_actions

    def row(d, carry):
        node = rows_ref[games * num_rows + d]  # [G]; num_nodes and beyond: past the walk's end
        on_path = node < num_nodes
        first = (games * num_nodes + jnp.where(on_path, node, 0)) * num_actions  # [G]
        cells = first[:, None] + columns[None, :]
        present = on_path[:, None] & real[None, :]
        index = plgpu.load(index_ref.at[cells], mask=present, other=Tree.UNVISITED)
        prior = plgpu.load(prior_ref.at[cells], mask=present, other=-jnp.inf)
        own = (games * num_nodes + jnp.where(on_path, node, 0)) * num_stats
        raw_value = plgpu.load(stats_ref.at[own + columns_of.raw_value], mask=on_path, other=0.0)[:, None]
        visited = index >= 0
        child = (games[:, None] * num_nodes + jnp.maximum(index, 0)) * num_stats
        stat = lambda k: plgpu.load(stats_ref.at[child + k], mask=visited, other=0.0)  # noqa: E731  unvisited: zeros
        action, next_node = _choose(index, prior, stat(columns_of.visits), stat(columns_of.reward),
                                    stat(columns_of.discount), stat(columns_of.value), raw_value, columns, real, rule)
        action_ref[games * num_rows + d] = action
        next_ref[games * num_rows + d] = next_node
        return carry

    jax.lax.fori_loop(0, num_rows, row, 0)


def choices(stats: chex.Array, children_index: chex.Array, prior_logits: chex.Array, rows: chex.Array,
            rule: GumbelRule, columns: StatColumns, interpret: bool = False):
    """The rule's action and the child it leads to (``Tree.UNVISITED`` if none) for each of
    the nodes ``rows int32[B, D]`` of a packed tree (``stats float32[B, N+1, S]`` with its
    ``columns``, ``children_index int32[B, N+1, A]``, ``prior_logits float32[B, N+1, A]``);
    a row ``>= N+1`` is skipped (its outputs are unspecified). ``interpret``: run the
    kernel with Pallas's interpreter (any backend), else compiled by Triton (a GPU)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    batch_size, num_nodes, num_actions = children_index.shape
    num_rows = rows.shape[1]
    if stats.dtype != jnp.float32 or prior_logits.dtype != jnp.float32:
        raise ValueError(f"the choice kernel takes float32 statistics and priors, got {stats.dtype} and "
                         f"{prior_logits.dtype}")
    # Only the rows are padded to whole blocks: a padded game's rows are past its walk's
    # end, so the kernel reads nothing of the tree for it (padding the tree would copy it).
    padded = pl.cdiv(batch_size, BLOCK) * BLOCK
    rows = jnp.pad(rows.astype(jnp.int32), ((0, padded - batch_size), (0, 0)), constant_values=num_nodes)
    flat = lambda x: x.reshape(-1)  # noqa: E731
    kernel = functools.partial(_kernel, num_nodes=num_nodes, num_actions=num_actions,
                               width=pl.next_power_of_2(num_actions), num_rows=num_rows, columns_of=columns,
                               num_stats=stats.shape[-1], rule=rule)
    out = jax.ShapeDtypeStruct((padded * num_rows,), jnp.int32)
    action, next_node = pl.pallas_call(
        kernel, out_shape=(out, out), grid=(padded // BLOCK,), interpret=interpret,
        compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1), name="search_choices",
    )(flat(stats), flat(children_index), flat(prior_logits), flat(rows))
    unflat = lambda x: x.reshape(padded, num_rows)[:batch_size]  # noqa: E731
    return unflat(action), unflat(next_node)
