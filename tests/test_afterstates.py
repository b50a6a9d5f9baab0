"""Afterstate features (``network.afterstates``): each move's known result, computed
by the engine from what the mover can see, as the network's input."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import random_playout
from helpers.positions import act, position
from beastybar_jax.games import beastybar as game
from beastybar_jax.games import get_game
from beastybar_jax.games.beastybar import afterstate as AF
from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.network import NetworkConfig, init_params, make_network

from_observation = jax.jit(lambda s: AF.afterstate_features(game.observe(s, s.current_player)))
from_state = jax.jit(lambda s: AF.from_state(s, s.current_player))


def row(queue=(), bar_mine=(), bar_theirs=(), out_mine=(), out_theirs=(), ends=0.0, outcome=0.0):
    """The expected feature row of a legal move, written out by hand (mover's side)."""
    r = np.zeros(AF.AFTERSTATE_SIZE, np.float32)
    r[0] = 1.0
    for place, (mine, name) in enumerate(queue):
        r[1 + 14 * place + C.species_id(name)] = 1.0
        r[1 + 14 * place + (12 if mine else 13)] = 1.0
    for offset, names in ((57, bar_mine), (69, bar_theirs), (81, out_mine), (93, out_theirs)):
        for name in names:
            r[offset + C.species_id(name)] = 1.0
    r[105] = sum(C.POINTS[C.species_id(n)] for n in bar_mine) / 10
    r[106] = sum(C.POINTS[C.species_id(n)] for n in bar_theirs) / 10
    r[107], r[108] = ends, outcome
    return r


def test_afterstate_features_of_a_hand_built_position():
    """Player 1 to move with a monkey and a parrot, the decks empty, 7 points in their
    bar and none in the opponent's. The monkey fills the queue: lion and zebra (6
    points) enter the opponent's bar, the monkey itself goes to THAT'S IT, and with 3
    cards left the game ends, won 7-6. The parrot sends the lion out instead and the
    game goes on. Every other move is illegal."""
    state = position(queue=[(0, "lion"), (0, "zebra"), (1, "seal"), (0, "skunk")],
                     hands=((), ("monkey", "parrot")), bar=((), ("hippo", "crocodile", "snake")), mover=1)
    expected = np.zeros((game.NUM_ACTIONS, AF.AFTERSTATE_SIZE), np.float32)
    expected[act("monkey")] = row(queue=[(True, "seal"), (False, "skunk")], bar_theirs=("lion", "zebra"),
                                  out_mine=("monkey",), ends=1.0, outcome=1.0)
    expected[act("parrot", param=0)] = row(
        queue=[(False, "zebra"), (True, "seal"), (False, "skunk"), (True, "parrot")], out_theirs=("lion",))
    for target in range(1, 4):  # the parrot on the zebra, seal or skunk
        place = [(False, "lion"), (False, "zebra"), (True, "seal"), (False, "skunk")]
        kept = place[:target] + place[target + 1:] + [(True, "parrot")]
        gone = {False: (), True: ()}
        gone[place[target][0]] = (place[target][1],)
        expected[act("parrot", param=target)] = row(queue=kept, out_mine=gone[True], out_theirs=gone[False])
    np.testing.assert_array_equal(np.asarray(from_observation(state)), expected)
    np.testing.assert_array_equal(np.asarray(from_state(state)), expected)
    # What the network reads: the legal moves' rows only, in id order, then unused rows.
    rows, actions = jax.jit(AF.legal_afterstates)(game.observe(state, 1))
    legal = [act("parrot", param=t) for t in range(4)] + [act("monkey")]
    assert rows.shape == (AF.MAX_LEGAL_ACTIONS, AF.AFTERSTATE_SIZE)
    np.testing.assert_array_equal(np.asarray(actions), legal + [game.NUM_ACTIONS] * (AF.MAX_LEGAL_ACTIONS - 5))
    np.testing.assert_array_equal(np.asarray(rows[:5]), expected[legal])
    assert not np.asarray(rows[5:]).any()
    # The opponent, not to move, sees no legal move.
    _, not_to_move = jax.jit(AF.legal_afterstates)(game.observe(state, 0))
    assert (np.asarray(not_to_move) == game.NUM_ACTIONS).all()


def test_no_position_has_more_legal_moves_than_rows():
    """The legal mask depends on the mover's hand, the queue's length and the species in
    it. Every hand of 1-4 species against every queue (length 0-4, each species at most
    twice: one card per player): at most MAX_LEGAL_ACTIONS legal moves, so no legal move
    can lose its row."""
    hands = np.array([sum(np.eye(12, dtype=bool)[list(c)]) for n in range(1, 5)
                      for c in itertools.combinations(range(12), n)])  # [793, 12]
    queues = []
    for k in range(5):
        for species in itertools.combinations(range(12), k):
            for length in range(max(k, 0), min(4, 2 * k) + 1):
                cards = list(species) + [12 + s for s in species][:length - k]  # the repeats are the opponent's
                queues.append(cards + [-1] * (5 - length))
    queues = np.array(queues, np.int8)  # [1158, 5]
    base = position(queue=[], hands=((), ()), mover=0)

    def count(hand, queue):
        state = base.replace(hand=jnp.stack([hand, jnp.zeros_like(hand)]), queue=queue)
        return jnp.sum(game.legal_action_mask(state))

    counts = jax.jit(jax.vmap(jax.vmap(count, in_axes=(None, 0)), in_axes=(0, None)))(hands, queues)
    assert int(counts.max()) == AF.MAX_LEGAL_ACTIONS


def test_the_most_legal_moves_a_position_can_have_all_get_a_row():
    """Parrot, kangaroo, chameleon and skunk in hand, with a parrot, a kangaroo and two
    more species in the queue: 4 + 2 + (4 + 2 + 2) + 1 = 15 legal moves, MAX_LEGAL_ACTIONS."""
    state = position(queue=[(1, "parrot"), (1, "kangaroo"), (1, "seal"), (1, "zebra")],
                     hands=(("parrot", "kangaroo", "chameleon", "skunk"), ()), mover=0)
    legal = np.flatnonzero(np.asarray(game.legal_action_mask(state)))
    assert len(legal) == AF.MAX_LEGAL_ACTIONS
    rows, actions = jax.jit(AF.legal_afterstates)(game.observe(state, 0))
    np.testing.assert_array_equal(np.asarray(actions), legal)
    assert (np.asarray(rows[:, 0]) == 1).all()


@pytest.fixture(scope="module")
def played():
    """Every position of 64 random games (finished ones included)."""
    before, _, _ = random_playout(64)(jax.random.key(7))
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), before)


