"""``ppo``: whole PPO training iterations (``algorithm: ppo``): the rollout of B games x
``rollout_length`` moves against the config's opponents, advantages, and ``num_epochs`` x
``num_minibatches`` optimizer steps. ``steps/s`` counts every game move (learner's and
opponents'), ``learner moves/s`` the learner's decisions.
"""

from __future__ import annotations

import argparse

import jax

from bench import common
from beastybar_jax.training.trainer import make_trainer

DEFAULT_CONFIG = "configs/ppo_h100.yaml"


def bench_ppo(base_config, batch_size: int, repeats: int) -> dict:
    """Compile and time whole PPO iterations with ``base_config`` at ``batch_size`` games;
    returns a result row."""
    config = base_config.replace(num_games=batch_size)
    ppo = config.ppo
    trainer = make_trainer(config)
    state = common.initial_state(trainer, config)
    compiled, compile_s = common.compile_seconds(trainer.iteration, state, jax.random.key(1))
    state, metrics = compiled(state, jax.random.key(100))  # warm-up
    jax.block_until_ready(metrics)

    def run(r):
        nonlocal state
        state, metrics = compiled(state, jax.random.key(1000 + r))
        return metrics

    best, _, metrics = common.best_of(repeats, run)
    moves = batch_size * ppo.rollout_length
    return dict(
        batch_size=batch_size, rollout_length=ppo.rollout_length, moves=moves, num_epochs=ppo.num_epochs,
        num_minibatches=ppo.num_minibatches, minibatch=moves // ppo.num_minibatches,
        opponents=dict(ppo.opponent_slots(batch_size)), network=common.network_name(config),
        iteration_seconds=best, steps_per_second=moves / best,
        learner_moves_per_second=float(metrics["learner_moves"]) / best, compile_seconds=compile_s,
    )


def run(args: argparse.Namespace) -> int:
    base = common.load_base_config(args.config, ["algorithm=ppo", *args.overrides])
    batches = args.batch_sizes or [base.num_games]
    common.check_trainer_configs([base.replace(num_games=batch) for batch in batches],
                                 lambda c: f"--batch-sizes {c.num_games}")
    machine = common.machine_info()
    rows = []
    for batch in batches:
        common.check_signals()
        row = common.unless_out_of_memory(f"batch {batch}", lambda: bench_ppo(base, batch, args.repeats))
        if row is not None:
            rows.append(row)
            common.progress(f"games {batch} x {row['rollout_length']} moves: {common.rate(row['steps_per_second'])} "
                            f"steps/s, iteration {row['iteration_seconds']:.3f} s, "
                            f"compile {row['compile_seconds']:.1f} s")
    common.print_table(machine, [
        ("games", lambda r: r["batch_size"]),
        ("moves", lambda r: r["rollout_length"]),
        ("steps/s", lambda r: common.rate(r["steps_per_second"])),
        ("learner moves/s", lambda r: common.rate(r["learner_moves_per_second"])),
        ("updates", lambda r: f"{r['num_epochs']} x {r['num_minibatches']} of {r['minibatch']}"),
        ("iteration s", lambda r: f"{r['iteration_seconds']:.3f}"),
        ("compile s", lambda r: f"{r['compile_seconds']:.1f}"),
    ], rows)
    return common.write_report(args.out, "ppo", machine, args, rows, base_config=base.to_dict())


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "ppo", help="whole PPO iterations (rollout + advantages + epochs of updates): environment steps/s",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_config_arguments(p, DEFAULT_CONFIG, "--set ppo.opponents=[self] --set ppo.opponent_weights=[1]")
    p.add_argument("--batch-sizes", type=common.list_of(), default=None,
                   help="games played side by side, e.g. 4096,16384 (default: the config's num_games)")
    common.add_common_arguments(p, out="bench_results/ppo.json", repeats_help="timed iterations", seed=False)
    p.set_defaults(func=run)
