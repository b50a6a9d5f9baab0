"""Afterstate features (``network.afterstates``): each move's known result, computed
by the engine from what the mover can see, as the network's input."""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import random_playout
from helpers.positions import act, position
from helpers.tiny_training import FAST_COMPILE
from beastybar_jax.afterstate_scorer import AFTERSTATE_GROUP, LEAST_TIER, MIXED, AfterstateConfig, AfterstateScorer
from beastybar_jax.games import beastybar as game
from beastybar_jax.games import get_game, tracing
from beastybar_jax.games.beastybar import afterstate as AF
from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.network import NetworkConfig, init_params, make_network

# Every function here compiles with cheap XLA optimisation: its graphs (the engine's steps
# for every move, reply and answer, networks over them) are large and run a few times.
jit = functools.partial(jax.jit, compiler_options=FAST_COMPILE)
from_observation = jit(lambda s: AF.afterstate_features(game.observe(s, s.current_player)))
from_state = jit(lambda s: AF.from_state(s, s.current_player))
# One observation's slots (the hand-built positions), and a batch's (every test calls
# these through ``batched``): each compiles once for the module.
afterstates_one, replies_one, answers_one = (jit(f) for f in (AF.legal_afterstates, AF.legal_replies,
                                                              AF.legal_answers))
afterstates_of, replies_of, answers_of = (jit(jax.vmap(f)) for f in (AF.legal_afterstates, AF.legal_replies,
                                                                     AF.legal_answers))
observe_all = jit(jax.vmap(lambda s: game.observe(s, s.current_player)))
legal_of = jit(jax.vmap(game.legal_action_mask))


def with_afterstates(**changes):
    """Beasty Bar with some of its afterstate functions replaced (``Game.afterstates``)."""
    beastybar = get_game("beastybar")
    return beastybar._replace(afterstates=beastybar.afterstates._replace(**changes))


def batched(fn, observations, size=128):
    """``fn`` (a jitted, vmapped function) on ``observations`` ``[N, O]``, ``size`` at a
    time, the last batch padded: one compilation whatever ``N`` is. NumPy outputs."""
    observations = np.asarray(observations)
    n = len(observations)
    padded = np.concatenate([observations, np.repeat(observations[:1], -n % size, axis=0)])
    outputs = [jax.device_get(fn(padded[i:i + size])) for i in range(0, len(padded), size)]
    return jax.tree.map(lambda *x: np.concatenate(x)[:n], *outputs)


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
    rows, actions = afterstates_one(game.observe(state, 1))
    legal = [act("parrot", param=t) for t in range(4)] + [act("monkey")]
    assert rows.shape == (AF.MAX_LEGAL_ACTIONS, AF.AFTERSTATE_SIZE)
    np.testing.assert_array_equal(np.asarray(actions), legal + [game.NUM_ACTIONS] * (AF.MAX_LEGAL_ACTIONS - 5))
    np.testing.assert_array_equal(np.asarray(rows[:5]), expected[legal])
    assert not np.asarray(rows[5:]).any()
    # The opponent, not to move, sees no legal move.
    _, not_to_move = afterstates_one(game.observe(state, 0))
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

    counts = jit(jax.vmap(jax.vmap(count, in_axes=(None, 0)), in_axes=(0, None)))(hands, queues)
    assert int(counts.max()) == AF.MAX_LEGAL_ACTIONS


def test_the_most_legal_moves_a_position_can_have_all_get_a_row():
    """Parrot, kangaroo, chameleon and skunk in hand, with a parrot, a kangaroo and two
    more species in the queue: 4 + 2 + (4 + 2 + 2) + 1 = 15 legal moves, MAX_LEGAL_ACTIONS."""
    state = position(queue=[(1, "parrot"), (1, "kangaroo"), (1, "seal"), (1, "zebra")],
                     hands=(("parrot", "kangaroo", "chameleon", "skunk"), ()), mover=0)
    legal = np.flatnonzero(np.asarray(game.legal_action_mask(state)))
    assert len(legal) == AF.MAX_LEGAL_ACTIONS
    rows, actions = afterstates_one(game.observe(state, 0))
    np.testing.assert_array_equal(np.asarray(actions), legal)
    assert (np.asarray(rows[:, 0]) == 1).all()


@pytest.fixture(scope="module")
def played():
    """Every position of 64 random games (finished ones included), turn after turn:
    ``[24 * 64]``."""
    before, _, _ = random_playout(64)(jax.random.key(7))
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), before)


