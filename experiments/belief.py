"""How much the opponent's moves say about their hand: a belief kept from them by Bayes'
rule (``beastybar_jax.games.beastybar.belief``), scored against the hand they really hold.

    python experiments/belief.py --observer champion --opponents heuristic,outcome_heuristic --games 100

The observer plays ``--games`` games against each opponent (seat 0 in every other game) and
keeps one belief per model of how the opponent chooses. At each of the observer's decisions
where the opponent's hand is still hidden (their deck not empty), every belief is scored on
the opponent's true hand:

- ``uniform``: no model; every unseen card as likely as the next (``sample_world``'s worlds);
- ``network``: the observer's network's raw policy as the model: what a fair agent could use;
- ``opponent``: the opponent's own policy as the model (its random tie-breaks estimated from
  8 draws per position): an oracle on how they choose, never on their cards, and about the
  most any model of them can find;
- ``half``: for reference, ``value_of_information.py``'s "half the hand" sight: two cards of
  the hand known, the others as likely as the rest.

Scores: ``held``, the sum of the belief's per-card probabilities over the true hand: how
many of its cards a world drawn from the belief deals the opponent on average (uniform about
2 of 4, the hand itself all of them); ``gain``, the share of the way from uniform to knowing
the hand; ``log-lik``, the sum over the unseen cards of the log of the probability the belief
gives each card's true state, held or not (higher is better; the cards one by one, not the
hand as a whole). A diagnostic (docs/strength.md, "What the opponent's moves tell"): nothing
else in the project uses it. Bad specs end in one line and exit code 2;
Ctrl-C (or SIGTERM) prints the finished opponents' tables and exits with 130 (143).
"""

from __future__ import annotations

import argparse
import sys

MODELS = ("uniform", "network", "opponent", "half")
KEPT = ("network", "opponent")  # the models kept by Bayes' rule (``--models``); the other two are references
TURN_BUCKETS = ((0, 6), (6, 10), (10, 16))  # turns played before the observer's decision (decks run out by 16)


def parse_args(argv=None) -> argparse.Namespace:
    from beastybar_jax.cli import OneLineParser, finite_float, int_in_range, seed as seed_arg

    parser = OneLineParser(description=__doc__.split("\n\n")[0],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--observer", default="champion",
                        help="a network agent spec: it plays, and its raw policy is the network model "
                             "(default %(default)s)")
    parser.add_argument("--opponents", default="heuristic,outcome_heuristic",
                        help="comma-separated specs (default %(default)s)")
    parser.add_argument("--games", type=int_in_range(2, 100_000), default=100,
                        help="games per opponent (default %(default)s)")
    parser.add_argument("--particles", type=int_in_range(1, 4096), default=64,
                        help="hands weighed per opponent move (default %(default)s)")
    parser.add_argument("--epsilon", type=finite_float(0.0, 1.0), default=0.1,
                        help="weight of a uniform choice mixed into each model (default %(default)s)")
    parser.add_argument("--models", default=",".join(KEPT),
                        help="comma-separated beliefs to keep, from network, opponent (default %(default)s; "
                             "uniform and half are always scored)")
    parser.add_argument("--seed", type=seed_arg, default=0, help="default %(default)s")
    parser.add_argument("--plain", action="store_true", help="tables as plain aligned text")
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in KEPT]
    if unknown or not models or len(set(models)) != len(models):
        parser.error(f"--models {args.models!r}: name each of {', '.join(KEPT)} at most once")
    args.models = tuple(m for m in KEPT if m in models)
    return args


ORACLE_DRAWS = 8  # of the opponent's move per position: the heuristics break ties at random


def oracle_policy(agent, game, draws: int = ORACLE_DRAWS):
    """``policy(states [N]) -> logits [N, A]``: the log-frequency of each move in ``draws``
    of ``agent``'s own choice (fixed keys), moves never chosen at -20: the agent's policy,
    its random tie-breaks estimated."""
    import jax
    import jax.numpy as jnp

    from beastybar_jax.agents import batch_act

    def policy(states):
        count = states.current_player.shape[0]
        keys = jax.random.split(jax.random.key(0), (draws, count))
        moves = jax.vmap(lambda k: batch_act(agent)(states, k))(keys)  # [draws, N]
        frequency = jnp.mean(jnp.arange(game.num_actions)[None, None, :] == moves[:, :, None], axis=0)
        return jnp.where(frequency > 0, jnp.log(jnp.maximum(frequency, 1e-9)), -20.0)

    return policy


