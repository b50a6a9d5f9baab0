"""Replay reference traces through the engine and report every difference.

Usage::

    python -m beastybar_jax.games.beastybar.conformance FILE.jsonl.gz [--show 5]

The repository's corpus is ``tests/data/reference_random_games.jsonl.gz``: 2,000 games of
uniformly random legal moves recorded by the reference engine; docs/rules.md gives the
rules and the trace format.

All games of the file are replayed at once: one ``jax.jit`` of a ``lax.scan``
over turns of a ``vmap`` over games. At every turn the player to move, the legal
move set, queue (order and owners), bar, THAT'S IT, hands, deck sizes and the
terminal flag are compared; then the final scores. Exit status 1 on any mismatch,
2 (with one line) when the file is missing or not a trace file.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import sys
from typing import Iterable

import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.games.beastybar import engine as game
from beastybar_jax.games.beastybar import cards as C

MAX_TURNS = C.NUM_CARDS
FIELDS = ("player", "legal", "queue", "bar", "thats_it", "hands", "deck_sizes", "terminal")


@dataclasses.dataclass
class Traces:
    """Reference games as padded arrays. ``G`` games, ``T = 24`` turns."""

    seeds: np.ndarray        # [G]
    hands: np.ndarray        # [G, 2, 4] starting hands
    decks: np.ndarray        # [G, 2, 8]
    starting_player: np.ndarray  # [G]
    num_turns: np.ndarray    # [G]
    actions: np.ndarray      # [G, T] action ids (0 past the end)
    player: np.ndarray       # [G, T] player to move
    legal: np.ndarray        # [G, T, A] legal action ids before the move
    queue: np.ndarray        # [G, T, 5] cards after the move, -1 empty
    bar: np.ndarray          # [G, T, 2, 12]
    thats_it: np.ndarray     # [G, T, 2, 12]
    hand_sets: np.ndarray    # [G, T, 2, 12]
    deck_sizes: np.ndarray   # [G, T, 2]
    terminal: np.ndarray     # [G, T]
    scores: np.ndarray       # [G, 2]


def _card_set(pairs) -> np.ndarray:
    out = np.zeros((C.NUM_PLAYERS, C.NUM_SPECIES), dtype=bool)
    for owner, name in pairs:
        out[owner, C.species_id(name)] = True
    return out


class TraceFileError(ValueError):
    """A trace file is missing, unreadable or not in the trace format."""


def load_traces(path: str) -> Traces:
    """Parse a ``.jsonl`` or ``.jsonl.gz`` trace file into arrays. Raises
    :class:`TraceFileError` (one line, naming the file and line) for a missing or
    unreadable file, a line that is not JSON, or a game that is not a trace."""
    opener = gzip.open if path.endswith(".gz") else open
    records = []
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    records.append(json.loads(line))
                except ValueError as e:
                    raise TraceFileError(f"{path}:{number} is not a JSON line ({e})") from None
    except TraceFileError:
        raise
    except IsADirectoryError:
        raise TraceFileError(f"{path} is a directory, not a trace file (.jsonl or .jsonl.gz)") from None
    except (OSError, EOFError, UnicodeDecodeError) as e:  # missing, unreadable, not gzip, binary
        raise TraceFileError(f"{path} cannot be read as a trace file (.jsonl or .jsonl.gz): {e}") from None
    if not records:
        raise TraceFileError(f"{path}: no games found")
    try:
        return encode_games(records)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise TraceFileError(f"{path} is not in the trace format: {type(e).__name__}: {e}") from None


def encode_games(records: Iterable[dict]) -> Traces:
    records = list(records)
    G, T = len(records), MAX_TURNS
    t = Traces(
        seeds=np.array([r.get("seed", i) for i, r in enumerate(records)]),
        hands=np.zeros((G, 2, C.HAND_SIZE), np.int32),
        decks=np.zeros((G, 2, C.DECK_SIZE), np.int32),
        starting_player=np.zeros(G, np.int32),
        num_turns=np.zeros(G, np.int32),
        actions=np.zeros((G, T), np.int32),
        player=np.zeros((G, T), np.int32),
        legal=np.zeros((G, T, game.NUM_ACTIONS), bool),
        queue=np.full((G, T, C.QUEUE_SLOTS), -1, np.int32),
        bar=np.zeros((G, T, 2, C.NUM_SPECIES), bool),
        thats_it=np.zeros((G, T, 2, C.NUM_SPECIES), bool),
        hand_sets=np.zeros((G, T, 2, C.NUM_SPECIES), bool),
        deck_sizes=np.zeros((G, T, 2), np.int32),
        terminal=np.zeros((G, T), bool),
        scores=np.zeros((G, 2), np.int32),
    )
    for g, record in enumerate(records):
        t.hands[g] = [[C.species_id(s) for s in hand] for hand in record["hands"]]
        t.decks[g] = [[C.species_id(s) for s in deck] for deck in record["decks"]]
        t.starting_player[g] = record["starting_player"]
        t.scores[g] = record["scores"]
        turns = record["turns"]
        if len(turns) > T:
            raise ValueError(f"game {g} has {len(turns)} turns, more than {T}")
        t.num_turns[g] = len(turns)
        queue_before: list[int] = []
        for i, turn in enumerate(turns):
            t.actions[g, i] = game.from_notation(turn["move"], queue_before)
            t.player[g, i] = turn["player"]
            for move in turn["legal"]:
                t.legal[g, i, game.from_notation(move, queue_before)] = True
            cards = [owner * C.NUM_SPECIES + C.species_id(s) for owner, s in turn["queue"]]
            t.queue[g, i, : len(cards)] = cards
            t.bar[g, i] = _card_set(turn["bar"])
            t.thats_it[g, i] = _card_set(turn["thats_it"])
            t.hand_sets[g, i] = _card_set((p, s) for p in range(2) for s in turn["hands"][p])
            t.deck_sizes[g, i] = turn["deck_sizes"]
            t.terminal[g, i] = turn["terminal"]
            queue_before = [c % C.NUM_SPECIES for c in cards]
    return t


@jax.jit
def replay(hands, decks, starting_player, actions):
    """Replay recorded actions. Inputs ``[G, ...]`` as in ``Traces``.

    Returns a dict of ``[G, T, ...]`` per-turn engine observations (the legal mask
    before each move, the table after it) and final scores ``[G, 2]``.
    """

    def one_game(hands, decks, starting_player, actions):
        def turn(state, action):
            record = dict(
                player=state.current_player.astype(jnp.int32),
                legal=game.legal_action_mask(state),
            )
            state = game.step(state, action)
            record.update(
                queue=state.queue.astype(jnp.int32),
                bar=state.bar,
                thats_it=state.thats_it,
                hands=state.hand,
                deck_sizes=state.deck_sizes,
                terminal=state.terminated,
            )
            return state, record

        state = game.init_from_deal(hands, decks, starting_player)
        final, records = jax.lax.scan(turn, state, actions)
        return records, final.scores

    return jax.vmap(one_game)(hands, decks, starting_player, actions)


@dataclasses.dataclass
class Report:
    games: int
    turns: int
    mismatches: list  # (game index, turn index or None, field, expected, got)


def check(traces: Traces) -> Report:
    """Replay ``traces`` and list every (game, turn, field) that differs."""
    records, scores = jax.device_get(
        replay(traces.hands, traces.decks, traces.starting_player, traces.actions)
    )
    expected = dict(
        player=traces.player, legal=traces.legal, queue=traces.queue, bar=traces.bar,
        thats_it=traces.thats_it, hands=traces.hand_sets, deck_sizes=traces.deck_sizes,
        terminal=traces.terminal,
    )
    G = len(traces.num_turns)
    valid = np.arange(MAX_TURNS)[None, :] < traces.num_turns[:, None]  # [G, T]
    mismatches = []
    for field in FIELDS:
        diff = expected[field] != records[field]
        diff = diff.reshape(G, MAX_TURNS, -1).any(-1) & valid
        for g, i in zip(*np.nonzero(diff)):
            mismatches.append((int(g), int(i), field, expected[field][g, i], records[field][g, i]))
    for g in np.nonzero((scores != traces.scores).any(-1))[0]:
        mismatches.append((int(g), None, "scores", traces.scores[g], scores[g]))
    mismatches.sort(key=lambda m: (m[0], MAX_TURNS if m[1] is None else m[1]))
    return Report(games=G, turns=int(traces.num_turns.sum()), mismatches=mismatches)


def _describe(value, field) -> str:
    value = np.asarray(value)
    if field == "legal":
        return "{" + ", ".join(game.action_name(a) for a in np.flatnonzero(value)) + "}"
    if field == "queue":
        return "[" + ", ".join(f"p{c // 12} {C.SPECIES_NAMES[c % 12]}" for c in value if c >= 0) + "]"
    if field in ("bar", "thats_it", "hands"):
        return str([[C.SPECIES_NAMES[s] for s in np.flatnonzero(row)] for row in value])
    return str(value.tolist())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", help="trace file (.jsonl or .jsonl.gz)")
    parser.add_argument("--show", type=int, default=5, help="differences to print in detail")
    args = parser.parse_args(argv)
    try:
        traces = load_traces(args.file)
    except TraceFileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report = check(traces)
    for g, i, field, want, got in report.mismatches[: args.show]:
        where = f"game {g} (seed {traces.seeds[g]})" + ("" if i is None else f" turn {i}")
        move = "" if i is None else f" after {game.action_name(traces.actions[g, i])}"
        print(f"{where}{move}: {field}\n  reference: {_describe(want, field)}\n  engine:    {_describe(got, field)}")
    print(f"conformance: {report.games} games, {report.turns} turns, {len(report.mismatches)} mismatches")
    return 1 if report.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
