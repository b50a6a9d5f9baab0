"""The tic-tac-toe engine against an independent plain-Python reference on the whole
game tree (every reachable position x every action id), and its minimax table against
a plain-Python negamax and the published counts.

Two compiled functions serve the module: the batched transition (step, legal mask,
both observations) over all 5,478 x 11 (position, action) pairs, and the batched
minimax agent.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import tictactoe_reference as ref
from beastybar_jax.games import Game, get_game
from beastybar_jax.games.tictactoe import (
    ACTION_NAMES,
    OBSERVATION_SIZE,
    TICTACTOE,
    action_id,
    render_action,
    render_state,
    split_observation,
)
from beastybar_jax.games import minimax

GAME = TICTACTOE
ACTIONS = np.arange(-1, 10)  # every cell, plus one id on each side of the range


def to_state(board: str):
    """The unbatched engine state of one reference position."""
    return jax.tree.map(lambda x: x[0], ref.to_states([board]))


def to_board(cells) -> str:
    return "".join(".XO"[int(c) + 1] for c in cells)


@pytest.fixture(scope="module")
def positions():
    return ref.all_positions()


@pytest.fixture(scope="module")
def states(positions):
    return ref.to_states(positions)


@pytest.fixture(scope="module")
def transitions(states):
    """Every (position, action) pair through the engine at once: next states
    ``[P, 11]``, legal masks ``[P, 9]`` and observations for both players ``[P, 2, 28]``."""

    @jax.jit
    def run(states):
        step_all = jax.vmap(GAME.step, in_axes=(None, 0))
        next_states = jax.vmap(step_all, in_axes=(0, None))(states, jnp.asarray(ACTIONS))
        observe_both = jax.vmap(GAME.observe, in_axes=(None, 0))
        observations = jax.vmap(observe_both, in_axes=(0, None))(states, jnp.arange(2))
        return next_states, jax.vmap(GAME.legal_action_mask)(states), observations

    return jax.device_get(run(states))


# ----------------------------------------------------------------------------- engine


def test_the_reference_tree_has_the_known_size(positions):
    over = [b for b in positions if ref.is_over(b)]
    assert len(positions) == 5478
    assert len(over) == 958


def test_init_is_the_empty_board_with_x_to_move():
    state = jax.device_get(jax.vmap(GAME.init)(jax.random.split(jax.random.key(0), 3)))
    assert (state.board == -1).all() and (state.current_player == 0).all()
    assert not state.terminated.any() and (state.rewards == 0).all()


def test_every_transition_matches_the_reference(positions, transitions):
    """Legal moves, wins, draws, forfeits and finished games: 5,478 x 11 pairs.
    With ``init`` right this also shows the engine reaches exactly the reference tree."""
    next_states, _, _ = transitions
    mismatches = []
    for p, board in enumerate(positions):
        mark, over, result = ref.mover(board), ref.is_over(board), ref.rewards(board)
        for a, action in enumerate(ACTIONS):
            want = ref.transition(board, mark, over, result, int(action))
            got = (to_board(next_states.board[p, a]), "XO"[next_states.current_player[p, a]],
                   bool(next_states.terminated[p, a]), tuple(next_states.rewards[p, a].tolist()))
            if got != want:
                mismatches.append((board, int(action), got, want))
    assert not mismatches, f"{len(mismatches)} mismatches, e.g. {mismatches[:3]}"


def test_legal_moves_are_the_empty_cells_of_unfinished_games(positions, transitions):
    _, legal, _ = transitions
    want = np.array([[c in ref.moves(b) for c in range(9)] for b in positions])
    np.testing.assert_array_equal(legal, want)


def test_illegal_actions_forfeit_and_finished_games_stay(states, transitions):
    next_states, legal, _ = transitions
    live = ~states.terminated
    cells = ACTIONS[(ACTIONS >= 0) & (ACTIONS < 9)]
    occupied = np.asarray(states.board)[:, cells] >= 0
    illegal = np.concatenate([np.ones((len(live), 1), bool), occupied, np.ones((len(live), 1), bool)], 1)
    illegal &= np.asarray(live)[:, None]  # [P, 11] occupied cells and ids -1, 9 in unfinished games
    assert illegal.sum() > 5000
    mover = np.asarray(states.current_player)[:, None].repeat(len(ACTIONS), 1)
    mover_reward = np.take_along_axis(next_states.rewards, mover[..., None], 2)[..., 0]
    assert next_states.terminated[illegal].all() and (mover_reward[illegal] == -1).all()
    assert (next_states.rewards.sum(-1)[illegal] == 0).all()
    np.testing.assert_array_equal(next_states.board[illegal],
                                  np.asarray(states.board)[:, None].repeat(len(ACTIONS), 1)[illegal])
    finished = np.asarray(states.terminated)
    for field in ("board", "current_player", "terminated", "rewards"):
        after = getattr(next_states, field)[finished]
        before = np.asarray(getattr(states, field))[finished][:, None]
        np.testing.assert_array_equal(after, np.broadcast_to(before, after.shape))
    assert not legal[finished].any()


def test_jit_and_vmap_agree_with_single_eager_steps(positions, transitions):
    next_states, _, _ = transitions
    step = jax.jit(GAME.step)
    for p in range(0, len(positions), 700):  # 8 positions across the tree
        for a in (0, 4, 8, 9):
            for how, fn in (("eager", GAME.step), ("jit", step)):
                single = jax.device_get(fn(to_state(positions[p]), int(ACTIONS[a + 1])))
                for field in ("board", "current_player", "terminated", "rewards"):
                    np.testing.assert_array_equal(getattr(single, field), getattr(next_states, field)[p, a + 1],
                                                  err_msg=f"{how} {positions[p]} action {ACTIONS[a + 1]} {field}")


def test_observations_are_from_the_observers_side(states, transitions):
    _, _, observations = transitions
    assert observations.shape == (len(states.board), 2, OBSERVATION_SIZE)
    board = np.asarray(states.board)
    for player in (0, 1):
        parts = split_observation(observations[:, player])
        cells = parts["cells"]  # [P, 9, 3]
        np.testing.assert_array_equal(cells[..., 0], board == player)
        np.testing.assert_array_equal(cells[..., 1], board == 1 - player)
        np.testing.assert_array_equal(cells[..., 2], board == -1)
        np.testing.assert_array_equal(parts["to_move"][:, 0], np.asarray(states.current_player) == player)
    # A seat swap (X <-> O and the mover) does not change what either side sees.
    swapped = states.replace(board=jnp.where(states.board >= 0, 1 - states.board, -1).astype(jnp.int8),
                             current_player=(1 - states.current_player).astype(jnp.int8))
    movers = np.asarray(states.current_player)
    swapped_obs = jax.vmap(GAME.observe)(swapped, swapped.current_player)
    np.testing.assert_array_equal(swapped_obs, observations[np.arange(len(board)), movers])


def test_sample_world_is_the_state_itself(states):
    state = jax.tree.map(lambda x: x[1234], states)
    world = GAME.sample_world(state, state.current_player, jax.random.key(3))
    assert world is state


def test_the_game_bundle_is_complete_and_registered():
    assert get_game("tictactoe") is GAME
    required = [field for field in Game._fields if field not in Game._field_defaults]
    assert all(getattr(GAME, field) is not None for field in required)
    assert None not in (GAME.tokens, GAME.ui.render_state, GAME.ui.render_action)  # optional, provided
    assert GAME.num_actions == len(GAME.ui.action_names) == 9
    assert GAME.observation_size == OBSERVATION_SIZE and GAME.max_game_length == 9 and GAME.num_players == 2
    start, tokens, features = GAME.tokens
    assert start + tokens * features <= GAME.observation_size and tokens == 9
    state = GAME.init(jax.random.key(0))
    assert GAME.observe(state, 0).shape == (GAME.observation_size,)
    for action in (4, 0, 3, 1):  # X b2, O a1, X a2, O b1
        state = GAME.step(state, action)
    won = GAME.step(state, 5)  # X c2 completes the middle row
    assert [float(GAME.score_margin(won, p)) for p in (0, 1)] == [1.0, -1.0]
    assert float(GAME.score_margin(state, 0)) == 0.0


def test_render_shows_the_board_and_the_result():
    state = GAME.init(jax.random.key(0))
    assert render_state(state).splitlines()[0] == "X (player 0) to move"
    for name in ("b2", "a1", "a2", "b1", "c2"):
        state = GAME.step(state, action_id(name))
    lines = render_state(state, viewer=1).splitlines()
    assert lines[0] == "game over: X (player 0) wins"
    assert lines[1:] == ["   a b c", "1  O O .", "2  X X X", "3  . . ."]
    assert "(you)" in render_state(GAME.init(jax.random.key(0)), viewer=0)
    assert ACTION_NAMES == ("a1", "b1", "c1", "a2", "b2", "c2", "a3", "b3", "c3")
    assert [action_id(n.upper()) for n in ACTION_NAMES] == list(range(9))
    assert render_action(4) == "b2" and render_action(8, GAME.init(jax.random.key(0))) == "X c3"
    for bad in (9, -1):
        with pytest.raises(ValueError, match="0..8"):
            render_action(bad)
    with pytest.raises(ValueError, match="e.g. b2"):
        action_id("d4")


# ----------------------------------------------------------------------------- minimax


def test_minimax_solution_has_the_published_counts():
    """5,478 positions; 958 finished ones: 626 won by X, 316 by O, 16 drawn; 255,168
    possible games: 131,184 won by X, 77,904 by O, 46,080 drawn; the empty board is a draw."""
    t = minimax.solve(GAME)
    over = np.asarray(t.states.terminated)
    rewards = np.asarray(t.states.rewards)
    winner = np.where(rewards[:, 0] > 0, 0, np.where(rewards[:, 1] > 0, 1, -1))
    counts = [int((over & (winner == w)).sum()) for w in (0, 1, -1)]
    games = [int(t.paths[over & (winner == w)].sum()) for w in (0, 1, -1)]
    assert len(t.value) == 5478 and counts == [626, 316, 16]
    assert games == [131184, 77904, 46080]
    assert t.value[0] == 0 and t.optimal[0].all()  # row 0: the initial position


def test_minimax_solution_matches_a_plain_negamax(positions):
    t = minimax.solve(GAME)
    boards = [to_board(b) for b in np.asarray(t.states.board)]
    assert sorted(boards) == list(positions)
    np.testing.assert_array_equal(t.value, [ref.value(b) for b in boards])
    want = np.array([[c in ref.optimal_moves(b) for c in range(9)] for b in boards])
    np.testing.assert_array_equal(t.optimal, want)
    assert sorted(map(tuple, np.asarray(t.states.rewards).tolist())) == sorted(ref.rewards(b) for b in positions)


def test_minimax_agent_plays_only_optimal_moves_and_all_of_them(positions, states):
    keys = jax.random.split(jax.random.key(7), 64)
    act = jax.jit(jax.vmap(jax.vmap(minimax.minimax_act(GAME), in_axes=(None, 0)), in_axes=(0, None)))
    chosen = np.asarray(act(states, keys))  # [P, 64]
    values = np.asarray(jax.jit(jax.vmap(lambda s: minimax.minimax_value(GAME, s)))(states))
    for p, board in enumerate(positions):
        if ref.is_over(board):
            continue
        assert set(chosen[p]) <= ref.optimal_moves(board), board
        assert values[p] == ref.value(board)
    empty = positions.index(ref.EMPTY_BOARD)
    assert set(chosen[empty]) == set(range(9))  # uniform among optimal moves: every cell appears
