"""Request bodies of the web API (pydantic): anything else is a 422 saying which field is wrong."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

SEED_MAX = 2**31 - 1


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NewGame(_Body):
    """``mode="play"``: the human against ``agent`` in ``seat``; ``mode="watch"``: ``agents[0]``
    in seat 0 against ``agents[1]``. ``seed`` picks the deal (default: a secret random one)."""

    game: str = "beastybar"
    mode: Literal["play", "watch"] = "play"
    agent: Optional[str] = Field(default=None, max_length=500)
    agents: Optional[list[str]] = Field(default=None, min_length=2, max_length=2)
    seat: Literal["first", "second", "random"] = "random"
    seed: Optional[int] = Field(default=None, ge=0, le=SEED_MAX)


class Move(_Body):
    """The human's move; ``ply`` (the number of moves the page has seen) guards against
    a stale or repeated click."""

    action: int
    ply: Optional[int] = None


class Advance(_Body):
    """Ask the agent to move; ``ply`` as in :class:`Move`."""

    ply: Optional[int] = None


class Analyse(_Body):
    """Analyse the position after ``ply`` moves (default: now) with ``analyst``'s
    evaluator and search (default: the game's agent, or the server's)."""

    ply: Optional[int] = None
    analyst: Optional[str] = Field(default=None, max_length=500)


class LoadRecord(_Body):
    """A game record (``beastybar_jax.playing``) to replay."""

    record: dict
