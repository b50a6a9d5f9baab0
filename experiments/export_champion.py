"""Ship a trained Beasty Bar run as the package's champion (agent spec ``champion``).

    python experiments/export_champion.py RUN_DIR [--out DIR]

Writes ``config.json`` and ``params.msgpack`` (beastybar_jax.agents.champion) of the
run's latest checkpoint to ``beastybar_jax/games/beastybar/champion/`` (or ``--out``).
"""

from __future__ import annotations

import argparse

from beastybar_jax.agents.champion import CHAMPION_DIR, save_champion
from beastybar_jax.training.checkpoint import load_agent


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="a run directory, its checkpoints/ or one checkpoints/<iteration>")
    parser.add_argument("--out", default=str(CHAMPION_DIR), help="where to write (default: the package's champion)")
    args = parser.parse_args(argv)
    model = load_agent(args.run_dir)
    if model.config.game != "beastybar":
        parser.error(f"the champion plays Beasty Bar; {args.run_dir} was trained on {model.config.game}")
    out = save_champion(model, args.out, info={"iteration": model.iteration, "config_name": model.config.name,
                                               "seed": model.config.seed})
    print(f"wrote the champion (iteration {model.iteration} of {model.config.name}) to {out}")


if __name__ == "__main__":
    main()
