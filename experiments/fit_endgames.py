"""How far supervised learning on solved endgames takes a network: a diagnostic of what
limits the raw policy (docs/strength.md, "What limits the raw policy").

    python experiments/fit_endgames.py --init champion --rounds 4
    python experiments/fit_endgames.py --init scratch --set network.width=512 --set network.depth=4 --rounds 6

Each round plays ``--games`` fresh games for each pairing of agents below (weak and strong
play, as the endgame suite's sources), solves every position of them that the solver can
solve and that has a real decision (the moves' final margins differ, as in the suite), and trains the network one
pass over those positions, never seen before: the policy towards the set of moves that keep
the exact result (the loss is minus the log of the probability the policy gives that set,
a mean over the positions in which ``--win-weight`` weighs the won ones), the value towards
the exact result. Before training on a round's positions it scores the
network on them: a held-out figure on as much fresh data as it likes. After each round it
scores the project's endgame suite (raw argmax, as ``evaluate.py --endgames``).

``--init champion`` fine-tunes the shipped champion; ``--init scratch`` trains the
champion's architecture (with ``--set network.*`` changes) from random weights; ``--init
DIR`` fine-tunes the network of a run or an exported one (``--out`` of an earlier run:
with another ``--seed`` it carries on with fresh positions). The
positions come from games other than the suite's (other seeds). With ``--out DIR`` the
trained network is written as the shipped champion is (``checkpoint.save_exported``), for
``evaluate.py --agent checkpoint:DIR`` and notebooks (``checkpoint.load_exported``).
``--dry-run`` loads ``--init``, applies the ``--set``s and makes the network (its config
validated, its parameters not initialized), then stops.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from make_endgame_suite import PAIRINGS as SUITE_PAIRINGS  # a sibling script (experiments/ is on sys.path)

# The suite's pairings but Monte Carlo search (the slowest to play), and the champion's own games.
PAIRINGS = tuple(p for p in SUITE_PAIRINGS if not p[0].startswith("mcts")) + (
    ("champion", "outcome_heuristic"), ("champion", "heuristic"))
CHUNK = 1024  # positions per compiled evaluation


def parse_args(argv=None) -> argparse.Namespace:
    from beastybar_jax.cli import OneLineParser, finite_float, int_in_range, seed as seed_arg

    parser = OneLineParser(description=__doc__.split("\n\n")[0],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--init", required=True, metavar="{champion,scratch,DIR}",
                        help="fine-tune the shipped champion, train its architecture from random weights, "
                             "or fine-tune the network in DIR (a run or an exported network)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="with --init scratch: change the champion's config (network.width=512, ...)")
    parser.add_argument("--rounds", type=int_in_range(1, 10_000), default=4, help="rounds of fresh positions")
    parser.add_argument("--games", type=int_in_range(2, 1_000_000), default=2000,
                        help="games per pairing per round (default %(default)s: about 83,000 positions)")
    parser.add_argument("--learning-rate", type=finite_float(above=0), default=3e-4, help="Adam's (default %(default)s)")
    parser.add_argument("--batch-size", type=int_in_range(1, 1_000_000), default=512)
    parser.add_argument("--win-weight", type=finite_float(above=0, maximum=1e6), default=1.0,
                        help="weight of the won positions in the policy loss, the others 1 (default %(default)s)")
    parser.add_argument("--seed", type=seed_arg, default=1)
    parser.add_argument("--out", metavar="DIR", help="write the trained network here (exported format)")
    parser.add_argument("--dry-run", action="store_true",
                        help="load --init, apply --set and build the network, then stop (nothing trained)")
    args = parser.parse_args(argv)
    if args.overrides and args.init != "scratch":
        parser.error("--set changes the network: use it with --init scratch")
    others = [o for o in args.overrides if not o.strip().startswith("network.")]
    if others:  # the rest of a training config has no part here (--learning-rate, --batch-size do)
        parser.error(f"--set takes network.* keys only, got {others[0]!r}")
    return args


def solved_decisions(pairings, num_games: int, key):
    """Every solvable position with a real decision in ``num_games`` games of each
    pairing (host arrays): the states ``[N]``, legal moves ``bool[N, A]``, the moves that
    keep the exact result ``bool[N, A]`` and that result for the mover ``float32[N]``."""
    import jax
    import numpy as np

    from beastybar_jax.agents import make_agent
    from beastybar_jax.games.beastybar.endgame import positions

    solve = _solver()
    parts = []
    for index, (a, b) in enumerate(pairings):
        states = positions.endgames_from_games(make_agent(a), make_agent(b), num_games, jax.random.fold_in(key, index))
        solution = jax.device_get(solve(states))
        decision, keeps = positions.real_decisions(solution)
        parts.append((jax.tree.map(lambda x: x[decision], states), solution.legal[decision], keeps[decision],
                      np.sign(solution.margin[decision]).astype(np.float32)))
    states = jax.tree.map(lambda *x: np.concatenate(x), *[p[0] for p in parts])
    return (states,) + tuple(np.concatenate(column) for column in list(zip(*parts))[1:])


def _solver():
    import jax

    from beastybar_jax.games.beastybar.endgame import solver

    return jax.jit(lambda states: solver.solve(states, solver.SolverConfig(mode="margins")))


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.out and not args.dry_run:
        from beastybar_jax.cli import check_writable_directory

        try:  # before the work, not after it
            if os.path.isdir(os.path.join(args.out, "checkpoints")):
                raise ValueError(f"--out {args.out} is a run directory: the network goes into one of its own")
            check_writable_directory(args.out, "--out")
        except ValueError as e:
            print(f"fit_endgames.py: error: {e}", file=sys.stderr)
            return 2
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from beastybar_jax.checkpoint import CheckpointError, load_agent, load_exported, save_exported
    from beastybar_jax.config import TrainConfig, apply_overrides
    from beastybar_jax.games import beastybar as game
    from beastybar_jax.games.beastybar.endgame import positions
    from beastybar_jax.games.beastybar.endgame.suite import load_suite
    from beastybar_jax.games.beastybar.env import CHAMPION_DIR
    from beastybar_jax.network import init_params, make_network
    from beastybar_jax.seeds import seed_key

    try:
        model = load_exported(CHAMPION_DIR) if args.init in ("champion", "scratch") else load_agent(args.init)
    except CheckpointError as e:
        print(f"fit_endgames.py: error: --init {args.init}: {e}", file=sys.stderr)
        return 2
    if model.game.name != game.BEASTYBAR.name:
        print(f"fit_endgames.py: error: --init {args.init} is a {model.game.name} network", file=sys.stderr)
        return 2
    key = seed_key(args.seed)
    if args.init == "scratch":
        try:
            config = TrainConfig.from_dict(apply_overrides(model.config.to_dict(), args.overrides))
        except ValueError as e:
            print(f"fit_endgames.py: error: {e}", file=sys.stderr)
            return 2
        model.config, model.network = config, make_network(config.network, model.game)
    if args.dry_run:
        print(f"config ok: --init {args.init}, network {model.config.network}")
        return 0
    if args.init == "scratch":
        model.params = init_params(model.network, jax.random.fold_in(key, 10_000), model.game.observation_size)
    network, params = model.network, model.params
    observe = jax.jit(jax.vmap(lambda s: game.observe(s, s.current_player)))
    suite = load_suite()
    suite_observations = np.asarray(observe(suite.states))

    @jax.jit
    def kept(params, observations, legal, keeps):
        """``bool[C]`` the policy's argmax move keeps the result."""
        logits = network.apply(params, observations).policy_logits
        move = jnp.argmax(jnp.where(legal, logits, -jnp.inf), axis=-1)
        return jnp.take_along_axis(keeps, move[:, None], axis=1)[:, 0]

    def share_kept(params, observations, legal, keeps) -> float:
        """The share of positions whose argmax move keeps the result, in chunks of
        ``CHUNK`` (the last one wrapped around) so that one compiled function serves all."""
        n, total = len(observations), 0
        for first in range(0, n, CHUNK):
            index = np.arange(first, first + CHUNK) % n
            total += int(np.asarray(kept(params, observations[index], legal[index], keeps[index]))[:n - first].sum())
        return total / n

    suite_keeps = positions.keeps_result(suite.legal, suite.action_margin, suite.margin)
    suite_score = lambda p: share_kept(p, suite_observations, suite.legal, suite_keeps)  # noqa: E731
    optimizer = optax.adam(args.learning_rate)
    opt_state = optimizer.init(params)

    @jax.jit
    def train_step(params, opt_state, observations, legal, keeps, results):
        def loss(params):
            output = network.apply(params, observations)
            log_policy = jax.nn.log_softmax(jnp.where(legal, output.policy_logits, -1e9))
            log_keep = jax.nn.logsumexp(jnp.where(keeps, log_policy, -1e9), axis=-1)
            weight = jnp.where(results > 0, args.win_weight, 1.0)  # a won position's result is a win
            return -jnp.sum(weight * log_keep) / jnp.sum(weight) + jnp.mean((output.value - results) ** 2)

        value, grads = jax.value_and_grad(loss)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    start = time.perf_counter()
    print(f"{args.init}: {sum(x.size for x in jax.tree.leaves(params)):,} parameters; "
          f"suite keeps {suite_score(params):.2%}", flush=True)
    rng = np.random.default_rng(args.seed)
    steps, loss = 0, None
    for round_index in range(args.rounds):
        states, *targets = solved_decisions(PAIRINGS, args.games, jax.random.fold_in(key, round_index))
        data = (np.asarray(observe(states)), *targets)
        if not len(data[0]):
            print(f"round {round_index + 1}: no solvable position with a decision; nothing to train on", flush=True)
            continue
        held_out = share_kept(params, *data[:3])
        order = rng.permutation(len(data[0]))
        # Whole batches (one compiled shape); a round smaller than a batch is one batch of its own.
        for first in range(0, max(len(order) - args.batch_size + 1, 1), args.batch_size):
            batch = order[first:first + args.batch_size]
            params, opt_state, loss = train_step(params, opt_state, *(x[batch] for x in data))
            steps += 1
        print(f"round {round_index + 1}: {len(order):,} fresh positions, keeps {held_out:.2%} of them before "
              f"training on them, {share_kept(params, *data[:3]):.2%} after; {steps:,} steps, loss "
              f"{float(loss):.3f}; suite keeps {suite_score(params):.2%} ({time.perf_counter() - start:.0f} s)",
              flush=True)
    if args.out:
        model.params = params
        save_exported(model, args.out, info=dict(fit_endgames=vars(args)))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
