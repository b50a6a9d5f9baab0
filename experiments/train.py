"""Train a Beasty Bar agent: self-play with search and learning, fused on the accelerator.

Usage::

    python experiments/train.py --config configs/quick.yaml
    python experiments/train.py --config configs/h100.yaml --set num_games=8192 --set search.num_simulations=32
    python experiments/train.py --config configs/quick.yaml --resume      # continue where it stopped

``--set key=value`` overrides any config key (dotted for sections: ``network.width=128``,
``search.num_simulations=32``);
values are parsed as YAML. The run directory (``run_dir``, default ``runs/<name>``)
receives ``checkpoints/``, ``metrics.jsonl``, ``tensorboard/`` and ``config.json``.
Ctrl-C or SIGTERM stops after the running iteration with a checkpoint of it (exit
130 / 143); ``--resume`` continues from the newest intact checkpoint. Exit codes: 0
done, 2 a bad config or run directory (one line, nothing written), 1 a failure while
running (e.g. a full disk, or a non-finite loss: one line, the previous checkpoints
intact). Library logs go to ``<run_dir>/library.log``.
"""

from __future__ import annotations

import argparse
import os
import sys

from beastybar_jax.cli import OneLineParser, int_in_range


def parse_args(argv=None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="YAML config, e.g. configs/quick.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key (repeatable), e.g. --set search.num_simulations=32")
    parser.add_argument("--resume", action="store_true", help="continue the run in run_dir from its latest checkpoint")
    parser.add_argument("--allow-schedule-change", action="store_true",
                        help="with --resume: accept a config whose learning-rate schedule differs from the saved run's "
                             "(e.g. more num_iterations with decay_steps: 0); the rate jumps at the resume point")
    parser.add_argument("--no-console", action="store_true", help="no progress bar / per-iteration lines")
    parser.add_argument("--dry-run", action="store_true",
                        help="run the run's checks (config, memory, opponents, run_dir, warm start), print the config "
                             "resolved, and exit without writing or compiling anything")
    group = parser.add_argument_group(
        "several processes (see docs/training.md, 'GPUs and several hosts'); default: the environment "
        "(JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID) or a cluster JAX detects")
    group.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address (implies distributed: true)")
    group.add_argument("--num-processes", type=int_in_range(1, 1_000_000), metavar="N", help="processes in the run")
    group.add_argument("--process-id", type=int_in_range(0, 999_999), metavar="I", help="this process's id, 0..N-1")
    return parser.parse_args(argv)


# What the runtime's error says when a collective lost a process of the run (gloo on the
# CPU, NCCL and the coordination service elsewhere), as opposed to a failure of this one.
LOST_PEER_SIGNS = ("Gloo", "Connection reset", "Connection refused", "connection", "UNAVAILABLE", "DEADLINE_EXCEEDED",
                   "NCCL", "barrier", "Barrier", "heartbeat", "coordination")


def join_processes(args) -> None:
    """Join a multi-process run when asked for (flags, or ``distributed: true`` in the
    config), before anything touches a JAX device. Reads the YAML without validating it:
    validation imports the game, which already uses the devices."""
    from beastybar_jax.config import apply_overrides, read_yaml
    from beastybar_jax.training import distributed

    raw = apply_overrides(read_yaml(args.config), args.overrides)
    flags = (args.coordinator, args.num_processes, args.process_id)
    if raw.get("distributed") is True or any(f is not None for f in flags):
        timeout = raw.get("distributed_timeout", distributed.DEFAULT_TIMEOUT_SECONDS)
        distributed.initialize(*flags, timeout_seconds=timeout if isinstance(timeout, int) else 300)


