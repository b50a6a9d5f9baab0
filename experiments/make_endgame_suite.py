"""Make the endgame yardstick (``beastybar_jax/games/beastybar/endgame/endgame_suite.npz``).

    python experiments/make_endgame_suite.py --network checkpoint:runs/quick --label quick-240
    python experiments/make_endgame_suite.py --games 200 --out /tmp/suite.npz      # no network

The stored suite was made by the first command, with ``runs/quick`` a
``configs/quick.yaml`` run of 240 iterations (``--set num_iterations=240``, ~3 min of
training on the 2-core CPU).

For each pairing of agents, ``--games`` games are played (agent A in seat 0 in half
of them, seat 1 in the other half; fixed seeds). From each game ONE solvable position
(``endgame.positions.is_solvable``: both decks empty, or the last card still to draw)
with at least two legal moves is drawn at random, solved exactly (solver mode
margins: the final margin after every legal move), and kept if the moves' margins
differ (a real decision). The pairings cover weak and strong play: random,
greedy, the four hand-written heuristics, Monte Carlo search, and with
``--network`` a trained network (raw and with search).

Everything is seeded: the same command on the same software gives the same file.
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import numpy as np

from beastybar_jax.games import beastybar as game
from beastybar_jax.agents import make_agent
from beastybar_jax.cli import OneLineParser, check_writable_file, int_in_range, seed as seed_arg
from beastybar_jax.games.beastybar.endgame import positions, solver
from beastybar_jax.games.beastybar.endgame.suite import SUITE_PATH, Suite, SuiteError, save_suite
from beastybar_jax.seeds import seed_key

PAIRINGS = (
    ("random", "random"),
    ("greedy", "heuristic"),
    ("heuristic", "aggressive"),
    ("defensive", "outcome_heuristic"),
    ("aggressive", "outcome_heuristic"),
    ("outcome_heuristic", "heuristic"),
    ("mcts-16", "outcome_heuristic"),
)


def network_pairings(spec: str) -> tuple:
    return ((spec, "outcome_heuristic"), (f"{spec}@sims=16", spec))


def labelled(name: str, spec: str | None, label: str | None) -> str:
    """``name`` with the network spec written as its label (run paths are local)."""
    return name.replace(spec, label) if spec and label else name


def parse_args(argv=None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int_in_range(1, 10_000_000), default=1800, help="games per pairing (default %(default)s)")
    parser.add_argument("--network", metavar="SPEC",
                        help="a trained network's registry spec (checkpoint:<run>): adds its pairings")
    parser.add_argument("--label", metavar="NAME",
                        help="the network's name in the suite's list of sources (default: its spec)")
    parser.add_argument("--seed", type=seed_arg, default=2026)
    parser.add_argument("--out", default=str(SUITE_PATH), help="output .npz (default: the package's suite)")
    args = parser.parse_args(argv)
    if args.games < 2:
        parser.error("--games must be at least 2")
    if args.label and not args.network:
        parser.error("--label names the --network's pairings: give --network too")
    return args


def positions_of_pairing(a: str, b: str, num_games: int, key: jax.Array, rng: np.random.Generator):
    """One random solvable position with at least two moves per game of ``a`` vs ``b``."""
    history = jax.device_get(positions.compiled_play(make_agent(a), make_agent(b), num_games)(key))
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), history)  # turn-major [T * G]
    candidate = np.asarray(positions.solvable_mask(flat)) & (
        np.asarray(jax.jit(jax.vmap(game.legal_action_mask))(flat)).sum(axis=1) >= 2)
    games = np.arange(candidate.size) % num_games
    chosen = []
    for g in range(num_games):
        options = np.flatnonzero(candidate & (games == g))
        if options.size:
            chosen.append(rng.choice(options))
    return jax.tree.map(lambda x: x[np.asarray(chosen)], flat)


def make_suite(pairings, num_games: int, seed: int, log=print, name=lambda pairing: pairing) -> Suite:
    key = seed_key(seed)
    rng = np.random.default_rng(seed)
    solve = jax.jit(lambda s: solver.solve(s, solver.SolverConfig(mode="margins")))
    parts, sources = [], []
    for index, (a, b) in enumerate(pairings):
        start = time.perf_counter()
        states = positions_of_pairing(a, b, num_games, jax.random.fold_in(key, index), rng)
        solution = jax.device_get(solve(states))
        assert solution.solved.all() and solution.action_exact[solution.legal].all()
        keep = np.flatnonzero(positions.real_decisions(solution)[0])
        parts.append((jax.tree.map(lambda x: x[keep], states), solution.action_margin[keep],
                      solution.legal[keep], np.full(keep.size, index, np.int8)))
        sources.append(name(f"{a} vs {b}"))
        log(f"[{index + 1}/{len(pairings)}] {a} vs {b}: {num_games} games, {len(states.turn)} positions drawn, "
            f"{keep.size} real decisions kept ({time.perf_counter() - start:.0f} s)")
    states = jax.tree.map(lambda *x: np.concatenate(x), *[p[0] for p in parts])
    return Suite(states=states, action_margin=np.concatenate([p[1] for p in parts]).astype(np.int8),
                 legal=np.concatenate([p[2] for p in parts]), source=np.concatenate([p[3] for p in parts]),
                 sources=tuple(sources))


def main(argv=None) -> int:
    args = parse_args(argv)
    pairings = PAIRINGS + (network_pairings(args.network) if args.network else ())
    try:  # before the games: a typo must not cost the hour they take
        for pairing in pairings:
            for spec in pairing:
                make_agent(spec)
        check_writable_file(args.out, "--out")
    except ValueError as e:  # unknown or unreadable agents (CheckpointError is one), an unwritable --out
        print(f"error: {e}", file=sys.stderr)
        return 2
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    suite = make_suite(pairings, args.games, args.seed, log,
                       name=lambda pairing: labelled(pairing, args.network, args.label))
    try:
        save_suite(suite, args.out)
    except SuiteError as e:  # too few games to find a decision, say
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {len(suite)} positions to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
