"""Tic-tac-toe as pure JAX array functions (pgx-style: init / step / observe / mask),
a second :class:`~beastybar_jax.games.Game` with known perfect play.

Perfect play is in :mod:`beastybar_jax.tictactoe.minimax` (the solved table); the
``minimax`` agent built on it is ``beastybar_jax.agents.perfect.minimax_agent`` (registry
name ``minimax``).
"""

from beastybar_jax.tictactoe.core import LINES, NUM_ACTIONS, NUM_CELLS, has_line, init, legal_action_mask, step
from beastybar_jax.tictactoe.env import TICTACTOE, TICTACTOE_TOKENS, score_margin
from beastybar_jax.tictactoe.observe import OBSERVATION_LAYOUT, OBSERVATION_SIZE, observe, sample_world, split_observation
from beastybar_jax.tictactoe.render import ACTION_NAMES, MARKS, action_id, action_name, render_action, render_state
from beastybar_jax.tictactoe.state import State

__all__ = [
    "ACTION_NAMES", "LINES", "MARKS", "NUM_ACTIONS", "NUM_CELLS", "OBSERVATION_LAYOUT", "OBSERVATION_SIZE",
    "State", "TICTACTOE", "TICTACTOE_TOKENS", "action_id", "action_name", "has_line", "init",
    "legal_action_mask", "observe", "render_action", "render_state", "sample_world", "score_margin",
    "split_observation", "step",
]
