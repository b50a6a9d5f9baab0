"""Checkpoints with orbax: the whole train state, the resolved config and progress.

A run directory holds ``checkpoints/<iteration>/`` written by an
``orbax.checkpoint.CheckpointManager``, each with four items:

- ``params``: the network variables (restored alone by :func:`load_agent`);
- ``train_state``: the rest of the algorithm's train state (optimizer state, games in
  progress, replay buffer, run key, iteration and update counters);
- ``config``: the resolved :class:`~beastybar_jax.config.TrainConfig` as JSON;
- ``progress``: host-side totals (games, moves, simulations, seconds);

and ``checksums.json``: the size and SHA-256 of every file orbax wrote, added once
the (asynchronous) save has finished. A checkpoint is *damaged* when a file differs
from its checksum, when orbax cannot read it and it has no checksums to vouch for its
files, when its parameters or optimizer state hold NaN or infinity, or when its iteration
is not its step. A checkpoint whose files match their checksums but which orbax cannot
restore is not damaged: the cause lies outside its files, and the error says so
(:func:`restore_failure`). Resuming and
:func:`load_agent` then fall back to the newest intact checkpoint and say so
(:class:`DamagedCheckpointWarning`); a resumed run moves the damaged ones to
``<run_dir>/damaged_checkpoints/``. A checkpoint without ``checksums.json`` (one a crash
interrupted right after orbax committed it) is checked by restoring it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import sys
import traceback
import warnings
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from beastybar_jax.config import TrainConfig, config_diff
from beastybar_jax.config.schedule import decay_steps
from beastybar_jax.games import get_game
from beastybar_jax.network import init_params, make_network

CHECKPOINT_DIR = "checkpoints"
DAMAGED_DIR = "damaged_checkpoints"
CHECKSUMS_FILE = "checksums.json"

RESUMABLE_CHANGES = frozenset({
    "num_iterations", "max_train_seconds", "checkpoint_every", "keep_checkpoints", "tensorboard", "distributed", "distributed_timeout",
    "compilation_cache",
    "eval_every", "eval_opponents", "eval_games", "eval_simulations", "eval_endgames", "eval_endgame_positions",
    "run_dir",
})
"""Keys that may change when a run is resumed: they do not change what an iteration
computes (checkpoints, logging, evaluation, scale-out), or only extend the run.
``num_iterations`` and ``decay_steps`` may change only while the learning-rate
schedule stays the same (see :func:`check_resume_config`)."""


class CheckpointError(FileNotFoundError, ValueError):
    """A checkpoint is missing, unreadable or does not match the run."""


class DamagedCheckpointError(CheckpointError):
    """One checkpoint is damaged (``step``, ``reason``)."""

    def __init__(self, path: str, step: int, reason: str):
        super().__init__(f"checkpoint {path} is damaged: {reason}")
        self.path, self.step, self.reason = path, step, reason


class DamagedCheckpointWarning(UserWarning):
    """A damaged checkpoint was skipped for an older, intact one."""


def _raised_in_orbax(error: BaseException) -> bool:
    """Whether ``error`` was raised by TensorStore or passed through orbax's code."""
    if "tensorstore" in str(error):
        return True
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ is not None else []
    return any(f"{os.sep}orbax{os.sep}" in frame.filename for frame in frames)


class _QuietOrbaxErrors(logging.Filter):
    """Drops orbax's error logs (each a traceback of a background thread, dozens of
    lines), asyncio's "exception never retrieved" for writes a failed save abandoned
    (TensorStore's, or orbax's own metadata files: whenever the garbage collector finds
    them, so possibly after the command's error line), and orbax's note that a
    directory is opened read-only: every failure of a save or restore reaches the caller
    as one :class:`CheckpointError` line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "asyncio":
            error = record.exc_info[1] if record.exc_info else None
            return not (error is not None and _raised_in_orbax(error))
        if f"{os.sep}orbax{os.sep}" not in record.pathname:
            return True
        if record.levelno >= logging.ERROR:
            return False
        return not (record.levelno == logging.WARNING and "read only" in record.getMessage())


_QUIET_ORBAX = _QuietOrbaxErrors()


def _quiet_orbax() -> None:
    """Install :class:`_QuietOrbaxErrors` on the logger orbax writes to, and drop the
    ``RuntimeError: Event loop is closed`` that TensorStore's callbacks raise (as
    "unraisable" exceptions, one traceback each) when they complete after a failed
    save has closed orbax's event loop; other unraisable exceptions go on as before."""
    for name in ("absl", "asyncio"):
        logger = logging.getLogger(name)
        if _QUIET_ORBAX not in logger.filters:
            logger.addFilter(_QUIET_ORBAX)
    if not getattr(sys.unraisablehook, "_drops_closed_event_loops", False):
        previous = sys.unraisablehook

        def hook(unraisable):
            if isinstance(unraisable.exc_value, RuntimeError) and str(unraisable.exc_value) == "Event loop is closed":
                return
            previous(unraisable)

        hook._drops_closed_event_loops = True
        sys.unraisablehook = hook


