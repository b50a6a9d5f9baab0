"""The rules on hand-built positions: every ability, the chameleon's copies, the
five-animal check, the end of the game, illegal and post-game steps, jit/vmap,
the action space and the trace notation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from beastybar_jax.games import beastybar as game
from beastybar_jax.games.beastybar import actions as A
from beastybar_jax.games.beastybar import cards as C
from helpers.positions import act, position

step = jax.jit(game.step)
legal_action_mask = jax.jit(game.legal_action_mask)


def queue_of(state) -> list[tuple[int, str]]:
    return [(int(c) // C.NUM_SPECIES, C.SPECIES_NAMES[int(c) % C.NUM_SPECIES]) for c in np.asarray(state.queue) if c >= 0]


def cards_of(mask) -> set[tuple[int, str]]:
    mask = np.asarray(mask)
    return {(p, C.SPECIES_NAMES[s]) for p in range(2) for s in np.flatnonzero(mask[p])}


def new_in(before, after, field: str) -> set[tuple[int, str]]:
    return cards_of(np.asarray(getattr(after, field)) & ~np.asarray(getattr(before, field)))


def play(state, action):
    assert bool(legal_action_mask(state)[action]), f"{game.action_name(action)} should be legal"
    after = step(state, action)
    assert not bool(after.terminated) or bool(after.rewards.sum() == 0)
    return after


# One entry per ability: (test id, position kwargs, action, queue after, new THAT'S IT, new bar).
ABILITY_CASES = [
    ("skunk: two highest distinct strengths leave, both zebras included",
     dict(queue=[(0, "zebra"), (1, "seal"), (1, "zebra"), (1, "kangaroo")], hands=(["skunk"], [])),
     act("skunk"), [(1, "kangaroo"), (0, "skunk")], {(0, "zebra"), (1, "seal"), (1, "zebra")}, set()),
    ("skunk: other skunks stay",
     dict(queue=[(1, "skunk"), (1, "lion"), (1, "parrot")], hands=(["skunk"], [])),
     act("skunk"), [(1, "skunk"), (0, "skunk")], {(1, "lion"), (1, "parrot")}, set()),
    ("parrot sends the chosen place to THAT'S IT",
     dict(queue=[(1, "lion"), (1, "seal"), (0, "zebra")], hands=(["parrot"], [])),
     act("parrot", param=1), [(1, "lion"), (0, "zebra"), (0, "parrot")], {(1, "seal")}, set()),
    ("kangaroo hops two",
     dict(queue=[(1, "lion"), (1, "seal"), (0, "zebra")], hands=(["kangaroo"], [])),
     act("kangaroo", param=2), [(1, "lion"), (0, "kangaroo"), (1, "seal"), (0, "zebra")], set(), set()),
    ("kangaroo hops one",
     dict(queue=[(1, "lion"), (1, "seal"), (0, "zebra")], hands=(["kangaroo"], [])),
     act("kangaroo", param=1), [(1, "lion"), (1, "seal"), (0, "kangaroo"), (0, "zebra")], set(), set()),
    ("kangaroo into an empty queue",
     dict(queue=[], hands=(["kangaroo"], [])),
     act("kangaroo", param=0), [(0, "kangaroo")], set(), set()),
    ("a single monkey does nothing",
     dict(queue=[(1, "hippo"), (1, "seal")], hands=(["monkey"], [])),
     act("monkey"), [(1, "hippo"), (1, "seal"), (0, "monkey")], set(), set()),
    ("two monkeys: hippos and crocodiles leave, monkeys go first",
     dict(queue=[(1, "monkey"), (1, "hippo"), (1, "seal"), (1, "crocodile")], hands=(["monkey"], [])),
     act("monkey"), [(0, "monkey"), (1, "monkey"), (1, "seal")], {(1, "hippo"), (1, "crocodile")}, set()),
    ("seal reverses the queue",
     dict(queue=[(1, "lion"), (0, "zebra"), (1, "parrot")], hands=(["seal"], [])),
     act("seal"), [(0, "seal"), (1, "parrot"), (0, "zebra"), (1, "lion")], set(), set()),
    ("zebra does nothing and stops a hippo",
     dict(queue=[(1, "lion"), (0, "zebra"), (1, "seal")], hands=([], ["hippo"]), mover=1),
     act("hippo"), [(1, "lion"), (0, "zebra"), (1, "hippo"), (1, "seal")], set(), set()),
    ("giraffe swaps with a weaker animal ahead",
     dict(queue=[(1, "lion"), (1, "seal")], hands=(["giraffe"], [])),
     act("giraffe"), [(1, "lion"), (0, "giraffe"), (1, "seal")], set(), set()),
    ("giraffe does not pass a stronger animal",
     dict(queue=[(1, "seal"), (1, "lion")], hands=(["giraffe"], [])),
     act("giraffe"), [(1, "seal"), (1, "lion"), (0, "giraffe")], set(), set()),
    ("snake sorts by strength, equal strengths keep their order",
     dict(queue=[(0, "zebra"), (1, "seal"), (1, "zebra")], hands=(["snake"], [])),
     act("snake"), [(0, "snake"), (0, "zebra"), (1, "zebra"), (1, "seal")], set(), set()),
    ("crocodile eats the weaker run up to a zebra",
     dict(queue=[(1, "lion"), (1, "zebra"), (1, "seal"), (1, "parrot")], hands=(["crocodile"], [])),
     act("crocodile"), [(1, "lion"), (1, "zebra"), (0, "crocodile")], {(1, "seal"), (1, "parrot")}, set()),
    ("hippo passes the weaker run",
     dict(queue=[(1, "lion"), (1, "seal"), (1, "parrot")], hands=(["hippo"], [])),
     act("hippo"), [(1, "lion"), (0, "hippo"), (1, "seal"), (1, "parrot")], set(), set()),
    ("lion: monkeys leave, the lion goes first",
     dict(queue=[(1, "monkey"), (1, "seal"), (0, "monkey")], hands=(["lion"], [])),
     act("lion"), [(0, "lion"), (1, "seal")], {(1, "monkey"), (0, "monkey")}, set()),
    ("a second lion goes to THAT'S IT",
     dict(queue=[(1, "lion"), (1, "seal")], hands=(["lion"], [])),
     act("lion"), [(1, "lion"), (1, "seal")], {(0, "lion")}, set()),
    # Recurring phase on a later turn (the mover plays a zebra, which does nothing).
    ("recurring: a giraffe jumps again on a later turn",
     dict(queue=[(0, "seal"), (1, "giraffe")], hands=(["zebra"], [])),
     act("zebra"), [(1, "giraffe"), (0, "seal"), (0, "zebra")], set(), set()),
    ("recurring: a hippo moves again on a later turn",
     dict(queue=[(0, "seal"), (1, "hippo")], hands=(["zebra"], [])),
     act("zebra"), [(1, "hippo"), (0, "seal"), (0, "zebra")], set(), set()),
    ("recurring: a crocodile eats again on a later turn",
     dict(queue=[(0, "seal"), (1, "crocodile")], hands=(["zebra"], [])),
     act("zebra"), [(1, "crocodile"), (0, "zebra")], {(0, "seal")}, set()),
    ("recurring: a hippo passing a giraffe gives it a second jump in the same turn",
     # giraffe jumps the seal, the hippo goes to the front past all three, the walk
     # resumes behind it and the giraffe jumps the parrot: hippo and giraffe enter the bar.
     dict(queue=[(0, "parrot"), (0, "seal"), (1, "giraffe"), (1, "hippo")], hands=(["zebra"], [])),
     act("zebra"), [(0, "parrot"), (0, "seal")], {(0, "zebra")}, {(1, "hippo"), (1, "giraffe")}),
    # Chameleon copies.
    ("chameleon as lion always leaves",
     dict(queue=[(1, "lion"), (1, "monkey")], hands=(["chameleon"], [])),
     act("chameleon", "lion"), [(1, "lion"), (1, "monkey")], {(0, "chameleon")}, set()),
    ("chameleon as skunk stays",
     dict(queue=[(1, "skunk"), (1, "lion"), (1, "seal"), (1, "parrot")], hands=(["chameleon"], [])),
     act("chameleon", "skunk"), [(1, "skunk"), (1, "parrot"), (0, "chameleon")], {(1, "lion"), (1, "seal")}, set()),
    ("chameleon as parrot",
     dict(queue=[(1, "parrot"), (1, "lion")], hands=(["chameleon"], [])),
     act("chameleon", "parrot", 1), [(1, "parrot"), (0, "chameleon")], {(1, "lion")}, set()),
    ("chameleon as kangaroo",
     dict(queue=[(1, "kangaroo"), (1, "lion")], hands=(["chameleon"], [])),
     act("chameleon", "kangaroo", 2), [(0, "chameleon"), (1, "kangaroo"), (1, "lion")], set(), set()),
    ("chameleon as monkey counts as a monkey",
     dict(queue=[(1, "monkey"), (1, "hippo"), (1, "seal")], hands=(["chameleon"], [])),
     act("chameleon", "monkey"), [(0, "chameleon"), (1, "monkey"), (1, "seal")], {(1, "hippo")}, set()),
    ("chameleon as seal",
     dict(queue=[(1, "seal"), (1, "lion")], hands=(["chameleon"], [])),
     act("chameleon", "seal"), [(0, "chameleon"), (1, "lion"), (1, "seal")], set(), set()),
    ("chameleon as giraffe jumps a weaker animal",
     dict(queue=[(1, "giraffe"), (1, "seal")], hands=(["chameleon"], [])),
     act("chameleon", "giraffe"), [(1, "giraffe"), (0, "chameleon"), (1, "seal")], set(), set()),
    ("chameleon as snake sorts with strength 9",
     dict(queue=[(1, "zebra"), (1, "snake"), (1, "lion")], hands=(["chameleon"], [])),
     act("chameleon", "snake"), [(1, "lion"), (1, "snake"), (0, "chameleon"), (1, "zebra")], set(), set()),
    ("chameleon as crocodile eats with strength 10",
     dict(queue=[(1, "crocodile"), (1, "seal"), (1, "parrot")], hands=(["chameleon"], [])),
     act("chameleon", "crocodile"), [(1, "crocodile"), (0, "chameleon")], {(1, "seal"), (1, "parrot")}, set()),
    ("chameleon as hippo passes with strength 11, then is a chameleon again",
     dict(queue=[(1, "hippo"), (1, "seal")], hands=(["chameleon"], [])),
     act("chameleon", "hippo"), [(1, "hippo"), (0, "chameleon"), (1, "seal")], set(), set()),
    ("chameleon as zebra does nothing",
     dict(queue=[(1, "zebra"), (1, "lion")], hands=(["chameleon"], [])),
     act("chameleon", "zebra"), [(1, "zebra"), (1, "lion"), (0, "chameleon")], set(), set()),
    # Five-animal check.
    ("five animals: the front two enter the bar, the last leaves",
     dict(queue=[(1, "skunk"), (0, "lion"), (1, "zebra"), (0, "parrot")], hands=([], ["snake"]), mover=1),
     act("snake"), [(1, "zebra"), (0, "parrot")], {(1, "skunk")}, {(0, "lion"), (1, "snake")}),
    ("five animals after a seal",
     dict(queue=[(1, "lion"), (0, "hippo"), (1, "zebra"), (0, "parrot")], hands=([], ["seal"]), mover=1),
     act("seal"),  # reversed: seal, parrot, zebra, hippo, lion -> hippo stays behind zebra
     [(1, "zebra"), (0, "hippo")], {(1, "lion")}, {(1, "seal"), (0, "parrot")}),
]


@pytest.mark.parametrize("kwargs, action, queue, out, bar",
                         [c[1:] for c in ABILITY_CASES], ids=[c[0] for c in ABILITY_CASES])
def test_ability(kwargs, action, queue, out, bar):
    before = position(**kwargs)
    after = play(before, action)
    assert queue_of(after) == queue
    assert new_in(before, after, "thats_it") == out
    assert new_in(before, after, "bar") == bar
    assert int(after.current_player) == 1 - int(before.current_player)
    assert int(after.turn) == int(before.turn) + 1


def test_chameleon_needs_a_target_and_never_copies_a_chameleon():
    mask = np.asarray(legal_action_mask(position(queue=[], hands=(["chameleon", "seal"], []))))
    assert not mask[act("chameleon", "skunk"):act("chameleon", "lion") + 1].any()
    assert mask[act("seal")]
    mask = np.asarray(legal_action_mask(position(queue=[(1, "chameleon"), (1, "zebra")], hands=(["chameleon"], []))))
    legal = {game.action_name(a) for a in np.flatnonzero(mask)}
    assert legal == {"chameleon as zebra"}


def test_parrot_kangaroo_parameters_follow_the_queue_length():
    two = position(queue=[(1, "lion"), (1, "seal")], hands=(["parrot", "kangaroo"], []))
    legal = {game.action_name(a) for a in np.flatnonzero(np.asarray(legal_action_mask(two)))}
    assert legal == {"parrot on queue place 0", "parrot on queue place 1", "kangaroo hop 1", "kangaroo hop 2"}
    empty = position(queue=[], hands=(["parrot", "kangaroo"], []))
    legal = {game.action_name(a) for a in np.flatnonzero(np.asarray(legal_action_mask(empty)))}
    assert legal == {"kangaroo hop 0"}


def test_the_mover_draws_the_top_of_their_deck():
    before = position(queue=[(1, "lion")], hands=(["seal", "zebra", "skunk", "parrot"], ["hippo"]),
                      decks=(["monkey", "snake"], []))
    after = play(before, act("seal"))
    assert cards_of(after.hand) == {(0, "zebra"), (0, "skunk"), (0, "parrot"), (0, "monkey"), (1, "hippo")}
    assert np.asarray(after.deck)[0].tolist() == [C.species_id("snake")] + [-1] * 7


def _end_position(bar):
    # P0 plays their last card, nothing is left to draw: the game ends.
    return position(queue=[(1, "seal"), (1, "zebra")], hands=(["skunk"], []), bar=bar)


@pytest.mark.parametrize("bar, rewards", [
    ((["lion", "parrot"], ["kangaroo"]), [1.0, -1.0]),   # 6 - 4
    ((["lion"], ["kangaroo"]), [-1.0, 1.0]),             # 2 - 4
    ((["parrot"], ["kangaroo"]), [0.0, 0.0]),            # 4 - 4: draw
])
def test_game_ends_when_every_card_is_played(bar, rewards):
    after = play(_end_position(bar), act("skunk"))
    assert bool(after.terminated)
    np.testing.assert_array_equal(np.asarray(after.rewards), rewards)
    expected_scores = [sum(int(C.POINTS[C.species_id(s)]) for s in bar[p]) for p in range(2)]
    np.testing.assert_array_equal(np.asarray(after.scores), expected_scores)
    assert not np.asarray(legal_action_mask(after)).any()


def test_game_ends_when_fewer_than_five_cards_remain():
    # After the move: queue 2 + P1's hand 1 + P1's deck 1 = 4 cards left.
    before = position(queue=[(1, "seal")], hands=(["lion"], ["hippo"]), decks=([], ["zebra"]))
    after = play(before, act("lion"))
    assert bool(after.terminated)
    # With one more card somewhere the game goes on.
    before = position(queue=[(1, "seal")], hands=(["lion"], ["hippo"]), decks=([], ["zebra", "snake"]))
    after = play(before, act("lion"))
    assert not bool(after.terminated)
    np.testing.assert_array_equal(np.asarray(after.rewards), [0.0, 0.0])


ILLEGAL_CASES = [
    ("card not in hand", dict(queue=[(1, "seal")], hands=(["lion", "zebra"], ["hippo"])), act("hippo")),
    ("parrot on an empty place", dict(queue=[(1, "seal")], hands=(["parrot"], ["hippo"])), act("parrot", param=2)),
    ("chameleon copying an absent species", dict(queue=[(1, "seal")], hands=(["chameleon"], ["hippo"])),
     act("chameleon", "lion")),
    ("negative id", dict(queue=[(1, "seal")], hands=(["lion"], ["hippo"]), mover=1), -1),
    ("id past the action space", dict(queue=[(1, "seal")], hands=(["lion"], ["hippo"]), mover=1), game.NUM_ACTIONS),
]


@pytest.mark.parametrize("kwargs, action", [c[1:] for c in ILLEGAL_CASES], ids=[c[0] for c in ILLEGAL_CASES])
def test_illegal_action_loses_and_leaves_the_table(kwargs, action):
    before = position(**kwargs)
    after = step(before, action)
    mover = int(before.current_player)
    assert bool(after.terminated)
    expected = np.where(np.arange(2) == mover, -1.0, 1.0)
    np.testing.assert_array_equal(np.asarray(after.rewards), expected)
    for field in ("queue", "hand", "deck", "bar", "thats_it", "current_player", "turn"):
        np.testing.assert_array_equal(np.asarray(getattr(after, field)), np.asarray(getattr(before, field)), err_msg=field)
    assert not np.asarray(legal_action_mask(after)).any()


def test_stepping_a_finished_game_changes_nothing():
    finished = play(_end_position((["lion", "parrot"], ["kangaroo"])), act("skunk"))
    forfeited = step(position(queue=[(1, "seal")], hands=(["lion"], ["hippo"])), act("hippo"))
    for state in (finished, forfeited):
        for action in list(range(game.NUM_ACTIONS)) + [-3, 99]:
            again = step(state, action)
            for a, b in zip(jax.tree.leaves(again), jax.tree.leaves(state)):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.gpu
def test_jit_and_vmap_agree_with_single_steps():
    cases = [position(**c[1]) for c in ABILITY_CASES]
    actions = jnp.asarray([c[2] for c in ABILITY_CASES])
    batch = jax.tree.map(lambda *xs: jnp.stack(xs), *cases)
    batched = jax.jit(jax.vmap(game.step))(batch, actions)
    masks = jax.jit(jax.vmap(game.legal_action_mask))(batch)
    for i, (state, action) in enumerate(zip(cases, actions)):
        single = step(state, action)  # jitted, unbatched
        for a, b in zip(jax.tree.leaves(single), jax.tree.leaves(batched)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b)[i])
        np.testing.assert_array_equal(np.asarray(legal_action_mask(state)), np.asarray(masks)[i])


def test_state_is_small_and_typed():
    state = jax.jit(game.init)(jax.random.key(0))
    sizes = {name: np.asarray(value).nbytes for name, value in state.items()}
    assert sum(sizes.values()) <= 200, sizes
    assert state.queue.shape == (C.QUEUE_SLOTS,) and state.queue.dtype == jnp.int8
    assert state.hand.shape == state.bar.shape == state.thats_it.shape == (2, C.NUM_SPECIES)
    assert state.deck.shape == (2, C.DECK_SIZE)
    assert state.rewards.dtype == jnp.float32


def test_init_deals_four_cards_and_a_deck_of_eight():
    states = jax.jit(jax.vmap(game.init))(jax.random.split(jax.random.key(1), 256))
    hands, decks = np.asarray(states.hand), np.asarray(states.deck)
    assert (hands.sum(-1) == C.HAND_SIZE).all()
    in_deck = (decks[..., None] == np.arange(C.NUM_SPECIES)).sum(-2)  # [B, 2, 12]
    np.testing.assert_array_equal(in_deck + hands, 1)  # every species once per player
    assert set(np.asarray(states.current_player).tolist()) == {0, 1}
    assert len({tuple(d) for d in decks[:, 0]}) > 200  # deals differ


def test_init_from_deal_keeps_the_deal():
    hands = [[0, 1, 2, 3], [8, 9, 10, 11]]
    decks = [list(range(4, 12)), list(range(8))]
    state = game.init_from_deal(jnp.asarray(hands), jnp.asarray(decks), 1)
    assert cards_of(state.hand) == {(0, C.SPECIES_NAMES[s]) for s in hands[0]} | {(1, C.SPECIES_NAMES[s]) for s in hands[1]}
    np.testing.assert_array_equal(np.asarray(state.deck), decks)
    assert int(state.current_player) == 1 and int(state.turn) == 0 and not bool(state.terminated)


def test_action_names_are_unique_and_complete():
    assert game.NUM_ACTIONS == len(game.ACTION_NAMES) == 31
    assert len(set(game.ACTION_NAMES)) == game.NUM_ACTIONS
    assert [game.action_name(a) for a in range(game.NUM_ACTIONS)] == list(game.ACTION_NAMES)
    for bad in (-1, game.NUM_ACTIONS):
        with pytest.raises(ValueError, match="out of range"):
            game.action_name(bad)
    # Every species is playable, the chameleon copies every other species.
    assert set(A.ACTION_CARD_SPECIES.tolist()) == set(range(C.NUM_SPECIES))
    copies = A.ACTION_ACTING_SPECIES[A.ACTION_CARD_SPECIES == C.CHAMELEON]
    assert set(copies.tolist()) == set(range(C.NUM_SPECIES)) - {C.CHAMELEON}


def test_notation_round_trip_on_random_positions(random_positions):
    states, masks = random_positions
    checked = 0
    for i in range(len(masks)):
        queue_species = [int(c) % C.NUM_SPECIES for c in states.queue[i] if c >= 0]
        for a in np.flatnonzero(masks[i]):
            move = game.to_notation(int(a), queue_species)
            assert game.from_notation(move, queue_species) == a, (move, queue_species)
            checked += 1
    assert checked > 1000


def test_notation_examples_and_errors():
    queue = [C.LION, C.ZEBRA, C.PARROT]
    assert game.to_notation(act("chameleon", "parrot", 1), queue) == ["chameleon", [2, 1]]
    assert game.from_notation(["chameleon", [1]], queue) == act("chameleon", "zebra")
    assert game.from_notation(["kangaroo", []], []) == act("kangaroo", param=0)
    assert game.to_notation(act("kangaroo", param=2), queue) == ["kangaroo", [2]]
    with pytest.raises(ValueError):
        game.from_notation(["lion", [0]], queue)
    with pytest.raises(ValueError):
        game.from_notation(["dragon", []], queue)
    with pytest.raises(ValueError):
        game.to_notation(act("chameleon", "seal"), queue)


def test_render_state_and_action():
    state = position(queue=[(1, "lion"), (0, "zebra")], hands=(["parrot", "seal"], ["hippo"]),
                     bar=(["skunk"], []), thats_it=np.zeros((2, C.NUM_SPECIES), bool))
    full = game.render_state(state)
    assert "lion(P1) zebra(P0)" in full and "P1 hand: hippo" in full and "score P0 4 - P1 0" in full
    hidden = game.render_state(state, viewer=0)
    assert "hippo" not in hidden and "lion(opp) zebra(you)" in hidden and "parrot, seal" in hidden
    assert "P1 hand: 1 hidden card; deck: 0 cards" in hidden  # counts in words, singular for one
    assert game.render_action(act("parrot", param=0)) == "parrot on queue place 0"
    assert game.render_action(act("parrot", param=0), state) == "parrot on queue place 0 (lion(P1))"
    finished = play(_end_position((["lion", "parrot"], ["kangaroo"])), act("skunk"))
    assert "P0 wins" in game.render_state(finished)


@pytest.fixture(scope="module")
def random_positions():
    from helpers import random_playout

    before, _, _ = random_playout(64)(jax.random.key(7))
    flat = jax.tree.map(lambda x: np.asarray(x).reshape((-1,) + x.shape[2:]), before)
    live = ~flat.terminated
    flat = jax.tree.map(lambda x: x[live], flat)
    masks = np.asarray(jax.jit(jax.vmap(game.legal_action_mask))(flat))
    return flat, masks


@pytest.mark.gpu
def test_the_engine_traced_for_a_gpu_plays_as_traced_for_a_cpu():
    """The engine traced for a GPU (the recurring phase's visits one Pallas kernel: on a
    CPU, in Pallas's interpreter; or unrolled XLA operations, as over several devices)
    steps, masks and observes every position of random games exactly as the CPU's form (a
    loop of XLA operations) on the same device, illegal and out-of-range actions included
    (on a GPU, a check of Triton's and XLA's compilers)."""
    from helpers import random_playout
    from beastybar_jax.games import tracing

    before, actions, _ = random_playout(48)(jax.random.key(11))
    states = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), before)
    actions = actions.reshape(-1)
    actions = actions.at[::7].set(jnp.arange(actions[::7].shape[0]) % 33 - 1)  # some illegal, -1 and 31

    def play(states, actions):
        after = jax.vmap(game.step)(states, actions)
        return after, jax.vmap(game.legal_action_mask)(after), jax.vmap(game.observe)(after, after.current_player)

    results, kernels = [], []
    gpu_kernels = "interpret" if jax.default_backend() == "cpu" else "triton"
    for for_gpu, form in ((False, "triton"), (True, gpu_kernels), (True, "xla")):
        with tracing.for_gpu(for_gpu, kernels=form):
            # A new function each time: JAX would reuse the first one's trace.
            kernels.append(str(jax.make_jaxpr(lambda s, a: play(s, a))(states, actions)).count("pallas_call"))
            results.append(jax.jit(lambda s, a: play(s, a))(states, actions))
    assert kernels == [0, int(jax.device_count() == 1), 0]  # the kernel on one device (queue.recurring)
    for want, got in zip(jax.tree.leaves(results[0]), jax.tree.leaves(results[1])):
        np.testing.assert_array_equal(np.asarray(want), np.asarray(got))
    assert bool(jnp.any(results[0][0].terminated & ~states.terminated))  # the sample reaches the end of games


@pytest.mark.gpu
def test_the_recurring_phase_as_a_gpu_kernel_moves_every_queue_as_the_loop_does():
    """The recurring phase as one Pallas kernel (a GPU's form; on a CPU, in Pallas's
    interpreter) leaves the queue and sends to THAT'S IT exactly what the CPU's loop does,
    for 20,000 random queues (either owner's cards, gaps anywhere, the giraffe to skip or
    none): a batch, a batch of batches (one kernel over both), one queue and none."""
    from beastybar_jax.games import tracing
    from beastybar_jax.games.beastybar import queue as Q

    rng = np.random.default_rng(5)
    queues = rng.integers(-1, C.NUM_CARDS, size=(20_000, C.QUEUE_SLOTS)).astype(np.int32)
    skip = np.where(rng.random(20_000) < 0.5, queues[np.arange(20_000), rng.integers(0, 5, 20_000)], -1)
    want = jax.jit(jax.vmap(Q.recurring))(queues, skip)
    with tracing.for_gpu(kernels="interpret" if jax.default_backend() == "cpu" else "triton"):
        batch = jax.jit(jax.vmap(Q.recurring))(queues, skip)
        nested = jax.jit(jax.vmap(jax.vmap(Q.recurring)))(queues.reshape(100, 200, -1), skip.reshape(100, 200))
        one = jax.jit(Q.recurring)(queues[7], skip[7])
        empty = jax.jit(jax.vmap(Q.recurring))(queues[:0], skip[:0])
    for got in (batch, jax.tree.map(lambda x: x.reshape(20_000, -1), nested)):
        for w, g in zip(want, got):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    np.testing.assert_array_equal(np.asarray(one[0]), np.asarray(want[0][7]))
    assert [x.shape for x in empty] == [(0, C.QUEUE_SLOTS), (0, C.NUM_CARDS)]
    moved = np.any(np.asarray(want[0]) != queues, axis=1)
    assert moved.mean() > 0.3 and np.asarray(want[1]).any(axis=1).mean() > 0.1  # queues that change, cards eaten


def test_the_run_a_hippo_or_crocodile_passes_is_found_for_all_slots_at_once():
    """The recurring phase finds the last slot that stops an actor's run (a card as
    strong, a zebra or a gap) on a packed word of run codes: it agrees with the slot by
    slot definition for every cursor, every actor strength and 20,000 queues (both
    owners' cards, gaps anywhere)."""
    from beastybar_jax.games.beastybar import queue as Q

    species = np.random.default_rng(3).integers(-1, C.NUM_SPECIES, size=(20_000, C.QUEUE_SLOTS)).astype(np.int32)
    owners = np.random.default_rng(4).integers(0, 2, size=species.shape).astype(np.int32)
    codes = jax.jit(jax.vmap(Q._run_codes))(np.where(species >= 0, species + C.NUM_SPECIES * owners, -1))
    cursors, strengths = np.meshgrid(np.arange(C.QUEUE_SLOTS + 2), np.arange(C.NUM_SPECIES + 1), indexing="ij")
    found = jax.jit(jax.vmap(jax.vmap(Q._last_block, (None, 0, 0)), (0, None, None)))(
        codes, cursors.reshape(-1), strengths.reshape(-1))  # [queues, cursor x strength]
    ahead = np.arange(C.QUEUE_SLOTS) < cursors.reshape(-1)[:, None]  # [cursor x strength, slot]
    blocks = ahead & ((species[:, None] + 1 >= strengths.reshape(-1)[:, None])
                      | (species[:, None] == C.ZEBRA) | (species[:, None] < 0))
    last = np.where(blocks.any(-1), C.QUEUE_SLOTS - 1 - np.argmax(blocks[..., ::-1], axis=-1), -1)
    np.testing.assert_array_equal(np.asarray(found), last)
    assert (last == -1).any() and (last == C.QUEUE_SLOTS - 1).any()
