"""The arena: duplicate format, match statistics, Elo fitting, where games are decided
and the evaluate CLI.

Two compiled matches for the whole module (heuristic vs random, random vs random), and
the first again recording where its games were decided; everything else reuses them or
works on hand-made results.
"""

from __future__ import annotations

import json
import math
import pathlib

import jax
import numpy as np
import pytest

from helpers import experiment

from beastybar_jax import arena
from beastybar_jax.games import beastybar as game
from beastybar_jax.agents import make_agent
from beastybar_jax.arena import MatchOutcomes, MatchResult, elo_table, play_match, summarize

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
HEURISTIC_DEALS = 40
RANDOM_DEALS = 100


@pytest.fixture(scope="module")
def heuristic_vs_random():
    heuristic, random = make_agent("heuristic"), make_agent("random")
    deal_keys = jax.random.split(jax.random.key(1), HEURISTIC_DEALS)
    outcomes = jax.device_get(arena._compiled_match(heuristic, random, game.BEASTYBAR, False)(
        deal_keys, jax.random.key(2)))
    return deal_keys, outcomes, summarize(outcomes, "heuristic", "random")


@pytest.fixture(scope="module")
def random_vs_random():
    return play_match(make_agent("random"), make_agent("random"), RANDOM_DEALS, jax.random.key(0), game=game.BEASTYBAR)


def test_duplicate_format_swaps_seats_on_the_same_deals(heuristic_vs_random):
    deal_keys, o, result = heuristic_vs_random
    n = HEURISTIC_DEALS
    assert result.games == 2 * n
    np.testing.assert_array_equal(o.agent_seat, np.repeat([0, 1], n))
    # the same deals (same starting seat) in both halves
    np.testing.assert_array_equal(o.first_player[:n], o.first_player[n:])
    deals = jax.vmap(game.init)(deal_keys)
    np.testing.assert_array_equal(o.first_player[:n], np.asarray(deals.current_player))
    assert o.terminated.all()
    assert not o.illegal.any()


def test_result_arithmetic(heuristic_vs_random):
    _, o, r = heuristic_vs_random
    assert r.wins + r.draws + r.losses == r.games
    assert r.wins == int((o.reward > 0).sum()) and r.losses == int((o.reward < 0).sum())
    assert math.isclose(r.win_rate, r.wins / r.games)
    assert math.isclose(r.score, (r.wins + r.draws / 2) / r.games, rel_tol=1e-6)
    assert r.score_ci95[0] <= r.score <= r.score_ci95[1]
    assert math.isclose(r.mean_margin, float(o.margin.mean()), rel_tol=1e-6)
    # a positive margin is a win, a negative one a loss, zero a draw
    np.testing.assert_array_equal(np.sign(o.margin), o.reward)
    m = r.mirrored()
    assert (m.agent, m.wins, m.losses) == ("random", r.losses, r.wins)
    assert math.isclose(m.score + r.score, 1.0) and math.isclose(m.mean_margin, -r.mean_margin)


def test_heuristic_beats_random_clearly(heuristic_vs_random):
    _, _, r = heuristic_vs_random
    assert r.score_ci95[0] > 0.6, r
    assert r.win_rate > 0.7 and r.mean_margin > 2.0, r


def test_random_vs_random_is_even(random_vs_random):
    r = random_vs_random
    assert r.games == 2 * RANDOM_DEALS
    lo, hi = r.score_ci95
    assert lo < 0.5 < hi, r
    assert 0.05 < hi - lo < 0.3  # an informative interval
    # the reference measured 46.5% first-player wins and 10.5% draws in random play
    assert 0.3 < r.first_player_win_rate < 0.65
    assert 0.02 < r.draws / r.games < 0.25


def test_same_key_same_match(random_vs_random):
    again = play_match(make_agent("random"), make_agent("random"), RANDOM_DEALS, jax.random.key(0), game=game.BEASTYBAR)
    assert again == random_vs_random
    other = play_match(make_agent("random"), make_agent("random"), RANDOM_DEALS, jax.random.key(5), game=game.BEASTYBAR)
    assert other != random_vs_random