def _state_items(state) -> tuple[Any, dict]:
    """Split a train state into (params, the rest as a dict)."""
    rest = {f.name: getattr(state, f.name) for f in dataclasses.fields(state) if f.name != "params"}
    return state.params, rest


def failure_reason(error: BaseException, limit: int = 300) -> str:
    """One line on why a checkpoint operation failed: the operating system's message
    when there is one (``[Errno 28] No space left on device``), else the first line of
    the error (orbax and TensorStore errors run to dozens of lines)."""
    seen = set()
    chain = error
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        if isinstance(chain, OSError) and chain.strerror:
            return f"[Errno {chain.errno}] {chain.strerror}"
        chain = chain.__cause__ or chain.__context__
    text = str(error)
    for known in ("No space left on device", "Disk quota exceeded", "Read-only file system", "Permission denied",
                  "File too large"):
        if known in text:
            return known
    line = next((l.strip() for l in text.splitlines() if l.strip()), "")
    if _TENSORSTORE_DETAILS in line:
        # orbax wraps TensorStore's error in one whose first line ends in a spec dump cut
        # mid-way; the error it wraps says which file and what is wrong with it.
        cause = error.__cause__ or error.__context__
        if cause is not None and str(cause).strip():
            return failure_reason(cause, limit)
        line = line.split(_TENSORSTORE_DETAILS)[0].strip()
    line = f"{type(error).__name__}: {line}" if line else type(error).__name__
    return line if len(line) <= limit else line[:limit] + " ..."


_TENSORSTORE_DETAILS = "See full TensorStore details"


# ----------------------------------------------------------------------------- checksums


def _file_digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def compute_checksums(step_dir: str) -> dict[str, list]:
    """``{relative path: [size, sha256]}`` of every file under a checkpoint directory."""
    sums = {}
    for root, _dirs, files in os.walk(step_dir):
        for name in files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, step_dir)
            if rel == CHECKSUMS_FILE or rel.startswith(CHECKSUMS_FILE):
                continue
            sums[rel] = [os.path.getsize(path), _file_digest(path)]
    return dict(sorted(sums.items()))


def write_checksums(step_dir: str) -> None:
    """Write ``checksums.json`` into a finished checkpoint (atomically: a partial file
    never replaces a whole one). A failure (a full disk) leaves the checkpoint
    without checksums, to be checked by restoring it."""
    tmp = os.path.join(step_dir, CHECKSUMS_FILE + ".tmp")
    try:
        with open(tmp, "w") as f:
            json.dump(dict(algorithm="sha256", files=compute_checksums(step_dir)), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(step_dir, CHECKSUMS_FILE))
    except OSError:
        try:
            os.remove(tmp)
        except OSError:
            pass


