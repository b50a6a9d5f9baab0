"""A belief over the opponent's hand (``beastybar_jax.games.beastybar.belief``): worlds drawn
from it keep what the observer knows, the uniform belief is ``sample_world``'s, and one update
after an opponent's move is Bayes' rule, checked against an exact enumeration of their hands.
The diagnostic that scores beliefs in real games is ``experiments/belief.py`` (last test)."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from beastybar_jax.games.beastybar import BEASTYBAR as GAME
from beastybar_jax.games.beastybar import belief as B
from beastybar_jax.games.beastybar.actions import ACTION_CARD_SPECIES
from beastybar_jax.games.beastybar.observe import sample_world
from helpers import experiment

FAST_COMPILE = {"xla_backend_optimization_level": 0}
STEP, LEGAL = jax.jit(GAME.step), jax.jit(GAME.legal_action_mask)


def compile_fast(fn, *example_args):
    """``fn`` compiled for the shapes of ``example_args`` with cheap XLA optimisation."""
    return jax.jit(fn).lower(*example_args).compile(FAST_COMPILE)


def position(moves: int, seed: int = 0):
    """The state after ``moves`` uniformly random legal moves from a fresh deal."""
    state = GAME.init(jax.random.key(seed))
    rng = np.random.default_rng(seed)
    for _ in range(moves):
        state = STEP(state, int(rng.choice(np.flatnonzero(np.asarray(LEGAL(state))))))
    return state


def species_model(states):
    """A model of the opponent that prefers higher species: logit 0.4 * species of the card."""
    logits = 0.4 * jnp.asarray(ACTION_CARD_SPECIES, jnp.float32)
    return jnp.broadcast_to(logits, (states.current_player.shape[0], logits.shape[0]))


def test_the_uniform_belief_is_sample_worlds():
    state = position(3)
    player = int(state.current_player)
    belief = B.uniform_belief(state, player)
    unseen = np.asarray(B.unseen_species(state, player))
    opponent_hand = int(np.sum(np.asarray(state.hand[1 - player])))
    assert unseen.sum() == 12 - np.sum(np.asarray(state.queue) // 12 == 1 - player) - np.sum(
        np.asarray(state.bar[1 - player] | state.thats_it[1 - player]))
    np.testing.assert_allclose(np.asarray(belief), np.where(unseen, opponent_hand / unseen.sum(), 0.0), rtol=1e-6)

    keys = jax.random.split(jax.random.key(1), 3000)
    ours = compile_fast(jax.vmap(lambda k: B.sample_world_from_belief(state, player, k, belief)), keys)(keys)
    theirs = compile_fast(jax.vmap(lambda k: sample_world(state, player, k)), keys)(keys)
    for worlds in (ours, theirs):
        held = np.asarray(worlds.hand[:, 1 - player]).mean(axis=0)
        np.testing.assert_allclose(held, np.where(unseen, opponent_hand / unseen.sum(), 0.0), atol=0.04)
        first_card = np.bincount(np.asarray(worlds.deck[:, 1 - player, 0]), minlength=12) / len(keys)
        np.testing.assert_allclose(first_card, np.where(unseen, 1 / unseen.sum(), 0.0), atol=0.04)


def test_a_world_from_a_belief_keeps_what_the_observer_knows():
    state = position(6, seed=2)
    player = int(state.current_player)
    unseen = np.asarray(B.unseen_species(state, player))
    held = np.flatnonzero(unseen)[:4]  # a belief sure of four unseen cards, sure the rest are in the deck
    belief = jnp.asarray(np.isin(np.arange(12), held), jnp.float32)
    keys = jax.random.split(jax.random.key(0), 64)
    worlds = compile_fast(jax.vmap(lambda k: B.sample_world_from_belief(state, player, k, belief)), keys)(keys)
    hands, decks = np.asarray(worlds.hand), np.asarray(worlds.deck)
    assert (hands[:, 1 - player] == np.isin(np.arange(12), held)).all()
    assert (hands[:, player] == np.asarray(state.hand[player])).all()
    for field in ("queue", "bar", "thats_it", "current_player", "turn"):
        assert (np.asarray(getattr(worlds, field)) == np.asarray(getattr(state, field))[None]).all(), field
    true_decks = np.asarray(state.deck)
    for p, cards in ((player, set(true_decks[player][true_decks[player] >= 0])),
                     (1 - player, set(np.flatnonzero(unseen & ~np.isin(np.arange(12), held))))):
        for deck in decks[:, p]:
            assert sorted(deck[deck >= 0]) == sorted(cards) and (deck[len(cards):] == -1).all()
        assert len({tuple(d) for d in decks[:, p]}) > 1 or len(cards) < 2  # shuffled


def exact_update(state, action: int, epsilon: float) -> np.ndarray:
    """The observer's belief after the opponent's ``action`` from a uniform one, by enumerating
    every hand of the opponent that holds the card played (equally likely before the move)."""
    mover = int(state.current_player)
    played = int(ACTION_CARD_SPECIES[action])
    unseen = np.asarray(B.unseen_species(state, 1 - mover))
    hand_size = int(np.sum(np.asarray(state.hand[mover])))
    others = [s for s in np.flatnonzero(unseen) if s != played]
    hands = [set(h) | {played} for h in itertools.combinations(others, hand_size - 1)]
    hand_rows = np.zeros((len(hands), 2, 12), bool)
    hand_rows[:, 1 - mover] = np.asarray(state.hand[1 - mover])
    for i, h in enumerate(hands):
        hand_rows[i, mover, sorted(h)] = True
    legal = np.asarray(jax.vmap(lambda h: GAME.legal_action_mask(state.replace(hand=h)))(jnp.asarray(hand_rows)))
    logits = 0.4 * ACTION_CARD_SPECIES.astype(np.float64)
    likelihood = np.array([(1 - epsilon) * np.exp(logits[action]) / np.sum(np.exp(logits[m]))
                           + epsilon / m.sum() for m in legal])
    posterior = np.zeros(12)
    for h, w in zip(hands, likelihood / likelihood.sum()):
        posterior[sorted(h)] += w
    deck_size = unseen.sum() - hand_size
    after = posterior + (1 - posterior) / deck_size if deck_size else posterior
    return np.where(unseen & (np.arange(12) != played), after, 0.0)


def test_one_update_is_bayes_rule():
    state = position(4, seed=3)
    mover = int(state.current_player)
    legal = np.flatnonzero(np.asarray(LEGAL(state)))
    action = int(legal[np.argmin(ACTION_CARD_SPECIES[legal])])  # the lowest card: evidence against the high ones
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), state)
    observers = jnp.asarray([1 - mover, mover], jnp.int32)  # the second row is the mover's own belief
    beliefs = jax.vmap(B.uniform_belief)(batch, observers)
    update = compile_fast(lambda b, k: B.update_belief(b, observers, batch, jnp.asarray([action, action]), k,
                                                      species_model, GAME.legal_action_mask,
                                                      num_particles=4096, epsilon=0.1), beliefs, jax.random.key(0))
    updated = np.asarray(update(beliefs, jax.random.key(0)))
    expected = exact_update(state, action, 0.1)
    np.testing.assert_allclose(updated[0], expected, atol=0.03)
    assert updated[0, ACTION_CARD_SPECIES[action]] == 0.0  # the card played left the hand
    assert updated[0].sum() == pytest.approx(np.sum(np.asarray(state.hand[mover])), abs=1e-4)  # and one was drawn
    no_evidence = exact_update(state, action, 1.0)  # a model that chooses at random says nothing
    high, low = [s for s in range(8, 12) if expected[s] > 0], [s for s in range(4) if expected[s] > 0]
    assert high and low  # this one said something: an opponent that prefers high cards played a low one
    assert all(expected[s] < no_evidence[s] for s in high) and all(expected[s] > no_evidence[s] for s in low)
    np.testing.assert_array_equal(updated[1], np.asarray(beliefs[1]))  # an observer's own move: unchanged


@pytest.mark.slow
def test_the_belief_diagnostic_scores_every_model(capsys):
    """``experiments/belief.py`` on a few games: the uniform belief scores exactly what it
    should, every model is scored at every decision, and a bad observer ends in one line."""
    diagnostic = experiment("belief")

    from beastybar_jax.agents import make_agent
    from beastybar_jax.agents.search_agents import network_agent
    from beastybar_jax.network import NetworkConfig, init_params, make_network

    network = make_network(NetworkConfig(torso="mlp", width=16, depth=1), GAME.num_actions)
    observer = network_agent(network, init_params(network, jax.random.key(0), 149), game=GAME)
    result = diagnostic.measure(observer, make_agent("heuristic", game=GAME), GAME, 4, jax.random.key(0),
                                particles=4, epsilon=0.1)
    turns = result["turn"]
    assert len(turns) > 8 and (turns < 16).all()
    for model in diagnostic.MODELS:
        assert {k: len(v) for k, v in result[model].items()} == {"held": len(turns), "hand": len(turns),
                                                                 "log_lik": len(turns)}
        assert (result[model]["held"] <= result[model]["hand"] + 1e-5).all()
    # uniform: hand size / unseen per card, so hand size^2 / unseen cards held
    assert (result["uniform"]["held"] < result["uniform"]["hand"]).all()
    assert (result["half"]["held"] > result["uniform"]["held"]).all()
    diagnostic.print_results([("heuristic", result)], plain=True)
    out = capsys.readouterr().out
    assert all(f"heuristic  {model}" in out for model in diagnostic.MODELS), out
    assert diagnostic.main(["--observer", "heuristic"]) == 2
    assert "a network agent is needed" in capsys.readouterr().err