def main(argv=None) -> int:
    args = parse_args(argv)
    from beastybar_jax.training.interrupt import signal_name, when_forced

    when_forced(lambda signum: f"interrupted by {signal_name(signum)} before training started: nothing was saved")
    try:
        return _main(args)
    except KeyboardInterrupt as e:  # before the loop started (loading, restoring)
        signum = getattr(e, "signum", None)
        name = signal_name(signum) if signum else "SIGINT"
        print(f"interrupted by {name} before training started: nothing was saved", file=sys.stderr)
        return getattr(e, "exit_code", 130)
    finally:
        when_forced(None)


def _main(args) -> int:
    from beastybar_jax.config import ConfigError, load_config
    from beastybar_jax.checkpoint import CheckpointError
    from beastybar_jax.training.distributed import DistributedError
    from beastybar_jax.training.guards import NonFiniteError
    from beastybar_jax.training.interrupt import active_command

    check_signal = active_command().check if active_command() is not None else (lambda: None)

    try:
        if not args.dry_run:
            join_processes(args)
        config = load_config(args.config, args.overrides)
        if args.coordinator or args.num_processes is not None:
            config = config.replace(distributed=True)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    except DistributedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if config.eval_endgames and not config.eval_every:  # asked for, and silently never done
        print("note: eval_endgames is on but eval_every is 0, so training evaluates nothing; set eval_every: N "
              "to score the endgame suite every N iterations", file=sys.stderr)

    if args.dry_run:  # the run's own pre-flight, alone: nothing written, initialized or compiled
        import json

        from beastybar_jax.games import get_game
        from beastybar_jax.training.preflight import preflight
        from beastybar_jax.training.rundir import RunDirError

        try:
            checked = preflight(config, get_game(config.game), resume=args.resume, dry_run=True)
        except ConfigError as e:
            print(f"config error: {e}", file=sys.stderr)
            return 2
        except (CheckpointError, RunDirError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(json.dumps(config.to_dict(), indent=2))
        for note in checked.notes:
            print(note, file=sys.stderr)
        print(f"config ok; run_dir {config.resolved_run_dir}{' (resume)' if args.resume else ''}")
        return 0

    from beastybar_jax.training.loop import TrainLoop
    from beastybar_jax.training.interrupt import Interrupted
    from beastybar_jax.training.rundir import RunDirError

    try:
        loop = TrainLoop(config, resume=args.resume, console=not args.no_console,
                         allow_schedule_change=args.allow_schedule_change)
    except (ConfigError, CheckpointError, RunDirError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        check_signal()  # a signal during the set-up (a restore, the first compiles)
    except KeyboardInterrupt:
        loop.close()
        raise
    from beastybar_jax.training.library_log import send_library_output_to

    # Orbax / asyncio / thread tracebacks (e.g. around a full disk) go to a file, not the terminal.
    undo_library_output = send_library_output_to(os.path.join(loop.run_dir, "library.log"))
    import jax

    code, peers_lost = 0, False
    try:
        loop.run()
    except Interrupted as e:
        print(e, file=sys.stderr)
        code = e.exit_code
    except (CheckpointError, OSError, NonFiniteError) as e:
        print(f"error: {e}", file=sys.stderr)
        code = 1
    except jax.errors.JaxRuntimeError as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if jax.process_count() == 1 or not any(sign in first for sign in LOST_PEER_SIGNS):
            raise  # this process's own failure (memory, say): the traceback says where
        # A collective between the processes failed: one stopped or lost its connection.
        print(f"error: a collective between the run's processes failed ({first}); another process stopped or lost "
              f"its connection. Start every process again with --resume: the run goes on from its last checkpoint",
              file=sys.stderr)
        code, peers_lost = 1, True
    finally:
        try:
            if not peers_lost:  # closing waits for the other processes, which are gone
                loop.close()
        except (CheckpointError, OSError) as e:
            if code == 0:
                print(f"error: {e}", file=sys.stderr)
                code = 1
        finally:
            undo_library_output()
    if code == 0:
        print(f"done: {loop.run_dir}")
    return code


if __name__ == "__main__":
    from beastybar_jax.training.interrupt import run_command

    run_command(main)
