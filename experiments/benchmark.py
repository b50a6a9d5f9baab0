"""Speed benchmarks.

Usage::

    python experiments/benchmark.py env [--batch-sizes 1,64,4096,65536] [--steps 256]
                                        [--repeats 3] [--sampler uniform|categorical]
                                        [--out bench_results/env.json]

``env``: random legal play of whole games with automatic reset, all games of a
batch stepped together by one jitted ``lax.scan`` over ``--steps`` steps of a
``vmap`` over games. Two variants are timed:

- ``step``: sample a legal action with ``legal_action_mask`` (``--sampler
  uniform``: one random number per game picks the k-th legal action;
  ``--sampler categorical``: ``jax.random.categorical`` on masked logits, which
  draws 31 Gumbel numbers per game and on CPU costs more than the engine), ``step``,
  reset finished games with a fresh ``init``. The legal mask is needed to play
  legal moves, so it is part of this loop too.
- ``step+mask+obs``: the same, plus ``observe`` of the new state for its player to
  move. The observation is summed into the carry so XLA cannot drop it.

Every slot of the batch advances one live game per step (a finished game is
replaced by a new one in the same step), so ``steps/s = batch * steps / seconds``
counts only moves actually played. Compile time (first call, which also runs
once) is reported separately; the timed figure is the best of ``--repeats`` runs
of the compiled function, each ended with ``block_until_ready``. A table is
printed and the results are written as JSON.

New subcommands (e.g. ``selfplay``) register a parser in ``SUBCOMMANDS``.

Bad arguments (``--steps -5``, ``--repeats 0``, a missing ``--config``, an unknown
``--set`` key) end in one line and exit code 2, before anything is compiled; the JSON
output is only written when something was measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import sys
import time
from typing import Callable

import jax
import jax.numpy as jnp

from beastybar_jax.game import BEASTYBAR
from beastybar_jax.games import Game
from beastybar_jax.training.metrics import format_rate

VARIANTS = ("step", "step+mask+obs")
DEFAULT_BATCH_SIZES = tuple(4**k for k in range(11))  # 1 .. 2^20


# --------------------------------------------------------------------------- env


def sample_uniform_legal(key: jax.Array, mask: jax.Array) -> jax.Array:
    """``int32[B]`` one uniformly random legal action per row of ``mask`` ``bool[B, A]``,
    from one random number per game: the k-th legal action, k uniform below the
    number of legal actions. (Rows without a legal action give an arbitrary id.)"""
    num_legal = jnp.sum(mask, axis=-1)  # [B]
    u = jax.random.uniform(key, num_legal.shape)
    k = jnp.minimum((u * num_legal).astype(jnp.int32), jnp.maximum(num_legal - 1, 0))
    # Legal actions with id <= a, [B, A]; a matmul with a triangular matrix
    # compiles much faster on CPU than cumsum's reduce-window and runs as fast.
    num_actions = mask.shape[-1]
    upper = jnp.triu(jnp.ones((num_actions, num_actions), jnp.float32))
    legal_so_far = mask.astype(jnp.float32) @ upper
    return jnp.sum(legal_so_far <= k[:, None].astype(jnp.float32), axis=-1).astype(jnp.int32)


def sample_categorical_legal(key: jax.Array, mask: jax.Array) -> jax.Array:
    """``int32[B]`` ``jax.random.categorical`` on logits masked to the legal actions."""
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf), axis=-1).astype(jnp.int32)


SAMPLERS = {"uniform": sample_uniform_legal, "categorical": sample_categorical_legal}


RESET_CHUNK = 16  # steps per batch of fresh deals; below the shortest game (21 turns)


def make_env_loop(game: Game, batch_size: int, num_steps: int, with_observation: bool,
                  sampler: str = "uniform") -> Callable:
    """A jitted ``run(states, key) -> (states, checksum)`` playing ``num_steps``
    random legal moves in each of ``batch_size`` games (states ``[B]``), resetting
    finished games. ``checksum`` (float32) depends on every observation when
    ``with_observation``, on the chosen actions otherwise. ``sampler`` picks how a
    legal action is drawn (see ``SAMPLERS``).

    Auto-reset deals ``B`` fresh games with ``game.init`` once per ``RESET_CHUNK``
    steps, and a game that ends takes its slot's fresh deal: a game lasts at least
    21 turns, so a slot ends at most once per chunk. (Calling ``init`` for every
    slot at every step, branch-free, cost as much as the step itself.)
    ``num_steps`` must be a multiple of ``min(num_steps, RESET_CHUNK)``."""
    sample_legal = SAMPLERS[sampler]
    step = jax.vmap(game.step)
    init = jax.vmap(game.init)
    legal_action_mask = jax.vmap(game.legal_action_mask)
    observe = jax.vmap(game.observe)
    chunk = min(num_steps, RESET_CHUNK)
    if num_steps % chunk:
        raise ValueError(f"num_steps ({num_steps}) must be a multiple of {chunk}")

    def one_step(carry, key):
        states, fresh, checksum = carry
        mask = legal_action_mask(states)  # [B, A]
        actions = sample_legal(key, mask)  # [B]
        states = step(states, actions)
        states = jax.tree.map(
            lambda new, old: jnp.where(
                states.terminated.reshape((-1,) + (1,) * (old.ndim - 1)), new, old
            ),
            fresh,
            states,
        )
        if with_observation:
            observations = observe(states, states.current_player)  # [B, O]
            checksum = checksum + jnp.sum(observations)
        else:
            checksum = checksum + jnp.sum(actions).astype(jnp.float32)
        return (states, fresh, checksum), None

    def one_chunk(carry, key):
        states, checksum = carry
        reset_key, steps_key = jax.random.split(key)
        fresh = init(jax.random.split(reset_key, batch_size))
        (states, _, checksum), _ = jax.lax.scan(
            one_step, (states, fresh, checksum), jax.random.split(steps_key, chunk))
        return (states, checksum), None

    @jax.jit
    def run(states, key):
        (states, checksum), _ = jax.lax.scan(
            one_chunk, (states, jnp.zeros((), jnp.float32)), jax.random.split(key, num_steps // chunk)
        )
        return states, checksum

    return run


def bench_env(
    batch_size: int, num_steps: int, repeats: int, with_observation: bool, seed: int = 0,
    sampler: str = "uniform", game: Game = BEASTYBAR,
) -> dict:
    """Compile and time one configuration; returns a result row."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    key = jax.random.key(seed)
    init_key, key = jax.random.split(key)
    states = jax.block_until_ready(jax.jit(jax.vmap(game.init))(jax.random.split(init_key, batch_size)))
    run = make_env_loop(game, batch_size, num_steps, with_observation, sampler)

    start = time.perf_counter()
    compiled = run.lower(states, key).compile()
    compile_s = time.perf_counter() - start

    states, checksum = jax.block_until_ready(compiled(states, key))  # warm-up run
    best = float("inf")
    for r in range(repeats):
        run_key = jax.random.fold_in(key, r + 1)
        start = time.perf_counter()
        states, checksum = jax.block_until_ready(compiled(states, run_key))
        best = min(best, time.perf_counter() - start)
    steps = batch_size * num_steps
    return dict(
        variant="step+mask+obs" if with_observation else "step",
        sampler=sampler,
        batch_size=batch_size,
        num_steps=num_steps,
        steps=steps,
        seconds=best,
        steps_per_second=steps / best,
        compile_seconds=compile_s,
        checksum=float(checksum),
    )


