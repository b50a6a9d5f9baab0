"""Search: finds wins and avoids losses for either player, never sees the true hidden
cards, masks illegal actions, combines K determinizations.

Two searches are compiled once per module (Gumbel with K=2 worlds, PUCT with K=1),
both driven by a small network whose parameters are an argument: all-zero
parameters make it the uniform evaluator (zero logits, zero value), so the win/loss
tests measure the search alone, and fresh parameters exercise ``network_evaluator``.
``add_noise`` is traced, so one compiled function serves training and evaluation play.
Everything is compiled for its exact shapes at XLA's cheapest optimisation level
(:func:`compile_fast`): the batches are tiny, so compile time is what costs.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from beastybar_jax.alphazero import selfplay
from beastybar_jax.games import beastybar as game
from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.games.beastybar.cards import KANGAROO, LION, MONKEY, PARROT, SEAL, SKUNK, ZEBRA
from beastybar_jax.network import NetworkConfig, PolicyValueNet, init_params, make_network
from beastybar_jax.search import (
    SearchConfig,
    determinized,
    mask_logits,
    network_evaluator,
    run_search,
    sample_worlds,
    uniform_evaluator,
)
from helpers.tiny_training import FAST_COMPILE

GAME = game.BEASTYBAR
BATCH = 6
NUM_SIMULATIONS = 64
CONFIGS = {
    "gumbel": SearchConfig(algorithm="gumbel", num_simulations=NUM_SIMULATIONS, num_determinizations=2),
    "puct": SearchConfig(algorithm="puct", num_simulations=NUM_SIMULATIONS, num_determinizations=1),
}
NETWORK = make_network(NetworkConfig(torso="mlp", width=32, depth=1), GAME.num_actions)


def compile_fast(fn, *example_args):
    """``fn`` compiled for the shapes of ``example_args`` with cheap XLA optimisation."""
    return jax.jit(fn).lower(*example_args).compile(FAST_COMPILE)


# ----------------------------------------------------------------------------- positions


def make_state(queue, hands, mover, decks=((), ()), bar=((), ())):
    """A late-game position: ``queue`` is ``[(owner, species), ...]`` front first,
    ``hands``/``decks``/``bar`` per player; every other card is in THAT'S IT."""
    q = np.full(C.QUEUE_SLOTS, -1, np.int8)
    used = np.zeros((2, C.NUM_SPECIES), bool)
    for place, (owner, species) in enumerate(queue):
        q[place] = owner * C.NUM_SPECIES + species
        used[owner, species] = True
    hand = np.zeros((2, C.NUM_SPECIES), bool)
    deck = np.full((2, C.DECK_SIZE), -1, np.int8)
    in_bar = np.zeros((2, C.NUM_SPECIES), bool)
    for p in range(2):
        hand[p, list(hands[p])] = True
        deck[p, : len(decks[p])] = decks[p]
        in_bar[p, list(bar[p])] = True
        used[p, list(hands[p]) + list(decks[p]) + list(bar[p])] = True
    return game.State(
        queue=jnp.asarray(q), hand=jnp.asarray(hand), deck=jnp.asarray(deck), bar=jnp.asarray(in_bar),
        thats_it=jnp.asarray(~used), current_player=jnp.asarray(mover, jnp.int8),
        turn=jnp.asarray(20, jnp.int8), terminated=jnp.asarray(False), rewards=jnp.zeros(2, jnp.float32))


def mirror(state):
    """The same position with the players' seats swapped."""
    queue = jnp.where(state.queue >= 0, (state.queue + C.NUM_SPECIES) % C.NUM_CARDS, -1).astype(jnp.int8)
    return state.replace(queue=queue, hand=state.hand[::-1], deck=state.deck[::-1], bar=state.bar[::-1],
                         thats_it=state.thats_it[::-1], rewards=state.rewards[::-1],
                         current_player=(1 - state.current_player).astype(jnp.int8))


