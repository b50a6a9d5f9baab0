"""The engine replays the reference corpus exactly, and the CLI reports differences."""

from __future__ import annotations

import gzip
import json

import numpy as np

from beastybar_jax.games import beastybar as game
from beastybar_jax.games.beastybar import conformance
from beastybar_jax.games.beastybar import cards as C


def test_whole_corpus_replays_without_a_mismatch(corpus_traces):
    report = conformance.check(corpus_traces)
    assert report.games == 2000
    assert report.turns == int(corpus_traces.num_turns.sum()) > 2000 * 21
    assert report.mismatches == [], report.mismatches[:3]


def test_corpus_moves_round_trip_through_the_notation(corpus_path):
    with gzip.open(corpus_path, "rt") as f:
        records = [json.loads(next(f)) for _ in range(100)]
    for record in records:
        queue = []
        for turn in record["turns"]:
            for move in turn["legal"]:
                a = game.from_notation(move, queue)
                back = game.to_notation(a, queue)
                assert game.from_notation(back, queue) == a
                if move[0] != "chameleon":  # a chameleon names the first place of its species
                    assert back == move
            queue = [C.species_id(s) for _, s in turn["queue"]]


def _write(path, records):
    with gzip.open(path, "wt") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def _first_games(corpus_path, n):
    with gzip.open(corpus_path, "rt") as f:
        return [json.loads(next(f)) for _ in range(n)]


def test_cli_reports_zero_mismatches(corpus_path, tmp_path, capsys):
    path = tmp_path / "clean.jsonl.gz"
    records = _first_games(corpus_path, 8)
    _write(path, records)
    assert conformance.main([str(path)]) == 0
    turns = sum(len(r["turns"]) for r in records)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == f"conformance: 8 games, {turns} turns, 0 mismatches"


def test_cli_flags_a_corrupted_trace(corpus_path, tmp_path, capsys):
    records = _first_games(corpus_path, 8)
    turns = sum(len(r["turns"]) for r in records)
    # Three corruptions: a reordered queue, a missing legal move, a wrong final score.
    turn = next(t for t in records[1]["turns"] if len(t["queue"]) >= 2)
    turn["queue"] = turn["queue"][::-1]
    records[3]["turns"][0]["legal"] = records[3]["turns"][0]["legal"][1:] or [["lion", []]]
    records[5]["scores"] = [records[5]["scores"][0] + 2, records[5]["scores"][1]]
    path = tmp_path / "corrupt.jsonl.gz"
    _write(path, records)

    report = conformance.check(conformance.load_traces(str(path)))
    fields = {(g, field) for g, _, field, _, _ in report.mismatches}
    assert {(1, "queue"), (3, "legal"), (5, "scores")} <= fields
    assert {g for g, *_ in report.mismatches} == {1, 3, 5}

    assert conformance.main([str(path), "--show", "2"]) == 1
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    assert last == f"conformance: 8 games, {turns} turns, {len(report.mismatches)} mismatches"
    assert len(report.mismatches) >= 3
    assert "reference:" in out and "engine:" in out
    assert out.count("reference:") == 2  # --show 2


def test_traces_encode_every_field(corpus_traces):
    t = corpus_traces
    g = 0
    n = int(t.num_turns[g])
    assert 21 <= n <= 24 and t.terminal[g, n - 1] and not t.terminal[g, : n - 1].any()
    assert (t.legal[g, :n].sum(-1) >= 1).all()
    assert np.all(t.legal[g, np.arange(n), t.actions[g, :n]])  # every recorded move is legal
