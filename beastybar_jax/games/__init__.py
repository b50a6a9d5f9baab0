"""Games: the :class:`Game` record, the registry, and one room per game.

- :mod:`~beastybar_jax.games.base`: :class:`Game`, :class:`TokenLayout`, :class:`Yardstick`
  and the input checks (``as_action``, ``as_player``) every game shares;
- :mod:`~beastybar_jax.games.choice`, :mod:`~beastybar_jax.games.text`,
  :mod:`~beastybar_jax.games.minimax`: what every game may use beyond its rules (random
  choices among moves, action names and text renderers from a few primitives, perfect play
  of a small game by exhaustive minimax);
- :mod:`~beastybar_jax.games.beastybar`: Beasty Bar, everything that knows its rules
  (engine, renderers, endgame solver and yardstick, conformance, baseline agents);
- :mod:`~beastybar_jax.games.tictactoe`: tic-tac-toe, in one file;
- :mod:`~beastybar_jax.games.registry`: :func:`get_game` by name.

Layers above know only :class:`Game`.
"""

from beastybar_jax.games.base import (Game, GameInputError, TokenLayout, Yardstick, as_action,
                                      as_player)
from beastybar_jax.games.registry import GAME_NAMES, UnknownGameError, get_game

__all__ = ["GAME_NAMES", "Game", "GameInputError", "TokenLayout", "UnknownGameError", "Yardstick", "as_action",
           "as_player", "get_game"]
