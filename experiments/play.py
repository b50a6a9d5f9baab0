"""Play a game in the terminal against any agent (Beasty Bar by default).

    python experiments/play.py --opponent heuristic
    python experiments/play.py --opponent checkpoint:runs/x@sims=64 --seat first --seed 3
    python experiments/play.py --game tictactoe --opponent minimax
    python experiments/play.py --replay game.json      # tell a recorded game

Each turn shows the table from your side (in Beasty Bar your hand, the queue, both bars
and THAT'S IT piles; the opponent's hand and both decks stay hidden) and your legal
moves, numbered. Type a number or a move's name (a unique beginning is enough, e.g.
"lion" or "parrot on queue place 1"). Commands: "help", "table", "quit" (Ctrl-C ends the
game at any moment: exit code 130). After each
move you are told what happened (in Beasty Bar: cards that entered the bar or went to
THAT'S IT, and the queue after it). Everything shown comes from the game's own
renderers (``Game.ui``: ``render_state``, ``render_action``, ``describe_move``), so any
registered game can be played.
"""

from __future__ import annotations

import concurrent.futures
import re
import signal
import sys
import time
from typing import Callable

INTERRUPTED = 128 + signal.SIGINT  # a command line's exit code after Ctrl-C, as training.interrupt's

try:  # jax takes seconds to load: Ctrl-C meanwhile is one line, as at any other moment
    import jax

    from beastybar_jax.agents import agent_names, default_opponent, make_agent
    from beastybar_jax.cli import OneLineParser, deal_seed
    from beastybar_jax.games import GAME_NAMES, Game, get_game
    from beastybar_jax.playing import (RecordError, check_record, deal, describe_move, human_seat, legal_actions,
                                       move_text, outcome, replay, secret_deal_seed, step)
    from beastybar_jax.training.compilation import compile_in_background, interactive_compiler_options
except KeyboardInterrupt:
    if __name__ != "__main__":
        raise
    print("interrupted by SIGINT", file=sys.stderr)
    sys.exit(INTERRUPTED)

HELP = ("Type the number of a move or its name (a unique beginning is enough, e.g. 'lion'). "
        "Commands: 'table' shows the table again, 'help' this text, 'quit' ends the game.")


class QuitGame(Exception):
    """The human asked to stop (``quit`` or end of input)."""


def parse_move(game: Game, text: str, legal_actions: list[int], state,
               human: int) -> tuple[int | None, str | None]:
    """``(action, None)`` for a valid choice, else ``(None, message)``."""
    text = " ".join(text.strip().lower().split())
    if not text:
        return None, "Please type a move number or name (or 'help')."
    if re.fullmatch(r"-?[0-9]+", text):  # ASCII digits only: int() refuses some that isdigit() takes
        if len(text) <= 9 and 1 <= int(text) <= len(legal_actions):
            return legal_actions[int(text) - 1], None
        shown = text if len(text) <= 12 else text[:12] + "..."
        return None, f"{shown} is not a move number; choose 1 to {len(legal_actions)}."
    names = {a: move_text(game, a, state, human).lower() for a in legal_actions}
    plain = {a: game.ui.action_names[a].lower() for a in legal_actions} if game.ui.action_names else names
    exact = [a for a in legal_actions if text in (names[a], plain[a])]
    if len(exact) == 1:
        return exact[0], None
    prefix = [a for a in legal_actions if names[a].startswith(text) or plain[a].startswith(text)]
    if len(prefix) == 1:
        return prefix[0], None
    if len(prefix) > 1:
        options = "; ".join(names[a] for a in prefix)
        return None, f"'{text}' could mean several moves ({options}); type its number."
    if any(name.lower().startswith(text) for name in game.ui.action_names):
        return None, f"No legal move is '{text}' now (see the numbered list)."
    return None, f"'{text}' is not a move. {HELP}"


def _ask(input_fn: Callable[[str], str], prompt: str) -> str:
    try:
        return input_fn(prompt)
    except EOFError:
        raise QuitGame from None


