"""What the hidden cards cost a searching agent: the same agent played against the same
opponents on the same deals, with its search run on worlds drawn from four sights.

    python experiments/value_of_information.py --agent champion@sims=32 --opponents heuristic,outcome_heuristic --games 1000

- ``fair``: the agent as it is: worlds sampled from what the mover knows;
- ``half``: worlds that also know two of the cards in the opponent's hand (two at random
  in each world; the other two drawn fairly): a ceiling for a belief that pins down half
  of that hand;
- ``hand``: worlds that also know the opponent's hand (both decks still shuffled): a
  ceiling on what any belief over the opponent's hand could give this search;
- ``all``: the true state, the opponent's hand and the order of both decks.

A diagnostic that breaks information-set fairness on purpose, to bound what a better
belief over the opponent's cards could buy (docs/strength.md, "What the hidden cards
cost"). The seeing agents are the agent built for a copy of the game whose
``sample_world`` draws from more than the mover knows: only their worlds differ. The network
is the same; at the root it reads the mover's observation, below it the observations of
the seeing worlds (at the opponent's nodes, the opponent's true hand). They are not agents
of the registry and nothing else in the project uses them.

Every match is tabulated as ``evaluate.py --decided`` does: where each was decided (the
exact result at the endgame's entry) says whether knowing the cards wins the middle game or
only the endgame. The fair matches are those of ``evaluate.py --agent SPEC --opponents ...
--games N --seed S --decided`` (same deals and draws). Bad specs end in one line and exit
code 2; Ctrl-C (or SIGTERM) stops after the match being played, prints the finished ones and
exits with 130 (143).
"""

from __future__ import annotations

import argparse
import sys


def parse_args(argv=None) -> argparse.Namespace:
    from beastybar_jax.cli import OneLineParser, int_in_range, seed as seed_arg

    parser = OneLineParser(description=__doc__.split("\n\n")[0],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", required=True,
                        help="a searching agent spec: a network with @sims=N, or mcts-N")
    parser.add_argument("--opponents", default="heuristic,outcome_heuristic",
                        help="comma-separated specs (default %(default)s)")
    parser.add_argument("--games", type=int_in_range(1, 10_000_000), default=1000,
                        help="games per pairing and sight (default %(default)s; each deal is played twice with "
                             "seats swapped, so an odd number is rounded up)")
    parser.add_argument("--seed", type=seed_arg, default=0, help="the matches' seed, as evaluate.py's "
                                                                 "(default %(default)s)")
    parser.add_argument("--sights", default=",".join(SIGHTS),
                        help="comma-separated, from fair, half, hand, all (default %(default)s)")
    parser.add_argument("--plain", action="store_true", help="tables as plain aligned text")
    args = parser.parse_args(argv)
    args.sights = [x.strip() for x in args.sights.split(",") if x.strip()]
    unknown = [x for x in args.sights if x not in SIGHTS]
    if unknown or not args.sights:
        parser.error(f"--sights: {', '.join(unknown) or 'none given'}; choose from {', '.join(SIGHTS)}")
    if len(set(args.sights)) != len(args.sights):
        parser.error(f"--sights names a sight twice: {','.join(args.sights)}")
    return args


SIGHTS = ("fair", "half", "hand", "all")


