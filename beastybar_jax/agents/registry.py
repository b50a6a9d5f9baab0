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
the network must have been trained on the game asked for. Options follow ``@`` and are
peeled off from the end, so a path may itself contain ``@``. Asking for an agent that
does not play the game (a Beasty Bar heuristic for tic-tac-toe) is an
:class:`AgentSpecError` naming the agents that do.
"""

from __future__ import annotations

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


MAX_OPTION_VALUE = 100_000
"""The largest N of ``mcts-N`` / ``@sims=N`` / ``@worlds=N`` / ``@playouts=N``: far beyond
useful searches, and within the int32 counters of the batched search."""


def _positive_int(spec: str, key: str, value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= MAX_OPTION_VALUE:
        raise AgentSpecError(f"agent spec {spec!r}: option {key}={value!r} must be a positive integer "
                             f"up to {MAX_OPTION_VALUE:,}")
    return int(value)


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


def _wrapped_agent(spec: str, game: Game) -> Agent:
    head, plus, fallback = spec.partition("+")
    wrappers = dict(game.agents.wrappers)
    if head not in wrappers:
        plays = [g for g in GAME_NAMES if head in dict(get_game(g).agents.wrappers)]
        raise AgentSpecError(f"agent spec {spec!r}: {head}+<agent> plays {', '.join(plays)} only, not {game.name}; "
                             f"agents for {game.name}: {', '.join(agent_names(game))}")
    if not plus or not fallback.strip():
        raise AgentSpecError(f"agent spec {spec!r}: write {head}+<agent> (the agent to play where {head} "
                             f"does not decide), e.g. {head}+{game.agents.default_opponent}")
    inner = make_agent(fallback.strip(), game=game)
    # Analysis sees the position the way the inner agent does (the wrapper only plays solved endgames).
    return Agent(spec, wrappers[head](inner.act), inner.search_setup,
                 wrappers[head](batch_act(inner), batched=True), game=game.name)


def make_agent(spec: str, *, game: Game | str | None = None) -> Agent:
    """The agent a registry spec names (see the module docstring), for ``game`` (a
    ``Game`` or its name; default: Beasty Bar).

    Raises:
      AgentSpecError (a ValueError): unknown names or options, with the accepted ones.
      beastybar_jax.checkpoint.CheckpointError: a checkpoint that is missing or unreadable.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise AgentSpecError(f"empty agent spec {spec!r}; {_help()}")
    game = get_game("beastybar") if game is None else _game(game)
    spec = spec.strip()
    head = spec.partition("+")[0]
    if any(head in dict(get_game(g).agents.wrappers) for g in GAME_NAMES):
        return _wrapped_agent(spec, game)  # <wrapper>+<agent>: the options belong to the inner agent
    base, options = split_options(spec)

    if base == "random":
        _check_options(spec, options, ())
        return random_agent(game)
    own = dict(game.agents.baselines)
    if base in own:
        _check_options(spec, options, ())
        return Agent(base, own[base](), game=game.name)
    if _plays(base) and base not in dict(game.agents.networks):
        raise AgentSpecError(f"agent {base!r} plays {', '.join(_plays(base))} only, not {game.name}; agents for "
                             f"{game.name}: {', '.join(agent_names(game))}")

    mcts = _MCTS.match(base)
    if mcts:
        _check_options(spec, options, ("worlds", "algo", "playouts"))
        sims = _positive_int(spec, "N", mcts["sims"])
        return mcts_agent(
            sims,
            num_determinizations=_positive_int(spec, "worlds", options.get("worlds", "1")),
            algorithm=_algorithm(spec, options.get("algo", "gumbel")),
            num_playouts=_positive_int(spec, "playouts", options.get("playouts", "1")),
            game=game, name=spec)

    shipped = dict(game.agents.networks)
    if base.startswith("checkpoint:") or base in shipped:
        path = base[len("checkpoint:"):]
        if not path and base not in shipped:
            raise AgentSpecError(f"agent spec {spec!r} names no path; write checkpoint:<run dir>")
        _check_options(spec, options, ("sims", "worlds", "algo"))
        if ("worlds" in options or "algo" in options) and "sims" not in options:
            raise AgentSpecError(f"agent spec {spec!r}: worlds/algo only apply with search; add @sims=<N>")
        if base in shipped:  # a network shipped with the game (Game.agents.networks): files in the package
            model = checkpoint.load_exported(shipped[base])
        else:
            model = checkpoint.load_agent(path)
        if model.config.game != game.name:
            raise AgentSpecError(f"agent spec {spec!r}: that network plays {model.config.game}, not {game.name}")
        network, params = model.network, model.params
        if "sims" not in options:
            return network_agent(network, params, name=spec, game=game)
        changes = {"num_simulations": _positive_int(spec, "sims", options["sims"])}
        if "worlds" in options:
            changes["num_determinizations"] = _positive_int(spec, "worlds", options["worlds"])
        if "algo" in options:
            changes["algorithm"] = _algorithm(spec, options["algo"])
        search = search_config_with(model.config.search, **changes)
        return network_agent(network, params, search=search, name=spec, game=game)

    if base.startswith("mcts"):
        raise AgentSpecError(f"agent spec {spec!r}: write mcts-<N> with N simulations, e.g. mcts-200")
    raise AgentSpecError(f"unknown agent {spec!r}; {_help()}")
