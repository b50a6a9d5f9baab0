"""``selfplay``: whole AlphaZero training iterations (self-play with search, replay insert,
SGD updates), the config's network and search at several batch sizes and simulation counts.

Before timing, enough iterations run to finish the first games, so the buffer holds data
and the timed iterations include their updates (``--updates 0``: self-play only). The
parameters are fresh, or ``--set warm_start=<source>``'s; ``passes``: the searches a move
ran (``search_passes``: more than 1 where afterstate lists overflowed).
"""

from __future__ import annotations

import argparse
import sys

import jax

from bench import common
from beastybar_jax.games import get_game
from beastybar_jax.training.trainer import make_trainer

DEFAULT_CONFIG = "configs/h100.yaml"


def selfplay_config(base_config, batch_size: int, num_simulations: int, num_moves: int, num_updates: int):
    """``base_config`` at a benchmark's sizes: ``batch_size`` games, ``num_moves`` moves and
    ``num_updates`` SGD steps per iteration, ``num_simulations`` simulations a move."""
    max_game_length = get_game(base_config.game).max_game_length
    az = base_config.alphazero
    return base_config.replace(num_games=batch_size, alphazero=az.replace(
        moves_per_iteration=num_moves,
        updates_per_iteration=num_updates,
        buffer_size=max(az.batch_size, batch_size * max_game_length * 2),
        min_buffer_size=1,  # learn from the first finished games, so timed iterations include the updates
    ), search=base_config.search.replace(num_simulations=num_simulations))


def bench_selfplay(base_config, batch_size: int, num_simulations: int, num_moves: int, num_updates: int,
                   repeats: int) -> dict:
    """Compile and time one training iteration (self-play of ``num_moves`` moves in
    ``batch_size`` games with ``num_simulations`` simulations per move, replay insert
    and ``num_updates`` SGD steps) with ``base_config``'s network and search."""
    max_game_length = get_game(base_config.game).max_game_length
    config = selfplay_config(base_config, batch_size, num_simulations, num_moves, num_updates)
    trainer = make_trainer(config)
    state = common.initial_state(trainer, config)
    compiled, compile_s = common.compile_seconds(trainer.iteration, state, jax.random.key(1))

    warmup = -(-max_game_length // num_moves) + 1
    for i in range(warmup):
        state, metrics = compiled(state, jax.random.key(100 + i))
    jax.block_until_ready(metrics)

    def run(r):
        nonlocal state
        state, metrics = compiled(state, jax.random.key(1000 + r))
        return metrics

    best, _, metrics = common.best_of(repeats, run)
    games, trained = float(metrics["games_finished"]), float(metrics["trained"])
    moves = batch_size * num_moves
    search = config.search
    simulations = moves * num_simulations * search.num_determinizations
    return dict(
        batch_size=batch_size, num_simulations=num_simulations, num_moves=num_moves,
        num_updates=num_updates if trained else 0, minibatch=config.alphazero.batch_size,
        network=common.network_name(config), search=search.algorithm,
        num_determinizations=search.num_determinizations,
        iteration_seconds=best, simulations_per_second=simulations / best, moves_per_second=moves / best,
        games_per_minute=games / best * 60.0, compile_seconds=compile_s,
        search_passes=float(metrics["search_passes"]),
    )


def run(args: argparse.Namespace) -> int:
    base = common.load_base_config(args.config, args.overrides)
    if base.algorithm != "alphazero":  # it would time that algorithm's iteration as AlphaZero's
        print(f"config error: selfplay times AlphaZero iterations; {args.config} trains {base.algorithm} "
              f"(benchmark.py {base.algorithm} times those)", file=sys.stderr)
        return 2
    updates = base.alphazero.updates_per_iteration if args.updates < 0 else args.updates
    common.check_trainer_configs(
        [selfplay_config(base, batch, sims, args.moves, updates) for batch in args.batch_sizes
         for sims in args.simulations],
        lambda c: f"--batch-sizes {c.num_games} --simulations {c.search.num_simulations}")
    machine = common.machine_info()
    rows = []
    for batch in args.batch_sizes:
        for sims in args.simulations:
            common.check_signals()
            row = common.unless_out_of_memory(f"batch {batch} sims {sims}", lambda: bench_selfplay(
                base, batch, sims, args.moves, updates, args.repeats))
            if row is not None:
                rows.append(row)
                common.progress(f"games {batch} sims {sims}: {common.rate(row['simulations_per_second'])} sims/s, "
                                f"{row['games_per_minute']:.0f} games/min, iteration {row['iteration_seconds']:.3f} s "
                                f"({row['num_updates']} updates), compile {row['compile_seconds']:.1f} s")
    common.print_table(machine, [
        ("games", lambda r: r["batch_size"]),
        ("sims", lambda r: r["num_simulations"]),
        ("moves", lambda r: r["num_moves"]),
        ("updates", lambda r: r["num_updates"]),
        ("sims/s", lambda r: common.rate(r["simulations_per_second"])),
        ("games/min", lambda r: f"{r['games_per_minute']:.0f}"),
        ("iteration s", lambda r: f"{r['iteration_seconds']:.3f}"),
        ("passes", lambda r: f"{r['search_passes']:.2f}"),
        ("compile s", lambda r: f"{r['compile_seconds']:.1f}"),
    ], rows)
    return common.write_report(args.out, "selfplay", machine, args, rows, base_config=base.to_dict())


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "selfplay", help="training iterations: self-play with search + replay insert + updates; sims/s, games/min",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_config_arguments(p, DEFAULT_CONFIG, "--set network.dtype=float32")
    p.add_argument("--batch-sizes", type=common.list_of(), default=[2048, 4096],
                   help="games played side by side, e.g. 64,256 or 2^11,2^12 (default 2048,4096)")
    p.add_argument("--simulations", type=common.list_of(), default=[16, 64],
                   help="simulations per move (default 16,64)")
    p.add_argument("--moves", type=common.int_at_least(1), default=24, help="moves per iteration (default 24)")
    p.add_argument("--updates", type=common.int_at_least(-1), default=-1,
                   help="SGD steps per iteration (default: the config's updates_per_iteration; 0: self-play only)")
    common.add_common_arguments(p, out="bench_results/selfplay.json", repeats_help="timed iterations", seed=False)
    p.set_defaults(func=run)
