"""AlphaZero training in one compiled step: self-play with search, replay insert, SGD.

Reads top-down like PureJaxRL::

    iteration(state, key):
        selfplay.play_moves     # lax.scan over moves: search, act, record, label, insert
        lax.cond(buffer ready,  # lax.scan over updates_per_iteration AdamW steps
                 sgd updates, skip)
        -> (state, metrics)

:func:`make_iteration` returns that function jitted with the train state donated,
its batch-leading arrays (games, pending records, replay buffer) split over the
devices of a ``Mesh(..., ("data",))`` and the parameters replicated; minibatches
are split the same way, so XLA averages gradients across devices. The global
computation is the same for any number of devices: one device and four compute
the same numbers up to float reduction order.

:func:`train` is the Python loop around it: per-iteration keys from the run's key
and the iteration number (so a resumed run continues exactly), logging of scalars,
checkpoints, Ctrl-C handling and ``on_iteration_end`` hooks (evaluation plugs in
there).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Any, Callable, Iterable, Optional

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from beastybar_jax import replay as replay_lib
from beastybar_jax import search as search_lib
from beastybar_jax import selfplay
from beastybar_jax.config import TrainConfig, get_game, validate
from beastybar_jax.game import Game
from beastybar_jax.network import PolicyValueNet, init_params, make_network
from beastybar_jax.replay import Records, ReplayBuffer
from beastybar_jax.checkpoint import CheckpointError, Checkpointer, TrainedModel, load_agent  # noqa: F401 (re-export)

DATA_AXIS = "data"


@chex.dataclass(frozen=True)
class TrainState:
    """Everything that changes during training (a pytree of arrays).

    Attributes:
      params: network variables (replicated).
      opt_state: optax state (replicated).
      selfplay: :class:`~beastybar_jax.selfplay.SelfPlayState` ``[B]`` games in progress
        and their records (split over devices).
      replay: :class:`~beastybar_jax.replay.ReplayBuffer` (split over devices).
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


# ----------------------------------------------------------------------------- learner


def make_schedule(config: TrainConfig) -> optax.Schedule:
    """Linear warmup to ``learning_rate`` then cosine decay to ``learning_rate * final_learning_rate_fraction``."""
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0 if config.warmup_steps > 0 else config.learning_rate,
        peak_value=config.learning_rate,
        warmup_steps=config.warmup_steps,
        decay_steps=config.lr_decay_steps,
        end_value=config.learning_rate * config.final_learning_rate_fraction,
    )


def make_optimizer(config: TrainConfig) -> optax.GradientTransformation:
    """Gradient clipping then AdamW on the schedule; weight decay on matrices only
    (not biases or LayerNorm scales)."""
    decay_mask = lambda params: jax.tree.map(lambda p: p.ndim > 1, params)
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adamw(make_schedule(config), weight_decay=config.weight_decay, mask=decay_mask),
    )


def loss_fn(params, network: PolicyValueNet, batch: Records, config: TrainConfig):
    """Policy cross-entropy to the search target + ``value_loss_weight`` x value MSE
    (+ ``aux_loss_weight`` x score-margin MSE when the aux head is on).

    Illegal actions are masked out of the policy's softmax, so the network is only
    asked to rank legal moves. Returns ``(loss, metrics)``.
    """
    output = network.apply(params, batch.observation)
    logits = jnp.where(batch.legal_mask, output.policy_logits, -1e9)
    log_policy = jax.nn.log_softmax(logits, axis=-1)
    policy_loss = -jnp.mean(jnp.sum(jnp.where(batch.legal_mask, batch.policy * log_policy, 0.0), axis=-1))
    value_loss = jnp.mean(jnp.square(output.value - batch.value))
    aux_loss = jnp.mean(jnp.square(output.score_margin - batch.score_margin))
    aux_weight = config.aux_loss_weight if config.network.aux_score_head else 0.0
    loss = policy_loss + config.value_loss_weight * value_loss + aux_weight * aux_loss
    policy = jnp.exp(log_policy)
    entropy = -jnp.mean(jnp.sum(jnp.where(batch.legal_mask, policy * log_policy, 0.0), axis=-1))
    metrics = dict(loss=loss, policy_loss=policy_loss, value_loss=value_loss, aux_loss=aux_loss,
                   policy_entropy=entropy)
    return loss, metrics


