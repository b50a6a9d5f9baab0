"""Checkpoints with orbax: the whole train state, the resolved config and progress.

A run directory holds ``checkpoints/<iteration>/`` written by an
``orbax.checkpoint.CheckpointManager``, each with four items:

- ``params``: the network variables (restored alone by :func:`load_agent`);
- ``train_state``: optimizer state, games in progress and their records, replay
  buffer, run key, iteration and update counters;
- ``config``: the resolved :class:`~beastybar_jax.config.TrainConfig` as JSON;
- ``progress``: host-side totals (games, moves, simulations, seconds).

:func:`load_agent` restores the network of a run for evaluation and play.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import orbax.checkpoint as ocp

from beastybar_jax.config import TrainConfig, config_diff
from beastybar_jax.games import get_game
from beastybar_jax.network import init_params, make_network

CHECKPOINT_DIR = "checkpoints"

# Keys that may change when a run is resumed (they do not change what is computed
# per iteration, or only extend the run).
RESUMABLE_CHANGES = {
    "num_iterations", "checkpoint_every", "keep_checkpoints", "tensorboard", "distributed", "distributed_timeout",
    "eval_every", "eval_opponents", "eval_games", "run_dir",
}


class CheckpointError(FileNotFoundError, ValueError):
    """A checkpoint is missing, unreadable or does not match the run."""


def _state_items(state) -> tuple[Any, dict]:
    """Split a TrainState into (params, the rest as a dict)."""
    rest = {f.name: getattr(state, f.name) for f in dataclasses.fields(state) if f.name != "params"}
    return state.params, rest


class Checkpointer:
    """An orbax ``CheckpointManager`` over ``<run_dir>/checkpoints``."""

    def __init__(self, run_dir: str | os.PathLike, keep: int = 3, create: bool = True):
        self.directory = os.path.join(os.path.abspath(os.fspath(run_dir)), CHECKPOINT_DIR)
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=create)
        self.manager = ocp.CheckpointManager(self.directory, options=options)

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def all_steps(self) -> list[int]:
        return list(self.manager.all_steps())

    def save(self, step: int, state, config, progress: dict, force: bool = True) -> bool:
        params, rest = _state_items(state)
        return self.manager.save(
            step,
            args=ocp.args.Composite(
                params=ocp.args.StandardSave(params),
                train_state=ocp.args.StandardSave(rest),
                config=ocp.args.JsonSave(config.to_dict()),
                progress=ocp.args.JsonSave(dict(progress, iteration=int(step))),
            ),
            force=force,
        )

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()

    def read_config(self, step: int):
        try:
            restored = self.manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))
            return TrainConfig.from_dict(restored["config"], warn_legacy=False)
        except Exception as e:  # noqa: BLE001 -- orbax raises many kinds for damaged files
            raise CheckpointError(
                f"checkpoint {os.path.join(self.directory, str(step))} has no readable config "
                f"(corrupt or incomplete): {type(e).__name__}: {e}") from e

    def restore_train_state(self, step: int, abstract_state, expected_config=None):
        """Restore the full train state (with the shardings of ``abstract_state``).

        Returns ``(state, progress)``. With ``expected_config`` the saved config must
        agree on every key except :data:`RESUMABLE_CHANGES`.
        """
        path = os.path.join(self.directory, str(step))
        if expected_config is not None:
            saved = self.read_config(step)
            diff = {k: v for k, v in config_diff(saved, expected_config).items()
                    if k.split(".")[0] not in RESUMABLE_CHANGES}
            if diff:
                listed = ", ".join(f"{k}: saved {a!r}, given {b!r}" for k, (a, b) in diff.items())
                raise CheckpointError(
                    f"cannot resume {path}: the config differs from the saved run ({listed}); resume with the "
                    f"run's config (saved in the checkpoint) or start a new run with another name")
        abstract_params, abstract_rest = _state_items(abstract_state)
        try:
            restored = self.manager.restore(step, args=ocp.args.Composite(
                params=ocp.args.StandardRestore(abstract_params),
                train_state=ocp.args.StandardRestore(abstract_rest),
                progress=ocp.args.JsonRestore(),
            ))
        except Exception as e:  # noqa: BLE001
            raise CheckpointError(
                f"checkpoint {path} could not be restored (corrupt, incomplete or from a different "
                f"network/config): {type(e).__name__}: {e}") from e
        state = type(abstract_state)(params=restored["params"], **restored["train_state"])
        return state, dict(restored["progress"] or {})


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


def load_agent(run_dir_or_checkpoint: str | os.PathLike) -> TrainedModel:
    """Restore the network of a run (its latest checkpoint, or the one named).

    Raises :class:`CheckpointError` when the path is missing, holds no checkpoint or
    the checkpoint cannot be read.
    """
    directory, step = _resolve(run_dir_or_checkpoint)
    manager = ocp.CheckpointManager(directory, options=ocp.CheckpointManagerOptions(create=False, read_only=True, save_interval_steps=0))
    try:
        if step is None:
            step = manager.latest_step()
            if step is None:
                raise CheckpointError(f"{directory} holds no finished checkpoint")
        elif step not in manager.all_steps():
            raise CheckpointError(f"{os.path.join(directory, str(step))} is not a finished checkpoint "
                                  f"(available: {sorted(manager.all_steps())})")
        path = os.path.join(directory, str(step))
        try:
            config_data = manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))["config"]
        except Exception as e:  # noqa: BLE001
            raise CheckpointError(f"checkpoint {path} has no readable config (corrupt or incomplete): "
                                  f"{type(e).__name__}: {e}") from e
        config = TrainConfig.from_dict(config_data, warn_legacy=False)
        game = get_game(config.game)
        network = make_network(config.network, game)
        device = jax.local_devices()[0]
        sharding = jax.sharding.SingleDeviceSharding(device)
        shapes = jax.eval_shape(lambda k: init_params(network, k, game.observation_size), jax.random.key(0))
        abstract = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), shapes)
        try:
            params = manager.restore(step, args=ocp.args.Composite(params=ocp.args.StandardRestore(abstract)))["params"]
        except Exception as e:  # noqa: BLE001
            raise CheckpointError(f"checkpoint {path} could not be restored (corrupt or incomplete): "
                                  f"{type(e).__name__}: {e}") from e
        return TrainedModel(network=network, params=params, config=config, iteration=int(step), path=path, game=game)
    finally:
        manager.close()
