"""The champion: a trained Beasty Bar network shipped inside the package.

``beastybar_jax/games/beastybar/champion/`` holds two data files, nothing else:

* ``config.json``: the run's whole config (``TrainConfig.to_dict``), so the network is
  rebuilt exactly (``make_network(config.network, game)``) and search at play time uses
  the run's search settings;
* ``params.msgpack``: the network's parameters in flax's msgpack format
  (``flax.serialization``), restored into the shapes the config gives.

Why not an orbax checkpoint: loading one needs the orbax version's directory layout
(several files, metadata, checksums), while a msgpack file is one small self-describing
file that any flax reads; the champion never resumes training, so it needs no
optimizer state, replay buffer or rng. ``README.md`` there says how it was trained.

Agent specs: ``champion`` (raw policy) and ``champion@sims=N[@worlds=K][@algo=...]``
(search with the network as evaluator; ``agents.registry``). To ship a new champion:
``python experiments/export_champion.py RUN_DIR``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jax
from flax import serialization

import beastybar_jax
from beastybar_jax.config import TrainConfig
from beastybar_jax.games import get_game
from beastybar_jax.network import init_params, make_network

CHAMPION_DIR = Path(beastybar_jax.__file__).parent / "games" / "beastybar" / "champion"
CONFIG_FILE, PARAMS_FILE = "config.json", "params.msgpack"


class ChampionError(RuntimeError):
    """The champion's files are missing or do not match."""


def save_champion(model, directory: str | os.PathLike = CHAMPION_DIR, info: dict | None = None) -> Path:
    """Write a trained model (``training.checkpoint.load_agent``'s ``TrainedModel``) as
    ``config.json`` + ``params.msgpack`` (and ``info`` as ``info.json``) in ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = model.config.to_dict()
    config["run_dir"] = "runs/{name}"  # where it was trained does not travel
    (directory / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    (directory / PARAMS_FILE).write_bytes(serialization.to_bytes(jax.device_get(model.params)))
    if info is not None:
        (directory / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    return directory


def load_champion(directory: str | os.PathLike = CHAMPION_DIR):
    """``(network, params, config)`` of the shipped champion (or of ``directory``)."""
    directory = Path(directory)
    config_path, params_path = directory / CONFIG_FILE, directory / PARAMS_FILE
    if not config_path.is_file() or not params_path.is_file():
        raise ChampionError(f"no champion in {directory}: expected {CONFIG_FILE} and {PARAMS_FILE} "
                            f"(python experiments/export_champion.py RUN_DIR writes them)")
    config = TrainConfig.from_dict(json.loads(config_path.read_text()), warn_legacy=False)
    game = get_game(config.game)
    network = make_network(config.network, game)
    target = jax.eval_shape(lambda k: init_params(network, k, game.observation_size), jax.random.key(0))
    target = jax.tree.map(lambda s: jax.numpy.zeros(s.shape, s.dtype), target)
    try:
        params = serialization.from_bytes(target, params_path.read_bytes())
    except (ValueError, KeyError, TypeError) as e:
        raise ChampionError(f"{params_path} does not match the network of {config_path}: {e}") from None
    return network, params, config
