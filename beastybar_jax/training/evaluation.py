"""Evaluation during training: the current network against fixed opponents.

Every ``eval_every`` iterations (and after the last one) the network plays
``eval_games`` duplicate-format games (``eval_games / 2`` deals, rounded up; seats swapped)
against each of ``eval_opponents`` (registry names, e.g. ``random``,
``heuristic``). The match is one jitted function of the parameters, compiled
once per run; the deals are the same at every evaluation so the curve is not
deal luck. The network plays its raw policy (argmax over legal moves), or
searches with ``eval_simulations`` simulations when that is > 0.

With ``eval_endgames`` the same evaluations also score the network's moves on
``eval_endgame_positions`` positions of the game's yardstick of solved endgames
(``Game.solver.endgame_suite``; Beasty Bar's: :mod:`beastybar_jax.games.beastybar.endgame.suite`), logged
as ``eval_endgames_<metric>``: ``keeps_result`` (the share of moves that keep the
game-theoretic result), ``throws_win`` / ``throws_draw`` (the shares that turn a
won position into a draw or loss / a drawn one into a loss), ``best_margin`` (the
share reaching the best point margin) and ``margin_lost`` (the mean margin given
away against best play). The moves are computed in the match's compiled function.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp

from beastybar_jax import arena
from beastybar_jax.agents import AgentSpecError, batch_act, make_agent, network_agent
from beastybar_jax.config import ConfigError, TrainConfig
from beastybar_jax.games.base import Game
from beastybar_jax.training import distributed
from beastybar_jax.learning.algorithm import metric_name
from beastybar_jax.checkpoint import CheckpointError
from beastybar_jax.seeds import seed_key


def make_opponents(config: TrainConfig, game: Game) -> list:
    """The ``eval_opponents`` agents for the run's game; raises :class:`ConfigError`
    (``config key 'eval_opponents': ...``) for a name the registry does not know or a
    checkpoint that cannot be read, or two opponents the log would name alike (their
    keys would overwrite each other). Called before compiling, so a typo costs nothing."""
    names = [metric_name(name) for name in config.eval_opponents]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"config key 'eval_opponents': two opponents would be logged as eval_{twice[0]}_*: "
                          f"{', '.join(o for o, n in zip(config.eval_opponents, names) if n == twice[0])}")
    try:
        return [make_agent(name, game=game) for name in config.eval_opponents]
    except (AgentSpecError, CheckpointError) as e:
        raise ConfigError(f"config key 'eval_opponents': {e}") from None


def load_yardstick(config: TrainConfig, game: Game):
    """The game's yardstick of solved endgames for ``eval_endgames`` (None when off);
    a game without one is a :class:`ConfigError`."""
    if not config.eval_endgames:
        return None
    if not game.has("solver.endgame_suite"):
        raise ConfigError(f"config key 'eval_endgames' needs a game with a yardstick of solved endgames; "
                          f"{game.name} has none: set eval_endgames: false")
    return game.solver.endgame_suite(config.eval_endgame_positions)


def make_evaluator(config: TrainConfig, game: Game, network, opponents: list | None = None, compile=None,
                   yardstick=None):
    """``evaluate(params) -> {metric name: float}`` for ``config``'s opponents (and
    its yardstick of solved endgames with ``eval_endgames``; ``yardstick`` overrides
    the one ``load_yardstick`` gives).

    With ``compile(lowered) -> compiled`` (e.g. ``TrainLoop.compile``, which shows the
    compile and lets Ctrl-C in) the match is compiled ahead of time for the first
    ``params``' shapes and shardings; without it, ``jax.jit`` compiles on first use."""
    opponents = make_opponents(config, game) if opponents is None else opponents
    num_deals = -(-config.eval_games // 2)  # an odd eval_games is rounded up: each deal is played twice
    search = None
    if config.eval_simulations > 0:
        search = config.search.replace(num_simulations=config.eval_simulations)
    base_key = jax.random.fold_in(seed_key(config.seed), 0x5EED)
    deal_keys = jax.random.split(base_key, num_deals)
    yardstick = load_yardstick(config, game) if yardstick is None else yardstick
    if yardstick is not None:
        endgame_states = jax.tree.map(jnp.asarray, yardstick.states)
        num_endgames = jax.tree.leaves(endgame_states)[0].shape[0]
        endgame_keys = jax.random.split(jax.random.fold_in(base_key, len(opponents)), num_endgames)

    @jax.jit
    def play(params):
        agent = network_agent(network, params, search=search, name="network", game=game)
        results = []
        for i, opponent in enumerate(opponents):
            o = arena.play_games(agent, opponent, deal_keys, jax.random.fold_in(base_key, i), game=game)
            results.append(dict(
                win_rate=jnp.mean(o.reward > 0),
                score=jnp.mean((o.reward + 1) / 2),
                margin=jnp.mean(o.margin),
            ))
        endgame_moves = None if yardstick is None else batch_act(agent)(endgame_states, endgame_keys)
        return results, endgame_moves

    compiled = None

    def evaluate(params) -> dict[str, float]:
        nonlocal compiled
        if compiled is None:  # compile first, then meet the other processes (see distributed.barrier)
            lowered = play.lower(params)
            compiled = lowered.compile() if compile is None else compile(lowered)
            distributed.barrier("evaluation compiled", config.distributed_timeout)
        results, endgame_moves = jax.device_get(compiled(params))
        metrics = {f"eval_{metric_name(opponent.name)}_{k}": float(v)
                   for opponent, r in zip(opponents, results) for k, v in r.items()}
        if yardstick is not None:
            metrics.update({f"eval_endgames_{k}": float(v) for k, v in yardstick.score(endgame_moves).items()})
        return metrics

    return evaluate


def evaluation_hook(config: TrainConfig, game: Game, opponents: list | tuple | None = None):
    """A ``TrainLoop`` hook running ``make_evaluator`` every ``eval_every`` iterations
    and after the last one; returns the scalars to log (``eval_<opponent>_win_rate``,
    ``_score``, ``_margin``; ``eval_endgames_<metric>`` with ``eval_endgames``). The
    opponents (unless given, as the pre-flight built them) and the yardstick are built
    (and checked) at once."""
    opponents = make_opponents(config, game) if opponents is None else list(opponents)
    yardstick = load_yardstick(config, game)
    evaluate = None

    def hook(loop, iteration, metrics):
        nonlocal evaluate
        last = iteration == loop.config.num_iterations
        if not config.eval_every or (iteration % config.eval_every and not last):
            return None
        if evaluate is None:
            evaluate = make_evaluator(config, game, loop.trainer.network, opponents,
                                      compile=lambda lowered: loop.compile(lowered, "the evaluation"),
                                      yardstick=yardstick)
        return evaluate(loop.state.params)

    return hook
