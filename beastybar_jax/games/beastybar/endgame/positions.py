"""Which positions the solver can solve, and endgame positions drawn from real games.

A position is *solvable* when nothing that matters is hidden or left to chance:
the game is not over, the opponent's deck is empty (so the opponent's hand is
exactly their unseen cards) and the mover's deck holds at most one card (the
mover knows which: it is the one own card not in hand or on the table, and a
one-card deck has one order). From there every later position has both decks
empty, so the rest of the game is a finite perfect-information game. In a full
game these are the last 8 plies (both decks empty) plus the ply before them
(the second player's eighth play, with one card left to draw).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.games.beastybar import engine as game

# The longest game from a solvable position: the mover's deck card plus the
# eight cards of both hands (9 plies).
MAX_PLIES = 9


def is_solvable(state: game.State) -> jax.Array:
    """``bool[]`` the position of ONE state can be solved exactly (module docstring).

    Reads only what both players know: deck sizes and whether the game is over.
    """
    mover = state.current_player.astype(jnp.int32)
    sizes = state.deck_sizes
    mover_deck = jnp.where(mover == 0, sizes[0], sizes[1])
    opponent_deck = jnp.where(mover == 0, sizes[1], sizes[0])
    return ~state.terminated & (opponent_deck == 0) & (mover_deck <= 1)


def plies_left_bound(state: game.State) -> jax.Array:
    """``int32[]`` at most this many plies remain (cards in both hands and decks)."""
    return jnp.sum(state.hand) + jnp.sum(state.deck >= 0)


def play_recorded(agent_a: Any, agent_b: Any, num_games: int, key: jax.Array) -> game.State:
    """Every state of ``num_games`` games between two agents: ``State`` with leading
    axes ``[T, G]`` (``T = NUM_CARDS``, the longest game, the state before each turn; finished
    games repeat their final state). Agent A sits in seat 0 of the first half of the
    games and in seat 1 of the second half. Pure and jittable. Agents are
    ``beastybar_jax.agents.Agent`` records (this package imports no agent: the
    agents build on it)."""
    deal_key, play_key = jax.random.split(key)
    states = jax.vmap(game.init)(jax.random.split(deal_key, num_games))
    seat_a = (jnp.arange(num_games) >= num_games // 2).astype(jnp.int32)
    # An agent's own batched act where it has one (Agent.act_batch: a network's afterstate
    # lists, one batched search), as beastybar_jax.agents.batch_act does.
    act_a, act_b = (getattr(a, "act_batch", None) or jax.vmap(a.act) for a in (agent_a, agent_b))

    def turn(states, turn_key):
        key_a, key_b = jax.random.split(turn_key)
        action_a = act_a(states, jax.random.split(key_a, num_games))
        action_b = act_b(states, jax.random.split(key_b, num_games))
        action = jnp.where(states.current_player.astype(jnp.int32) == seat_a, action_a, action_b)
        return jax.vmap(game.step)(states, action), states

    _, history = jax.lax.scan(turn, states, jax.random.split(play_key, game.NUM_CARDS))
    return history


@functools.lru_cache(maxsize=32)
def compiled_play(agent_a: Any, agent_b: Any, num_games: int):
    """``play_recorded`` jitted, as ``play(key) -> history``."""
    return jax.jit(functools.partial(play_recorded, agent_a, agent_b, num_games))


solvable_mask = jax.jit(jax.vmap(is_solvable))
solvable_mask.__doc__ = "``bool[N]`` ``is_solvable`` of a batch of states."


def solvable_positions(history: game.State) -> game.State:
    """The solvable states of a ``[T, G]`` history (``play_recorded``), on the host,
    flattened to ``[N]`` (turn-major)."""
    history = jax.device_get(history)
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), history)
    keep = np.asarray(solvable_mask(flat))
    return jax.tree.map(lambda x: np.asarray(x)[keep], flat)


def endgames_from_games(agent_a: Any, agent_b: Any, num_games: int, key: jax.Array) -> game.State:
    """All solvable positions of ``num_games`` games between two agents (host arrays ``[N]``)."""
    return solvable_positions(compiled_play(agent_a, agent_b, int(num_games))(key))


def real_decisions(solution) -> tuple[np.ndarray, np.ndarray]:
    """What a ``"margins"``-mode solution (``solver.solve``, host arrays) says about moves:
    ``bool[N]`` the position is solved and its legal moves' final margins differ (a real
    decision, what the endgame suite keeps), and ``bool[N, A]`` the legal moves that keep
    the position's exact result (win, draw or loss)."""
    margins = np.where(solution.legal, solution.action_margin, solution.margin[:, None])
    decision = np.asarray(solution.solved) & (margins != solution.margin[:, None]).any(axis=1)
    return decision, keeps_result(solution.legal, solution.action_margin, solution.margin)


def keeps_result(legal, action_margin, margin) -> np.ndarray:
    """``bool[N, A]`` the legal moves whose exact result (the sign of ``action_margin
    [N, A]``) is the position's (the sign of ``margin [N]``): a solution's or a suite's."""
    return np.asarray(legal) & (np.sign(np.asarray(action_margin, np.int32)) == np.sign(np.asarray(margin))[:, None])
