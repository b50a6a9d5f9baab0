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


def run(argv, script, errors=None):
    """``(exit code, what was printed)``; errors (standard error) into ``errors``, a list."""
    printed = []
    code = play.main(argv, input_fn=script, print_fn=lambda *a: printed.append(" ".join(map(str, a))),
                     error_fn=(errors if errors is not None else printed).append)
    return code, "\n".join(printed)


def test_full_game_with_bad_input():
    script = Script(["", "banana", "0", "99", "\u00b2", "--1", "9" * 5000, "help", "table", "  2 "], then="1")
    code, out = run(["--opponent", "random", "--seat", "first", "--seed", "3"], script)
    assert code == 0
    assert "Traceback" not in out
    assert "Please type a move number or name" in out
    assert "'banana' is not a move" in out
    assert "0 is not a move number" in out and "99 is not a move number" in out
    # digits int() refuses (a superscript, a doubled sign, past Python's 4,300-digit limit) are answered too
    assert "'\u00b2' is not a move" in out and "'--1' is not a move" in out
    assert "999999999999... is not a move number" in out
    assert "Commands:" in out  # help
    assert "Your moves:" in out and "1. " in out
    assert re.search(r"Opponent plays .+\.", out)  # the opponent's moves are explained
    assert "Queue now (front first)" in out
    final = re.search(r"Final score: you (\d+) - opponent (\d+)\. (You win!|It's a draw\.|You lose\.)", out)
    assert final, out[-2000:]
    # every bad line was answered with a new prompt: 10 scripted lines + one per later move
    assert len(script.prompts) >= 10 + 9


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


@pytest.mark.parametrize("error, exit_code", [(EOFError, 0), (KeyboardInterrupt, 130)])
def test_end_of_input_and_ctrl_c(error, exit_code):
    """``main`` as a library: end of input quits the game (0); a KeyboardInterrupt from
    the input function abandons it too, and ``main`` returns 130, with no traceback.
    (The command line's own Ctrl-C: the subprocess test below.)"""
    def raiser(prompt=""):
        raise error

    code, out = run(["--opponent", "random", "--seat", "first", "--seed", "5"], raiser)
    assert code == exit_code and "Game abandoned. Goodbye!" in out and "Traceback" not in out


def test_a_random_deal_keeps_its_seed_secret_until_the_game_ends(capsys):
    """The seed gives away every hidden card: a random deal's is told only at the end,
    drawn from 2**53 seeds (the deal seeds' range, ``beastybar_jax.seeds``)."""
    code, out = run(["--opponent", "random", "--seat", "first"], Script(["quit"]))
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("A random deal.") and "Game abandoned" in out
    told = re.fullmatch(r"The deal's seed was (\d+): --seed \1 deals this game again\.", lines[-1])
    assert told and 0 <= int(told.group(1)) < 2**53
    assert not any(told.group(1) in line for line in lines[:-1])
    code, out = run(["--opponent", "random", "--seat", "first", "--seed", "3"], Script(["quit"]))
    assert out.splitlines()[0].startswith("Deal seed 3.") and "The deal's seed" not in out
    for bad, words in ((str(2**53), "in [0, 2**53)"), ("-1", "in [0, 2**53)"), ("x", "expected an integer deal seed")):
        with pytest.raises(SystemExit) as exit_info:
            run(["--seed", bad], Script([]))
        assert exit_info.value.code == 2 and words in capsys.readouterr().err


def test_every_seed_deals_its_own_game():
    """``jax.random.key`` keeps a seed's low 32 bits only (without 64-bit mode), so seed
    2**32 + 11 would deal seed 11's game; ``seed_key`` gives every 63-bit seed its own
    key and leaves the keys of smaller seeds as they were."""
    import jax
    import numpy as np

    from beastybar_jax.games import get_game
    from beastybar_jax.playing import deal
    from beastybar_jax.seeds import fold_in_seed, seed_key

    data = lambda key: np.asarray(jax.random.key_data(key)).tolist()  # noqa: E731
    for small in (0, 11, 2**31, 2**32 - 1):
        assert data(seed_key(small)) == data(jax.random.key(small))
    keys = [data(seed_key(s)) for s in (11, 2**32 + 11, 2**62 + 11, 2**63 - 1)]
    assert len({tuple(k) for k in keys}) == 4
    folded = [data(fold_in_seed(seed_key(1), s)) for s in (5, 2**32 + 5, 2**52 + 5)]
    assert folded[0] == data(jax.random.fold_in(seed_key(1), 5)) and len({tuple(k) for k in folded}) == 3
    game = get_game("beastybar")
    hands = {s: np.asarray(deal(game, s)[0].deck).tolist() for s in (11, 2**32 + 11)}
    assert hands[11] != hands[2**32 + 11]
    for bad in (2**53, -1, True, 1.5):
        with pytest.raises(ValueError, match="deal seed"):
            deal(game, bad)
    for bad in (2**63, -1, True):
        with pytest.raises(ValueError, match=r"\[0, 2\*\*63\)"):
            seed_key(bad)


