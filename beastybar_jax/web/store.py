"""Games in progress: one :class:`Session` per game id, kept by a bounded :class:`GameStore`.

A session holds the true states of its game (host arrays, one per ply) and answers with
what its viewer may know (``view``): in a live game against an agent the viewer is the
human, who never receives the opponent's hand, a deck order, or (unless they chose it)
the deal seed; a finished game, a watched game and a loaded record are shown whole.
"""

from __future__ import annotations

import collections
import dataclasses
import secrets
import threading
import time

import jax
import numpy as np

from beastybar_jax.games import Game
from beastybar_jax.playing import describe_move, legal_actions, make_record, move_text, step
from beastybar_jax.web import views

HUMAN = "human"


class ApiError(Exception):
    """A request the server refuses: HTTP ``status`` and a message saying why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


@dataclasses.dataclass
class Session:
    """One game. ``players[p]`` is an agent spec or ``"human"``; ``human`` the human's
    seat (``None`` when two agents play or a record is replayed)."""

    id: str
    game: Game
    mode: str  # play | watch | replay
    seed: int
    seed_chosen: bool  # the human gave the seed (so it is no secret)
    players: list[str]
    human: int | None
    states: list
    moves: list[int] = dataclasses.field(default_factory=list)
    agent_key: jax.Array = None
    last_used: float = dataclasses.field(default_factory=time.monotonic)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    narration: list[str] = dataclasses.field(default_factory=list)

    @property
    def state(self):
        return self.states[-1]

    @property
    def finished(self) -> bool:
        return bool(self.state.terminated)

    @property
    def live(self) -> bool:
        """A human plays and the game is not over: hidden information stays hidden."""
        return self.human is not None and not self.finished

    @property
    def viewer(self) -> int | None:
        """Whose knowledge the answers are bound by (``None``: everything is shown)."""
        return self.human if self.live else None

    @property
    def to_move(self) -> int | None:
        return None if self.finished else int(self.state.current_player)

    def waiting_for(self) -> str | None:
        if self.finished or self.mode == "replay":  # a loaded record is stepped through, not played on
            return None
        return HUMAN if self.players[self.to_move] == HUMAN else "agent"

    def play(self, action: int) -> None:
        """Apply ``action`` (checked legal) and narrate it from the session's side."""
        before = self.state
        after = step(self.game, before, action)
        self.states.append(after)
        self.moves.append(int(action))
        # Narrated for the human in their own games, for a spectator otherwise.
        self.narration.append(describe_move(self.game, before, after, action, self.human))

    def check_ply(self, ply: int | None) -> int:
        if ply is None:
            return len(self.moves)
        if isinstance(ply, bool) or not 0 <= ply <= len(self.moves):
            raise ApiError(422, f"ply {ply} is out of range: this game has plies 0..{len(self.moves)}")
        return ply

    def view(self, ply: int | None = None, agent_status: dict | None = None) -> dict:
        """The game at ``ply`` (default: now) as the session's viewer may see it."""
        ply = self.check_ply(ply)
        viewer = self.viewer
        state = self.states[ply]
        history = []
        for i, action in enumerate(self.moves):
            mover = int(self.states[i].current_player)
            history.append({"ply": i, "mover": mover, "action": action,
                            "label": move_text(self.game, action, self.states[i], self.human),
                            "narration": self.narration[i]})
        legal = []
        if self.live and ply == len(self.moves) and self.to_move == self.human:
            legal = views.legal_moves(self.game, state, legal_actions(self.game, state), self.human)
        out = {
            "id": self.id, "game": self.game.name, "mode": self.mode,
            "players": [{"seat": p, "name": name, "human": name == HUMAN} for p, name in enumerate(self.players)],
            "human": self.human, "seed": self.seed if (self.seed_chosen or not self.live) else None,
            "ply": len(self.moves), "viewing": ply, "finished": self.finished,
            "to_move": self.to_move, "to_move_at_view": None if bool(state.terminated) else int(state.current_player),
            "waiting_for": self.waiting_for(), "agent_status": agent_status,
            "table": views.table(self.game, state, viewer), "history": history, "legal": legal,
            "result": self.result(),
        }
        return out

    def result(self) -> dict | None:
        if not self.finished:
            return None
        rewards = [float(r) for r in np.asarray(self.state.rewards)]
        points = None if self.game.ui.points is None else [int(x) for x in np.asarray(self.game.ui.points(self.state))]
        if rewards[0] == rewards[1]:
            text = "Draw"
        elif self.human is not None:
            text = "You win" if rewards[self.human] > 0 else "You lose"
        else:
            winner = int(np.argmax(rewards))
            text = f"P{winner} ({self.players[winner]}) wins"
        if points is not None:
            if self.human is not None:
                text += f", {points[self.human]} to {points[1 - self.human]}"
                margin = points[self.human] - points[1 - self.human]
            else:
                text += f", {points[0]} to {points[1]} (P0 - P1)"
                margin = points[0] - points[1]
            text += f" (margin {margin:+d})"
        return {"rewards": rewards, "points": points, "text": text + "."}

    def record(self) -> dict:
        if self.live:
            raise ApiError(409, "the record (which holds the deal seed, hence every hidden card) is available "
                                "once the game is over")
        return make_record(self.game, self.seed, self.players, self.moves, self.state)


class GameStore:
    """Sessions by id. Idle sessions expire after ``ttl_seconds``; beyond ``max_games``
    finished games go first (the least recently used of them; never the game being
    added, a loaded record say), then the least recently used of the rest, so memory
    stays bounded."""

    def __init__(self, ttl_seconds: float = 3600.0, max_games: int = 500):
        if ttl_seconds <= 0 or max_games < 1:
            raise ValueError("ttl_seconds must be > 0 and max_games >= 1")
        self.ttl_seconds, self.max_games = float(ttl_seconds), int(max_games)
        self._sessions: collections.OrderedDict[str, Session] = collections.OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def new_id(self) -> str:
        return secrets.token_urlsafe(9)

    def add(self, session: Session) -> Session:
        with self._lock:
            self._expire()
            self._sessions[session.id] = session
            while len(self._sessions) > self.max_games:  # finished games first (never the one just added)
                oldest = next(iter(self._sessions))
                del self._sessions[next((key for key, kept in self._sessions.items()
                                         if kept.finished and key != session.id), oldest)]
        return session

    def get(self, game_id: str) -> Session:
        with self._lock:
            self._expire()
            session = self._sessions.get(game_id)
            if session is None:
                raise ApiError(404, f"unknown game {game_id!r} (games expire after "
                                    f"{self.ttl_seconds / 60:g} idle minutes)")
            session.last_used = time.monotonic()
            self._sessions.move_to_end(game_id)
            return session

    def _expire(self) -> None:
        cutoff = time.monotonic() - self.ttl_seconds
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if oldest.last_used >= cutoff:
                break
            self._sessions.popitem(last=False)
