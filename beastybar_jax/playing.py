"""What people playing a game need, shared by the terminal (``experiments/play.py``)
and the browser (``beastybar_jax.web``): the deal of a seed, move names and narration
from a player's side, the final result, and game records.

A **game record** is plain JSON::

    {"format": "beastybar_jax.record/1", "game": "beastybar", "seed": 3,
     "players": ["human", "heuristic"], "moves": [12, 27, ...], "result": [-1.0, 1.0]}

``players[p]`` names who sat in seat ``p`` (an agent spec, or ``"human"``), ``moves`` are
action ids in the order played, ``result`` the final rewards (absent while a game goes
on). The deal is ``deal(game, seed)`` (``seed`` in ``[0, 2**53)``, which a browser's
JSON numbers hold exactly), so :func:`replay` rebuilds every state of the game from the
record alone (the agents' own randomness is not needed: their moves are in the record).
"""

from __future__ import annotations

import functools
import json
import secrets
from typing import Any

import jax
import numpy as np

from beastybar_jax.games import GAME_NAMES, Game, get_game
from beastybar_jax.seeds import DEAL_SEED_LIMIT, is_seed, seed_key

RECORD_FORMAT = "beastybar_jax.record/1"
MAX_PLAYER_NAME = 500  # characters: an agent spec is far shorter


class RecordError(ValueError):
    """A game record that cannot be replayed; the message says what is wrong."""


def deal(game: Game, seed: int) -> tuple[Any, jax.Array]:
    """``(state, key)``: the first state of the game dealt by ``seed`` (an integer in
    ``[0, 2**53)``, else ``ValueError``) and a key for whatever else the game needs at
    random (the seat, the agents' keys). Every seed deals its own game (``seeds.seed_key``)."""
    if not is_seed(seed, DEAL_SEED_LIMIT):
        raise ValueError(f"a deal seed must be an integer in [0, 2**53), got {seed!r}")
    deal_key, key = jax.random.split(seed_key(seed))
    return _compiled(game)[2](deal_key), key


def secret_deal_seed() -> int:
    """A random deal seed for a deal the human must not know: drawn from all ``2**53``
    (the seed gives away every hidden card, and ``2**31`` seeds can be searched for the
    one that matches what the human has seen)."""
    return secrets.randbelow(DEAL_SEED_LIMIT)


SEATS = ("first", "second", "random")


def human_seat(state, key: jax.Array, seat: str) -> tuple[int, jax.Array]:
    """``(player, key)``: the player id of a human who asked to move ``seat``
    (``"first"``, ``"second"``, or ``"random"``: decided by ``key``) in the dealt ``state``."""
    if seat not in SEATS:
        raise ValueError(f"seat must be one of {', '.join(SEATS)}, got {seat!r}")
    if seat == "random":
        key, seat_key = jax.random.split(key)
        seat = "first" if bool(jax.random.bernoulli(seat_key)) else "second"
    starter = int(state.current_player)
    return (starter if seat == "first" else 1 - starter), key


def move_text(game: Game, action: int, state, viewer: int | None) -> str:
    """A move's name, with details told from ``viewer``'s side where the game gives them."""
    ui = game.ui
    if ui.render_action is None:
        return ui.action_names[action] if ui.action_names else str(action)
    return ui.render_action(action, state, viewer)


def describe_move(game: Game, before, after, action: int, viewer: int | None) -> str:
    """Words for what ``action`` did, from ``viewer``'s side (``None``: a spectator,
    who sees everything): the game's ``describe_move``, or who played what."""
    if game.ui.describe_move is not None:
        return game.ui.describe_move(before, after, action, viewer)
    mover = int(before.current_player)
    who = f"P{mover} plays" if viewer is None else ("You play" if mover == viewer else "Opponent plays")
    return f"{who} {move_text(game, action, before, viewer)}."


def outcome(game: Game, state, player: int) -> dict:
    """``{"result": "win"|"draw"|"loss"}`` for ``player`` in a finished game, with
    ``"you"``/``"opponent"`` points for games that count points. ``ValueError`` for a
    game that goes on or a player who is not in it."""
    if not bool(np.asarray(state.terminated)):
        raise ValueError("the game goes on: it has no outcome yet")
    if isinstance(player, bool) or player not in range(game.num_players):
        raise ValueError(f"player must be one of 0..{game.num_players - 1}, got {player!r}")
    reward = float(np.asarray(state.rewards)[player])
    out = {"result": "win" if reward > 0 else ("draw" if reward == 0 else "loss")}
    if game.ui.points is not None:
        points = np.asarray(game.ui.points(state))
        out.update(you=int(points[player]), opponent=int(points[1 - player]))
    return out


@functools.lru_cache(maxsize=None)
def _compiled(game: Game):
    """``game.step``, ``legal_action_mask`` and ``init`` as one program each (op by op,
    a deal alone compiled some 80 small programs: seconds on a CPU)."""
    return jax.jit(game.step), jax.jit(game.legal_action_mask), jax.jit(game.init)


@functools.lru_cache(maxsize=None)
def _state_shapes(game: Game):
    """The structure and leaf shapes of one unbatched state of ``game``."""
    state = jax.eval_shape(game.init, jax.random.key(0))
    return jax.tree.structure(state), [leaf.shape for leaf in jax.tree.leaves(state)]


