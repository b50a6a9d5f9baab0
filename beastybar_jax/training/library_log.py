"""Library chatter to a file, not the terminal: a command line says what happened in
one line; what orbax, asyncio and background threads print on the way (a failing
save on a full disk: dozens of tracebacks, their number depending on timing) goes to
``<run_dir>/library.log`` for whoever wants the details.

:func:`send_library_output_to` routes the ``absl`` (orbax), ``asyncio``, ``orbax`` and
``concurrent.futures`` loggers, exceptions that end a thread other than the main one
(``threading.excepthook``) and "Exception ignored in ..." reports
(``sys.unraisablehook``) to the file, and during compiles
(:func:`native_output_to_library_log`) what XLA's C++ prints to standard error (its
"Very slow compile?" alarms). A file that cannot be written (a full disk) drops them
quietly: the command's own error line says what failed.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import sys
import threading
import traceback
from typing import Callable

LIBRARY_LOGGERS = ("absl", "asyncio", "orbax", "concurrent.futures")


class _QuietFileHandler(logging.Handler):
    """Appends records to ``path``; never raises, never prints "--- Logging error ---"."""

    def __init__(self, path: str):
        super().__init__(logging.DEBUG)
        self.path = path
        self.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _append(self.path, self.format(record) + "\n")
        except Exception:  # noqa: BLE001 -- a log line is never worth an error
            pass


def _append(path: str, text: str) -> None:
    try:
        with open(path, "a", encoding="utf-8", errors="replace") as f:
            f.write(text)
    except OSError:
        pass


_NATIVE_LOG: list[str] = []  # the path of send_library_output_to in force, if any


@contextlib.contextmanager
def native_output_to_library_log():
    """Within the block, what native code writes to the process's standard error (XLA's
    "Very slow compile?" alarms, printed by C++ straight to file descriptor 2) goes to the
    library log of :func:`send_library_output_to` instead of the terminal; a no-op when
    none is set or it cannot be opened. Meant for a compile: Python's own lines written
    meanwhile go there too."""
    if not _NATIVE_LOG:
        yield
        return
    try:
        fd = os.open(_NATIVE_LOG[-1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def send_library_output_to(path: str) -> Callable[[], None]:
    """Route library logs, thread exceptions and unraisable exceptions to ``path``
    (appended), and native standard error within :func:`native_output_to_library_log`.
    Returns a function that undoes it."""
    handler = _QuietFileHandler(path)
    _NATIVE_LOG.append(path)
    saved = []
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.propagate))
        logger.addHandler(handler)
        logger.propagate = False
    previous_thread_hook, previous_unraisable_hook = threading.excepthook, sys.unraisablehook

    def thread_hook(args):
        if args.exc_type is SystemExit:
            return
        _append(path, f"{datetime.datetime.now().isoformat(timespec='seconds')} exception in thread "
                      f"{getattr(args.thread, 'name', '?')}:\n"
                      + "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)))

    def unraisable_hook(unraisable):
        _append(path, f"{datetime.datetime.now().isoformat(timespec='seconds')} exception ignored in "
                      f"{unraisable.object!r}: {unraisable.err_msg or ''}\n"
                      + "".join(traceback.format_exception(unraisable.exc_type, unraisable.exc_value,
                                                           unraisable.exc_traceback)))

    threading.excepthook = thread_hook
    sys.unraisablehook = unraisable_hook

    def undo() -> None:
        if path in _NATIVE_LOG:
            _NATIVE_LOG.remove(path)
        for logger, propagate in saved:
            logger.removeHandler(handler)
            logger.propagate = propagate
        threading.excepthook = previous_thread_hook
        sys.unraisablehook = previous_unraisable_hook

    return undo
