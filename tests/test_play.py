"""Terminal play, driven by scripted input: bad input gets a message and a new
prompt, the game runs to the end and the final score is printed; quitting and end
of input end the game politely."""

from __future__ import annotations

import re

import pytest

from helpers import experiment

play = experiment("play")


class Script:
    """An ``input`` replacement: the scripted lines, then ``then`` forever (or EOF)."""

    def __init__(self, lines, then=None):
        self.lines, self.then, self.prompts = list(lines), then, []

    def __call__(self, prompt=""):
        self.prompts.append(prompt)
        if self.lines:
            return self.lines.pop(0)
        if self.then is None:
            raise EOFError
        return self.then


def run(argv, script):
    printed = []
    code = play.main(argv, input_fn=script, print_fn=lambda *a: printed.append(" ".join(map(str, a))))
    return code, "\n".join(printed)


def test_full_game_with_bad_input():
    script = Script(["", "banana", "0", "99", "help", "table", "  2 "], then="1")
    code, out = run(["--opponent", "random", "--seat", "first", "--seed", "3"], script)
    assert code == 0
    assert "Traceback" not in out
    assert "Please type a move number or name" in out
    assert "'banana' is not a move" in out
    assert "0 is not a move number" in out and "99 is not a move number" in out
    assert "Commands:" in out  # help
    assert "Your moves:" in out and "1. " in out
    assert re.search(r"Opponent plays .+\.", out)  # the opponent's moves are explained
    assert "Queue now (front first)" in out
    final = re.search(r"Final score: you (\d+) - opponent (\d+)\. (You win!|It's a draw\.|You lose\.)", out)
    assert final, out[-2000:]
    # every bad line was answered with a new prompt: 7 scripted lines + one per later move
    assert len(script.prompts) >= 7 + 9


def test_moves_by_name_and_quit():
    # The opening hand of this deal is known only at run time, so name-based input is
    # checked with the first listed move's own name, read from the printed list.
    names = []

    def by_name(prompt=""):
        if not names:
            raise AssertionError("no move list was printed before the prompt")
        return names[-1] if len(names) < 3 else "quit"

    printed = []

    def capture(*a):
        line = " ".join(map(str, a))
        printed.append(line)
        match = re.match(r"\s+1\. (.+)$", line)
        if match:
            names.append(re.sub(r" \(the .*\)$", "", match.group(1)))

    code = play.main(["--opponent", "random", "--seat", "first", "--seed", "4"], input_fn=by_name, print_fn=capture)
    out = "\n".join(printed)
    assert code == 0 and "Traceback" not in out
    assert f"You play {names[0]}" in out
    assert "Game abandoned. Goodbye!" in out and "Final score" not in out


@pytest.mark.parametrize("error", [EOFError, KeyboardInterrupt])
def test_end_of_input_and_ctrl_c(error):
    def raiser(prompt=""):
        raise error

    code, out = run(["--opponent", "random", "--seat", "first", "--seed", "5"], raiser)
    assert code == 0 and "Goodbye" in out


def test_unknown_opponent_is_a_clear_error():
    code, out = run(["--opponent", "grandmaster"], Script([]))
    assert code == 2 and "unknown agent 'grandmaster'" in out and "heuristic" in out


def test_tic_tac_toe_by_cell_names_to_the_end():
    """Any registered game plays through the game's own renderers: cells by name, the
    opponent's moves told, a result line without points (tic-tac-toe has none)."""
    cells = iter(["b2", "a1", "c1", "a3", "c3", "a2", "c2", "b1", "b3"])

    def next_free_cell(prompt=""):
        return next(cells)  # an occupied cell is refused and the next name is tried

    code, out = run(["--game", "tictactoe", "--opponent", "random", "--seat", "first", "--seed", "2"],
                    next_free_cell)
    assert code == 0 and "Traceback" not in out
    assert "You play X b2." in out and re.search(r"Opponent plays O [abc][123]\.", out)
    assert re.search(r"Final result: (You win!|It's a draw\.|You lose\.)", out), out[-1000:]


def test_an_agent_of_another_game_is_a_clear_error():
    code, out = run(["--game", "tictactoe", "--opponent", "heuristic"], Script([]))
    assert code == 2 and "plays beastybar only" in out and "minimax" in out
