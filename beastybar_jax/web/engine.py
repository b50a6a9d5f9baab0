"""Agents and analysts, compiled once per (game, spec) and shared by every game, and
the work a request asks of them; nothing slow runs in a request's thread.

``AgentPool.agent`` checks a spec at once (the registry's checks, milliseconds: a bad
spec, or a search over its cap, is an error of the request that names it) and leaves
the rest to background workers: building the agent (a network read from disk takes
seconds) and compiling its ``act``. Until that is done the entry's status is
``"compiling"`` and the page says so, with the seconds so far. Agents that play and
the analysis (``AgentPool.analyst``, and the game's exact solver) have a queue each, so
an analysis never waits behind other agents' compiles. The analysis of a position runs
the agent's own evaluator and search (``Agent.search_setup``) and, where the game has an
exact solver and the position is solvable, each move's exact result and margin.

``Jobs`` runs the compiled functions themselves (an agent's move, an analysis) in worker
threads: a request waits for its job a moment (``JOB_WAIT_SECONDS``) and otherwise
answers 202, and the next request for the same job picks its result up.
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
from beastybar_jax.agents.registry import SpecInfo, check_agent_spec
from beastybar_jax.games import Game
from beastybar_jax.training.compilation import interactive_compiler_options
from beastybar_jax.search import run_search

# Analysis of an agent without a search of its own (a heuristic): plain MCTS.
FALLBACK_ANALYST = "mcts-200"
# Agents compiling (or waiting to) at once in one queue, at most: more is a 503 "try again".
MAX_PENDING = 8
# How long a request waits for its move or analysis before it answers 202 (ask again).
JOB_WAIT_SECONDS = 0.5
# The queue of each kind of entry: the agents that play, and the analysis.
QUEUES = {"act": "play", "analyse": "analysis", "exact": "analysis"}


class PoolBusy(RuntimeError):
    """Too many agents are compiling already; the request may be repeated later."""


class AgentUnavailable(ValueError):
    """An agent spec that cannot be built (unknown, wrong game, unreadable checkpoint)."""


@dataclasses.dataclass
class Compiled:
    """One (kind, game, spec) entry: the agent once built, its compiled function once
    ready, its status and times."""

    game: Game
    spec: str
    kind: str = "act"  # act | analyse | exact
    agent: Agent | None = None  # built by the worker; None for the exact solver
    status: str = "compiling"  # compiling (waiting for a worker, building, compiling) | ready | error
    error: str = ""
    requested: float = dataclasses.field(default_factory=time.monotonic)
    started: float | None = None  # when a worker took it
    compile_seconds: float = 0.0  # building and compiling, once done
    function: Callable | None = None
    ready: threading.Event = dataclasses.field(default_factory=threading.Event)

    @property
    def queue(self) -> str:
        return QUEUES[self.kind]

    def describe(self) -> dict:
        """What the page shows: the status, and while compiling the seconds since it was
        asked for and whether it still waits for its queue's worker."""
        out = {"spec": self.spec, "game": self.game.name, "status": self.status, "error": self.error,
               "compile_seconds": round(self.compile_seconds, 2), "queue": self.queue}
        if self.status == "compiling":
            out.update(seconds=round(time.monotonic() - self.requested, 1), waiting=self.started is None)
        return out


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
    """Compiled agents and analysts by (kind, game, spec): specs checked in the caller's
    thread, agents built and compiled by background workers, one queue for the agents
    that play (``workers`` threads) and one for the analysis (``analysis_workers``)."""

    def __init__(self, workers: int = 1, max_compiled: int = 32, max_pending: int = MAX_PENDING,
                 analysis_workers: int = 1):
        self.max_compiled = int(max_compiled)
        self.max_pending = int(max_pending)  # per queue
        self.pinned: set[tuple[str, str, str]] = set()  # (kind, game, spec) never evicted: the defaults
        self._builds: dict[tuple[str, str], concurrent.futures.Future] = {}  # (game, spec): the agent, built once
        self._entries: collections.OrderedDict[tuple[str, str, str], Compiled] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._queues = {
            "play": concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="compile"),
            "analysis": concurrent.futures.ThreadPoolExecutor(max_workers=analysis_workers,
                                                              thread_name_prefix="compile-analysis"),
        }

    def shutdown(self):
        for queue in self._queues.values():
            queue.shutdown(wait=False, cancel_futures=True)

    def check(self, game: Game, spec: str) -> SpecInfo:
        """Check ``spec`` for ``game`` without building it (the registry's checks,
        milliseconds); :class:`AgentUnavailable` with the registry's message."""
        if not isinstance(spec, str) or not spec.strip():
            raise AgentUnavailable("empty agent spec")
        try:
            return check_agent_spec(spec.strip(), game=game)
        except AgentSpecError as e:
            raise AgentUnavailable(str(e)) from None
        except Exception as e:  # noqa: BLE001 -- a checkpoint path that is not there
            raise AgentUnavailable(f"agent {spec!r} cannot be loaded: {type(e).__name__}: {e}") from None

    def build(self, game: Game, spec: str) -> Agent:
        """The agent ``spec`` names for ``game``, built once (a second caller waits for the
        first); :class:`AgentUnavailable` with the registry's message when it cannot be
        built. Slow for a network (read from disk): the workers call it, and the server's
        start-up."""
        self.check(game, spec)
        key = (game.name, spec.strip())
        with self._lock:
            future = self._builds.get(key)
            owner = future is None
            if owner:
                future = self._builds[key] = concurrent.futures.Future()
        if owner:
            try:
                future.set_result(make_agent(spec.strip(), game=game))
            except AgentSpecError as e:
                future.set_exception(AgentUnavailable(str(e)))
            except Exception as e:  # noqa: BLE001 -- checkpoints: missing, unreadable, another game's
                future.set_exception(AgentUnavailable(f"agent {spec!r} cannot be loaded: {type(e).__name__}: {e}"))
            if future.exception() is not None:
                with self._lock:  # not kept: asked again, it is tried again
                    self._builds.pop(key, None)
        error = future.exception()
        if error is not None:
            raise AgentUnavailable(str(error))
        return future.result()

    def pin(self, game: Game, spec: str) -> None:
        """Never evict the agent ``spec`` of ``game`` (the server's default agents)."""
        with self._lock:
            self.pinned.add(("act", game.name, spec.strip()))

    def _entry(self, kind: str, game: Game, spec: str, make_function: Callable[[Agent], Callable]) -> Compiled:
        key = (kind, game.name, spec.strip())
        with self._lock:
            if key in self._entries:  # checked when it was asked for first
                self._entries.move_to_end(key)
                return self._entries[key]
        if kind != "exact":  # only the solver has no spec
            self.check(game, spec)
        with self._lock:
            if key in self._entries:  # asked for meanwhile
                return self._entries[key]
            queue = QUEUES[kind]
            pending = sum(e.status == "compiling" and e.queue == queue for e in self._entries.values())
            if pending >= self.max_pending:
                what = "agents" if queue == "play" else "analyses"
                raise PoolBusy(f"the server is compiling {pending} {what} already; try again in a minute")
            entry = self._entries[key] = Compiled(game=game, spec=spec.strip(), kind=kind)
            # Bounded: the least recently used compiled functions go (compiled again if asked for),
            # but never one still compiling, nor a default agent.
            evictable = [k for k, e in self._entries.items()
                         if k != key and k not in self.pinned and e.status != "compiling"]
            for old_key in evictable[:max(len(self._entries) - self.max_compiled, 0)]:
                del self._entries[old_key]
                if not any(k[1:] == old_key[1:] for k in self._entries):
                    self._builds.pop(old_key[1:], None)
        self._queues[QUEUES[kind]].submit(self._compile, entry, make_function)
        return entry

    def _compile(self, entry: Compiled, make_function: Callable[[Agent], Callable]) -> None:
        """A worker's job: build the entry's agent, then compile its function."""
        entry.started = time.monotonic()
        try:
            entry.agent = None if entry.kind == "exact" else self.build(entry.game, entry.spec)
            entry.function = jax.jit(make_function(entry.agent)).lower(*_example(entry.game)).compile(
                interactive_compiler_options())
            entry.status = "ready"
        except AgentUnavailable as e:
            entry.status, entry.error = "error", str(e)
        except Exception as e:  # noqa: BLE001 -- reported to the page; the server goes on
            entry.status, entry.error = "error", f"{type(e).__name__}: {e}"
        entry.compile_seconds = time.monotonic() - entry.started
        entry.ready.set()

    def agent(self, game: Game, spec: str) -> Compiled:
        """The agent ``spec`` for ``game``; ``.function(state, key) -> action`` once ready.
        :class:`AgentUnavailable` for a bad spec; :class:`PoolBusy` when ``max_pending``
        agents are compiling already and this one is not among them."""
        return self._entry("act", game, spec, lambda agent: agent.act)

    def analyst_spec(self, game: Game, spec: str) -> str:
        """``spec`` if that agent has an evaluator to analyse with, else ``FALLBACK_ANALYST``
        (told by the registry, without building it)."""
        return spec.strip() if self.check(game, spec).has_evaluator else FALLBACK_ANALYST

    def analyst(self, game: Game, spec: str) -> Compiled:
        """The analysis with ``spec``'s evaluator and search (``FALLBACK_ANALYST`` for an
        agent without them), in the analysis queue: ``.function(state, key) -> dict`` (see
        ``_analysis_function``)."""
        return self._entry("analyse", game, self.analyst_spec(game, spec),
                           lambda agent: _analysis_function(game, agent))

    def exact(self, game: Game) -> Compiled | None:
        """The game's exact solver, shared by every analyst (in the analysis queue):
        ``.function(state, key) -> dict`` (``solved``, ``result``, ``margin`` and per action
        ``action_result``, ``action_margin``, ``action_exact``); ``None`` for a game
        without one."""
        if not game.has("solver.exact_moves"):
            return None
        return self._entry("exact", game, "", lambda agent: game.solver.exact_moves)

    def statuses(self) -> list[dict]:
        with self._lock:
            return [dict(e.describe(), kind=kind) for (kind, _, _), e in self._entries.items()]


