"""The ``solver+<agent>`` agent (Beasty Bar): perfect play where the endgame can be
solved (``beastybar_jax.games.beastybar.endgame``), another agent elsewhere.

Fairness: the agent never reads the true hidden cards. It solves
``sample_world(state, mover, key)``, a world drawn from what the mover knows,
and decides whether to solve from deck sizes, which both players see. In a
solvable position that world IS the true state (the opponent's deck is empty, so
their hand is exactly their unseen cards, and the mover's deck holds at most its
one known card): nothing is hidden, which ``tests/test_endgame.py`` checks.
Elsewhere it plays the fallback agent's move, itself bound by the same contract.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from beastybar_jax.games.beastybar.observe import sample_world
from beastybar_jax.games.beastybar.state import State
from beastybar_jax.games.choice import random_best
from beastybar_jax.games.beastybar.endgame.positions import is_solvable
from beastybar_jax.games.beastybar.endgame.solver import SolverConfig, solve_position

# The agent's search: the exact margin of the position and its best moves.
AGENT_SOLVER = SolverConfig(mode="best")


def solver_act(fallback, config: SolverConfig = AGENT_SOLVER, *, batched: bool = False):
    """``act`` that plays a best move (the largest final point margin under best play,
    hence also a result-optimal one; ties at random) in every solvable position
    (``is_solvable``) and the ``fallback`` act's move elsewhere (the registry's
    ``solver+<agent>``). With ``batched``, ``fallback`` and the returned function take
    states ``[B]`` and keys ``[B]`` (an agent's ``act_batch``), with the same moves."""
    if config.mode == "results":
        raise ValueError("the solver agent needs exact margins: use mode 'best' or 'margins'")

    def solved_move(state: State, key: jax.Array):
        world_key, tie_key, fallback_key = jax.random.split(key, 3)
        world = sample_world(state, state.current_player, world_key)
        solution = solve_position(world, config)
        best = random_best(solution.action_margin.astype(jnp.float32), solution.best_actions, tie_key)
        return best, is_solvable(state) & solution.solved, fallback_key

    def act(state: State, key: jax.Array) -> jax.Array:
        best, solved, fallback_key = solved_move(state, key)
        return jnp.where(solved, best, fallback(state, fallback_key)).astype(jnp.int32)

    def act_batch(states: State, keys: jax.Array) -> jax.Array:
        best, solved, fallback_keys = jax.vmap(solved_move)(states, keys)
        return jnp.where(solved, best, fallback(states, fallback_keys)).astype(jnp.int32)

    return act_batch if batched else act
