"""The baseline every game has: ``random``, uniformly random legal moves. A game's own
baselines (Beasty Bar's ``greedy`` and heuristics) come with its :class:`Game` (``Game.agents.baselines``)."""

from __future__ import annotations

import functools

from beastybar_jax.agents.base import Agent, uniform_choice
from beastybar_jax.games.base import Game


@functools.lru_cache(maxsize=None)
def random_agent(game: Game) -> Agent:
    """Uniformly random legal moves (cached: one agent per game, so the arena's compiled
    matches are shared)."""
    return Agent("random", lambda state, key: uniform_choice(game.legal_action_mask(state), key), game=game.name)
