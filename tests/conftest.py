"""Shared fixtures and hooks: the reference corpus (tests/data/, described in
docs/rules.md); the session's compilation cache; a per-file time summary. Shared helpers
(training runs, references, random play) are the :mod:`helpers` package beside this file.

**Compilation cache.** Before anything compiles, the session turns on JAX's persistent
compilation cache in a fresh directory (removed at the end), or in
``$BEASTYBAR_TEST_CACHE_DIR`` when set (kept: a warm cache for repeated local runs;
CI leaves it unset so its timings stay honest). ``JAX_COMPILATION_CACHE_DIR`` is
exported too, so the command lines the tests start (``experiments/train.py`` in a
subprocess, the notebook's kernel) load what an earlier test compiled. An explicit
``JAX_COMPILATION_CACHE_DIR`` is kept as it is. Each pytest-xdist worker (which
inherits the controller's environment) and the command lines it starts use a
subdirectory of their own: JAX writes an entry in place, so a worker could otherwise
read one that the other is still writing.

**One GPU, several processes.** The tests run in two worker processes (pytest-xdist,
whole files to a worker) and start command lines of their own; on a GPU each would take
75% of its memory by default, so ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` is set (and
exported) unless already set, before the first JAX array is made.

**Time per file.** The terminal summary lists the seconds spent in each test file
(setup, call and teardown of its tests) with the load average at the start and at
the end, since the suite often runs on a shared machine. With two workers on two cores
the files slow each other down: their seconds add up to more than the wall time.
"""

from __future__ import annotations

import collections
import os
import shutil
import tempfile
import time

# Before anything imports JAX's backends (the game modules build arrays as they load).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import pytest  # noqa: E402


from helpers import REPO_ROOT  # noqa: E402

CORPUS = REPO_ROOT / "tests" / "data" / "reference_random_games.jsonl.gz"


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
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", ... in pytest-xdist's workers
    if worker:
        # JAX writes cache entries in place: a worker could read one the other is writing.
        cache = os.path.join(cache, worker)
        os.makedirs(cache, exist_ok=True)
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
    workers = getattr(terminalreporter.config.option, "numprocesses", None) or 1
    write(f"{sum(per_file.values()):8.1f}  in tests, {workers} worker(s); {time.time() - _SESSION['start']:.0f} s wall; load average "
          f"(1, 5, 15 min) at start {_SESSION['load_start']}, at end {_load()}; {os.cpu_count()} CPUs")


@pytest.fixture(scope="session")
def corpus_path() -> str:
    """Path of the reference corpus: 2,000 random-play games recorded by the reference
    engine (tests/data/, format in docs/rules.md). Part of the repository, so never skipped."""
    assert CORPUS.is_file(), f"reference corpus missing: {CORPUS}"
    return str(CORPUS)


@pytest.fixture(scope="session")
def corpus_traces(corpus_path):
    """The corpus parsed once into ``conformance.Traces``."""
    from beastybar_jax.games.beastybar import conformance

    return conformance.load_traces(corpus_path)
