"""Agents by name, for every command line and config (``eval_opponents``).

Specs::

    random                                 any game
    greedy | heuristic | aggressive | defensive | outcome_heuristic
                                           Beasty Bar only (the reference's baselines)
    minimax                                tic-tac-toe only (perfect play)
    mcts-<N>[@worlds=<K>][@algo=gumbel|puct][@playouts=<P>]
                                           any game
    checkpoint:<path>                      trained network, policy argmax
    checkpoint:<path>@sims=<N>[@worlds=<K>][@algo=gumbel|puct]
                                           trained network + search (the run's
                                           search config, with these overrides)
    champion[@sims=<N>][@worlds=<K>][@algo=gumbel|puct]
                                           Beasty Bar only: the network shipped in the
                                           package (Game.agents.networks, read by
                                           beastybar_jax.checkpoint.load_exported),
                                           raw or with search like checkpoint:<path>
    solver+<agent>                         Beasty Bar only: exact endgame play where the
                                           position is solvable, <agent> (any spec above)
                                           elsewhere (beastybar_jax.games.beastybar.endgame)

``<path>`` is a run directory, its ``checkpoints/`` directory or one
``checkpoints/<iteration>`` directory, or a directory holding an exported network
(``config.json`` and ``params.msgpack``, as ``experiments/export_champion.py`` writes);
the network must have been trained on the game asked for. A search is capped at
:data:`MAX_SEARCH_WORK` simulations x worlds (x playouts) per move, the one bound of
every command line and the web app; a spec over it is refused as it is parsed. Options follow ``@`` and are
peeled off from the end, so a path may itself contain ``@``. Asking for an agent that
does not play the game (a Beasty Bar heuristic for tic-tac-toe) is an
:class:`AgentSpecError` naming the agents that do.
"""

from __future__ import annotations

import dataclasses
import os
import re

from beastybar_jax.agents.base import Agent, batch_act
from beastybar_jax.agents.baselines import random_agent
from beastybar_jax.agents.search_agents import mcts_agent, network_agent, search_config_with
from beastybar_jax import checkpoint
from beastybar_jax.games import GAME_NAMES, Game, get_game

_GENERIC = ("random", "mcts-<N>", "checkpoint:<path>", "checkpoint:<path>@sims=<N>")
# Every game's own agents, wrappers and shipped networks, by name (Game.agents: baselines,
# wrappers, networks).
AGENT_NAMES = tuple(dict.fromkeys(
    [*_GENERIC[:1], *(n for g in GAME_NAMES for n, _ in get_game(g).agents.baselines), *_GENERIC[1:],
     *(f"{n}+<agent>" for g in GAME_NAMES for n, _ in get_game(g).agents.wrappers),
     *(name for g in GAME_NAMES for n, _ in get_game(g).agents.networks for name in (n, f"{n}@sims=<N>"))]))


def _game(game: Game | str) -> Game:
    return get_game(game) if isinstance(game, str) else game


def default_opponent(game: Game | str = "beastybar") -> str:
    """The registry name of the game's strongest baseline (``Game.agents.default_opponent``)."""
    return _game(game).agents.default_opponent


def agent_names(game: Game | str = "beastybar") -> tuple[str, ...]:
    """The registry names that play ``game``."""
    game = _game(game)
    return (_GENERIC[:1] + tuple(n for n, _ in game.agents.baselines) + _GENERIC[1:]
            + tuple(f"{n}+<agent>" for n, _ in game.agents.wrappers)
            + tuple(name for n, _ in game.agents.networks for name in (n, f"{n}@sims=<N>")))


def _plays(name: str) -> list[str]:
    """The games that have their own agent ``name`` (a baseline or a shipped network)."""
    return [g for g in GAME_NAMES if name in dict(get_game(g).agents.baselines) or name in dict(get_game(g).agents.networks)]
_OPTION = re.compile(r"^(?P<key>[a-z_]+)=(?P<value>[A-Za-z0-9_.\-]+)$")
_MCTS = re.compile(r"^mcts-(?P<sims>\d+)$")
_ALGORITHMS = ("gumbel", "puct")


class AgentSpecError(ValueError):
    """A registry spec that names no agent; the message says what is accepted."""


def _help() -> str:
    return ("known agents: " + ", ".join(AGENT_NAMES)
            + "; options: mcts-N@worlds=K@algo=gumbel|puct@playouts=P, checkpoint:<path>@sims=N@worlds=K@algo=..., "
            "champion@sims=N@worlds=K@algo=...")


