"""The agent record every player (baseline, search, network, human-facing CLI) shares.

An agent is a pure function ``act(state, key) -> action`` on ONE unbatched state,
acting for ``state.current_player``. It is jittable and vmappable, so a match of
thousands of games is ``batch_act(agent)`` (``jax.vmap(agent.act)``, or the agent's own
``act_batch``) inside one ``lax.scan`` (see ``beastybar_jax.arena``). Information-set fairness is part of the contract: an
agent may only use what the mover may know -- ``game.observe``, the legal mask,
or worlds drawn with ``game.sample_world(state, mover, key)``. Never the true
hidden cards.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax

from beastybar_jax.games.choice import TIE_TOLERANCE, random_best, uniform_choice

__all__ = ["ActFn", "Agent", "BatchActFn", "SearchSetup", "TIE_TOLERANCE", "batch_act", "random_best",
           "uniform_choice"]

ActFn = Callable[[Any, jax.Array], jax.Array]  # (one state, key) -> int32[] action
BatchActFn = Callable[[Any, jax.Array], jax.Array]  # (states [B], keys [B]) -> int32[B] actions


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
      act_batch: ``act_batch(states [B], keys [B]) -> int32[B]``: the policy of ``act``
        on each state, for agents that think better in batches. A network agent
        evaluates the batch's observations in one call (its afterstate lists,
        :class:`beastybar_jax.network.AfterstateScorer`) and plays the same moves as
        ``act`` for the same keys (up to float rounding, which can break a near-tie
        differently); a search agent runs one batched mctx call (instead of
        a vmapped batch of one, whose loops become selects over whole trees), drawing
        every state's worlds from ``keys[0]``: the same distribution of moves, not the
        same moves. ``None``: ``jax.vmap(act)``. Callers use :func:`batch_act`.
      game: the name of the game it plays (``Game.name``), so a match can refuse an
        agent of another game by name instead of failing inside its compiled
        function; ``None`` for an agent that does not say (one built by hand).
    """

    name: str
    act: ActFn
    search_setup: "SearchSetup | None" = None
    act_batch: "BatchActFn | None" = None
    game: str | None = None

    def __repr__(self) -> str:  # the closure is noise in logs
        return f"Agent({self.name!r})"


def batch_act(agent: Agent) -> BatchActFn:
    """``(states [B], keys [B]) -> int32[B]``: ``agent`` acting on a batch of states,
    its own ``act_batch`` where it has one, else ``jax.vmap(agent.act)``."""
    return agent.act_batch if agent.act_batch is not None else jax.vmap(agent.act)


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
      num_playouts: random playouts to the end of the game per evaluated state (``mcts-N``
        agents), 0 for an evaluator without them: with the search's simulations, what
        a move costs (the web app bounds it).
    """

    evaluator: Callable[[jax.Array], Callable]
    search: object = None
    learned_prior: bool = False
    num_playouts: int = 0
