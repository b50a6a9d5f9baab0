"""Beasty Bar as pure JAX array functions (pgx-style: init / step / observe / mask)."""

from beastybar_jax.game.actions import (
    ACTION_NAMES,
    NUM_ACTIONS,
    action_id,
    action_name,
    from_notation,
    to_notation,
)
from beastybar_jax.game.cards import NUM_CARDS, NUM_PLAYERS, NUM_SPECIES, POINTS, SPECIES_NAMES
from beastybar_jax.game.core import init, init_from_deal, legal_action_mask, step
from beastybar_jax.game.env import BEASTYBAR, BEASTYBAR_TOKENS, Game, TokenLayout
from beastybar_jax.game.observe import (
    OBSERVATION_LAYOUT,
    OBSERVATION_SIZE,
    observe,
    sample_world,
    split_observation,
)
from beastybar_jax.game.render import render_action, render_state
from beastybar_jax.game.state import State

__all__ = [
    "BEASTYBAR", "BEASTYBAR_TOKENS", "Game", "TokenLayout", "ACTION_NAMES", "NUM_ACTIONS", "OBSERVATION_LAYOUT", "OBSERVATION_SIZE", "observe",
    "render_action", "render_state", "sample_world", "split_observation", "NUM_CARDS", "NUM_PLAYERS", "NUM_SPECIES", "POINTS",
    "SPECIES_NAMES", "State", "action_id", "action_name", "from_notation", "init",
    "init_from_deal", "legal_action_mask", "step", "to_notation",
]
