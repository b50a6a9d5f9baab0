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
                                           package (beastybar_jax.agents.champion),
                                           raw or with search like checkpoint:<path>
    solver+<agent>                         Beasty Bar only: exact endgame play where the
                                           position is solvable, <agent> (any spec above)
                                           elsewhere (beastybar_jax.endgame)

``<path>`` is a run directory, its ``checkpoints/`` directory or one
``checkpoints/<iteration>`` directory; the checkpoint must have been trained on the
game asked for. Options follow ``@`` and are peeled off from the end, so a path may
itself contain ``@``. Asking for an agent that does not play the game (a Beasty Bar
heuristic for tic-tac-toe) is an :class:`AgentSpecError` naming the agents that do.
"""

from __future__ import annotations

import re

from beastybar_jax.agents.base import Agent
from beastybar_jax.agents.baselines import greedy_agent, random_agent
from beastybar_jax.agents.heuristics import heuristic_agent, outcome_heuristic_agent
from beastybar_jax.games import Game, get_game

# name -> (the game it plays, or None for any game; factory(game) -> Agent)
_SIMPLE = {
    "random": (None, random_agent),
    "greedy": ("beastybar", lambda game: greedy_agent()),
    "heuristic": ("beastybar", lambda game: heuristic_agent("heuristic")),
    "aggressive": ("beastybar", lambda game: heuristic_agent("aggressive")),
    "defensive": ("beastybar", lambda game: heuristic_agent("defensive")),
    "outcome_heuristic": ("beastybar", lambda game: outcome_heuristic_agent()),
    "minimax": ("tictactoe", lambda game: _minimax_agent()),
}


def _minimax_agent() -> Agent:
    from beastybar_jax.agents.perfect import minimax_agent  # loads tic-tac-toe only when asked for

    return minimax_agent()
_GENERIC = ("mcts-<N>", "checkpoint:<path>", "checkpoint:<path>@sims=<N>")
# name -> the game it plays: agents built around another agent's spec.
_WRAPPERS = {"solver+<agent>": "beastybar"}
# name -> the game it plays: trained networks shipped in the package.
_SHIPPED = {"champion": "beastybar", "champion@sims=<N>": "beastybar"}
AGENT_NAMES = (*_SIMPLE, *_GENERIC, *_WRAPPERS, *_SHIPPED)


_DEFAULT_OPPONENT = {"beastybar": "heuristic", "tictactoe": "minimax"}


def default_opponent(game: Game | str = "beastybar") -> str:
    """The registry name of the game's strongest baseline (``random`` if it has none)."""
    return _DEFAULT_OPPONENT.get(game if isinstance(game, str) else game.name, "random")


def agent_names(game: Game | str = "beastybar") -> tuple[str, ...]:
    """The registry names that play ``game``."""
    name = game if isinstance(game, str) else game.name
    return (tuple(n for n, (plays, _) in _SIMPLE.items() if plays in (None, name)) + _GENERIC
            + tuple(n for n, plays in _WRAPPERS.items() if plays == name)
            + tuple(n for n, plays in _SHIPPED.items() if plays == name))
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


def _positive_int(spec: str, key: str, value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise AgentSpecError(f"agent spec {spec!r}: option {key}={value!r} must be a positive integer")
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


def _solver_agent(spec: str, game: Game) -> Agent:
    head, plus, fallback = spec.partition("+")
    if head != "solver" or not plus or not fallback.strip():
        raise AgentSpecError(f"agent spec {spec!r}: write solver+<agent> (the agent to play where the "
                             "endgame cannot be solved), e.g. solver+heuristic")
    if game.name != _WRAPPERS["solver+<agent>"]:
        raise AgentSpecError(f"agent spec {spec!r}: the endgame solver plays Beasty Bar only, not {game.name}; "
                             f"agents for {game.name}: {', '.join(agent_names(game))}")
    from beastybar_jax.agents.solver import solver_agent  # loads the solver only when asked for

    return solver_agent(make_agent(fallback.strip(), game=game), name=spec)


def make_agent(spec: str, *, game: Game | None = None) -> Agent:
    """The agent a registry spec names (see the module docstring), for ``game``
    (default: Beasty Bar).

    Raises:
      AgentSpecError (a ValueError): unknown names or options, with the accepted ones.
      beastybar_jax.checkpoint.CheckpointError: a checkpoint that is missing or unreadable.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise AgentSpecError(f"empty agent spec {spec!r}; {_help()}")
    game = get_game("beastybar") if game is None else game
    spec = spec.strip()
    if spec.startswith("solver"):  # solver+<agent>: the options belong to the fallback agent
        return _solver_agent(spec, game)
    base, options = split_options(spec)

    if base in _SIMPLE:
        _check_options(spec, options, ())
        plays, factory = _SIMPLE[base]
        if plays not in (None, game.name):
            raise AgentSpecError(f"agent {base!r} plays {plays} only, not {game.name}; agents for {game.name}: "
                                 f"{', '.join(agent_names(game))}")
        return factory(game)

    mcts = _MCTS.match(base)
    if mcts:
        _check_options(spec, options, ("worlds", "algo", "playouts"))
        from beastybar_jax.agents.search_agents import mcts_agent

        sims = _positive_int(spec, "N", mcts["sims"])
        return mcts_agent(
            sims,
            num_determinizations=_positive_int(spec, "worlds", options.get("worlds", "1")),
            algorithm=_algorithm(spec, options.get("algo", "gumbel")),
            num_playouts=_positive_int(spec, "playouts", options.get("playouts", "1")),
            game=game, name=spec)

    if base.startswith("checkpoint:") or base == "champion":
        path = base[len("checkpoint:"):]
        if not path and base != "champion":
            raise AgentSpecError(f"agent spec {spec!r} names no path; write checkpoint:<run dir>")
        _check_options(spec, options, ("sims", "worlds", "algo"))
        if ("worlds" in options or "algo" in options) and "sims" not in options:
            raise AgentSpecError(f"agent spec {spec!r}: worlds/algo only apply with search; add @sims=<N>")
        from beastybar_jax.agents.search_agents import network_agent, search_config_with
        from beastybar_jax.training.checkpoint import load_agent

        if base == "champion":
            from beastybar_jax.agents.champion import load_champion

            network, params, config = load_champion()
        else:
            model = load_agent(path)
            network, params, config = model.network, model.params, model.config
        if config.game != game.name:
            raise AgentSpecError(f"agent spec {spec!r}: that network plays {config.game}, not {game.name}")
        if "sims" not in options:
            return network_agent(network, params, name=spec, game=game)
        changes = {"num_simulations": _positive_int(spec, "sims", options["sims"])}
        if "worlds" in options:
            changes["num_determinizations"] = _positive_int(spec, "worlds", options["worlds"])
        if "algo" in options:
            changes["algorithm"] = _algorithm(spec, options["algo"])
        search = search_config_with(config.alphazero.search, **changes)
        return network_agent(network, params, search=search, name=spec, game=game)

    if base.startswith("mcts"):
        raise AgentSpecError(f"agent spec {spec!r}: write mcts-<N> with N simulations, e.g. mcts-200")
    raise AgentSpecError(f"unknown agent {spec!r}; {_help()}")