# ----------------------------------------------------------------------------- sharding


def make_mesh(devices=None) -> Mesh:
    """A 1-D mesh over ``devices`` (default: all devices of all hosts), axis ``"data"``."""
    devices = jax.devices() if devices is None else devices
    return Mesh(np.asarray(devices), (DATA_AXIS,))


def state_shardings(state: TrainState, mesh: Mesh) -> TrainState:
    """A :class:`TrainState`-shaped tree of shardings: games, pending records and the
    replay ring split along their leading axis, everything else replicated."""
    replicated = NamedSharding(mesh, P())
    split = NamedSharding(mesh, P(DATA_AXIS))
    rep = lambda tree: jax.tree.map(lambda _: replicated, tree)
    spl = lambda tree: jax.tree.map(lambda _: split, tree)
    return TrainState(
        params=rep(state.params),
        opt_state=rep(state.opt_state),
        selfplay=spl(state.selfplay),
        replay=ReplayBuffer(records=spl(state.replay.records), write_index=replicated, size=replicated,
                            total_inserted=replicated),
        rng=replicated,
        iteration=replicated,
        num_updates=replicated,
    )


def _constrain_split(mesh: Mesh):
    split = NamedSharding(mesh, P(DATA_AXIS))
    return lambda tree: jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, split), tree)


# ----------------------------------------------------------------------------- the compiled step


@dataclasses.dataclass(frozen=True)
class Trainer:
    """The compiled pieces of a run.

    Attributes:
      config, game, network, optimizer, mesh: what they say.
      init: jitted ``init(key) -> TrainState`` (sharded).
      iteration: jitted ``iteration(state, key) -> (state, metrics)``; the state is donated.
      shardings: the :class:`TrainState` tree of shardings.
    """

    config: TrainConfig
    game: Game
    network: PolicyValueNet
    optimizer: optax.GradientTransformation
    mesh: Mesh
    init: Callable
    iteration: Callable
    shardings: Any
    _compiled: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def compiled_iteration(self, state: TrainState) -> tuple[Callable, float]:
        """The iteration compiled ahead of time for ``state``'s shapes (cached), and the
        seconds compiling took (0 when cached), so the first iteration's time is not
        mostly compile time."""
        if "iteration" not in self._compiled:
            start = time.perf_counter()
            self._compiled["iteration"] = self.iteration.lower(state, jax.random.key(0)).compile()
            self._compiled["seconds"] = time.perf_counter() - start
            return self._compiled["iteration"], self._compiled["seconds"]
        return self._compiled["iteration"], 0.0


def _init_state(config: TrainConfig, game: Game, network: PolicyValueNet, optimizer, key) -> TrainState:
    params_key, games_key = jax.random.split(key)
    params = init_params(network, params_key, game.observation_size)
    return TrainState(
        params=params,
        opt_state=optimizer.init(params),
        selfplay=selfplay.init(game, games_key, config.num_games),
        replay=replay_lib.init(config.buffer_size, game.observation_size, game.num_actions),
        rng=jax.random.key_data(key),
        iteration=jnp.zeros((), jnp.int32),
        num_updates=jnp.zeros((), jnp.int32),
    )


