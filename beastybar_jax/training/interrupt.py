"""Stopping a run cleanly on SIGINT (Ctrl-C) or SIGTERM (what batch schedulers send
before preempting a job); :class:`CommandSignals` is the same contract for every
command line (see there).

While :class:`StopRequest` is installed, the two signals only note that a stop was
asked for; the loop looks at the note between iterations (and while it waits for a
compile), so a signal never lands in the middle of a checkpoint save or of a donated
iteration. The loop then saves the last finished iteration and raises
:class:`Interrupted`, a ``KeyboardInterrupt``, so code that catches Ctrl-C catches it.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from typing import Callable, NoReturn

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
        if _ACTIVE is not None and self.signum is None:
            self.signum = _ACTIVE.signum  # a signal the command noted before this loop started
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
        if _ACTIVE is not None:
            return  # the command's watchdog says it
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


# ----------------------------------------------------------------------------- command lines

STOP_SECONDS_ENV = "BEASTYBAR_STOP_SECONDS"
DEFAULT_STOP_SECONDS = 10.0


def stop_seconds() -> float:
    """How long a command may take to reach a safe point after a signal before it
    exits at once (``$BEASTYBAR_STOP_SECONDS``, default 10)."""
    try:
        value = float(os.environ.get(STOP_SECONDS_ENV, DEFAULT_STOP_SECONDS))
    except ValueError:
        return DEFAULT_STOP_SECONDS
    return value if value > 0 and value == value and value != float("inf") else DEFAULT_STOP_SECONDS


class CommandSignals:
    """The signal contract of a long-running command line (train, exploit, evaluate,
    benchmark, serve): SIGINT or SIGTERM at any moment, a compile included, ends it
    within seconds with one line on stderr and exit code 130 / 143, with no traceback
    and no crash, keeping what was finished.

    How: the handlers only note the signal (``requested``, ``signum``), never raise in
    the middle of library code (a ``KeyboardInterrupt`` raised inside JAX's tracing or a
    garbage-collector callback can be swallowed or crash the process). The command
    calls :meth:`check` at its safe points (between iterations, pairings, phases),
    which raises :class:`Interrupted`; whoever handles that stop calls
    :meth:`acknowledge` (``check`` does it) and finishes in order: saves, prints one
    line, returns ``128 + signum``, and exits through :func:`exit_command`.

    A watchdog thread hears every signal at once through ``signal.set_wakeup_fd``
    (even while the main thread sits in a long compile or device call, where Python
    runs no handler). When the main thread has not acknowledged the stop within
    :func:`stop_seconds` (or at a second signal), the watchdog calls the function
    given to :meth:`when_forced` (which may save what is finished and returns the one
    line to print), prints that line and ends the process with ``os._exit(128 +
    signum)``. Once acknowledged, a second signal only prints a note.

    Use as a context manager in the main thread (elsewhere it does nothing)::

        with CommandSignals() as signals:
            signals.when_forced(lambda signum: "interrupted: nothing was saved")
            for item in work:
                signals.check()
                ...
    """

    def __init__(self, grace_seconds: float | None = None):
        self.grace_seconds = stop_seconds() if grace_seconds is None else grace_seconds
        self.signum: int | None = None
        self._acknowledged = False
        self._forced_message: Callable[[int], str] | None = None
        self._lock = threading.Lock()
        self._heard = threading.Event()
        self._previous: dict = {}
        self._previous_wakeup = None
        self._sockets = None
        self._active = False

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def check(self) -> None:
        """A safe point: raise :class:`Interrupted` (acknowledged) when a signal came."""
        if self.signum is not None:
            self.acknowledge()
            raise Interrupted(self.signum)

    def acknowledge(self) -> None:
        """The main thread handles the stop: the watchdog stands down."""
        with self._lock:
            self._acknowledged = True

    def when_forced(self, message: Callable[[int], str] | None) -> Callable[[int], str] | None:
        """Set ``message(signum) -> one line``, called by the watchdog before it ends the
        process (it may write what is finished first); returns the previous one."""
        previous, self._forced_message = self._forced_message, message
        return previous

    # -- installing

    def install(self) -> "CommandSignals":
        global _ACTIVE
        if threading.current_thread() is not threading.main_thread() or self._active:
            return self
        reader, writer = socket.socketpair()
        writer.setblocking(False)
        self._sockets = (reader, writer)
        for sig in HANDLED_SIGNALS:
            self._previous[sig] = signal.getsignal(sig)
            signal.signal(sig, self._handle)
        self._previous_wakeup = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._watch, args=(reader,), name="beastybar-signal-watchdog", daemon=True).start()
        self._active = True
        self._outer, _ACTIVE = _ACTIVE, self
        return self

    def restore(self) -> None:
        global _ACTIVE
        if not self._active:
            return
        signal.set_wakeup_fd(self._previous_wakeup if self._previous_wakeup is not None else -1)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}
        reader, writer = self._sockets
        writer.close()  # the watchdog's recv returns b"" and it ends
        self._active = False
        _ACTIVE = self._outer

    def __enter__(self) -> "CommandSignals":
        return self.install()

    def __exit__(self, *exc) -> None:
        self.restore()

    # -- the handlers

    def _handle(self, signum, frame) -> None:
        if self.signum is None:
            self.signum = signum

    def _watch(self, reader) -> None:
        try:
            while True:
                data = reader.recv(64)
                if not data:
                    return
                for signum in data:
                    if signum in HANDLED_SIGNALS:
                        self._heard_signal(signum)
        except OSError:
            return
        finally:
            reader.close()

    def _heard_signal(self, signum: int) -> None:
        with self._lock:
            acknowledged = self._acknowledged
        # The main thread may handle a signal before this thread reads it from the wakeup
        # fd: only a signal after the first is "again".
        again = self._heard.is_set()
        self._heard.set()
        if acknowledged:
            if again:
                os.write(2, f"{signal_name(signum)} again: still stopping (finishing what is being saved; kill -9 "
                            f"would lose it)\n".encode())
            return
        if again:  # a second signal before the command reached a safe point
            self._force(signum)
            return
        threading.Thread(target=self._force_after_grace, args=(signum,), name="beastybar-signal-grace",
                         daemon=True).start()

    def _force_after_grace(self, signum: int) -> None:
        deadline = time.monotonic() + self.grace_seconds
        while time.monotonic() < deadline:
            with self._lock:
                if self._acknowledged:
                    return
            time.sleep(0.05)
        self._force(signum)

    def _force(self, signum: int) -> None:
        self._lock.acquire()  # held until the process ends: the main thread cannot acknowledge any more
        if self._acknowledged:
            self._lock.release()
            return
        signum = self.signum or signum
        try:
            message = (self._forced_message(signum) if self._forced_message is not None
                       else f"interrupted by {signal_name(signum)}")
        except BaseException as e:  # noqa: BLE001 -- the exit must happen
            message = f"interrupted by {signal_name(signum)} (while saving what was finished: {e})"
        _flush_standard_streams()
        os.write(2, (message.rstrip("\n") + "\n").encode(errors="replace"))
        os._exit(128 + signum)


_ACTIVE: CommandSignals | None = None


def active_command() -> CommandSignals | None:
    """The :class:`CommandSignals` of the running command line, if any."""
    return _ACTIVE


def acknowledge_stop() -> None:
    """Tell the running command's watchdog that its stop is being handled (no-op
    outside a command line)."""
    if _ACTIVE is not None:
        _ACTIVE.acknowledge()


def when_forced(message: Callable[[int], str] | None) -> Callable[[int], str] | None:
    """:meth:`CommandSignals.when_forced` on the running command (no-op outside one)."""
    return _ACTIVE.when_forced(message) if _ACTIVE is not None else None


def _flush_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def exit_command(code: int) -> NoReturn:
    """End a command line with ``code``. After an interrupt (130 / 143), with a compile
    still running in its thread, or after a failure in a multi-process run, without the
    interpreter's shutdown: it can crash while XLA works in other threads (``pure virtual
    method called``), and JAX's distributed shutdown waits for processes that may be gone
    (a minute, then an abort with a native stack dump)."""
    from beastybar_jax.training.compilation import compiles_in_flight

    if code in (128 + signal.SIGINT, 128 + signal.SIGTERM) or (code != 0 and (compiles_in_flight()
                                                                               or _in_multiprocess_run())):
        _flush_standard_streams()
        os._exit(code)
    sys.exit(code)


def _in_multiprocess_run() -> bool:
    jax = sys.modules.get("jax")  # a command that never imported JAX is in no such run
    return jax is not None and jax.distributed.is_initialized() and jax.process_count() > 1


_EARLY: CommandSignals | None = None


def command_signals_now() -> CommandSignals | None:
    """Install the command line's :class:`CommandSignals` at once: the first lines of a
    script whose imports take seconds (JAX), so a signal then is noted like any other
    (the command stops at its first safe point, with its one line), not fatal at once.
    :func:`run_command` keeps it. Does nothing outside the main thread."""
    global _EARLY
    if _EARLY is None:
        signals = CommandSignals().install()
        _EARLY = signals if signals._active else None
    return _EARLY


def run_command(main: Callable[[], int]) -> NoReturn:
    """Run a command line's ``main()`` under :class:`CommandSignals` (the one
    :func:`command_signals_now` installed, if any) and exit with its code through
    :func:`exit_command`. An :class:`Interrupted` that ``main`` lets through becomes its
    one line and its exit code."""
    early = _EARLY if _EARLY is not None and _EARLY._active else None
    with (early or CommandSignals()) as signals:
        try:
            code = main()
        except Interrupted as e:
            signals.acknowledge()
            print(e, file=sys.stderr)
            code = e.exit_code
        except KeyboardInterrupt:
            signals.acknowledge()
            signum = signals.signum or signal.SIGINT
            print(f"interrupted by {signal_name(signum)}", file=sys.stderr)
            code = 128 + signum
    exit_command(code)