def test_summarize_intervals():
    # Every game won: the per-deal spread is zero, so the Wilson interval is used.
    n = 10
    outcomes = MatchOutcomes(reward=np.ones(2 * n, np.float32), margin=np.full(2 * n, 5.0, np.float32),
                             agent_seat=np.repeat([0, 1], n), first_player=np.zeros(2 * n, np.int32),
                             illegal=np.zeros((2 * n, 2), np.int32), terminated=np.ones(2 * n, bool))
    r = summarize(outcomes, "a", "b")
    assert (r.wins, r.score, r.score_ci95[1]) == (2 * n, 1.0, 1.0)
    assert 0.8 < r.score_ci95[0] < 0.9  # Wilson lower bound for 20/20
    # Mixed results: the interval is a normal one over the per-deal mean scores
    # (deals, not games, are the independent units). Deals 0-4 won twice, 5-9 split.
    reward = np.concatenate([np.ones(n), np.where(np.arange(n) < n // 2, 1, -1)]).astype(np.float32)
    r = summarize(outcomes.replace(reward=reward), "a", "b")
    per_deal = np.where(np.arange(n) < n // 2, 1.0, 0.5)
    half = 1.96 * per_deal.std(ddof=1) / math.sqrt(n)
    assert r.score == 0.75
    np.testing.assert_allclose(r.score_ci95, (0.75 - half, 0.75 + half), rtol=1e-6)
    with pytest.raises(RuntimeError, match="did not end"):
        summarize(outcomes.replace(terminated=np.zeros(2 * n, bool)), "a", "b")


def _result(a, b, wins, draws, losses):
    games = wins + draws + losses
    score = (wins + draws / 2) / games
    return MatchResult(agent=a, opponent=b, games=games, wins=wins, draws=draws, losses=losses,
                       win_rate=wins / games, score=score, score_ci95=(score, score), mean_margin=0.0)


def test_elo_table_orders_and_anchors():
    results = [_result("strong", "random", 90, 5, 5), _result("medium", "random", 60, 10, 30),
               _result("strong", "medium", 70, 10, 20)]
    table = elo_table(results)
    assert [row.name for row in table] == ["strong", "medium", "random"]
    elo = {row.name: row.elo for row in table}
    assert elo["random"] == 0.0
    # medium scores 65% against random: about +108 Elo by the logistic curve
    assert 60 < elo["medium"] < 170
    assert elo["strong"] - elo["medium"] > 100
    # a perfect score gives a finite rating (virtual draw prior); no anchor -> mean 0
    table = elo_table([_result("a", "b", 10, 0, 0)])
    elo = {row.name: row.elo for row in table}
    assert math.isfinite(elo["a"]) and elo["a"] > elo["b"] and abs(elo["a"] + elo["b"]) < 1e-6
    assert elo_table([]) == []


def test_play_match_rejects_no_deals():
    with pytest.raises(ValueError, match="num_deals"):
        play_match(make_agent("random"), make_agent("random"), 0, jax.random.key(0), game=game.BEASTYBAR)


def test_evaluate_cli(random_vs_random, tmp_path, capsys):
    """The CLI reuses the compiled random-vs-random match (same agents, same size)."""
    evaluate = experiment("evaluate")
    out = tmp_path / "eval.json"
    code = evaluate.main(["--agent", "random", "--opponents", "random", "--games", str(2 * RANDOM_DEALS - 1),
                          "--json", str(out), "--plain"])
    captured = capsys.readouterr()
    assert code == 0
    assert "rounded up to 200" in captured.err
    assert "win rate" in captured.out and "Elo" in captured.out
    report = json.loads(out.read_text())
    assert report["games_per_pairing"] == 2 * RANDOM_DEALS
    (result,) = report["results"]
    assert result["wins"] + result["draws"] + result["losses"] == 2 * RANDOM_DEALS
    assert {row["name"] for row in report["elo"]} == {"random"}
    # bad specs: a clear message and exit code 2, no traceback
    assert evaluate.main(["--agent", "random", "--opponents", "nonsense"]) == 2
    assert "unknown agent 'nonsense'" in capsys.readouterr().err


# --------------------------------------------------------------------------- where games are decided

def test_entry_values_are_the_solvers_result_at_each_games_first_solvable_position():
    """``arena._entry_values`` against a computation by hand: the first state of each game
    that ``positions.is_solvable`` accepts, solved (``test_endgame`` checks the solver
    against full enumeration), its result turned to the seat's side."""
    from beastybar_jax.games.beastybar.endgame import positions

    num_games = 6
    history = jax.device_get(positions.play_recorded(make_agent("heuristic"), make_agent("random"), num_games,
                                                     jax.random.key(5)))
    seat = np.array([0, 1, 0, 1, 1, 0], np.int32)
    got = np.asarray(arena._entry_values(history, seat, game.BEASTYBAR))
    solvable = np.asarray(positions.solvable_mask(jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), history)))
    first_turn = solvable.reshape(history.turn.shape).argmax(axis=0)
    entry = jax.tree.map(lambda x: x[first_turn, np.arange(num_games)], history)
    # Solved as many at once as _entry_values solves (the whole history), so that the
    # solver's loops compiled for it serve here too.
    tiled = jax.tree.map(lambda x: np.resize(x, (solvable.size,) + x.shape[1:]), entry)
    solved, value = game.BEASTYBAR.solver.exact_values(tiled, 0)
    assert np.asarray(solved).all()
    result = np.asarray(value)[:num_games]
    expected = np.where(np.asarray(entry.current_player) == seat, result, -result)
    np.testing.assert_array_equal(got, expected)
    assert set(got.tolist()) <= {-1.0, 0.0, 1.0}


def test_record_entry_plays_the_same_games_and_tabulates_them(heuristic_vs_random):
    deal_keys, o, plain = heuristic_vs_random
    heuristic, random = make_agent("heuristic"), make_agent("random")
    recorded = jax.device_get(arena._compiled_match(heuristic, random, game.BEASTYBAR, True)(
        deal_keys, jax.random.key(2)))
    np.testing.assert_array_equal(recorded.reward, o.reward)
    np.testing.assert_array_equal(recorded.margin, o.margin)
    result = summarize(recorded, "heuristic", "random")
    assert plain.entry is None
    entry = result.entry
    assert sum(entry["none"].values()) == 0  # every Beasty Bar game reaches a solvable position
    # by final result, the table's columns add up to the match's W-D-L
    assert [sum(entry[at][end] for at in entry) for end in ("win", "draw", "loss")] == [
        result.wins, result.draws, result.losses]
    # ... and by entry result its rows count the exact results at entry
    entry_result = np.sign(recorded.entry_value)
    assert [sum(entry[at].values()) for at in ("win", "draw", "loss")] == [
        int((entry_result == v).sum()) for v in (1, 0, -1)]
    mirrored = result.mirrored().entry
    assert mirrored["loss"]["draw"] == entry["win"]["draw"] and mirrored["win"]["loss"] == entry["loss"]["win"]


def test_between_exact_endgame_players_every_game_ends_as_it_entered_the_endgame():
    """``solver+random`` plays the solver's moves in every solvable position: with it on
    both sides nothing is thrown away after the entry, so each game's final result is its
    exact result at the entry, from the right side (a wrong sign fails here)."""
    exact = make_agent("solver+random")
    deals = 6
    result = play_match(exact, exact, deals, jax.random.key(7), game=game.BEASTYBAR, record_entry=True)
    entry = result.entry
    off_diagonal = {(at, end): n for at, finals in entry.items() for end, n in finals.items() if n and at != end}
    assert off_diagonal == {}, entry
    assert sum(entry[at][at] for at in ("win", "draw", "loss")) == 2 * deals
    assert entry["win"]["win"] > 0 and entry["loss"]["loss"] > 0


def test_evaluate_decided_prints_where_the_games_were_decided(heuristic_vs_random, capsys):
    """``--decided`` after the match tables; refused with ``--endgames`` and for a game
    without a solver."""
    evaluate = experiment("evaluate")
    games = 2 * HEURISTIC_DEALS  # the size of the match compiled above
    assert evaluate.main(["--agent", "heuristic", "--opponents", "random", "--games", str(games), "--decided",
                          "--plain"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("agent") and "at entry W-D-L" in line)
    cells = lines[header + 1].split()
    assert cells[:2] == ["heuristic", "random"]
    assert sum(int(n) for n in cells[2].split("-")) == games and cells[-1] == "0"
    for argv, message in ((["--endgames", "--agent", "random", "--decided"], "--decided applies to matches"),
                          (["--game", "tictactoe", "--agent", "random", "--decided"], "tictactoe has none")):
        with pytest.raises(SystemExit):
            evaluate.parse_args(argv)
        assert message in capsys.readouterr().err


def test_an_agent_must_return_integer_actions_and_a_match_integer_deals():
    """A float action 8.7 was played as 8 and a bool as 0 or 1, though ``step`` refuses
    both; 2.7 deals were 2 and ``True`` one."""
    import jax.numpy as jnp

    from beastybar_jax.agents import Agent

    rand = make_agent("random")
    floating = Agent("floating", lambda s, k: rand.act(s, k).astype(jnp.float32) + 0.7)
    with pytest.raises(TypeError, match="agent 'floating' returned actions of shape .* and dtype float32"):
        play_match(floating, rand, 2, jax.random.key(0), game=game.BEASTYBAR)
    for bad in (2.7, "3", True, 0):
        with pytest.raises(ValueError, match="num_deals must be an integer >= 1"):
            play_match(rand, rand, bad, jax.random.key(0), game=game.BEASTYBAR)


def test_a_match_refuses_an_agent_of_another_game_by_name():
    """An agent knows the game it was made for: one made for tic-tac-toe in a Beasty Bar
    match is refused before anything compiles, with what to do instead (it failed deep
    inside the compiled match). A hand-built agent that names no game is taken as it is."""
    from beastybar_jax.agents import Agent

    noughts = make_agent("random", game="tictactoe")
    assert noughts.game == "tictactoe" and make_agent("heuristic").game == "beastybar"
    with pytest.raises(ValueError, match="agent 'random' plays tictactoe, not beastybar: .*game='beastybar'"):
        play_match(make_agent("heuristic"), noughts, 2, jax.random.key(0), game=game.BEASTYBAR)
    unnamed = Agent("by hand", make_agent("random").act)
    assert unnamed.game is None
    assert play_match(unnamed, make_agent("random"), 1, jax.random.key(0), game=game.BEASTYBAR).games == 2
