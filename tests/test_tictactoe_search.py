"""Search and the arena on tic-tac-toe: everything above the game layer works from
the ``Game`` alone.

With a uniform evaluator (zero logits, zero value) both mctx policies take a win in
one when they have it (even when the opponent also threatens one) and otherwise
block the opponent's win in one, for X and for O to move. The positions are drawn
from the whole game tree by the plain-Python reference, which also checks they mean
what their names say. Each search is compiled once for all positions at XLA's
cheapest optimisation level.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from helpers import tictactoe_reference as ref
from beastybar_jax.agents.base import Agent, uniform_choice
from beastybar_jax import arena
from beastybar_jax.arena import play_match
from beastybar_jax.search import SearchConfig, run_search, uniform_evaluator
from beastybar_jax.games import minimax
from beastybar_jax.games.tictactoe import TICTACTOE
from helpers.tiny_training import FAST_COMPILE

GAME = TICTACTOE
PER_KIND = 6  # positions of each kind for each player to move
# Without a value function a block is found only by reaching the opponent's win two
# plies down. Over every such position of the tree (860 blocks, 2,358 wins), 128
# simulations find all of them with either policy; Gumbel with 64 misses 75 blocks.
CONFIGS = {
    "gumbel": SearchConfig(algorithm="gumbel", num_simulations=128, max_num_considered_actions=9),
    "puct": SearchConfig(algorithm="puct", num_simulations=128),
}


def spread(boards, count):
    """``count`` boards evenly spaced through a sorted list (deterministic, varied)."""
    assert len(boards) >= count
    return [boards[i] for i in np.linspace(0, len(boards) - 1, count).astype(int)]


def win_positions(mark):
    """``mark`` to move can win now, and the opponent threatens a win too."""
    return spread([b for b in ref.all_positions() if not ref.is_over(b) and ref.mover(b) == mark
                   and ref.winning_cells(b, mark) and ref.winning_cells(b, ref.opponent(mark))], PER_KIND)


def block_positions(mark):
    """``mark`` to move cannot win now, the opponent threatens exactly one cell, and
    blocking it does not lose (so it is the only move that does not)."""
    chosen = []
    for b in ref.all_positions():
        if ref.is_over(b) or ref.mover(b) != mark or ref.winning_cells(b, mark):
            continue
        threats = ref.winning_cells(b, ref.opponent(mark))
        if len(threats) == 1 and -ref.value(ref.play(b, next(iter(threats)))) >= 0:
            chosen.append(b)
    return spread(chosen, PER_KIND)


WIN = win_positions("X") + win_positions("O")
BLOCK = block_positions("X") + block_positions("O")


@pytest.fixture(scope="module")
def searched():
    """``{algorithm: chosen actions [len(WIN) + len(BLOCK)]}`` in evaluation play."""
    states = ref.to_states(WIN + BLOCK)
    evaluate = uniform_evaluator(GAME)
    actions = {}
    for name, config in CONFIGS.items():
        def search(states, key, config=config):
            return run_search(GAME, evaluate, states, key, config, add_noise=False).action
        compiled = jax.jit(search).lower(states, jax.random.key(0)).compile(FAST_COMPILE)
        actions[name] = np.asarray(compiled(states, jax.random.key(1)))
    return actions


def test_the_positions_cover_both_players():
    assert [ref.mover(b) for b in WIN + BLOCK] == (["X"] * PER_KIND + ["O"] * PER_KIND) * 2
    assert len(set(WIN + BLOCK)) == len(WIN + BLOCK)


@pytest.mark.parametrize("algorithm", list(CONFIGS))
def test_search_takes_a_win_in_one(searched, algorithm):
    chosen = searched[algorithm][:len(WIN)]
    missed = [(b, int(a)) for b, a in zip(WIN, chosen) if a not in ref.winning_cells(b, ref.mover(b))]
    assert not missed, f"{algorithm} missed wins (board, action): {missed}"


@pytest.mark.parametrize("algorithm", list(CONFIGS))
def test_search_blocks_a_threat_in_one(searched, algorithm):
    chosen = searched[algorithm][len(WIN):]
    missed = [(b, int(a)) for b, a in zip(BLOCK, chosen)
              if a not in ref.winning_cells(b, ref.opponent(ref.mover(b)))]
    assert not missed, f"{algorithm} failed to block (board, action): {missed}"


def random_agent() -> Agent:
    """A uniformly random legal move of this game (agents/baselines.py's ``random``
    is Beasty Bar's)."""
    return Agent("random", lambda state, key: uniform_choice(GAME.legal_action_mask(state), key))


def test_minimax_never_loses_to_random_in_the_arena():
    result = play_match(Agent("minimax", minimax.minimax_act(GAME)), random_agent(), 200, jax.random.key(0), game=GAME)
    assert result.games == 400 and result.losses == 0
    assert result.illegal_moves == 0 and result.opponent_illegal_moves == 0
    assert result.wins > 0.8 * result.games  # random rarely holds a perfect player to a draw
    assert result.mean_margin == pytest.approx((result.wins - result.losses) / result.games)


def test_minimax_against_itself_always_draws():
    """Through the arena's jittable core (cheaply compiled): perfect play is a draw."""
    match = functools.partial(arena.play_games, Agent("minimax", minimax.minimax_act(GAME)), Agent("minimax-2", minimax.minimax_act(GAME)), game=GAME)
    deal_keys = jax.random.split(jax.random.key(1), 50)
    compiled = jax.jit(match).lower(deal_keys, jax.random.key(2)).compile(FAST_COMPILE)
    result = arena.summarize(compiled(deal_keys, jax.random.key(2)), "minimax", "minimax-2")
    assert result.draws == result.games == 100 and result.first_player_win_rate == 0.0
