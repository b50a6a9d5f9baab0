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
from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.games.beastybar.actions import ACTION_CARD_SPECIES
from beastybar_jax.games.beastybar.cards import CHAMELEON, LION
from beastybar_jax.games.beastybar.observe import OBSERVATION_LAYOUT, sample_world
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
    """A model of the opponent that reads their observation: it prefers high cards (logit 0.4
    per species), and low ones (below the chameleon) when it holds the lion."""
    observations = jax.vmap(GAME.observe)(states, states.current_player)
    holds_lion = observations[:, OBSERVATION_LAYOUT["own_hand"][0] + LION]
    species = jnp.asarray(ACTION_CARD_SPECIES, jnp.float32)
    return 0.4 * species[None, :] + 2.0 * holds_lion[:, None] * (species[None, :] < CHAMELEON)


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


def test_worlds_hold_each_card_with_the_beliefs_probability():
    state = position(2, seed=4)
    player = int(state.current_player)
    unseen = np.asarray(B.unseen_species(state, player))
    belief = uneven_belief(unseen, 4)
    keys = jax.random.split(jax.random.key(2), 4000)
    worlds = compile_fast(jax.vmap(lambda k: B.sample_world_from_belief(state, player, k, belief)), keys)(keys)
    hands = np.asarray(worlds.hand[:, 1 - player])
    assert (hands.sum(axis=1) == 4).all() and not hands[:, ~unseen].any()
    np.testing.assert_allclose(hands.mean(axis=0), np.asarray(belief), atol=0.03)


def uneven_belief(unseen: np.ndarray, hand_size: int) -> jax.Array:
    """Per-card probabilities summing to ``hand_size`` over ``unseen``, far from even: the
    even share plus and minus 80% of its distance to 0 or 1, alternately."""
    even = hand_size / unseen.sum()
    step = 0.8 * min(even, 1 - even)
    sign = np.zeros(12)
    cards = np.flatnonzero(unseen)
    sign[cards[: len(cards) // 2 * 2]] = np.tile([1.0, -1.0], len(cards) // 2)
    return jnp.asarray(np.where(unseen, even + step * sign, 0.0), jnp.float32)


def late_position_with_uneven_hands():
    """The opponent (to move) holds 4 cards with 2 in their deck; the observer holds 3."""
    state = position(13, seed=0)
    observer = 1 - int(state.current_player)
    dropped = int(np.flatnonzero(np.asarray(state.hand[observer]))[0])
    hand, thats_it = np.asarray(state.hand).copy(), np.asarray(state.thats_it).copy()
    hand[observer, dropped], thats_it[observer, dropped] = False, True
    state = state.replace(hand=jnp.asarray(hand), thats_it=jnp.asarray(thats_it))
    assert list(np.asarray(state.hand).sum(axis=1)[[1 - observer, observer]]) == [4, 3]
    assert int(state.deck_sizes[1 - observer]) == 2
    return state


def exact_update(state, action: int, epsilon: float, prior_weights: np.ndarray | None = None) -> np.ndarray:
    """The observer's belief after the opponent's ``action``, by enumerating every hand of the
    opponent that holds the card played: before the move each hand is as likely as the
    product of its cards' ``prior_weights`` (all equal by default), the model is
    ``species_model`` applied to the position with that hand and the rest as the deck."""
    mover = int(state.current_player)
    played = int(ACTION_CARD_SPECIES[action])
    unseen = np.asarray(B.unseen_species(state, 1 - mover))
    hand_size = int(np.sum(np.asarray(state.hand[mover])))
    weights = np.ones(12) if prior_weights is None else np.asarray(prior_weights, np.float64)
    others = [s for s in np.flatnonzero(unseen) if s != played]
    hands = [sorted(set(h) | {played}) for h in itertools.combinations(others, hand_size - 1)]
    hand_rows = np.repeat(np.asarray(state.hand)[None], len(hands), axis=0)
    deck_rows = np.repeat(np.asarray(state.deck)[None], len(hands), axis=0)
    for i, h in enumerate(hands):
        hand_rows[i, mover] = np.isin(np.arange(12), h)
        deck = [s for s in np.flatnonzero(unseen) if s not in h]
        deck_rows[i, mover] = deck + [-1] * (C.DECK_SIZE - len(deck))
    positions = jax.vmap(lambda h, d: state.replace(hand=h, deck=d))(jnp.asarray(hand_rows), jnp.asarray(deck_rows))
    legal = np.asarray(jax.vmap(GAME.legal_action_mask)(positions))
    logits = np.asarray(species_model(positions), np.float64)
    likelihood = np.array([(1 - epsilon) * np.exp(x[action]) / np.sum(np.exp(x[m])) + epsilon / m.sum()
                           for x, m in zip(logits, legal)])
    likelihood *= np.array([np.prod(weights[h]) for h in hands])
    posterior = np.zeros(12)
    for h, w in zip(hands, likelihood / likelihood.sum()):
        posterior[h] += w
    deck_size = unseen.sum() - hand_size
    after = posterior + (1 - posterior) / deck_size if deck_size else posterior
    return np.where(unseen & (np.arange(12) != played), after, 0.0)


@pytest.mark.parametrize("where", ["early, an even belief", "late, uneven hands and belief"])
def test_one_update_is_bayes_rule(where):
    late = where.startswith("late")
    state = late_position_with_uneven_hands() if late else position(4, seed=3)
    mover = int(state.current_player)
    legal = np.flatnonzero(np.asarray(LEGAL(state)))
    action = int(legal[np.argmin(ACTION_CARD_SPECIES[legal])])  # the lowest card: evidence against the high ones
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), state)
    observers = jnp.asarray([1 - mover, mover], jnp.int32)  # the second row is the mover's own belief
    beliefs = jax.vmap(B.uniform_belief)(batch, observers)
    prior_weights = None
    if late:
        unseen = np.asarray(B.unseen_species(state, 1 - mover))
        beliefs = beliefs.at[0].set(uneven_belief(unseen, 4))
        prior_weights = np.asarray(B._hand_weights(beliefs[0], jnp.asarray(unseen), 4))
        np.testing.assert_allclose(np.asarray(B._inclusion(jnp.asarray(prior_weights), 4)), beliefs[0], atol=1e-4)
    update = compile_fast(lambda b, k: B.update_belief(b, observers, batch, jnp.asarray([action, action]), k,
                                                      species_model, GAME.legal_action_mask,
                                                      num_particles=4096, epsilon=0.1), beliefs, jax.random.key(0))
    updated = np.asarray(update(beliefs, jax.random.key(0)))
    expected = exact_update(state, action, 0.1, prior_weights)
    np.testing.assert_allclose(updated[0], expected, atol=0.03)
    assert updated[0, ACTION_CARD_SPECIES[action]] == 0.0  # the card played left the hand
    assert updated[0].sum() == pytest.approx(np.sum(np.asarray(state.hand[mover])), abs=1e-4)  # and one was drawn
    no_evidence = exact_update(state, action, 1.0, prior_weights)  # a model that chooses at random says nothing
    assert np.abs(expected - no_evidence).max() > 0.04  # this one said something (beyond the tolerance)
    np.testing.assert_array_equal(updated[1], np.asarray(beliefs[1]))  # an observer's own move: unchanged


