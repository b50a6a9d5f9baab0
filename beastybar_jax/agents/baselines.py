"""Baselines without look-ahead beyond one move: ``random`` (any game) and ``greedy`` (Beasty Bar)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from beastybar_jax import game
from beastybar_jax.games import Game
from beastybar_jax.agents.base import Agent, one_ply, random_best, uniform_choice


def random_act(state: game.State, key: jax.Array) -> jax.Array:
    """A uniformly random legal action (Beasty Bar)."""
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


@functools.lru_cache(maxsize=None)
def random_agent(game_: Game = game.BEASTYBAR) -> Agent:
    """Uniformly random legal moves, for any game (cached: one agent per game, so the
    arena's compiled matches are shared)."""
    if game_ is game.BEASTYBAR:
        return Agent("random", random_act)
    return Agent("random", lambda state, key: uniform_choice(game_.legal_action_mask(state), key))


def greedy_agent() -> Agent:
    return Agent("greedy", greedy_act)