@pytest.fixture(scope="module")
def observations(played):
    """The mover's observation of each position of ``played``: ``[24 * 64, O]``."""
    return np.asarray(observe_all(played))


@pytest.mark.slow
def test_afterstates_use_only_what_the_mover_knows(played):
    """From the mover's observation (what the network sees) the features equal those of
    the true state, and those of every world the mover cannot tell from it."""
    truth = jax.vmap(from_state)(played)
    seen = jax.vmap(from_observation)(played)
    np.testing.assert_array_equal(np.asarray(seen), np.asarray(truth))
    worlds = jit(jax.vmap(game.sample_world))(played, played.current_player,
                                              jax.random.split(jax.random.key(8), played.turn.shape[0]))
    np.testing.assert_array_equal(np.asarray(jax.vmap(from_state)(worlds)), np.asarray(truth))
    live = ~np.asarray(played.terminated)
    legal = np.asarray(legal_of(played))
    np.testing.assert_array_equal(np.asarray(truth)[..., 0], legal.astype(np.float32))
    assert np.asarray(truth)[live][..., 107].any()  # some moves end the game


@pytest.mark.slow
def test_a_network_with_afterstates_scores_moves_by_them():
    beastybar = get_game("beastybar")
    network = make_network(NetworkConfig(width=16, depth=1, afterstates={"width": 8}), beastybar)
    params = init_params(network, jax.random.key(0), beastybar.observation_size)
    assert "afterstates" in params["params"]
    state = position(queue=[(0, "lion"), (0, "zebra"), (1, "seal"), (0, "skunk")],
                     hands=((), ("monkey", "parrot")), bar=((), ("hippo", "crocodile", "snake")), mover=1)
    observation = game.observe(state, 1)[None]
    apply = jit(network.apply)
    out = apply(params, observation)
    assert out.policy_logits.shape == (1, game.NUM_ACTIONS) and np.isfinite(np.asarray(out.value)).all()
    # The move scorer's output enters the logits: zeroing its last layer changes them.
    zeroed = jax.tree.map(lambda x: x, params)
    zeroed["params"]["afterstates"]["move_logit"]["kernel"] = jnp.ones_like(
        params["params"]["afterstates"]["move_logit"]["kernel"])
    assert not np.allclose(apply(zeroed, observation).policy_logits, out.policy_logits)
    with pytest.raises(ValueError, match="afterstate"):
        make_network(NetworkConfig(afterstates=True), get_game("tictactoe"))
    with pytest.raises(ValueError, match="together"):  # lists need their capacity
        make_network(NetworkConfig(afterstates=True), with_afterstates(capacity=None))
    with pytest.raises(ValueError, match="reply features"):
        make_network(NetworkConfig(afterstates={"replies": True}), with_afterstates(replies=None))
    with pytest.raises(ValueError, match="needs network.afterstates.replies"):
        NetworkConfig(afterstates={"answers": True})
    with pytest.raises(ValueError, match="answer features"):
        make_network(NetworkConfig(afterstates={"replies": True, "answers": True}), with_afterstates(answers=None))


@pytest.mark.slow
def test_move_logits_are_the_move_scorer_on_every_action(observations):
    """The network scores only the legal moves' rows; every action's logit must still be
    what the per-move MLP gives its row of the full table (all zero for an illegal
    move), and the value must see the max of its hidden units over the legal moves,
    written out here with the parameters by hand. (That the table has a row for every
    legal move is checked against the engine's legal mask above.)"""
    beastybar = get_game("beastybar")
    network = make_network(NetworkConfig(width=16, depth=1, afterstates={"width": 8}), beastybar)
    params = init_params(network, jax.random.key(3), beastybar.observation_size)
    observation = observations[:300]
    p = params["params"]["afterstates"]
    dense = lambda x, name: x @ p[name]["kernel"] + p[name].get("bias", 0.0)  # noqa: E731
    # The torso's features: the network's own, read back through flax's intermediates.
    listed, inter = jit(lambda p, o: network.apply(p, o, capture_intermediates=lambda m, _: m.name == "MLPTorso_0"))(
        params, observation)
    features = inter["intermediates"]["MLPTorso_0"]["__call__"][0]
    table = jit(jax.vmap(AF.afterstate_features))(observation)  # [N, 31, 109]
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
    squeezed = make_network(network.config, with_afterstates(capacity=lambda n: (n, (0,))))
    for out in (listed, jit(squeezed.apply)(params, observation)):
        np.testing.assert_allclose(np.asarray(out.policy_logits), np.asarray(expected), rtol=0, atol=1e-5)
        np.testing.assert_allclose(np.asarray(out.value), np.asarray(value), rtol=0, atol=1e-5)