def verify_checksums(step_dir: str, step: int, items: tuple[str, ...] | None = None) -> bool:
    """Check the files of a checkpoint (or of its ``items`` only) against its
    ``checksums.json``. Returns False when it has none; raises
    :class:`DamagedCheckpointError` naming the first file that differs or is missing."""
    path = os.path.join(step_dir, CHECKSUMS_FILE)
    if not os.path.exists(path):
        return False
    try:
        with open(path) as f:
            files = json.load(f)["files"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DamagedCheckpointError(step_dir, step, f"unreadable {CHECKSUMS_FILE} ({failure_reason(e)})") from None
    for rel, (size, digest) in files.items():
        if items is not None and rel.split(os.sep, 1)[0] not in items:
            continue
        full = os.path.join(step_dir, rel)
        try:
            actual_size = os.path.getsize(full)
            actual_digest = _file_digest(full) if actual_size == size else None
        except OSError:
            raise DamagedCheckpointError(step_dir, step, f"{rel} is missing or unreadable") from None
        if actual_size != size:
            raise DamagedCheckpointError(step_dir, step, f"{rel} has {actual_size} bytes, {size} were written")
        if actual_digest != digest:
            raise DamagedCheckpointError(step_dir, step, f"{rel} differs from its checksum")
    return True


def restore_failure(path: str, step: int, sealed: bool, what: str, error: BaseException) -> CheckpointError:
    """The error for a restore of checkpoint ``step`` that raised ``error``.

    Without checksums (``sealed`` False) the files cannot vouch for themselves, so the
    checkpoint is damaged (:class:`DamagedCheckpointError`: skipped, and set aside by a
    resumed run). With files that match their checksums the cause lies outside them: a
    collective between processes that failed, memory, or a network this version of the
    code builds differently. Then it is a plain :class:`CheckpointError`, and the
    checkpoint stays where it is: moving a healthy checkpoint aside would lose it."""
    if not sealed:
        return DamagedCheckpointError(path, step, f"{what} ({failure_reason(error)}); it is incomplete")
    return CheckpointError(f"cannot restore checkpoint {path}: {what} ({failure_reason(error)}); its files match "
                           f"their checksums, so the cause is not in them (a failure between processes, memory, or "
                           f"a network this version of the code builds differently) and it is left as it is")


def _local_int(x) -> int:
    return int(np.asarray(x.addressable_data(0) if isinstance(x, jax.Array) else x))


IMPLAUSIBLE_MAGNITUDE = 1e30
"""A parameter or optimizer value this large is damage (a flipped exponent bit), not
training: the next forward pass overflows to NaN. Restores refuse it like a NaN."""


def non_finite_leaf(tree, limit: float = IMPLAUSIBLE_MAGNITUDE) -> str | None:
    """The path of the first floating-point leaf of ``tree`` holding a NaN, an
    infinity or a value beyond ``±limit``, or None. Reads each leaf's first local copy
    (parameters and optimizer state are replicated, so every process decides alike)."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if not jax.numpy.issubdtype(getattr(leaf, "dtype", np.float32), jax.numpy.floating):
            continue
        local = np.asarray(leaf.addressable_data(0) if isinstance(leaf, jax.Array) else leaf, dtype=np.float32)
        if not np.all(np.isfinite(local)) or (local.size and float(np.max(np.abs(local))) > limit):
            return jax.tree_util.keystr(path)
    return None


# ----------------------------------------------------------------------------- resume rules


def check_resume_config(saved: TrainConfig, given: TrainConfig, updates_per_iteration, *, path: str,
                        allow_schedule_change: bool = False) -> None:
    """Raise :class:`CheckpointError` when ``given`` may not continue a run saved with
    ``saved``: a key outside :data:`RESUMABLE_CHANGES` differs, or the learning-rate
    schedule would change (``num_iterations`` changed while ``decay_steps`` is 0, so
    the cosine would be stretched and the rate jump at the resume point) unless
    ``allow_schedule_change``. ``updates_per_iteration(config)`` comes from the
    run's algorithm."""
    diff = {k: v for k, v in config_diff(saved, given).items()
            if k.split(".")[0] not in RESUMABLE_CHANGES and k != "decay_steps"}
    if diff:
        listed = ", ".join(f"{k}: saved {a!r}, given {b!r}" for k, (a, b) in diff.items())
        raise CheckpointError(
            f"cannot resume {path}: the config differs from the saved run ({listed}); resume with the "
            f"run's config (--config with the run directory's config.json, which holds it) or start a new "
            f"run with another name")
    old = decay_steps(saved, saved.num_iterations * updates_per_iteration(saved))
    new = decay_steps(given, given.num_iterations * updates_per_iteration(given))
    if old != new and not allow_schedule_change:
        cause = ("num_iterations changed while decay_steps is 0 (the schedule ends at the run's last update)"
                 if saved.decay_steps == given.decay_steps == 0 else "decay_steps changed")
        raise CheckpointError(
            f"cannot resume {path}: {cause}, which would change the learning-rate schedule (cosine decay over "
            f"{old} updates, now {new}: the rate would jump at the resume point); keep the schedule with "
            f"--set decay_steps={old}, or pass --allow-schedule-change (TrainLoop(allow_schedule_change=True)) "
            f"to use the new one")


# ----------------------------------------------------------------------------- the run's checkpoints


def finished_steps(run_dir: str | os.PathLike) -> list[int]:
    """The iterations of the finished checkpoints in ``run_dir`` (orbax names each
    ``checkpoints/<iteration>`` once it is complete), without opening them."""
    directory = os.path.join(os.fspath(run_dir), CHECKPOINT_DIR)
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isdigit() and os.path.isdir(os.path.join(directory, n)))


