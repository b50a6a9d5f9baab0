"""Train a Beasty Bar agent: self-play with search and learning, fused on the accelerator.

Usage::

    python experiments/train.py --config configs/quick.yaml
    python experiments/train.py --config configs/h100.yaml --set num_games=4096 --set alphazero.search.num_simulations=64
    python experiments/train.py --config configs/quick.yaml --resume      # continue where it stopped

``--set key=value`` overrides any config key (dotted for sections: ``network.width=128``,
``alphazero.search.num_simulations=32``);
values are parsed as YAML. The run directory (``run_dir``, default ``runs/<name>``)
receives ``checkpoints/``, ``metrics.jsonl``, ``tensorboard/`` and ``config.json``.
Ctrl-C saves a checkpoint and exits; ``--resume`` continues from the latest one.
"""

from __future__ import annotations

import argparse
import sys


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="YAML config, e.g. configs/quick.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key (repeatable), e.g. --set alphazero.search.num_simulations=32")
    parser.add_argument("--resume", action="store_true", help="continue the run in run_dir from its latest checkpoint")
    parser.add_argument("--no-console", action="store_true", help="no progress bar / per-iteration lines")
    parser.add_argument("--dry-run", action="store_true",
                        help="load and validate the config, print it resolved, and exit without compiling")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    from beastybar_jax.config import ConfigError, load_config
    from beastybar_jax.training.checkpoint import CheckpointError

    try:
        config = load_config(args.config, args.overrides)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2

    if args.dry_run:
        import json

        import jax

        from beastybar_jax.config import validate
        from beastybar_jax.training.evaluation import make_opponents

        try:
            validate(config, num_devices=jax.device_count())  # divisibility on this machine too
            if config.eval_every:
                make_opponents(config)  # the opponents exist (and checkpoints among them load)
        except ConfigError as e:
            print(f"config error: {e}", file=sys.stderr)
            return 2
        print(json.dumps(config.to_dict(), indent=2))
        print(f"config ok; run_dir {config.resolved_run_dir}{' (resume)' if args.resume else ''}")
        return 0

    from beastybar_jax.training import TrainLoop

    try:
        loop = TrainLoop(config, resume=args.resume, console=not args.no_console)
    except (ConfigError, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        loop.run()
    except KeyboardInterrupt:
        print(f"interrupted; checkpoint saved in {loop.run_dir} (continue with --resume)", file=sys.stderr)
        return 130
    finally:
        loop.close()
    print(f"done: {loop.run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
