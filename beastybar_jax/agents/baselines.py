"""Baselines without look-ahead beyond one move: ``random`` and ``greedy``."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from beastybar_jax import game
from beastybar_jax.agents.base import Agent, one_ply, random_best, uniform_choice


def random_act(state: game.State, key: jax.Array) -> jax.Array:
    """A uniformly random legal action."""
    return uniform_choice(game.legal_action_mask(state), key)


def greedy_act(state: game.State, key: jax.Array) -> jax.Array:
    """The move with the best bar-points difference (mover minus opponent) right
    after it; ties (most turns: no card enters the bar) broken at random."""
    world_key, tie_key = jax.random.split(key)
    world, after, mask = one_ply(state, world_key)
    mover = world.current_player.astype(jnp.int32)
    scores = after.scores  # [A, 2]
    margin = (scores[:, mover] - scores[:, 1 - mover]).astype(jnp.float32)
    return random_best(margin, mask, tie_key)


def random_agent() -> Agent:
    return Agent("random", random_act)


def greedy_agent() -> Agent:
    return Agent("greedy", greedy_act)
