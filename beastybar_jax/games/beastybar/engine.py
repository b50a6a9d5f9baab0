"""The engine's API in one namespace (``from beastybar_jax.games.beastybar import engine as game``):
what the endgame solver, the conformance reader and the heuristics use, without the
:class:`~beastybar_jax.games.Game` record that is built on them (``env``)."""


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

__all__ = [
    "ACTION_NAMES", "NUM_ACTIONS", "OBSERVATION_LAYOUT", "OBSERVATION_SIZE", "observe",
    "render_action", "render_state", "sample_world", "split_observation", "NUM_CARDS", "NUM_PLAYERS", "NUM_SPECIES", "POINTS",
    "SPECIES_NAMES", "State", "action_id", "action_name", "from_notation", "init",
    "init_from_deal", "legal_action_mask", "step", "to_notation",
]