def test_list_capacities_must_grow_from_tier_to_tier():
    """A search takes a batch that fits one tier's lists to fit every later one (it starts
    at the tier its previous search needed): a game whose capacities shrink is refused."""
    replies, answers = AfterstateConfig(replies=True), AfterstateConfig(replies=True, answers=True)
    plan = lambda config, capacity: AfterstateScorer.plan(  # noqa: E731
        config, with_afterstates(capacity=capacity).afterstates, 128, get_game("beastybar").observation_size)
    assert plan(replies, lambda n: (6 * n, (2 * n, 16 * n)))[2] == ((256, 0), (2048, 0))
    assert plan(answers, lambda n: (6 * n, (), ((2 * n, 4 * n), (2 * n, 8 * n))))[2] == ((256, 512), (256, 1024))
    for config, capacity in ((replies, lambda n: (6 * n, (16 * n, 2 * n))),
                             (answers, lambda n: (6 * n, (), ((4 * n, 4 * n), (2 * n, 8 * n))))):
        with pytest.raises(ValueError, match="at least the room of the one before"):
            plan(config, capacity)


def test_a_batch_of_afterstates_as_one_list(observations):
    """``compact_afterstates`` lists the legal moves of a whole batch, observation after
    observation, each with the row ``legal_afterstates`` gives it, and the replies to
    them, move after move, each with the row ``legal_replies`` gives it; ``complete``
    tells whether the lists had room for all of them. Traced for a GPU (its own forms of
    the lists' search and rows), the lists are the same."""
    observations = observations[20 * 64:22 * 64]  # turns 20 and 21: replies
    slot_rows, slot_actions = batched(afterstates_of, observations)
    owner, slot = np.nonzero(slot_actions < game.NUM_ACTIONS)  # row-major: by observation, then action
    total = len(owner)
    capacity, (reply_capacity, _), _ = AF.afterstate_capacity(128)
    assert 0 < total < capacity < AF.MAX_LEGAL_ACTIONS * 128
    reply_slot_rows, reply_slot_actions = batched(replies_of, observations)
    replied = reply_slot_actions[owner, slot]  # [total, 15] the replies to each listed move
    reply_owner, reply_slot = np.nonzero(replied < game.NUM_ACTIONS)
    replies = len(reply_owner)
    assert 0 < replies < reply_capacity
    compact = jit(AF.compact_afterstates, static_argnums=(1, 2))
    for size, reply_size in ((total + 5, replies + 3), (total - 1, replies + 3), (total, replies - 1)):
        lists = jax.tree.map(np.asarray, compact(observations, size, reply_size))
        assert bool(lists.complete) == (size >= total and reply_size >= replies)
        kept = min(size, total)
        np.testing.assert_array_equal(lists.owners[:kept], owner[:kept])
        np.testing.assert_array_equal(lists.actions[:kept], slot_actions[owner, slot][:kept])
        np.testing.assert_array_equal(lists.rows[:kept], slot_rows[owner, slot][:kept])
        assert (lists.owners[kept:] == 128).all() and (lists.actions[kept:] == game.NUM_ACTIONS).all()
        assert not lists.rows[kept:].any()
        assert lists.reply_rows.shape == (reply_size, AF.AFTERSTATE_SIZE)
        if size < total:
            continue
        listed = min(reply_size, replies)
        np.testing.assert_array_equal(lists.reply_owners[:listed], reply_owner[:listed])
        np.testing.assert_array_equal(lists.reply_actions[:listed], replied[reply_owner, reply_slot][:listed])
        np.testing.assert_array_equal(lists.reply_rows[:listed],
                                      reply_slot_rows[owner, slot][reply_owner, reply_slot][:listed])
        assert (lists.reply_owners[listed:] == size).all() and not lists.reply_rows[listed:].any()
    with tracing.for_gpu(kernels="xla"):  # a new function (JAX reuses a trace); no Pallas interpreter to wait for
        on_gpu = jit(lambda o: AF.compact_afterstates(o, size, reply_size))(observations)
    for a, b in zip(jax.tree.leaves(lists), jax.tree.leaves(on_gpu)):
        np.testing.assert_array_equal(a, np.asarray(b))