def stack(states):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def unbatch(states, i):
    return jax.tree.map(lambda x: x[i], states)


ME, YOU = 0, 1
SEAL_ID, ZEBRA_ID = game.action_id(SEAL), game.action_id(ZEBRA)
HOPS = [game.action_id(KANGAROO, KANGAROO, h) for h in (1, 2)]
PARROTS = [game.action_id(PARROT, PARROT, t) for t in range(4)]

# (position for player 0, winning actions, losing actions). Mirrored for player 1.
# A: the seal reverses the queue so my seal and monkey enter the bar (win); either
#    kangaroo hop fills the queue behind your parrot and kangaroo (loss).
# B: the zebra fills the queue with my skunk and monkey in front (win); the seal
#    reverses it and puts your parrot in the bar next to my seal (4 > 2, loss).
#    Here the losing action has the lower id, so a tie-break cannot fake a pass.
# C: the zebra loses at once; any parrot keeps the game going, and your only reply
#    (the seal) then sends my parrot to the bar next to your seal: a win in two.
POSITIONS = [
    (make_state([(YOU, PARROT), (YOU, KANGAROO), (ME, PARROT), (ME, MONKEY)], [[SEAL, KANGAROO], [LION]], ME),
     [SEAL_ID], HOPS),
    (make_state([(ME, SKUNK), (ME, MONKEY), (YOU, KANGAROO), (YOU, PARROT)], [[SEAL, ZEBRA], [LION]], ME),
     [ZEBRA_ID], [SEAL_ID]),
    (make_state([(YOU, PARROT), (YOU, KANGAROO), (ME, SKUNK), (ME, MONKEY)], [[PARROT, ZEBRA], [SEAL]], ME),
     PARROTS, [ZEBRA_ID]),
]
WIN_STATES = stack([s for position, _, _ in POSITIONS for s in (position, mirror(position))])
WINNING = [win for _, win, _ in POSITIONS for _ in range(2)]
LOSING = [lose for _, _, lose in POSITIONS for _ in range(2)]