def split_options(spec: str) -> tuple[str, dict[str, str]]:
    """``"checkpoint:runs/x@sims=64"`` -> ``("checkpoint:runs/x", {"sims": "64"})``."""
    base, options = spec, {}
    while "@" in base:
        head, tail = base.rsplit("@", 1)
        match = _OPTION.match(tail)
        if match is None:
            break
        key = match["key"]
        if key in options:
            raise AgentSpecError(f"agent spec {spec!r} gives option {key!r} twice")
        options[key] = match["value"]
        base = head
    return base, dict(reversed(list(options.items())))


MAX_SEARCH_WORK = 10_000
"""The most simulations x worlds (x random playouts per leaf, for ``mcts-N``) an agent
searches per move, for every spec: the command lines, configs and the web app share this
one bound. A search tree is allocated per world and grows per simulation, and a move waits
for all of them: beyond this a move takes minutes on a CPU, or the memory runs out."""
_DIGITS = len(str(MAX_SEARCH_WORK))  # a longer number is over the cap (and never parsed: int('9' * 5000) raises)


def _cap_text() -> str:
    return (f"agents search at most {MAX_SEARCH_WORK:,} simulations x worlds x playouts per move "
            f"(MAX_SEARCH_WORK in beastybar_jax.agents.registry)")


def _positive_int(spec: str, key: str, value: str) -> int:
    if not value.isdigit() or not value.strip("0"):
        raise AgentSpecError(f"agent spec {spec!r}: option {key}={value!r} must be a positive integer")
    if len(value.lstrip("0")) > _DIGITS or int(value) > MAX_SEARCH_WORK:
        raise AgentSpecError(f"agent spec {spec!r}: {key}={value} is over the cap: {_cap_text()}")
    return int(value)


def check_search_work(spec: str, simulations: int, worlds: int = 1, playouts: int = 1) -> None:
    """Raise :class:`AgentSpecError` naming the cap when ``simulations x worlds x
    playouts`` is over :data:`MAX_SEARCH_WORK` (checked as a spec is parsed, before the
    agent is built)."""
    work = simulations * worlds * playouts
    if work > MAX_SEARCH_WORK:
        factors = f"{simulations} simulations x {worlds} worlds" + (f" x {playouts} playouts" if playouts > 1 else "")
        raise AgentSpecError(f"agent spec {spec!r} searches {factors} = {work:,} per move, over the cap: "
                             f"{_cap_text()}")


def _algorithm(spec: str, value: str) -> str:
    if value not in _ALGORITHMS:
        raise AgentSpecError(f"agent spec {spec!r}: algo={value!r} must be one of {', '.join(_ALGORITHMS)}")
    return value