def test_replies_of_a_hand_built_position():
    """Player 0 to move with a seal and a skunk; player 1 holds a lion and a parrot, both
    decks empty, so player 0 knows that hand. The seal reverses the queue (zebra, seal ->
    seal, zebra); the opponent's replies to it, each row that reply's own result told
    from player 0's side: the lion goes to the front; the parrot sends out the seal
    (place 0) or the zebra (place 1), and with 4 cards left the game ends, drawn 0-0.
    The skunk sends the zebra out and ends the game: no replies to it. Nor, with a card
    left in the opponent's deck, to anything: their hand is not known."""
    state = position(queue=[(1, "zebra")], hands=(("seal", "skunk"), ("lion", "parrot")), mover=0, turn=20)
    observation = game.observe(state, 0)
    rows, actions = map(np.asarray, replies_one(observation))
    assert rows.shape == (AF.MAX_LEGAL_ACTIONS, AF.MAX_LEGAL_ACTIONS, AF.AFTERSTATE_SIZE)
    moves = list(np.asarray(afterstates_one(observation)[1]))
    seal = moves.index(act("seal"))
    expected = {
        act("lion"): row(queue=[(False, "lion"), (True, "seal"), (False, "zebra")]),
        act("parrot", param=0): row(queue=[(False, "zebra"), (False, "parrot")], out_mine=("seal",), ends=1.0),
        act("parrot", param=1): row(queue=[(True, "seal"), (False, "parrot")], out_theirs=("zebra",), ends=1.0),
    }
    ids = sorted(expected)
    unused = [game.NUM_ACTIONS] * (AF.MAX_LEGAL_ACTIONS - 3)
    np.testing.assert_array_equal(actions[seal], ids + unused)
    np.testing.assert_array_equal(rows[seal, :3], np.stack([expected[i] for i in ids]))
    assert not rows[seal, 3:].any()
    assert len(moves) - moves.count(game.NUM_ACTIONS) == 2  # the seal and the skunk
    others = np.arange(AF.MAX_LEGAL_ACTIONS) != seal
    assert (actions[others] == game.NUM_ACTIONS).all() and not rows[others].any()
    hidden = position(queue=[(1, "zebra")], hands=(("seal", "skunk"), ("lion", "parrot")), decks=((), ("hippo",)),
                      mover=0, turn=20)
    _, unknown = replies_one(game.observe(hidden, 0))
    assert (np.asarray(unknown) == game.NUM_ACTIONS).all()


@pytest.mark.slow
def test_replies_use_only_what_the_mover_knows(played, observations):
    """From the mover's observation, the replies equal those computed on the true state
    (the real hands and decks): for each legal move, every legal reply of the opponent,
    where the opponent's deck is empty; and none elsewhere."""
    rows, actions = batched(replies_of, observations)

    def true_replies(state):
        moves = AF.legal_actions(game.legal_action_mask(state))
        after = jax.vmap(game.step, in_axes=(None, 0))(state, jnp.where(moves < game.NUM_ACTIONS, moves, 0))
        return jax.vmap(AF.legal_rows, in_axes=(0, None))(after, state.current_player)

    truth_rows, truth_actions = jit(jax.vmap(true_replies))(played)
    moves = np.asarray(jit(jax.vmap(AF.legal_actions))(legal_of(played)))
    opponent_deck = np.asarray(played.deck_sizes)[np.arange(len(moves)), 1 - np.asarray(played.current_player)]
    known = (opponent_deck == 0)[:, None, None] & (moves < game.NUM_ACTIONS)[:, :, None]
    truth_actions = np.where(known, np.asarray(truth_actions), game.NUM_ACTIONS)
    truth_rows = np.where(known[..., None], np.asarray(truth_rows), 0.0)
    np.testing.assert_array_equal(np.asarray(actions), truth_actions)
    np.testing.assert_array_equal(np.asarray(rows), truth_rows)
    replied = (truth_actions < game.NUM_ACTIONS).any(-1)
    assert replied.sum() > 100 and (known[..., 0] & ~replied).any()  # some moves end the game


