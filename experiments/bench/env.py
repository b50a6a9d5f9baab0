"""``env``: the engine alone, random legal play of whole games with automatic reset.

All games of a batch are stepped together by one jitted ``lax.scan`` over ``--steps``
steps of a ``vmap`` over games. Two variants are timed:

- ``step``: sample a legal action with ``legal_action_mask`` (``--sampler uniform``: one
  random number per game picks the k-th legal action; ``--sampler categorical``:
  ``jax.random.categorical`` on masked logits, which draws 31 Gumbel numbers per game and
  on CPU costs more than the engine), ``step``, reset finished games with a fresh
  ``init``. The legal mask is needed to play legal moves, so it is part of this loop too.
- ``step+mask+obs``: the same, plus ``observe`` of the new state for its player to move.
  The observation is summed into the carry so XLA cannot drop it.

Every slot of the batch advances one live game per step (a finished game is replaced by
a new one in the same step), so ``steps/s = batch * steps / seconds`` counts only moves
actually played.
"""

from __future__ import annotations

import argparse
from typing import Callable

import jax
import jax.numpy as jnp

from bench import common
from beastybar_jax.games.beastybar import BEASTYBAR
from beastybar_jax.games import Game, tracing
from beastybar_jax.seeds import seed_key

VARIANTS = ("step", "step+mask+obs")
DEFAULT_BATCH_SIZES = tuple(4**k for k in range(11))  # 1 .. 2^20
RESET_CHUNK = 16  # steps per batch of fresh deals; below the shortest game (21 turns)


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
            lambda new, old: jnp.where(states.terminated.reshape((-1,) + (1,) * (old.ndim - 1)), new, old),
            fresh, states)
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
            one_chunk, (states, jnp.zeros((), jnp.float32)), jax.random.split(key, num_steps // chunk))
        return states, checksum

    return run


def bench_env(batch_size: int, num_steps: int, repeats: int, with_observation: bool, seed: int = 0,
              sampler: str = "uniform", game: Game = BEASTYBAR, kernels: str = "triton") -> dict:
    """Compile and time one configuration; returns a result row. ``kernels``: the GPU's
    form with its Pallas kernels (``"triton"``) or the XLA operations they replace
    (``"xla"``), as ``tracing.for_gpu`` (nothing changes on a CPU)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    key = seed_key(seed)
    init_key, key = jax.random.split(key)
    states = jax.block_until_ready(jax.jit(jax.vmap(game.init))(jax.random.split(init_key, batch_size)))
    with tracing.for_gpu(tracing.traced_for_gpu(), kernels=kernels):
        compiled, compile_s = common.compile_seconds(
            make_env_loop(game, batch_size, num_steps, with_observation, sampler), states, key)
    states, checksum = jax.block_until_ready(compiled(states, key))  # warm-up run
    keys = common.repeat_keys(key, repeats)

    def run(r):
        nonlocal states
        states, checksum = compiled(states, keys[r])
        return states, checksum

    best, _, (_, checksum) = common.best_of(repeats, run)
    steps = batch_size * num_steps
    return dict(variant="step+mask+obs" if with_observation else "step", sampler=sampler, kernels=kernels,
                batch_size=batch_size, num_steps=num_steps, steps=steps, seconds=best, steps_per_second=steps / best,
                compile_seconds=compile_s, checksum=float(checksum))


def run(args: argparse.Namespace) -> int:
    if args.steps > RESET_CHUNK and args.steps % RESET_CHUNK:  # it was rounded down, the report saying otherwise
        common.usage_error(f"--steps {args.steps}: above {RESET_CHUNK}, a multiple of {RESET_CHUNK} (finished "
                           f"games are dealt again every {RESET_CHUNK} steps)")
    machine = common.machine_info()
    variants = VARIANTS if args.variant == "both" else (args.variant,)
    rows = []
    for batch in args.batch_sizes:
        steps = args.steps if args.steps else max(16, min(512, (1 << 22) // batch))
        steps -= steps % min(steps, RESET_CHUNK)
        for variant in variants:
            common.check_signals()
            row = common.unless_out_of_memory(f"batch {batch} {variant}", lambda: bench_env(
                batch, steps, args.repeats, variant == "step+mask+obs", seed=args.seed, sampler=args.sampler,
                kernels=args.kernels))
            if row is not None:
                rows.append(row)
                common.progress(f"batch {batch} {variant}: {common.rate(row['steps_per_second'])} steps/s "
                                f"({row['steps']} steps in {row['seconds']:.3f} s, "
                                f"compile {row['compile_seconds']:.1f} s)")
    by_batch: dict[int, dict] = {}
    for row in rows:
        by_batch.setdefault(row["batch_size"], {"batch": row["batch_size"]})[row["variant"]] = row
    variant_rate = lambda name: lambda r: common.rate(r[name]["steps_per_second"]) if name in r else "-"
    variant_compile = lambda name: lambda r: f"{r[name]['compile_seconds']:.1f}" if name in r else "-"
    common.print_table(machine, [
        ("batch", lambda r: r["batch"]),
        ("step steps/s", variant_rate("step")),
        ("+mask+obs steps/s", variant_rate("step+mask+obs")),
        ("compile s (step)", variant_compile("step")),
        ("compile s (+mask+obs)", variant_compile("step+mask+obs")),
    ], [by_batch[b] for b in sorted(by_batch)])
    return common.write_report(args.out, "env", machine, args, rows)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("env", help="random legal play with auto-reset: step / step+mask+obs steps per second",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch-sizes", type=common.list_of(), default=list(DEFAULT_BATCH_SIZES),
                   help="comma-separated batch sizes, e.g. 1,64,4096 or 2^12,2^16 (default 4^0..4^10 = 1..2^20)")
    p.add_argument("--steps", type=common.int_at_least(0), default=0,
                   help="steps per timed run: up to 16, or a multiple of 16 (default: 2^22 / batch, clipped "
                        "to 16..512, rounded down to a multiple of 16)")
    p.add_argument("--variant", choices=("both",) + VARIANTS, default="both")
    p.add_argument("--sampler", choices=tuple(SAMPLERS), default="uniform",
                   help="how random legal moves are drawn: one uniform number per game (default) or "
                        "jax.random.categorical on masked logits (31 Gumbel draws per game, slower on CPU)")
    p.add_argument("--kernels", choices=("triton", "xla"), default="triton",
                   help="on a GPU: the engine's Pallas kernel (default) or the XLA operations it replaces (the "
                        "recurring phase's visits unrolled), to measure what it gains")
    common.add_common_arguments(p, out="bench_results/env.json")
    p.set_defaults(func=run)
