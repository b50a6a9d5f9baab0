"""The training configuration: typed sections, YAML loading, overrides and validation.

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

Each section is a pydantic model in its own module of this package
(:mod:`~beastybar_jax.config.search`, :mod:`~beastybar_jax.config.alphazero`,
:mod:`~beastybar_jax.config.ppo`) with its own checks, once; the algorithm packages
import their section from here, so configuration imports no algorithm. Why pydantic and
how its report becomes one line: :mod:`beastybar_jax.validation`.

Command-line overrides (``--set search.num_simulations=32``) are parsed with strict YAML
(:mod:`beastybar_jax.strict_yaml`) and applied to the raw dictionary before it becomes a
:class:`TrainConfig`, so unknown keys, wrong types and impossible values are all caught by
the same checks, before anything is compiled, with a message naming the key and the fix.

Configuration is plain data: this module imports no agents, checkpoints or training
code. Checks that need them (that ``eval_opponents`` name agents that exist, that the
search fits in the device's memory) run in the run's pre-flight
(:func:`beastybar_jax.training.preflight.preflight`), before anything is written or compiled.
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any, ClassVar, Iterable, Literal, Mapping

import yaml
from pydantic import Field, model_validator

from beastybar_jax import strict_yaml
from beastybar_jax.config.alphazero import AlphaZeroConfig
from beastybar_jax.config.ppo import PPOConfig
from beastybar_jax.config.search import SearchConfig
from beastybar_jax.games import GAME_NAMES, get_game
from beastybar_jax.network import NetworkConfig
from beastybar_jax.validation import ConfigError, ConfigModel, Float, Int, Names, check

__all__ = [
    "ALGORITHM_NAMES", "AlphaZeroConfig", "ConfigError", "NetworkConfig", "PPOConfig", "SearchConfig", "TrainConfig",
    "apply_overrides", "config_diff", "get_game", "load_config", "parse_override", "read_yaml", "validate",
]

ALGORITHM_NAMES = ("alphazero", "ppo")
"""Values of the ``algorithm`` key; each names a package with an :class:`~beastybar_jax.learning.algorithm.Algorithm`."""


def _at_least(minimum: int, description: str | None = None):
    return Annotated[Int, Field(ge=minimum, description=description)]


class TrainConfig(ConfigModel):
    """Everything a training run needs. Defaults are a moderate single-GPU run.

    Shared by every algorithm: the run (``name``, ``game``, ``algorithm``,
    ``run_dir``, ``seed``, ``num_iterations``), ``num_games`` games played side by
    side, the optimizer, checkpoints and logging, periodic evaluation and the
    network. The optimizer is AdamW on a schedule: linear warmup for
    ``warmup_steps`` updates, then a cosine to ``learning_rate *
    final_learning_rate_fraction`` at update ``decay_steps`` (0: the run's last
    update), with gradients clipped to ``max_grad_norm``.

    A resumed run (``--resume``) must keep the saved run's values except for
    ``num_iterations``, ``max_train_seconds``, ``checkpoint_every``, ``keep_checkpoints``, ``tensorboard``,
    ``distributed``, ``distributed_timeout``, ``compilation_cache``, ``run_dir`` and the evaluation keys
    (``eval_every``, ``eval_opponents``, ``eval_games``, ``eval_simulations``,
    ``eval_endgames``, ``eval_endgame_positions``): these
    change how the run is kept and watched, not what an iteration computes.
    ``num_iterations`` and ``decay_steps`` may change only while the learning-rate
    schedule stays the same: with ``decay_steps: 0`` the cosine ends at the run's last
    update, so a longer run needs ``decay_steps`` set to the saved run's value (the
    error says which) or ``--allow-schedule-change``.
    """

    location: ClassVar[str] = ""

    # run
    name: str = "beastybar"
    game: Literal[GAME_NAMES] = "beastybar"  # a name in beastybar_jax.games
    algorithm: Literal[ALGORITHM_NAMES] = "alphazero"
    run_dir: str = "runs/{name}"  # "{name}" is replaced by ``name``
    seed: Int = 0
    num_iterations: _at_least(1) = 200
    # A time budget: the run also ends, with a checkpoint, once the iterations this process
    # ran (compilation and evaluation aside) took this many seconds; 0 = none.
    max_train_seconds: Annotated[Float, Field(ge=0, allow_inf_nan=False)] = 0.0
    num_games: _at_least(1, "games played side by side") = 1024
    # A new run's starting parameters: a run directory, a checkpoint or an exported network
    # (a name in the game's ``networks``, e.g. "champion"): each parameter found there by the
    # same path and shape; the rest (a part the source lacks) freshly initialized. "": none.
    warm_start: str = ""
    # optimizer
    learning_rate: Annotated[Float, Field(gt=0, allow_inf_nan=False)] = 1e-3
    warmup_steps: _at_least(0) = 200
    decay_steps: _at_least(0, "0 = the run's last update") = 0
    final_learning_rate_fraction: Annotated[Float, Field(ge=0, le=1)] = 0.1
    weight_decay: Annotated[Float, Field(ge=0, allow_inf_nan=False)] = 1e-4
    max_grad_norm: Annotated[Float, Field(gt=0)] = 1.0
    # checkpoints, logging, scale-out
    checkpoint_every: _at_least(0, "0 = only at the end") = 10
    keep_checkpoints: _at_least(1) = 3
    tensorboard: bool = True
    distributed: bool = False  # join a multi-process run (beastybar_jax.training.distributed)
    distributed_timeout: _at_least(1) = 300  # seconds to wait for the coordinator / the other processes
    compilation_cache: bool = True  # JAX's persistent compilation cache (beastybar_jax.training.compilation)
    # periodic evaluation against fixed opponents (0 = off)
    eval_every: _at_least(0, "0 = off") = 0
    eval_opponents: Names = ("random", "heuristic")
    eval_games: _at_least(1) = 100
    eval_simulations: _at_least(0, "0 = raw policy") = 0  # 0: the raw policy (argmax); > 0: network + search
    # the game's yardstick of solved endgames (Game.solver.endgame_suite), at the same evaluations
    eval_endgames: bool = False
    eval_endgame_positions: _at_least(0, "0 = the whole suite") = 2048  # positions spread over the suite
    # sections
    network: NetworkConfig = NetworkConfig()
    search: SearchConfig = SearchConfig()  # AlphaZero, evaluation, agents
    alphazero: AlphaZeroConfig = AlphaZeroConfig()
    ppo: PPOConfig = PPOConfig()

    @model_validator(mode="after")
    def _run_keys(self):
        check(bool(self.name) and not set("/\\,") & set(self.name) and self.name.strip(".") != "", "name",
              f"must be a non-empty name without '/', '\\', ',' and not '.' or '..' (it names runs/<name>), got "
              f"{self.name!r}")
        check(bool(self.run_dir), "run_dir", "must be a directory path, e.g. runs/{name}")
        check("," not in self.resolved_run_dir, "run_dir", f"must not contain ',' (agent specs such as "
                                                           f"checkpoint:<run_dir> are listed with commas), got "
                                                           f"{self.resolved_run_dir!r}")
        check(0 <= self.seed < 2**63, "seed", f"must be an integer in [0, 2**63), got {self.seed}")
        check(all(self.eval_opponents), "eval_opponents", "must be a list of agent names such as [random, heuristic]")
        return self

    @property
    def resolved_run_dir(self) -> str:
        """``run_dir`` with ``{name}`` filled in and a leading ``~`` expanded (a YAML file's
        ``~`` reaches no shell)."""
        return os.path.expanduser(self.run_dir.replace("{name}", self.name))

    @property
    def section(self):
        """The config section of the run's ``algorithm``."""
        return getattr(self, self.algorithm)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrainConfig":
        """Build and validate a config from a nested dict (missing keys take defaults)."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"the config must be a mapping of key: value, got {type(data).__name__}")
        config = cls(**data)
        validate(config)
        return config


def validate(config: TrainConfig, num_devices: int | None = None, game=None) -> None:
    """Raise :class:`ConfigError` naming the key and the fix when a value is impossible for
    the run's game or devices (each section checked its own values when it was built).

    ``num_devices`` (the devices training will shard over) adds the divisibility checks;
    ``game``: the run's game when the caller holds it (else looked up by ``config.game``).
    """
    c = config
    if game is None or game.name != c.game:
        game = get_game(c.game)
    check(not c.eval_endgames or game.has("solver.endgame_suite"), "eval_endgames",
          f"needs a game with a yardstick of solved endgames; {game.name} has none: set eval_endgames: false")
    check(c.network.torso != "attention" or game.tokens is not None, "network.torso",
          f"'attention' needs a game with observation tokens; {game.name} has none: use 'mlp'")
    if c.network.afterstates is not None:
        from beastybar_jax.afterstate_scorer import check_game

        check_game(c.network.afterstates, game)
    section = c.section
    section.validate_run(num_games=c.num_games, max_game_length=game.max_game_length)
    if c.algorithm == "alphazero":
        check(not c.alphazero.exact_value_targets or game.has("solver.exact_values"), "alphazero.exact_value_targets",
              f"needs a game with an exact solver (Game.solver.exact_values); {game.name} has none: set it to false")
        check(not c.alphazero.exact_policy_targets or game.has("solver.exact_actions"),
              "alphazero.exact_policy_targets",
              f"needs a game with an exact solver (Game.solver.exact_actions); {game.name} has none: set it to false")

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
    algorithm = data.get("algorithm", TrainConfig.model_fields["algorithm"].default)
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
