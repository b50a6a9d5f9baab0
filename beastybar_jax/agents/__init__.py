"""Everything that plays: one ``Agent`` record, baselines, search and network agents,
and a name-based registry (``make_agent("heuristic")``, ``make_agent("mcts-200")``,
``make_agent("checkpoint:runs/x@sims=64")``)."""

from beastybar_jax.agents.base import Agent, one_ply, random_best, uniform_choice
from beastybar_jax.agents.baselines import greedy_agent, random_agent
from beastybar_jax.agents.heuristics import heuristic_agent, outcome_heuristic_agent
from beastybar_jax.agents.registry import (AGENT_NAMES, AgentSpecError, agent_names, default_opponent, make_agent,
                                          split_options)
from beastybar_jax.agents.search_agents import mcts_agent, network_agent, random_playout_evaluator

__all__ = [
    "AGENT_NAMES", "Agent", "AgentSpecError", "agent_names", "default_opponent", "greedy_agent", "heuristic_agent",
    "make_agent",
    "mcts_agent", "network_agent", "one_ply", "outcome_heuristic_agent", "random_agent",
    "random_best", "random_playout_evaluator", "split_options", "uniform_choice",
]