class Checkpointer:
    """An orbax ``CheckpointManager`` over ``<run_dir>/checkpoints``, with checksums.

    Errors of orbax (a full disk, an unreadable file) come out as one-line
    :class:`CheckpointError` s; a failed save leaves the finished checkpoints as they
    were (orbax writes into a temporary directory and renames it when complete), and
    its line names them, or says that none was ever finished."""

    def __init__(self, run_dir: str | os.PathLike, keep: int = 3, create: bool = True):
        self.run_dir = os.path.abspath(os.fspath(run_dir))
        self.directory = os.path.join(self.run_dir, CHECKPOINT_DIR)
        self.is_main = jax.process_index() == 0
        _quiet_orbax()
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=create, cleanup_tmp_directories=True)
        try:
            self.manager = ocp.CheckpointManager(self.directory, options=options)
        except Exception as e:  # noqa: BLE001 -- orbax raises many kinds
            raise CheckpointError(f"cannot open checkpoints in {self.directory}: {failure_reason(e)}") from None
        self._unsealed: list[int] = []

    def step_dir(self, step: int) -> str:
        return os.path.join(self.directory, str(step))

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def all_steps(self) -> list[int]:
        return sorted(self.manager.all_steps())

    def save(self, step: int, state, config, progress: dict, force: bool = True) -> bool:
        """Start saving ``state`` as checkpoint ``step`` (asynchronously; :meth:`wait`
        for it). Raises :class:`CheckpointError` when this or the previous save failed."""
        self._seal_finished()
        params, rest = _state_items(state)
        try:
            saved = self.manager.save(
                step,
                args=ocp.args.Composite(
                    params=ocp.args.StandardSave(params),
                    train_state=ocp.args.StandardSave(rest),
                    config=ocp.args.JsonSave(config.to_dict()),
                    progress=ocp.args.JsonSave(dict(progress, iteration=int(step))),
                ),
                force=force,
            )
        except Exception as e:  # noqa: BLE001 -- orbax raises a failed earlier save here too
            raise self._write_failure([*self._unsealed, step], e) from None
        if saved:
            self._unsealed.append(step)
        return saved

    def wait(self) -> None:
        """Block until the saves in flight are complete, then add their checksums."""
        try:
            self.manager.wait_until_finished()
        except Exception as e:  # noqa: BLE001
            raise self._write_failure(self._unsealed, e) from None
        self._seal()

    def finished_steps(self) -> list[int]:
        """The checkpoints whose write finished, as found on disk: orbax writes a checkpoint
        into ``<step>.orbax-checkpoint-tmp`` and renames it ``<step>`` once complete."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        return sorted(int(n) for n in names if n.isdigit() and os.path.isdir(os.path.join(self.directory, n)))

    def _write_failure(self, steps: list[int], error: BaseException) -> CheckpointError:
        """The one line of a failed save: the checkpoints it lost (``steps`` not finished:
        the save that failed may be an earlier asynchronous one, which orbax reports at
        the next save) and what the run still holds on disk."""
        self._unsealed = []
        finished = self.finished_steps()
        lost = sorted({s for s in steps if s not in finished}) or sorted(set(steps))
        named = f"checkpoint {lost[0]}" if len(lost) == 1 else "checkpoints " + ", ".join(map(str, lost))
        if finished:
            holds = (f"the finished checkpoint{'s' if len(finished) > 1 else ''} "
                     f"({', '.join(map(str, finished))}) {'are' if len(finished) > 1 else 'is'} intact")
        else:
            holds = "no checkpoint was ever finished there: nothing of this run is saved"
        return CheckpointError(f"cannot write {named} in {self.directory}: {failure_reason(error)}; {holds}")

    def _seal_finished(self) -> None:
        if self._unsealed and not self.manager.is_saving_in_progress():
            self.wait()

    def _seal(self) -> None:
        unsealed, self._unsealed = self._unsealed, []
        if not self.is_main:
            return
        for step in unsealed:
            if os.path.isdir(self.step_dir(step)):  # not yet deleted by keep_checkpoints
                write_checksums(self.step_dir(step))

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self.manager.close()

    def read_config(self, step: int) -> TrainConfig:
        path = self.step_dir(step)
        sealed = verify_checksums(path, step, items=("config",))
        try:
            restored = self.manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))
            return TrainConfig.from_dict(restored["config"])
        except Exception as e:  # noqa: BLE001 -- orbax raises many kinds for damaged files
            raise restore_failure(path, step, sealed, "no readable config", e) from None

    def restore_train_state(self, step: int, abstract_state, expected_config=None, *, updates_per_iteration=None,
                            allow_schedule_change: bool = False):
        """Restore the full train state of checkpoint ``step`` (with the shardings of
        ``abstract_state``). Returns ``(state, progress)``.

        With ``expected_config``, :func:`check_resume_config` must accept it
        (``updates_per_iteration``: the algorithm's, for the schedule check). Raises
        :class:`DamagedCheckpointError` when the checkpoint is damaged."""
        path = self.step_dir(step)
        if expected_config is not None:
            saved = self.read_config(step)
            check_resume_config(saved, expected_config, updates_per_iteration or (lambda config: 1), path=path,
                                allow_schedule_change=allow_schedule_change)
        sealed = verify_checksums(path, step)
        abstract_params, abstract_rest = _state_items(abstract_state)
        try:
            restored = self.manager.restore(step, args=ocp.args.Composite(
                params=ocp.args.StandardRestore(abstract_params),
                train_state=ocp.args.StandardRestore(abstract_rest),
                progress=ocp.args.JsonRestore(),
            ))
        except Exception as e:  # noqa: BLE001
            raise restore_failure(path, step, sealed, "orbax cannot restore it", e) from None
        state = type(abstract_state)(params=restored["params"], **restored["train_state"])
        bad = non_finite_leaf(dict(params=state.params, opt_state=getattr(state, "opt_state", None)))
        if bad is not None:
            raise DamagedCheckpointError(path, step, f"non-finite values (or beyond ±{IMPLAUSIBLE_MAGNITUDE:g}) in {bad}")
        iteration = _local_int(state.iteration)
        if iteration != step:
            raise DamagedCheckpointError(path, step, f"it holds iteration {iteration}")
        return state, dict(restored["progress"] or {})

    def restore_latest(self, abstract_state, expected_config, *, updates_per_iteration,
                       allow_schedule_change: bool = False):
        """Restore the newest intact checkpoint. Returns ``(step, state, progress,
        damaged)`` with ``damaged`` the newer checkpoints skipped, as
        :class:`DamagedCheckpointError` s. A config that may not resume (see
        :func:`check_resume_config`) raises at once: that is no damage."""
        damaged = []
        for step in reversed(self.all_steps()):
            try:
                state, progress = self.restore_train_state(
                    step, abstract_state, expected_config, updates_per_iteration=updates_per_iteration,
                    allow_schedule_change=allow_schedule_change)
                return step, state, progress, damaged
            except DamagedCheckpointError as e:
                damaged.append(e)
        listed = "; ".join(str(e) for e in damaged)
        raise CheckpointError(f"no intact checkpoint in {self.directory} ({listed}); start a new run (another "
                              f"name or run_dir)")

    def set_aside(self, step: int) -> str:
        """Move a damaged checkpoint to ``<run_dir>/damaged_checkpoints/`` (so the run
        can write that step again); returns its new place."""
        target = os.path.join(self.run_dir, DAMAGED_DIR, str(step))
        suffix = 1
        while os.path.exists(target):
            target = os.path.join(self.run_dir, DAMAGED_DIR, f"{step}-{suffix}")
            suffix += 1
        if self.is_main:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.move(self.step_dir(step), target)
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(f"set aside checkpoint {step}")
        self.manager.reload()
        return target


# ----------------------------------------------------------------------------- load_agent


@dataclasses.dataclass
class TrainedModel:
    """A trained network ready for ``network.apply(params, observations)``."""

    network: Any  # PolicyValueNet
    params: Any
    config: Any  # TrainConfig
    iteration: int
    path: str
    game: Any = None  # the Game it was trained on


def _resolve(path: str | os.PathLike) -> tuple[str, int | None]:
    """(checkpoint manager directory, step or None for the latest) of a run dir, a
    ``checkpoints`` dir or one ``checkpoints/<step>`` dir."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.exists(path):
        raise CheckpointError(f"no such run directory or checkpoint: {path}")
    if os.path.isdir(os.path.join(path, CHECKPOINT_DIR)):
        return os.path.join(path, CHECKPOINT_DIR), None
    base = os.path.basename(path)
    if base.isdigit() and os.path.isdir(path):
        return os.path.dirname(path), int(base)
    if os.path.isdir(path) and any(d.isdigit() for d in os.listdir(path)):
        return path, None
    raise CheckpointError(
        f"{path} holds no checkpoint: expected a run directory (with {CHECKPOINT_DIR}/), its "
        f"{CHECKPOINT_DIR}/ directory, or one {CHECKPOINT_DIR}/<iteration> directory")


def _load_network(manager, directory: str, step: int) -> TrainedModel:
    """The network of checkpoint ``step``; raises :class:`DamagedCheckpointError`."""
    path = os.path.join(directory, str(step))
    sealed = verify_checksums(path, step, items=("config", "params"))
    try:
        config_data = manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))["config"]
        config = TrainConfig.from_dict(config_data)
    except Exception as e:  # noqa: BLE001
        raise restore_failure(path, step, sealed, "no readable config", e) from None
    game = get_game(config.game)
    network = make_network(config.network, game)
    device = jax.local_devices()[0]
    sharding = jax.sharding.SingleDeviceSharding(device)
    shapes = jax.eval_shape(lambda k: init_params(network, k, game.observation_size), jax.random.key(0))
    abstract = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), shapes)
    try:
        params = manager.restore(step, args=ocp.args.Composite(params=ocp.args.StandardRestore(abstract)))["params"]
    except Exception as e:  # noqa: BLE001
        raise restore_failure(path, step, sealed, "orbax cannot restore its parameters", e) from None
    bad = non_finite_leaf(params)
    if bad is not None:
        raise DamagedCheckpointError(path, step, f"non-finite values (or beyond ±{IMPLAUSIBLE_MAGNITUDE:g}) in {bad}")
    return TrainedModel(network=network, params=params, config=config, iteration=int(step), path=path, game=game)