def seeing_game(game, sight: str):
    """Beasty Bar (``game``) whose ``sample_world`` sees more than the mover knows:
    ``"half"`` two of the opponent's hand cards (the other two drawn as the fair draw
    draws them, from the rest of the opponent's unseen cards), ``"hand"`` the opponent's
    whole hand (the decks shuffled as the fair draw shuffles them), ``"all"`` the true
    state. ``"fair"`` is ``game`` itself. For this diagnostic only."""
    import jax
    import jax.numpy as jnp

    if sight == "fair":
        return game
    if sight == "all":
        return game._replace(sample_world=lambda state, player, key: state)

    def hand_world(state, player, key):
        mine_key, theirs_key = jax.random.split(key)
        # The mover's fair world keeps their hand and shuffles their deck; the opponent's
        # fair world does the same for the opponent: take each side's rows from its own.
        mine = game.sample_world(state, player, mine_key)
        theirs = game.sample_world(state, 1 - player, theirs_key)
        is_player = (jnp.arange(2) == player)[:, None]
        return state.replace(hand=jnp.where(is_player, mine.hand, theirs.hand),
                             deck=jnp.where(is_player, mine.deck, theirs.deck))

    def half_world(state, player, key):
        known_key, world_key = jax.random.split(key)
        opponent_hand = state.hand[1 - player]
        # Two of the opponent's hand cards, at random, are known: a fair draw for a table
        # where the opponent holds only the other two deals those two from the rest.
        priority = jnp.where(opponent_hand, jax.random.uniform(known_key, opponent_hand.shape), 2.0)
        known = opponent_hand & (jnp.argsort(jnp.argsort(priority)) < 2)
        is_opponent = (jnp.arange(2) == 1 - player)[:, None]
        world = game.sample_world(state.replace(hand=jnp.where(is_opponent, state.hand & ~known, state.hand)),
                                  player, world_key)
        return world.replace(hand=jnp.where(is_opponent, world.hand | known, world.hand))

    return game._replace(sample_world=half_world if sight == "half" else hand_world)


def seeing_agent(spec: str, game, sight: str):
    """The agent ``spec`` names, its search's worlds drawn with ``sight`` (named ``spec``
    plus " seeing half the hand" / " seeing the hand" / " seeing all cards"). Raises
    ``AgentSpecError`` for an agent that does not search."""
    import dataclasses

    from beastybar_jax.agents import AgentSpecError, make_agent

    agent = make_agent(spec, game=seeing_game(game, sight))
    if agent.search_setup is None or agent.search_setup.search is None:
        raise AgentSpecError(f"agent {spec!r} does not search, so it has no worlds to see: "
                             f"name a network with @sims=N (e.g. champion@sims=32) or mcts-N")
    suffix = {"fair": "", "half": " seeing half the hand", "hand": " seeing the hand", "all": " seeing all cards"}[sight]
    return dataclasses.replace(agent, name=spec + suffix)


def print_results(results, plain: bool) -> None:
    """The match table and ``evaluate.py --decided``'s entry table of ``results``."""
    from evaluate import print_entry_table, print_match_table  # a sibling script (experiments/ is on sys.path)

    print_match_table(results, plain)
    print_entry_table(results, plain=plain)


def main(argv=None) -> int:
    args = parse_args(argv)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    from evaluate import _interrupted_line, _specs, play_pairings

    from beastybar_jax.agents import make_agent
    from beastybar_jax.games import get_game
    from beastybar_jax.seeds import seed_key
    from beastybar_jax.training.compilation import enable_compilation_cache
    from beastybar_jax.training.interrupt import when_forced

    enable_compilation_cache()
    game = get_game("beastybar")
    try:
        agents = [seeing_agent(args.agent, game, sight) for sight in args.sights]
        opponents = [make_agent(n, game=game) for n in _specs(args.opponents, "--opponents")]
    except ValueError as e:  # AgentSpecError, CheckpointError
        print(f"value_of_information.py: error: {e}", file=sys.stderr)
        return 2
    games = args.games + args.games % 2
    if games != args.games:
        log(f"note: --games {args.games} rounded up to {games}: each deal is played twice with seats swapped")
    # evaluate.py's key for pairing ``index`` of the opponents: the fair matches are evaluate.py's.
    pairings = [(agent, opponent, index) for agent in agents for index, opponent in enumerate(opponents)]
    finished = []
    results = lambda: [result for result, _ in finished]  # noqa: E731

    def forced(signum: int) -> str:  # a signal while a match compiles or plays: keep the finished ones
        if finished:
            print_results(results(), args.plain)
        return _interrupted_line(signum, len(finished), len(pairings))

    when_forced(forced)
    try:
        signum = play_pairings(pairings, games // 2, seed_key(args.seed), game, record_entry=True, log=log,
                               finished=finished)
    finally:
        when_forced(None)
    if finished:
        print_results(results(), args.plain)
    if signum:
        log(_interrupted_line(signum, len(finished), len(pairings)))
        return 128 + signum
    return 0


if __name__ == "__main__":
    from beastybar_jax.training.interrupt import run_command

    run_command(main)
