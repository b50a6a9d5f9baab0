"""Perfect endgames: an exact solver on the device, the ``solver+<agent>`` agent, and
a yardstick of solved positions.

Once the opponent's deck is empty and the mover's holds at most its last card,
nothing is hidden and nothing is left to chance: the rest of the game is solved
exactly by ``solve`` (alpha-beta over the engine's ``step``, batched, jittable).
"""

from beastybar_jax.games.beastybar.endgame.positions import MAX_PLIES, is_solvable
from beastybar_jax.games.beastybar.endgame.solver import (
    MODES,
    Solution,
    SolverConfig,
    SolverConfigError,
    batched_solver,
    solve,
    solve_position,
)

__all__ = ["MAX_PLIES", "MODES", "Solution", "SolverConfig", "SolverConfigError", "batched_solver",
           "is_solvable", "solve", "solve_position"]
