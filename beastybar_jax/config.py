"""The training configuration: typed dataclasses, YAML loading, overrides and validation.

A config file is YAML with the top-level training fields and two nested sections,
``network:`` (:class:`~beastybar_jax.network.NetworkConfig`) and ``search:``
(:class:`~beastybar_jax.search.SearchConfig`)::

    num_games: 64
    search:
      num_simulations: 16
    network:
      width: 64

Command-line overrides (``--set search.num_simulations=32``) are parsed with
``yaml.safe_load`` and applied to the raw dictionary before it becomes a
:class:`TrainConfig`, so unknown keys, wrong types and impossible values are all
caught by the same checks, before anything is compiled, with a message naming the
key and the fix.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import types
import typing
from typing import Any, Iterable, Mapping

import yaml

from beastybar_jax.game import BEASTYBAR, Game
from beastybar_jax.network import NetworkConfig
from beastybar_jax.search import SearchConfig


class ConfigError(ValueError):
    """A config key is unknown, has the wrong type or an impossible value."""


GAMES: dict[str, Game] = {"beastybar": BEASTYBAR}
"""Games a config may name; another game registers its :class:`~beastybar_jax.game.Game` here."""


def get_game(name: str) -> Game:
    if name not in GAMES:
        raise ConfigError(f"config key 'game' must be one of {', '.join(sorted(GAMES))}, got {name!r}")
    return GAMES[name]


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything a training run needs. Defaults are a moderate single-GPU run.

    Self-play: ``num_games`` games are played side by side; each iteration advances
    every game ``moves_per_iteration`` moves (a finished game restarts at once), so
    an iteration plays ``num_games * moves_per_iteration`` moves and searches.
    Games carry over between iterations; a game's positions enter the replay buffer
    when it ends, labelled with its outcome.

    Action selection: for a game's first ``temperature_drop_move`` moves the move is
    drawn from the search's policy target raised to ``1 / temperature``; later moves
    use ``final_temperature``. A temperature of 0 plays the search's own choice
    (for Gumbel MuZero: the sequential-halving winner under its root Gumbel noise;
    for PUCT: the most visited action).

    Learning: once the buffer holds ``min_buffer_size`` positions, each iteration
    takes ``updates_per_iteration`` AdamW steps on minibatches of ``batch_size``
    positions drawn uniformly from the buffer. The learning rate warms up linearly
    for ``warmup_steps`` updates, then follows a cosine to
    ``learning_rate * final_learning_rate_fraction`` at update ``decay_steps``
    (0: the run's last update).
    """

    # run
    name: str = "beastybar"
    game: str = "beastybar"  # a name in GAMES
    run_dir: str = "runs/{name}"  # "{name}" is replaced by ``name``
    seed: int = 0
    num_iterations: int = 200
    # self-play
    num_games: int = 1024
    moves_per_iteration: int = 24
    temperature: float = 1.0
    temperature_drop_move: int = 8
    final_temperature: float = 0.0
    # replay
    buffer_size: int = 262_144
    min_buffer_size: int = 16_384
    # learning
    batch_size: int = 1024
    updates_per_iteration: int = 32
    learning_rate: float = 1e-3
    warmup_steps: int = 200
    decay_steps: int = 0
    final_learning_rate_fraction: float = 0.1
    weight_decay: float = 1e-4
    max_grad_norm: float = 1.0
    value_loss_weight: float = 1.0
    aux_loss_weight: float = 0.25  # used when network.aux_score_head is on
    # checkpoints, logging, scale-out
    checkpoint_every: int = 10
    keep_checkpoints: int = 3
    tensorboard: bool = True
    distributed: bool = False  # call jax.distributed.initialize() (multi-host)
    # periodic evaluation against fixed opponents (0 = off)
    eval_every: int = 0
    eval_opponents: tuple[str, ...] = ("random", "heuristic")
    eval_games: int = 100
    eval_simulations: int = 0  # 0: the raw policy (argmax); > 0: network + search
    # sub-configs
    network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)
    search: SearchConfig = dataclasses.field(default_factory=SearchConfig)

    @property
    def resolved_run_dir(self) -> str:
        return self.run_dir.replace("{name}", self.name)

    @property
    def total_updates(self) -> int:
        return self.num_iterations * self.updates_per_iteration

    @property
    def lr_decay_steps(self) -> int:
        return self.decay_steps if self.decay_steps > 0 else max(self.total_updates, self.warmup_steps + 1)

    def to_dict(self) -> dict:
        """A JSON/YAML-ready nested dict (tuples become lists)."""
        return _to_plain(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrainConfig":
        """Build and validate a config from a nested dict (missing keys take defaults)."""
        config = _build(cls, data, prefix="")
        validate(config)
        return config

    def replace(self, **changes) -> "TrainConfig":
        return dataclasses.replace(self, **changes)


def _to_plain(x):
    if isinstance(x, dict):
        return {k: _to_plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_to_plain(v) for v in x]
    return x


_SECTIONS = {"network": NetworkConfig, "search": SearchConfig}


def _build(cls, data: Mapping[str, Any], prefix: str):
    if not isinstance(data, Mapping):
        where = f"section {prefix.rstrip('.')!r}" if prefix else "the config"
        raise ConfigError(f"{where} must be a mapping of key: value, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise ConfigError(
            f"unknown config key {prefix + str(unknown[0])!r}; valid keys{' in ' + prefix.rstrip('.') if prefix else ''}: "
            f"{', '.join(sorted(fields))}"
        )
    values = {}
    for key, value in data.items():
        full = prefix + key
        sub = _SECTIONS.get(key) if not prefix else None
        if sub is not None:
            values[key] = _build(sub, value if value is not None else {}, prefix=full + ".")
        else:
            values[key] = _coerce(full, value, hints[key])
    try:
        return cls(**values)
    except ConfigError:
        raise
    except (ValueError, TypeError) as e:  # a sub-config's own checks (e.g. NetworkConfig.__post_init__)
        raise ConfigError(str(e)) from None


def _coerce(key: str, value: Any, annotation) -> Any:
    """Check ``value`` against a field annotation; allow lossless conversions only."""
    origin = typing.get_origin(annotation)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"config key {key!r} must be true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(f"config key {key!r} must be an integer, got {value!r} ({type(value).__name__})")
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads "1e-3" (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"config key {key!r} must be a number, got {value!r} ({type(value).__name__})")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"config key {key!r} must be a string, got {value!r} ({type(value).__name__})")
    if origin is tuple:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key {key!r} must be a list, got {value!r}")
        (item_type, *_rest) = typing.get_args(annotation)
        return tuple(_coerce(f"{key}[{i}]", v, item_type) for i, v in enumerate(value))
    if origin in (typing.Union, types.UnionType):
        errors = []
        for option in typing.get_args(annotation):
            if option is type(None):
                if value is None:
                    return None
                continue
            try:
                return _coerce(key, value, option)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"config key {key!r}: unexpected value {value!r}")
    return value  # unannotated / Any


