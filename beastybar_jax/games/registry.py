"""The registry of games: configs name a game (``game: tictactoe``), :func:`get_game` returns it."""

from __future__ import annotations

from beastybar_jax.games.base import Game
from beastybar_jax.games.beastybar import BEASTYBAR
from beastybar_jax.games.tictactoe import TICTACTOE

_REGISTRY = {game.name: game for game in (BEASTYBAR, TICTACTOE)}
GAME_NAMES = tuple(_REGISTRY)


class UnknownGameError(ValueError):
    """A game name that is not registered."""


def get_game(name: str) -> Game:
    """The :class:`Game` registered as ``name`` (``"beastybar"``, ``"tictactoe"``)."""
    if name not in _REGISTRY:
        raise UnknownGameError(f"unknown game {name!r}; known games: {', '.join(GAME_NAMES)}")
    return _REGISTRY[name]
