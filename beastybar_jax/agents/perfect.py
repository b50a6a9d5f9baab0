"""Perfect players of solved games, from their exact tables: tic-tac-toe's ``minimax``."""

from __future__ import annotations

from beastybar_jax.agents.base import Agent
from beastybar_jax.tictactoe.minimax import minimax_act


def minimax_agent(name: str = "minimax") -> Agent:
    """Tic-tac-toe's perfect player: never loses, takes every win it is offered, and
    varies its play by choosing uniformly among the optimal moves."""
    return Agent(name, minimax_act)