def machine_info() -> dict:
    device = jax.devices()[0]
    return dict(
        backend=jax.default_backend(),
        device=getattr(device, "device_kind", str(device)),
        num_devices=jax.device_count(),
        cpu=_cpu_name(),
        cpu_count=os.cpu_count(),
        platform=platform.platform(),
        python=platform.python_version(),
        jax=jax.__version__,
        date=datetime.date.today().isoformat(),
    )


def print_machine(machine: dict) -> None:
    """The line naming the machine above every results table."""
    print(f"backend: {machine['backend']} ({machine['device']}, {machine['num_devices']} device(s)); "
          f"cpu: {machine['cpu']} x{machine['cpu_count']}; jax {machine['jax']}")


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def unless_out_of_memory(label: str, measure: Callable[[], dict]) -> dict | None:
    """``measure()``, or None (with a note) when the device runs out of memory, so the
    largest batch sizes of a sweep can fail without losing the rest."""
    try:
        return measure()
    except Exception as e:
        if "RESOURCE_EXHAUSTED" not in str(e) and "Out of memory" not in str(e):
            raise
        print(f"{label}: out of memory, skipped", file=sys.stderr)
        return None


def _fmt_rate(x: float) -> str:
    return format_rate(x, unit_separator=" ")


def print_table(machine: dict, rows: list[dict]) -> None:
    print_machine(machine)
    by_batch: dict[int, dict] = {}
    for row in rows:
        by_batch.setdefault(row["batch_size"], {})[row["variant"]] = row
    header = f"{'batch':>9} | {'step steps/s':>13} | {'+mask+obs steps/s':>17} | {'compile s (step / full)':>23}"
    print(header)
    print("-" * len(header))
    for batch, variants in sorted(by_batch.items()):
        s, f = variants.get("step"), variants.get("step+mask+obs")
        rate = lambda r: _fmt_rate(r["steps_per_second"]) if r else "-"
        comp = lambda r: f"{r['compile_seconds']:.1f}" if r else "-"
        print(f"{batch:>9} | {rate(s):>13} | {rate(f):>17} | {comp(s) + ' / ' + comp(f):>23}")


