"""The reference baselines' scoring rules, pinned on hand-made positions.

Five rules of ``beastybar_jax/games/beastybar/heuristics.py`` are easy to read in a way the
reference project's code does not mean (docs/evaluating.md, "The baselines", states them
exactly). Each test below builds a position where the reference's rule and that other
reading make the agent choose different moves, and asserts the reference's choice, with
the scores worked out in the comments. Ties are broken like the
reference's: uniformly among the moves within 1e-6 of the best.

Every agent's scores and moves on every position come from ONE function,
compiled once for the module at XLA's cheapest optimisation level.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from beastybar_jax.games import beastybar as game
from beastybar_jax.agents import make_agent, random_best
from beastybar_jax.games.beastybar import heuristics
from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.games.beastybar.cards import (
    CROCODILE, GIRAFFE, HIPPO, KANGAROO, LION, MONKEY, SEAL, SKUNK, SNAKE, ZEBRA,
)
from helpers.tiny_training import FAST_COMPILE

AGENTS = ("heuristic", "aggressive", "defensive", "outcome_heuristic")
MATERIAL_AGENTS = AGENTS[:3]  # the material + bonus heuristic at bar weights 2, 3 and 1
NUM_KEYS = 64  # each agent decides every position with this many keys
ME, YOU = 0, 1


def make_state(queue, hands):
    """A late-game position, player 0 to move: ``queue`` is ``[(owner, species), ...]``
    front first, ``hands`` per player; decks are empty, bars too, and every other
    card is in THAT'S IT (so at least 8 cards are visible)."""
    q = np.full(C.QUEUE_SLOTS, -1, np.int8)
    used = np.zeros((2, C.NUM_SPECIES), bool)
    for place, (owner, species) in enumerate(queue):
        q[place] = owner * C.NUM_SPECIES + species
        used[owner, species] = True
    hand = np.zeros((2, C.NUM_SPECIES), bool)
    for p in range(2):
        hand[p, list(hands[p])] = True
        used[p, list(hands[p])] = True
    return game.State(
        queue=jnp.asarray(q), hand=jnp.asarray(hand), deck=jnp.full((2, C.DECK_SIZE), -1, jnp.int8),
        bar=jnp.zeros((2, C.NUM_SPECIES), bool), thats_it=jnp.asarray(~used),
        current_player=jnp.asarray(ME, jnp.int8), turn=jnp.asarray(20, jnp.int8),
        terminated=jnp.asarray(False), rewards=jnp.zeros(2, jnp.float32))


POSITIONS = {
    # queue: your zebra, my hippo, your seal; I hold snake and seal.
    "snake": make_state([(YOU, ZEBRA), (ME, HIPPO), (YOU, SEAL)], ([SNAKE, SEAL], [LION, CROCODILE])),
    # queue: your zebra, your seal, my kangaroo, your skunk; I hold lion and seal.
    "lion": make_state([(YOU, ZEBRA), (YOU, SEAL), (ME, KANGAROO), (YOU, SKUNK)], ([LION, SEAL], [HIPPO, CROCODILE])),
    # queue: your hippo, my giraffe, my seal, your skunk; I hold zebra and monkey.
    "zebra": make_state([(YOU, HIPPO), (ME, GIRAFFE), (ME, SEAL), (YOU, SKUNK)], ([ZEBRA, MONKEY], [LION, CROCODILE])),
    # queue: your monkey, my skunk, my zebra, your zebra; I hold seal and lion.
    "big_five": make_state([(YOU, MONKEY), (ME, SKUNK), (ME, ZEBRA), (YOU, ZEBRA)], ([SEAL, LION], [GIRAFFE, CROCODILE])),
    # queue: your monkey, my seal, your zebra; I hold monkey and skunk.
    "monkey": make_state([(YOU, MONKEY), (ME, SEAL), (YOU, ZEBRA)], ([MONKEY, SKUNK], [LION, CROCODILE])),
    # queue: your zebra, your seal, my kangaroo, your skunk; I hold lion and hippo.
    # The lion takes the front, the hippo walks up behind your zebra: either way the
    # played card and your zebra enter the bar and your skunk goes to THAT'S IT, so
    # both moves leave the same table and 2 points in hand: a tie for every agent.
    "tie": make_state([(YOU, ZEBRA), (YOU, SEAL), (ME, KANGAROO), (YOU, SKUNK)], ([LION, HIPPO], [HIPPO, CROCODILE])),
}
NAMES = tuple(POSITIONS)