def test_replay_reads_what_the_record_check_accepts_and_refuses_the_rest(tmp_path):
    """``players`` is optional in a record (a KeyError once), and a file that is not text
    is one line and exit code 2 (a UnicodeDecodeError once)."""
    record = tmp_path / "game.json"
    record.write_text('{"game": "tictactoe", "seed": 1, "moves": [4, 0]}')
    code, out = run(["--replay", str(record)], Script([]))
    assert code == 0 and out.startswith("tictactoe, deal seed 1: P0 ? - P1 ?") and "Traceback" not in out
    record.write_bytes(b"\xff\xfe{not text")
    errors = []
    code, out = run(["--replay", str(record)], Script([]), errors)
    assert code == 2 and out == "" and errors == [f"error: {record} is not a text file (a game record is JSON)"]


def test_the_playing_helpers_refuse_what_the_game_refuses():
    """``playing.step`` truncated a float action (``game.step`` refuses it), ``outcome``
    called an unfinished game a draw, and ``make_agent`` takes a game's name as its
    siblings do."""
    import jax
    import numpy as np

    from beastybar_jax.agents import make_agent
    from beastybar_jax.games import get_game
    from beastybar_jax.playing import deal, legal_actions, outcome, step

    game = get_game("tictactoe")
    state, _ = deal(game, 1)
    for bad in (4.9, True, np.float32(4.0), np.array([4])):
        with pytest.raises(ValueError, match="an action is an integer id"):
            step(game, state, bad)
    assert np.array_equal(step(game, state, np.asarray(4)).board, step(game, state, 4).board)  # an agent's output
    with pytest.raises(ValueError, match="the game goes on"):
        outcome(game, state, 0)
    while not bool(state.terminated):
        state = step(game, state, legal_actions(game, state)[0])
    assert outcome(game, state, 0)["result"] in ("win", "draw", "loss")
    for bad in (2, -1, True):
        with pytest.raises(ValueError, match="player must be one of 0..1"):
            outcome(game, state, bad)
    agent = make_agent("minimax", game="tictactoe")
    assert 0 <= int(agent.act(deal(game, 1)[0], jax.random.key(0))) < game.num_actions

    # One game at a time: a batch of states (a shape error deep in jax before), or another
    # game's state, is named as such.
    batch = jax.tree.map(lambda *x: np.stack(x), deal(game, 1)[0], deal(game, 2)[0])
    for call in (lambda s: step(game, s, 4), lambda s: legal_actions(game, s)):
        with pytest.raises(ValueError, match=r"one tictactoe game at a time .*got a batch of shape \(2,\)"):
            call(batch)
        with pytest.raises(ValueError, match="not a tictactoe state: State"):
            call(deal(get_game("beastybar"), 1)[0])


def test_unknown_opponent_is_a_clear_error():
    errors = []
    code, out = run(["--opponent", "grandmaster"], Script([]), errors)
    assert code == 2 and out == "" and len(errors) == 1  # on standard error, the game never started
    assert "unknown agent 'grandmaster'" in errors[0] and "heuristic" in errors[0]


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


@pytest.mark.parametrize("seed", [["--seed", "3"], []])
def test_ctrl_c_at_the_prompt_ends_the_command_in_one_line(seed):
    """The command line in a subprocess: Ctrl-C at the prompt ends the game at once
    (nothing to save), one line on standard error, exit code 130; a random deal's line
    tells its seed, as the game's end does. The same handler serves a Ctrl-C during a
    compile, where a KeyboardInterrupt could be swallowed."""
    import os
    import select
    import signal
    import subprocess
    import sys
    import time

    from helpers import tiny_training

    process = subprocess.Popen([sys.executable, str(tiny_training.REPO_ROOT / "experiments" / "play.py"),
                                "--opponent", "random", "--seat", "first", *seed],
                               env=tiny_training.cli_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        shown, deadline = b"", time.monotonic() + 300
        while b"Your move> " not in shown:  # stdin stays open: the prompt waits for a line
            assert process.poll() is None and time.monotonic() < deadline, shown[-2000:]
            if select.select([process.stdout], [], [], 1.0)[0]:
                shown += os.read(process.stdout.fileno(), 65536)
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    err = process.stderr.read().decode()
    assert code == 130, err[-2000:]
    lines = [line for line in err.splitlines() if line.strip()]
    if seed:
        assert lines == ["interrupted by SIGINT: game abandoned"]
    else:
        assert len(lines) == 1 and re.fullmatch(r"interrupted by SIGINT: game abandoned; the deal's seed was (\d+): "
                                                r"--seed \1 deals this game again", lines[0]), lines
