"""Agents and analysts, compiled once per (game, spec) and shared by every game.

``AgentPool.get`` builds the agent at once (so a bad spec is an error of the request
that names it) and compiles its ``act`` in a background thread; until that is done
the agent's status is ``"compiling"`` and the page says so. The analysis of a position
(``analyse``) runs the agent's own evaluator and search (``Agent.search_setup``) and,
where the game has an exact solver and the position is solvable, each move's exact
result and margin.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import threading
import time
from typing import Callable

import jax
import jax.numpy as jnp

from beastybar_jax.agents import Agent, AgentSpecError, make_agent
from beastybar_jax.games import Game
from beastybar_jax.search import run_search

# Analysis of an agent without a search of its own (a heuristic): plain MCTS.
FALLBACK_ANALYST = "mcts-200"
# Simulations x worlds (x random playouts per leaf, for mcts-N) per move at most: a search
# tree is allocated per simulation, and a move holds its game until it is played.
MAX_SIMULATIONS = 10_000
# Agents compiling (or waiting to) at once, at most: more is a 503 "try again".
MAX_PENDING = 8


class PoolBusy(RuntimeError):
    """Too many agents are compiling already; the request may be repeated later."""


class AgentUnavailable(ValueError):
    """An agent spec that cannot be built (unknown, wrong game, unreadable checkpoint)."""


@dataclasses.dataclass
class Compiled:
    """One (game, spec) entry: the agent, its compiled function once ready, its status."""

    game: Game
    spec: str
    agent: Agent | None  # None: the exact solver
    status: str = "compiling"  # compiling | ready | error
    error: str = ""
    compile_seconds: float = 0.0
    function: Callable | None = None
    ready: threading.Event = dataclasses.field(default_factory=threading.Event)

    def describe(self) -> dict:
        return {"spec": self.spec, "game": self.game.name, "status": self.status, "error": self.error,
                "compile_seconds": round(self.compile_seconds, 2)}


def _example(game: Game):
    return game.init(jax.random.key(0)), jax.random.key(0)


def _analysis_function(game: Game, agent: Agent):
    """``analyse(world, key) -> dict`` of arrays for one position (see ``analyse``)."""
    setup = agent.search_setup

    def analyse(state, key):
        world_key, eval_key, search_key = jax.random.split(key, 3)
        evaluate = setup.evaluator(eval_key)
        world = game.sample_world(state, state.current_player, world_key)  # the mover's view
        legal = game.legal_action_mask(state)
        logits, value = evaluate(jax.tree.map(lambda x: x[None], world))
        prior = jax.nn.softmax(jnp.where(legal, logits[0], -jnp.inf))
        out = {"prior": jnp.where(legal, prior, 0.0), "value": value[0]}
        if setup.search is not None:
            result = run_search(game, evaluate, jax.tree.map(lambda x: x[None], state), search_key,
                                setup.search, add_noise=False)
            out.update(visits=result.visit_counts[0], weights=result.action_weights[0],
                       q=result.action_values[0], root_value=result.root_value[0], choice=result.action[0])
        return out

    return analyse


def exact_applies(game: Game, state) -> bool:
    """Whether the game's exact analysis (``Game.solver.exact_moves``) solves ``state``."""
    return game.solver is not None and bool(game.solver.exact_applies(state))


