"""Beasty Bar: everything that knows its rules.

The engine as pure JAX array functions (pgx-style: ``cards``, ``actions``, ``state``,
``queue``, ``core``, ``observe``, ``render``), the reference project's baseline agents
(``heuristics``), the exact endgame solver and its yardstick suite (``endgame``, the
``solver+<agent>`` agent in ``solver_agent``), the rules' conformance corpus reader
(``conformance``), and :data:`BEASTYBAR`, the :class:`~beastybar_jax.games.Game` that
registers them (``env``).

:mod:`~beastybar_jax.games.beastybar.engine` holds the engine's names for the modules
inside this package; this package adds ``BEASTYBAR``.
"""

from beastybar_jax.games.beastybar.engine import *  # noqa: F401,F403
from beastybar_jax.games.beastybar.engine import __all__ as _ENGINE_NAMES
from beastybar_jax.games.beastybar.env import BEASTYBAR, BEASTYBAR_TOKENS

__all__ = ["BEASTYBAR", "BEASTYBAR_TOKENS", *_ENGINE_NAMES]