def measure(observer, opponent, game, games: int, key, *, particles: int, epsilon: float,
            models: tuple[str, ...] = KEPT) -> dict:
    """Play ``games`` games of ``observer`` against ``opponent`` and score the beliefs of
    ``models`` (from :data:`KEPT`) and the references ``uniform`` and ``half``.

    Returns ``{model: {"held": float[D], "hand": float[D], "log_lik": float[D]}}`` over the
    ``D`` scored decisions, plus their ``"turn"`` (turns played before them) and ``"game"``
    (``int[D]`` numpy arrays)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from beastybar_jax.agents import batch_act
    from beastybar_jax.games.beastybar import belief as B

    evaluate = observer.search_setup.evaluator(jax.random.key(0))
    policies = {"network": lambda states: evaluate(states)[0], "opponent": oracle_policy(opponent, game)}
    kept = tuple(models)

    def scores(belief, true_hand, unseen):
        p = jnp.clip(belief, 1e-6, 1.0 - 1e-6)
        log_lik = jnp.sum(jnp.where(unseen, jnp.where(true_hand, jnp.log(p), jnp.log1p(-p)), 0.0), axis=-1)
        return {"held": jnp.sum(jnp.where(true_hand, belief, 0.0), axis=-1), "log_lik": log_lik}

    def play(key):
        deal_key, turn_key = jax.random.split(key)
        states = jax.vmap(game.init)(jax.random.split(deal_key, games))
        seat = (jnp.arange(games) % 2).astype(jnp.int32)
        beliefs = {name: jax.vmap(B.uniform_belief)(states, seat) for name in kept}

        def turn(carry, key):
            states, beliefs = carry
            # The observer's decision, scored before it moves: the beliefs have seen every
            # move of the opponent so far.
            true_hand = jnp.take_along_axis(states.hand, (1 - seat)[:, None, None], axis=1)[:, 0]
            unseen = jax.vmap(B.unseen_species)(states, seat)
            hand_size = jnp.sum(true_hand, axis=-1)
            hidden = jnp.sum(unseen, axis=-1) > hand_size
            scored = (states.current_player == seat) & ~states.terminated & hidden
            uniform = jax.vmap(B.uniform_belief)(states, seat)
            out = {name: scores(beliefs[name], true_hand, unseen) for name in kept}
            out["uniform"] = scores(uniform, true_hand, unseen)
            # "half": two of the hand's cards known, the rest of the hand as likely as the rest.
            known = jnp.minimum(2, hand_size)
            rest = jnp.maximum(jnp.sum(unseen, axis=-1) - known, 1)
            out["half"] = {"held": known + (hand_size - known) ** 2 / rest, "log_lik": jnp.full(games, jnp.nan)}
            out["hand"], out["scored"], out["turn"] = hand_size.astype(jnp.float32), scored, states.turn

            # One key per purpose, so the games do not depend on which models are kept.
            own = batch_act(observer)(states, jax.random.split(jax.random.fold_in(key, 0), games))
            other = batch_act(opponent)(states, jax.random.split(jax.random.fold_in(key, 1), games))
            action = jnp.where(states.current_player == seat, own, other).astype(jnp.int32)
            beliefs = {name: B.update_belief(beliefs[name], seat, states, action,
                                             jax.random.fold_in(key, 2 + KEPT.index(name)), policies[name],
                                             game.legal_action_mask, num_particles=particles, epsilon=epsilon)
                       for name in kept}
            return (jax.vmap(game.step)(states, action), beliefs), out

        _, history = jax.lax.scan(turn, (states, beliefs), jax.random.split(turn_key, game.max_game_length))
        return history

    history = jax.device_get(jax.jit(play)(key))
    scored = np.asarray(history["scored"])
    names = ("uniform", *kept, "half")
    result = {name: {k: np.asarray(v)[scored] for k, v in history[name].items()} for name in names}
    for name in names:
        result[name]["hand"] = np.asarray(history["hand"])[scored]
    result["turn"] = np.asarray(history["turn"])[scored]
    result["game"] = np.broadcast_to(np.arange(games), scored.shape)[scored]
    return result


def summary(result: dict, model: str, turns: tuple[int, int] | None = None) -> dict:
    """Means of ``model``'s scores (over the decisions with ``turns[0] <= turn < turns[1]``)."""
    import numpy as np

    chosen = np.ones_like(result["turn"], bool) if turns is None else (
        (result["turn"] >= turns[0]) & (result["turn"] < turns[1]))
    scores, uniform = result[model], result["uniform"]
    held, base, hand = (np.mean(x[chosen]) if chosen.any() else np.nan
                        for x in (scores["held"], uniform["held"], scores["hand"]))
    return {"decisions": int(chosen.sum()), "held": held, "hand": hand,
            "gain": (held - base) / (hand - base) if hand > base else np.nan,
            "log_lik": np.mean(scores["log_lik"][chosen]) if chosen.any() else np.nan}