@pytest.fixture(scope="module")
def decided():
    """``(scores, actions, legal)``: per agent ``float32[P, A]`` scores and
    ``int32[P, NUM_KEYS]`` chosen moves on the positions, and ``bool[P, A]``."""
    agents = {name: make_agent(name) for name in AGENTS}

    def run(states, keys):
        def scores(state):
            # The table after a move does not depend on hidden cards, so the true
            # state serves as the world the agents sample.
            after = jax.vmap(game.step, in_axes=(None, 0))(state, jnp.arange(game.NUM_ACTIONS))
            by_agent = {name: heuristics.heuristic_scores(state, after, heuristics.HEURISTIC_BAR_WEIGHTS[name])
                        for name in MATERIAL_AGENTS}
            by_agent["outcome_heuristic"] = heuristics.outcome_scores(state, after)
            return by_agent

        def act(agent):
            return jax.vmap(lambda s: jax.vmap(agent.act, in_axes=(None, 0))(s, keys))(states)

        return (jax.vmap(scores)(states), {name: act(a) for name, a in agents.items()},
                jax.vmap(game.legal_action_mask)(states))

    states = jax.tree.map(lambda *xs: jnp.stack(xs), *POSITIONS.values())
    keys = jax.random.split(jax.random.key(0), NUM_KEYS)
    compiled = jax.jit(run).lower(states, keys).compile(FAST_COMPILE)
    return jax.device_get(compiled(states, keys))


def scores_of(decided, agent, position):
    """``{move name: score}`` of the legal moves."""
    scores, _, legal = decided
    i = NAMES.index(position)
    return {game.action_name(a): float(scores[agent][i, a]) for a in np.flatnonzero(legal[i])}


def chosen(decided, agent, position):
    """The set of move names the agent played over ``NUM_KEYS`` keys."""
    _, actions, _ = decided
    return {game.action_name(a) for a in actions[agent][NAMES.index(position)]}


@pytest.mark.parametrize("agent", MATERIAL_AGENTS)
def test_snake_bonus_when_the_mover_has_more_queue_cards_than_before(decided, agent):
    # The snake sorts the queue: my hippo, my snake, your zebra, your seal. I go from
    # one card in the queue to two: the reference's snake bonus, +0.5 x (2 + 2) points
    # of my cards in the first two places = +2. (Our old reading, "more queue cards
    # than the opponent", gave nothing: two each.) The seal reverses the queue and my
    # hippo walks back to the front: [hippo, my seal, your seal, your zebra]: 0.4 more
    # than the snake without its bonus, 1.6 less with it. (No card enters the bar, so
    # the bar weight does not matter.)
    scores = scores_of(decided, agent, "snake")
    assert scores["snake"] - scores["seal"] == pytest.approx(1.6, abs=1e-4)
    assert chosen(decided, agent, "snake") == {"snake"}


@pytest.mark.parametrize("agent", MATERIAL_AGENTS)
def test_lion_bonus_only_when_the_lion_is_first_in_the_queue_after_the_move(decided, agent):
    # The lion takes the front of a four-card queue; the five-animal check then sends
    # it and your zebra on into the bar (your skunk to THAT'S IT). The queue after the
    # move starts with your seal, so no +2: a lion that went on into the bar does not
    # count. The seal reverses the queue and sends itself and your skunk into the bar
    # (your zebra to THAT'S IT), for 1.4 more at every bar weight; the +2 of our old
    # reading made the lion 0.6 better.
    scores = scores_of(decided, agent, "lion")
    assert scores["seal"] - scores["lion"] == pytest.approx(1.4, abs=1e-4)
    assert chosen(decided, agent, "lion") == {"seal"}


@pytest.mark.parametrize("agent", MATERIAL_AGENTS)
def test_zebra_looks_for_opponent_hippo_or_crocodile_after_the_move(decided, agent):
    # Either card fills the queue: your hippo and my giraffe enter the bar and the
    # played card goes to THAT'S IT. Your hippo was in the queue before the move but
    # not after it, so the zebra scores -0.5, not +1.5. Losing the monkey (3 points)
    # instead of the zebra (4) and keeping the zebra in hand is worth
    # 0.5 x 1 + 0.1 x 1 = 0.6, so the monkey leads by 1.1 (it trailed by 0.9 when the
    # hippo was looked for before the move).
    scores = scores_of(decided, agent, "zebra")
    assert scores["monkey"] - scores["zebra"] == pytest.approx(1.1, abs=1e-4)
    assert chosen(decided, agent, "zebra") == {"monkey"}