def _check_one_state(game: Game, state) -> None:
    """``ValueError`` unless ``state`` is one game of ``game`` (these functions play one
    game at a time; a batch belongs to ``jax.vmap(game.step)``)."""
    structure, shapes = _state_shapes(game)
    if jax.tree.structure(state) != structure:
        raise ValueError(f"not a {game.name} state: {type(state).__name__}")
    got = [np.shape(leaf) for leaf in jax.tree.leaves(state)]
    if got != shapes:  # the same structure: one shape per leaf
        batched = all(g[len(g) - len(w):] == w for g, w in zip(got, shapes))
        leading = {g[:len(g) - len(w)] for g, w in zip(got, shapes)}
        what = f"a batch of shape {leading.pop()}" if batched and len(leading) == 1 else f"leaves of shapes {got}"
        raise ValueError(f"one {game.name} game at a time (as playing.deal returns it), got {what}; "
                         f"for a batch, use jax.vmap(game.step)")


def legal_actions(game: Game, state) -> list[int]:
    """The legal action ids of ``state``, ascending."""
    _check_one_state(game, state)
    return [int(a) for a in np.flatnonzero(np.asarray(_compiled(game)[1](state)))]


def step(game: Game, state, action: int):
    """``game.step`` compiled once per game, on host values (the state after ``action``,
    an integer id: ``ValueError`` for a float or a bool, as ``game.step`` refuses them)."""
    value = np.asarray(action)
    if isinstance(action, bool) or value.ndim != 0 or not np.issubdtype(value.dtype, np.integer):
        raise ValueError(f"an action is an integer id, got {action!r}")
    _check_one_state(game, state)
    return jax.device_get(_compiled(game)[0](state, int(value)))


def make_record(game: Game, seed: int, players, moves, final_state=None) -> dict:
    """A game record (module docstring); ``result`` only once ``final_state`` is over."""
    record = {"format": RECORD_FORMAT, "game": game.name, "seed": int(seed),
              "players": [str(p) for p in players], "moves": [int(a) for a in moves]}
    if final_state is not None and bool(final_state.terminated):
        record["result"] = [float(r) for r in np.asarray(final_state.rewards)]
    return record


def check_record(record: Any) -> dict:
    """``record`` if it is shaped like a game record, else :class:`RecordError`."""
    if isinstance(record, (str, bytes)):
        try:
            record = json.loads(record)
        except json.JSONDecodeError as e:
            raise RecordError(f"a game record is JSON; this is not: {e}") from None
    if not isinstance(record, dict):
        raise RecordError(f"a game record is a JSON object, got {type(record).__name__}")
    missing = [k for k in ("game", "seed", "moves") if k not in record]
    if missing:
        raise RecordError(f"the record lacks {', '.join(missing)} (needs game, seed, players, moves)")
    if record.get("format", RECORD_FORMAT) != RECORD_FORMAT:
        raise RecordError(f"unknown record format {record['format']!r}; this version reads {RECORD_FORMAT}")
    if record["game"] not in GAME_NAMES:
        raise RecordError(f"unknown game {record['game']!r}; known games: {', '.join(GAME_NAMES)}")
    seed, moves = record["seed"], record["moves"]
    if not isinstance(seed, int) or not is_seed(seed, DEAL_SEED_LIMIT):  # JSON: a plain int
        raise RecordError(f"the seed must be an integer in [0, 2**53), got {seed!r}")
    if not isinstance(moves, list) or any(isinstance(m, bool) or not isinstance(m, int) for m in moves):
        raise RecordError("moves must be a list of integer action ids")
    players = record.get("players", ["?", "?"])
    if not isinstance(players, list) or len(players) != 2 or not all(isinstance(p, str) for p in players):
        raise RecordError("players must be a list of two names (agent specs or 'human')")
    if any(len(p) > MAX_PLAYER_NAME for p in players):
        raise RecordError(f"a player's name has at most {MAX_PLAYER_NAME} characters")
    return dict(record, players=players)


def replay(record: Any) -> list:
    """Every state of a recorded game (host values), from the deal to the last move:
    ``len(moves) + 1`` states. Raises :class:`RecordError` for a malformed record or an
    illegal or surplus move, naming it."""
    record = check_record(record)
    game = get_game(record["game"])
    state = jax.device_get(deal(game, record["seed"])[0])
    states = [state]
    for ply, action in enumerate(record["moves"]):
        if bool(state.terminated):
            raise RecordError(f"move {ply + 1} ({action}) comes after the end of the game")
        legal = legal_actions(game, state)
        if action not in legal:
            name = game.ui.action_names[action] if 0 <= action < len(game.ui.action_names) else str(action)
            raise RecordError(f"move {ply + 1} ({name}) is not legal there; legal: "
                              + ", ".join(move_text(game, a, state, None) for a in legal))
        state = step(game, state, action)
        states.append(state)
    if "result" in record:  # a result must be what the moves lead to
        if not bool(state.terminated):
            raise RecordError(f"the record gives a result, but the game goes on after its {len(record['moves'])} moves")
        rewards = [float(r) for r in np.asarray(state.rewards)]
        if record["result"] != rewards:
            raise RecordError(f"the record's result {record['result']!r} is not the moves' outcome {rewards}")
    return states
