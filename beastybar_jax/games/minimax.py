"""Perfect play of a small game by exhaustive minimax: every position reachable from
``init``, solved, and the ``minimax`` agent's act function on top.

For any two-player zero-sum :class:`~beastybar_jax.games.Game` with no chance and
perfect information whose reachable positions fit in memory (tic-tac-toe: 5,478).
The positions are enumerated once, on first use, breadth first with the game's own
``step`` (batched and compiled), and solved on the host by backward induction; under
``jit`` a position is found by a 32-bit fingerprint of its arrays (one binary search).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.games.base import Game

_CHUNK = 1024  # positions expanded per compiled call
_ILLEGAL = -2.0  # action_values where there is no move


class Solution(NamedTuple):
    """Every reachable position of a game, solved. Row 0 is the initial position.

    Attributes:
      states: the positions, a host state batch ``[N]`` in breadth-first order.
      value: ``float32[N]`` the outcome under perfect play for the player to move;
        at a finished game, its outcome (``rewards``) for the player who would move.
      action_values: ``float32[N, A]`` each move's outcome for the mover under perfect
        play afterwards; ``-2`` on illegal moves and at finished games.
      optimal: ``bool[N, A]`` the moves achieving ``value`` (none when finished).
      paths: ``int64[N]`` move sequences from the initial position that reach it.
      fingerprints: ``uint32[N]`` each position's fingerprint (all distinct).
      multipliers: ``uint32[L]`` the fingerprint's weights of the flat state.
    """

    states: Any
    value: np.ndarray
    action_values: np.ndarray
    optimal: np.ndarray
    paths: np.ndarray
    fingerprints: np.ndarray
    multipliers: np.ndarray


def _flat(states) -> jax.Array:
    """The state's arrays as ``int32`` arrays (floats by their bits)."""
    parts = []
    for x in jax.tree.leaves(states):
        x = jnp.asarray(x)
        if jnp.issubdtype(x.dtype, jnp.floating):
            x = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.int32)
        parts.append(x.astype(jnp.int32))
    return parts


def _fingerprint(state, multipliers) -> jax.Array:
    """``uint32[]`` the fingerprint of one unbatched state."""
    flat = jnp.concatenate([jnp.ravel(x) for x in _flat(state)]).astype(jnp.uint32)
    return jnp.sum(flat * jnp.asarray(multipliers), dtype=jnp.uint32)


def _expand(game: Game):
    @jax.jit
    def expand(states):  # [C] -> next states [C, A], legal [C, A]
        actions = jnp.arange(game.num_actions, dtype=jnp.int32)
        step_all = jax.vmap(jax.vmap(game.step, in_axes=(None, 0)), in_axes=(0, None))
        return step_all(states, actions), jax.vmap(game.legal_action_mask)(states)

    return expand


def _rows(states) -> np.ndarray:
    """``int32[N, L]`` the flat integer view of a host batch (as ``_flat``, in numpy)."""
    parts = []
    for x in jax.tree.leaves(states):
        x = np.asarray(x)
        x = x.astype(np.float32).view(np.int32) if np.issubdtype(x.dtype, np.floating) else x.astype(np.int32)
        parts.append(x.reshape(x.shape[0], -1))
    return np.concatenate(parts, axis=1)


def _take(states, index):
    return jax.tree.map(lambda x: np.asarray(x)[index], states)


def solve(game: Game) -> Solution:
    """The solved game (computed once per process per game; arrays read-only). Callable
    while a function is traced: the enumeration runs eagerly all the same."""
    with jax.ensure_compile_time_eval():
        return _solve(game)


