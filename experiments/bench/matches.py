"""``matches``: duplicate matches (``arena.play_games``) between registry agents: games and
moves per second, each agent acting on the whole batch of games (``agents.batch_act``:
a network's ``act_batch`` calls it once, a search's runs one batched search) and, with
``--per-state``, one state at a time under ``jax.vmap(agent.act)`` for comparison."""

from __future__ import annotations

import argparse
import dataclasses
import sys

import jax

from bench import common
from beastybar_jax import arena
from beastybar_jax.agents import AgentSpecError, make_agent
from beastybar_jax.checkpoint import CheckpointError
from beastybar_jax.games import get_game
from beastybar_jax.seeds import SEED_LIMIT, seed_key


def bench_match(agent, opponent, game, deals: int, repeats: int, seed: int) -> dict:
    """Compile and time one duplicate match of ``2 * deals`` games; returns a result row."""
    deal_keys = jax.random.split(seed_key(seed), deals)
    play_key = seed_key((seed + 1) % SEED_LIMIT)  # --seed may be the largest seed
    jitted = jax.jit(lambda d, k: arena.play_games(agent, opponent, d, k, game=game))
    compiled, compile_s = common.compile_seconds(jitted, deal_keys, play_key)
    jax.block_until_ready(compiled(deal_keys, play_key))  # warm-up run
    keys = common.repeat_keys(play_key, repeats, offset=0)
    best, _, outcomes = common.best_of(repeats, lambda r: compiled(deal_keys, keys[r]))
    games = 2 * deals
    moves = games * game.max_game_length  # the match steps every game to the longest game's end
    return dict(games=games, seconds=best, games_per_second=games / best, moves_per_second=moves / best,
                win_rate=float((outcomes.reward > 0).mean()), compile_seconds=compile_s)


def run(args: argparse.Namespace) -> int:
    machine = common.machine_info()
    game = get_game("beastybar")
    try:  # every spec checked (and every network loaded) before anything compiles
        opponent = make_agent(args.opponent, game=game)
        agents = [(spec, make_agent(spec, game=game)) for spec in args.agents]
    except (AgentSpecError, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = []
    for spec, agent in agents:
        common.check_signals()
        ways = [("batch", agent)] + ([("per state", dataclasses.replace(agent, act_batch=None))]
                                     if args.per_state and agent.act_batch is not None else [])
        for way, player in ways:
            row = common.unless_out_of_memory(f"{spec} ({way})", lambda: bench_match(
                player, opponent, game, args.deals, args.repeats, args.seed))
            if row is not None:
                rows.append(dict(row, agent=spec, opponent=args.opponent, acting=way))
                common.progress(f"{spec} ({way}) vs {args.opponent}, {row['games']} games: "
                                f"{row['games_per_second']:.0f} games/s ({row['seconds']:.2f} s), "
                                f"compile {row['compile_seconds']:.1f} s")
    common.print_table(machine, [
        ("agent", lambda r: r["agent"]),
        ("acting", lambda r: r["acting"]),
        ("opponent", lambda r: r["opponent"]),
        ("games", lambda r: r["games"]),
        ("games/s", lambda r: f"{r['games_per_second']:.0f}"),
        ("moves/s", lambda r: common.rate(r["moves_per_second"])),
        ("seconds", lambda r: f"{r['seconds']:.2f}"),
        ("compile s", lambda r: f"{r['compile_seconds']:.1f}"),
    ], rows)
    return common.write_report(args.out, "matches", machine, args, rows)


def _specs(text: str) -> list[str]:
    specs = [t.strip() for t in text.split(",") if t.strip()]
    if not specs:
        raise argparse.ArgumentTypeError(f"expected comma-separated agent specs, got {text!r}")
    return specs


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("matches", help="duplicate matches between agents: games per second",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", type=_specs, default=["champion", "champion@sims=32"],
                   help="agent specs, comma-separated (default champion,champion@sims=32)")
    p.add_argument("--opponent", default="heuristic", help="their opponent's spec (default %(default)s)")
    p.add_argument("--deals", type=common.int_at_least(1), default=250,
                   help="deals, each played twice with seats swapped (default %(default)s)")
    p.add_argument("--per-state", action="store_true",
                   help="also time each agent acting one state at a time (jax.vmap(agent.act))")
    common.add_common_arguments(p, out="bench_results/matches.json")
    p.set_defaults(func=run)
