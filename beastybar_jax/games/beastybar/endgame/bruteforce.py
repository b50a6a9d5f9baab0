"""An independent, slow reference for the solver: full enumeration of the game tree.

No pruning, no search order, no JAX control flow: the whole tree below each
position is expanded level by level on the host (NumPy), every edge by the
engine's own ``step`` (batched: one jitted call per level steps every legal
(node, action) pair of that level), and values are backed up by plain negamax
over the recorded edges. A leaf's value is read from the engine's finished game:
its point margin from ``scores`` and its result from ``rewards`` (checked to
agree). Used by the tests to prove the solver exact, and to measure tree sizes.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.games.beastybar import engine as game

NUM_ACTIONS = game.NUM_ACTIONS


@dataclasses.dataclass
class BruteForce:
    """Exact values of ``P`` positions, from each position's player to move.

    Attributes:
      margin: ``int32[P]`` final point margin (mover minus opponent) under best play.
      action_margin: ``int32[P, A]`` the same after each legal action (0 where illegal).
      legal: ``bool[P, A]``.
      nodes: ``int64[P]`` positions in each full tree (the root and every node
        below it, finished games included).
    """

    margin: np.ndarray
    action_margin: np.ndarray
    legal: np.ndarray
    nodes: np.ndarray

    @property
    def result(self) -> np.ndarray:
        return np.sign(self.margin)

    @property
    def action_result(self) -> np.ndarray:
        return np.sign(self.action_margin)


CHUNK = 4096  # states per engine call; every call has this size, so each function compiles once


def _legal(states):
    return jax.vmap(game.legal_action_mask)(states)


def _children(states, actions):
    children = jax.vmap(game.step)(states, actions)
    scores = children.scores
    mover = children.current_player.astype(jnp.int32)
    mine = jnp.where(mover == 0, scores[:, 0], scores[:, 1])
    theirs = jnp.where(mover == 0, scores[:, 1], scores[:, 0])
    reward = jnp.where(mover == 0, children.rewards[:, 0], children.rewards[:, 1])
    return children, children.terminated, mine - theirs, reward


@functools.lru_cache(maxsize=None)
def _compiled(fn):
    example = jax.tree.map(lambda x: jax.ShapeDtypeStruct((CHUNK,) + x.shape, x.dtype), game.init(jax.random.key(0)))
    args = (example,) if fn is _legal else (example, jax.ShapeDtypeStruct((CHUNK,), jnp.int32))
    return jax.jit(fn).lower(*args).compile()


def _chunked(fn, tree, *arrays):
    """``fn`` over a host batch in chunks of ``CHUNK`` (the last one padded), results
    concatenated and cut back."""
    n = jax.tree.leaves(tree)[0].shape[0]
    compiled = _compiled(fn)
    outputs = []
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        pad = lambda x: np.concatenate([x[start:stop], np.repeat(x[start:start + 1], CHUNK - (stop - start), axis=0)])
        out = compiled(jax.tree.map(pad, tree), *map(pad, arrays))
        outputs.append(jax.tree.map(lambda x: np.asarray(x)[:stop - start], out))
    return jax.tree.map(lambda *xs: np.concatenate(xs), *outputs)


def solve_by_enumeration(states: game.State) -> BruteForce:
    """Full negamax over the whole tree of each state of a host batch ``[P]``."""
    states = jax.tree.map(np.asarray, states)
    num_positions = states.current_player.shape[0]
    if np.any(states.terminated):
        raise ValueError("solve_by_enumeration needs unfinished positions")
    frontier = states
    owner = np.arange(num_positions)  # root of each frontier node
    levels = []  # per level: (parent, action, terminal, leaf value, index of the child in the next level)
    nodes = np.ones(num_positions, np.int64)
    legal_roots = None
    while owner.size:
        legal = _chunked(_legal, frontier)
        if legal_roots is None:
            legal_roots = legal
        if not legal.any(axis=1).all():
            raise AssertionError("an unfinished position without a legal action")
        parent, action = np.nonzero(legal)
        children, terminal, margin, reward = _chunked(
            _children, jax.tree.map(lambda x: x[parent], frontier), action.astype(np.int32))
        if not np.array_equal(np.sign(margin[terminal]), reward[terminal]):
            raise AssertionError("the engine's rewards disagree with its scores")
        np.add.at(nodes, owner[parent], 1)
        next_index = np.full(parent.size, -1)
        next_index[~terminal] = np.arange(int((~terminal).sum()))
        levels.append((parent, action, terminal, margin, next_index, owner.size))
        frontier = jax.tree.map(lambda x: x[~terminal], children)
        owner = owner[parent][~terminal]

    value_below = np.zeros(0, np.int64)  # values (for their own mover) of the next level's nodes
    for parent, action, terminal, margin, next_index, size in reversed(levels):
        below = value_below[np.maximum(next_index, 0)] if value_below.size else np.zeros_like(margin)
        child_value = np.where(terminal, margin, below)  # for the child's mover
        value_below = np.full(size, np.iinfo(np.int64).min)
        np.maximum.at(value_below, parent, -child_value)
    parent, action = levels[0][0], levels[0][1]
    action_margin = np.zeros((num_positions, NUM_ACTIONS), np.int32)
    action_margin[parent, action] = -child_value
    return BruteForce(margin=value_below.astype(np.int32), action_margin=action_margin,
                      legal=legal_roots, nodes=nodes)
