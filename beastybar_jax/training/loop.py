"""The Python side of a run, for any algorithm: iterate, log, checkpoint, evaluate.

Python only loops over iterations: each one is a single call of the algorithm's
compiled iteration (:mod:`~beastybar_jax.training.trainer`), whose key is
``fold_in(run key, iteration)`` so a resumed run continues exactly. After each
iteration the scalars go to the logger, the hooks run (periodic evaluation first)
and every ``checkpoint_every`` iterations the whole state is saved with orbax.

What a run guarantees (docs/training.md, "Interrupts, crashes and resume"):

- SIGINT (Ctrl-C) or SIGTERM at any moment: the iteration running finishes (a
  compile is left at once), its metrics line is written, it is checkpointed, and
  :class:`~beastybar_jax.training.interrupt.Interrupted` is raised. An interrupt
  before the first iteration of a new run saves nothing, so the same command
  starts afresh.
- The metrics file and the checkpoints agree: an iteration is checkpointed only
  after its metrics line is written, and a resume cuts ``metrics.jsonl`` (and hides
  TensorBoard events) back to the checkpoint's iteration, so every iteration is
  logged once.
- A damaged latest checkpoint is skipped for the newest intact one (it is moved to
  ``damaged_checkpoints/``), with a message.
- One writer per run directory (:class:`~beastybar_jax.training.rundir.RunLock`).
- A resume that would change the learning-rate schedule is refused unless asked for.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable, Iterable, Optional

import jax
import numpy as np

from beastybar_jax.config import TrainConfig
from beastybar_jax.games import Game, get_game
from beastybar_jax.training import distributed
from beastybar_jax.checkpoint import CheckpointError, Checkpointer, warm_start_params
from beastybar_jax.training.compilation import compile_in_thread, enable_compilation_cache
from beastybar_jax.training.device_monitor import DeviceMonitor
from beastybar_jax.training.library_log import native_output_to_library_log
from beastybar_jax.training.evaluation import evaluation_hook
from beastybar_jax.training.guards import check_finite_losses, check_finite_state
from beastybar_jax.training.interrupt import Interrupted, StopRequest, acknowledge_stop, signal_name, when_forced
from beastybar_jax.training.metrics import MetricsLogger
from beastybar_jax.training.preflight import preflight
from beastybar_jax.training.rundir import RunLock, prepare_run_dir
from beastybar_jax.training.trainer import Trainer, abstract_state, iteration_key, make_trainer
from beastybar_jax.seeds import seed_key

IterationHook = Callable[["TrainLoop", int, dict], Optional[dict]]
"""``hook(loop, iteration, metrics) -> extra metrics or None``, called after each iteration."""


def warm_started(trainer: Trainer, state, source: str):
    """``(state, note)``: a fresh train state whose parameters start from ``source``
    (``TrainConfig.warm_start``: :func:`~beastybar_jax.checkpoint.warm_start_params`),
    with a fresh optimizer state for them; ``note`` says what was taken."""
    fresh = jax.device_get(state.params)
    params, taken, kept = warm_start_params(fresh, source, trainer.game)
    params = jax.device_put(params, trainer.shardings.params)
    opt_state = jax.jit(trainer.optimizer.init, out_shardings=trainer.shardings.opt_state)(params)
    total = taken + len(kept)
    fresh_note = f"; freshly initialized: {', '.join(kept)}" if kept else ""
    return state.replace(params=params, opt_state=opt_state), (
        f"warm start from {source}: {taken} of {total} parameter arrays{fresh_note}")


class TrainLoop:
    """A run: restore or initialise, iterate, log, checkpoint, call hooks.

    ``on_iteration_end`` is where periodic evaluation plugs in: pass hooks
    ``hook(loop, iteration, metrics)`` (``loop.state.params`` and ``loop.trainer.network``
    give the current network; a hook may return extra scalars to log). A hook that
    compiles something slow can use :meth:`compile` to show it and to let Ctrl-C in.

    ``resume``: continue the run in ``run_dir`` from its newest intact checkpoint (an
    error when there is none). Without it, a ``run_dir`` holding checkpoints is an
    error. ``allow_schedule_change``: resume even when the config's learning-rate
    schedule differs from the saved run's (see
    :func:`~beastybar_jax.checkpoint.check_resume_config`).

    Raises :class:`~beastybar_jax.training.rundir.RunDirError` (run_dir unusable or
    in use), :class:`~beastybar_jax.checkpoint.CheckpointError` and
    :class:`~beastybar_jax.config.ConfigError` before anything compiles.
    """

    _monitor = None  # the GPU's NVML readings while :meth:`run` iterates (training.device_monitor)
    _train_seconds = 0.0  # seconds of iterations in this process's run(), for max_train_seconds

    def __init__(self, config: TrainConfig, *, resume: bool = False, hooks: Iterable[IterationHook] = (),
                 console: bool = True, game: Game | None = None, trainer: Trainer | None = None,
                 allow_schedule_change: bool = False):
        if config.distributed:
            distributed.initialize(timeout_seconds=config.distributed_timeout)
        distributed.check_same_config(config, {"--resume": bool(resume),
                                               "--allow-schedule-change": bool(allow_schedule_change)})
        self.config = config
        self.run_dir = os.path.abspath(config.resolved_run_dir)
        self.is_main = jax.process_index() == 0
        self.hooks = list(hooks)
        self.checkpointer = None
        self.logger = None
        self._lock = None
        self._stop = StopRequest()
        self._run_signum: int | None = None  # the signal another process of the run got
        try:
            self._open(resume, console, game, trainer, allow_schedule_change)
        except BaseException:
            self.close()
            raise

    def _open(self, resume, console, game, trainer, allow_schedule_change) -> None:
        """Set the run up, in the order it needs things: check everything (nothing written
        yet), take the run directory, build the compiled pieces, restore or initialize the
        state, open the log."""
        config = self.config
        game = trainer.game if trainer is not None else (get_game(config.game) if game is None else game)
        num_devices = trainer.mesh.size if trainer is not None else None
        checked = preflight(config, game, resume=resume, num_devices=num_devices)
        if config.eval_every:  # first, so that user hooks (live plots) see this iteration's win rates
            self.hooks.insert(0, evaluation_hook(config, game, checked.opponents))
        if self.is_main:
            prepare_run_dir(self.run_dir)
            self._lock = RunLock(self.run_dir).acquire()
        if config.compilation_cache:
            enable_compilation_cache()
        # A prebuilt trainer (same config up to run_dir / logging keys) reuses its compiled step.
        self.trainer = make_trainer(config, game) if trainer is None else trainer
        self.checkpointer = Checkpointer(self.run_dir, keep=config.keep_checkpoints)
        self.totals = dict(games=0, moves=0, simulations=0, seconds=0.0)
        notes = []
        if resume:
            step, self.state, progress, damaged = self.checkpointer.restore_latest(
                abstract_state(self.trainer), config,
                updates_per_iteration=self.trainer.algorithm.updates_per_iteration,
                allow_schedule_change=allow_schedule_change)
            for e in damaged:
                moved = self.checkpointer.set_aside(e.step)
                notes.append(f"{e}; resuming from checkpoint {step} instead (the damaged one is now in {moved})")
            self.totals.update(progress.get("totals", {}))
            self.resumed_from = step
        else:
            self.state = self.trainer.init(seed_key(config.seed))
            if config.warm_start:
                self.state, note = warm_started(self.trainer, self.state, config.warm_start)
                notes.append(note)
            self.resumed_from = None
        self.start_iteration = int(np.asarray(self.state.iteration.addressable_data(0)))
        if self.start_iteration > config.num_iterations:
            raise CheckpointError(f"cannot resume: {self.run_dir} is at iteration {self.start_iteration}, past "
                                  f"num_iterations {config.num_iterations}; to train on, raise it (e.g. --set "
                                  f"num_iterations={2 * self.start_iteration})")
        self._rng = np.asarray(self.state.rng.addressable_data(0))
        self._saved = self.resumed_from  # the iteration of the newest checkpoint this loop knows is written
        self._logged = self.start_iteration  # the last iteration whose metrics line is written
        self.logger = MetricsLogger(self.run_dir, total_iterations=config.num_iterations,
                                    start_iteration=self.start_iteration, tensorboard=config.tensorboard,
                                    console=console)
        for note in notes:
            self.logger.message(note, important=True)
        self.logger.write_config(config, run_info=dict(
            num_devices=self.trainer.mesh.size, num_processes=jax.process_count(), backend=jax.default_backend(),
            device_kind=jax.devices()[0].device_kind, jax_version=jax.__version__,
            start_iteration=self.start_iteration))
        if self.resumed_from is not None:
            self.logger.message(f"resumed {self.run_dir} at iteration {self.start_iteration}")

    @property
    def iteration(self) -> int:
        return int(np.asarray(self.state.iteration.addressable_data(0)))

    @property
    def stop_requested(self) -> bool:
        """A SIGINT / SIGTERM arrived during :meth:`run` (agreed by every process)."""
        local = self._stop.requested
        if jax.process_count() == 1:
            return local
        from jax.experimental import multihost_utils

        # Each process's signal (0: none), so one that got none can say which signal stopped the run.
        signums = np.asarray(multihost_utils.process_allgather(np.int32((self._stop.signum or 0) if local else 0)))
        self._run_signum = next((int(s) for s in signums.reshape(-1) if s), None)
        return local or self._run_signum is not None

    def _check_stop(self) -> None:
        """Raise :class:`Interrupted` when a signal asked to stop (single process: in a
        multi-process run the processes must agree, which happens between iterations)."""
        if self._stop.requested and jax.process_count() == 1:
            acknowledge_stop()
            raise Interrupted(self._stop.signum)

    def compile(self, lowered, label: str):
        """``lowered.compile()``, showing ``compiling <label>`` with the elapsed seconds
        and leaving the compile at once on SIGINT / SIGTERM (raises :class:`Interrupted`)."""
        start = time.perf_counter()
        with self.logger.status(f"compiling {label}"), native_output_to_library_log():
            compiled = compile_in_thread(lowered, self._check_stop)
        self.logger.message(f"compiled {label} in {time.perf_counter() - start:.1f} s")
        return compiled

    def on_iteration_end(self, iteration: int, metrics: dict) -> dict:
        """Run the hooks after ``iteration`` (1-based count of completed iterations)."""
        for hook in self.hooks:
            extra = hook(self, iteration, metrics)
            if extra:
                metrics.update(extra)
        return metrics

    def save(self, force: bool = True) -> bool:
        """Checkpoint the current state, if it is a finished iteration whose metrics
        line is written and not saved yet. Returns whether a save started."""
        leaves = jax.tree.leaves(self.state)
        if any(getattr(x, "is_deleted", lambda: False)() for x in leaves):
            return False  # interrupted between the dispatch and the return of a donated step
        iteration = self.iteration
        if iteration != self._logged or iteration == self._saved or iteration == self.start_iteration:
            return False
        check_finite_state(iteration, self.state, self._saved)  # never a checkpoint of NaNs
        self.checkpointer.save(iteration, self.state, self.config, dict(totals=self.totals), force=force)
        self._saved = iteration
        return True

    def _iterate(self, step, iteration: int, sims: int) -> int:
        """One iteration: run it, then hooks, log, return the new iteration count."""
        start = time.perf_counter()
        self.state, metrics = step(self.state, iteration_key(self._rng, iteration))
        metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
        seconds = time.perf_counter() - start
        self._train_seconds += seconds
        if self._monitor is not None:  # the GPU's utilization, memory and power during it
            metrics.update(self._monitor.take())
        iteration += 1
        check_finite_losses(iteration, metrics, self._saved)
        moves = int(metrics["moves"])
        self.totals["games"] += int(metrics.get("games_finished", 0))
        self.totals["moves"] += moves
        self.totals["simulations"] += moves * sims
        self.totals["seconds"] += seconds
        metrics.update(iteration_seconds=seconds, moves_per_second=moves / seconds,
                       total_games=self.totals["games"], total_moves=self.totals["moves"])
        if sims:
            metrics["simulations_per_second"] = moves * sims / seconds
        interrupted = None
        if not self._stop.requested:  # a stop skips the hooks (an evaluation can take a while)
            try:
                metrics = self.on_iteration_end(iteration, metrics)
            except KeyboardInterrupt as e:  # a hook stopped: the iteration is done, log it
                interrupted = e
        # The line first: a checkpoint never holds an iteration whose line is missing.
        unmeasured = set(self.trainer.algorithm.unmeasured(metrics))
        self.logger.log(iteration, {k: v for k, v in metrics.items() if k not in unmeasured})
        self._logged = iteration
        if interrupted is not None:
            raise interrupted
        return iteration

    def run(self, until_iteration: int | None = None):
        """Iterate until ``num_iterations`` (or ``until_iteration``) iterations are done;
        checkpoint every ``checkpoint_every`` and at the end. On SIGINT / SIGTERM (or a
        ``KeyboardInterrupt`` from a hook) checkpoint the last finished iteration and
        raise :class:`~beastybar_jax.training.interrupt.Interrupted`. Returns the final
        train state."""
        config = self.config
        stop = config.num_iterations if until_iteration is None else min(until_iteration, config.num_iterations)
        sims = self.trainer.algorithm.simulations_per_move(config)
        iteration = self.start_iteration
        self._train_seconds = 0.0
        self._monitor = DeviceMonitor.create() if self.is_main else None
        self._stop = StopRequest().install()
        # A command line's watchdog (interrupt.CommandSignals) ends the process with this line
        # when a signal finds the loop stuck in a long compile or device call.
        previous_forced = when_forced(self._forced_message)
        completed = False
        try:
            if iteration < stop:
                step, _ = self.trainer.compiled_iteration(
                    self.state, compile=lambda lowered: self.compile(lowered, "the training iteration"))
                distributed.barrier("iteration compiled", config.distributed_timeout)
                if self._monitor is not None:  # the GPU idle while compiling: no iteration's reading
                    self._monitor.take()
            while iteration < stop:
                if self.stop_requested:  # (another process's signal, in a multi-process run)
                    raise Interrupted(self._stop.signum or self._run_signum or signal.SIGTERM)
                iteration = self._iterate(step, iteration, sims)
                if config.max_train_seconds and self._train_seconds >= config.max_train_seconds and iteration < stop:
                    self.logger.message(f"the time budget of {config.max_train_seconds:g} s is spent after iteration "
                                        f"{iteration}: saving; continue with --resume", important=True)
                    break
                if config.checkpoint_every and iteration % config.checkpoint_every == 0 and iteration < stop:
                    self.save(force=True)
            self.save(force=True)
            self.checkpointer.wait()
            completed = True
        except KeyboardInterrupt as e:
            acknowledge_stop()
            signum = getattr(e, "signum", None) or self._stop.signum or signal.SIGINT
            self.save(force=True)
            self.checkpointer.wait()
            message = self._interrupt_message(signum)
            if self._stop.signum is None and jax.process_count() > 1:
                message = f"{message} (the signal came to another process of the run)"
            raise Interrupted(signum, message) from None
        finally:
            if self._monitor is not None:
                self._monitor.close()
            self._stop.restore()
            when_forced(previous_forced)
            if not completed:
                try:
                    self.checkpointer.wait()  # a save in flight completes (or its error is dropped:
                except CheckpointError:  # the error being raised says more)
                    pass
            self.logger.stop_progress()
        return self.state

    def _forced_message(self, signum: int) -> str:
        """The line of a stop the loop could not reach (its iteration in flight is lost)."""
        name, where = signal_name(signum), os.path.join(self.run_dir, "checkpoints")
        if self._saved is None:
            return (f"interrupted by {name} during iteration {self._logged + 1}: no checkpoint yet; run the same "
                    f"command again to start afresh")
        return (f"interrupted by {name} during iteration {self._logged + 1}: the newest checkpoint is {self._saved} in "
                f"{where}; continue with --resume")

    def _interrupt_message(self, signum: int) -> str:
        name = signal_name(signum)
        where = os.path.join(self.run_dir, "checkpoints")
        if self._logged == self.start_iteration and self._saved is None:
            return (f"interrupted by {name} before the first iteration finished: nothing to save; run the same "
                    f"command again to start")
        if self._logged == self.start_iteration:
            return (f"interrupted by {name} before an iteration finished: the run stays at checkpoint "
                    f"{self._saved} in {where}; continue with --resume")
        if self._saved == self._logged:
            return f"interrupted by {name}: checkpoint {self._saved} saved in {where}; continue with --resume"
        if self._saved is None:
            return (f"interrupted by {name} during iteration {self._logged + 1}: no checkpoint yet; run the same "
                    f"command again to start afresh")
        return (f"interrupted by {name} during iteration {self._logged + 1}: the newest checkpoint is "
                f"{self._saved} in {where}; continue with --resume")

    def close(self) -> None:
        """Finish saves in flight, close the files and release the run directory."""
        try:
            if self.checkpointer is not None:
                self.checkpointer.close()
                self.checkpointer = None
        finally:
            if self.logger is not None:
                self.logger.close()
                self.logger = None
            if self._lock is not None:
                self._lock.release()
                self._lock = None


def train(config: TrainConfig, *, resume: bool = False, until_iteration: int | None = None,
          hooks: Iterable[IterationHook] = (), console: bool = True, allow_schedule_change: bool = False):
    """Train (or continue with ``resume``) a run; returns the final train state."""
    loop = TrainLoop(config, resume=resume, hooks=hooks, console=console, allow_schedule_change=allow_schedule_change)
    try:
        return loop.run(until_iteration)
    finally:
        loop.close()
