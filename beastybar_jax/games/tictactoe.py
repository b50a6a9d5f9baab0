"""Tic-tac-toe: a second :class:`~beastybar_jax.games.Game`, small enough to solve exactly.

Action ``a`` (0..8) puts the mover's mark on cell ``a = 3 * row + column`` (row 0 at the
top, named ``a1 b1 c1 / a2 ...``). Player 0 plays X and moves first; a line of three
ends the game with +1 for its owner and -1 for the other, a full board is a draw. The
observation is the board from the observer's side (mine, theirs, empty per cell) and a
to-move flag. Perfect play (the ``minimax`` agent) is :mod:`beastybar_jax.games.minimax`.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.games import minimax, text
from beastybar_jax.games.base import UI, Agents, Game, Solver, TokenLayout, as_player

NUM_CELLS = NUM_ACTIONS = 9
NUM_PLAYERS = 2
EMPTY = -1
CELL_FEATURES = 3  # mine, the opponent's, empty
OBSERVATION_LAYOUT = {"cells": (0, 27), "to_move": (27, 28)}  # [9, 3] in reading order; 1.0 on the mover's turn
OBSERVATION_SIZE = 28
MARKS = ("X", "O")
ACTION_NAMES = text.grid_action_names(3, 3)
LINES = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]])
_IN_LINE = np.zeros((len(LINES), NUM_CELLS), bool)  # [8, 9] cell c is on line l
_IN_LINE[np.arange(len(LINES))[:, None], LINES] = True
_CELLS, _PLAYERS = jax.device_put((np.arange(NUM_CELLS, dtype=np.int32), np.arange(NUM_PLAYERS, dtype=np.int32)))


# ----------------------------------------------------------------------------- the rules


@chex.dataclass(frozen=True)
class State:
    """One game (batched: leading ``[B]``). ``board``: ``int8[9]`` ``-1`` empty, else the
    owner's id; ``current_player``: ``int8[]``; ``terminated``: ``bool[]``; ``rewards``:
    ``float32[2]`` the outcome once terminated, else zeros."""

    board: chex.Array
    current_player: chex.Array
    terminated: chex.Array
    rewards: chex.Array


def init(key: jax.Array) -> State:
    """An empty board, X to move (``key`` unused: no chance; seats alternate in the arena)."""
    del key
    return State(board=jnp.full(NUM_CELLS, EMPTY, jnp.int8), current_player=jnp.zeros((), jnp.int8),
                 terminated=jnp.zeros((), bool), rewards=jnp.zeros(NUM_PLAYERS, jnp.float32))


def has_line(board: jax.Array, player) -> jax.Array:
    """``bool[]`` ``player`` owns all three cells of some line of ``board`` (``[9]``)."""
    return jnp.any(jnp.all((board == player)[None, :] | ~_IN_LINE, axis=1))


def legal_action_mask(state: State) -> jax.Array:
    """``bool[9]`` the empty cells; all False once terminated."""
    return (state.board == EMPTY) & ~state.terminated


def play(state: State, action) -> State:
    """The mover puts their mark on cell ``action`` (empty, game running): a line of three
    wins, a full board draws. (``TICTACTOE.step`` checks the action first: an occupied
    cell or an id outside 0..8 loses for the mover, and a finished game stays as it is.)"""
    mover = state.current_player
    board = jnp.where(_CELLS == action, mover, state.board).astype(jnp.int8)
    won = has_line(board, mover)
    return State(board=board, current_player=(1 - mover).astype(jnp.int8), terminated=won | jnp.all(board != EMPTY),
                 rewards=jnp.where(won, jnp.where(_PLAYERS == mover, 1.0, -1.0), 0.0).astype(jnp.float32))


def observe(state: State, player) -> jax.Array:
    """``float32[28]`` the board from ``player``'s side (marks are mine/theirs, never X/O)."""
    player = as_player(player, NUM_PLAYERS)
    board = state.board.astype(jnp.int32)
    cells = jnp.stack([board == player, (board != EMPTY) & (board != player), board == EMPTY], axis=1)
    return jnp.concatenate([cells.reshape(-1), (state.current_player == player)[None]]).astype(jnp.float32)


def split_observation(observation: jax.Array) -> dict:
    """Named views of ``[..., 28]`` observations; ``cells`` is ``[..., 9, 3]``."""
    parts = {name: observation[..., a:b] for name, (a, b) in OBSERVATION_LAYOUT.items()}
    parts["cells"] = parts["cells"].reshape(*observation.shape[:-1], NUM_CELLS, CELL_FEATURES)
    return parts


def sample_world(state: State, player, key: jax.Array) -> State:
    """``state`` itself: nothing is hidden (``player`` is checked as in ``observe``)."""
    as_player(player, NUM_PLAYERS)
    return state


def score_margin(state: State, player) -> jax.Array:
    """``float32[]`` the outcome for ``player`` (the game has no points)."""
    return state.rewards[as_player(player, NUM_PLAYERS)].astype(jnp.float32)


# ----------------------------------------------------------------------------- for a person's eyes


def action_name(action: int) -> str:
    return text.action_name(ACTION_NAMES, action, "tic-tac-toe")


def action_id(name: str) -> int:
    return text.action_id(ACTION_NAMES, name, "tic-tac-toe cell", "write a column a-c and a row 1-3, e.g. b2")


def render_state(state, viewer: int | None = None) -> str:
    """The board under its status line; ``viewer``'s mark is labelled "you"."""
    if bool(state["terminated"]):
        status = text.outcome_line(np.asarray(state["rewards"]).tolist(), MARKS, viewer)
    else:
        status = f"{text.player_label(int(state['current_player']), MARKS, viewer)} to move"
    return "\n".join([status, *text.render_grid(np.asarray(state["board"]).tolist(), 3, MARKS)])


def render_action(action: int, state=None, viewer: int | None = None) -> str:
    """``"b2"``; with the state before the move, its mark too (``"X b2"``)."""
    name = action_name(action)
    return name if state is None else f"{MARKS[int(state['current_player'])]} {name}"


def table_view(state) -> dict:
    """The cells in reading order, ``{"mark": "X"|"O"|None, "owner": seat|None}`` (nothing is hidden)."""
    cells = [{"mark": MARKS[c] if c >= 0 else None, "owner": int(c) if c >= 0 else None}
             for c in np.asarray(state.board)]
    return {"kind": "board", "rows": 3, "cols": 3, "cells": cells, "marks": list(MARKS)}


TICTACTOE_TOKENS = TokenLayout(start=0, num_tokens=NUM_CELLS, features=CELL_FEATURES)  # the flag: the table token
TICTACTOE = Game(
    name="tictactoe", num_actions=NUM_ACTIONS, observation_size=OBSERVATION_SIZE, num_players=NUM_PLAYERS,
    max_game_length=NUM_CELLS, init=init, play=play, observe=observe, legal_action_mask=legal_action_mask,
    sample_world=sample_world, score_margin=score_margin, tokens=TICTACTOE_TOKENS,
    ui=UI(action_names=ACTION_NAMES, render_state=render_state, render_action=render_action,
          table_view=lambda state, viewer: table_view(state), move_group=lambda action: f"cell:{action}"),
    agents=Agents(baselines=(("minimax", lambda: minimax.minimax_act(TICTACTOE)),), default_opponent="minimax"),
    solver=Solver(exact_moves=lambda state, key: minimax.exact_moves(TICTACTOE, state),
                  exact_applies=lambda state: not bool(state.terminated)))