def play_game(opponent, *, game: Game | None = None, seat: str = "random", seed: int = 0,
              input_fn: Callable[[str], str] = input, print_fn: Callable[..., None] = print) -> dict | None:
    """One game of ``game`` (default Beasty Bar), human against ``opponent`` (an
    ``Agent``). Returns ``{"result": "win"|"draw"|"loss"}`` (with ``"you"`` and
    ``"opponent"`` points for games that count points), or None if the human quit (or
    input ended). Ctrl-C (``KeyboardInterrupt``) abandons the game and is raised on."""
    game = get_game("beastybar") if game is None else game
    # The opponent's program compiles in the background from now on (from the state's
    # shapes: the deal itself runs beside it), while the table is shown and the player
    # thinks; a move that needs it waits, the seconds shown.
    example = jax.eval_shape(game.init, jax.random.key(0))
    key_shape = jax.eval_shape(lambda: jax.random.key(0))
    compiling = compile_in_background(  # traced there too: the deal runs meanwhile
        lambda: jax.jit(opponent.act).lower(example, key_shape).compile(interactive_compiler_options()))
    state, key = deal(game, seed)
    human, key = human_seat(state, key, seat)
    seat = "first" if human == int(state.current_player) else "second"
    step(game, state, legal_actions(game, state)[0])  # compiled beside the opponent, not after its move
    opponent_act = None

    print_fn(f"You are P{human} and move {seat}; your opponent is {opponent.name}. {HELP}")
    try:
        while not bool(state.terminated):
            if int(state.current_player) == human:
                legal = legal_actions(game, state)
                print_fn("")
                print_fn(game.ui.render_state(state, viewer=human))
                print_fn(f"(you are P{human})  Your moves:")
                for number, action in enumerate(legal, start=1):
                    print_fn(f"  {number}. {move_text(game, action, state, human)}")
                action = None
                while action is None:
                    text = _ask(input_fn, "Your move> ")
                    command = text.strip().lower()
                    if command in ("q", "quit", "exit"):
                        raise QuitGame
                    if command in ("h", "help", "?"):
                        print_fn(HELP)
                        continue
                    if command in ("t", "table"):
                        print_fn(game.ui.render_state(state, viewer=human))
                        continue
                    action, message = parse_move(game, text, legal, state, human)
                    if message:
                        print_fn(message)
            else:
                key, act_key = jax.random.split(key)
                if opponent_act is None:
                    opponent_act = _compiled(compiling, opponent.name, print_fn)
                action = int(opponent_act(state, act_key))
            after = step(game, state, action)
            print_fn(describe_move(game, state, after, action, human))
            state = after
    except QuitGame:
        print_fn("\nGame abandoned. Goodbye!")
        return None
    except KeyboardInterrupt:  # from input_fn or play_game used as a library (the command line's Ctrl-C exits at once)
        print_fn("\nGame abandoned. Goodbye!")
        raise

    result = outcome(game, state, human)
    print_fn("")
    print_fn(game.ui.render_state(state, viewer=human))
    verdict = {"win": "You win!", "draw": "It's a draw.", "loss": "You lose."}[result["result"]]
    if "you" not in result:
        print_fn(f"Final result: {verdict}")
    else:
        print_fn(f"Final score: you {result['you']} - opponent {result['opponent']}. {verdict}")
    return result


def _compiled(future: concurrent.futures.Future, name: str, print_fn: Callable[..., None]):
    """The opponent's compiled function; while it still compiles, the seconds so far
    (rewritten in place on a terminal), then how long it took."""
    tty = sys.stderr.isatty()
    waited = not future.done()
    while not future.done():
        if tty:
            print(f"\r{name} is compiling its first move: {time.monotonic() - future.started:.0f} s",
                  end="", file=sys.stderr, flush=True)
        concurrent.futures.wait([future], timeout=1.0)
    compiled = future.result()
    if waited:
        if tty:
            print("\r" + " " * 60 + "\r", end="", file=sys.stderr, flush=True)
        print_fn(f"({name} compiled in {time.monotonic() - future.started:.0f} s)")
    return compiled