def test_answers_of_a_hand_built_position():
    """The position of the test above, both decks empty: player 0 knows their own next
    hand too, so they have answers to the opponent's replies. After the seal and the
    lion (lion, seal, zebra) player 0 holds the skunk alone; it sends out the two
    strongest species, the lion and the zebra, and with 3 cards left the game ends,
    drawn 0-0. The parrot's replies end the game: no answers to them. With a card in
    player 0's own deck their next hand is not known: replies, but no answers."""
    state = position(queue=[(1, "zebra")], hands=(("seal", "skunk"), ("lion", "parrot")), mover=0, turn=20)
    observation = game.observe(state, 0)
    rows, actions = map(np.asarray, answers_one(observation))
    assert rows.shape == (AF.MAX_LEGAL_ACTIONS,) * 3 + (AF.AFTERSTATE_SIZE,)
    moves = list(np.asarray(afterstates_one(observation)[1]))
    replies = list(np.asarray(replies_one(observation)[1])[moves.index(act("seal"))])
    seal, lion = moves.index(act("seal")), replies.index(act("lion"))
    unused = [game.NUM_ACTIONS] * (AF.MAX_LEGAL_ACTIONS - 1)
    np.testing.assert_array_equal(actions[seal, lion], [act("skunk")] + unused)
    np.testing.assert_array_equal(rows[seal, lion, 0], row(queue=[(True, "seal"), (True, "skunk")],
                                                           out_theirs=("lion", "zebra"), ends=1.0))
    others = np.ones(actions.shape[:2], bool)
    others[seal, lion] = False
    assert not rows[seal, lion, 1:].any() and (actions[others] == game.NUM_ACTIONS).all() and not rows[others].any()
    own_deck = position(queue=[(1, "zebra")], hands=(("seal", "skunk"), ("lion", "parrot")), decks=(("hippo",), ()),
                        mover=0, turn=20)
    observation = game.observe(own_deck, 0)
    assert (np.asarray(replies_one(observation)[1]) < game.NUM_ACTIONS).any()
    assert (np.asarray(answers_one(observation)[1]) == game.NUM_ACTIONS).all()


@pytest.mark.slow
def test_answers_use_only_what_the_mover_knows(played, observations):
    """From the mover's observation, the answers equal those computed on the true state
    (the real hands and decks): for each legal move and each legal reply to it, every
    legal answer of the mover, where both decks are empty; and none elsewhere. The
    batch's lists (``compact_afterstates``) hold the same rows, reply after reply."""
    # Turns 15, 17, 19 and 20 of 8 games: the decks run out at 15-16 (turn 15: replies, no
    # answers), and from turn 20 on some replies end the game.
    games, per_turn = played.turn.shape[0] // 24, 8
    index = (np.array([15, 17, 19, 20])[:, None] * games + np.arange(per_turn)).reshape(-1)
    late = jax.tree.map(lambda x: x[index], played)
    observations = observations[index]
    rows, actions = batched(answers_of, observations, size=16)

    def true_answers(state):
        moves = AF.legal_actions(game.legal_action_mask(state))
        after = jax.vmap(game.step, in_axes=(None, 0))(state, jnp.where(moves < game.NUM_ACTIONS, moves, 0))
        replies = jax.vmap(lambda s: AF.legal_actions(game.legal_action_mask(s)))(after)  # [K, R]
        replied = jax.vmap(jax.vmap(game.step, in_axes=(None, 0)))(after, jnp.where(replies < game.NUM_ACTIONS,
                                                                                      replies, 0))
        return jax.vmap(jax.vmap(AF.legal_rows, in_axes=(0, None)), in_axes=(0, None))(replied, state.current_player)

    truth_rows, truth_actions = jit(jax.vmap(true_answers))(late)
    _, reply_actions = batched(replies_of, observations)
    decks = np.asarray(late.deck_sizes)
    known = ((decks == 0).all(axis=1)[:, None, None] & (np.asarray(reply_actions) < game.NUM_ACTIONS))[..., None]
    truth_actions = np.where(known, np.asarray(truth_actions), game.NUM_ACTIONS)
    np.testing.assert_array_equal(actions, truth_actions)
    np.testing.assert_array_equal(rows, np.where(known[..., None], np.asarray(truth_rows), 0.0))
    answered = (truth_actions < game.NUM_ACTIONS).any(-1)
    assert answered.sum() > 100 and (known[..., 0] & ~answered).any()  # some replies end the game
    # The lists of turns 17 and 19: the answers in the order of their replies.
    pick = slice(per_turn, 3 * per_turn)
    num = pick.stop - pick.start
    slot_actions = actions[pick]
    reply_capacity = 15 * 15 * num
    lists = jax.tree.map(np.asarray, jit(AF.compact_afterstates, static_argnums=(1, 2, 3))(
        observations[pick], 15 * num, reply_capacity, 60 * num))
    assert lists.complete
    where = np.nonzero(slot_actions < game.NUM_ACTIONS)  # row-major: observation, move, reply, answer
    listed = len(where[0])
    assert 0 < listed < 60 * num
    np.testing.assert_array_equal(lists.answer_actions[:listed], slot_actions[where])
    np.testing.assert_array_equal(lists.answer_rows[:listed], rows[pick][where])
    # Each answer's owner is its reply's row: the reply's observation, move and reply slot.
    reply_rows = np.stack(np.nonzero(np.asarray(reply_actions)[pick] < game.NUM_ACTIONS), axis=1)
    owner_slots = reply_rows[lists.answer_owners[:listed]]
    np.testing.assert_array_equal(owner_slots, np.stack(where[:3], axis=1))
    assert (lists.answer_owners[listed:] == reply_capacity).all() and not lists.answer_rows[listed:].any()


