"""The registry of games: configs name a game (``game: tictactoe``), :func:`get_game` returns it."""

from __future__ import annotations

from beastybar_jax.games.base import GAME_NAMES, Game, UnknownGameError
from beastybar_jax.games.beastybar import BEASTYBAR
from beastybar_jax.games.tictactoe import TICTACTOE

_REGISTRY = {game.name: game for game in (BEASTYBAR, TICTACTOE)}
assert tuple(_REGISTRY) == GAME_NAMES, "add the game's name to games.base.GAME_NAMES too"


def get_game(name: str) -> Game:
    """The :class:`Game` registered as ``name`` (``"beastybar"``, ``"tictactoe"``)."""
    if name not in _REGISTRY:
        raise UnknownGameError(f"unknown game {name!r}; known games: {', '.join(GAME_NAMES)}")
    return _REGISTRY[name]