def print_results(measured: list, plain: bool) -> None:
    from evaluate import _print_table  # a sibling script (experiments/ is on sys.path)

    rows, by_turn = [], []
    for opponent, result in measured:
        for model in (m for m in MODELS if m in result):
            s = summary(result, model)
            rows.append([opponent, model, str(s["decisions"]), f"{s['held']:.3f} of {s['hand']:.2f}",
                         f"{100 * s['gain']:.1f}%", "" if s["log_lik"] != s["log_lik"] else f"{s['log_lik']:.3f}"])
            by_turn.append([opponent, model] + [f"{100 * summary(result, model, t)['gain']:.1f}%"
                                                 for t in TURN_BUCKETS])
    if _print_table("the opponent's hand: the belief's cards held (gain: of the way to knowing it)",
                    ["opponent", "model", "decisions", "held", "gain", "log-lik"], rows, ("opponent", "model"),
                    plain, None):
        print()
    _print_table("gain by turns played", ["opponent", "model"] + [f"turns {a}-{b - 1}" for a, b in TURN_BUCKETS],
                 by_turn, ("opponent", "model"), plain, None)


def main(argv=None) -> int:
    args = parse_args(argv)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    import time

    import jax

    from evaluate import _interrupted_line, _specs
    from beastybar_jax.agents import make_agent
    from beastybar_jax.games import get_game
    from beastybar_jax.seeds import seed_key
    from beastybar_jax.training.compilation import enable_compilation_cache
    from beastybar_jax.training.interrupt import Interrupted, active_command, when_forced

    enable_compilation_cache()
    game = get_game("beastybar")
    try:
        observer = make_agent(args.observer, game=game)
        if observer.search_setup is None or not observer.search_setup.learned_prior:
            raise ValueError(f"--observer {args.observer!r}: a network agent is needed (its raw policy is "
                             f"the network model), e.g. champion or checkpoint:runs/quick")
        opponents = [make_agent(n, game=game) for n in _specs(args.opponents, "--opponents")]
    except ValueError as e:  # AgentSpecError, CheckpointError
        print(f"belief.py: error: {e}", file=sys.stderr)
        return 2
    measured = []

    def stopped(signum: int) -> str:  # the finished opponents' tables, then the one line
        if measured:
            print_results(measured, args.plain)
        return _interrupted_line(signum, len(measured), len(opponents), unit="opponent")

    when_forced(stopped)  # a signal while an opponent's games compile or play
    signals = active_command()
    try:
        for index, opponent in enumerate(opponents):
            start = time.perf_counter()
            result = measure(observer, opponent, game, args.games, jax.random.fold_in(seed_key(args.seed), index),
                             particles=args.particles, epsilon=args.epsilon, models=args.models)
            measured.append((opponent.name, result))
            log(f"{opponent.name}: {len(result['turn'])} decisions scored in {time.perf_counter() - start:.0f} s")
            if signals is not None:
                signals.check()
    except Interrupted as e:
        log(stopped(e.signum))
        return e.exit_code
    finally:
        when_forced(None)
    print_results(measured, args.plain)
    return 0


if __name__ == "__main__":
    from beastybar_jax.training.interrupt import run_command

    run_command(main)
