"""Compiling: JAX's persistent compilation cache, and compiles a Ctrl-C can stop.

**The persistent cache.** XLA compiles of a training iteration take from seconds (CPU,
tiny config) to minutes (large networks and searches). JAX can keep the compiled
executables on disk and load them the next time the same program is compiled;
:func:`enable_compilation_cache` turns that on, in

- ``$BEASTYBAR_CACHE_DIR/jax`` when ``BEASTYBAR_CACHE_DIR`` is set,
- else ``$XDG_CACHE_HOME/beastybar_jax/jax`` (``~/.cache/beastybar_jax/jax``),

unless JAX already has a cache directory (``JAX_COMPILATION_CACHE_DIR`` or
``jax.config.update("jax_compilation_cache_dir", ...)``: that one is kept). Training
turns it on unless the config says ``compilation_cache: false``; ``evaluate.py`` and
``play.py`` turn it on too. ``BEASTYBAR_COMPILATION_CACHE=0`` in the environment turns
it off everywhere. Only compiles that took at least
:data:`MIN_COMPILE_SECONDS` are stored (quicker ones are not worth a file). The
cache is keyed by the program, the JAX/XLA versions and the device, so a stale entry
is never used; delete the directory to reclaim its space.

**Interruptible compiles.** Python runs signal handlers only between bytecodes, so
a Ctrl-C during a minutes-long ``compile()`` call would wait for it to end.
:func:`compile_in_thread` compiles in a helper thread while the main thread waits
in short slices and calls ``check`` between them (which raises to give up).
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
import warnings
from typing import Any, Callable

import jax

CACHE_DIR_ENV = "BEASTYBAR_CACHE_DIR"
CACHE_SWITCH_ENV = "BEASTYBAR_COMPILATION_CACHE"
MIN_COMPILE_SECONDS = 1.0


def cache_directory() -> str:
    """Where :func:`enable_compilation_cache` puts the cache (see the module docstring)."""
    root = os.environ.get(CACHE_DIR_ENV)
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "beastybar_jax")
    return os.path.join(root, "jax")


def cache_disabled_by_environment() -> bool:
    return os.environ.get(CACHE_SWITCH_ENV, "").strip().lower() in ("0", "false", "no", "off")


def enable_compilation_cache(directory: str | os.PathLike | None = None) -> str | None:
    """Turn on JAX's persistent compilation cache; returns the directory in use, or
    None when it is off (``BEASTYBAR_COMPILATION_CACHE=0``, or the directory cannot be
    created: then with a warning). A cache directory JAX already has is kept."""
    current = jax.config.jax_compilation_cache_dir
    if current:
        return current
    if cache_disabled_by_environment():
        return None
    directory = os.fspath(directory) if directory is not None else cache_directory()
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        warnings.warn(f"compilation cache off: cannot create {directory} ({e.strerror or e}); set "
                      f"{CACHE_DIR_ENV} to a writable directory", RuntimeWarning, stacklevel=2)
        return None
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_compilation_cache_dir", directory)
    return directory


def compile_in_background(compile: Callable[[], Any]) -> concurrent.futures.Future:
    """``compile()`` (e.g. ``lowered.compile``, or a function that also traces) started in
    a daemon thread that does not keep the process alive; its result, or what it raised,
    in the returned future (whose ``started`` is the ``time.monotonic()`` it began at)."""
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.started = time.monotonic()

    def work():
        try:
            future.set_result(compile())
        except BaseException as e:  # noqa: BLE001 -- handed to whoever waits
            future.set_exception(e)

    threading.Thread(target=work, name="beastybar-compile", daemon=True).start()
    return future


def compile_in_thread(lowered: Any, check: Callable[[], None], poll_seconds: float = 0.1) -> Any:
    """``lowered.compile()`` in a helper thread (:func:`compile_in_background`); the calling
    thread waits in slices of ``poll_seconds`` and calls ``check()`` after each, so signal
    handlers run and ``check`` may raise (the compile then finishes unseen in the
    background)."""
    future = compile_in_background(lowered.compile)
    while not future.done():
        concurrent.futures.wait([future], timeout=poll_seconds)
        check()
    return future.result()


def compiles_in_flight() -> bool:
    """Whether a :func:`compile_in_thread` compile given up on is still running (a
    command line should then end with ``os._exit``: interpreter shutdown while XLA
    compiles in another thread can crash)."""
    return any(t.name == "beastybar-compile" and t.is_alive() for t in threading.enumerate())


def interactive_compiler_options() -> dict | None:
    """XLA options for the programs a person waits on (an agent's move in ``play.py`` or
    the web app): on a CPU, LLVM's optimization level 1 compiles the shipped champion's
    move in 8 s instead of 11 with bitwise the same outputs (level 0 would change them);
    elsewhere none."""
    import jax

    return {"xla_backend_optimization_level": 1} if jax.default_backend() == "cpu" else None
