"""What the tests share beyond fixtures: the repository's root, the CI switch, batched random
play of Beasty Bar, the command lines in experiments/ as modules, and (submodules) the shared
training runs (:mod:`~helpers.tiny_training`, :mod:`~helpers.tictactoe_training`), the
plain-Python tic-tac-toe reference (:mod:`~helpers.tictactoe_reference`) and the paused
training script (``train_paused.py``). Test files import ``from helpers import ...``:
pytest puts ``tests/`` on ``sys.path`` (its default ``prepend`` import mode), nothing else does.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import pathlib
import sys

import jax
import jax.numpy as jnp

from beastybar_jax.games import beastybar as game

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def running_in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def experiment(name: str):
    """``experiments/<name>.py`` as a module (loaded once; registered as ``name``, as
    ``python experiments/<name>.py`` would see itself), without touching ``sys.path``."""
    if name not in sys.modules:
        path = REPO_ROOT / "experiments" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


@functools.lru_cache(maxsize=None)
def random_playout(num_games: int, num_turns: int = 24):
    """A jitted ``play(key) -> (states_before [T, G], actions [T, G], final [G])``:
    ``num_games`` games from ``game.init``, ``num_turns`` random legal moves each
    (stepping finished games, which must leave them unchanged), one ``lax.scan``
    over turns of a ``vmap`` over games. Cached, so test modules asking for the
    same sizes share one compilation."""

    def one_turn(states, key):
        mask = jax.vmap(game.legal_action_mask)(states)
        logits = jnp.where(mask, 0.0, -jnp.inf)
        actions = jax.random.categorical(key, logits, axis=-1)
        # Finished games have no legal move; any action id must leave them as they are.
        actions = jnp.where(states.terminated, 0, actions)
        return jax.vmap(game.step)(states, actions), (states, actions)

    @jax.jit
    def play(key):
        init_key, play_key = jax.random.split(key)
        states = jax.vmap(game.init)(jax.random.split(init_key, num_games))
        final, (before, actions) = jax.lax.scan(one_turn, states, jax.random.split(play_key, num_turns))
        return before, actions, final

    return play


def unbatch(tree, index):
    """The ``index``-th state of a batched pytree."""
    return jax.tree.map(lambda x: x[index], tree)
