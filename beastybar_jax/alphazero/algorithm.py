"""AlphaZero in one compiled step: self-play with search, replay insert, SGD.

Reads top-down like PureJaxRL::

    iteration(state, key):
        selfplay.play_moves       # lax.scan over moves: search, act, record, step
        exact_targets.apply       # (alphazero.exact_value_targets) the solver's targets
        selfplay.insert_finished  # the games that ended, labelled, into the replay buffer
        lax.cond(buffer ready,    # lax.scan over updates_per_iteration optimizer steps
                 learn, skip)
        -> (state, metrics)

The shared training code (:mod:`beastybar_jax.training`) jits :func:`make_iteration`'s
function with the state donated and sharded by :func:`state_shardings` (games,
pending records and the replay ring split over the ``data`` mesh axis, the rest
replicated), and runs the loop, checkpoints, metrics and evaluation around it.
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp
import optax

from beastybar_jax import search as search_lib
from beastybar_jax.alphazero import exact_targets, selfplay
from beastybar_jax.alphazero import replay as replay_lib
from beastybar_jax.config.alphazero import AlphaZeroConfig
from beastybar_jax.alphazero.loss import loss_fn
from beastybar_jax.alphazero.replay import ReplayBuffer
from beastybar_jax.network import init_params
from beastybar_jax.learning import sharding
from beastybar_jax.learning.algorithm import Algorithm, unmeasured_game_metrics
from beastybar_jax.learning.optimizer import global_norm, make_schedule, scan_updates

LEARNER_METRICS = ("loss", "policy_loss", "value_loss", "aux_loss", "policy_entropy", "grad_norm", "unscored_rows")


@chex.dataclass(frozen=True)
class AlphaZeroState:
    """Everything that changes during AlphaZero training (a pytree of arrays).

    Attributes:
      params: network variables (replicated).
      opt_state: optax state (replicated).
      selfplay: :class:`~beastybar_jax.alphazero.selfplay.SelfPlayState` ``[B]`` games in
        progress and their records (split over devices).
      replay: :class:`~beastybar_jax.alphazero.replay.ReplayBuffer` (split over devices).
      rng: ``uint32`` key data of the run's key; iteration ``i`` uses ``fold_in(key, i)``.
      iteration: ``int32[]`` iterations completed.
      num_updates: ``int32[]`` optimizer steps taken.
    """

    params: Any
    opt_state: Any
    selfplay: selfplay.SelfPlayState
    replay: ReplayBuffer
    rng: chex.Array
    iteration: chex.Array
    num_updates: chex.Array


def updates_per_iteration(config) -> int:
    return config.alphazero.updates_per_iteration


def simulations_per_move(config) -> int:
    search = config.search
    return search.num_simulations * search.num_determinizations


def init(config, game, network, optimizer, key: jax.Array) -> AlphaZeroState:
    """Fresh parameters, ``num_games`` new games and an empty replay buffer."""
    params_key, games_key = jax.random.split(key)
    params = init_params(network, params_key, game.observation_size)
    return AlphaZeroState(
        params=params,
        opt_state=optimizer.init(params),
        selfplay=selfplay.init(game, games_key, config.num_games),
        replay=replay_lib.init(config.alphazero.buffer_size, game.observation_size, game.num_actions),
        rng=jax.random.key_data(key),
        iteration=jnp.zeros((), jnp.int32),
        num_updates=jnp.zeros((), jnp.int32),
    )


def state_shardings(state: AlphaZeroState, mesh) -> AlphaZeroState:
    """Games, pending records and the replay ring split along their leading axis;
    parameters, optimizer state and counters replicated."""
    rep = sharding.replicated(mesh)
    return AlphaZeroState(
        params=sharding.replicate_tree(state.params, mesh),
        opt_state=sharding.replicate_tree(state.opt_state, mesh),
        selfplay=sharding.split_tree(state.selfplay, mesh),
        replay=ReplayBuffer(records=sharding.split_tree(state.replay.records, mesh), write_index=rep, size=rep,
                            total_inserted=rep),
        rng=rep,
        iteration=rep,
        num_updates=rep,
    )


def make_learner(network, optimizer: optax.GradientTransformation, az: AlphaZeroConfig, aux_score_head: bool,
                 constrain=lambda x: x):
    """``learn(params, opt_state, replay, key) -> (params, opt_state, mean metrics)``: a
    ``lax.scan`` of ``az.updates_per_iteration`` optimizer steps on uniform minibatches."""

    network = network.for_training()  # afterstates scored as for batches of every turn

    def sgd_step(carry, key):
        params, opt_state, replay = carry
        batch = constrain(replay_lib.sample(replay, key, az.batch_size))
        (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, network, batch, az,
                                                                        aux_score_head)
        metrics["grad_norm"] = global_norm(grads)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state, replay), metrics

    def learn(params, opt_state, replay, key):
        if az.updates_per_iteration == 0:
            return params, opt_state, no_learner_metrics(aux_score_head, network.config.afterstates is not None)
        (params, opt_state, _), metrics = scan_updates(
            sgd_step, (params, opt_state, replay), jax.random.split(key, az.updates_per_iteration))
        return params, opt_state, metrics

    return learn


def no_learner_metrics(aux_score_head: bool, afterstates: bool = False) -> dict:
    """The learner's metrics (float32 scalars, as :func:`scan_updates` gives them) as zeros:
    an iteration that does not train. Named here, not read off a trace of the learner,
    which would trace its every update a second time (seconds of each compile). ``aux_loss``
    with the aux head only, ``unscored_rows`` with ``afterstates`` only, as the loss reports them."""
    absent = ({"aux_loss"} if not aux_score_head else set()) | ({"unscored_rows"} if not afterstates else set())
    return {name: jnp.zeros((), jnp.float32) for name in LEARNER_METRICS if name not in absent}


def make_iteration(config, game, network, optimizer, mesh=None):
    """The un-jitted ``iteration(state, key) -> (state, metrics)``."""
    az = config.alphazero
    constrain = sharding.constrain_split(mesh)
    schedule = make_schedule(config, config.num_iterations * az.updates_per_iteration)
    learn = make_learner(network, optimizer, az, config.network.aux_score_head, constrain)

    def skip(params, opt_state, replay, key):
        return params, opt_state, no_learner_metrics(config.network.aux_score_head,
                                                     config.network.afterstates is not None)

    def iteration(state: AlphaZeroState, key: jax.Array):
        selfplay_key, learn_key = jax.random.split(key)
        evaluate = search_lib.network_evaluator(game, network, state.params)
        games, played, stats = selfplay.play_moves(
            game, evaluate, config.search, state.selfplay, selfplay_key, az.moves_per_iteration,
            temperature=az.temperature, temperature_drop_move=az.temperature_drop_move,
            final_temperature=az.final_temperature, constrain=constrain,
        )
        if az.exact_value_targets:
            played, games, exact = exact_targets.apply(game, played, games, az.exact_value_budget,
                                                       az.exact_policy_targets, az.exact_value_lanes)
            games = constrain(games)
        replay = selfplay.insert_finished(game, state.replay, state.selfplay, played)
        ready = (replay.size >= az.min_buffer_size) & (az.updates_per_iteration > 0)
        params, opt_state, learn_metrics = jax.lax.cond(ready, learn, skip, state.params, state.opt_state, replay,
                                                        learn_key)
        num_updates = state.num_updates + jnp.where(ready, az.updates_per_iteration, 0)

        finished = jnp.maximum(stats.games_finished, 1)
        metrics = dict(
            learn_metrics,
            trained=ready.astype(jnp.float32),
            learning_rate=schedule(jnp.maximum(num_updates - 1, 0)),
            num_updates=num_updates,
            moves=stats.moves,
            games_finished=stats.games_finished,
            mean_game_length=stats.finished_game_length / finished,
            draw_rate=stats.draws / finished,
            first_player_score=(stats.first_player_outcome / finished + 1) / 2,
            positions_inserted=stats.finished_game_length,
            target_entropy=stats.policy_target_entropy / stats.moves,
            root_value=stats.root_value / stats.moves,
            search_passes=stats.search_passes / stats.moves,
            buffer_size=replay.size,
            buffer_fill=replay.size / replay.capacity,
        )
        if az.exact_value_targets:
            metrics["exact_targets"] = exact
        new_state = AlphaZeroState(params=params, opt_state=opt_state, selfplay=games, replay=replay, rng=state.rng,
                                   iteration=state.iteration + 1, num_updates=num_updates)
        return new_state, {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}

    return iteration


def unmeasured(metrics) -> tuple[str, ...]:
    """The learner's metrics of an iteration that did not train (the buffer was filling),
    the game metrics of one that finished no game."""
    untrained = LEARNER_METRICS if metrics.get("trained", 1) == 0 else ()
    return untrained + unmeasured_game_metrics(metrics)


ALGORITHM = Algorithm(
    name="alphazero",
    init=init,
    make_iteration=make_iteration,
    state_shardings=state_shardings,
    updates_per_iteration=updates_per_iteration,
    simulations_per_move=simulations_per_move,
    unmeasured=unmeasured,
)