def make_iteration_fn(config: TrainConfig, game: Game, network: PolicyValueNet,
                      optimizer: optax.GradientTransformation, mesh: Mesh | None = None) -> Callable:
    """The un-jitted ``iteration(state, key) -> (state, metrics)``."""
    schedule = make_schedule(config)
    constrain = _constrain_split(mesh) if mesh is not None else (lambda x: x)
    search_config = config.search

    def sgd_step(carry, key):
        params, opt_state, replay = carry
        batch = constrain(replay_lib.sample(replay, key, config.batch_size))
        (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, network, batch, config)
        metrics["grad_norm"] = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree.leaves(grads)))
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return (params, opt_state, replay), metrics

    def learn(params, opt_state, replay, key):
        (params, opt_state, _), metrics = jax.lax.scan(
            sgd_step, (params, opt_state, replay), jax.random.split(key, config.updates_per_iteration))
        return params, opt_state, jax.tree.map(jnp.mean, metrics)

    def iteration(state: TrainState, key: jax.Array):
        selfplay_key, learn_key = jax.random.split(key)
        evaluate = search_lib.network_evaluator(game, network, state.params)
        games, replay, stats = selfplay.play_moves(
            game, evaluate, search_config, state.selfplay, state.replay, selfplay_key, config.moves_per_iteration,
            temperature=config.temperature, temperature_drop_move=config.temperature_drop_move,
            final_temperature=config.final_temperature, constrain=constrain,
        )

        ready = (replay.size >= config.min_buffer_size) & (config.updates_per_iteration > 0)
        params, opt_state, num_updates = state.params, state.opt_state, state.num_updates
        if config.updates_per_iteration > 0:
            metric_shapes = jax.eval_shape(learn, params, opt_state, replay, learn_key)[2]
            skip = lambda p, o, r, k: (p, o, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), metric_shapes))
            params, opt_state, learn_metrics = jax.lax.cond(ready, learn, skip, params, opt_state, replay, learn_key)
            num_updates = num_updates + jnp.where(ready, config.updates_per_iteration, 0)
        else:
            learn_metrics = dict(loss=0.0, policy_loss=0.0, value_loss=0.0, aux_loss=0.0, policy_entropy=0.0,
                                 grad_norm=0.0)

        finished = jnp.maximum(stats.games_finished, 1)
        metrics = dict(learn_metrics)
        metrics.update(
            trained=ready.astype(jnp.float32),
            learning_rate=schedule(jnp.maximum(num_updates - 1, 0)),
            num_updates=num_updates,
            moves=stats.moves,
            games_finished=stats.games_finished,
            mean_game_length=stats.finished_game_length / finished,
            draw_rate=stats.draws / finished,
            first_player_score=(stats.first_player_outcome / finished + 1) / 2,
            positions_inserted=stats.positions_inserted,
            target_entropy=stats.policy_target_entropy / stats.moves,
            root_value=stats.root_value / stats.moves,
            buffer_size=replay.size,
            buffer_fill=replay.size / replay.capacity,
        )
        metrics = {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}
        new_state = TrainState(params=params, opt_state=opt_state, selfplay=games, replay=replay, rng=state.rng,
                               iteration=state.iteration + 1, num_updates=num_updates)
        return new_state, metrics

    return iteration


def make_trainer(config: TrainConfig, game: Game | None = None, mesh: Mesh | None = None,
                 compiler_options: dict | None = None) -> Trainer:
    """Validate the config against the devices, build the network and optimizer, and
    jit ``init`` and ``iteration`` with their shardings (nothing is compiled yet).

    ``compiler_options`` go to ``jax.jit`` for the iteration (e.g.
    ``{"xla_backend_optimization_level": 0}`` compiles faster on CPU, for tests)."""
    game = get_game(config.game) if game is None else game
    mesh = make_mesh() if mesh is None else mesh
    validate(config, num_devices=mesh.size)
    network = make_network(config.network, game.num_actions)
    optimizer = make_optimizer(config)
    init_fn = lambda key: _init_state(config, game, network, optimizer, key)
    abstract = jax.eval_shape(init_fn, jax.random.key(0))
    shardings = state_shardings(abstract, mesh)
    replicated = NamedSharding(mesh, P())
    iteration = jax.jit(
        make_iteration_fn(config, game, network, optimizer, mesh),
        in_shardings=(shardings, replicated),
        out_shardings=(shardings, replicated),
        donate_argnums=0,
        compiler_options=compiler_options,
    )
    init = jax.jit(init_fn, in_shardings=replicated, out_shardings=shardings, compiler_options=compiler_options)
    return Trainer(config=config, game=game, network=network, optimizer=optimizer, mesh=mesh, init=init,
                   iteration=iteration, shardings=shardings)


