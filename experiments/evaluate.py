"""Measure an agent against opponents, or rank a set of agents, in duplicate matches.

    python experiments/evaluate.py --agent checkpoint:runs/x --opponents random,heuristic,outcome_heuristic --games 1000
    python experiments/evaluate.py --round-robin random,greedy,heuristic,mcts-64 --games 400 --json rr.json
    python experiments/evaluate.py --game tictactoe --agent checkpoint:runs/tictactoe --opponents minimax,random
    python experiments/evaluate.py --endgames --agent random,heuristic,solver+random

Agents are registry specs (``beastybar_jax.agents.make_agent``). ``--games`` is the
number of games per pairing; the duplicate format plays every deal twice with
the seats swapped, so an odd number is rounded up to the next even one (said in
the output). Every match is batched on the default JAX device. Prints a table
(win rate = wins / games as the reference project counts it; score = (wins +
draws/2) / games with a 95% interval; mean point margin) and an Elo table fitted to
all results (anchored at random = 0 when random plays), and writes JSON with
``--json`` (checked to be writable before any game is played).

Ctrl-C or SIGTERM at any moment (the imports, a compile, a pairing, the tables, the JSON)
keeps what finished: the command stops after the pairing being played (with ``--endgames``,
the agent being scored), or, when a compile or a device call does not let it within
``$BEASTYBAR_STOP_SECONDS`` (10), at once without that pairing; the finished ones are
printed and written with ``--json`` (marked ``"interrupted": true`` when some are
missing; the file is replaced whole, never left half written), one line says what was
kept, and the exit code is 130 / 143. Bad agent names, unreadable checkpoints and an
unwritable ``--json`` path end in one line and exit code 2. When the output is not a
terminal, tables are printed whole (no truncated cells).

``--decided`` also says where the games were decided (a game with an exact solver):
for each pairing, the games by the agent's exact result at the endgame's entry (the first
position the solver solves; best play from there) and by final result. A final result
worse than the entry's: thrown away by the agent in the endgame; better: given away by the
opponent.

``--endgames`` instead scores each ``--agent`` (comma-separated specs) on the fixed
suite of solved Beasty Bar endgame positions (``beastybar_jax.games.beastybar.endgame.suite``): the
share of positions where its move keeps the best result, the shares where it throws
away a win or a draw, the share of best-margin moves and the mean point margin lost
against best play. ``--games N`` then uses N positions spread over the suite, and
``--by turn`` (or ``moves``, ``result``, ``source``) adds the same scores per group of
positions: by turn, number of legal moves, exact result, or the games they come from.
"""

from __future__ import annotations

if __name__ == "__main__":  # the signal contract from the first line, not after the imports below (seconds)
    from beastybar_jax.training.interrupt import command_signals_now

    command_signals_now()

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import signal
import sys
import time
import warnings

import jax

from beastybar_jax.agents import agent_names, default_opponent, make_agent
from beastybar_jax.arena import RESULTS, MatchResult, elo_table, play_match
from beastybar_jax.cli import OneLineParser, check_writable_file, int_in_range, seed as seed_arg
from beastybar_jax.games.beastybar.endgame.suite import GROUPINGS
from beastybar_jax.games import GAME_NAMES, get_game
from beastybar_jax.seeds import seed_key
from beastybar_jax.training.interrupt import acknowledge_stop, active_command, signal_name, when_forced

MAX_GAMES = 10_000_000  # per pairing: far beyond any use, far below the int32 limits of the batched arena


DEFAULT_OPPONENTS = {"beastybar": "random,heuristic,outcome_heuristic"}


def _specs(text: str, flag: str) -> list[str]:
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if not specs:
        raise ValueError(f"{flag} needs at least one agent name, e.g. {flag} random,heuristic")
    if len(set(specs)) != len(specs):  # the same agent twice: two rows that differ by their draws alone
        raise ValueError(f"{flag} names an agent twice: {specs}")
    return specs


