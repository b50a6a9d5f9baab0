"""Stopping a run cleanly on SIGINT (Ctrl-C) or SIGTERM (what batch schedulers send
before preempting a job).

While :class:`StopRequest` is installed, the two signals only note that a stop was
asked for; the loop looks at the note between iterations (and while it waits for a
compile), so a signal never lands in the middle of a checkpoint save or of a donated
iteration. The loop then saves the last finished iteration and raises
:class:`Interrupted`, a ``KeyboardInterrupt``, so code that catches Ctrl-C catches it.
"""

from __future__ import annotations

import os
import signal
import threading

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal. ``signum`` is the signal; ``str()`` says what was saved.
    Command lines exit with ``128 + signum`` (130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, signum: int, message: str = ""):
        super().__init__(message or f"interrupted by {signal_name(signum)}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class StopRequest:
    """SIGINT / SIGTERM handlers that record the first signal (``signum``) instead of
    raising. Installed only from the main thread (signal handlers live there);
    elsewhere ``install`` does nothing and Ctrl-C keeps raising ``KeyboardInterrupt``.
    A repeated signal prints a one-line note and is otherwise ignored: the save in
    progress finishes (``kill -9`` stops at once and keeps the previous checkpoint)."""

    def __init__(self):
        self.signum: int | None = None
        self._previous: dict = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def install(self) -> "StopRequest":
        if threading.current_thread() is not threading.main_thread() or self._previous:
            return self
        for sig in HANDLED_SIGNALS:
            self._previous[sig] = signal.getsignal(sig)
            signal.signal(sig, self._handle)
        return self

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}

    def _handle(self, signum, frame) -> None:
        if self.signum is None:
            self.signum = signum
            return
        os.write(2, f"\n{signal_name(signum)} again: still stopping (finishing the checkpoint; kill -9 "
                    f"would keep the previous one)\n".encode())

    def __enter__(self) -> "StopRequest":
        return self.install()

    def __exit__(self, *exc) -> None:
        self.restore()


def raise_keyboard_interrupt_on_sigterm() -> object:
    """Make SIGTERM raise ``KeyboardInterrupt`` like Ctrl-C (for a command line's set-up,
    before a loop installs :class:`StopRequest`); returns the previous handler."""
    def handler(signum, frame):
        raise Interrupted(signum)

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)
