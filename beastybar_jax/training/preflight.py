"""Every check a run makes before it writes or compiles anything: ``TrainLoop`` runs it
first and ``train.py --dry-run`` runs it alone, so a config the dry run passes is one the
run starts with (one code path).

What it checks, each failure one line naming the key (or the path) and the fix:

- the config against the run's game and devices (:func:`beastybar_jax.config.validate`);
- that the search trees fit in memory: each of ``B`` games searches ``K`` worlds of
  ``num_simulations + 1`` nodes (:func:`beastybar_jax.search.device_loop.tree_bytes`), held
  together during a move, against the device's memory where JAX reports it, else the
  host's, else :data:`HOST_MEMORY_CAP`;
- the opponents: ``eval_opponents`` and the algorithm's own (``Algorithm.check``: PPO's
  registry opponents) exist and load;
- the run directory: no other training holds it; with ``--resume`` it holds a finished
  checkpoint, without it none;
- ``warm_start``: the source is there and fits the network (a dry run notes a source that
  is not there yet, which an earlier stage may write).
"""

from __future__ import annotations

import dataclasses
import math
import os

import jax

from beastybar_jax.algorithms import get_algorithm
from beastybar_jax.checkpoint import CheckpointError, finished_steps, warm_start_params, warm_start_path
from beastybar_jax.config import ConfigError, TrainConfig, validate
from beastybar_jax.games import Game
from beastybar_jax.network import init_params, make_network
from beastybar_jax.search.device_loop import tree_bytes
from beastybar_jax.training.evaluation import make_opponents
from beastybar_jax.training.rundir import check_not_in_use

HOST_MEMORY_CAP = 16 * 2**30
"""Bytes the search trees may take where neither JAX nor the operating system says how much
memory there is."""


@dataclasses.dataclass(frozen=True)
class Preflight:
    """What the checks built, for the run to use, and the notes to show.

    Attributes:
      game: the run's game.
      opponents: the ``eval_opponents`` agents (empty when ``eval_every`` is 0).
      notes: lines for the user (a warm-start source a dry run could not find yet).
    """

    game: Game
    opponents: tuple
    notes: tuple[str, ...]


def preflight(config: TrainConfig, game: Game, *, resume: bool = False, num_devices: int | None = None,
              dry_run: bool = False) -> Preflight:
    """Run the checks of the module docstring for ``config`` on ``num_devices`` devices
    (default: all of them). Raises ``ConfigError``, ``CheckpointError`` or ``RunDirError``
    (one line); writes, initializes and compiles nothing."""
    num_devices = jax.device_count() if num_devices is None else num_devices
    validate(config, num_devices=num_devices, game=game)
    check_search_memory(config, game, num_devices)
    opponents = tuple(make_opponents(config, game)) if config.eval_every else ()
    get_algorithm(config.algorithm).check(config, game)
    check_run_dir(config.resolved_run_dir, resume)
    notes = []
    if config.warm_start and not resume:
        try:
            warm_start_path(config.warm_start, game)
        except CheckpointError as e:
            if not dry_run:
                raise
            notes.append(f"note: {e}; the run refuses to start until it is there")
        else:
            check_warm_start(config, game)
    return Preflight(game=game, opponents=opponents, notes=tuple(notes))


def device_memory() -> tuple[int, str]:
    """``(bytes, what they are)``: the first device's memory where JAX reports it
    (``memory_stats()["bytes_limit"]``: GPUs, TPUs), else the host's physical memory,
    else :data:`HOST_MEMORY_CAP`."""
    device = jax.devices()[0]
    try:
        limit = (device.memory_stats() or {}).get("bytes_limit")
    except Exception:  # noqa: BLE001 -- unsupported on some backends
        limit = None
    if limit:
        return int(limit), f"the memory of one {device.device_kind}"
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this host's memory"
    except (ValueError, OSError, AttributeError):
        return HOST_MEMORY_CAP, "the stated cap for a host that reports no memory"


def check_search_memory(config: TrainConfig, game: Game, num_devices: int = 1, memory: int | None = None) -> None:
    """Raise :class:`ConfigError` where the search trees of one move cannot fit in
    ``memory`` bytes (default: :func:`device_memory`): AlphaZero's self-play (its games
    split over ``num_devices``) and the evaluation with ``eval_simulations``."""
    shapes = jax.eval_shape(game.init, jax.random.key(0))
    state_bytes = sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(shapes))
    worlds = config.search.num_determinizations
    searches = []
    if config.algorithm == "alphazero":
        searches.append(("search.num_simulations", config.search.num_simulations,
                         -(-config.num_games // num_devices), "num_games"))
    if config.eval_every and config.eval_simulations:
        searches.append(("eval_simulations", config.eval_simulations, -(-config.eval_games // 2), "eval_games"))
    if not searches:
        return
    limit, what = (memory, "the memory given") if memory is not None else device_memory()
    for key, simulations, games, batch_key in searches:
        need = tree_bytes(simulations, game.num_actions, state_bytes) * games * worlds
        if need > limit:
            raise ConfigError(
                f"config key {key!r} ({simulations:,}): the search trees of one move need {need / 2**30:,.1f} GiB "
                f"({games:,} games x {worlds} world{'s' if worlds > 1 else ''} x {simulations + 1:,} nodes), more than the "
                f"{limit / 2**30:,.1f} GiB of {what}: lower {key} or {batch_key}", key=key)


def check_run_dir(run_dir: str, resume: bool) -> None:
    """Raise :class:`~beastybar_jax.training.rundir.RunLockedError` where another training
    holds ``run_dir``, :class:`CheckpointError` where ``--resume`` finds no finished
    checkpoint there, or a new run would start in one that holds checkpoints. The lock is
    the first process's (the one that takes it): in a run of several processes the others
    would find it held by their own run."""
    if jax.process_index() == 0:
        check_not_in_use(run_dir)
    steps = finished_steps(run_dir)
    if resume and not steps:
        what = "does not exist" if not os.path.exists(run_dir) else (
            "holds no finished checkpoint" if os.path.isdir(os.path.join(run_dir, "checkpoints")) else
            "holds no checkpoints")
        raise CheckpointError(f"cannot resume: {os.path.abspath(run_dir)} {what}; start a new run without --resume "
                              f"(or check run_dir / name)")
    if not resume and steps:
        raise CheckpointError(
            f"{os.path.abspath(run_dir)} already holds checkpoints (latest: iteration {steps[-1]}); pass --resume "
            f"to continue that run, or choose another run_dir / name (e.g. --set name=new_run)")


def check_warm_start(config: TrainConfig, game: Game) -> None:
    """Raise :class:`CheckpointError` unless ``config.warm_start`` fits ``config``'s network
    (as the run will find): checked on the network's shapes, before anything is written,
    initialized or compiled."""
    network = make_network(config.network, game)
    shapes = jax.eval_shape(lambda key: init_params(network, key, game.observation_size), jax.random.key(0))
    warm_start_params(shapes, config.warm_start, game)