@pytest.mark.slow
def test_the_belief_diagnostic_scores_every_model(capsys):
    """``experiments/belief.py`` on a few games: the observer's decisions are scored, the
    uniform belief exactly as it should be, every model at every decision; a bad observer
    ends in one line."""
    diagnostic = experiment("belief")

    from beastybar_jax.agents import make_agent
    from beastybar_jax.agents.search_agents import network_agent
    from beastybar_jax.network import NetworkConfig, init_params, make_network

    network = make_network(NetworkConfig(torso="mlp", width=16, depth=1), GAME.num_actions)
    observer = network_agent(network, init_params(network, jax.random.key(0), 149), game=GAME)
    result = diagnostic.measure(observer, make_agent("heuristic", game=GAME), GAME, 4, jax.random.key(0),
                                particles=4, epsilon=0.1)
    turns, games = result["turn"], result["game"]
    # The observer's decisions while the opponent's deck hides their hand: every other turn of
    # the first 16 (7 or 8 a game, as the observer moves second or first), never the opponent's.
    assert sorted(set(games)) == [0, 1, 2, 3] and (turns < 16).all()
    for game in range(4):
        assert len(set(turns[games == game] % 2)) == 1 and (games == game).sum() in (7, 8)
    for model in diagnostic.MODELS:
        assert {k: len(v) for k, v in result[model].items()} == {"held": len(turns), "hand": len(turns),
                                                                 "log_lik": len(turns)}
        assert (result[model]["held"] <= result[model]["hand"] + 1e-5).all()
    assert (result["uniform"]["hand"] == 4).all()
    # uniform: 4 / unseen per card, so 16 / unseen cards of the hand held: 5 to 12 unseen
    unseen = 16 / result["uniform"]["held"]
    np.testing.assert_allclose(unseen, np.round(unseen), atol=1e-4)
    assert ((unseen >= 5) & (unseen <= 12)).all() and (unseen[turns < 2] == 12).all()
    assert (result["half"]["held"] > result["uniform"]["held"]).all()
    diagnostic.print_results([("heuristic", result)], plain=True)
    out = capsys.readouterr().out
    assert all(f"heuristic  {model}" in out for model in diagnostic.MODELS), out
    assert diagnostic.main(["--observer", "heuristic"]) == 2
    assert "a network agent is needed" in capsys.readouterr().err


def test_the_belief_diagnostic_stopped_prints_the_finished_opponents(monkeypatch, capsys):
    """A signal (here raised as the command's ``Interrupted``) during the second opponent: the
    first one's tables, the one line, exit code 130."""
    import signal

    from beastybar_jax.training.interrupt import Interrupted

    diagnostic = experiment("belief")

    def measure(observer, opponent, game, games, key, *, particles, epsilon, models):
        if opponent.name != "heuristic":
            raise Interrupted(signal.SIGINT)
        scores = {"held": np.array([2.5]), "hand": np.array([4.0]), "log_lik": np.array([-5.0])}
        return {**{m: scores for m in ("uniform", *models, "half")}, "turn": np.array([3]), "game": np.array([0])}

    monkeypatch.setattr(diagnostic, "measure", measure)
    argv = ["--observer", "champion", "--opponents", "heuristic,outcome_heuristic", "--plain"]
    assert diagnostic.main(argv) == 130
    captured = capsys.readouterr()
    assert "heuristic  network" in captured.out and "outcome_heuristic" not in captured.out
    assert captured.err.strip().splitlines()[-1] == ("interrupted by SIGINT after 1 of 2 opponents: "
                                                     "the tables show the finished ones")
