"""``search``: ``run_search`` alone (sampled worlds, mctx search, combine at the root), no
learner: simulations per second, the cost of one simulation as their number grows, and
the operations the simulation loop's body runs (each a kernel launch on a GPU), with
beastybar_jax's search loops (``--loop``: the CPU's dynamic loop, the GPU's static loop
and its XLA-walk variant; ``search/mctx_patch.py``) or mctx's own.

Positions come from random play of fresh deals (0 to 3/4 of the longest game). The
relative cost is the time per simulation over that of the fewest simulations measured
with the same batch size and loop; the CPU cost the same in process CPU time (on a CPU
backend, less disturbed by other jobs than wall time).
"""

from __future__ import annotations

import argparse
import collections
import os

import jax
import jax.numpy as jnp

from bench import common
from bench.env import sample_uniform_legal
from beastybar_jax.games import Game, get_game
from beastybar_jax.network import init_params, make_network
from beastybar_jax.search import mctx_patch, network_evaluator, programs, run_search, uniform_evaluator
from beastybar_jax.seeds import seed_key

DEFAULT_CONFIG = "configs/h100.yaml"
DEFAULT_SIMULATIONS = (8, 16, 32, 64, 128, 256)
MCTX_MODES = ("patched", "stock", "both")
LOOPS = ("auto", "dynamic", "static", "static-xla")


def search_positions(game: Game, batch_size: int, key: jax.Array, turn: int | None = None):
    """``batch_size`` positions to search: each game plays a uniformly random number
    of random legal moves, from 0 to 3/4 of the longest game, from a fresh deal; or, with
    ``turn``, every game ``turn`` moves (a finished game stays as it ended)."""
    init_key, length_key, play_key = jax.random.split(key, 3)
    num_moves = (3 * game.max_game_length) // 4 if turn is None else turn

    @jax.jit
    def play(init_key, length_key, play_key):
        states = jax.vmap(game.init)(jax.random.split(init_key, batch_size))
        stop = (jnp.full((batch_size,), turn) if turn is not None
                else jax.random.randint(length_key, (batch_size,), 0, num_moves + 1))

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
                 repeats: int, seed: int = 0, loop: str = "auto", compile_for: str | None = None) -> dict:
    """Compile and time ``run_search`` alone for ``batch_size`` positions with
    ``base_config``'s search and, unless ``evaluator == "uniform"``, its network with
    fresh parameters. ``mctx``: ``"patched"`` (``mctx_patch``'s ``loop``) or ``"stock"``
    (mctx's own). ``compile_for``: compile for that GPU (:func:`common.target_device`)
    instead, traced as for a GPU (``loop`` ``"auto"`` is the static one), without timing.
    The network's MLP torso is as ``network.torso_kernel`` says."""
    game = get_game(base_config.game)
    search_config = base_config.search.replace(num_simulations=num_simulations)
    key = seed_key(seed)
    if compile_for is not None:
        return _compile_only(base_config, game, search_config, batch_size, evaluator, mctx, loop, compile_for, key)
    states = search_positions(game, batch_size, key)
    if evaluator == "uniform":
        params, evaluator_name = (), "uniform"
        make_evaluate = lambda params: uniform_evaluator(game)
    else:
        network = make_network(base_config.network, game)
        params = jax.jit(init_params, static_argnums=(0, 2))(network, key, game.observation_size)
        evaluator_name = common.network_name(base_config)
        make_evaluate = lambda params: network_evaluator(game, network, params)

    def search(params, states, key):
        return run_search(game, make_evaluate(params), states, key, search_config, add_noise=True)

    with mctx_patch.stock_mctx() if mctx == "stock" else mctx_patch.installed(loop):
        compiled, compile_s = common.compile_seconds(jax.jit(search), params, states, key)
    body = programs.loop_ops(compiled.as_text(), num_simulations)
    jax.block_until_ready(compiled(params, states, key))  # warm-up run
    keys = common.repeat_keys(key, repeats)
    best, best_cpu, _ = common.best_of(repeats, lambda r: compiled(params, states, keys[r]))
    simulations = batch_size * search_config.num_determinizations * num_simulations
    return dict(
        batch_size=batch_size, num_simulations=num_simulations, mctx=mctx,
        loop=mctx_patch.resolve_loop(loop) if mctx == "patched" else "stock",
        body_ops=body.total, body_nested_loops=[list(loop_) for loop_ in body.nested_loops],
        body_bytes=body.bytes, body_bytes_by_scope=body.bytes_by_scope, search=search_config.algorithm, num_determinizations=search_config.num_determinizations,
        network=evaluator_name, torso=base_config.network.torso_kernel, search_seconds=best, cpu_seconds=best_cpu,
        simulations_per_second=simulations / best, seconds_per_simulation=best / simulations,
        compile_seconds=compile_s, load_average=os.getloadavg()[0],
    )