def random_positions(seed: int, batch: int = BATCH, finished: int = 1):
    """``batch`` random consistent positions (host-side, no engine compile): each
    player has played some cards (spread over queue, bar and THAT'S IT), holds up to
    4 and keeps the rest in a shuffled deck. The last ``finished`` are terminated."""
    rng = np.random.default_rng(seed)
    states = []
    for i in range(batch):
        mover = int(rng.integers(2))
        turn = int(rng.integers(0, 20))
        played = {mover: turn // 2, 1 - mover: turn - turn // 2}
        hand = np.zeros((2, C.NUM_SPECIES), bool)
        deck = np.full((2, C.DECK_SIZE), -1, np.int8)
        out_cards = []
        for p in range(2):
            order = rng.permutation(C.NUM_SPECIES)
            n = played[p]
            hand[p, order[n:n + C.HAND_SIZE]] = True
            rest = order[n + C.HAND_SIZE:]
            deck[p, : len(rest)] = rest
            out_cards += [p * C.NUM_SPECIES + s for s in order[:n]]
        out_cards = rng.permutation(np.asarray(out_cards, np.int64))
        queue_length = int(rng.integers(0, min(4, len(out_cards)) + 1)) if len(out_cards) else 0
        if queue_length == 0 and len(out_cards):
            queue_length = 1
        queue = np.full(C.QUEUE_SLOTS, -1, np.int8)
        queue[:queue_length] = out_cards[:queue_length]
        rest = out_cards[queue_length:]
        to_bar = rng.random(len(rest)) < 0.5
        bar = np.zeros(C.NUM_CARDS, bool)
        thats_it = np.zeros(C.NUM_CARDS, bool)
        bar[rest[to_bar]] = True
        thats_it[rest[~to_bar]] = True
        terminated = i >= batch - finished
        scores = (bar.reshape(2, -1) * C.POINTS).sum(-1)
        outcome = float(np.sign(scores[0] - scores[1]))
        states.append(game.State(
            queue=jnp.asarray(queue), hand=jnp.asarray(hand), deck=jnp.asarray(deck),
            bar=jnp.asarray(bar.reshape(2, -1)), thats_it=jnp.asarray(thats_it.reshape(2, -1)),
            current_player=jnp.asarray(mover, jnp.int8), turn=jnp.asarray(turn, jnp.int8),
            terminated=jnp.asarray(terminated),
            rewards=jnp.asarray([outcome, -outcome] if terminated else [0.0, 0.0], jnp.float32)))
    return stack(states)


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def network_params():
    return jax.jit(init_params, static_argnums=(0, 2))(NETWORK, jax.random.key(0), GAME.observation_size)


@pytest.fixture(scope="module")
def searchers(network_params):
    """``{algorithm: search(params, states, key, add_noise) -> SearchOutput}``, jitted."""

    def build(config):
        def search(params, states, key, add_noise):
            evaluate = network_evaluator(GAME, NETWORK, params)
            return run_search(GAME, evaluate, states, key, config, add_noise=add_noise)
        return compile_fast(search, network_params, WIN_STATES, jax.random.key(0), True)

    return {name: build(config) for name, config in CONFIGS.items()}


@pytest.fixture(scope="module")
def uniform_params(network_params):
    """All-zero parameters: the network then outputs zero logits and zero value."""
    return jax.tree.map(jnp.zeros_like, network_params)


# ----------------------------------------------------------------------------- tests


def test_constructed_positions_win_and_lose_as_claimed():
    """The premises of the win/loss tests, checked with the engine."""
    step = compile_fast(GAME.step, unbatch(WIN_STATES, 0), 0)
    legal_mask = compile_fast(GAME.legal_action_mask, unbatch(WIN_STATES, 0))
    for i in range(BATCH):
        state = unbatch(WIN_STATES, i)
        mover = int(state.current_player)
        assert mover == i % 2
        legal = set(np.flatnonzero(np.asarray(legal_mask(state))).tolist())
        assert set(WINNING[i]) | set(LOSING[i]) == legal
        for action in LOSING[i]:
            after = step(state, action)
            assert bool(after.terminated) and float(after.rewards[mover]) == -1.0
        for action in WINNING[i]:
            after = step(state, action)
            if not bool(after.terminated):  # position C: the opponent's only reply loses
                replies = np.flatnonzero(np.asarray(legal_mask(after)))
                assert len(replies) == 1
                after = step(after, int(replies[0]))
            assert bool(after.terminated) and float(after.rewards[mover]) == 1.0


def test_uniform_network_is_the_uniform_evaluator(uniform_params):
    evaluate = compile_fast(lambda p, s: network_evaluator(GAME, NETWORK, p)(s), uniform_params, WIN_STATES)
    for a, b in zip(evaluate(uniform_params, WIN_STATES), uniform_evaluator(GAME)(WIN_STATES)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", sorted(CONFIGS))
def test_search_plays_the_win_and_avoids_the_loss_for_both_players(searchers, uniform_params, algorithm):
    out = searchers[algorithm](uniform_params, WIN_STATES, jax.random.key(1), False)
    for i in range(BATCH):
        assert int(out.action[i]) in WINNING[i], (i, int(out.action[i]))
        weights = np.asarray(out.action_weights[i])
        assert weights[WINNING[i]].sum() > 0.8
        assert weights[LOSING[i]].max() < weights[WINNING[i]].max()
        assert float(out.root_value[i]) > 0.5  # the mover (player i % 2) expects to win


@pytest.mark.parametrize("algorithm", sorted(CONFIGS))
def test_exploration_noise_keeps_the_search_policy_on_the_win(searchers, uniform_params, algorithm):
    for seed in range(3):
        out = searchers[algorithm](uniform_params, WIN_STATES, jax.random.key(10 + seed), True)
        weights = np.asarray(out.action_weights)
        for i in range(BATCH):
            assert int(np.argmax(weights[i])) in WINNING[i]
            assert weights[i, LOSING[i]].sum() < 0.25


@pytest.mark.gpu
def test_search_only_sees_what_the_mover_knows(searchers, network_params):
    """Two states that differ only in hidden cards (how the opponent's unseen cards
    split between hand and deck, and the order of the mover's own deck) give the
    same worlds and the same search output under the same key."""
    states = random_positions(seed=3, finished=0)
    hand, deck = np.array(states.hand), np.array(states.deck)
    mover = np.asarray(states.current_player)
    changed = 0
    for b in range(BATCH):
        me, you = mover[b], 1 - mover[b]
        if deck[b, you, 0] >= 0 and hand[b, you].any():  # swap a hand card with the top of the deck
            held = int(np.flatnonzero(hand[b, you])[0])
            hand[b, you, held], hand[b, you, deck[b, you, 0]] = False, True
            deck[b, you, 0] = held
            changed += 1
        size = int((deck[b, me] >= 0).sum())
        deck[b, me, :size] = deck[b, me, :size][::-1]
    assert changed >= 3
    twin = states.replace(hand=jnp.asarray(hand), deck=jnp.asarray(deck))
    assert not np.array_equal(np.asarray(twin.hand), np.asarray(states.hand))

    key = jax.random.key(7)
    sample = compile_fast(lambda s, k: sample_worlds(GAME, s, k, 2), states, key)
    worlds, twin_worlds = sample(states, key), sample(twin, key)
    jax.tree.map(np.testing.assert_array_equal, worlds, twin_worlds)
    for algorithm in CONFIGS:
        out = searchers[algorithm](network_params, states, key, True)
        twin_out = searchers[algorithm](network_params, twin, key, True)
        jax.tree.map(np.testing.assert_array_equal, out, twin_out)


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", sorted(CONFIGS))
@pytest.mark.parametrize("add_noise", [True, False])
def test_outputs_are_legal_normalised_and_shaped(searchers, network_params, algorithm, add_noise):
    config = CONFIGS[algorithm]
    for seed in range(2):
        states = random_positions(seed=seed)
        out = searchers[algorithm](network_params, states, jax.random.key(seed), add_noise)
        assert out.action.shape == (BATCH,) and out.action.dtype == jnp.int32
        assert out.action_weights.shape == (BATCH, GAME.num_actions) and out.action_weights.dtype == jnp.float32
        assert out.visit_counts.shape == (BATCH, GAME.num_actions) and out.visit_counts.dtype == jnp.int32
        assert out.root_value.shape == (BATCH,) and out.root_value.dtype == jnp.float32
        legal = np.asarray(jax.vmap(GAME.legal_action_mask)(states))
        weights, visits = np.asarray(out.action_weights), np.asarray(out.visit_counts)
        value = np.asarray(out.root_value)
        assert np.all(np.isfinite(weights)) and np.all(np.isfinite(value))
        assert np.all(np.abs(value) <= 1.0 + 1e-5)
        for b in range(BATCH):
            if bool(states.terminated[b]):  # a finished game: nothing to choose
                assert not legal[b].any() and weights[b].sum() == 0 and visits[b].sum() == 0 and value[b] == 0
                continue
            assert legal[b, int(out.action[b])]
            assert np.all(weights[b, ~legal[b]] == 0) and np.all(visits[b, ~legal[b]] == 0)
            np.testing.assert_allclose(weights[b].sum(), 1.0, rtol=1e-5)
            assert visits[b].sum() == config.num_determinizations * config.num_simulations


def test_mask_logits_handles_finished_games():
    logits = jnp.asarray([[3.0, -1.0, 2.0], [1.0, 2.0, 3.0]])
    legal = jnp.asarray([[True, False, True], [False, False, False]])
    masked = mask_logits(logits, legal)
    probs = np.asarray(jax.nn.softmax(masked))
    assert probs[0, 1] == 0 and probs[0, 0] > probs[0, 2]
    np.testing.assert_allclose(probs[1], 1 / 3)


@pytest.mark.parametrize("field, value", [
    ("algorithm", "alphazero"), ("num_simulations", 0), ("num_determinizations", 0),
    ("dirichlet_fraction", 1.5), ("dirichlet_alpha", 0.0),
])
def test_bad_search_config_names_the_key(field, value):
    with pytest.raises(ValueError, match=f"search.{field}"):
        SearchConfig(**{field: value})


def test_run_search_names_an_unbatched_state():
    """One state where a batch ``[B]`` belongs was an IndexError deep inside."""
    state = game.init(jax.random.key(0))
    with pytest.raises(ValueError, match=r"run_search takes a batch of states \[B\]"):
        run_search(game.BEASTYBAR, uniform_evaluator(game.BEASTYBAR), state, jax.random.key(1), SearchConfig())


@dataclasses.dataclass(frozen=True)
class TieredEvaluator:
    """An evaluator with tiers, as the afterstate scorer's: tier ``k`` fits a batch whose
    positions are all before turn ``LIMITS[k]`` (the last tier fits every batch; each
    tier tells the first that fits) and values each position ``k / 10``, so the search's
    values tell which tier scored it."""

    LIMITS = (5, 12)
    tier: int | None = None

    def tiers(self, batch_size: int) -> int:
        return len(self.LIMITS) + 1

    def at_tier(self, tier: int) -> "TieredEvaluator":
        return dataclasses.replace(self, tier=tier)

    def __call__(self, states):
        n = states.turn.shape[0]
        logits, value = jnp.zeros((n, GAME.num_actions)), jnp.full((n,), self.tier / 10)
        return logits, value, jnp.sum(jnp.max(states.turn) >= jnp.asarray(self.LIMITS), dtype=jnp.int32)


def positions_at_turn(turn: int, batch: int, seed: int):
    """``batch`` games of random play, ``turn`` plies in."""
    def play(state, key):
        legal = GAME.legal_action_mask(state)
        return GAME.step(state, jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf))), None

    def one(key):
        init_key, play_key = jax.random.split(key)
        return jax.lax.scan(play, GAME.init(init_key), jax.random.split(play_key, turn))[0]

    return jax.vmap(one)(jax.random.split(jax.random.key(seed), batch))