def _check(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"config key {key!r} {message}")


def validate(config: TrainConfig, num_devices: int | None = None) -> None:
    """Raise :class:`ConfigError` naming the key and the fix when a value is impossible.

    ``num_devices`` (the devices training will shard over) adds the divisibility checks.
    """
    c = config
    _check(bool(c.name) and "/" not in c.name, "name", f"must be a non-empty name without '/', got {c.name!r}")
    max_game_length = get_game(c.game).max_game_length
    _check(bool(c.run_dir), "run_dir", "must be a directory path, e.g. runs/{name}")
    _check(c.num_iterations >= 1, "num_iterations", f"must be >= 1, got {c.num_iterations}")
    _check(c.num_games >= 1, "num_games", f"must be >= 1 (games played side by side), got {c.num_games}")
    _check(c.moves_per_iteration >= 1, "moves_per_iteration", f"must be >= 1, got {c.moves_per_iteration}")
    _check(c.temperature >= 0, "temperature", f"must be >= 0 (0 = the search's choice), got {c.temperature}")
    _check(c.final_temperature >= 0, "final_temperature", f"must be >= 0, got {c.final_temperature}")
    _check(c.temperature_drop_move >= 0, "temperature_drop_move", f"must be >= 0, got {c.temperature_drop_move}")
    _check(c.buffer_size >= 1, "buffer_size", f"must be >= 1, got {c.buffer_size}")
    _check(c.min_buffer_size >= 1, "min_buffer_size", f"must be >= 1, got {c.min_buffer_size}")
    _check(
        c.min_buffer_size <= c.buffer_size, "min_buffer_size",
        f"({c.min_buffer_size}) must not exceed buffer_size ({c.buffer_size}), or training never starts: "
        f"lower min_buffer_size or raise buffer_size",
    )
    _check(
        c.buffer_size >= c.num_games * max_game_length, "buffer_size",
        f"({c.buffer_size}) must hold at least one finished game per slot, num_games * the game's longest "
        f"game ({max_game_length} turns) = {c.num_games * max_game_length}: raise buffer_size or lower num_games",
    )
    _check(c.batch_size >= 1, "batch_size", f"must be >= 1, got {c.batch_size}")
    _check(c.updates_per_iteration >= 0, "updates_per_iteration", f"must be >= 0, got {c.updates_per_iteration}")
    for key in ("learning_rate",):
        value = getattr(c, key)
        _check(math.isfinite(value) and value > 0, key, f"must be a positive number, got {value}")
    _check(c.warmup_steps >= 0, "warmup_steps", f"must be >= 0, got {c.warmup_steps}")
    _check(c.decay_steps >= 0, "decay_steps", f"must be >= 0 (0 = the run's last update), got {c.decay_steps}")
    _check(0 <= c.final_learning_rate_fraction <= 1, "final_learning_rate_fraction",
           f"must be in [0, 1], got {c.final_learning_rate_fraction}")
    for key in ("weight_decay", "value_loss_weight", "aux_loss_weight"):
        value = getattr(c, key)
        _check(math.isfinite(value) and value >= 0, key, f"must be >= 0, got {value}")
    _check(c.max_grad_norm > 0, "max_grad_norm", f"must be > 0, got {c.max_grad_norm}")
    _check(c.checkpoint_every >= 0, "checkpoint_every", f"must be >= 0 (0 = only at the end), got {c.checkpoint_every}")
    _check(c.keep_checkpoints >= 1, "keep_checkpoints", f"must be >= 1, got {c.keep_checkpoints}")
    _check(c.eval_every >= 0, "eval_every", f"must be >= 0 (0 = off), got {c.eval_every}")
    _check(c.eval_games >= 1, "eval_games", f"must be >= 1, got {c.eval_games}")
    _check(all(isinstance(o, str) and o for o in c.eval_opponents), "eval_opponents",
           "must be a list of agent names such as [random, heuristic]")
    _check(c.eval_simulations >= 0, "eval_simulations", f"must be >= 0 (0 = raw policy), got {c.eval_simulations}")
    if c.eval_every:
        from beastybar_jax.agents import AgentSpecError, make_agent

        for name in c.eval_opponents:
            try:
                make_agent(name)
            except (AgentSpecError, FileNotFoundError) as e:
                raise ConfigError(f"config key 'eval_opponents': {e}") from None

    n = c.network
    _check(n.torso in ("mlp", "attention"), "network.torso", f"must be 'mlp' or 'attention', got {n.torso!r}")
    _check(n.width >= 1, "network.width", f"must be >= 1, got {n.width}")
    _check(n.depth >= 0, "network.depth", f"must be >= 0, got {n.depth}")
    _check(n.num_heads >= 1, "network.num_heads", f"must be >= 1, got {n.num_heads}")
    if n.torso == "attention":
        _check(n.width % n.num_heads == 0, "network.num_heads",
               f"({n.num_heads}) must divide network.width ({n.width}) for the attention torso")
    _check(n.dtype in ("float32", "bfloat16"), "network.dtype", f"must be 'float32' or 'bfloat16', got {n.dtype!r}")

    s = c.search
    _check(s.algorithm in ("gumbel", "puct"), "search.algorithm", f"must be 'gumbel' or 'puct', got {s.algorithm!r}")
    _check(s.num_simulations >= 1, "search.num_simulations",
           f"must be >= 1, got {s.num_simulations}: set a positive number of simulations per move")
    _check(s.num_determinizations >= 1, "search.num_determinizations", f"must be >= 1, got {s.num_determinizations}")
    _check(s.max_num_considered_actions >= 1, "search.max_num_considered_actions",
           f"must be >= 1, got {s.max_num_considered_actions}")
    for key in ("gumbel_scale", "pb_c_init", "pb_c_base", "dirichlet_alpha", "dirichlet_fraction", "value_scale",
                "maxvisit_init"):
        value = getattr(s, key)
        _check(value >= 0, "search." + key, f"must be >= 0, got {value}")
    _check(s.dirichlet_fraction <= 1, "search.dirichlet_fraction", f"must be in [0, 1], got {s.dirichlet_fraction}")

    if num_devices is not None and num_devices > 1:
        for key in ("num_games", "batch_size", "buffer_size"):
            value = getattr(c, key)
            _check(value % num_devices == 0, key,
                   f"({value}) must be divisible by the number of devices ({num_devices}) to split it across "
                   f"them: use a multiple of {num_devices}, e.g. {max(num_devices, value // num_devices * num_devices)}")