def _parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(eval_size(t)) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--batch-sizes expects comma-separated integers or powers like 2^12, got {text!r}"
        ) from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"--batch-sizes must be positive, got {text!r}")
    return sizes


def eval_size(token: str) -> int:
    token = token.strip()
    if "^" in token:
        base, exp = token.split("^")
        return int(base) ** int(exp)
    return int(token)


def run_env(args: argparse.Namespace) -> int:
    machine = machine_info()
    variants = VARIANTS if args.variant == "both" else (args.variant,)
    rows = []
    for batch in args.batch_sizes:
        steps = args.steps if args.steps else max(16, min(512, (1 << 22) // batch))
        steps -= steps % min(steps, RESET_CHUNK)
        for variant in variants:
            row = unless_out_of_memory(f"batch {batch} {variant}", lambda: bench_env(
                batch, steps, args.repeats, variant == "step+mask+obs", seed=args.seed, sampler=args.sampler))
            if row is None:
                continue
            rows.append(row)
            print(f"  batch {batch:>8} {variant:<14} {_fmt_rate(row['steps_per_second']):>9} steps/s "
                  f"({row['steps']} steps in {row['seconds']:.3f} s, compile {row['compile_seconds']:.1f} s)",
                  flush=True)
    if not rows:
        return nothing_measured(args.out)
    print_table(machine, rows)
    write_results(args.out, dict(benchmark="env", machine=machine, config=vars_for_json(args), results=rows))
    return 0


def nothing_measured(out: str) -> int:
    print(f"error: nothing was measured (every size ran out of memory); {out} left as it was", file=sys.stderr)
    return 1


def write_results(out: str, report: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {out}")


def vars_for_json(args: argparse.Namespace) -> dict:
    return {k: v for k, v in vars(args).items() if k != "func"}


def add_env_parser(subparsers) -> None:
    p = subparsers.add_parser("env", help="random legal play with auto-reset: step / step+mask+obs steps per second")
    p.add_argument("--batch-sizes", type=_parse_sizes, default=list(DEFAULT_BATCH_SIZES),
                   help="comma-separated batch sizes, e.g. 1,64,4096 or 2^12,2^16 (default 4^0..4^10 = 1..2^20)")
    p.add_argument("--steps", type=int_at_least(0), default=0,
                   help="steps per timed run (default: 2^22 / batch, clipped to 16..512, a multiple of 16)")
    p.add_argument("--repeats", type=int_at_least(1), default=3, help="timed runs per configuration; the best is kept")
    p.add_argument("--variant", choices=("both",) + VARIANTS, default="both")
    p.add_argument("--sampler", choices=tuple(SAMPLERS), default="uniform",
                   help="how random legal moves are drawn: one uniform number per game (default) or "
                        "jax.random.categorical on masked logits (31 Gumbel draws per game, slower on CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bench_results/env.json", help="JSON output path")
    p.set_defaults(func=run_env)


# --------------------------------------------------------------------------- selfplay

SELFPLAY_DEFAULT_CONFIG = "configs/h100.yaml"


def bench_selfplay(base_config, batch_size: int, num_simulations: int, num_moves: int, num_updates: int,
                   repeats: int) -> dict:
    """Compile and time one training iteration (self-play of ``num_moves`` moves in
    ``batch_size`` games with ``num_simulations`` simulations per move, replay insert
    and ``num_updates`` SGD steps) with ``base_config``'s network and search."""
    from beastybar_jax.games import get_game
    from beastybar_jax.training import make_trainer

    max_game_length = get_game(base_config.game).max_game_length
    az = base_config.alphazero
    config = base_config.replace(num_games=batch_size, alphazero=dataclasses.replace(
        az,
        moves_per_iteration=num_moves,
        updates_per_iteration=num_updates,
        buffer_size=max(az.batch_size, batch_size * max_game_length * 2),
        min_buffer_size=1,  # learn from the first finished games, so timed iterations include the updates
        search=dataclasses.replace(az.search, num_simulations=num_simulations),
    ))
    trainer = make_trainer(config)
    state = jax.block_until_ready(trainer.init(jax.random.key(0)))
    start = time.perf_counter()
    compiled = trainer.iteration.lower(state, jax.random.key(1)).compile()
    compile_s = time.perf_counter() - start

    # Warm-up iterations: finish the first games so the buffer holds data and the
    # timed iterations include their updates.
    warmup = -(-max_game_length // num_moves) + 1
    for i in range(warmup):
        state, metrics = compiled(state, jax.random.key(100 + i))
    jax.block_until_ready(metrics)
    best, games, trained = float("inf"), 0.0, 0.0
    for r in range(repeats):
        start = time.perf_counter()
        state, metrics = compiled(state, jax.random.key(1000 + r))
        metrics = jax.block_until_ready(metrics)
        seconds = time.perf_counter() - start
        if seconds < best:
            best, games, trained = seconds, float(metrics["games_finished"]), float(metrics["trained"])
    moves = batch_size * num_moves
    search = config.alphazero.search
    simulations = moves * num_simulations * search.num_determinizations
    return dict(
        batch_size=batch_size, num_simulations=num_simulations, num_moves=num_moves,
        num_updates=num_updates if trained else 0, minibatch=config.alphazero.batch_size,
        network=f"{config.network.torso} {config.network.width}x{config.network.depth} {config.network.dtype}",
        search=search.algorithm, num_determinizations=search.num_determinizations,
        iteration_seconds=best, simulations_per_second=simulations / best, moves_per_second=moves / best,
        games_per_minute=games / best * 60.0, compile_seconds=compile_s,
    )


def print_selfplay_table(machine: dict, rows: list[dict]) -> None:
    print_machine(machine)
    header = (f"{'games':>7} | {'sims':>5} | {'moves':>5} | {'updates':>7} | {'sims/s':>9} | {'games/min':>9} | "
              f"{'iteration s':>11} | {'compile s':>9}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['batch_size']:>7} | {r['num_simulations']:>5} | {r['num_moves']:>5} | {r['num_updates']:>7} | "
              f"{_fmt_rate(r['simulations_per_second']):>9} | {r['games_per_minute']:>9.0f} | "
              f"{r['iteration_seconds']:>11.3f} | {r['compile_seconds']:>9.1f}")


def run_selfplay(args: argparse.Namespace) -> int:
    from beastybar_jax.config import ConfigError, load_config

    try:
        base = load_config(args.config, args.overrides)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    machine = machine_info()
    rows = []
    for batch in args.batch_sizes:
        for sims in args.simulations:
            updates = base.alphazero.updates_per_iteration if args.updates < 0 else args.updates
            row = unless_out_of_memory(f"batch {batch} sims {sims}", lambda: bench_selfplay(
                base, batch, sims, args.moves, updates, args.repeats))
            if row is None:
                continue
            rows.append(row)
            print(f"  games {batch:>6} sims {sims:>4}: {_fmt_rate(row['simulations_per_second']):>9} sims/s, "
                  f"{row['games_per_minute']:.0f} games/min, iteration {row['iteration_seconds']:.3f} s "
                  f"({row['num_updates']} updates), compile {row['compile_seconds']:.1f} s", flush=True)
    if not rows:
        return nothing_measured(args.out)
    print_selfplay_table(machine, rows)
    write_results(args.out, dict(benchmark="selfplay", machine=machine, config=vars_for_json(args),
                                 base_config=base.to_dict(), results=rows))
    return 0


def int_at_least(minimum: int):
    """An argparse type: an integer >= ``minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def _parse_ints(text: str) -> list[int]:
    try:
        values = [int(eval_size(t)) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def add_selfplay_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "selfplay", help="training iterations: self-play with search + replay insert + updates; sims/s, games/min")
    p.add_argument("--config", default=SELFPLAY_DEFAULT_CONFIG,
                   help=f"training config giving the network, search and minibatch (default {SELFPLAY_DEFAULT_CONFIG})")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set network.dtype=float32")
    p.add_argument("--batch-sizes", type=_parse_sizes, default=[2048, 4096],
                   help="games played side by side, e.g. 64,256 or 2^11,2^12 (default 2048,4096)")
    p.add_argument("--simulations", type=_parse_ints, default=[64], help="simulations per move, e.g. 16,64")
    p.add_argument("--moves", type=int_at_least(1), default=24, help="moves per iteration (default 24)")
    p.add_argument("--updates", type=int_at_least(-1), default=-1,
                   help="SGD steps per iteration (default: the config's updates_per_iteration; 0: self-play only)")
    p.add_argument("--repeats", type=int_at_least(1), default=3,
                   help="timed iterations per configuration; the best is kept")
    p.add_argument("--out", default="bench_results/selfplay.json", help="JSON output path")
    p.set_defaults(func=run_selfplay)


# --------------------------------------------------------------------------- endgames

ENDGAME_SOURCES = {
    "endgames": "every position of random games with both decks empty (1-8 cards in hand)",
    "start": "positions where both decks just ran out (8 cards in hand, 8 plies to go: the largest)",
    "solvable": "every solvable position of random games (also the one before the last draw, 9 cards)",
    "suite": "the endgame yardstick suite (beastybar_jax/endgame/endgame_suite.npz), repeated",
}


def endgame_positions(source: str, count: int, seed: int = 0):
    """``count`` solvable positions (host ``State`` ``[count]``) from ``ENDGAME_SOURCES``."""
    import numpy as np

    from beastybar_jax.agents import make_agent
    from beastybar_jax.endgame import positions
    from beastybar_jax.endgame.suite import load_suite

    if source == "suite":
        suite = load_suite()
        return jax.tree.map(lambda x: np.resize(x, (count,) + x.shape[1:]), suite.states)
    random = make_agent("random")
    chunks, have, index = [], 0, 0
    while have < count:
        states = positions.endgames_from_games(random, random, 4096, jax.random.key(seed * 1000 + index))
        left = np.asarray(states.hand.sum((1, 2)) + (states.deck >= 0).sum((1, 2)))
        keep = {"endgames": left <= 8, "start": left == 8, "solvable": left >= 0}[source]
        chunks.append(jax.tree.map(lambda x: x[keep], states))
        have += int(keep.sum())
        index += 1
    # Whole games' positions come out turn by turn: shuffle before cutting to ``count``.
    order = np.random.default_rng(seed).permutation(have)[:count]
    return jax.tree.map(lambda *x: np.concatenate(x)[order], *chunks)


def bench_endgames(states, mode: str, num_lanes: int, repeats: int) -> dict:
    """Compile and time ``endgame.solver.search`` on a batch; returns a result row."""
    from beastybar_jax.endgame import solver

    config = solver.SolverConfig(mode=mode, num_lanes=num_lanes)
    states = jax.device_put(states)
    start = time.perf_counter()
    compiled = jax.jit(lambda s: solver.search(s, config)).lower(states).compile()
    compile_s = time.perf_counter() - start
    solution, iterations = jax.block_until_ready(compiled(states))  # warm-up run
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        solution, iterations = jax.block_until_ready(compiled(states))
        best = min(best, time.perf_counter() - start)
    count = int(states.turn.shape[0])
    solved = int(solution.solved.sum())
    if solved != count:
        raise RuntimeError(f"only {solved} of {count} positions were solved")
    return dict(mode=mode, positions=count, num_lanes=solver.lanes_for(config, count), seconds=best, positions_per_second=count / best,
                nodes_per_position=float(solution.nodes.mean()), iterations=int(iterations),
                compile_seconds=compile_s)


def run_endgames(args: argparse.Namespace) -> int:
    machine = machine_info()
    states = endgame_positions(args.source, args.positions, args.seed)
    rows = []
    for mode in args.modes:
        for lanes in args.lanes:
            row = unless_out_of_memory(f"mode {mode} lanes {lanes}", lambda: bench_endgames(
                states, mode, lanes, args.repeats))
            if row is None:
                continue
            rows.append(dict(row, source=args.source))
            print(f"  {args.positions} {args.source} positions, mode {mode:<7} lanes {row['num_lanes']:>5}: "
                  f"{_fmt_rate(row['positions_per_second']):>9} positions/s ({row['seconds']:.2f} s; "
                  f"{row['nodes_per_position']:.0f} nodes/position, {row['iterations']} iterations), "
                  f"compile {row['compile_seconds']:.1f} s", flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(dict(benchmark="endgames", machine=machine, config=vars_for_json(args), results=rows), f, indent=2)
    print(f"wrote {args.out}")
    return 0


# --------------------------------------------------------------------------- ppo

PPO_DEFAULT_CONFIG = "configs/ppo_h100.yaml"


def bench_ppo(base_config, batch_size: int, repeats: int) -> dict:
    """Compile and time whole PPO training iterations (``beastybar_jax.training.make_trainer``
    with ``algorithm: ppo``): the rollout of ``batch_size`` games x ``rollout_length``
    moves against the config's opponents, advantages, and ``num_epochs`` x
    ``num_minibatches`` optimizer steps. ``steps_per_second`` counts every game move
    (learner's and opponents'), ``learner_moves_per_second`` the learner's decisions."""
    from beastybar_jax.training import make_trainer

    config = base_config.replace(num_games=batch_size)
    ppo = config.ppo
    trainer = make_trainer(config)
    state = jax.block_until_ready(trainer.init(jax.random.key(0)))
    start = time.perf_counter()
    compiled = trainer.iteration.lower(state, jax.random.key(1)).compile()
    compile_s = time.perf_counter() - start

    state, metrics = compiled(state, jax.random.key(100))  # warm-up
    jax.block_until_ready(metrics)
    best, learner_moves = float("inf"), 0.0
    for r in range(repeats):
        start = time.perf_counter()
        state, metrics = compiled(state, jax.random.key(1000 + r))
        metrics = jax.block_until_ready(metrics)
        seconds = time.perf_counter() - start
        if seconds < best:
            best, learner_moves = seconds, float(metrics["learner_moves"])
    moves = batch_size * ppo.rollout_length
    return dict(
        batch_size=batch_size, rollout_length=ppo.rollout_length, moves=moves, num_epochs=ppo.num_epochs,
        num_minibatches=ppo.num_minibatches, minibatch=moves // ppo.num_minibatches,
        opponents=dict(ppo.opponent_slots(batch_size)),
        network=f"{config.network.torso} {config.network.width}x{config.network.depth} {config.network.dtype}",
        iteration_seconds=best, steps_per_second=moves / best, learner_moves_per_second=learner_moves / best,
        compile_seconds=compile_s,
    )


def run_ppo(args: argparse.Namespace) -> int:
    from beastybar_jax.config import load_config

    base = load_config(args.config, ["algorithm=ppo", *args.overrides])
    machine = machine_info()
    rows = []
    for batch in args.batch_sizes or [base.num_games]:
        row = unless_out_of_memory(f"batch {batch}", lambda: bench_ppo(base, batch, args.repeats))
        if row is None:
            continue
        rows.append(row)
        print(f"  games {batch:>7} x {row['rollout_length']} moves: {_fmt_rate(row['steps_per_second']):>9} steps/s "
              f"({_fmt_rate(row['learner_moves_per_second'])} learner moves/s), "
              f"iteration {row['iteration_seconds']:.3f} s "
              f"with {row['num_epochs']} x {row['num_minibatches']} updates of {row['minibatch']}, "
              f"compile {row['compile_seconds']:.1f} s", flush=True)
    print_machine(machine)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(dict(benchmark="ppo", machine=machine, config=vars_for_json(args), base_config=base.to_dict(),
                       results=rows), f, indent=2)
    print(f"wrote {args.out}")
    return 0


def _parse_modes(text: str) -> list[str]:
    from beastybar_jax.endgame.solver import MODES

    modes = [m.strip() for m in text.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        raise argparse.ArgumentTypeError(f"--modes takes a comma-separated list of {', '.join(MODES)}; got {text!r}")
    return modes


def _parse_lanes(text: str) -> list[int]:
    try:
        lanes = [int(eval_size(t)) for t in text.split(",") if t.strip()]
    except ValueError:
        lanes = []
    if not lanes or min(lanes) < 0:
        raise argparse.ArgumentTypeError(f"--lanes takes comma-separated counts (0: automatic); got {text!r}")
    return lanes


def add_endgames_parser(subparsers) -> None:
    p = subparsers.add_parser("endgames", help="the exact endgame solver: positions solved per second")
    p.add_argument("--positions", type=int_at_least(1), default=100_000,
                   help="positions per batch (default %(default)s)")
    p.add_argument("--source", choices=tuple(ENDGAME_SOURCES), default="endgames",
                   help="; ".join(f"{k}: {v}" for k, v in ENDGAME_SOURCES.items()))
    p.add_argument("--modes", type=_parse_modes, default=["results"],
                   help="solver modes, comma-separated: results (default), best, margins")
    p.add_argument("--lanes", type=_parse_lanes, default=[0], help="solver lanes, comma-separated (0: automatic)")
    p.add_argument("--repeats", type=int_at_least(1), default=3,
                   help="timed runs per configuration; the best is kept")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bench_results/endgames.json", help="JSON output path")
    p.set_defaults(func=run_endgames)


def add_ppo_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "ppo", help="whole PPO iterations (rollout + advantages + epochs of updates): environment steps/s")
    p.add_argument("--config", default=PPO_DEFAULT_CONFIG,
                   help=f"PPO training config (default {PPO_DEFAULT_CONFIG})")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set ppo.opponents=[self] --set ppo.opponent_weights=[1]")
    p.add_argument("--batch-sizes", type=_parse_sizes, default=None,
                   help="games played side by side, e.g. 4096,16384 (default: the config's num_games)")
    p.add_argument("--repeats", type=int, default=3, help="timed iterations per batch size; the best is kept")
    p.add_argument("--out", default="bench_results/ppo.json", help="JSON output path")
    p.set_defaults(func=run_ppo)


# --------------------------------------------------------------------------- search

SEARCH_DEFAULT_SIMULATIONS = (8, 16, 32, 64, 128, 256)
MCTX_MODES = ("patched", "stock", "both")


def search_positions(game: Game, batch_size: int, key: jax.Array):
    """``batch_size`` positions to search: each game plays a uniformly random number
    of random legal moves, from 0 to 3/4 of the longest game, from a fresh deal."""
    init_key, length_key, play_key = jax.random.split(key, 3)
    num_moves = (3 * game.max_game_length) // 4

    @jax.jit
    def play(init_key, length_key, play_key):
        states = jax.vmap(game.init)(jax.random.split(init_key, batch_size))
        stop = jax.random.randint(length_key, (batch_size,), 0, num_moves + 1)

        def one_move(states, inputs):
            move, key = inputs
            actions = sample_uniform_legal(key, jax.vmap(game.legal_action_mask)(states))
            after = jax.vmap(game.step)(states, actions)
            keep = move < stop
            return jax.tree.map(lambda new, old: jnp.where(keep.reshape((-1,) + (1,) * (old.ndim - 1)), new, old),
                                after, states), None

        states, _ = jax.lax.scan(one_move, states, (jnp.arange(num_moves), jax.random.split(play_key, num_moves)))
        return states

    return jax.block_until_ready(play(init_key, length_key, play_key))


def bench_search(base_config, batch_size: int, num_simulations: int, evaluator: str, mctx: str,
                 repeats: int, seed: int = 0, unroll: int = 1) -> dict:
    """Compile and time ``run_search`` alone (worlds, mctx search, combine at the root)
    for ``batch_size`` positions with ``base_config``'s search and, unless
    ``evaluator == "uniform"``, its network with fresh parameters. ``mctx``:
    ``"patched"`` (``mctx_patch``'s search loop, ``unroll`` steps per loop iteration)
    or ``"stock"`` (mctx's own)."""
    from beastybar_jax.games import get_game
    from beastybar_jax.network import init_params, make_network
    from beastybar_jax.search import mctx_patch, network_evaluator, run_search, uniform_evaluator

    game = get_game(base_config.game)
    search_config = dataclasses.replace(base_config.alphazero.search, num_simulations=num_simulations)
    key = jax.random.key(seed)
    states = search_positions(game, batch_size, key)
    if evaluator == "uniform":
        params, network_name = (), "uniform"
        make_evaluate = lambda params: uniform_evaluator(game)
    else:
        network = make_network(base_config.network, game)
        params = jax.jit(init_params, static_argnums=(0, 2))(network, key, game.observation_size)
        net = base_config.network
        network_name = f"{net.torso} {net.width}x{net.depth} {net.dtype}"
        make_evaluate = lambda params: network_evaluator(game, network, params)

    def search(params, states, key):
        return run_search(game, make_evaluate(params), states, key, search_config, add_noise=True)

    start = time.perf_counter()
    with mctx_patch.stock_mctx() if mctx == "stock" else mctx_patch.installed(unroll):
        compiled = jax.jit(search).lower(params, states, key).compile()
    compile_s = time.perf_counter() - start

    jax.block_until_ready(compiled(params, states, key))  # warm-up run
    best, best_cpu = float("inf"), float("inf")
    for r in range(repeats):
        run_key = jax.random.fold_in(key, r + 1)
        start, start_cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(compiled(params, states, run_key))
        best, best_cpu = min(best, time.perf_counter() - start), min(best_cpu, time.process_time() - start_cpu)
    simulations = batch_size * search_config.num_determinizations * num_simulations
    return dict(
        batch_size=batch_size, num_simulations=num_simulations, mctx=mctx, unroll=unroll if mctx == "patched" else 0,
        search=search_config.algorithm, num_determinizations=search_config.num_determinizations,
        network=network_name, search_seconds=best, cpu_seconds=best_cpu,
        simulations_per_second=simulations / best, seconds_per_simulation=best / simulations,
        compile_seconds=compile_s, load_average=os.getloadavg()[0],
    )


def add_relative_cost(rows: list[dict]) -> None:
    """``relative_cost``: seconds per simulation over that of the fewest simulations
    measured with the same batch size, mctx and unroll (normally 8); ``relative_cpu_cost``
    the same in process CPU time (on a CPU backend, less disturbed by other jobs)."""
    variant = lambda r: (r["batch_size"], r["mctx"], r["unroll"])
    for row in rows:
        same = [r for r in rows if variant(r) == variant(row)]
        fewest = min(same, key=lambda r: r["num_simulations"])
        row["relative_to_simulations"] = fewest["num_simulations"]
        row["relative_cost"] = row["seconds_per_simulation"] / fewest["seconds_per_simulation"]
        row["relative_cpu_cost"] = (row["cpu_seconds"] / row["num_simulations"]) / (
            fewest["cpu_seconds"] / fewest["num_simulations"])


def print_search_table(machine: dict, rows: list[dict]) -> None:
    print_machine(machine)
    header = (f"{'games':>7} | {'sims':>5} | {'mctx':>10} | {'sims/s':>9} | {'us/sim':>8} | {'cost vs fewest':>14} | "
              f"{'cpu cost':>8} | {'search s':>9} | {'compile s':>9} | {'load':>5}")
    print(header)
    print("-" * len(header))
    for r in rows:
        mctx = r["mctx"] if r["unroll"] <= 1 else f"unroll {r['unroll']}"
        print(f"{r['batch_size']:>7} | {r['num_simulations']:>5} | {mctx:>10} | "
              f"{_fmt_rate(r['simulations_per_second']):>9} | {r['seconds_per_simulation'] * 1e6:>8.3f} | "
              f"{r['relative_cost']:>9.2f} (x{r['relative_to_simulations']}) | {r['relative_cpu_cost']:>8.2f} | "
              f"{r['search_seconds']:>9.4f} | "
              f"{r['compile_seconds']:>9.1f} | {r['load_average']:>5.1f}")


def run_search_benchmark(args: argparse.Namespace) -> int:
    from beastybar_jax.config import load_config

    base = load_config(args.config, args.overrides)
    machine = machine_info()
    variants = [("patched", unroll) for unroll in args.unroll] if args.mctx in ("patched", "both") else []
    variants += [("stock", 0)] if args.mctx in ("stock", "both") else []
    rows = []
    for batch in args.batch_sizes:
        for mode, unroll in variants:
            label = mode if unroll <= 1 else f"unroll {unroll}"
            for sims in args.simulations:
                row = unless_out_of_memory(f"batch {batch} sims {sims} {label}", lambda: bench_search(
                    base, batch, sims, args.evaluator, mode, args.repeats, seed=args.seed, unroll=max(unroll, 1)))
                if row is None:
                    continue
                rows.append(row)
                print(f"  games {batch:>6} sims {sims:>4} {label:<8}: {_fmt_rate(row['simulations_per_second']):>9} "
                      f"sims/s, {row['search_seconds']:.4f} s per search, compile {row['compile_seconds']:.1f} s, "
                      f"load {row['load_average']:.1f}", flush=True)
    add_relative_cost(rows)
    print_search_table(machine, rows)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(dict(benchmark="search", machine=machine, config=vars_for_json(args), base_config=base.to_dict(),
                       results=rows), f, indent=2)
    print(f"wrote {args.out}")
    return 0


def add_search_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "search", help="run_search alone (no learner): simulations/s and the cost of a simulation as N grows")
    p.add_argument("--config", default=SELFPLAY_DEFAULT_CONFIG,
                   help=f"config giving the search and the network (default {SELFPLAY_DEFAULT_CONFIG})")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set network.dtype=float32 --set alphazero.search.algorithm=puct")
    p.add_argument("--batch-sizes", type=_parse_sizes, default=[1024],
                   help="positions searched side by side, e.g. 256,4096 or 2^12 (default 1024)")
    p.add_argument("--simulations", type=_parse_ints, default=list(SEARCH_DEFAULT_SIMULATIONS),
                   help="simulations per search (default 8,16,32,64,128,256)")
    p.add_argument("--evaluator", choices=("network", "uniform"), default="network",
                   help="the config's network with fresh parameters (default), or zero logits and value")
    p.add_argument("--mctx", choices=MCTX_MODES, default="patched",
                   help="mctx's search loop as patched by beastybar_jax (default), stock mctx, or both")
    p.add_argument("--unroll", type=_parse_ints, default=[1],
                   help="patched: steps down/up the tree per loop iteration, e.g. 1,2,4 (default 1; fewer GPU "
                        "round trips, wasted steps for finished games)")
    p.add_argument("--repeats", type=int, default=3, help="timed searches per configuration; the best is kept")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bench_results/search.json", help="JSON output path")
    p.set_defaults(func=run_search_benchmark)


SUBCOMMANDS = [add_env_parser, add_selfplay_parser, add_search_parser, add_ppo_parser, add_endgames_parser]


class OneLineErrors(argparse.ArgumentParser):
    """Argument errors as one line (``benchmark.py env: error: argument --steps: ...``), exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")



def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