def test_a_tiered_evaluator_scores_each_search_at_the_first_tier_from_its_start_that_fits_it():
    """``run_search`` runs the whole search at ``start_tier`` and again at each next tier
    while some evaluation (the root's or a deeper node's) did not fit: the output is the
    search scored at the first tier from the start that fitted every evaluation, ``passes``
    counts the runs and ``least_tier`` is the first tier that would have fitted them all
    (an afterstate network's tiers are lists of growing capacity; ``NetworkEvaluator``)."""
    config = SearchConfig(num_simulations=4)

    def search(evaluate, states, start_tier=0):
        return run_search(GAME, evaluate, states, jax.random.key(3), config, start_tier=start_tier)

    def at_tier(states, tier):  # the evaluator at one tier, without its tiers
        return search(lambda s: (jnp.zeros((s.turn.shape[0], GAME.num_actions)),
                                 jnp.broadcast_to(tier / 10, s.turn.shape)), states)

    example = positions_at_turn(0, 4, seed=0)
    tiered = compile_fast(lambda states, start: search(TieredEvaluator(), states, start), example, 0)
    one_tier = compile_fast(at_tier, example, 0)
    # 4 simulations reach turn 0 + 4 < 5, 6 + 4 < 12; a start past the last tier is the last.
    for turn, start, tier, passes in [(0, 0, 0, 1), (6, 0, 1, 2), (12, 0, 2, 3), (0, 1, 1, 1), (12, 1, 2, 2),
                                      (6, 2, 2, 1), (6, 7, 2, 1)]:
        states = positions_at_turn(turn, 4, seed=turn)
        got, want = tiered(states, start), one_tier(states, tier)
        assert np.asarray(got.passes).tolist() == [passes] * 4
        assert np.asarray(got.least_tier).tolist() == [{0: 0, 6: 1, 12: 2}[turn]] * 4
        for field in ("action", "action_weights", "visit_counts", "root_value"):
            np.testing.assert_array_equal(np.asarray(getattr(got, field)), np.asarray(getattr(want, field)))