# ----------------------------------------------------------------------------- files and overrides


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"search.num_simulations=32"`` -> ``(["search", "num_simulations"], 32)``."""
    if "=" not in text:
        raise ConfigError(f"--set expects key=value (e.g. --set search.num_simulations=32), got {text!r}")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set expects key=value with a dotted key such as network.width, got {text!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {key}: cannot parse value {raw!r}: {e}") from None
    return key.split("."), value


def apply_overrides(data: Mapping[str, Any], overrides: Iterable[str]) -> dict:
    """A copy of the raw nested dict with each ``key=value`` override applied."""
    data = json.loads(json.dumps(dict(data)))  # deep copy of plain data
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"--set {'.'.join(path)}: {part!r} is not a section")
            node = child
        node[path[-1]] = value
    return data


def read_yaml(path: str | os.PathLike) -> dict:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ConfigError(f"config file {path!r} does not exist (configs live in configs/, e.g. configs/quick.yaml)")
    with open(path) as f:
        try:
            data = yaml.safe_load(f)
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {path!r} is not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path!r} must hold a mapping of key: value, got {type(data).__name__}")
    return data


def load_config(path: str | os.PathLike | None = None, overrides: Iterable[str] = ()) -> TrainConfig:
    """Read a YAML config (or start from the defaults), apply ``--set`` overrides, validate."""
    data = read_yaml(path) if path is not None else {}
    return TrainConfig.from_dict(apply_overrides(data, overrides))


def config_diff(a: TrainConfig, b: TrainConfig) -> dict[str, tuple[Any, Any]]:
    """Dotted keys whose values differ between two configs: ``{key: (a_value, b_value)}``."""
    flat_a, flat_b = _flatten(a.to_dict()), _flatten(b.to_dict())
    return {k: (flat_a.get(k), flat_b.get(k)) for k in sorted(set(flat_a) | set(flat_b)) if flat_a.get(k) != flat_b.get(k)}


def _flatten(d: Mapping, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flatten(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out
