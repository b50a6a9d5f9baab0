"""Play Beasty Bar in the terminal against any agent.

    python experiments/play.py --opponent heuristic
    python experiments/play.py --opponent checkpoint:runs/x@sims=64 --seat first --seed 3

Each turn shows the table from your side (your hand, the queue, both bars and
THAT'S IT piles; the opponent's hand and both decks stay hidden) and your legal
moves, numbered. Type a number or a move's name (a unique beginning is enough,
e.g. "lion" or "parrot on queue place 1"). Commands: "help", "table", "quit".
After each move you are told what happened: cards that entered the bar or went to
THAT'S IT, and the queue after it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

import jax
import numpy as np

from beastybar_jax import game
from beastybar_jax.agents import AGENT_NAMES, make_agent
from beastybar_jax.game import cards as C

HELP = ("Type the number of a move or its name (a unique beginning is enough, e.g. 'lion'). "
        "Commands: 'table' shows the table again, 'help' this text, 'quit' ends the game.")


class QuitGame(Exception):
    """The human asked to stop (``quit``, end of input or Ctrl-C)."""


def _card(card: int, human: int) -> str:
    owner, species = divmod(int(card), C.NUM_SPECIES)
    whose = "yours" if owner == human else "opponent's"
    return f"{C.SPECIES_NAMES[species]} ({whose})"


def _new_cards(before, after, human: int) -> list[str]:
    """Cards in ``after`` (bool[2, 12]) but not ``before``."""
    new = np.asarray(after) & ~np.asarray(before)
    return [_card(p * C.NUM_SPECIES + s, human) for p, s in zip(*np.nonzero(new))]


def move_text(action: int, state, human: int) -> str:
    """A move's name with the parrot's target named from the human's side."""
    from beastybar_jax.game.actions import ACTION_ACTING_SPECIES, ACTION_PARAM

    text = game.action_name(action)
    queue = [int(c) for c in np.asarray(state.queue) if c >= 0]
    place = int(ACTION_PARAM[action])
    if int(ACTION_ACTING_SPECIES[action]) == C.PARROT and place < len(queue):
        text += f" (the {_card(queue[place], human)})"
    return text


def describe_move(before, after, action: int, human: int) -> str:
    """Words for what ``action`` did: who played what, and its effect on the table."""
    mover = int(before.current_player)
    who = "You play" if mover == human else "Opponent plays"
    lines = [f"{who} {move_text(action, before, human)}."]
    entered = _new_cards(before.bar, after.bar, human)
    gone = _new_cards(before.thats_it, after.thats_it, human)
    if entered:
        lines.append("  Entered the bar: " + ", ".join(entered) + ".")
    if gone:
        lines.append("  Sent to THAT'S IT: " + ", ".join(gone) + ".")
    queue = [int(c) for c in np.asarray(after.queue) if c >= 0]
    lines.append("  Queue now (front first): " + (", ".join(_card(c, human) for c in queue) or "empty") + ".")
    if mover == human:
        drawn = np.asarray(after.hand[human]) & ~np.asarray(before.hand[human])
        for s in np.flatnonzero(drawn):
            lines.append(f"  You draw the {C.SPECIES_NAMES[s]}.")
    return "\n".join(lines)


def parse_move(text: str, legal_actions: list[int], state, human: int) -> tuple[int | None, str | None]:
    """``(action, None)`` for a valid choice, else ``(None, message)``."""
    text = " ".join(text.strip().lower().split())
    if not text:
        return None, "Please type a move number or name (or 'help')."
    if text.lstrip("-").isdigit():
        number = int(text)
        if 1 <= number <= len(legal_actions):
            return legal_actions[number - 1], None
        return None, f"{number} is not a move number; choose 1 to {len(legal_actions)}."
    names = {a: move_text(a, state, human).lower() for a in legal_actions}
    plain = {a: game.action_name(a).lower() for a in legal_actions}
    exact = [a for a in legal_actions if text in (names[a], plain[a])]
    if len(exact) == 1:
        return exact[0], None
    prefix = [a for a in legal_actions if names[a].startswith(text) or plain[a].startswith(text)]
    if len(prefix) == 1:
        return prefix[0], None
    if len(prefix) > 1:
        options = "; ".join(names[a] for a in prefix)
        return None, f"'{text}' could mean several moves ({options}); type its number."
    species = text.split()[0]
    if species in C.SPECIES_NAMES:
        return None, f"No legal move plays the {species} now (you don't hold it, or it has no target)."
    return None, f"'{text}' is not a move. {HELP}"