def _compile_only(base_config, game, search_config, batch_size, evaluator, mctx, loop, target, key) -> dict:
    """:func:`bench_search`'s row for a program compiled for GPU ``target``, not run."""
    from beastybar_jax.games import tracing

    device = common.target_device(target)
    loop = common.loop_as_on_gpu(loop)
    if evaluator == "uniform":
        params, evaluator_name, make_evaluate = (), "uniform", lambda params: uniform_evaluator(game)
    else:
        network = make_network(base_config.network, game)
        params = jax.eval_shape(lambda k: init_params(network, k, game.observation_size), key)
        evaluator_name = common.network_name(base_config)
        make_evaluate = lambda params: network_evaluator(game, network, params)
    states = jax.eval_shape(lambda k: jax.vmap(game.init)(jax.random.split(k, batch_size)), key)

    def search(params, states, key):
        return run_search(game, make_evaluate(params), states, key, search_config, add_noise=True)

    args = common.on_device((params, states, key), device)
    with (mctx_patch.stock_mctx() if mctx == "stock" else mctx_patch.installed(loop)), tracing.for_gpu():
        compiled, compile_s = common.compile_seconds(jax.jit(search), *args)
    body = programs.loop_ops(compiled.as_text(), search_config.num_simulations)
    nan = float("nan")
    return dict(
        batch_size=batch_size, num_simulations=search_config.num_simulations, mctx=mctx,
        loop=loop.replace("-pallas", "") if mctx == "patched" else "stock", body_ops=body.total,
        body_nested_loops=[list(loop_) for loop_ in body.nested_loops], body_bytes=body.bytes,
        body_bytes_by_scope=body.bytes_by_scope, compiled_for=target,
        search=search_config.algorithm, num_determinizations=search_config.num_determinizations,
        network=evaluator_name, torso=base_config.network.torso_kernel, search_seconds=nan, cpu_seconds=nan,
        simulations_per_second=nan, seconds_per_simulation=nan, compile_seconds=compile_s,
        load_average=os.getloadavg()[0],
    )


def add_relative_cost(rows: list[dict]) -> None:
    """``relative_cost``: seconds per simulation over that of the fewest simulations
    measured with the same batch size and loop (normally 8); ``relative_cpu_cost`` the
    same in process CPU time."""
    variant = lambda r: (r["batch_size"], r["loop"])
    for row in rows:
        fewest = min((r for r in rows if variant(r) == variant(row)), key=lambda r: r["num_simulations"])
        row["relative_to_simulations"] = fewest["num_simulations"]
        row["relative_cost"] = row["seconds_per_simulation"] / fewest["seconds_per_simulation"]
        row["relative_cpu_cost"] = (row["cpu_seconds"] / row["num_simulations"]) / (
            fewest["cpu_seconds"] / fewest["num_simulations"])


def _body_label(row: dict) -> str:
    """The simulation body's ops, and each loop inside it as ``+ops x trips`` (``?``: a
    count that depends on the data, each iteration a host round trip on a GPU); ``(n
    loops)`` after a kind of loop the body holds ``n`` of (XLA:CPU's scatters are loops)."""
    kinds = collections.Counter(f"+{ops}x{trips or '?'}" for ops, trips in row["body_nested_loops"])
    nested = "".join(f" {kind}" + (f" ({n} loops)" if n > 1 else "") for kind, n in kinds.items())
    return f"{row['body_ops']}{nested}"