def scorer_by_hand(observations, config, capacity, key, seed):
    """What the by-hand scorer tests share: a Beasty Bar network of ``config`` with list
    ``capacity`` (``Afterstates.capacity``), random parameters (the links between plies,
    ``reply_to_move`` and ``answer_to_reply``, which start at zero, too: so they matter),
    ``observations`` by turn ``[24, games, F]``, the network's jitted apply capturing the
    torso's output, and ``dense(x, name)`` with a layer's parameters."""
    beastybar = get_game("beastybar")
    network = make_network(config, with_afterstates(capacity=capacity))
    # Random parameters of the network's shapes (its initializer is not what is tested, and
    # compiling it costs seconds): the links between plies too, which start at zero.
    shapes = jax.eval_shape(lambda k: init_params(network, k, beastybar.observation_size), jax.random.key(key))
    rng = np.random.default_rng(seed)
    params = jax.tree.map(lambda x: (rng.normal(size=x.shape) / np.sqrt(x.shape[0] if x.ndim == 2 else 4)).astype(
        x.dtype), shapes)
    p = params["params"]["afterstates"]
    observations = observations.reshape(24, len(observations) // 24, -1)

    @functools.partial(jit, static_argnums=1)
    def apply(observation, tier=None):  # the scorer's tier (None: it picks)
        return network.clone(afterstate_tier=tier).apply(params, observation,
                                                         capture_intermediates=lambda m, _: m.name == "MLPTorso_0")

    def dense(x, name):
        return x @ p[name]["kernel"] + p[name].get("bias", 0.0)

    return params, p, observations, apply, dense


def assert_move_scorer_outputs(out, params, features, moves, second, rows=slice(None)):
    """The network's logits and value, written out by hand from the per-move MLP's second
    hidden layer ``second`` ``[N, K, W]`` of the legal moves ``moves`` ``[N, K]``: each
    legal action's logit from its row, every other action's that of an all-zero row
    (which has no replies); the value from the torso ``features`` and the max of
    ``second`` over the legal moves; on ``rows`` only."""
    p = params["params"]["afterstates"]
    dense = lambda x, name: x @ p[name]["kernel"] + p[name].get("bias", 0.0)  # noqa: E731
    zero = np.maximum(dense(np.maximum(dense(np.zeros(AF.AFTERSTATE_SIZE), "afterstate_in")
                                       + features @ p["context_in"]["kernel"], 0), "move_hidden"), 0)  # [N, W]
    expected = np.repeat(dense(zero, "move_logit"), game.NUM_ACTIONS, axis=1)  # illegal: the all-zero row's
    used = moves < game.NUM_ACTIONS
    n, k = np.nonzero(used)
    expected[n, moves[n, k]] = dense(second, "move_logit")[n, k, 0]
    head = params["params"]["policy_head"]
    expected = expected + features @ head["kernel"] + head["bias"]
    pooled = np.where(used[..., None], second, 0.0).max(axis=1)
    value_head = params["params"]["value_head"]
    value = np.tanh(np.concatenate([features, pooled], -1) @ value_head["kernel"] + value_head["bias"])[:, 0]
    np.testing.assert_allclose(np.asarray(out.policy_logits)[rows], expected[rows], rtol=0, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out.value)[rows], value[rows], rtol=0, atol=1e-5)


