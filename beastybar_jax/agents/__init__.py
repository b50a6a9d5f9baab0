"""Everything that plays: one ``Agent`` record, the ``random`` baseline, search and network
agents, and a name-based registry (``make_agent("heuristic")``, ``make_agent("mcts-200")``,
``make_agent("checkpoint:runs/x@sims=64")``); a game's own agents come with its ``Game``."""

from beastybar_jax.agents.base import Agent, batch_act, random_best, uniform_choice
from beastybar_jax.agents.baselines import random_agent
from beastybar_jax.agents.registry import (AGENT_NAMES, AgentSpecError, agent_names, default_opponent, make_agent,
                                          split_options)
from beastybar_jax.agents.search_agents import mcts_agent, network_agent, random_playout_evaluator

__all__ = [
    "AGENT_NAMES", "Agent", "AgentSpecError", "agent_names", "batch_act", "default_opponent", "make_agent", "mcts_agent",
    "network_agent", "random_agent", "random_best", "random_playout_evaluator", "split_options", "uniform_choice",
]