def test_an_evaluator_whose_third_output_is_not_a_tier_is_refused():
    """A one-tier evaluator's third output is the first tier whose rows hold the batch (an
    int): a bool (whether they fitted) is refused when the search is traced."""
    def fitted(states):
        n = states.turn.shape[0]
        return jnp.zeros((n, GAME.num_actions)), jnp.zeros((n,)), jnp.all(states.turn < 5)

    states = positions_at_turn(0, 2, seed=0)
    with pytest.raises(TypeError, match="least_tier int32"):
        jax.eval_shape(lambda s: run_search(GAME, fitted, s, jax.random.key(0), SearchConfig(num_simulations=2)), states)


def test_a_search_traces_its_network_once_a_tier():
    """The root's evaluation and every simulation's are of the same ``[B * K]`` worlds: a
    search traces an afterstate network once for both, at each of its tiers (with
    afterstates the network is most of a search's program, so most of its compile)."""
    import flax.linen as nn

    network = make_network(NetworkConfig(width=16, depth=1, afterstates=True, replies=True, afterstate_width=8), GAME)
    params = jax.eval_shape(lambda k: init_params(network, k, GAME.observation_size), jax.random.key(0))
    states = positions_at_turn(0, 8, seed=0)  # 16 worlds: lists save rows (not for 8 or fewer)
    config = SearchConfig(num_simulations=4, num_determinizations=2)
    traced = []
    determinized._apply.clear_cache()  # an earlier run in this process would have traced it

    def count(call, args, kwargs, context):
        if isinstance(context.module, PolicyValueNet) and context.method_name == "__call__" and \
                context.module.afterstate_tier is not None:  # the search's calls, not precast's probe
            traced.append(context.module.afterstate_tier)
        return call(*args, **kwargs)

    with nn.intercept_methods(count):
        jax.eval_shape(lambda p: run_search(GAME, network_evaluator(GAME, network, p), states, jax.random.key(0),
                                            config), params)
    tiers = network.afterstate_tiers(8 * 2, GAME.observation_size)
    assert tiers == 3 and sorted(traced) == list(range(tiers))


def test_self_play_starts_each_search_at_the_tier_the_previous_move_needed():
    """Self-play's games move in step, so each move's search starts at the tier its previous
    move's search needed (``least_tier``): a search runs again only where the room its
    evaluations need grew. From turn 0 over 12 moves of 4 simulations the tiered
    evaluator's need grows from tier 0 to the last (turn 12): two passes more than moves
    (searching from tier 0 at every move: nine)."""
    num_games, num_moves = 4, 12
    config = SearchConfig(num_simulations=4)

    def play(key):
        state = selfplay.init(GAME, key, num_games)
        _, played, stats = selfplay.play_moves(GAME, TieredEvaluator(), config, state, key, num_moves)
        return played.games.turn, stats.search_passes

    turns, passes = compile_fast(play, jax.random.key(0))(jax.random.key(0))
    assert np.asarray(turns)[:, 0].tolist() == list(range(num_moves))  # in step, no game over
    extra = int(passes) // num_games - num_moves
    assert 2 <= extra <= 4  # tiers 0 -> 1 -> 2: at least one pass more at each step up