def make_iteration(config: TrainConfig, game: Game | None = None, mesh: Mesh | None = None) -> Callable:
    """The jitted ``iteration(state, key) -> (state, metrics)`` (state donated)."""
    return make_trainer(config, game, mesh).iteration


def iteration_key(state_or_rng, iteration: int) -> jax.Array:
    """The key of iteration ``iteration``: ``fold_in(run key, iteration)``."""
    rng = state_or_rng.rng if isinstance(state_or_rng, TrainState) else state_or_rng
    return jax.random.fold_in(jax.random.wrap_key_data(np.asarray(jax.device_get(rng))), iteration)


def abstract_state(trainer: Trainer) -> TrainState:
    """Shapes, dtypes and shardings of the train state (a restore target)."""
    shapes = jax.eval_shape(trainer.init, jax.random.key(0))
    return jax.tree.map(lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), shapes, trainer.shardings)


# ----------------------------------------------------------------------------- the loop

IterationHook = Callable[["TrainLoop", int, dict], Optional[dict]]
"""``hook(loop, iteration, metrics) -> extra metrics or None``, called after each iteration."""


def simulations_per_move(config: TrainConfig) -> int:
    return config.search.num_simulations * config.search.num_determinizations


class TrainLoop:
    """The Python side of a run: iterate, log, checkpoint, call hooks.

    ``on_iteration_end`` is where periodic evaluation plugs in: pass hooks
    ``hook(loop, iteration, metrics)`` (``loop.state.params`` and ``loop.trainer.network``
    give the current network; a hook may return extra scalars to log).
    """

    def __init__(self, config: TrainConfig, *, resume: bool = False, hooks: Iterable[IterationHook] = (),
                 console: bool = True, game: Game | None = None, trainer: Trainer | None = None):
        if config.distributed and not jax.distributed.is_initialized():
            jax.distributed.initialize()
        from beastybar_jax.metrics import MetricsLogger

        self.config = config
        self.run_dir = os.path.abspath(config.resolved_run_dir)
        # A prebuilt trainer (same config up to run_dir / logging keys) reuses its compiled step.
        self.trainer = make_trainer(config, game) if trainer is None else trainer
        self.hooks = list(hooks)
        if config.eval_every:
            from beastybar_jax.evaluation import evaluation_hook

            # First, so that user hooks (live plots) see this iteration's win rates.
            self.hooks.insert(0, evaluation_hook(config))
        self.checkpointer = Checkpointer(self.run_dir, keep=config.keep_checkpoints)
        self.totals = dict(games=0, moves=0, simulations=0, seconds=0.0)
        latest = self.checkpointer.latest_step()
        if resume and latest is not None:
            self.state, progress = self.checkpointer.restore_train_state(
                latest, abstract_state(self.trainer), expected_config=config)
            self.totals.update(progress.get("totals", {}))
            self.resumed_from = latest
        else:
            if latest is not None and not resume:
                raise CheckpointError(
                    f"{self.run_dir} already holds checkpoints (latest: iteration {latest}); pass --resume to "
                    f"continue that run, or choose another run_dir / name (e.g. --set name=new_run)")
            self.state = self.trainer.init(jax.random.key(config.seed))
            self.resumed_from = None
        self.start_iteration = int(jax.device_get(self.state.iteration))
        self._rng = np.asarray(jax.device_get(self.state.rng))
        self.logger = MetricsLogger(self.run_dir, total_iterations=config.num_iterations,
                                    start_iteration=self.start_iteration, tensorboard=config.tensorboard,
                                    console=console)
        self.logger.write_config(config, run_info=dict(
            num_devices=self.trainer.mesh.size, num_processes=jax.process_count(), backend=jax.default_backend(),
            device_kind=jax.devices()[0].device_kind, jax_version=jax.__version__,
            start_iteration=self.start_iteration))
        if self.resumed_from is not None:
            self.logger.message(f"resumed {self.run_dir} at iteration {self.start_iteration}")

    @property
    def iteration(self) -> int:
        return int(jax.device_get(self.state.iteration))

    def on_iteration_end(self, iteration: int, metrics: dict) -> dict:
        """Run the hooks after ``iteration`` (1-based count of completed iterations)."""
        for hook in self.hooks:
            extra = hook(self, iteration, metrics)
            if extra:
                metrics.update(extra)
        return metrics

    def save(self, force: bool = True) -> None:
        leaves = jax.tree.leaves(self.state)
        if any(getattr(x, "is_deleted", lambda: False)() for x in leaves):
            # Interrupted between dispatch and return of a donated step: the last
            # checkpoint stays the latest one.
            self.logger.message("state was mid-iteration; keeping the previous checkpoint")
            return
        iteration = self.iteration
        if iteration in self.checkpointer.all_steps():
            return  # already saved (e.g. Ctrl-C right after a periodic checkpoint)
        self.checkpointer.save(iteration, self.state, self.config, dict(totals=self.totals), force=force)

    def run(self, until_iteration: int | None = None) -> TrainState:
        """Iterate until ``num_iterations`` (or ``until_iteration``) iterations are done;
        checkpoint every ``checkpoint_every``, at the end and on Ctrl-C (then re-raise)."""
        config = self.config
        stop = config.num_iterations if until_iteration is None else min(until_iteration, config.num_iterations)
        sims = simulations_per_move(config)
        iteration = self.start_iteration
        try:
            if iteration < stop:
                step, compile_seconds = self.trainer.compiled_iteration(self.state)
                if compile_seconds:
                    self.logger.message(f"compiled the training iteration in {compile_seconds:.1f} s")
            while iteration < stop:
                start = time.perf_counter()
                self.state, metrics = step(self.state, iteration_key(self._rng, iteration))
                metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
                seconds = time.perf_counter() - start
                iteration += 1
                moves = int(metrics["moves"])
                self.totals["games"] += int(metrics["games_finished"])
                self.totals["moves"] += moves
                self.totals["simulations"] += moves * sims
                self.totals["seconds"] += seconds
                metrics.update(
                    iteration_seconds=seconds,
                    simulations_per_second=moves * sims / seconds,
                    total_games=self.totals["games"],
                    total_moves=self.totals["moves"],
                )
                metrics = self.on_iteration_end(iteration, metrics)
                self.logger.log(iteration, metrics)
                if config.checkpoint_every and iteration % config.checkpoint_every == 0 and iteration < stop:
                    self.save(force=True)
            self.save(force=True)
        except KeyboardInterrupt:
            self.logger.message("interrupted: saving a checkpoint")
            self.save(force=True)
            raise
        finally:
            self.checkpointer.wait()
            self.logger.close()
        return self.state

    def close(self) -> None:
        self.checkpointer.close()


def train(config: TrainConfig, *, resume: bool = False, until_iteration: int | None = None,
          hooks: Iterable[IterationHook] = (), console: bool = True) -> TrainState:
    """Train (or continue with ``resume``) a run; returns the final :class:`TrainState`."""
    loop = TrainLoop(config, resume=resume, hooks=hooks, console=console)
    try:
        return loop.run(until_iteration)
    finally:
        loop.close()
