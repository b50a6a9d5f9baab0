"""Ship a trained Beasty Bar run as the package's champion (agent spec ``champion``).

    python experiments/export_champion.py RUN_DIR [--out DIR]

Writes the run's latest intact checkpoint as an exported network (``config.json`` and
``params.msgpack``, :func:`beastybar_jax.checkpoint.save_exported`) to
``beastybar_jax/games/beastybar/champion/`` (or ``--out``), where ``Game.agents.networks``
names it.
"""

from __future__ import annotations

import sys

from beastybar_jax.checkpoint import CheckpointError, load_agent, save_exported
from beastybar_jax.cli import OneLineParser, check_writable_directory
from beastybar_jax.games import get_game


def main(argv=None) -> int:
    champion_dir = str(dict(get_game("beastybar").agents.networks)["champion"])
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="a run directory, its checkpoints/ or one checkpoints/<iteration>")
    parser.add_argument("--out", default=champion_dir, help="where to write (default: the package's champion)")
    args = parser.parse_args(argv)
    try:
        model = load_agent(args.run_dir)  # first: a run that is not there leaves no empty --out behind
        check_writable_directory(args.out, "--out")
        if model.config.game != "beastybar":
            raise ValueError(f"the champion plays Beasty Bar; {args.run_dir} was trained on {model.config.game}")
        # A run directory as --out is refused (checkpoint: would name the export, not the run).
        out = save_exported(model, args.out, info={"iteration": model.iteration, "config_name": model.config.name,
                                                   "seed": model.config.seed})
    except (ValueError, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote the champion (iteration {model.iteration} of {model.config.name}) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
