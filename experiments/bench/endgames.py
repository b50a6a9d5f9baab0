"""``endgames``: the exact endgame solver (``endgame.solver.search``): positions solved per
second, nodes per position, at several modes, lane counts and budgets (``--budgets``: loop
iterations, as ``alphazero.exact_value_budget``; then the positions solved within it)."""

from __future__ import annotations

import argparse

import jax
import numpy as np

from bench import common
from beastybar_jax.agents import make_agent
from beastybar_jax.games.beastybar.endgame import positions, solver
from beastybar_jax.games.beastybar.endgame.suite import load_suite
from beastybar_jax.seeds import SEED_LIMIT, seed_key

SOURCES = {
    "endgames": "every position of random games with both decks empty (1-8 cards in hand)",
    "start": "positions where both decks just ran out (8 cards in hand, 8 plies to go: the largest)",
    "solvable": "every solvable position of random games (also the one before the last draw, 9 cards)",
    "suite": "the endgame yardstick suite (beastybar_jax/games/beastybar/endgame/endgame_suite.npz), repeated",
    "iteration": "every position of random games, solvable or not, as exact targets get an iteration's moves "
                 "(h100.yaml: --positions 98304, 4,096 games x 24 plies)",
}


def endgame_positions(source: str, count: int, seed: int = 0):
    """``count`` solvable positions (host ``State`` ``[count]``) from ``SOURCES``."""
    if source == "suite":
        suite = load_suite()
        return jax.tree.map(lambda x: np.resize(x, (count,) + x.shape[1:]), suite.states)
    random = make_agent("random")
    chunks, have, index = [], 0, 0
    while have < count:
        key = seed_key((seed * 1000 + index) % SEED_LIMIT)
        if source == "iteration":  # whole games in turn order, as self-play plays them
            history = jax.device_get(positions.compiled_play(random, random, 4096)(key))
            chunks.append(jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), history))
            have, index = have + chunks[-1].turn.shape[0], index + 1
            continue
        states = positions.endgames_from_games(random, random, 4096, key)
        left = np.asarray(states.hand.sum((1, 2)) + (states.deck >= 0).sum((1, 2)))
        keep = {"endgames": left <= 8, "start": left == 8, "solvable": left >= 0}[source]
        chunks.append(jax.tree.map(lambda x: x[keep], states))
        have += int(keep.sum())
        index += 1
    # Whole games' positions come out turn by turn: shuffle before cutting to ``count``.
    order = np.arange(count) if source == "iteration" else np.random.default_rng(seed).permutation(have)[:count]
    return jax.tree.map(lambda *x: np.concatenate(x)[order], *chunks)


def bench_endgames(states, mode: str, num_lanes: int, repeats: int, budget: int = 0) -> dict:
    """Compile and time ``solver.search`` on a batch; returns a result row. With a ``budget``
    (loop iterations) the exact targets' order (smallest positions first)."""
    config = solver.SolverConfig(mode=mode, num_lanes=num_lanes, max_iterations=budget, smallest_first=budget > 0)
    states = jax.device_put(states)
    compiled, compile_s = common.compile_seconds(jax.jit(lambda s: solver.search(s, config)), states)
    jax.block_until_ready(compiled(states))  # warm-up run
    best, _, (solution, iterations) = common.best_of(repeats, lambda r: compiled(states))
    count = int(states.turn.shape[0])
    solvable = int(np.asarray(positions.solvable_mask(states)).sum())
    solved = int(solution.solved.sum())
    if solved != solvable and not budget:
        raise RuntimeError(f"only {solved} of {solvable} solvable positions were solved")
    return dict(mode=mode, positions=count, solvable=solvable, solved=solved, budget=budget,
                num_lanes=solver.lanes_for(config, count), seconds=best, positions_per_second=solved / best,
                nodes_per_position=float(solution.nodes.sum() / max(solved, 1)), iterations=int(iterations),
                compile_seconds=compile_s)


def run(args: argparse.Namespace) -> int:
    machine = common.machine_info()
    states = endgame_positions(args.source, args.positions, args.seed)
    rows = []
    for mode in args.modes:
        for lanes in args.lanes:
            for budget in args.budgets:
                common.check_signals()
                row = common.unless_out_of_memory(f"mode {mode} lanes {lanes} budget {budget}", lambda: bench_endgames(
                    states, mode, lanes, args.repeats, budget))
                if row is not None:
                    rows.append(dict(row, source=args.source))
                    common.progress(f"{args.positions} {args.source} positions, mode {mode} lanes {row['num_lanes']} "
                                    f"budget {budget}: {row['solved']} solved, "
                                    f"{common.rate(row['positions_per_second'])} positions/s ({row['seconds']:.2f} s), "
                                    f"compile {row['compile_seconds']:.1f} s")
    common.print_table(machine, [
        ("source", lambda r: r["source"]),
        ("positions", lambda r: r["positions"]),
        ("mode", lambda r: r["mode"]),
        ("lanes", lambda r: r["num_lanes"]),
        ("budget", lambda r: r["budget"] or "none"),
        ("solved", lambda r: f"{r['solved']} of {r['solvable']}"),
        ("positions/s", lambda r: common.rate(r["positions_per_second"])),
        ("nodes/position", lambda r: f"{r['nodes_per_position']:.0f}"),
        ("iterations", lambda r: r["iterations"]),
        ("seconds", lambda r: f"{r['seconds']:.2f}"),
        ("compile s", lambda r: f"{r['compile_seconds']:.1f}"),
    ], rows)
    return common.write_report(args.out, "endgames", machine, args, rows)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("endgames", help="the exact endgame solver: positions solved per second",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--positions", type=common.int_at_least(1), default=100_000,
                   help="positions per batch (default %(default)s)")
    p.add_argument("--source", choices=tuple(SOURCES), default="endgames",
                   help="; ".join(f"{k}: {v}" for k, v in SOURCES.items()))
    p.add_argument("--modes", type=common.list_of(choices=solver.MODES), default=["results"],
                   help="solver modes, comma-separated: results (default), best, margins")
    p.add_argument("--lanes", type=common.list_of(minimum=0), default=[0],
                   help="solver lanes, comma-separated (0: automatic)")
    p.add_argument("--budgets", type=common.list_of(minimum=0), default=[0],
                   help="loop iterations, comma-separated (0: no limit, the default; else the positions solved "
                        "within it, smallest first, as alphazero.exact_value_budget)")
    common.add_common_arguments(p, out="bench_results/endgames.json")
    p.set_defaults(func=run)