def run(args: argparse.Namespace) -> int:
    base = common.load_base_config(args.config, args.overrides)
    machine = dict(common.machine_info(), compiled_for=args.compile_for)
    variants = [("patched", loop) for loop in args.loop] if args.mctx in ("patched", "both") else []
    variants += [("stock", "auto")] if args.mctx in ("stock", "both") else []
    rows = []
    for batch in args.batch_sizes:
        for mode, loop in variants:
            label = mctx_patch.resolve_loop(loop) if mode == "patched" else "stock"
            for sims in args.simulations:
                common.check_signals()
                row = common.unless_out_of_memory(f"batch {batch} sims {sims} {label}", lambda: bench_search(
                    base, batch, sims, args.evaluator, mode, args.repeats, seed=args.seed, loop=loop,
                    compile_for=args.compile_for))
                if row is not None:
                    rows.append(row)
                    timing = (f"compiled for {args.compile_for}, not run" if args.compile_for else
                              f"{common.rate(row['simulations_per_second'])} sims/s, {row['search_seconds']:.4f} s "
                              f"per search")
                    common.progress(f"games {batch} sims {sims} {row['loop']}: {_body_label(row)} ops per simulation, "
                                    f"{timing}, compile {row['compile_seconds']:.1f} s, load {row['load_average']:.1f}")
                    common.progress(f"  ~{row['body_bytes'] / 1e6:.0f} MB moved per batched simulation step (estimated "
                                    f"from the HLO), by scope: {programs.scope_label(row['body_bytes_by_scope'])}")
    add_relative_cost(rows)
    common.print_table(machine, [
        ("games", lambda r: r["batch_size"]),
        ("sims", lambda r: r["num_simulations"]),
        ("loop", lambda r: r["loop"]),
        ("ops/sim", _body_label),
        ("MB/step", lambda r: f"{r['body_bytes'] / 1e6:.0f}"),
        ("sims/s", lambda r: common.rate(r["simulations_per_second"])),
        ("us/sim", lambda r: f"{r['seconds_per_simulation'] * 1e6:.3f}"),
        ("cost vs fewest", lambda r: f"{r['relative_cost']:.2f} (x{r['relative_to_simulations']})"),
        ("cpu cost", lambda r: f"{r['relative_cpu_cost']:.2f}"),
        ("search s", lambda r: f"{r['search_seconds']:.4f}"),
        ("compile s", lambda r: f"{r['compile_seconds']:.1f}"),
        ("load", lambda r: f"{r['load_average']:.1f}"),
    ], rows)
    return common.write_report(args.out, "search", machine, args, rows, base_config=base.to_dict())


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "search", help="run_search alone (no learner): simulations/s and the cost of a simulation as N grows",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_config_arguments(p, DEFAULT_CONFIG,
                                "--set network.dtype=float32 --set search.algorithm=puct")
    p.add_argument("--batch-sizes", type=common.list_of(), default=[1024],
                   help="positions searched side by side, e.g. 256,4096 or 2^12 (default 1024)")
    p.add_argument("--simulations", type=common.list_of(), default=list(DEFAULT_SIMULATIONS),
                   help="simulations per search (default 8,16,32,64,128,256)")
    p.add_argument("--evaluator", choices=("network", "uniform"), default="network",
                   help="the config's network with fresh parameters (default), or zero logits and value")
    p.add_argument("--mctx", choices=MCTX_MODES, default="patched",
                   help="mctx's search loop as patched by beastybar_jax (default), stock mctx, or both")
    p.add_argument("--loop", type=common.list_of(choices=LOOPS), default=["auto"],
                   help="patched: the search loops to measure, e.g. dynamic,static (default auto: dynamic on a CPU, "
                        "static elsewhere; static-xla: the static loop with its walk as XLA operations)")
    p.add_argument("--compile-for", choices=common.COMPILE_TARGETS, default=None,
                   help="compile for that GPU without one (XLA's deviceless compilation; needs JAX's CUDA plugin, "
                        "and JAX_PLATFORMS=cpu where no GPU is present) and report the ops per simulation, "
                        "no timing")
    common.add_common_arguments(p, out="bench_results/search.json", repeats_help="timed searches")
    p.set_defaults(func=run)
