"""What a game does with action and player ids it cannot take, for both games (the step
protocol every game shares, ``games/base.py``, and the conventions of docs/adding-a-game.md).

- ``step``: an id outside ``0..A-1`` is an illegal action (the mover forfeits),
  whatever its integer width: an ``int64`` 2**32 + 8 is not action 8. A non-integer
  action (8.9, a bool) raises ``GameInputError``, at trace time under ``jit``. (At a
  ``jit`` call boundary JAX itself narrows a NumPy ``int64`` argument to ``int32``
  before the game sees it, so jitted callers pass ``int32`` ids.)
- ``observe`` / ``sample_world`` / ``score_margin``: a concrete player other than 0
  or 1 raises ``GameInputError``; a traced one is not checked.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import tiny_training
from beastybar_jax.games import GameInputError, as_action, get_game

GAMES = ("beastybar", "tictactoe")


@pytest.fixture(scope="module", params=GAMES)
def game_and_state(request):
    game = get_game(request.param)
    state = jax.jit(game.init)(jax.random.key(3))
    legal = int(np.flatnonzero(np.asarray(jax.jit(game.legal_action_mask)(state)))[0])
    return game, state, legal


def test_a_game_is_a_small_core_and_capability_records():
    """``Game`` holds at most 12 core fields (pgx's size: the rules and what every layer
    needs); the rest are capability records, each absent or of its own type, and
    ``Game.has`` answers for a record or one of its functions."""
    from beastybar_jax.games.base import CORE_FIELDS, UI, Afterstates, Agents, Solver, TokenLayout

    assert len(CORE_FIELDS) <= 12 and "step" not in CORE_FIELDS  # step is the shared protocol around play
    kinds = {"tokens": TokenLayout, "ui": UI, "agents": Agents, "solver": Solver, "afterstates": Afterstates}
    for name in GAMES:
        game = get_game(name)
        assert set(game._fields) == set(CORE_FIELDS) | set(kinds)
        assert all(getattr(game, c) is None or isinstance(getattr(game, c), kind) for c, kind in kinds.items())
    tictactoe, beastybar = get_game("tictactoe"), get_game("beastybar")
    assert beastybar.has("solver.exact_values") and tictactoe.has("solver") and not tictactoe.has("solver.exact_values")
    assert beastybar.has("afterstates.answers") and not tictactoe.has("afterstates")


def forfeited(state, mover) -> bool:
    return bool(state.terminated) and float(state.rewards[mover]) == -1.0


def test_wide_integer_ids_count_by_their_value(game_and_state):
    game, state, legal = game_and_state
    n = game.num_actions
    for action in (legal, np.int64(legal), np.uint64(legal), jnp.int32(legal), np.array(legal, np.int16)):
        assert int(as_action(action, n)) == legal, type(action)
    for action in (np.int64(2**32 + legal), 2**32 + legal, 2**70, np.uint64(2**63 + legal), -1, n,
                   np.int64(-(2**32) + legal), jnp.int32(n + 5)):
        assert int(as_action(action, n)) == -1, action
    # The games' step sees the NumPy values themselves as static arguments of one
    # compiled function (an eager Beasty Bar step, op by op, is far slower).
    both = jax.jit(lambda s, wide, fine: (game.step(s, wide), game.step(s, fine)), static_argnums=(1, 2),
                   compiler_options=tiny_training.FAST_COMPILE)
    out_of_range, played = both(state, np.int64(2**32 + legal), np.int64(legal))
    assert forfeited(out_of_range, int(state.current_player)) and not bool(played.terminated)


def test_non_integer_actions_are_rejected(game_and_state):
    game, state, legal = game_and_state
    for action in (legal + 0.9, float(legal), np.float32(legal), True, np.bool_(False), jnp.float32(legal)):
        with pytest.raises(GameInputError, match="action must be an integer id"):
            game.step(state, action)
    with pytest.raises(GameInputError, match="action must be an integer id"):
        jax.jit(game.step)(state, jnp.float32(legal))  # at trace time


def test_players_other_than_0_and_1_are_rejected(game_and_state):
    game, state, _ = game_and_state
    for player in (2, -1, np.int64(5), jnp.int32(2)):
        with pytest.raises(GameInputError, match="player must be in 0..1"):
            game.observe(state, player)
        with pytest.raises(GameInputError, match="player must be in 0..1"):
            game.sample_world(state, player, jax.random.key(0))
        with pytest.raises(GameInputError, match="player must be in 0..1"):
            game.score_margin(state, player)
    with pytest.raises(GameInputError, match="player must be an integer id"):
        game.observe(state, 1.0)
    # A traced player is not checked (no cost in the hot loops): tracing does not raise.
    jax.make_jaxpr(jax.vmap(game.observe, in_axes=(None, 0)))(state, jnp.arange(3))