def parse_args(argv=None) -> argparse.Namespace:
    parser = OneLineParser(
        description=__doc__.split("\n\n")[0],
        epilog="agents (Beasty Bar): " + ", ".join(agent_names("beastybar")) + "; tic-tac-toe: "
               + ", ".join(agent_names("tictactoe")),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--game", default="beastybar", choices=GAME_NAMES, help="the game (default: %(default)s)")
    parser.add_argument("--agent", help="the agent to measure (a registry spec)")
    parser.add_argument("--opponents", default=None,
                        help="comma-separated registry specs (default: random,heuristic,outcome_heuristic for "
                             "Beasty Bar; random and the game's strongest baseline otherwise)")
    parser.add_argument("--round-robin", metavar="A,B,C",
                        help="instead of --agent/--opponents: every pair of these agents meets")
    parser.add_argument("--games", type=int_in_range(1, MAX_GAMES), default=None,
                        help="games per pairing (default 1000); odd numbers are rounded up (duplicate format). "
                             "With --endgames: suite positions to use (default all)")
    parser.add_argument("--endgames", action="store_true",
                        help="score --agent (comma-separated specs) on the solved endgame suite instead of matches")
    parser.add_argument("--decided", action="store_true",
                        help="also tabulate the games by exact result at the endgame's entry and final result")
    parser.add_argument("--suite", metavar="PATH", help="with --endgames: a suite file (default: the package's)")
    parser.add_argument("--by", choices=tuple(GROUPINGS),
                        help="with --endgames: also score each group of positions (by turn, legal moves, "
                             "exact result, or the games they come from)")
    parser.add_argument("--seed", type=seed_arg, default=0, help="match seed, in [0, 2**63) (default 0)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH")
    parser.add_argument("--plain", action="store_true", help="plain text tables instead of rich")
    args = parser.parse_args(argv)
    if args.endgames:
        if args.agent is None or args.round_robin is not None:
            parser.error("--endgames scores --agent A[,B,...] on the endgame suite (no --round-robin)")
        if args.game != "beastybar":
            parser.error(f"--endgames: the endgame suite is Beasty Bar's; {args.game} has none")
        if args.games is not None and args.games < 1:
            parser.error(f"--games must be at least 1 (got {args.games})")
        if args.decided:
            parser.error("--decided applies to matches, not to --endgames")
        if args.opponents is not None:
            parser.error("--opponents applies to matches; --endgames scores --agent on solved positions")
        return args
    if args.by is not None:
        parser.error("--by groups the endgame suite's positions: it only applies with --endgames")
    if args.decided and not get_game(args.game).has("solver.exact_values"):
        parser.error(f"--decided needs a game whose solver gives exact values (Game.solver.exact_values); {args.game} "
                     f"has none")
    if args.suite is not None:
        parser.error("--suite only applies with --endgames")
    args.games = 1000 if args.games is None else args.games
    if args.round_robin is None and args.agent is None:
        parser.error("give --agent SPEC (with --opponents) or --round-robin A,B,C")
    if args.round_robin is not None and (args.agent is not None or args.opponents is not None):
        parser.error("--round-robin plays its agents against each other: no --agent or --opponents with it")
    if args.agent is not None and "," in args.agent:
        parser.error(f"a match measures one --agent (got {args.agent!r}); several agents: "
                     "--round-robin A,B,C, or --endgames --agent A,B,C")
    if args.games < 1:
        parser.error(f"--games must be at least 1 (got {args.games})")
    return args


def _row(r: MatchResult) -> list[str]:
    lo, hi = r.score_ci95
    return [r.agent, r.opponent, str(r.games), f"{r.wins}-{r.draws}-{r.losses}", f"{100 * r.win_rate:.1f}%",
            f"{100 * r.score:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]", f"{r.mean_margin:+.2f}"]


def print_results(results, elo_rows, args) -> None:
    """The match and Elo tables, and with ``--decided`` where the games were decided."""
    print_tables(results, elo_rows, plain=args.plain)
    if args.decided:
        print_entry_table(results, plain=args.plain)


def print_tables(results, elo_rows, plain: bool = False, out=None) -> None:
    """The match table and the Elo table."""
    print_match_table(results, plain, out)
    elo_headers = ["agent", "Elo", "games", "score"]
    elo_cells = [[row.name, f"{row.elo:+.0f}", str(row.games), f"{100 * row.score:.1f}%"] for row in elo_rows]
    if _print_table("Elo (Bradley-Terry fit; random = 0 when present)", elo_headers, elo_cells, ("agent",), plain, out):
        print(file=out or sys.stdout)


def print_match_table(results, plain: bool = False, out=None) -> None:
    """One row per pairing: games, W-D-L, win rate, score with its interval, margin."""
    headers = ["agent", "opponent", "games", "W-D-L", "win rate", "score [95% CI]", "margin"]
    if _print_table("duplicate matches (win rate = wins / games)", headers, [_row(r) for r in results],
                    ("agent", "opponent"), plain, out):
        print(file=out or sys.stdout)


def _console(out):
    """A rich console on ``out``; when that is not a terminal (a pipe, a file), as wide as
    the tables are, so no cell is cut."""
    from rich.console import Console

    console = Console(file=out)
    return console if console.is_terminal else Console(file=out, width=10_000)


def check_writable(path: str) -> None:
    """Raise ``ValueError`` when ``path`` cannot be written (checked before playing,
    so an evaluation is never lost to a typo in ``--json``)."""
    check_writable_file(path, "--json")


def run(args: argparse.Namespace, log=print, finished: list | None = None, plan: dict | None = None) -> dict:
    """Play the pairings. A ``KeyboardInterrupt`` (or a signal noted by the command's
    :class:`~beastybar_jax.training.interrupt.CommandSignals`) stops after the pairing
    being played; the report then holds the finished ones and ``"interrupted": True``.
    ``finished`` (a list) receives each finished ``(result, seconds)`` as it comes, and
    ``plan["total"]`` the number of pairings once the agents are built."""
    games = args.games + (args.games % 2)
    if games != args.games:
        log(f"note: --games {args.games} rounded up to {games}: each deal is played twice with seats swapped")
    num_deals = games // 2
    game = get_game(args.game)
    if args.round_robin is not None:
        names = _specs(args.round_robin, "--round-robin")
        if len(names) < 2:
            raise ValueError("--round-robin needs at least two agents")
        agents = [make_agent(n, game=game) for n in names]
        pairs = [(agents[i], agents[j]) for i in range(len(agents)) for j in range(i + 1, len(agents))]
    else:
        agent = make_agent(args.agent, game=game)
        opponents_text = (args.opponents if args.opponents is not None
                          else DEFAULT_OPPONENTS.get(game.name, f"random,{default_opponent(game)}"))
        opponents = [make_agent(n, game=game) for n in _specs(opponents_text, "--opponents")]
        pairs = [(agent, o) for o in opponents]

    if plan is not None:
        plan["total"] = len(pairs)
    finished = [] if finished is None else finished
    signum = play_pairings([(a, b, index) for index, (a, b) in enumerate(pairs)], num_deals,
                           seed_key(args.seed), game, record_entry=args.decided, log=log, finished=finished)
    report = match_report(args, game, finished, len(pairs), bool(signum))
    report["_signum"] = signum
    return report


def play_pairings(pairings, num_deals: int, key: jax.Array, game, *, record_entry: bool, log,
                  finished: list) -> int:
    """Play ``pairings``, ``(agent, opponent, index)`` each, the match's key
    ``fold_in(key, index)``, and append each finished ``(result, seconds)`` to
    ``finished``. A ``KeyboardInterrupt`` (or a signal noted by the command's
    :class:`~beastybar_jax.training.interrupt.CommandSignals`) stops after the pairing
    being played: returns its signal number, 0 when every pairing was played. ``log``
    says which pairing starts and, when it ends, its W-D-L and seconds."""
    signals = active_command()
    try:
        for number, (a, b, index) in enumerate(pairings):
            if signals is not None:
                signals.check()
            log(f"[{number + 1}/{len(pairings)}] {a.name} vs {b.name}: {2 * num_deals} games ...")
            start = time.perf_counter()
            result = play_match(a, b, num_deals, jax.random.fold_in(key, index), game=game,
                                record_entry=record_entry)
            finished.append((result, time.perf_counter() - start))
            log(f"{a.name} vs {b.name}: {result.wins}-{result.draws}-{result.losses} "
                f"({finished[-1][1]:.0f} s with compilation)")
        if signals is not None:
            signals.check()
    except KeyboardInterrupt as e:
        return _signum(e)
    return 0


def _machine() -> str:
    """The machine line of a JSON report."""
    return f"{platform.machine()} {platform.system()}, jax devices: " + ", ".join(str(d.device_kind)
                                                                          for d in jax.devices())


def match_report(args, game, finished: list, pairings: int, interrupted: bool) -> dict:
    """The JSON report of the ``finished`` ``(result, seconds)`` pairs (``_results`` and
    ``_elo`` hold the objects for the tables)."""
    results = [r for r, _ in finished]
    timings = [t for _, t in finished]
    games = args.games + (args.games % 2)
    rows = elo_table(results) if results else []
    return {
        "date": datetime.date.today().isoformat(),
        "machine": _machine(),
        "game": game.name,
        "seed": args.seed,
        "games_per_pairing": games,
        "format": "duplicate: each deal played twice with seats swapped",
        "results": [dict(r.to_dict(), seconds_including_compile=round(t, 3)) for r, t in zip(results, timings)],
        "elo": [dataclasses.asdict(row) for row in rows],
        "interrupted": interrupted,
        "pairings": pairings,
        "_results": results,
        "_elo": rows,
    }


# --------------------------------------------------------------------------- endgames

ENDGAME_HEADERS = ["agent", "positions", "keeps result", "throws win", "throws draw", "best margin",
                   "margin lost", "keeps at stake"]


def run_endgames(args: argparse.Namespace, log=print, finished: list | None = None, plan: dict | None = None) -> dict:
    """Score every ``--agent`` spec on the endgame suite (or ``--games`` positions of it).
    As :func:`run`: an interrupt stops after the agent being scored, the report holds the
    finished ones and ``"interrupted": True``; ``finished`` receives each ``(score,
    seconds, groups)`` as it comes (``groups``: ``[(label, score)]`` with ``--by``, else
    empty), and ``plan["total"]`` the number of agents once they are built."""
    from beastybar_jax.games.beastybar.endgame import suite as endgame_suite

    whole = endgame_suite.load_suite(args.suite or endgame_suite.SUITE_PATH)
    if args.games and args.games > len(whole):
        log(f"note: --games {args.games}: the suite has {len(whole)} positions, all of them are used")
    suite = endgame_suite.spread(whole, args.games or 0)
    agents = [make_agent(spec, game=get_game("beastybar")) for spec in _specs(args.agent, "--agent")]
    if plan is not None:
        plan["total"] = len(agents)
    key = seed_key(args.seed)
    finished = [] if finished is None else finished
    signals, signum = active_command(), 0
    try:
        for index, agent in enumerate(agents):
            if signals is not None:
                signals.check()
            log(f"[{index + 1}/{len(agents)}] {agent.name}: {len(suite)} endgame positions ...")
            start = time.perf_counter()
            moves = endgame_suite.agent_moves(agent, suite, jax.random.fold_in(key, index))
            score = endgame_suite.score_moves(suite, moves, agent.name)
            groups = endgame_suite.score_groups(suite, moves, args.by, agent.name) if args.by else []
            finished.append((score, time.perf_counter() - start, groups))
        if signals is not None:
            signals.check()
    except KeyboardInterrupt as e:
        signum = _signum(e)
    report = endgame_report(args, finished, len(agents), bool(signum), suite.sources)
    report["_signum"] = signum
    return report


def endgame_report(args, finished: list, agents: int, interrupted: bool, sources=None) -> dict:
    """The JSON report of the ``finished`` ``(score, seconds, groups)`` triples
    (``_scores`` holds the objects for the tables)."""
    from beastybar_jax.games.beastybar.endgame.suite import SUITE_PATH

    def result(score, seconds, groups) -> dict:
        row = dict(score.to_dict(), seconds_including_compile=round(seconds, 3))
        if args.by:
            row["groups"] = [dict(g.to_dict(), **{args.by: label}) for label, g in groups]
        return row

    report = {
        "date": datetime.date.today().isoformat(),
        "machine": _machine(),
        "seed": args.seed,
        "suite": str(args.suite or SUITE_PATH),
        "results": [result(*done) for done in finished],
        "interrupted": interrupted,
        "agents": agents,
        "_scores": [score for score, _, _ in finished],
        "_groups": [groups for _, _, groups in finished],
    }
    if args.by:
        report["by"] = args.by
    if sources is not None:
        report["suite_sources"] = list(sources)
    return report


def _endgame_cells(s) -> list[str]:
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    return [str(s.positions), pct(s.keeps_result), pct(s.throws_win), pct(s.throws_draw), pct(s.best_margin),
            f"{s.margin_lost:.2f}", "-" if s.keeps_at_stake is None else f"{pct(s.keeps_at_stake)} of {s.at_stake}"]


def print_endgame_table(scores, plain: bool = False, out=None, by: str | None = None, groups=()) -> None:
    """The agents' scores (``EndgameScore``); with ``by``, a second table of each agent's
    ``groups`` (``[(label, score)]`` per agent, ``--by``; shares over each group's positions)."""
    rows = [[s.agent, *_endgame_cells(s)] for s in scores]
    _print_table("solved endgames (moves against best play)", ENDGAME_HEADERS, rows, ("agent",), plain, out)
    if by:
        print(file=out or sys.stdout)
        rows = [[s.agent, label, *_endgame_cells(g)] for s, kept in zip(scores, groups) for label, g in kept]
        _print_table(f"solved endgames by {GROUPINGS[by]} (shares of each group's positions)",
                     [ENDGAME_HEADERS[0], GROUPINGS[by], *ENDGAME_HEADERS[1:]], rows, ("agent", GROUPINGS[by]),
                     plain, out)


ENTRY_HEADERS = ["agent", "opponent", "at entry W-D-L", "entered won: W-D-L", "entered drawn: W-D-L",
                 "entered lost: W-D-L", "no entry"]


def print_entry_table(results, plain: bool = False, out=None) -> None:
    """``--decided``: each pairing's games by exact result at the endgame's entry, then
    by final result (``MatchResult.entry``)."""
    wdl = lambda finals: "-".join(str(finals[end]) for end in RESULTS)  # noqa: E731
    rows = [[r.agent, r.opponent, "-".join(str(sum(r.entry[at].values())) for at in RESULTS),
             *(wdl(r.entry[at]) for at in RESULTS), str(sum(r.entry["none"].values()))]
            for r in results]
    _print_table("where the games were decided (exact result at the endgame's entry, then final)",
                 ENTRY_HEADERS, rows, ("agent", "opponent"), plain, out)


def _print_table(title: str, headers: list[str], rows: list[list[str]], left: tuple, plain: bool, out) -> bool:
    """One table, with rich or (``plain``, or rich missing) as aligned text; the
    ``left`` columns are left-aligned. Returns whether it printed aligned text."""
    out = out or sys.stdout
    if not plain:
        try:
            from rich.table import Table
        except ImportError:
            plain = True
    if plain:
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
        print("  ".join(h.ljust(w) for h, w in zip(headers, widths)), file=out)
        for cells in rows:
            print("  ".join(c.ljust(w) for c, w in zip(cells, widths)), file=out)
        return True
    table = Table(title=title)
    for h in headers:
        table.add_column(h, justify="left" if h in left else "right")
    for cells in rows:
        table.add_row(*cells)
    _console(out).print(table)
    return False


def main(argv=None) -> int:
    args = parse_args(argv)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    from beastybar_jax.training.compilation import enable_compilation_cache

    format_warning = warnings.formatwarning
    warnings.formatwarning = lambda message, category, *rest, **kw: f"warning: {message}\n"  # one line
    finished: list = []
    plan: dict = {}
    # Until the main thread writes the report, a stop it cannot reach in time (a compile, a
    # match on the device) is the watchdog's: it prints and writes what finished.
    when_forced(lambda signum: _keep_finished(args, finished, signum, plan.get("total")))
    try:
        enable_compilation_cache()
        if args.json:
            check_writable(args.json)
        report = (run_endgames(args, log=log, finished=finished, plan=plan) if args.endgames
                  else run(args, log=log, finished=finished, plan=plan))
    except ValueError as e:  # bad specs, unreadable checkpoints (CheckpointError is a ValueError), --json
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # while building the agents
        print(f"interrupted by {signal_name(_signum(e))} before the first {_unit(args)} finished: nothing to report",
              file=sys.stderr)
        return 128 + _signum(e)
    finally:
        warnings.formatwarning = format_warning
    # The main thread writes the report from here, whole and once: the watchdog stands down
    # (or, when it is writing the report already, this waits until it ends the process).
    # A signal from now on is noted and told once the report is written.
    acknowledge_stop()
    when_forced(None)
    return _write_report(args, report, log)


def _write_report(args, report: dict, log) -> int:
    """Print the tables of the finished pairings (or agents scored), write ``--json``,
    and return the exit code: ``128 + signum`` after a signal, whenever it came."""
    signum = report.pop("_signum")
    if args.endgames:
        results, groups, total = report.pop("_scores"), report.pop("_groups"), report["agents"]
        if results:
            print_endgame_table(results, plain=args.plain, by=args.by, groups=groups)
    else:
        results, elo, total = report.pop("_results"), report.pop("_elo"), report["pairings"]
        if results:
            print_results(results, elo, args)
    if args.json and results:
        _write_json(args.json, report)
        log(f"wrote {args.json}")
    signals = active_command()
    late = signals.signum if signals is not None and not signum else None  # after the last pairing finished
    if report["interrupted"]:
        log(_interrupted_line(signum, len(results), total, _unit(args)))
        return 128 + signum
    if late:
        log(f"interrupted by {signal_name(late)} after all {total} {_unit(args)}s finished: the tables show them"
            + (f", written to {args.json}" if args.json else ""))
        return 128 + late
    return 0


def _write_json(path: str, report: dict) -> None:
    """Write ``report`` as JSON to ``path`` whole or not at all (a temporary file renamed):
    a process killed while it writes leaves no half report."""
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w") as f:
            json.dump(report, f, indent=2)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


def _unit(args) -> str:
    """What the command measures one at a time: an agent on the suite, or a pairing."""
    return "agent" if args.endgames else "pairing"


def _signum(e: BaseException) -> int:
    signals = active_command()
    return getattr(e, "signum", None) or (signals.signum if signals is not None else None) or signal.SIGINT


def _interrupted_line(signum: int, done: int, total: int, unit: str = "pairing") -> str:
    return (f"interrupted by {signal_name(signum)} after {done} of {total} {unit}s"
            + (": the tables show the finished ones" if done else ": nothing to report"))


def _keep_finished(args, finished: list, signum: int, total: int | None = None) -> str:
    """For the command's watchdog (a signal while a match or a scoring compiles or runs,
    out of the main thread's reach): print and write the finished pairings (or agents
    scored on the suite; ``total`` of them planned, when known), return the one line."""
    unit, name = _unit(args), signal_name(signum)
    if not finished:
        return f"interrupted by {name} before the first {unit} finished: nothing to report"
    done = list(finished)
    whole = total is not None and len(done) == total
    if args.endgames:
        report = endgame_report(args, done, total if total is not None else -1, not whole)
        if total is None:
            report.pop("agents")
        print_endgame_table(report.pop("_scores"), plain=args.plain, by=args.by, groups=report.pop("_groups"))
    else:
        report = match_report(args, get_game(args.game), done, total if total is not None else -1, not whole)
        results, elo = report.pop("_results"), report.pop("_elo")
        if total is None:
            report.pop("pairings")
        print_results(results, elo, args)
    if args.json:
        _write_json(args.json, report)
    written = f", written to {args.json}" if args.json else ""
    if whole:
        return f"interrupted by {name} after all {total} {unit}s finished: the tables show them{written}"
    finished = f"{len(done)} finished {unit}" + ("" if len(done) == 1 else "s")
    return (f"interrupted by {name} after {finished} (the {unit} being "
            f"{'scored' if args.endgames else 'played'} is lost): the tables show the finished ones{written}")


if __name__ == "__main__":
    from beastybar_jax.training.interrupt import run_command

    run_command(main)