def _check_options(spec: str, options: dict, allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        allowed_text = ", ".join(allowed) if allowed else "none"
        raise AgentSpecError(f"agent spec {spec!r}: unknown option(s) {', '.join(unknown)}; "
                             f"allowed here: {allowed_text}")


@dataclasses.dataclass(frozen=True)
class SpecInfo:
    """What :func:`check_agent_spec` tells of a valid spec without building the agent."""

    loads_network: bool  # building it reads a network from disk (a checkpoint or a shipped one: seconds)
    has_evaluator: bool  # it has an evaluator (and maybe a search) to analyse with (``Agent.search_setup``)


def _wrapped_agent(spec: str, game: Game, build: bool) -> Agent | SpecInfo:
    head, plus, fallback = spec.partition("+")
    wrappers = dict(game.agents.wrappers)
    if head not in wrappers:
        plays = [g for g in GAME_NAMES if head in dict(get_game(g).agents.wrappers)]
        raise AgentSpecError(f"agent spec {spec!r}: {head}+<agent> plays {', '.join(plays)} only, not {game.name}; "
                             f"agents for {game.name}: {', '.join(agent_names(game))}")
    if not plus or not fallback.strip():
        raise AgentSpecError(f"agent spec {spec!r}: write {head}+<agent> (the agent to play where {head} "
                             f"does not decide), e.g. {head}+{game.agents.default_opponent}")
    inner = _make(fallback.strip(), game, build)
    if not build:
        return inner  # the wrapper analyses and loads as its inner agent does
    # Analysis sees the position the way the inner agent does (the wrapper only plays solved endgames).
    return Agent(spec, wrappers[head](inner.act), inner.search_setup,
                 wrappers[head](batch_act(inner), batched=True), game=game.name)


def make_agent(spec: str, *, game: Game | str | None = None) -> Agent:
    """The agent a registry spec names (see the module docstring), for ``game`` (a
    ``Game`` or its name; default: Beasty Bar).

    Raises:
      AgentSpecError (a ValueError): unknown names or options, with the accepted ones; a
        search over :data:`MAX_SEARCH_WORK`, before anything is built.
      beastybar_jax.checkpoint.CheckpointError: a checkpoint that is missing or unreadable.
    """
    return _make(spec, game, build=True)


def check_agent_spec(spec: str, *, game: Game | str | None = None) -> SpecInfo:
    """Check ``spec`` as :func:`make_agent` does, without building the agent or reading a
    network (milliseconds): names, options, the game, :data:`MAX_SEARCH_WORK`, and that a
    checkpoint path exists. What only reading the network can tell (a damaged checkpoint,
    another game's network, its run's worlds over the cap) is :func:`make_agent`'s.

    Raises:
      AgentSpecError, beastybar_jax.checkpoint.CheckpointError: as :func:`make_agent`.
    """
    return _make(spec, game, build=False)


def _make(spec: str, game: Game | str | None, build: bool) -> Agent | SpecInfo:
    if not isinstance(spec, str) or not spec.strip():
        raise AgentSpecError(f"empty agent spec {spec!r}; {_help()}")
    game = get_game("beastybar") if game is None else _game(game)
    spec = spec.strip()
    head = spec.partition("+")[0]
    if any(head in dict(get_game(g).agents.wrappers) for g in GAME_NAMES):
        return _wrapped_agent(spec, game, build)  # <wrapper>+<agent>: the options belong to the inner agent
    base, options = split_options(spec)

    if base == "random":
        _check_options(spec, options, ())
        return random_agent(game) if build else SpecInfo(loads_network=False, has_evaluator=False)
    own = dict(game.agents.baselines)
    if base in own:
        _check_options(spec, options, ())
        return Agent(base, own[base](), game=game.name) if build else SpecInfo(False, False)
    if _plays(base) and base not in dict(game.agents.networks):
        raise AgentSpecError(f"agent {base!r} plays {', '.join(_plays(base))} only, not {game.name}; agents for "
                             f"{game.name}: {', '.join(agent_names(game))}")

    mcts = _MCTS.match(base)
    if mcts:
        _check_options(spec, options, ("worlds", "algo", "playouts"))
        sims = _positive_int(spec, "N", mcts["sims"])
        worlds = _positive_int(spec, "worlds", options.get("worlds", "1"))
        playouts = _positive_int(spec, "playouts", options.get("playouts", "1"))
        algorithm = _algorithm(spec, options.get("algo", "gumbel"))
        check_search_work(spec, sims, worlds, playouts)
        if not build:
            return SpecInfo(loads_network=False, has_evaluator=True)
        return mcts_agent(sims, num_determinizations=worlds, algorithm=algorithm, num_playouts=playouts,
                          game=game, name=spec)

    shipped = dict(game.agents.networks)
    if base.startswith("checkpoint:") or base in shipped:
        path = base[len("checkpoint:"):]
        if not path and base not in shipped:
            raise AgentSpecError(f"agent spec {spec!r} names no path; write checkpoint:<run dir>")
        _check_options(spec, options, ("sims", "worlds", "algo"))
        if ("worlds" in options or "algo" in options) and "sims" not in options:
            raise AgentSpecError(f"agent spec {spec!r}: worlds/algo only apply with search; add @sims=<N>")
        changes = {}
        if "sims" in options:  # checked before the network is read: a search over the cap is refused at once
            changes["num_simulations"] = _positive_int(spec, "sims", options["sims"])
            if "worlds" in options:
                changes["num_determinizations"] = _positive_int(spec, "worlds", options["worlds"])
            if "algo" in options:
                changes["algorithm"] = _algorithm(spec, options["algo"])
            check_search_work(spec, changes["num_simulations"], changes.get("num_determinizations", 1))
        if not build:
            where = os.path.abspath(os.path.expanduser(path))
            if base not in shipped and not os.path.exists(where):  # as load_agent says it
                raise checkpoint.CheckpointError(f"no such run directory or checkpoint: {where}")
            return SpecInfo(loads_network=True, has_evaluator=True)
        if base in shipped:  # a network shipped with the game (Game.agents.networks): files in the package
            model = checkpoint.load_exported(shipped[base])
        else:
            model = checkpoint.load_agent(path)
        if model.config.game != game.name:
            raise AgentSpecError(f"agent spec {spec!r}: that network plays {model.config.game}, not {game.name}")
        network, params = model.network, model.params
        if not changes:
            return network_agent(network, params, name=spec, game=game)
        search = search_config_with(model.config.search, **changes)
        check_search_work(spec, search.num_simulations, search.num_determinizations)  # the run's worlds
        return network_agent(network, params, search=search, name=spec, game=game)

    if base.startswith("mcts"):
        raise AgentSpecError(f"agent spec {spec!r}: write mcts-<N> with N simulations, e.g. mcts-200")
    raise AgentSpecError(f"unknown agent {spec!r}; {_help()}")