def load_agent(run_dir_or_checkpoint: str | os.PathLike) -> TrainedModel:
    """Restore the network of a run (its latest checkpoint, or the one named).

    A damaged latest checkpoint (see the module docstring) is skipped for the newest
    intact one, with a :class:`DamagedCheckpointWarning`; a damaged checkpoint named
    explicitly is an error. Raises :class:`CheckpointError` when the path is missing,
    holds no checkpoint or no intact one. A directory holding an exported network
    (:func:`save_exported`) is read by :func:`load_exported`. A leading ``~`` is expanded
    (``checkpoint:~/runs/x`` reaches no shell).
    """
    run_dir_or_checkpoint = os.path.expanduser(os.fspath(run_dir_or_checkpoint))
    if os.path.isfile(os.path.join(run_dir_or_checkpoint, EXPORT_PARAMS)):
        return load_exported(run_dir_or_checkpoint)
    directory, step = _resolve(run_dir_or_checkpoint)
    _quiet_orbax()
    manager = ocp.CheckpointManager(directory, options=ocp.CheckpointManagerOptions(
        create=False, read_only=True, save_interval_steps=0))
    try:
        if step is not None:
            if step not in manager.all_steps():
                raise CheckpointError(f"{os.path.join(directory, str(step))} is not a finished checkpoint "
                                      f"(available: {sorted(manager.all_steps())})")
            return _load_network(manager, directory, step)
        steps = sorted(manager.all_steps(), reverse=True)
        if not steps:
            raise CheckpointError(f"{directory} holds no finished checkpoint")
        damaged = []
        for candidate in steps:
            try:
                model = _load_network(manager, directory, candidate)
            except DamagedCheckpointError as e:
                damaged.append(e)
                continue
            for e in damaged:
                warnings.warn(f"{e}; loaded checkpoint {model.path} instead", DamagedCheckpointWarning, stacklevel=2)
            return model
        raise CheckpointError(f"no intact checkpoint in {directory}: " + "; ".join(str(e) for e in damaged))
    finally:
        manager.close()