def test_outcome_counts_opponent_big_five_that_left_the_queue_into_the_bar(decided):
    # The seal reverses the queue to [my seal, your zebra, my zebra, my skunk, your
    # monkey]: my seal and your zebra enter the bar, your monkey goes to THAT'S IT.
    # Your zebra left the queue (into the bar, not THAT'S IT): +1.5, as the reference
    # counts opponent crocodiles, hippos, lions, zebras and giraffes in the queue
    # before minus after. The lion sends your monkey away and takes the front of a
    # four-card queue: 0.56 less than the seal with the +1.5, 0.94 more without it.
    scores = scores_of(decided, "outcome_heuristic", "big_five")
    assert scores["seal"] - scores["lion"] == pytest.approx(0.562, abs=1e-3)
    assert chosen(decided, "outcome_heuristic", "big_five") == {"seal"}


def test_outcome_monkey_bonus_for_an_opponent_monkey_without_the_combo(decided):
    # Two monkeys in the queue throw out every hippo and crocodile: there are none, so
    # no +15, but the reference adds +12 whenever an opponent monkey was in the queue
    # before the move, on its own. (Our old reading gave the +12 only on top of the
    # +15.) The monkey scores 16.39 with it, 4.39 without; the skunk, which sends your
    # zebra and my seal to THAT'S IT, 9.81.
    scores = scores_of(decided, "outcome_heuristic", "monkey")
    assert scores["monkey"] - scores["skunk"] == pytest.approx(6.575, abs=1e-3)
    assert chosen(decided, "outcome_heuristic", "monkey") == {"monkey"}


@pytest.mark.parametrize("agent", AGENTS)
def test_baselines_are_stochastic_only_in_ties(decided, agent):
    """Outside ties every key gives the same move; in a tie the keys spread over the
    tied moves, and only those."""
    scores, actions, legal = decided
    for i, name in enumerate(NAMES):
        valid = np.where(legal[i], scores[agent][i], -np.inf)
        best = {game.action_name(a) for a in np.flatnonzero(valid >= valid.max() - 1e-6)}
        assert chosen(decided, agent, name) == best, name
    assert chosen(decided, agent, "tie") == {"lion", "hippo"}


def test_random_best_breaks_ties_within_1e6_uniformly():
    """Moves within 1e-6 of the best tie and are drawn uniformly; 1.1e-6 or 2e-6
    below the best is not a tie; an illegal move never comes back, whatever its score.
    (Scores near 0.01, where float32 resolves 1e-9, so the tolerance itself is tested.)"""
    best = 0.01
    scores = jnp.asarray([best, best - 0.9e-6, best - 2e-6, best - 0.4e-6, best - 1.1e-6, 5.0], jnp.float32)
    mask = jnp.asarray([True, True, True, True, True, False])
    draws = jax.jit(jax.vmap(random_best, in_axes=(None, None, 0)))(
        scores, mask, jax.random.split(jax.random.key(1), 6000))
    counts = np.bincount(np.asarray(draws), minlength=6)
    assert counts[[2, 4, 5]].sum() == 0
    # three tied moves, 2,000 draws each expected; 0.025 is about 4 standard deviations
    np.testing.assert_allclose(counts[[0, 1, 3]] / 6000, 1 / 3, atol=0.025)


@pytest.mark.slow
def test_scores_lie_on_the_grid_they_are_snapped_to(monkeypatch):
    """The exact scores are multiples of 1/600 (heuristic) and 1/3000
    (outcome_heuristic), which is what lets ``heuristics`` snap its float32 scores
    so that moves the reference scores equal tie bit-for-bit here. Checked before
    the snap, on positions from random play, at every bar weight: a coefficient
    off the grid would fail this."""
    monkeypatch.setattr(heuristics, "_snap", lambda scores, grid: scores * grid)  # scores in grid units

    def grid_units(key):
        def turn(states, k):
            mask = jax.vmap(game.legal_action_mask)(states)
            actions = jax.random.categorical(k, jnp.where(mask, 0.0, -jnp.inf))
            return jax.vmap(game.step)(states, actions), states

        init_key, play_key = jax.random.split(key)
        states = jax.vmap(game.init)(jax.random.split(init_key, 16))
        _, history = jax.lax.scan(turn, states, jax.random.split(play_key, 22))
        states = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), history)

        def units(state):
            after = jax.vmap(game.step, in_axes=(None, 0))(state, jnp.arange(game.NUM_ACTIONS))
            return jnp.stack([heuristics.heuristic_scores(state, after, w) for w in (1.0, 2.0, 3.0)]
                             + [heuristics.outcome_scores(state, after)])

        return jax.vmap(units)(states), jax.vmap(game.legal_action_mask)(states) & ~states.terminated[:, None]

    key = jax.random.key(3)
    units, legal = jax.device_get(jax.jit(grid_units).lower(key).compile(FAST_COMPILE)(key))
    units = units.transpose(1, 0, 2)[:, legal]  # [4, legal moves]
    assert units.shape[1] > 1000
    np.testing.assert_array_less(np.abs(units - np.round(units)), 0.05)