def _ask(input_fn: Callable[[str], str], prompt: str) -> str:
    try:
        return input_fn(prompt)
    except (EOFError, KeyboardInterrupt):
        raise QuitGame from None


def play_game(opponent, *, seat: str = "random", seed: int = 0,
              input_fn: Callable[[str], str] = input, print_fn: Callable[..., None] = print) -> dict | None:
    """One game, human against ``opponent`` (an ``Agent``). Returns the final scores
    ``{"you": int, "opponent": int, "result": "win"|"draw"|"loss"}``, or None if the
    human quit."""
    key = jax.random.key(seed)
    deal_key, key = jax.random.split(key)
    state = game.init(deal_key)
    starter = int(state.current_player)
    if seat == "random":
        key, seat_key = jax.random.split(key)
        seat = "first" if bool(jax.random.bernoulli(seat_key)) else "second"
    human = starter if seat == "first" else 1 - starter
    step = jax.jit(game.step)
    legal_mask = jax.jit(game.legal_action_mask)
    opponent_act = jax.jit(opponent.act)

    print_fn(f"You are P{human} and move {seat}; your opponent is {opponent.name}. {HELP}")
    try:
        while not bool(state.terminated):
            if int(state.current_player) == human:
                legal = [int(a) for a in np.flatnonzero(np.asarray(legal_mask(state)))]
                print_fn("")
                print_fn(game.render_state(state, viewer=human))
                print_fn(f"(you are P{human})  Your moves:")
                for number, action in enumerate(legal, start=1):
                    print_fn(f"  {number}. {move_text(action, state, human)}")
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
                        print_fn(game.render_state(state, viewer=human))
                        continue
                    action, message = parse_move(text, legal, state, human)
                    if message:
                        print_fn(message)
            else:
                key, act_key = jax.random.split(key)
                action = int(opponent_act(state, act_key))
            after = step(state, action)
            print_fn(describe_move(state, after, action, human))
            state = after
    except QuitGame:
        print_fn("\nGame abandoned. Goodbye!")
        return None

    scores = np.asarray(state.scores)
    mine, theirs = int(scores[human]), int(scores[1 - human])
    result = "win" if mine > theirs else ("draw" if mine == theirs else "loss")
    print_fn("")
    print_fn(game.render_state(state, viewer=human))
    verdict = {"win": "You win!", "draw": "It's a draw.", "loss": "You lose."}[result]
    print_fn(f"Final score: you {mine} - opponent {theirs}. {verdict}")
    return {"you": mine, "opponent": theirs, "result": result}


def main(argv=None, input_fn: Callable[[str], str] = input, print_fn: Callable[..., None] = print) -> int:
    parser = argparse.ArgumentParser(description="Play Beasty Bar against an agent in the terminal.",
                                     epilog="opponents: " + ", ".join(AGENT_NAMES))
    parser.add_argument("--opponent", default="heuristic", help="registry spec (default: %(default)s)")
    parser.add_argument("--seat", choices=("first", "second", "random"), default="random",
                        help="move first, second, or let chance decide (default)")
    parser.add_argument("--seed", type=int, default=None, help="deal seed (default: random)")
    args = parser.parse_args(argv)
    from beastybar_jax.training.compilation import enable_compilation_cache

    enable_compilation_cache()  # the opponent's compile is paid once, not at every game
    seed = args.seed if args.seed is not None else int(np.random.default_rng().integers(2**31))
    try:
        opponent = make_agent(args.opponent)
    except ValueError as e:  # unknown names, bad options, unreadable checkpoints
        print_fn(f"error: {e}")
        return 2
    print_fn(f"Deal seed {seed}. Preparing the opponent (the first move compiles, which can take a while)...")
    try:
        play_game(opponent, seat=args.seat, seed=seed, input_fn=input_fn, print_fn=print_fn)
    except KeyboardInterrupt:  # Ctrl-C while the opponent thinks
        print_fn("\nInterrupted. Goodbye!")
    return 0


if __name__ == "__main__":
    sys.exit(main())
