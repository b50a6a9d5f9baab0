"""Speed benchmarks, one subcommand each (``experiments/bench/<name>.py``).

Usage::

    python experiments/benchmark.py env       [--batch-sizes 1,64,4096,2^16] [--steps 256] [--variant step]
    python experiments/benchmark.py selfplay  [--config configs/h100.yaml] [--batch-sizes 4096] [--simulations 16,64]
    python experiments/benchmark.py search    [--config configs/h100.yaml] [--simulations 8,64,256] [--mctx both]
    python experiments/benchmark.py ppo       [--config configs/ppo_h100.yaml] [--batch-sizes 32768]
    python experiments/benchmark.py network   [--config configs/h100.yaml] [--turns 4,12,16] [--torso auto,xla]
    python experiments/benchmark.py endgames  [--positions 100000] [--source start] [--modes results,best]
    python experiments/benchmark.py matches   [--agents champion,champion@sims=32] [--opponent heuristic] [--per-state]
    python experiments/benchmark.py profile   [--config configs/h100.yaml] [--iterations 1] [--trace-dir DIR]

``python experiments/benchmark.py <subcommand> --help`` says what each one measures. Every
subcommand compiles first (compile time reported apart), times the best of ``--repeats``
runs, each ended with ``block_until_ready``, prints a table under one line naming the
machine, and writes its rows with the machine and the arguments as JSON (``--out``,
default ``bench_results/<subcommand>.json``).

Bad arguments (``--steps -5``, ``--repeats 0``, a missing ``--config``, an unknown
``--set`` key) end in one line and exit code 2, before anything is compiled; the JSON
output is only written when something was measured.
"""

from __future__ import annotations

import argparse
import sys

from bench import endgames, env, matches, network, ppo, profile, search, selfplay

from beastybar_jax.cli import check_writable_file

SUBCOMMANDS = (env, selfplay, search, ppo, network, profile, endgames, matches)


class OneLineErrors(argparse.ArgumentParser):
    """Argument errors as one line (``benchmark.py env: error: argument --steps: ...``), exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrors)
    for module in SUBCOMMANDS:
        module.add_parser(subparsers)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from beastybar_jax.training.interrupt import signal_name, when_forced

    try:
        check_writable_file(args.out, "--out")  # before any timing: no result lost to a bad path
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    when_forced(lambda signum: f"interrupted by {signal_name(signum)}: no results written ({args.out} is unchanged)")
    try:
        return args.func(args)
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", None) or 2
        print(f"interrupted by {signal_name(signum)}: no results written ({args.out} is unchanged)", file=sys.stderr)
        return 128 + signum
    finally:
        when_forced(None)


if __name__ == "__main__":
    from beastybar_jax.training.interrupt import run_command

    run_command(main)