@pytest.mark.slow
def test_move_logits_with_replies_are_the_two_ply_scorer_by_hand(observations):
    """With ``network.afterstates.replies`` each move's second layer also reads the min and max over
    the opponent's replies of the per-reply MLP's units (and a flag), written out here
    with the parameters by hand from the slots of ``legal_afterstates`` and
    ``legal_replies``. The network must give the same logits and value whichever way it
    scores: lists with room for 2 replies an observation, else for 16, else the slots;
    and as the learners score (``MIXED``), the first lists, the rows of a group of 128
    that overflows them marked not scored (``NetworkOutput.scored``). Three batches of
    256 observations take each way: turns 5-6 (no replies), 20-21 (about 3 an
    observation) and 15-16 (about 23). Scoring at one tier, the first lists or the slots,
    it tells the first tier whose lists hold the batch (a search starts there next)."""
    params, p, observations, apply, dense = scorer_by_hand(
        observations, NetworkConfig(width=16, depth=1, afterstates={"width": 8, "replies": True}),
        lambda n: (6 * n, (2 * n, 16 * n)), key=4, seed=5)
    replies_seen = []
    for first_turn, tier in ((5, None), (20, None), (15, None), (5, MIXED), (20, MIXED)):
        observation = observations[first_turn:first_turn + 2].reshape(-1, observations.shape[-1])
        out, inter = apply(observation, tier)
        features = np.asarray(inter["intermediates"]["MLPTorso_0"]["__call__"][0])
        rows, moves = batched(afterstates_of, observation)  # [N, K, F], [N, K]
        reply_rows, replies = batched(replies_of, observation)  # [N, K, R, F]
        replies_seen.append((replies < game.NUM_ACTIONS).sum() / len(observation))
        first = np.maximum(dense(rows, "afterstate_in") + (features @ p["context_in"]["kernel"])[:, None], 0)
        units = np.maximum(dense(np.maximum(dense(reply_rows, "reply_in")
                                            + (first @ p["reply_context"]["kernel"])[:, :, None], 0), "reply_hidden"), 0)
        valid = (replies < game.NUM_ACTIONS)[..., None]  # [N, K, R, 1]
        has = valid.any(axis=2)
        summary = np.concatenate([np.where(has, np.where(valid, units, np.inf).min(axis=2), 0.0),
                                  np.where(valid, units, 0.0).max(axis=2), has.astype(np.float32)], axis=-1)
        second = np.maximum(dense(first, "move_hidden") + summary @ p["reply_to_move"]["kernel"], 0)  # [N, K, 8]
        if tier == MIXED:  # a group is scored where its moves and replies fit the first lists
            per_group = lambda used: used.reshape(-1, AFTERSTATE_GROUP).sum(axis=1)  # noqa: E731
            fits = ((per_group((moves < game.NUM_ACTIONS).sum(1)) <= 6 * AFTERSTATE_GROUP)
                    & (per_group((replies < game.NUM_ACTIONS).sum((1, 2))) <= 2 * AFTERSTATE_GROUP))
            np.testing.assert_array_equal(out.scored, np.repeat(fits, AFTERSTATE_GROUP))
            assert fits.all() == (first_turn == 5)
        else:
            assert out.scored is None
        assert_move_scorer_outputs(out, params, features, moves, second,
                                   rows=slice(None) if tier is None else np.asarray(out.scored))
        if tier is None:
            num = len(observation)
            fits = [(moves < game.NUM_ACTIONS).sum() <= 6 * num and (replies < game.NUM_ACTIONS).sum() <= room * num
                    for room in (2, 16)]
            for one_tier in (0, 2):
                _, sown = apply(observation, one_tier)
                assert int(sown["intermediates"]["afterstates"][LEAST_TIER][0]) == (fits + [True]).index(True)
    assert replies_seen[0] == 0 and 2 < replies_seen[1] < 16 < replies_seen[2]


@pytest.mark.slow
def test_move_logits_with_answers_are_the_three_ply_scorer_by_hand(observations):
    """With ``network.afterstates.answers`` each reply's second layer also reads the min and max over
    the mover's answers of the per-answer MLP's units (and a flag): written out here
    with the parameters by hand from the slots of ``legal_afterstates``,
    ``legal_replies`` and ``legal_answers``. The network's lists must give the same
    logits and value whichever of them has room: the lists (turn 5, none; turn 20, a few)
    or the slots (turn 16, about 90 answers an observation); 16 observations each."""
    params, p, observations, apply, dense = scorer_by_hand(
        observations, NetworkConfig(width=16, depth=1, afterstates={"width": 8, "replies": True, "answers": True}),
        lambda n: (6 * n, (4 * n,), ((16 * n, 40 * n),)), key=6, seed=7)
    relu = lambda x: np.maximum(x, 0.0)  # noqa: E731

    def summary(units, valid):  # min, max over the children's axis (-2), and any
        has = valid.any(axis=-2)
        return np.concatenate([np.where(has, np.where(valid, units, np.inf).min(axis=-2), 0.0),
                               np.where(valid, units, 0.0).max(axis=-2), has.astype(np.float32)], axis=-1)

    answers_seen = []
    for turn in (5, 20, 16):
        observation = observations[turn, :16]
        out, inter = apply(observation)
        features = np.asarray(inter["intermediates"]["MLPTorso_0"]["__call__"][0])
        rows, moves = batched(afterstates_of, observation)  # [N, K, F]
        reply_rows, replies = batched(replies_of, observation)  # [N, K, R, F]
        answer_rows, answers = batched(answers_of, observation, size=16)  # [N, K, R, Q, F]
        answers_seen.append((answers < game.NUM_ACTIONS).sum() / len(observation))
        first = relu(dense(rows, "afterstate_in") + (features @ p["context_in"]["kernel"])[:, None])
        reply_first = relu(dense(reply_rows, "reply_in") + (first @ p["reply_context"]["kernel"])[:, :, None])
        answer_units = relu(dense(relu(dense(answer_rows, "answer_in")
                                       + (reply_first @ p["answer_context"]["kernel"])[..., None, :]), "answer_hidden"))
        to_reply = summary(answer_units, (answers < game.NUM_ACTIONS)[..., None]) @ p["answer_to_reply"]["kernel"]
        reply_units = relu(dense(reply_first, "reply_hidden") + to_reply)  # [N, K, R, 8]
        to_move = summary(reply_units, (replies < game.NUM_ACTIONS)[..., None]) @ p["reply_to_move"]["kernel"]
        second = relu(dense(first, "move_hidden") + to_move)  # [N, K, 8]
        assert_move_scorer_outputs(out, params, features, moves, second)
    assert answers_seen[0] == 0 and 0 < answers_seen[1] < 40 < answers_seen[2]


