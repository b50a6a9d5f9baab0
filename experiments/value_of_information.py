"""What the hidden cards cost a searching agent: the same agent played against the same
opponents on the same deals, with its search run on worlds drawn from three sights.

    python experiments/value_of_information.py --agent champion@sims=32 --opponents heuristic,outcome_heuristic --games 1000

- ``fair``: the agent as it is: worlds sampled from what the mover knows;
- ``hand``: worlds that also know the opponent's hand (both decks still shuffled): the
  most a perfect belief over the opponent's hand could give;
- ``all``: the true state, the opponent's hand and the order of both decks.

A diagnostic that breaks information-set fairness on purpose, to bound what a better
belief over the opponent's cards could buy (docs/strength.md, "What the hidden cards
cost"). The seeing agents are the agent built for a copy of the game whose
``sample_world`` draws from more than the mover knows, so only their trees see more; their
network still sees only the mover's observation. They are not agents of the registry and
nothing else in the project uses them.

Every match is tabulated as ``evaluate.py --decided`` does: where each was decided (the
exact result at the endgame's entry) says whether knowing the cards wins the middle game or
only the endgame. The fair matches are those of ``evaluate.py --agent SPEC --opponents ...
--games N --seed S --decided`` (same deals and draws). Bad specs end in one line and exit
code 2.
"""

from __future__ import annotations

import argparse
import sys
import time


def parse_args(argv=None) -> argparse.Namespace:
    from beastybar_jax.cli import OneLineParser, int_in_range, seed as seed_arg

    parser = OneLineParser(description=__doc__.split("\n\n")[0],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", required=True,
                        help="a searching agent spec: a network with @sims=N, or mcts-N")
    parser.add_argument("--opponents", default="heuristic,outcome_heuristic", help="comma-separated specs")
    parser.add_argument("--games", type=int_in_range(2, 10_000_000), default=1000,
                        help="games per pairing (even: each deal is played twice with seats swapped)")
    parser.add_argument("--seed", type=seed_arg, default=0)
    parser.add_argument("--sights", default=",".join(SIGHTS),
                        help="comma-separated, from fair, hand, all (default %(default)s)")
    parser.add_argument("--plain", action="store_true", help="tables as plain aligned text")
    args = parser.parse_args(argv)
    args.sights = [x.strip() for x in args.sights.split(",") if x.strip()]
    unknown = [x for x in args.sights if x not in SIGHTS]
    if unknown or not args.sights:
        parser.error(f"--sights: {', '.join(unknown) or 'none given'}; choose from {', '.join(SIGHTS)}")
    return args


SIGHTS = ("fair", "hand", "all")


def seeing_game(game, sight: str):
    """Beasty Bar (``game``) whose ``sample_world`` sees more than the mover knows:
    ``"hand"`` the opponent's hand (the decks shuffled as the fair draw shuffles them),
    ``"all"`` the true state. ``"fair"`` is ``game`` itself. For this diagnostic only."""
    if sight == "fair":
        return game
    if sight == "all":
        return game._replace(sample_world=lambda state, player, key: state)

    def sample_world(state, player, key):
        import jax
        import jax.numpy as jnp

        mine_key, theirs_key = jax.random.split(key)
        # The mover's fair world keeps their hand and shuffles their deck; the opponent's
        # fair world does the same for the opponent: take each side's rows from its own.
        mine = game.sample_world(state, player, mine_key)
        theirs = game.sample_world(state, 1 - player, theirs_key)
        is_player = (jnp.arange(2) == player)[:, None]
        return state.replace(hand=jnp.where(is_player, mine.hand, theirs.hand),
                             deck=jnp.where(is_player, mine.deck, theirs.deck))

    return game._replace(sample_world=sample_world)


def seeing_agent(spec: str, game, sight: str):
    """The agent ``spec`` names, its search's worlds drawn with ``sight`` (named ``spec``
    plus " seeing the hand" / " seeing all cards"). Raises ``AgentSpecError`` for an
    agent that does not search."""
    import dataclasses

    from beastybar_jax.agents import AgentSpecError, make_agent

    agent = make_agent(spec, game=seeing_game(game, sight))
    if agent.search_setup is None or agent.search_setup.search is None:
        raise AgentSpecError(f"agent {spec!r} does not search, so it has no worlds to see: "
                             f"name a network with @sims=N (e.g. champion@sims=32) or mcts-N")
    suffix = {"fair": "", "hand": " seeing the hand", "all": " seeing all cards"}[sight]
    return dataclasses.replace(agent, name=spec + suffix)


def main(argv=None) -> int:
    args = parse_args(argv)
    import jax

    from evaluate import _print_table, _row, _specs, print_entry_table  # a sibling script (experiments/ is on sys.path)

    from beastybar_jax.agents import make_agent
    from beastybar_jax.arena import play_match
    from beastybar_jax.games import get_game
    from beastybar_jax.training.compilation import enable_compilation_cache

    enable_compilation_cache()
    game = get_game("beastybar")
    try:
        agents = [seeing_agent(args.agent, game, sight) for sight in args.sights]
        opponents = [make_agent(n, game=game) for n in _specs(args.opponents, "--opponents")]
    except ValueError as e:  # AgentSpecError, CheckpointError
        print(f"value_of_information.py: error: {e}", file=sys.stderr)
        return 2
    games = args.games + args.games % 2
    key = jax.random.key(args.seed)
    results = []
    for agent in agents:
        for index, opponent in enumerate(opponents):
            start = time.perf_counter()
            # evaluate.py's key for pairing ``index``: the fair matches are evaluate.py's.
            results.append(play_match(agent, opponent, games // 2, jax.random.fold_in(key, index), game=game,
                                      record_entry=True))
            print(f"{agent.name} vs {opponent.name}: {results[-1].wins}-{results[-1].draws}-{results[-1].losses} "
                  f"({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    headers = ["agent", "opponent", "games", "W-D-L", "win rate", "score [95% CI]", "margin"]
    if _print_table("duplicate matches (win rate = wins / games)", headers, [_row(r) for r in results],
                    ("agent", "opponent"), args.plain, None):
        print()
    print_entry_table(results, plain=args.plain)
    return 0


if __name__ == "__main__":
    sys.exit(main())
