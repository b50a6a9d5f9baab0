"""Shared fixtures: the reference corpus and batched random play of the engine."""

from __future__ import annotations

import functools
import os
import pathlib

import jax
import jax.numpy as jnp
import pytest

from beastybar_jax import game

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = REPO_ROOT.parent / "shared" / "conformance" / "reference_random_games.jsonl.gz"


def running_in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def corpus_path() -> str:
    """Path of the shared reference corpus. Skips when it is missing, except under
    ``CI=true`` where a missing corpus fails the test."""
    if not CORPUS.is_file():
        message = f"reference corpus not found at {CORPUS}"
        if running_in_ci():
            pytest.fail(message + " (CI=true: the corpus is required)")
        pytest.skip(message)
    return str(CORPUS)


@pytest.fixture(scope="session")
def corpus_traces(corpus_path):
    """The corpus parsed once into ``conformance.Traces``."""
    from beastybar_jax import conformance

    return conformance.load_traces(corpus_path)


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