def test_the_learners_leave_rows_the_network_did_not_score_out_of_their_losses():
    """Where a training batch's afterstate lists overflow (``MIXED``), the network marks the
    rows it did not score (``NetworkOutput.scored``); both learners' losses are then those
    of the scored rows alone, whatever the others hold, and report the share left out."""
    from beastybar_jax.alphazero.loss import loss_fn as alphazero_loss
    from beastybar_jax.alphazero.replay import Records
    from beastybar_jax.config.alphazero import AlphaZeroConfig
    from beastybar_jax.config.ppo import PPOConfig
    from beastybar_jax.network import NetworkOutput
    from beastybar_jax.ppo.loss import Batch, loss_fn as ppo_loss

    rng = np.random.default_rng(0)
    n, a = 6, game.NUM_ACTIONS
    scored = np.array([True, False, True, True, False, True])
    keep = np.flatnonzero(scored)
    legal = rng.random((n, a)) < 0.5
    legal[:, 0] = True
    policy = np.where(legal, rng.random((n, a)), 0.0)
    floats = lambda *shape: rng.normal(size=shape).astype(np.float32)  # noqa: E731

    class Network:  # a network's outputs, and where it scored them
        def __init__(self, rows, mask):
            self.output = NetworkOutput(policy_logits=LOGITS[rows], value=VALUE[rows],
                                        score_margin=MARGIN[rows], scored=mask)

        def apply(self, params, observation):
            return self.output

    LOGITS, VALUE, MARGIN = floats(n, a), np.tanh(floats(n)), floats(n)
    records = Records(observation=floats(n, 3), legal_mask=legal, policy=(policy / policy.sum(1, keepdims=True)),
                      player=np.zeros(n, np.int8), value=np.sign(floats(n)), score_margin=floats(n),
                      exact=rng.random(n) < 0.5)
    batch = Batch(observation=floats(n, 3), legal_mask=legal, action=np.zeros(n, np.int32), log_prob=floats(n) - 2,
                  value=floats(n), advantage=floats(n), returns=floats(n), weight=(rng.random(n) < 0.8) * 1.0,
                  aux_target=floats(n), aux_weight=np.ones(n, np.float32))
    for config in (AlphaZeroConfig(), AlphaZeroConfig(exact_value_targets=True, exact_policy_weight=2.0)):
        masked = alphazero_loss(None, Network(slice(None), scored), records, config)
        alone = alphazero_loss(None, Network(keep, None), jax.tree.map(lambda x: x[keep], records), config)
        for name in alone[1]:
            np.testing.assert_allclose(masked[1][name], alone[1][name], rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(masked[1]["unscored_rows"], 2 / 6)  # the share left out, reported
    masked = ppo_loss(None, Network(slice(None), scored), batch, PPOConfig())
    alone = ppo_loss(None, Network(keep, None), jax.tree.map(lambda x: x[keep], batch), PPOConfig())
    for name in alone[1]:
        np.testing.assert_allclose(masked[1][name], alone[1][name], rtol=1e-6, err_msg=name)
    np.testing.assert_allclose(masked[1]["unscored_rows"], 2 / 6)
