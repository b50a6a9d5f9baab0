"""Shared fixtures: the reference corpus and batched random play of the engine; the
session's compilation cache; a per-file time summary.

**Compilation cache.** Before anything compiles, the session turns on JAX's persistent
compilation cache in a fresh directory (removed at the end), or in
``$BEASTYBAR_TEST_CACHE_DIR`` when set (kept: a warm cache for repeated local runs;
CI leaves it unset so its timings stay honest). ``JAX_COMPILATION_CACHE_DIR`` is
exported too, so the command lines the tests start (``experiments/train.py`` in a
subprocess, the notebook's kernel) load what an earlier test compiled. An explicit
``JAX_COMPILATION_CACHE_DIR`` is kept as it is.

**Time per file.** The terminal summary lists the seconds spent in each test file
(setup, call and teardown of its tests) with the load average at the start and at
the end, since the suite often runs on a shared machine.
"""

from __future__ import annotations

import collections
import functools
import os
import pathlib
import shutil
import tempfile
import time

import jax
import jax.numpy as jnp
import pytest

from beastybar_jax.games import beastybar as game

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = REPO_ROOT.parent / "shared" / "conformance" / "reference_random_games.jsonl.gz"


def running_in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


_SESSION: dict = {}


def pytest_configure(config):
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        cache = os.environ["JAX_COMPILATION_CACHE_DIR"]
    elif os.environ.get("BEASTYBAR_TEST_CACHE_DIR"):
        cache = os.environ["BEASTYBAR_TEST_CACHE_DIR"]
        os.makedirs(cache, exist_ok=True)
    else:
        cache = tempfile.mkdtemp(prefix="beastybar_test_jax_cache_")
        _SESSION["remove_cache"] = cache
    os.environ["JAX_COMPILATION_CACHE_DIR"] = cache
    jax.config.update("jax_compilation_cache_dir", cache)
    _SESSION.update(cache=cache, start=time.time(), load_start=_load(), per_file=collections.Counter())


def pytest_unconfigure(config):
    if "remove_cache" in _SESSION:
        shutil.rmtree(_SESSION.pop("remove_cache"), ignore_errors=True)


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def pytest_runtest_logreport(report):
    if "per_file" in _SESSION:
        _SESSION["per_file"][report.nodeid.split("::")[0]] += report.duration


def pytest_terminal_summary(terminalreporter):
    per_file = _SESSION.get("per_file")
    if not per_file:
        return
    write = terminalreporter.write_line
    terminalreporter.section("seconds per test file")
    for name, seconds in per_file.most_common():
        write(f"{seconds:8.1f}  {name}")
    write(f"{sum(per_file.values()):8.1f}  in tests; {time.time() - _SESSION['start']:.0f} s wall; load average "
          f"(1, 5, 15 min) at start {_SESSION['load_start']}, at end {_load()}; {os.cpu_count()} CPUs")


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
    from beastybar_jax.games.beastybar import conformance

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