@pytest.mark.slow
def test_afterstates_use_only_what_the_mover_knows(played):
    """From the mover's observation (what the network sees) the features equal those of
    the true state, and those of every world the mover cannot tell from it."""
    truth = jax.vmap(from_state)(played)
    seen = jax.vmap(from_observation)(played)
    np.testing.assert_array_equal(np.asarray(seen), np.asarray(truth))
    worlds = jax.vmap(game.sample_world)(played, played.current_player,
                                         jax.random.split(jax.random.key(8), played.turn.shape[0]))
    np.testing.assert_array_equal(np.asarray(jax.vmap(from_state)(worlds)), np.asarray(truth))
    live = ~np.asarray(played.terminated)
    legal = np.asarray(jax.vmap(game.legal_action_mask)(played))
    np.testing.assert_array_equal(np.asarray(truth)[..., 0], legal.astype(np.float32))
    assert np.asarray(truth)[live][..., 107].any()  # some moves end the game


@pytest.mark.slow
def test_a_network_with_afterstates_scores_moves_by_them():
    beastybar = get_game("beastybar")
    network = make_network(NetworkConfig(width=16, depth=1, afterstates=True, afterstate_width=8), beastybar)
    params = init_params(network, jax.random.key(0), beastybar.observation_size)
    assert "afterstates" in params["params"]
    state = position(queue=[(0, "lion"), (0, "zebra"), (1, "seal"), (0, "skunk")],
                     hands=((), ("monkey", "parrot")), bar=((), ("hippo", "crocodile", "snake")), mover=1)
    observation = game.observe(state, 1)[None]
    out = network.apply(params, observation)
    assert out.policy_logits.shape == (1, game.NUM_ACTIONS) and np.isfinite(np.asarray(out.value)).all()
    # The move scorer's output enters the logits: zeroing its last layer changes them.
    zeroed = jax.tree.map(lambda x: x, params)
    zeroed["params"]["afterstates"]["move_logit"]["kernel"] = jnp.ones_like(
        params["params"]["afterstates"]["move_logit"]["kernel"])
    assert not np.allclose(network.apply(zeroed, observation).policy_logits, out.policy_logits)
    with pytest.raises(ValueError, match="afterstate"):
        make_network(NetworkConfig(afterstates=True), get_game("tictactoe"))
    with pytest.raises(ValueError, match="together"):  # lists need their capacity
        make_network(NetworkConfig(afterstates=True), beastybar._replace(afterstate_capacity=None))


