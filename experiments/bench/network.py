"""``network``: one evaluation as the search makes it (``NetworkEvaluator``: each state
observed for its player to move, then the network with its weights cast once), for B games
in lockstep at a turn of random play, as self-play's searches see them. With the afterstate
scorer, at each of its tiers (the game's list capacities for groups of 128 states, then the
slots): ``fits`` says whether that tier's lists held every row (where not, the search would
score the batch again at a later tier). ``--torso auto,xla`` compares the MLP torso's two forms
on a GPU (``network.torso_kernel``): one Pallas kernel (``auto``) or XLA's operations (``xla``).
"""

from __future__ import annotations

import argparse
import dataclasses

import jax

from bench import common
from bench.search import search_positions
from beastybar_jax.afterstate_scorer import AfterstateScorer
from beastybar_jax.games import Game, get_game
from beastybar_jax.network import init_params, make_network
from beastybar_jax.search import network_evaluator
from beastybar_jax.seeds import seed_key

DEFAULT_CONFIG = "configs/h100.yaml"
TORSOS = ("auto", "xla")


def tier_names(base_config, game: Game, batch_size: int) -> list[str]:
    """What each tier scores in: ``"lists C/R per G"`` (move / reply rows for each group of
    ``G`` states), then ``"slots"``."""
    afterstates = base_config.network.afterstates
    plan = None if afterstates is None else AfterstateScorer.plan(afterstates, game.afterstates, batch_size,
                                                                  game.observation_size)
    if plan is None:
        return ["slots" if afterstates is not None else "none"]
    group, capacity, tiers = plan
    return [f"lists {capacity}/{replies} per {group}" if replies else f"lists {capacity} per {group}"
            for replies, _ in tiers] + ["slots"]


def bench_network(base_config, batch_size: int, turn: int, tier: int, torso: str, repeats: int,
                  seed: int = 0) -> dict:
    """Compile and time one evaluation of ``batch_size`` states at ``turn`` with
    ``base_config``'s network (fresh parameters) at afterstate ``tier``; a result row."""
    game = get_game(base_config.game)
    network = make_network(base_config.network, game)
    key = seed_key(seed)
    params = init_params(network, key, game.observation_size)
    evaluator = network_evaluator(game, network, params, torso_kernel=torso)
    names = tier_names(base_config, game, batch_size)
    if len(names) > 1:
        evaluator = evaluator.at_tier(tier)
    states = search_positions(game, batch_size, jax.random.fold_in(key, turn), turn=turn)

    def evaluate(params, states):
        return dataclasses.replace(evaluator, params=params)(states)

    compiled, compile_s = common.compile_seconds(jax.jit(evaluate), evaluator.params, states)
    outputs = jax.block_until_ready(compiled(evaluator.params, states))  # warm-up
    best, _, _ = common.best_of(repeats, lambda r: compiled(evaluator.params, states))
    least = int(outputs[2]) if len(outputs) > 2 else 0
    return dict(batch_size=batch_size, turn=turn, tier=tier, tier_name=names[tier], fits=least <= tier,
                least_tier=least, torso=torso, network=common.network_name(base_config), seconds=best,
                states_per_second=batch_size / best, compile_seconds=compile_s)


def run(args: argparse.Namespace) -> int:
    base = common.load_base_config(args.config, args.overrides)
    game = get_game(base.game)
    machine = common.machine_info()
    if max(args.turns) >= game.max_game_length:
        common.usage_error(f"--turns {max(args.turns)}: a game of {game.name} lasts at most "
                           f"{game.max_game_length} moves")
    tiers = {}
    for batch in args.batch_sizes:  # every argument checked before anything compiles
        num_tiers = len(tier_names(base, game, batch))
        tiers[batch] = args.tiers if args.tiers is not None else list(range(num_tiers))
        if max(tiers[batch]) >= num_tiers:
            common.usage_error(f"--tiers {max(tiers[batch])}: {batch} states have tiers 0 to {num_tiers - 1}")
    rows = []
    for batch in args.batch_sizes:
        for turn in args.turns:
            for tier in tiers[batch]:
                for torso in args.torso or [base.network.torso_kernel]:
                    common.check_signals()
                    label = f"batch {batch} turn {turn} tier {tier} torso {torso}"
                    row = common.unless_out_of_memory(label, lambda: bench_network(
                        base, batch, turn, tier, torso, args.repeats, args.seed))
                    if row is not None:
                        rows.append(row)
                        common.progress(f"{label} ({row['tier_name']}): {row['seconds'] * 1e3:.3f} ms, "
                                        f"fits {row['fits']}, compile {row['compile_seconds']:.1f} s")
    common.print_table(machine, [
        ("games", lambda r: r["batch_size"]),
        ("turn", lambda r: r["turn"]),
        ("tier", lambda r: f"{r['tier']} ({r['tier_name']})"),
        ("fits", lambda r: "yes" if r["fits"] else "no"),
        ("torso", lambda r: r["torso"]),
        ("ms", lambda r: f"{r['seconds'] * 1e3:.3f}"),
        ("states/s", lambda r: common.rate(r["states_per_second"])),
        ("compile s", lambda r: f"{r['compile_seconds']:.1f}"),
    ], rows)
    return common.write_report(args.out, "network", machine, args, rows, base_config=base.to_dict())


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "network", help="one evaluation as the search makes it, at each afterstate tier: ms per batch",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_config_arguments(p, DEFAULT_CONFIG, "--set network.afterstates.replies=false")
    p.add_argument("--batch-sizes", type=common.list_of(), default=[4096],
                   help="states evaluated together, e.g. 4096,16384 (default 4096)")
    p.add_argument("--turns", type=common.list_of(minimum=0), default=[4, 12, 16],
                   help="random moves played before the evaluation (default 4,12,16)")
    p.add_argument("--tiers", type=common.list_of(minimum=0), default=None,
                   help="the afterstate tiers to time (default: every one)")
    p.add_argument("--torso", type=common.list_of(choices=TORSOS), default=None,
                   help="the MLP torso: auto (one Pallas kernel where traced for a GPU in bfloat16) or xla, "
                        "or both: auto,xla (default: the config's network.torso_kernel)")
    common.add_common_arguments(p, out="bench_results/network.json", repeats_help="timed evaluations")
    p.set_defaults(func=run)
