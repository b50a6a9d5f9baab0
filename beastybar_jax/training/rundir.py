"""The run directory: created and checked before anything is written, and locked
against a second writer.

:class:`RunLock` holds an exclusive ``fcntl.flock`` on ``<run_dir>/run.lock`` for as
long as a run writes there. The operating system releases a ``flock`` when its
process ends, however it ends (``kill -9``, a crash, a lost node), so a lock can never
outlive its holder; the file's text (pid, host, start time) only serves the message
given to a second writer. Only process 0 of a multi-process run takes it (the others
write no logs; orbax checkpoints are collective).
"""

from __future__ import annotations

import datetime
import errno
import json
import os
import socket
import warnings

try:
    import fcntl
except ImportError:  # not POSIX: no lock (the run still works)
    fcntl = None

LOCK_FILE = "run.lock"


class RunDirError(ValueError):
    """The run directory cannot be used (not a directory, not writable, locked)."""


class RunLockedError(RunDirError):
    """Another process is training in this run directory."""


def prepare_run_dir(run_dir: str | os.PathLike) -> str:
    """Create ``run_dir`` (and its parents) and check that files can be written in it;
    returns its absolute path. Raises :class:`RunDirError` naming the fix."""
    path = os.path.abspath(os.fspath(run_dir))
    if os.path.exists(path) and not os.path.isdir(path):
        raise RunDirError(f"run_dir {path} is a file, not a directory: choose another run_dir or name "
                          f"(e.g. --set name=new_run)")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise RunDirError(f"cannot create run_dir {path}: {e.strerror or e}; choose a writable place "
                          f"(--set run_dir=...)") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise RunDirError(f"run_dir {path} is not writable: choose a writable place (--set run_dir=...) or "
                          f"fix its permissions")
    return path


class RunLock:
    """An exclusive lock on a run directory (see the module docstring).

    ``acquire()`` raises :class:`RunLockedError` (with the holder's pid and host) when
    another process holds it; ``release()`` (or the process ending) frees it.
    """

    def __init__(self, run_dir: str | os.PathLike):
        self.path = os.path.join(os.fspath(run_dir), LOCK_FILE)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "RunLock":
        if self._fd is not None:
            return self
        for _ in range(10):  # a holder may remove the file between our open and our flock: open again
            self._acquire_once()
            if self._fd is None or _same_file(self._fd, self.path):
                return self
            fd, self._fd = self._fd, None
            os.close(fd)
        raise RunDirError(f"cannot lock {self.path}: it keeps being replaced")

    def _acquire_once(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise RunDirError(f"cannot create the lock file {self.path}: {e.strerror or e}") from None
        if fcntl is None:
            self._fd = fd
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _read_holder(fd)
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise _in_use(self.path, holder) from None
            # A file system without flock (some network mounts): run unlocked, say so.
            warnings.warn(f"cannot lock {self.path} ({e.strerror or e}); a second training in this run_dir "
                          f"would not be refused", RuntimeWarning, stacklevel=2)
        holder = dict(pid=os.getpid(), host=socket.gethostname(),
                      since=datetime.datetime.now().isoformat(timespec="seconds"))
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        except OSError:
            pass  # the lock holds without its note (e.g. a full disk)
        self._fd = fd

    def release(self) -> None:
        """Remove the lock file (while still holding the lock, so a process that opened
        it meanwhile sees it replaced and opens again) and release the lock."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if _same_file(fd, self.path):
                os.remove(self.path)
            else:
                os.ftruncate(fd, 0)
        except OSError:
            pass
        os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def check_not_in_use(run_dir: str | os.PathLike) -> None:
    """Raise :class:`RunLockedError` where another process holds ``run_dir``'s lock;
    writes nothing (the run's pre-flight, also in a dry run)."""
    path = os.path.join(os.fspath(run_dir), LOCK_FILE)
    if fcntl is None:
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # no lock file: nobody holds the lock
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise _in_use(path, _read_holder(fd)) from None
    finally:
        os.close(fd)


def _in_use(lock_path: str, holder: str) -> RunLockedError:
    return RunLockedError(f"run_dir {os.path.dirname(lock_path)} is in use by another training ({holder}); wait for "
                          f"it to end, or use another run_dir / name (e.g. --set name=new_run)")


def _read_holder(fd: int) -> str:
    try:
        holder = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return f"pid {holder['pid']} on host {holder['host']}, since {holder['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not written its pid yet"


def _same_file(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