# ----------------------------------------------------------------------------- exported networks
# A trained network as two plain files, for shipping inside the package (``Game.agents.networks``,
# Beasty Bar's ``champion``): ``config.json`` (the run's whole config, so the network is
# rebuilt exactly and search at play time uses the run's search settings) and
# ``params.msgpack`` (the parameters in flax's msgpack format). An orbax checkpoint is a
# directory tied to orbax's layout, with optimizer state and replay buffer a shipped
# network never needs; a msgpack file is one small self-describing file any flax reads.

EXPORT_CONFIG, EXPORT_PARAMS, EXPORT_INFO = "config.json", "params.msgpack", "info.json"


class ExportError(CheckpointError):
    """An exported network whose files are missing, unreadable or do not match."""


def save_exported(model: TrainedModel, directory: str | os.PathLike, info: dict | None = None) -> str:
    """Write ``model`` (e.g. :func:`load_agent`'s) as ``config.json`` + ``params.msgpack``
    (and ``info`` as ``info.json``) in ``directory``; returns the directory. Refuses
    (:class:`ExportError`) a run directory: ``checkpoint:`` would then name the export,
    not the run's checkpoints."""
    from flax import serialization

    if os.path.isdir(os.path.join(directory, CHECKPOINT_DIR)):
        raise ExportError(f"{os.path.abspath(directory)} is a run directory (it has {CHECKPOINT_DIR}/): "
                          "export a network into a directory of its own")
    os.makedirs(directory, exist_ok=True)
    config = model.config.to_dict()
    config["run_dir"] = "runs/{name}"  # where it was trained does not travel
    with open(os.path.join(directory, EXPORT_CONFIG), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(directory, EXPORT_PARAMS), "wb") as f:
        f.write(serialization.to_bytes(jax.device_get(model.params)))
    if info is not None:
        with open(os.path.join(directory, EXPORT_INFO), "w") as f:
            json.dump(info, f, indent=2)
            f.write("\n")
    return os.path.abspath(directory)


