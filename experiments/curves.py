"""Win rate against wall-clock training time, for runs side by side: a table and a plot.

Usage::

    python experiments/train.py --config configs/h100.yaml --set eval_every=50
    python experiments/train.py --config configs/ppo_h100.yaml --set eval_every=50
    python experiments/curves.py runs/h100 runs/ppo_h100 --out curves.png

Each run directory must have been trained with periodic evaluation (``eval_every`` > 0),
so that its ``metrics.jsonl`` holds ``eval_<opponent>_win_rate`` rows. The training
time of a row is the sum of ``iteration_seconds`` up to it (compilation and evaluation
excluded). Prints a Markdown table (one row per evaluation: run, iteration, training
seconds, games played, win rate per opponent) and, with ``--out`` (a ``.png``, ``.pdf`` or
``.svg`` file, checked before anything is read), draws one panel per opponent, one line
per run (matplotlib). Runs are labelled by their directory names, or by ``--names``;
two runs with one label are an error, as is an opponent no run was evaluated against.
"""

from __future__ import annotations

import argparse
import os
import sys

from beastybar_jax.cli import OneLineParser, check_writable_file

PLOT_FORMATS = (".png", ".pdf", ".svg")


def read_curve(run_dir: str) -> list[dict]:
    """The evaluation rows of a run: ``{iteration, seconds, games, win_rates: {opponent: rate}}``."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist: give run directories written by experiments/train.py")
    from beastybar_jax.training.metrics import read_jsonl  # names the file and line of damage

    rows, seconds = [], 0.0
    for m in read_jsonl(path):
        seconds += float(m.get("iteration_seconds", 0.0))
        rates = {k[len("eval_"):-len("_win_rate")]: float(v) for k, v in m.items()
                 if k.startswith("eval_") and k.endswith("_win_rate")}
        if rates:
            rows.append(dict(iteration=int(m["iteration"]), seconds=seconds, games=int(m.get("total_games", 0)),
                             win_rates=rates))
    if not rows:
        raise ValueError(f"{path} holds no evaluation rows: train with --set eval_every=N (N > 0)")
    return rows


def markdown_table(curves: dict[str, list[dict]], opponents: list[str]) -> str:
    lines = ["| run | iteration | training s | games | " + " | ".join(f"vs {o}" for o in opponents) + " |",
             "|---|---:|---:|---:|" + "---:|" * len(opponents)]
    for name, rows in curves.items():
        for r in rows:
            rates = " | ".join(f"{r['win_rates'][o]:.1%}" if o in r["win_rates"] else "-" for o in opponents)
            lines.append(f"| {name} | {r['iteration']} | {r['seconds']:.0f} | {r['games']:,} | {rates} |")
    return "\n".join(lines)


def plot(curves: dict[str, list[dict]], opponents: list[str], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(opponents), figsize=(4.2 * len(opponents), 3.4), squeeze=False)
    for ax, opponent in zip(axes[0], opponents):
        for name, rows in curves.items():
            points = [(r["seconds"], r["win_rates"][opponent]) for r in rows if opponent in r["win_rates"]]
            if points:
                ax.plot(*zip(*points), marker="o", markersize=3, label=name)
        ax.set_title(f"vs {opponent}")
        ax.set_xlabel("training seconds")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("win rate")
    axes[0][-1].legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run directories (with metrics.jsonl)")
    parser.add_argument("--names", help="comma-separated labels for the runs (default: the directory names)")
    parser.add_argument("--opponents", help="comma-separated opponents to show (default: all evaluated)")
    parser.add_argument("--out", help=f"write the plot here ({', '.join(PLOT_FORMATS)})")
    args = parser.parse_args(argv)
    names = args.names.split(",") if args.names else [os.path.basename(os.path.normpath(r)) for r in args.runs]
    names = [name.strip() for name in names]
    if len(names) != len(args.runs):
        parser.error(f"--names gives {len(names)} labels for {len(args.runs)} runs")
    if len(set(names)) != len(names) or not all(names):
        twice = sorted({n for n in names if names.count(n) > 1}) or [""]
        parser.error(f"two runs would share the label {twice[0]!r} (one would hide the other): give --names")
    if args.out:
        if os.path.splitext(args.out)[1].lower() not in PLOT_FORMATS:
            parser.error(f"--out {args.out}: a plot is a {', '.join(PLOT_FORMATS)} file")
        try:
            check_writable_file(args.out, "--out")
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    try:
        curves = {name: read_curve(run) for name, run in zip(names, args.runs)}
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    seen = sorted({o for rows in curves.values() for r in rows for o in r["win_rates"]})
    from beastybar_jax.learning.algorithm import metric_name  # how the log names an opponent (mcts-32: mcts_32)

    opponents = [o.strip() if o.strip() in seen else metric_name(o.strip()) if o.strip() else ""
                 for o in args.opponents.split(",")] if args.opponents else seen  # runs logged before either way
    unknown = [o for o in opponents if o not in seen]
    if unknown or not opponents:
        parser.error(f"--opponents: no run was evaluated against {unknown[0] if unknown else 'any of them'!r}; "
                     f"evaluated: {', '.join(seen)}")
    print(markdown_table(curves, opponents))
    if args.out:
        plot(curves, opponents, args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