def print_error(text: str) -> None:
    print(text, file=sys.stderr)


def replay_game(path: str, print_fn: Callable[..., None] = print,
                error_fn: Callable[[str], None] = print_error) -> int:
    """Tell a recorded game (a JSON record, see ``beastybar_jax.playing``) move by move,
    as a spectator who sees every card; 0, or 2 for an unreadable record (said through
    ``error_fn``: standard error)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        record = check_record(text)
        states = replay(record)
    except UnicodeDecodeError:
        error_fn(f"error: {path} is not a text file (a game record is JSON)")
        return 2
    except (OSError, RecordError) as e:
        error_fn(f"error: {e}")
        return 2
    game = get_game(record["game"])
    print_fn(f"{game.name}, deal seed {record['seed']}: P0 {record['players'][0]} - P1 {record['players'][1]}")
    for action, before, after in zip(record["moves"], states, states[1:]):
        print_fn(describe_move(game, before, after, action, None))
    print_fn("")
    print_fn(game.ui.render_state(states[-1], viewer=None))
    return 0


def main(argv=None, input_fn: Callable[[str], str] = input, print_fn: Callable[..., None] = print,
         error_fn: Callable[[str], None] = print_error) -> int:
    parser = OneLineParser(description="Play a game (Beasty Bar by default) against an agent in the terminal.",
                                     epilog="opponents (Beasty Bar): " + ", ".join(agent_names("beastybar")))
    parser.add_argument("--game", default="beastybar", choices=GAME_NAMES, help="the game (default: %(default)s)")
    parser.add_argument("--opponent", default=None,
                        help="registry spec (default: the game's strongest baseline: heuristic, minimax)")
    parser.add_argument("--seat", choices=("first", "second", "random"), default="random",
                        help="move first, second, or let chance decide (default)")
    parser.add_argument("--seed", type=deal_seed, default=None,
                        help="deal seed, in [0, 2**53) (default: a random one, told when the game ends)")
    parser.add_argument("--replay", metavar="RECORD.json", default=None,
                        help="tell a recorded game (from the web app's Records page) instead of playing")
    args = parser.parse_args(argv)
    if args.replay:
        return replay_game(args.replay, print_fn, error_fn)
    from beastybar_jax.training.compilation import enable_compilation_cache
    from beastybar_jax.training.interrupt import signal_name, when_forced

    enable_compilation_cache()  # the opponent's compile is paid once, not at every game
    seed = args.seed if args.seed is not None else secret_deal_seed()
    game = get_game(args.game)
    try:
        opponent = make_agent(default_opponent(game) if args.opponent is None else args.opponent, game=game)
    except ValueError as e:  # unknown names, bad options, unreadable checkpoints, wrong game
        error_fn(f"error: {e}")
        return 2
    # A random deal's seed is told when the game ends, Ctrl-C included (the command line's
    # line, see __main__): it gives away every hidden card.
    dealt = f"Deal seed {seed}" if args.seed is not None else "A random deal"
    told = f"the deal's seed was {seed}: --seed {seed} deals this game again" if args.seed is None else ""
    when_forced(lambda signum: f"\ninterrupted by {signal_name(signum)}: game abandoned" + (told and f"; {told}"))
    print_fn(f"{dealt}. The opponent compiles its first move meanwhile (on a CPU, a few seconds).")
    code = 0
    try:
        play_game(opponent, game=game, seat=args.seat, seed=seed, input_fn=input_fn, print_fn=print_fn)
    except KeyboardInterrupt:
        code = INTERRUPTED
    if told:
        print_fn(f"{told[0].upper()}{told[1:]}.")
    return code


if __name__ == "__main__":
    from beastybar_jax.training.interrupt import CommandSignals, exit_command

    # Nothing to save: Ctrl-C (or SIGTERM) at any moment, at the prompt or in the middle of
    # a compile (where a KeyboardInterrupt can be swallowed by a JAX callback), ends the
    # game at once with one line (main's) and 130 (143).
    with CommandSignals(grace_seconds=0):
        exit_code = main()
    exit_command(exit_code)