class Jobs:
    """Compiled functions run in worker threads, one job per key (a game's move at a ply,
    an analysis): ``run`` starts it (once) and waits ``wait`` seconds at most; a later
    ``run`` with the same key picks its result up. A job's result is handed out once,
    then forgotten; results nobody picked up are dropped after ``keep_seconds``."""

    def __init__(self, workers: int = 2, keep_seconds: float = 600.0):
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="job")
        self._jobs: dict[tuple, tuple[concurrent.futures.Future, float]] = {}
        self._lock = threading.Lock()
        self.keep_seconds = float(keep_seconds)

    def shutdown(self):
        self._executor.shutdown(wait=False, cancel_futures=True)

    def run(self, key: tuple, work: Callable[[], object], wait: float = JOB_WAIT_SECONDS):
        """``(done, result, seconds)``: the job's result once done (an exception of the
        work is raised here), else ``(False, None, seconds so far)``."""
        now = time.monotonic()
        with self._lock:
            for old in [k for k, (f, t) in self._jobs.items() if f.done() and now - t > self.keep_seconds]:
                del self._jobs[old]
            if key not in self._jobs:
                self._jobs[key] = (self._executor.submit(_timed, work), now)
            future, started = self._jobs[key]
        try:
            result, seconds = future.result(timeout=wait)
        except concurrent.futures.TimeoutError:
            return False, None, time.monotonic() - started
        finally:
            if future.done():
                with self._lock:
                    if self._jobs.get(key, (None,))[0] is future:
                        del self._jobs[key]
        return True, result, seconds


def _timed(work: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    result = work()
    return jax.device_get(result), time.perf_counter() - start
