"""Shared pieces of the command lines (``experiments/*.py``): argument types that
check numbers (finite, in range) and output paths checked before any work.

Argument types raise ``argparse.ArgumentTypeError``; with :class:`OneLineParser`
a bad argument is one line on stderr and exit code 2::

    parser = OneLineParser(description=...)
    parser.add_argument("--minutes", type=finite_float(0, 10_000), default=5.0)
    parser.add_argument("--seed", type=seed)
    args = parser.parse_args(argv)
    check_writable_file(args.json, "--json")      # ValueError naming the flag
"""

from __future__ import annotations

import argparse
import math
import os

from beastybar_jax.seeds import DEAL_SEED_LIMIT, SEED_LIMIT


class OneLineParser(argparse.ArgumentParser):
    """Argument errors as one line (``prog: error: argument --x: ... (see --help)``), exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def int_in_range(minimum: int | None = None, maximum: int | None = None):
    """An argparse type: an integer in ``[minimum, maximum]`` (either end open when None)."""
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum:,}, got {value:,}")
        return value

    return parse


def finite_float(minimum: float | None = None, maximum: float | None = None, *, above: float | None = None):
    """An argparse type: a finite number in ``[minimum, maximum]`` (no nan, no inf),
    and greater than ``above`` when given."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g}, got {value:g}")
        if above is not None and value <= above:
            raise argparse.ArgumentTypeError(f"must be greater than {above:g}, got {value:g}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum:g}, got {value:g}")
        return value

    return parse


def _seed_below(limit: int, limit_text: str, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer {what}, got {text!r}") from None
        if not 0 <= value < limit:
            raise argparse.ArgumentTypeError(f"a {what} must be an integer in [0, {limit_text}), got {value}")
        return value

    return parse


seed = _seed_below(SEED_LIMIT, "2**63", "seed")
seed.__doc__ = """An argparse type: a random seed, an integer in ``[0, 2**63)`` (``beastybar_jax.seeds``)."""
deal_seed = _seed_below(DEAL_SEED_LIMIT, "2**53", "deal seed")
deal_seed.__doc__ = """An argparse type: a deal seed (``beastybar_jax.playing.deal``), an integer in ``[0, 2**53)``."""


def check_writable_file(path: str | os.PathLike, flag: str) -> None:
    """Raise ``ValueError`` (naming ``flag``) when the file ``path`` cannot be written;
    creates its directory. Checked before the work, so a result is never lost to a
    typo or a read-only place. An existing file is left as it is."""
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a directory: give a file name, e.g. {os.path.join(path, 'results.json')}")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        existed = os.path.exists(path)
        with open(path, "a"):
            pass
        if not existed:
            os.remove(path)
    except OSError as e:
        raise ValueError(f"{flag} {path} cannot be written: {e.strerror or e}") from None


def check_writable_directory(path: str | os.PathLike, flag: str, *, empty: bool = False) -> None:
    """Raise ``ValueError`` (naming ``flag``) when the directory ``path`` cannot be
    created or written in (it is created when missing); with ``empty``, also when it
    holds anything already (what is written there would mix with it, or replace it)."""
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a file, not a directory")
    held = sorted(os.listdir(path)) if empty and os.path.isdir(path) else []
    if held:
        raise ValueError(f"{flag} {path} is not empty ({', '.join(held[:3])}{', ...' if len(held) > 3 else ''}): "
                         f"give a new or empty directory")
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".write_test_{os.getpid()}")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        raise ValueError(f"{flag} {path} cannot be written: {e.strerror or e}") from None
