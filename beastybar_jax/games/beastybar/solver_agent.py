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


def solver_act(fallback, config: SolverConfig = AGENT_SOLVER):
    """``act`` that plays a best move (the largest final point margin under best play,
    hence also a result-optimal one; ties at random) in every solvable position
    (``is_solvable``) and the ``fallback`` act's move elsewhere (the registry's
    ``solver+<agent>``)."""
    if config.mode == "results":
        raise ValueError("the solver agent needs exact margins: use mode 'best' or 'margins'")

    def act(state: State, key: jax.Array) -> jax.Array:
        world_key, tie_key, fallback_key = jax.random.split(key, 3)
        world = sample_world(state, state.current_player, world_key)
        solution = solve_position(world, config)
        best = random_best(solution.action_margin.astype(jnp.float32), solution.best_actions, tie_key)
        other = fallback(state, fallback_key)
        return jnp.where(is_solvable(state) & solution.solved, best, other).astype(jnp.int32)

    return act