@pytest.mark.slow
def test_move_logits_are_the_move_scorer_on_every_action(played):
    """The network scores only the legal moves' rows; every action's logit must still be
    what the per-move MLP gives its row of the full table (all zero for an illegal
    move), and the value must see the max of its hidden units over the legal moves,
    written out here with the parameters by hand. (That the table has a row for every
    legal move is checked against the engine's legal mask above.)"""
    beastybar = get_game("beastybar")
    network = make_network(NetworkConfig(width=16, depth=1, afterstates=True, afterstate_width=8), beastybar)
    params = init_params(network, jax.random.key(3), beastybar.observation_size)
    observation = jax.vmap(game.observe)(played, played.current_player)[:300]
    p = params["params"]["afterstates"]
    dense = lambda x, name: x @ p[name]["kernel"] + p[name].get("bias", 0.0)  # noqa: E731
    # The torso's features: the network's own, read back through flax's intermediates.
    _, inter = network.apply(params, observation, capture_intermediates=lambda m, _: m.name == "MLPTorso_0")
    features = inter["intermediates"]["MLPTorso_0"]["__call__"][0]
    table = jax.jit(jax.vmap(AF.afterstate_features))(observation)  # [N, 31, 109]
    h = jax.nn.relu(dense(table, "afterstate_in") + (features @ p["context_in"]["kernel"])[:, None, :])
    hidden = jax.nn.relu(dense(h, "move_hidden"))  # [N, 31, 8]
    expected = dense(hidden, "move_logit")[..., 0]
    head = params["params"]["policy_head"]
    expected = expected + features @ head["kernel"] + head["bias"]
    legal = np.asarray(table[..., 0]) > 0
    assert legal.any() and (~legal).any()
    pooled = jnp.max(jnp.where(legal[..., None], hidden, 0.0), axis=1)
    value_head = params["params"]["value_head"]
    value = jnp.tanh(jnp.concatenate([features, pooled], -1) @ value_head["kernel"] + value_head["bias"])[:, 0]
    # 300 observations: the rows come as one list for the batch (compact_afterstates). With
    # room for only 300 rows the list overflows, and the per-observation slots must give
    # the same outputs.
    assert legal.sum() > 300
    squeezed = make_network(network.config, beastybar._replace(afterstate_capacity=lambda n: n))
    for net in (network, squeezed):
        out = jax.jit(net.apply)(params, observation)
        np.testing.assert_allclose(np.asarray(out.policy_logits), np.asarray(expected), rtol=0, atol=1e-5)
        np.testing.assert_allclose(np.asarray(out.value), np.asarray(value), rtol=0, atol=1e-5)


def test_a_batch_of_afterstates_as_one_list(played):
    """``compact_afterstates`` lists the legal moves of a whole batch, observation after
    observation, each with the row ``legal_afterstates`` gives it; ``complete`` tells
    whether the list had room for all of them."""
    observations = jax.vmap(game.observe)(played, played.current_player)[:200]
    slot_rows, slot_actions = jax.jit(jax.vmap(AF.legal_afterstates))(observations)
    slot_rows, slot_actions = np.asarray(slot_rows), np.asarray(slot_actions)
    owner, slot = np.nonzero(slot_actions < game.NUM_ACTIONS)  # row-major: by observation, then action
    total = len(owner)
    assert 0 < total < AF.afterstate_capacity(200) < AF.MAX_LEGAL_ACTIONS * 200
    compact = jax.jit(AF.compact_afterstates, static_argnums=1)
    for capacity in (total + 5, total - 1):
        rows, owners, actions, complete = map(np.asarray, compact(observations, capacity))
        assert bool(complete) == (capacity >= total)
        kept = min(capacity, total)
        np.testing.assert_array_equal(owners[:kept], owner[:kept])
        np.testing.assert_array_equal(actions[:kept], slot_actions[owner, slot][:kept])
        np.testing.assert_array_equal(rows[:kept], slot_rows[owner, slot][:kept])
        assert (owners[kept:] == 200).all() and (actions[kept:] == game.NUM_ACTIONS).all()
        assert not rows[kept:].any()
