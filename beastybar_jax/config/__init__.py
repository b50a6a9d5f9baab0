"""The training configuration: typed dataclasses, YAML loading, overrides and validation.

A config file is YAML with the run's shared keys at the top level, the network in a
``network:`` section (:class:`~beastybar_jax.network.NetworkConfig`), the search in a
``search:`` section (:class:`~beastybar_jax.config.search.SearchConfig`: AlphaZero's
self-play, evaluation with ``eval_simulations`` and ``checkpoint:...@sims=N`` agents all
read it) and each algorithm's own keys in its section (``alphazero:``, ``ppo:``); only
the section of the ``algorithm`` the run uses matters::

    name: quick
    algorithm: alphazero
    num_games: 64
    network:
      width: 64
    search:
      num_simulations: 16
    alphazero:
      moves_per_iteration: 24

Each section is a frozen dataclass in its own module of this package
(:mod:`~beastybar_jax.config.search`, :mod:`~beastybar_jax.config.alphazero`,
:mod:`~beastybar_jax.config.ppo`) with its own checks, once; the algorithm packages
import their section from here, so configuration imports no algorithm.

Command-line overrides (``--set search.num_simulations=32``) are parsed with
``yaml.safe_load`` and applied to the raw dictionary before it becomes a
:class:`TrainConfig`, so unknown keys, wrong types and impossible values are all
caught by the same checks, before anything is compiled, with a message naming the
key and the fix.

Configuration is plain data: this module imports no agents, checkpoints or training
code. Checks that need them (that ``eval_opponents`` name agents that exist) run where
those are used, before compiling (:mod:`beastybar_jax.training.evaluation`).
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

from beastybar_jax import strict_yaml
from beastybar_jax.config.alphazero import AlphaZeroConfig
from beastybar_jax.config.ppo import PPOConfig
from beastybar_jax.config.search import SearchConfig
from beastybar_jax.games import GAME_NAMES, UnknownGameError, get_game
from beastybar_jax.network import NetworkConfig
from beastybar_jax.validation import ConfigError, check, check_at_least, check_finite_nonnegative

__all__ = [
    "ALGORITHM_NAMES", "AlphaZeroConfig", "ConfigError", "NetworkConfig", "PPOConfig", "SearchConfig", "TrainConfig",
    "apply_overrides", "config_diff", "get_game", "load_config", "parse_override", "read_yaml", "validate",
]

ALGORITHM_NAMES = ("alphazero", "ppo")
"""Values of the ``algorithm`` key; each names a package with an :class:`~beastybar_jax.training.algorithm.Algorithm`."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything a training run needs. Defaults are a moderate single-GPU run.

    Shared by every algorithm: the run (``name``, ``game``, ``algorithm``,
    ``run_dir``, ``seed``, ``num_iterations``), ``num_games`` games played side by
    side, the optimizer, checkpoints and logging, periodic evaluation and the
    network. The optimizer is AdamW on a schedule: linear warmup for
    ``warmup_steps`` updates, then a cosine to ``learning_rate *
    final_learning_rate_fraction`` at update ``decay_steps`` (0: the run's last
    update), with gradients clipped to ``max_grad_norm``.

    A resumed run (``--resume``) must keep the saved run's values except for
    ``num_iterations``, ``checkpoint_every``, ``keep_checkpoints``, ``tensorboard``,
    ``distributed``, ``distributed_timeout``, ``compilation_cache``, ``run_dir`` and the evaluation keys
    (``eval_every``, ``eval_opponents``, ``eval_games``, ``eval_simulations``,
    ``eval_endgames``, ``eval_endgame_positions``): these
    change how the run is kept and watched, not what an iteration computes.
    ``num_iterations`` and ``decay_steps`` may change only while the learning-rate
    schedule stays the same: with ``decay_steps: 0`` the cosine ends at the run's last
    update, so a longer run needs ``decay_steps`` set to the saved run's value (the
    error says which) or ``--allow-schedule-change``.
    """

    # run
    name: str = "beastybar"
    game: str = "beastybar"  # a name in beastybar_jax.games
    algorithm: str = "alphazero"  # one of ALGORITHM_NAMES
    run_dir: str = "runs/{name}"  # "{name}" is replaced by ``name``
    seed: int = 0
    num_iterations: int = 200
    num_games: int = 1024  # games played side by side
    # A new run's starting parameters: a run directory, a checkpoint or an exported network
    # (a name in the game's ``networks``, e.g. "champion"): each parameter found there by the
    # same path and shape; the rest (a part the source lacks) freshly initialized. "": none.
    warm_start: str = ""
    # optimizer
    learning_rate: float = 1e-3
    warmup_steps: int = 200
    decay_steps: int = 0
    final_learning_rate_fraction: float = 0.1
    weight_decay: float = 1e-4
    max_grad_norm: float = 1.0
    # checkpoints, logging, scale-out
    checkpoint_every: int = 10
    keep_checkpoints: int = 3
    tensorboard: bool = True
    distributed: bool = False  # join a multi-process run (beastybar_jax.training.distributed)
    distributed_timeout: int = 300  # seconds to wait for the coordinator / the other processes
    compilation_cache: bool = True  # JAX's persistent compilation cache (beastybar_jax.training.compilation)
    # periodic evaluation against fixed opponents (0 = off)
    eval_every: int = 0
    eval_opponents: tuple[str, ...] = ("random", "heuristic")
    eval_games: int = 100
    eval_simulations: int = 0  # 0: the raw policy (argmax); > 0: network + search
    # the game's yardstick of solved endgames (Game.endgame_suite), at the same evaluations
    eval_endgames: bool = False
    eval_endgame_positions: int = 2048  # positions spread over the suite (0: all of it)
    # sections
    network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)
    search: SearchConfig = dataclasses.field(default_factory=SearchConfig)  # AlphaZero, evaluation, agents
    alphazero: AlphaZeroConfig = dataclasses.field(default_factory=AlphaZeroConfig)
    ppo: PPOConfig = dataclasses.field(default_factory=PPOConfig)

    @property
    def resolved_run_dir(self) -> str:
        """``run_dir`` with ``{name}`` filled in and a leading ``~`` expanded (a YAML file's
        ``~`` reaches no shell)."""
        return os.path.expanduser(self.run_dir.replace("{name}", self.name))

    @property
    def section(self):
        """The config section of the run's ``algorithm``."""
        return getattr(self, self.algorithm)

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
        if dataclasses.is_dataclass(hints[key]):  # a section
            values[key] = _build(hints[key], value if value is not None else {}, prefix=full + ".")
        else:
            values[key] = _coerce(full, value, hints[key])
    try:
        return cls(**values)
    except ConfigError:
        raise
    except (ValueError, TypeError) as e:  # a section's own checks (e.g. SearchConfig.__post_init__)
        message = str(e)
        short = prefix.rstrip(".").rsplit(".", 1)[-1] + "."  # "ppo." of "ppo." ("x." of "a.x.")
        if prefix and message.startswith(short) and not message.startswith(prefix):
            message = prefix + message[len(short):]  # name the key by its full path
        raise ConfigError(message) from None


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