class AgentPool:
    """Compiled agents and analysts by (game, spec); compiles in the background."""

    def __init__(self, workers: int = 1, max_compiled: int = 32, max_pending: int = MAX_PENDING):
        self.max_compiled = int(max_compiled)
        self.max_pending = int(max_pending)
        self.pinned: set[tuple[str, str, str]] = set()  # (kind, game, spec) never evicted: the defaults
        self._agents: dict[tuple[str, str], Agent] = {}
        self._entries: collections.OrderedDict[tuple[str, str, str], Compiled] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="compile")

    def shutdown(self):
        self._executor.shutdown(wait=False, cancel_futures=True)

    def build(self, game: Game, spec: str) -> Agent:
        """The agent ``spec`` names for ``game`` (built once); :class:`AgentUnavailable`
        with the registry's message when it cannot be built."""
        if not isinstance(spec, str) or not spec.strip():
            raise AgentUnavailable("empty agent spec")
        key = (game.name, spec.strip())
        with self._lock:
            if key in self._agents:
                return self._agents[key]
        try:
            agent = make_agent(spec.strip(), game=game)
        except AgentSpecError as e:
            raise AgentUnavailable(str(e)) from None
        except Exception as e:  # noqa: BLE001 -- checkpoints: missing, unreadable, another game's
            raise AgentUnavailable(f"agent {spec!r} cannot be loaded: {type(e).__name__}: {e}") from None
        setup = agent.search_setup
        search = setup.search if setup is not None else None
        if search is not None:
            playouts = max(setup.num_playouts, 1)
            work = search.num_simulations * search.num_determinizations * playouts
            if work > MAX_SIMULATIONS:
                times = f" x {playouts} playouts" if setup.num_playouts else ""
                raise AgentUnavailable(
                    f"agent {spec!r} searches {search.num_simulations} x {search.num_determinizations} simulations"
                    f"{times} per move; the web app allows at most {MAX_SIMULATIONS}")
        with self._lock:
            return self._agents.setdefault(key, agent)

    def pin(self, game: Game, spec: str) -> None:
        """Never evict the agent ``spec`` of ``game`` (the server's default agents)."""
        with self._lock:
            self.pinned.add(("act", game.name, spec.strip()))

    def _entry(self, kind: str, game: Game, spec: str, build: Callable[[Agent], Callable]) -> Compiled:
        agent = None if kind == "exact" else self.build(game, spec)  # only the solver has no spec
        key = (kind, game.name, spec.strip())
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            pending = sum(e.status == "compiling" for e in self._entries.values())
            if pending >= self.max_pending:
                raise PoolBusy(f"the server is compiling {pending} agents already; try again in a minute")
            entry = self._entries[key] = Compiled(game=game, spec=spec.strip(), agent=agent)
            # Bounded: the least recently used compiled functions go (compiled again if asked for),
            # but never one still compiling, nor a default agent.
            evictable = [k for k, e in self._entries.items()
                         if k != key and k not in self.pinned and e.status != "compiling"]
            for old_key in evictable[:max(len(self._entries) - self.max_compiled, 0)]:
                del self._entries[old_key]
                self._agents.pop(old_key[1:], None)
        self._executor.submit(self._compile, entry, build)
        return entry

    @staticmethod
    def _compile(entry: Compiled, build):
        start = time.perf_counter()
        try:
            entry.function = jax.jit(build(entry.agent)).lower(*_example(entry.game)).compile()
            entry.status = "ready"
        except Exception as e:  # noqa: BLE001 -- reported to the page; the server goes on
            entry.status, entry.error = "error", f"{type(e).__name__}: {e}"
        entry.compile_seconds = time.perf_counter() - start
        entry.ready.set()

    def agent(self, game: Game, spec: str) -> Compiled:
        """The agent ``spec`` for ``game``; ``.function(state, key) -> action`` once ready.
        :class:`PoolBusy` when ``max_pending`` agents are compiling already and this one is
        not among them."""
        return self._entry("act", game, spec, lambda agent: agent.act)

    def analyst_spec(self, game: Game, spec: str) -> str:
        """``spec`` if that agent has an evaluator to analyse with, else ``FALLBACK_ANALYST``."""
        return spec.strip() if self.build(game, spec).search_setup is not None else FALLBACK_ANALYST

    def analyst(self, game: Game, spec: str) -> Compiled:
        """The analysis with ``spec``'s evaluator and search (``FALLBACK_ANALYST`` for an
        agent without them): ``.function(state, key) -> dict`` (see ``_analysis_function``)."""
        return self._entry("analyse", game, self.analyst_spec(game, spec),
                           lambda agent: _analysis_function(game, agent))

    def exact(self, game: Game) -> Compiled | None:
        """The game's exact solver, shared by every analyst: ``.function(state, key) -> dict``
        (``solved``, ``result``, ``margin`` and per action ``action_result``,
        ``action_margin``, ``action_exact``); ``None`` for a game without one."""
        if game.solver is None:
            return None
        return self._entry("exact", game, "", lambda agent: game.solver.exact_moves)

    def statuses(self) -> list[dict]:
        with self._lock:
            return [dict(e.describe(), kind=kind) for (kind, _, _), e in self._entries.items()]
