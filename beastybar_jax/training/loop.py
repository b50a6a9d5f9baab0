"""The Python side of a run, for any algorithm: iterate, log, checkpoint, evaluate.

Python only loops over iterations: each one is a single call of the algorithm's
compiled iteration (:mod:`~beastybar_jax.training.trainer`), whose key is
``fold_in(run key, iteration)`` so a resumed run continues exactly. After each
iteration the scalars go to the logger, the hooks run (periodic evaluation first)
and every ``checkpoint_every`` iterations the whole state is saved with orbax.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Iterable, Optional

import jax
import numpy as np

from beastybar_jax.config import TrainConfig
from beastybar_jax.games import Game
from beastybar_jax.training import distributed
from beastybar_jax.training.checkpoint import CheckpointError, Checkpointer
from beastybar_jax.training.metrics import MetricsLogger
from beastybar_jax.training.trainer import Trainer, abstract_state, iteration_key, make_trainer

IterationHook = Callable[["TrainLoop", int, dict], Optional[dict]]
"""``hook(loop, iteration, metrics) -> extra metrics or None``, called after each iteration."""


class TrainLoop:
    """A run: restore or initialise, iterate, log, checkpoint, call hooks.

    ``on_iteration_end`` is where periodic evaluation plugs in: pass hooks
    ``hook(loop, iteration, metrics)`` (``loop.state.params`` and ``loop.trainer.network``
    give the current network; a hook may return extra scalars to log).
    """

    def __init__(self, config: TrainConfig, *, resume: bool = False, hooks: Iterable[IterationHook] = (),
                 console: bool = True, game: Game | None = None, trainer: Trainer | None = None):
        if config.distributed:
            distributed.initialize(timeout_seconds=config.distributed_timeout)
        distributed.check_same_config(config)
        self.config = config
        self.run_dir = os.path.abspath(config.resolved_run_dir)
        self.hooks = list(hooks)
        if config.eval_every:
            from beastybar_jax.training.evaluation import evaluation_hook

            # First, so that user hooks (live plots) see this iteration's win rates; built
            # before anything compiles, so a bad opponent name fails at once.
            self.hooks.insert(0, evaluation_hook(config))
        # A prebuilt trainer (same config up to run_dir / logging keys) reuses its compiled step.
        self.trainer = make_trainer(config, game) if trainer is None else trainer
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

    def run(self, until_iteration: int | None = None):
        """Iterate until ``num_iterations`` (or ``until_iteration``) iterations are done;
        checkpoint every ``checkpoint_every``, at the end and on Ctrl-C (then re-raise).
        Returns the final train state."""
        config = self.config
        stop = config.num_iterations if until_iteration is None else min(until_iteration, config.num_iterations)
        sims = self.trainer.algorithm.simulations_per_move(config)
        iteration = self.start_iteration
        try:
            if iteration < stop:
                step, compile_seconds = self.trainer.compiled_iteration(self.state)
                if compile_seconds:
                    self.logger.message(f"compiled the training iteration in {compile_seconds:.1f} s")
                distributed.barrier("iteration compiled", config.distributed_timeout)
            while iteration < stop:
                start = time.perf_counter()
                self.state, metrics = step(self.state, iteration_key(self._rng, iteration))
                metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
                seconds = time.perf_counter() - start
                iteration += 1
                moves = int(metrics["moves"])
                self.totals["games"] += int(metrics.get("games_finished", 0))
                self.totals["moves"] += moves
                self.totals["simulations"] += moves * sims
                self.totals["seconds"] += seconds
                metrics.update(iteration_seconds=seconds, moves_per_second=moves / seconds,
                               total_games=self.totals["games"], total_moves=self.totals["moves"])
                if sims:
                    metrics["simulations_per_second"] = moves * sims / seconds
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
          hooks: Iterable[IterationHook] = (), console: bool = True):
    """Train (or continue with ``resume``) a run; returns the final train state."""
    loop = TrainLoop(config, resume=resume, hooks=hooks, console=console)
    try:
        return loop.run(until_iteration)
    finally:
        loop.close()