def validate(config: TrainConfig, num_devices: int | None = None, game=None) -> None:
    """Raise :class:`ConfigError` naming the key and the fix when a value is impossible.

    ``num_devices`` (the devices training will shard over) adds the divisibility checks;
    ``game``: the run's game when the caller holds it (else looked up by ``config.game``).
    """
    c = config
    check(bool(c.name) and not set("/\\,") & set(c.name) and c.name.strip(".") != "", "name",
          f"must be a non-empty name without '/', '\\', ',' and not '.' or '..' (it names runs/<name>), got {c.name!r}")
    if game is None or game.name != c.game:
        try:
            game = get_game(c.game)
        except UnknownGameError:
            raise ConfigError(f"config key 'game' must be one of {', '.join(GAME_NAMES)}, got {c.game!r}") from None
    check(c.algorithm in ALGORITHM_NAMES, "algorithm", f"must be one of {', '.join(ALGORITHM_NAMES)}, got {c.algorithm!r}")
    check(bool(c.run_dir), "run_dir", "must be a directory path, e.g. runs/{name}")
    check("," not in c.resolved_run_dir, "run_dir", f"must not contain ',' (agent specs such as checkpoint:<run_dir> "
                                                    f"are listed with commas), got {c.resolved_run_dir!r}")
    check(0 <= c.seed < 2**63, "seed", f"must be an integer in [0, 2**63), got {c.seed}")
    check_at_least(c.num_iterations, 1, "num_iterations")
    check_at_least(c.num_games, 1, "num_games", " (games played side by side)")
    check(math.isfinite(c.learning_rate) and c.learning_rate > 0, "learning_rate",
          f"must be a positive number, got {c.learning_rate}")
    check_at_least(c.warmup_steps, 0, "warmup_steps")
    check(c.decay_steps >= 0, "decay_steps", f"must be >= 0 (0 = the run's last update), got {c.decay_steps}")
    check(0 <= c.final_learning_rate_fraction <= 1, "final_learning_rate_fraction",
          f"must be in [0, 1], got {c.final_learning_rate_fraction}")
    check_finite_nonnegative(c.weight_decay, "weight_decay")
    check(c.max_grad_norm > 0, "max_grad_norm", f"must be > 0, got {c.max_grad_norm}")
    check(c.checkpoint_every >= 0, "checkpoint_every", f"must be >= 0 (0 = only at the end), got {c.checkpoint_every}")
    check_at_least(c.keep_checkpoints, 1, "keep_checkpoints")
    check_at_least(c.distributed_timeout, 1, "distributed_timeout")
    check(c.eval_every >= 0, "eval_every", f"must be >= 0 (0 = off), got {c.eval_every}")
    check_at_least(c.eval_games, 1, "eval_games")
    check(all(isinstance(o, str) and o for o in c.eval_opponents), "eval_opponents",
          "must be a list of agent names such as [random, heuristic]")
    check(c.eval_simulations >= 0, "eval_simulations", f"must be >= 0 (0 = raw policy), got {c.eval_simulations}")
    check(c.eval_endgame_positions >= 0, "eval_endgame_positions",
          f"must be >= 0 (0 = the whole suite), got {c.eval_endgame_positions}")
    check(not c.eval_endgames or game.endgame_suite is not None, "eval_endgames",
          f"needs a game with a yardstick of solved endgames; {game.name} has none: set eval_endgames: false")

    # The sections checked their own values when built (NetworkConfig, SearchConfig,
    # __post_init__); here only what needs the game or the run.
    check(c.network.torso != "attention" or game.observation_tokens is not None, "network.torso",
          f"'attention' needs a game with observation tokens; {game.name} has none: use 'mlp'")
    check(not c.network.afterstates or game.legal_afterstates is not None, "network.afterstates",
          f"needs a game with afterstate features (Game.legal_afterstates); {game.name} has none: set it to false")
    check(not c.network.replies or game.legal_replies is not None, "network.replies",
          f"needs a game with reply features (Game.legal_replies); {game.name} has none: set it to false")
    check(not c.network.answers or game.legal_answers is not None, "network.answers",
          f"needs a game with answer features (Game.legal_answers); {game.name} has none: set it to false")

    section = c.section
    section.validate(num_games=c.num_games, max_game_length=game.max_game_length, prefix=c.algorithm + ".")
    if c.algorithm == "alphazero":
        check(not c.alphazero.exact_value_targets or game.exact_values is not None, "alphazero.exact_value_targets",
              f"needs a game with an exact solver (Game.exact_values); {game.name} has none: set it to false")
        check(not c.alphazero.exact_policy_targets or game.exact_actions is not None, "alphazero.exact_policy_targets",
              f"needs a game with an exact solver (Game.exact_actions); {game.name} has none: set it to false")

    if num_devices is not None and num_devices > 1:
        split = [("num_games", c.num_games)] + [(f"{c.algorithm}.{k}", getattr(section, k))
                                                for k in section.split_keys()]
        for key, value in split:
            check(value % num_devices == 0, key,
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
        value = strict_yaml.load(raw) if raw.strip() else ""
    except (yaml.YAMLError, strict_yaml.StrictYAMLError) as e:
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
    if os.path.isdir(path):
        raise ConfigError(f"config file {path!r} is a directory; give a YAML file such as configs/quick.yaml")
    try:
        with open(path, encoding="utf-8") as f:
            data = strict_yaml.load(f)
    except (yaml.YAMLError, strict_yaml.StrictYAMLError) as e:
        raise ConfigError(f"config file {path!r} is not valid YAML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"config file {path!r} cannot be read as YAML text: {e}") from None
    if data is None:  # an empty file is a mistake, not a request for a default run of hours
        raise ConfigError(f"config file {path!r} is empty; start from one in configs/, e.g. configs/quick.yaml")
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path!r} must hold a mapping of key: value, got {type(data).__name__}")
    return data


def load_config(path: str | os.PathLike | None = None, overrides: Iterable[str] = ()) -> TrainConfig:
    """Read a YAML config (or start from the defaults), apply ``--set`` overrides, validate."""
    data = read_yaml(path) if path is not None else {}
    data = apply_overrides(data, overrides)
    check_sections_used(data)
    config = TrainConfig.from_dict(data)
    check_evaluates_something(config)
    return config


def check_evaluates_something(config: TrainConfig) -> None:
    """Raise :class:`ConfigError` for ``eval_every`` with nothing to evaluate against (no
    ``eval_opponents``, no ``eval_endgames``): it would train without a word of
    evaluation. A check of new configs only (:func:`load_config`), like
    :func:`check_sections_used`: a saved run's config always loads."""
    if config.eval_every and not config.eval_opponents and not config.eval_endgames:
        raise ConfigError(f"config key 'eval_opponents' is empty and eval_endgames is off, so eval_every: "
                          f"{config.eval_every} would evaluate nothing; name opponents or set eval_every: 0")


def check_sections_used(data: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` for keys of the algorithm the run does not use (a
    ``ppo:`` section in an AlphaZero config, ``alphazero:`` keys in a PPO one); they
    would be ignored without a word. Keys at their defaults pass, as a run's saved
    ``config.json`` (every section, the unused one at its defaults) is a config too.
    (The ``search:`` section is shared: evaluations with ``eval_simulations`` and search
    agents use it under every algorithm.)"""
    algorithm = data.get("algorithm", TrainConfig.algorithm)
    if algorithm not in ALGORITHM_NAMES:
        return  # validation names the bad algorithm
    defaults = TrainConfig().to_dict()
    for section in ALGORITHM_NAMES:  # each algorithm's section is named after it
        given = data.get(section)
        if section == algorithm or not isinstance(given, Mapping):
            continue
        default = defaults.get(section, {})
        ignored = sorted(key for key, value in given.items() if key not in default or value != default[key])
        if ignored:
            raise ConfigError(f"config key '{section}.{ignored[0]}' has no effect with algorithm: {algorithm}; remove "
                              f"the {section} keys ({', '.join(ignored)}) or set algorithm: {section}")


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
