"""The agent record every player (baseline, search, network, human-facing CLI) shares.

An agent is a pure function ``act(state, key) -> action`` on ONE unbatched state,
acting for ``state.current_player``. It is jittable and vmappable, so a match of
thousands of games is ``jax.vmap(agent.act)`` inside one ``lax.scan`` (see
``beastybar_jax.arena``). Information-set fairness is part of the contract: an
agent may only use what the mover may know -- ``game.observe``, the legal mask,
or worlds drawn with ``game.sample_world(state, mover, key)``. Never the true
hidden cards.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp

from beastybar_jax.games.choice import TIE_TOLERANCE, random_best, uniform_choice

__all__ = ["ActFn", "Agent", "TIE_TOLERANCE", "random_best", "uniform_choice"]

ActFn = Callable[[Any, jax.Array], jax.Array]  # (one state, key) -> int32[] action


@dataclasses.dataclass(frozen=True)
class Agent:
    """A named policy.

    Attributes:
      name: the registry spec or a readable name (used in tables and JSON).
      act: ``act(state, key) -> int32[]`` action for ``state.current_player``;
        ONE unbatched state; pure, jittable, vmappable. Returns a legal action
        whenever one exists (on a finished game any id may come back; stepping
        a finished game is a no-op).
    """

    name: str
    act: ActFn

    def __repr__(self) -> str:  # the closure is noise in logs
        return f"Agent({self.name!r})"
