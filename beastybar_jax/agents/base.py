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
from typing import Callable

import jax
import jax.numpy as jnp

from beastybar_jax import game

ActFn = Callable[[game.State, jax.Array], jax.Array]


@dataclasses.dataclass(frozen=True)
class Agent:
    """A named policy.

    Attributes:
      name: the registry spec or a readable name (used in tables and JSON).
      act: ``act(state, key) -> int32[]`` action for ``state.current_player``;
        ONE unbatched state; pure, jittable, vmappable. Returns a legal action
        whenever one exists (on a finished game any id may come back; stepping
        a finished game is a no-op).
      search_setup: for agents built on an evaluator (network and search agents),
        what they think with, so a position can be analysed the way they see it
        (the web app's Analyse panel); ``None`` for the others.
    """

    name: str
    act: ActFn
    search_setup: "SearchSetup | None" = None

    def __repr__(self) -> str:  # the closure is noise in logs
        return f"Agent({self.name!r})"


@dataclasses.dataclass(frozen=True)
class SearchSetup:
    """The evaluator and search of a network or search agent.

    Attributes:
      evaluator: ``evaluator(key) -> evaluate``, where ``evaluate(states[N])`` gives
        ``(logits float32[N, A], value float32[N])`` for each state's player to move
        (a ``beastybar_jax.search.Evaluator``; the key seeds random playouts).
      search: the agent's ``SearchConfig``, or ``None`` for an agent that plays the
        evaluator's policy directly.
      learned_prior: the logits come from a trained network (``False``: uniform).
    """

    evaluator: Callable[[jax.Array], Callable]
    search: object = None
    learned_prior: bool = False


TIE_TOLERANCE = 1e-6


def random_best(scores: jax.Array, mask: jax.Array, key: jax.Array, tolerance: float = TIE_TOLERANCE) -> jax.Array:
    """``int32[]`` a uniformly random choice among the legal actions of maximal score.

    Args:
      scores: ``float32[A]`` higher is better (values on illegal actions ignored).
      mask: ``bool[A]`` legal actions.
      key: breaks ties.
      tolerance: scores within this of the best count as tied; the default,
        1e-6, is the reference baselines' own. Their float64 scores carry
        rounding noise far below it; float32 scores must be computed so that
        equal moves score bit-equal (the heuristics snap theirs to an exact
        grid) or noise of ~1e-5 would decide between equal moves.

    With no legal action (a finished game) returns 0.
    """
    masked = jnp.where(mask, scores, -jnp.inf)
    best = mask & (masked >= jnp.max(masked) - tolerance)
    return uniform_choice(best, key)


def uniform_choice(mask: jax.Array, key: jax.Array) -> jax.Array:
    """``int32[]`` a uniformly random index where ``mask`` holds; 0 if none does."""
    logits = jnp.where(mask, 0.0, -jnp.inf)
    choice = jax.random.categorical(key, jnp.where(jnp.any(mask), logits, 0.0))
    return jnp.where(jnp.any(mask), choice, 0).astype(jnp.int32)


def one_ply(state: game.State, key: jax.Array) -> tuple[game.State, game.State, jax.Array]:
    """Every move of the player to move, applied to a world the mover may know.

    The table after a move (queue, bar, THAT'S IT) does not depend on hidden
    cards, but ``game.step`` also draws the mover's next card, which the mover
    cannot know. So the moves are applied to ``game.sample_world`` for the
    mover, and callers must not score by the drawn card (use
    ``hand_after_play``).

    Returns:
      ``(world, after, mask)``: the sampled world (unbatched), the states after
      each action (batched ``[A]``; illegal actions give forfeited states, so
      mask them), and ``bool[A]`` the legal actions.
    """
    world = game.sample_world(state, state.current_player, key)
    actions = jnp.arange(game.NUM_ACTIONS, dtype=jnp.int32)
    after = jax.vmap(game.step, in_axes=(None, 0))(world, actions)
    return world, after, game.legal_action_mask(state)


def hand_after_play(state: game.State) -> jax.Array:
    """``bool[A, 12]`` the mover's hand after each action, before drawing."""
    from beastybar_jax.game.actions import ACTION_CARD_SPECIES

    hand = state.hand[state.current_player]
    played = jnp.asarray(ACTION_CARD_SPECIES)[:, None] == jnp.arange(game.NUM_SPECIES)[None, :]
    return hand[None, :] & ~played
