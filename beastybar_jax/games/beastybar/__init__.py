"""Beasty Bar: everything that knows its rules.

The engine as pure JAX array functions (pgx-style: ``cards``, ``actions``, ``state``,
``queue``, ``core``, ``observe``, ``render``), the reference project's baseline agents
(``heuristics``), the exact endgame solver and its yardstick suite (``endgame``, the
``solver+<agent>`` agent in ``solver_agent``), the rules' conformance corpus reader
(``conformance``), and :data:`BEASTYBAR`, the :class:`~beastybar_jax.games.Game` that
registers them (``env``).

The engine names are bound before ``env`` is imported: the endgame modules ``env``
imports read them from this package while it loads.
"""

from beastybar_jax.games.beastybar.actions import (
    ACTION_NAMES,
    NUM_ACTIONS,
    action_id,
    action_name,
    from_notation,
    to_notation,
)
from beastybar_jax.games.beastybar.cards import NUM_CARDS, NUM_PLAYERS, NUM_SPECIES, POINTS, SPECIES_NAMES
from beastybar_jax.games.beastybar.core import init, init_from_deal, legal_action_mask, step
from beastybar_jax.games.beastybar.observe import (
    OBSERVATION_LAYOUT,
    OBSERVATION_SIZE,
    observe,
    sample_world,
    split_observation,
)
from beastybar_jax.games.beastybar.render import render_action, render_state
from beastybar_jax.games.beastybar.state import State
from beastybar_jax.games.beastybar.env import BEASTYBAR, BEASTYBAR_TOKENS  # noqa: E402  (last: see above)

__all__ = [
    "BEASTYBAR", "BEASTYBAR_TOKENS", "ACTION_NAMES", "NUM_ACTIONS", "OBSERVATION_LAYOUT", "OBSERVATION_SIZE", "observe",
    "render_action", "render_state", "sample_world", "split_observation", "NUM_CARDS", "NUM_PLAYERS", "NUM_SPECIES", "POINTS",
    "SPECIES_NAMES", "State", "action_id", "action_name", "from_notation", "init",
    "init_from_deal", "legal_action_mask", "step", "to_notation",
]
