"""PPO in one compiled step: rollout, advantages, epochs of minibatch updates.

Reads top-down like PureJaxRL::

    iteration(state, key):
        refresh_pool            # every pool_refresh_every iterations: params -> ring
        rollout.play            # lax.scan over T moves: learner + opponents, auto-reset
        loss.advantages         # reverse lax.scan: GAE along each seat's decisions
        lax.scan over epochs    #   shuffle the T x B moves,
          lax.scan over minibatches  # one optimizer step each
        -> (state, metrics)

The shared training code (:mod:`beastybar_jax.training`) jits :func:`make_iteration`'s
function with the state donated and sharded by :func:`state_shardings` (the games
split over the ``data`` mesh axis; parameters, optimizer state and the snapshot
ring replicated), and runs the loop, checkpoints, metrics and evaluation around it.
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp
import optax

from beastybar_jax.network import init_params
from beastybar_jax.ppo import rollout
from beastybar_jax.config.ppo import POOL, SELF, PPOConfig
from beastybar_jax.ppo.loss import Batch, advantages, loss_fn
from beastybar_jax.learning import sharding
from beastybar_jax.learning.algorithm import Algorithm, metric_name, unmeasured_game_metrics
from beastybar_jax.learning.optimizer import global_norm, make_schedule, scan_updates
from beastybar_jax.validation import ConfigError


@chex.dataclass(frozen=True)
class PPOState:
    """Everything that changes during PPO training (a pytree of arrays).

    Attributes:
      params: network variables (replicated).
      opt_state: optax state (replicated).
      games: :class:`~beastybar_jax.ppo.rollout.Games` ``[B]`` games in progress (split over devices).
      pool: the ring of past parameters, each leaf ``[pool_size, ...]`` (replicated);
        ``None`` when the run has no ``pool`` opponents.
      rng: ``uint32`` key data of the run's key; iteration ``i`` uses ``fold_in(key, i)``.
      iteration: ``int32[]`` iterations completed.
      num_updates: ``int32[]`` optimizer steps taken.
    """

    params: Any
    opt_state: Any
    games: rollout.Games
    pool: Any
    rng: chex.Array
    iteration: chex.Array
    num_updates: chex.Array


def updates_per_iteration(config) -> int:
    return config.ppo.updates_per_iteration()


def uses_pool(config) -> bool:
    return any(kind == POOL for kind, _ in config.ppo.opponent_slots(config.num_games))


def init(config, game, network, optimizer, key: jax.Array) -> PPOState:
    """Fresh parameters, ``num_games`` new games and (with a pool) a ring of copies of
    the initial parameters."""
    params_key, games_key = jax.random.split(key)
    params = init_params(network, params_key, game.observation_size)
    pool = None
    if uses_pool(config):
        size = config.ppo.pool_size
        pool = jax.tree.map(lambda x: jnp.broadcast_to(x, (size,) + x.shape), params)
    return PPOState(
        params=params,
        opt_state=optimizer.init(params),
        games=rollout.init_games(game, games_key, config.num_games),
        pool=pool,
        rng=jax.random.key_data(key),
        iteration=jnp.zeros((), jnp.int32),
        num_updates=jnp.zeros((), jnp.int32),
    )


def state_shardings(state: PPOState, mesh) -> PPOState:
    """Games split along their leading axis; everything else replicated."""
    rep = sharding.replicated(mesh)
    return PPOState(
        params=sharding.replicate_tree(state.params, mesh),
        opt_state=sharding.replicate_tree(state.opt_state, mesh),
        games=sharding.split_tree(state.games, mesh),
        pool=sharding.replicate_tree(state.pool, mesh),
        rng=rep,
        iteration=rep,
        num_updates=rep,
    )


def refresh_pool(pool, params, iteration: jax.Array, config: PPOConfig):
    """At iterations ``k * pool_refresh_every`` (k >= 1) the current parameters replace
    ring entry ``k % pool_size`` (the oldest); otherwise the ring is unchanged."""
    if pool is None:
        return None
    due = (iteration > 0) & (iteration % config.pool_refresh_every == 0)
    slot = (iteration // config.pool_refresh_every) % config.pool_size
    return jax.tree.map(lambda ring, p: ring.at[slot].set(jnp.where(due, p, ring[slot])), pool, params)


def build_opponents(config, game, network) -> tuple[rollout.OpponentSlots, ...]:
    """The run's opponent slots, registry agents built (and checked) at once: an unknown
    spec or unreadable checkpoint is a ``ConfigError`` naming ``ppo.opponent(s)``."""
    from beastybar_jax.agents import AgentSpecError, make_agent
    from beastybar_jax.checkpoint import CheckpointError

    key = "ppo.opponent" if config.ppo.exploiter else "ppo.opponents"
    try:
        return rollout.make_opponents(config.ppo, config.num_games, game, network,
                                      lambda spec: make_agent(spec, game=game))
    except (AgentSpecError, CheckpointError) as e:
        raise ConfigError(f"config key {key!r}: {e}") from None


def check_opponents(config, game) -> None:
    """Build the run's registry opponents (nothing compiles), so that the run's pre-flight
    refuses an unknown spec or an unreadable checkpoint (``ConfigError``, ``Algorithm.check``)."""
    from beastybar_jax.agents import AgentSpecError, make_agent
    from beastybar_jax.checkpoint import CheckpointError

    key = "ppo.opponent" if config.ppo.exploiter else "ppo.opponents"
    for name, _ in config.ppo.opponent_slots(config.num_games):
        if name in (SELF, POOL):
            continue
        try:
            make_agent(name, game=game)
        except (AgentSpecError, CheckpointError) as e:
            raise ConfigError(f"config key {key!r}: {e}") from None


def make_learner(network, optimizer: optax.GradientTransformation, config: PPOConfig, aux_score_head: bool):
    """``learn(params, opt_state, batch [N], key) -> (params, opt_state, mean metrics)``:
    ``num_epochs`` shuffles of the ``N`` rows, each cut into ``num_minibatches``
    minibatches, one optimizer step per minibatch (two nested ``lax.scan``)."""

    network = network.for_training()  # afterstates scored as for batches of every turn

    def sgd_step(carry, minibatch: Batch):
        params, opt_state = carry
        (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, network, minibatch, config,
                                                                        aux_score_head)
        metrics["grad_norm"] = global_norm(grads)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), metrics

    def epoch(carry, key):
        _, _, batch = carry
        rows = batch.action.shape[0]
        order = jax.random.permutation(key, rows)
        minibatches = jax.tree.map(
            lambda x: x[order].reshape((config.num_minibatches, rows // config.num_minibatches) + x.shape[1:]), batch)
        (params, opt_state), metrics = scan_updates(sgd_step, carry[:2], minibatches)
        return (params, opt_state, batch), metrics

    def learn(params, opt_state, batch: Batch, key):  # epochs of equal minibatch counts: the mean of their means
        (params, opt_state, _), metrics = scan_updates(epoch, (params, opt_state, batch),
                                                       jax.random.split(key, config.num_epochs))
        return params, opt_state, metrics

    return learn


def make_iteration(config, game, network, optimizer, mesh=None):
    """The un-jitted ``iteration(state, key) -> (state, metrics)``."""
    ppo = config.ppo
    opponents = build_opponents(config, game, network)
    constrain = sharding.constrain_split(mesh)
    schedule = make_schedule(config, config.num_iterations * ppo.updates_per_iteration())
    learn = make_learner(network, optimizer, ppo, config.network.aux_score_head)
    scored = [(i, o.name) for i, o in enumerate(opponents) if o.name != SELF]

    def iteration(state: PPOState, key: jax.Array):
        rollout_key, learn_key = jax.random.split(key)
        pool = refresh_pool(state.pool, state.params, state.iteration, ppo)
        games, transitions, stats = rollout.play(game, network, state.params, pool, opponents, state.games,
                                                 rollout_key, ppo.rollout_length, constrain)
        targets = advantages(transitions, ppo.gamma, ppo.gae_lambda)
        rows = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731  [T, B, ...] -> [T * B, ...]
        batch = Batch(
            observation=rows(transitions.observation), legal_mask=rows(transitions.legal_mask),
            action=rows(transitions.action), log_prob=rows(transitions.log_prob), value=rows(transitions.value),
            advantage=rows(targets.advantage), returns=rows(targets.returns), weight=rows(targets.weight),
            aux_target=rows(targets.aux_target), aux_weight=rows(targets.aux_weight),
        )
        params, opt_state, learn_metrics = learn(state.params, state.opt_state, batch, learn_key)
        num_updates = state.num_updates + ppo.updates_per_iteration()

        weight = batch.weight
        trained = jnp.maximum(jnp.sum(weight), 1.0)
        mean_return = jnp.sum(weight * batch.returns) / trained
        return_variance = jnp.sum(weight * jnp.square(batch.returns - mean_return)) / trained
        error_variance = jnp.sum(weight * jnp.square(batch.returns - batch.value)) / trained
        finished = jnp.maximum(stats.games_finished, 1)
        metrics = dict(
            learn_metrics,
            trained=1.0,
            learning_rate=schedule(jnp.maximum(num_updates - 1, 0)),
            num_updates=num_updates,
            moves=stats.moves,
            learner_moves=stats.learner_moves,
            trained_moves=jnp.sum(weight),
            games_finished=stats.games_finished,
            mean_game_length=stats.finished_game_length / finished,
            draw_rate=stats.draws / finished,
            mean_advantage=jnp.sum(weight * batch.advantage) / trained,
            value_explained_variance=1.0 - error_variance / jnp.maximum(return_variance, 1e-8),
        )
        for i, name in scored:
            games_i = stats.games_by_kind[i]
            denominator = jnp.maximum(games_i, 1)
            label = "opponent" if ppo.exploiter else metric_name(name)
            metrics[f"games_vs_{label}"] = games_i
            metrics[f"win_rate_vs_{label}"] = stats.learner_wins_by_kind[i] / denominator
            metrics[f"score_vs_{label}"] = (stats.learner_outcome_by_kind[i] / denominator + 1.0) / 2.0
        new_state = PPOState(params=params, opt_state=opt_state, games=games, pool=pool, rng=state.rng,
                             iteration=state.iteration + 1, num_updates=num_updates)
        return new_state, {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}

    return iteration


def unmeasured(metrics) -> tuple[str, ...]:
    """The results against an opponent no game of the iteration finished against, the
    game metrics of one that finished no game."""
    idle = tuple(f"{kind}_vs_{key[len('games_vs_'):]}" for key, games in metrics.items()
                 if key.startswith("games_vs_") and games == 0 for kind in ("win_rate", "score"))
    return idle + unmeasured_game_metrics(metrics)


ALGORITHM = Algorithm(
    name="ppo",
    init=init,
    make_iteration=make_iteration,
    state_shardings=state_shardings,
    updates_per_iteration=updates_per_iteration,
    unmeasured=unmeasured,
    check=check_opponents,
)
