"""Request bodies of the web API (pydantic, strict: ``"7"``, ``true`` or ``1.0`` is no integer):
anything else is a 422 saying which field is wrong."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from beastybar_jax.playing import MAX_PLAYER_NAME
from beastybar_jax.seeds import DEAL_SEED_LIMIT

SEED_MAX = DEAL_SEED_LIMIT - 1  # deal seeds: JSON numbers a browser holds exactly
SPEC_LENGTH = MAX_PLAYER_NAME  # characters of an agent spec, at most (as in game records)
Spec = Annotated[str, Field(max_length=SPEC_LENGTH)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class NewGame(_Body):
    """``mode="play"``: the human against ``agent`` in ``seat``; ``mode="watch"``: ``agents[0]``
    in seat 0 against ``agents[1]``. ``seed`` picks the deal (default: a secret random one)."""

    game: str = "beastybar"
    mode: Literal["play", "watch"] = "play"
    agent: Optional[Spec] = None
    agents: Optional[list[Spec]] = Field(default=None, min_length=2, max_length=2)
    seat: Literal["first", "second", "random"] = "random"
    seed: Optional[int] = Field(default=None, ge=0, le=SEED_MAX)


class Move(_Body):
    """The human's move; ``ply`` (the number of moves the page has seen) guards against
    a stale or repeated click."""

    action: int
    ply: Optional[int] = Field(default=None, ge=0)


class Advance(_Body):
    """Ask the agent to move; ``ply`` as in :class:`Move`."""

    ply: Optional[int] = Field(default=None, ge=0)


class Analyse(_Body):
    """Analyse the position after ``ply`` moves (default: now) with ``analyst``'s
    evaluator and search (default: the game's agent, or the server's)."""

    ply: Optional[int] = Field(default=None, ge=0)
    analyst: Optional[Spec] = None


class LoadRecord(_Body):
    """A game record (``beastybar_jax.playing``) to replay."""

    record: dict
