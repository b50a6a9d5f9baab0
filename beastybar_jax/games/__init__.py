"""Games: the :class:`Game` record, the registry, and one room per game.

- :mod:`~beastybar_jax.games.base`: :class:`Game` and its capability records (:class:`UI`,
  :class:`Agents`, :class:`Solver`, :class:`Afterstates`, :class:`TokenLayout`), the step
  protocol and the input checks (``as_action``, ``as_player``) every game shares;
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

from beastybar_jax.games.base import (GAME_NAMES, UI, AfterstateLists, Afterstates, Agents, Game, GameInputError,
                                      Solver, TokenLayout, UnknownGameError, Yardstick, as_action, as_player)


def get_game(name: str) -> Game:
    """The :class:`Game` registered as ``name`` (``"beastybar"``, ``"tictactoe"``).

    The games load on the first call, not when this package is imported: their modules
    build JAX constants, which start JAX's backend, and configuration code (which imports
    this package) must run before a multi-process run initializes JAX
    (``experiments/train.py``). The import below is an ordinary edge of the import graph."""
    if name not in GAME_NAMES:
        raise UnknownGameError(f"unknown game {name!r}; known games: {', '.join(GAME_NAMES)}")
    from beastybar_jax.games.registry import get_game as registered

    return registered(name)

__all__ = ["GAME_NAMES", "UI", "AfterstateLists", "Afterstates", "Agents", "Game", "GameInputError", "Solver",
           "TokenLayout", "UnknownGameError", "Yardstick", "as_action", "as_player", "get_game"]