@functools.lru_cache(maxsize=None)
def _solve(game: Game) -> Solution:
    expand = _expand(game)
    root = jax.tree.map(lambda x: np.asarray(x)[None], jax.device_get(game.init(jax.random.key(0))))
    rows, batches = [_rows(root)[0]], [root]
    seen = {rows[0].tobytes(): 0}
    children = []  # per expanded batch: int64[M, A] child rows (-1: no move)
    frontier = root
    while True:
        n = len(frontier.current_player)
        found = []
        for start in range(0, n, _CHUNK):
            chunk = _take(frontier, np.minimum(np.arange(start, start + _CHUNK), n - 1))
            after, legal = jax.device_get(expand(chunk))
            count = min(_CHUNK, n - start)
            after = _take(after, slice(0, count))
            legal = np.asarray(legal)[:count] & ~np.asarray(_take(chunk, slice(0, count)).terminated)[:, None]
            after_rows = _rows(jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), after))
            ids = np.full(legal.shape, -1, np.int64)
            new = []
            for m, a in zip(*np.nonzero(legal)):
                key = after_rows[m * game.num_actions + a].tobytes()
                if key not in seen:
                    seen[key] = len(seen)
                    new.append(m * game.num_actions + a)
                ids[m, a] = seen[key]
            children.append(ids)
            if new:
                found.append(_take(jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), after), np.array(new)))
                rows.extend(after_rows[new])
        if not found:
            break
        frontier = jax.tree.map(lambda *xs: np.concatenate(xs), *found)
        batches.append(frontier)
    states = jax.tree.map(lambda *xs: np.concatenate(xs), *batches)
    child = np.concatenate(children)  # [N, A]
    terminated = np.asarray(states.terminated)
    mover = np.asarray(states.current_player).astype(np.int64)
    final = np.take_along_axis(np.asarray(states.rewards, np.float32), mover[:, None], axis=1)[:, 0]

    # Backward induction, as sweeps: positions at most max_game_length moves from the end.
    legal = child >= 0
    safe = np.where(legal, child, 0)
    same_mover = mover[safe] == mover[:, None]
    value = np.where(terminated, final, 0.0).astype(np.float32)
    for _ in range(game.max_game_length + 1):
        q = np.where(legal, np.where(same_mover, value[safe], -value[safe]), _ILLEGAL).astype(np.float32)
        value = np.where(terminated, final, q.max(axis=1)).astype(np.float32)
    optimal = legal & (q == value[:, None])
    # Forward: move sequences reaching each position, in breadth-first order.
    paths = np.zeros(len(value), np.int64)
    paths[0] = 1
    for i in range(len(value)):
        np.add.at(paths, child[i][legal[i]], paths[i])
    flat = np.stack(rows)
    for seed in range(100):  # fingerprint weights without a collision among the positions
        multipliers = (np.random.default_rng(seed).integers(1, 2**31, size=flat.shape[1], dtype=np.uint32) * 2 + 1)
        fingerprints = (flat.astype(np.uint32) * multipliers).sum(axis=1, dtype=np.uint32)
        if len(np.unique(fingerprints)) == len(fingerprints):
            break
    else:
        raise RuntimeError(f"{game.name}: no collision-free fingerprint found")
    solution = Solution(states=states, value=value, action_values=q, optimal=optimal, paths=paths,
                        fingerprints=fingerprints, multipliers=multipliers)
    for array in (value, q, optimal, paths, fingerprints, multipliers, *jax.tree.leaves(states)):
        array.setflags(write=False)
    return solution


def position(solution: Solution, state) -> jax.Array:
    """``int32[]`` the row of one unbatched reachable ``state`` in ``solution`` (jittable)."""
    order = np.argsort(solution.fingerprints)
    key = _fingerprint(state, solution.multipliers)
    return jnp.asarray(order, jnp.int32)[jnp.searchsorted(jnp.asarray(solution.fingerprints[order]), key)]


def minimax_value(game: Game, state) -> jax.Array:
    """``float32[]`` the perfect-play outcome for ``state``'s player to move (jittable)."""
    solution = solve(game)
    return jnp.asarray(solution.value)[position(solution, state)]


def optimal_actions(game: Game, state) -> jax.Array:
    """``bool[A]`` the moves that keep the perfect-play outcome (jittable); none once over."""
    solution = solve(game)
    return jnp.asarray(solution.optimal)[position(solution, state)] & game.legal_action_mask(state)


def exact_moves(game: Game, state) -> dict:
    """Perfect play's outcome of ``state`` and of each of its moves for the player to move
    (jittable; the ``Game.solver.exact_moves`` hook of a small game). A point game's margin is
    its result here: the table holds outcomes only."""
    solution = solve(game)
    row = position(solution, state)
    values = jnp.asarray(solution.action_values)[row].astype(jnp.int32)
    value = jnp.asarray(solution.value)[row].astype(jnp.int32)
    return {"solved": ~state.terminated, "result": value, "margin": value, "action_result": values,
            "action_margin": values, "action_exact": values > int(_ILLEGAL)}


def minimax_act(game: Game):
    """``act(state, key) -> int32[]``: a uniformly random optimal move (0 once the game is
    over), the ``minimax`` agent of a small game."""

    solve(game)  # now, not at the first trace

    def act(state, key: jax.Array) -> jax.Array:
        optimal = optimal_actions(game, state)
        choice = jax.random.categorical(key, jnp.where(optimal, 0.0, -jnp.inf))
        return jnp.where(jnp.any(optimal), choice, 0).astype(jnp.int32)

    return act
