"""Shared fixtures and hooks: the reference corpus (tests/data/, described in
docs/rules.md); the session's compilation cache; a per-file time summary. Shared helpers
(training runs, references, random play) are the :mod:`helpers` package beside this file.

**Compilation cache.** Before anything compiles, the session turns on JAX's persistent
compilation cache in a fresh directory (removed at the end), or in
``$BEASTYBAR_TEST_CACHE_DIR`` when set (kept: a warm cache for repeated local runs;
CI leaves it unset so its timings stay honest). ``JAX_COMPILATION_CACHE_DIR`` is
exported too, so the command lines the tests start (``experiments/train.py`` in a
subprocess, the notebook's kernel) load what an earlier test compiled. An explicit
``JAX_COMPILATION_CACHE_DIR`` is kept as it is. The pytest-xdist workers (which inherit
the controller's environment) and the command lines they start share the directory, so
a function one worker compiled is loaded by the other. JAX writes an entry in place;
with a size limit set (``jax_compilation_cache_max_size``, exported too) it takes a file
lock (the ``filelock`` package, a dev extra) around every read and write, so no process
reads an entry that another is still writing. Without ``filelock``, and in a cache
directory that the session did not create (whose entries JAX's limit cannot handle), each
worker keeps a subdirectory of its own instead.

**One GPU, several processes.** The tests run in two worker processes (pytest-xdist,
whole files to a worker) and start command lines of their own; on a GPU each would take
75% of its memory by default, so ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` is set (and
exported) unless already set, before the first JAX array is made.

**Cheap code generation on the CPU.** Where JAX runs on the CPU alone, every program the
suite compiles (and every command line it starts) skips XLA:CPU's backend optimisations and
LLVM's expensive passes, and takes XLA:CPU's older fusion emitters (``XLA_FLAGS``, set before
JAX starts; the flags already in ``XLA_FLAGS`` win): the suite spends most of its time
compiling programs it runs a few times. Programs that run long (the endgame solver's, the
training runs that must learn) ask for XLA's defaults themselves
(``helpers.tiny_training.OPTIMIZED`` as ``compiler_options``), and programs whose bits are
compared with another program's for the default emitters (``SAME_BITS``).
On a GPU the flags are left alone.

**Longest files first.** pytest-xdist hands whole files to the two workers, one when a
worker runs low; a long file handed out last keeps one worker busy while the other idles.
The files that take longest (``LONGEST_FILES``, from the summary below) are collected
first, the rest in their usual order, and xdist is told to keep that order (by default it
hands out the files with the most tests first, whatever their time). The order changes
nothing but the time.

**Time per file.** The terminal summary lists the seconds spent in each test file
(setup, call and teardown of its tests) with the load average at the start and at
the end, since the suite often runs on a shared machine. With two workers on two cores
the files slow each other down: their seconds add up to more than the wall time.
"""

from __future__ import annotations

import collections
import importlib.util
import os
import shutil
import tempfile
import time

# Before anything imports JAX's backends (the game modules build arrays as they load).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# helpers.tiny_training.FAST_COMPILE_FLAG written out: importing helpers starts JAX's backends
# (pytest_configure checks that the two agree).
FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true "
                      "--xla_cpu_use_fusion_emitters=false")


def _cpu_only() -> bool:
    """Whether JAX will run on the CPU alone: ``JAX_PLATFORMS=cpu``, or no accelerator plugin."""
    if os.environ.get("JAX_PLATFORMS"):
        return os.environ["JAX_PLATFORMS"].strip().lower() == "cpu"
    return not any(importlib.util.find_spec(name) for name in ("jax_plugins", "jax_cuda12_plugin", "libtpu"))


if _cpu_only():  # flags given in XLA_FLAGS come after, so they win
    os.environ["XLA_FLAGS"] = f"{FAST_COMPILE_FLAGS} {os.environ.get('XLA_FLAGS', '')}".strip()

import jax  # noqa: E402
import pytest  # noqa: E402


from helpers import REPO_ROOT  # noqa: E402

CORPUS = REPO_ROOT / "tests" / "data" / "reference_random_games.jsonl.gz"


_SESSION: dict = {}
FRESH_CACHE_ENV = "BEASTYBAR_TEST_CACHE_IS_FRESH"
CACHE_MAX_BYTES = 1 << 34  # a limit only to turn on the cache's locks: no run comes near it


def pytest_configure(config):
    from helpers.tiny_training import FAST_COMPILE_FLAG

    assert FAST_COMPILE_FLAG == FAST_COMPILE_FLAGS, (FAST_COMPILE_FLAG, FAST_COMPILE_FLAGS)
    # pytest-xdist re-sorts the files by their number of tests unless told not to.
    if getattr(config.option, "loadscopereorder", False):
        config.option.loadscopereorder = False
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        cache = os.environ["JAX_COMPILATION_CACHE_DIR"]
    elif os.environ.get("BEASTYBAR_TEST_CACHE_DIR"):
        cache = os.environ["BEASTYBAR_TEST_CACHE_DIR"]
        os.makedirs(cache, exist_ok=True)
    else:
        cache = tempfile.mkdtemp(prefix="beastybar_test_jax_cache_")
        _SESSION["remove_cache"] = cache
    # A limit makes JAX lock, and keep an access time beside, every entry: only in the fresh
    # directory of this session (an existing one's entries have no access times, and JAX
    # then fails to write new ones). ``os.environ`` tells the workers which it is.
    fresh = os.environ.setdefault(FRESH_CACHE_ENV, str(int("remove_cache" in _SESSION))) == "1"
    if fresh and importlib.util.find_spec("filelock") is not None:  # what JAX locks entries with
        os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"] = str(CACHE_MAX_BYTES)
        jax.config.update("jax_compilation_cache_max_size", CACHE_MAX_BYTES)
    elif os.environ.get("PYTEST_XDIST_WORKER"):  # "gw0", ... in pytest-xdist's workers
        cache = os.path.join(cache, os.environ["PYTEST_XDIST_WORKER"])
        os.makedirs(cache, exist_ok=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = cache
    jax.config.update("jax_compilation_cache_dir", cache)
    _SESSION.update(cache=cache, start=time.time(), load_start=_load(), per_file=collections.Counter())


# About 45 s or more each with two workers on two cores (2026-11-29), longest first.
LONGEST_FILES = ("test_afterstates.py", "test_distributed.py", "test_reliability.py", "test_docs.py",
                 "test_acceptance.py", "test_arena.py", "test_endgame.py", "test_agents.py", "test_notebook.py",
                 "test_web.py", "test_mctx_patch.py", "test_learning.py", "test_search.py", "test_ppo.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


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
