"""Library chatter to a file, not the terminal: a command line says what happened in
one line; what orbax, asyncio and background threads print on the way (a failing
save on a full disk: dozens of tracebacks, their number depending on timing) goes to
``<run_dir>/library.log`` for whoever wants the details.

:func:`send_library_output_to` routes the ``absl`` (orbax), ``asyncio``, ``orbax`` and
``concurrent.futures`` loggers, exceptions that end a thread other than the main one
(``threading.excepthook``) and "Exception ignored in ..." reports
(``sys.unraisablehook``) to the file. A file that cannot be written (a full disk)
drops them quietly: the command's own error line says what failed.
"""

from __future__ import annotations

import datetime
import logging
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


def send_library_output_to(path: str) -> Callable[[], None]:
    """Route library logs, thread exceptions and unraisable exceptions to ``path``
    (appended). Returns a function that undoes it."""
    handler = _QuietFileHandler(path)
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
        for logger, propagate in saved:
            logger.removeHandler(handler)
            logger.propagate = propagate
        threading.excepthook = previous_thread_hook
        sys.unraisablehook = previous_unraisable_hook

    return undo
