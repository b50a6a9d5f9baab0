"""Exact targets (``alphazero.exact_value_targets``, ``exact_policy_targets``): a transform
of the records self-play played in an iteration, before they enter the replay buffer.

Every position played in the iteration goes to the game's solver
(``Game.solver.exact_values``; with policy targets ``exact_actions``) in one batch, within
a static work budget. A solved position's value target becomes its exact result for the
player to move, and with policy targets its policy target becomes the search's restricted
to the moves that keep that result (:func:`exact_policy_target`); the record is marked
``exact``, so labelling keeps its value target. A position whose game is still running
gets the same in its slot's trajectory, where it waits for the game to end.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from beastybar_jax.alphazero.selfplay import PlayedMoves, SelfPlayState, end_moves
from beastybar_jax.games.base import Game


def exact_policy_target(search_policy: jax.Array, keeps: jax.Array, solved: jax.Array) -> jax.Array:
    """``float32[N, A]`` policy targets of solved positions: the search's target
    (``[N, A]``) restricted to the result-keeping moves ``keeps`` (``bool[N, A]``) and
    renormalized, or uniform over them where the search gave them no weight. The
    search's target where a position is not ``solved`` or no move is marked."""
    keeps = keeps & solved[:, None]
    kept = jnp.where(keeps, search_policy, 0.0)
    mass = jnp.sum(kept, axis=-1, keepdims=True)
    count = jnp.sum(keeps, axis=-1, keepdims=True)
    target = jnp.where(mass > 0, kept / jnp.maximum(mass, 1e-30), keeps / jnp.maximum(count, 1))
    return jnp.where(count > 0, target, search_policy).astype(jnp.float32)


def apply(game: Game, played: PlayedMoves, state: SelfPlayState, budget: int = 0, policy_targets: bool = False,
          lanes: int = 0):
    """Solve the positions of ``played`` (``[M, B]``, :func:`~beastybar_jax.alphazero.selfplay.play_moves`)
    in one batch within ``budget`` solver iterations (0: no limit), ``lanes`` of them side by
    side (0: the solver's choice), and give each solved one its exact targets: in
    ``played``'s records, and in ``state``'s trajectory where its game is still running.
    Returns ``(played, state, number of positions solved)``."""
    num_moves, num_games = played.index.shape
    flat = jax.tree.map(lambda x: x.reshape((num_moves * num_games,) + x.shape[2:]), played.games)
    record = played.record
    if policy_targets:
        solved, value, keeps = game.solver.exact_actions(flat, budget, lanes)
        policy = exact_policy_target(record.policy.reshape(num_moves * num_games, -1), keeps, solved)
        record = record.replace(policy=policy.reshape(record.policy.shape))
    else:
        solved, value = game.solver.exact_values(flat, budget, lanes)
    solved = solved.reshape(num_moves, num_games)
    value = value.reshape(num_moves, num_games).astype(jnp.float32)
    record = record.replace(value=jnp.where(solved, value, record.value), exact=record.exact | solved)

    # Positions of games still running: their slot's trajectory holds them until the game ends.
    running = solved & (end_moves(played.done) == num_moves)
    rows = jnp.broadcast_to(jnp.arange(num_games)[None, :], running.shape).reshape(-1)
    column = jnp.where(running, played.index, state.trajectory.player.shape[1]).reshape(-1)  # out of range: dropped
    at = lambda stored, new: stored.at[rows, column].set(new.reshape((-1,) + stored.shape[2:]), mode="drop")  # noqa: E731
    trajectory = state.trajectory
    trajectory = trajectory.replace(value=at(trajectory.value, value), exact=at(trajectory.exact, jnp.ones_like(solved)))
    if policy_targets:
        trajectory = trajectory.replace(policy=at(trajectory.policy, record.policy))
    return played.replace(record=record), state.replace(trajectory=trajectory), jnp.sum(solved, dtype=jnp.int32)