def load_exported(directory: str | os.PathLike) -> TrainedModel:
    """The network :func:`save_exported` wrote in ``directory``: nothing but its two files
    is read. Raises :class:`ExportError` when they are missing, unreadable, do not match
    the config's network, or hold non-finite values."""
    from flax import serialization

    config_path = os.path.join(directory, EXPORT_CONFIG)
    params_path = os.path.join(directory, EXPORT_PARAMS)
    if not os.path.isfile(config_path) or not os.path.isfile(params_path):
        raise ExportError(f"no exported network in {directory}: expected {EXPORT_CONFIG} and {EXPORT_PARAMS} "
                          f"(python experiments/export_champion.py RUN_DIR writes them)")
    try:
        with open(config_path) as f:
            config = TrainConfig.from_dict(json.load(f))
    except (ValueError, TypeError) as e:  # ConfigError is a ValueError
        raise ExportError(f"{config_path} is not a usable config: {e}") from None
    game = get_game(config.game)
    network = make_network(config.network, game)
    shapes = jax.eval_shape(lambda key: init_params(network, key, game.observation_size), jax.random.key(0))
    target = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes)
    from flax import traverse_util

    try:
        with open(params_path, "rb") as f:
            raw = serialization.msgpack_restore(f.read())
        if not isinstance(raw, dict):
            raise TypeError(f"it holds a {type(raw).__name__}, not a tree of parameters")
        found = traverse_util.flatten_dict(raw, sep="/")
        expected = traverse_util.flatten_dict(serialization.to_state_dict(target), sep="/")
        if set(found) != set(expected):  # nothing dropped or left out without a word
            odd = sorted(set(found) ^ set(expected))[0]
            raise KeyError(f"{'has' if odd in found else 'lacks'} the parameter {odd}")
        other = [k for k in expected if np.shape(found[k]) != expected[k].shape
                 or np.asarray(found[k]).dtype != expected[k].dtype]
        if other:
            raise ValueError(f"{other[0]} is {np.asarray(found[other[0]]).dtype}{list(np.shape(found[other[0]]))}, "
                             f"the network's is {expected[other[0]].dtype}{list(expected[other[0]].shape)}")
        params = serialization.from_state_dict(target, raw)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ExportError(f"{params_path} does not match the network of {config_path}: {e}") from None
    bad = non_finite_leaf(params)
    if bad is not None:
        raise ExportError(f"{params_path}: non-finite values (or beyond ±{IMPLAUSIBLE_MAGNITUDE:g}) in {bad}")
    return TrainedModel(network=network, params=jax.tree.map(jax.numpy.asarray, params), config=config,
                        iteration=_exported_iteration(directory), path=os.path.abspath(directory), game=game)


