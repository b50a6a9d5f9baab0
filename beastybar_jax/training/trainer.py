"""The compiled pieces of a run, for any algorithm: network, optimizer, mesh, jitted init and iteration."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import jax
import numpy as np
import optax
from jax.sharding import Mesh

from beastybar_jax.config import TrainConfig, validate
from beastybar_jax.games import Game, get_game
from beastybar_jax.network import PolicyValueNet, make_network
from beastybar_jax.learning import sharding
from beastybar_jax.algorithms import get_algorithm
from beastybar_jax.learning.algorithm import Algorithm
from beastybar_jax.learning.optimizer import make_optimizer


@dataclasses.dataclass(frozen=True)
class Trainer:
    """The compiled pieces of a run.

    Attributes:
      config, game, algorithm, network, optimizer, mesh: what they say.
      init: jitted ``init(key) -> state`` (sharded).
      iteration: jitted ``iteration(state, key) -> (state, metrics)``; the state is donated.
      shardings: the state-shaped tree of shardings.
    """

    config: TrainConfig
    game: Game
    algorithm: Algorithm
    network: PolicyValueNet
    optimizer: optax.GradientTransformation
    mesh: Mesh
    init: Callable
    iteration: Callable
    shardings: Any
    _compiled: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def compiled_iteration(self, state, compile: Callable | None = None) -> tuple[Callable, float]:
        """The iteration compiled ahead of time for ``state``'s shapes (cached), and the
        seconds lowering and compiling took (0 when cached), so the first iteration's
        time is not mostly compile time. ``compile(lowered) -> compiled`` replaces
        ``lowered.compile()`` (the loop compiles in a thread a Ctrl-C can leave)."""
        if "iteration" not in self._compiled:
            start = time.perf_counter()
            lowered = self.iteration.lower(state, jax.random.key(0))
            compiled = lowered.compile() if compile is None else compile(lowered)
            self._compiled["iteration"] = compiled
            self._compiled["seconds"] = time.perf_counter() - start
            return self._compiled["iteration"], self._compiled["seconds"]
        return self._compiled["iteration"], 0.0


def make_trainer(config: TrainConfig, game: Game | None = None, mesh: Mesh | None = None,
                 compiler_options: dict | None = None) -> Trainer:
    """Validate the config against the devices, build the network and optimizer, and
    jit the algorithm's ``init`` and ``iteration`` with their shardings (nothing is
    compiled yet).

    ``compiler_options`` go to ``jax.jit`` (e.g. ``{"xla_backend_optimization_level": 0}``
    compiles faster on CPU, for tests)."""
    game = get_game(config.game) if game is None else game
    mesh = sharding.make_mesh() if mesh is None else mesh
    validate(config, num_devices=mesh.size, game=game)
    algorithm = get_algorithm(config.algorithm)
    network = make_network(config.network, game)
    optimizer = make_optimizer(config, config.num_iterations * algorithm.updates_per_iteration(config))
    init_fn = lambda key: algorithm.init(config, game, network, optimizer, key)  # noqa: E731
    shardings = algorithm.state_shardings(jax.eval_shape(init_fn, jax.random.key(0)), mesh)
    replicated = sharding.replicated(mesh)
    iteration = jax.jit(
        algorithm.make_iteration(config, game, network, optimizer, mesh),
        in_shardings=(shardings, replicated),
        out_shardings=(shardings, replicated),
        donate_argnums=0,
        compiler_options=compiler_options,
    )
    init = jax.jit(init_fn, in_shardings=replicated, out_shardings=shardings, compiler_options=compiler_options)
    return Trainer(config=config, game=game, algorithm=algorithm, network=network, optimizer=optimizer, mesh=mesh,
                   init=init, iteration=iteration, shardings=shardings)


def iteration_key(rng, iteration: int) -> jax.Array:
    """The key of iteration ``iteration``: ``fold_in(run key, iteration)``; ``rng`` is a
    train state (its ``rng`` field) or the run key's data."""
    rng = getattr(rng, "rng", rng)
    return jax.random.fold_in(jax.random.wrap_key_data(np.asarray(jax.device_get(rng))), iteration)


def abstract_state(trainer: Trainer):
    """Shapes, dtypes and shardings of the train state (a restore target)."""
    shapes = jax.eval_shape(trainer.init, jax.random.key(0))
    return jax.tree.map(lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), shapes, trainer.shardings)