def _exported_iteration(directory) -> int:
    try:
        with open(os.path.join(directory, EXPORT_INFO)) as f:
            return int(json.load(f).get("iteration", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def warm_start_path(source: str, game=None) -> str:
    """Where ``warm_start`` ``source`` lies: one of ``game``'s shipped networks by name, or
    the path itself. Raises :class:`CheckpointError` where nothing is there, so a run can
    refuse a missing source before it writes anything."""
    path = str(dict(game.agents.networks if game is not None else ()).get(source, source))
    if not os.path.exists(path):
        raise CheckpointError(f"warm_start {source!r}: no such run directory or checkpoint: {os.path.abspath(path)}")
    return path


def warm_start_params(fresh, source: str, game=None):
    """``(params, taken, fresh_paths)``: ``fresh`` (a network's variables) with every
    parameter that ``source`` has at the same path taken from there; ``taken`` counts
    them, ``fresh_paths`` lists the paths ``source`` lacks (a part it does not have, such
    as a new layer), kept as they are. ``source``: a run directory, a checkpoint, an
    exported network, or the name of one of ``game``'s shipped networks
    (``Game.agents.networks``: Beasty Bar's ``champion``). ``fresh`` may be abstract
    (``jax.eval_shape``'s), to check a source before anything is initialized. Raises
    :class:`CheckpointError` where it cannot be read, shares no parameter, has a parameter
    of another shape at the same path, or one this network has no place for (networks of
    other sizes: a deeper source's last block would be dropped without a word)."""
    path = warm_start_path(source, game)
    try:
        model = load_agent(path)
    except CheckpointError as e:
        raise CheckpointError(f"warm_start {source!r}: {e}") from None
    if game is not None and model.game.name != game.name:
        raise CheckpointError(f"warm_start {source!r}: a {model.game.name} network; this run plays {game.name}")
    known = {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_flatten_with_path(model.params)[0]}
    taken, kept, other = 0, [], []

    def pick(key_path, leaf):
        nonlocal taken
        name = jax.tree_util.keystr(key_path)
        value = known.get(name)
        if value is None:
            kept.append(name)
            return leaf
        if np.shape(value) != np.shape(leaf):
            other.append(f"{name}: {np.shape(value)} there, {np.shape(leaf)} here")
            return leaf
        taken += 1
        return np.asarray(value, leaf.dtype)

    params = jax.tree_util.tree_map_with_path(pick, fresh)
    here = {jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_flatten_with_path(fresh)[0]}
    unused = sorted(set(known) - here)
    if unused:
        raise CheckpointError(f"warm_start {source!r}: {len(unused)} of its parameter arrays have no place in this "
                              f"run's network (e.g. {unused[0]}): the networks differ in size; check network.* "
                              f"against the source's config")
    if other:
        raise CheckpointError(f"warm_start {source!r}: {len(other)} parameters have other shapes there (e.g. "
                              f"{other[0]}): the networks differ in size; check network.* against the source's "
                              f"config")
    if taken == 0:
        raise CheckpointError(f"warm_start {source!r}: its network shares no parameter with this run's")
    return params, taken, kept
