"""The endgame solver is exact, and the solver agent plays perfect endgames fairly.

Proof of exactness: more than 1,000 endgames from real (random) games, every legal
action, compared with ``bruteforce.solve_by_enumeration`` (the whole game tree
expanded on the host with the engine's ``step``, no pruning); then antisymmetry
(an action's value is minus the value of the position it leads to, solved on its
own; swapping the players' seats changes nothing) and consistency (a position's
value is the best of its actions'). One compiled solver serves every check: the
mode and the iteration limit are traced arguments, and every batch has the same
size.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import random_playout
from helpers.tiny_training import OPTIMIZED
from beastybar_jax.games import beastybar as game
from beastybar_jax.agents import AgentSpecError, agent_names, make_agent
from beastybar_jax.games.beastybar.endgame import bruteforce, positions, solver
from beastybar_jax.agents import Agent
from beastybar_jax.games.beastybar.solver_agent import solver_act
from beastybar_jax.games.beastybar import cards as C
from beastybar_jax.games import get_game

NUM_ONE_CARD_TO_DRAW = 12  # positions before the last draw: ~30k-node trees, so only a few
MODES = solver.MODE_IDS


step_batch = jax.jit(jax.vmap(game.step))
legal_batch = jax.jit(jax.vmap(game.legal_action_mask))
is_solvable_batch = jax.jit(jax.vmap(positions.is_solvable))
sample_worlds = jax.jit(jax.vmap(game.sample_world))


def cards_left(states) -> np.ndarray:
    return np.asarray(states.hand.sum((-2, -1)) + (states.deck >= 0).sum((-2, -1)))


def take(states, index):
    return jax.tree.map(lambda x: np.asarray(x)[index], states)


def swap_seats(states):
    """The same positions with the players' seats swapped."""
    s = jax.tree.map(np.asarray, states)
    queue = np.where(s.queue >= 0, (s.queue + C.NUM_SPECIES) % C.NUM_CARDS, -1).astype(np.int8)
    flip = lambda x: x[:, ::-1].copy()
    return s.replace(queue=queue, hand=flip(s.hand), deck=flip(s.deck), bar=flip(s.bar),
                     thats_it=flip(s.thats_it), current_player=(1 - s.current_player).astype(np.int8),
                     rewards=flip(s.rewards))


@pytest.fixture(scope="module")
def endgames():
    """Every position with both decks empty in 192 random games (three batches of the
    shared 64-game playout), and a few with one card left to draw."""
    play = random_playout(64)
    batches = [positions.solvable_positions(play(jax.random.key(1100 + k))[0]) for k in range(3)]
    states = jax.tree.map(lambda *x: np.concatenate(x), *batches)
    one_to_draw = cards_left(states) == 9
    keep = ~one_to_draw | (np.cumsum(one_to_draw) <= NUM_ONE_CARD_TO_DRAW)
    return take(states, keep)


@pytest.fixture(scope="module")
def truth(endgames):
    return bruteforce.solve_by_enumeration(endgames)


@pytest.fixture(scope="module")
def solve(endgames):
    """``solve(states, mode, max_iterations=0) -> Solution`` on the host, compiled once
    for batches of the endgames' size."""
    config = solver.SolverConfig(pops_per_step=1)  # pops_per_step=1: a smaller program to compile
    # OPTIMIZED here and below: the solver's loops run long, unlike most of the suite's programs
    # (tests/conftest.py compiles those without XLA's optimisations).
    compiled = jax.jit(lambda s, m, limit: solver.search(s, config, m, limit)[0]).lower(
        endgames, jnp.int32(0), jnp.int32(0)).compile(OPTIMIZED)
    return lambda states, mode, limit=0: jax.device_get(compiled(states, jnp.int32(MODES[mode]), jnp.int32(limit)))


@pytest.fixture(scope="module")
def solutions(endgames, solve):
    return {mode: solve(endgames, mode) for mode in MODES}


def test_the_endgames_come_from_real_games(endgames, truth):
    left = cards_left(endgames)
    assert left.size >= 1000 + NUM_ONE_CARD_TO_DRAW
    assert set(np.unique(left)) == set(range(1, 10))  # 1..8 cards in hands, and 9 before the last draw
    assert np.asarray(is_solvable_batch(endgames)).all()
    assert truth.legal.sum() > 3 * left.size  # many decisions, all of them compared
    assert {-1, 0, 1} <= set(np.unique(truth.result))


def test_real_decisions_and_the_moves_that_keep_the_result(solutions, truth):
    """``positions.real_decisions``: what the suite keeps (the legal moves' exact margins
    differ) and the moves whose exact result is the position's, against the whole game tree."""
    decision, keeps = positions.real_decisions(solutions["margins"])
    distinct_margins = [len(set(m[legal])) for m, legal in zip(truth.action_margin, truth.legal)]
    np.testing.assert_array_equal(decision, np.array(distinct_margins) > 1)
    np.testing.assert_array_equal(keeps, truth.legal & (truth.action_result == truth.result[:, None]))
    assert 0 < decision.mean() < 1 and keeps.any(axis=1).all()


@pytest.mark.slow
def test_margins_mode_equals_brute_force_on_every_action(solutions, truth):
    s = solutions["margins"]
    assert s.solved.all()
    np.testing.assert_array_equal(s.legal, truth.legal)
    np.testing.assert_array_equal(s.margin, truth.margin)
    np.testing.assert_array_equal(s.result, truth.result)
    np.testing.assert_array_equal(np.where(truth.legal, s.action_margin, 0), truth.action_margin)
    np.testing.assert_array_equal(s.action_exact, truth.legal)
    np.testing.assert_array_equal(s.action_result_known, truth.legal)
    np.testing.assert_array_equal(s.action_result, np.where(truth.legal, truth.action_result, 0))
    assert s.margin_exact.all()


def test_results_and_best_modes_keep_their_promises(solutions, truth):
    legal = truth.legal
    for mode in ("results", "best"):
        s = solutions[mode]
        assert s.solved.all()
        np.testing.assert_array_equal(s.result, truth.result)
        known = s.action_result_known
        np.testing.assert_array_equal(s.action_result[known], truth.action_result[known])
        exact = s.action_exact
        np.testing.assert_array_equal(s.action_margin[exact], truth.action_margin[exact])
        np.testing.assert_array_equal(s.margin[s.margin_exact], truth.margin[s.margin_exact])
        # Every other value is a bound: in mode results at least 1 for a win, at most
        # -1 for a loss; in mode best an upper bound.
        lower = legal & ~exact & (s.action_margin > 0) if mode == "results" else np.zeros_like(legal)
        upper = legal & ~exact & ~lower
        assert (truth.action_margin[upper] <= s.action_margin[upper]).all()
        assert (truth.action_margin[lower] >= s.action_margin[lower]).all()
        # The best moves are truly best.
        best = np.asarray(s.best_actions)
        assert (truth.action_margin[best] == np.broadcast_to(truth.margin[:, None], best.shape)[best]).all()
        optimal = np.asarray(s.result_optimal_actions)
        assert (~optimal | (truth.action_result == truth.result[:, None])).all()
    results, best = solutions["results"], solutions["best"]
    np.testing.assert_array_equal(results.action_result_known, legal)  # every action's result
    assert best.margin_exact.all() and np.asarray(best.best_actions).any(axis=1).all()  # the margin and a best move
    # Each mode does less work than the next.
    nodes = {mode: solutions[mode].nodes.sum() for mode in MODES}
    assert nodes["results"] < nodes["best"] < nodes["margins"] < truth.nodes.sum()


def test_a_position_is_worth_the_best_of_its_actions(truth, solutions):
    s = solutions["margins"]
    best_child = np.where(truth.legal, s.action_margin, -solver.INF).max(axis=1)
    np.testing.assert_array_equal(s.margin, best_child)
    np.testing.assert_array_equal(s.result, np.sign(s.margin))
    r = solutions["results"]
    np.testing.assert_array_equal(r.result, np.where(r.legal, r.action_result, -2).max(axis=1))


def test_an_action_is_worth_minus_the_position_it_leads_to(endgames, solutions, solve):
    s = solutions["margins"]
    parent, action = np.nonzero(s.legal)
    children = jax.device_get(step_batch(take(endgames, parent), action))
    going_on = ~children.terminated
    size = endgames.turn.shape[0]
    assert going_on.sum() >= size
    pick = np.flatnonzero(going_on)[np.linspace(0, going_on.sum() - 1, size).astype(int)]
    solved_children = solve(take(children, pick), "margins")
    assert solved_children.solved.all()
    np.testing.assert_array_equal(solved_children.margin, -s.action_margin[parent[pick], action[pick]])


def test_swapping_the_seats_changes_nothing(endgames, solutions, solve):
    swapped = solve(swap_seats(endgames), "margins")
    for field in ("margin", "action_margin", "legal"):
        np.testing.assert_array_equal(getattr(swapped, field), getattr(solutions["margins"], field))


def test_an_iteration_limit_leaves_positions_unsolved(endgames, solutions, solve):
    limited = solve(endgames, "results", limit=20)
    assert 0 < limited.solved.sum() < limited.solved.size
    done = limited.solved
    np.testing.assert_array_equal(limited.result[done], solutions["results"].result[done])
    assert not limited.legal[~done].any() and not limited.action_result_known[~done].any()


def test_more_lanes_solve_more_positions_within_a_budget_and_the_same_values(endgames, solutions):
    """``exact_values``'s ``lanes`` (``alphazero.exact_value_lanes``): the searches run side
    by side, so within the same budget of loop iterations more lanes solve more positions,
    each with its exact value; the lanes never change a value."""
    exact = solutions["results"]
    counts = []
    for lanes in (64, 512):
        solved, value = jax.device_get(jax.jit(lambda s: solver.exact_values(s, 20, lanes))(endgames))
        np.testing.assert_array_equal(value[solved], exact.result[solved])
        np.testing.assert_array_equal(value[~solved], 0)
        counts.append(int(solved.sum()))
    assert 0 < counts[0] < counts[1] < exact.solved.sum()


def test_on_a_gpu_the_loop_tests_its_condition_less_often_and_solves_the_same(endgames):
    """Traced for a GPU, the solver's loop tests its condition (a host round trip there)
    every ``GPU_CHECK_EVERY`` iterations, a static loop between: the same solution and
    the same count of iterations as the CPU's loop, without a budget and with one that is
    no multiple of it."""
    from beastybar_jax.games import tracing

    few = take(endgames, np.arange(96))
    BUDGETS = (1203, 2003)  # neither a multiple of 16; both short of the 2,117 needed
    config = solver.SolverConfig(pops_per_step=1)

    def run(for_gpu):
        with tracing.for_gpu(for_gpu, kernels="xla"):  # a new function each time: JAX reuses a trace
            search = jax.jit(lambda states, limit: solver.search(states, config, None, limit))
            return [jax.device_get(search(few, jnp.int32(limit))) for limit in (0, *BUDGETS)]

    cpu, gpu = run(False), run(True)
    assert int(cpu[0][1]) > max(BUDGETS) and [int(i) for _, i in cpu[1:]] == list(BUDGETS)
    assert 0 < cpu[1][0].solved.sum() < cpu[-1][0].solved.sum() < cpu[0][0].solved.sum()
    for (want, want_iterations), (got, got_iterations) in zip(cpu, gpu):
        assert int(got_iterations) == int(want_iterations)
        for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
            np.testing.assert_array_equal(a, b)


def test_unsolvable_positions_are_skipped(endgames, solve):
    midgame = take(endgames, np.arange(endgames.turn.shape[0]))
    midgame = midgame.replace(deck=np.where(np.arange(C.DECK_SIZE) < 2, 3, midgame.deck).astype(np.int8))
    assert not np.asarray(is_solvable_batch(midgame)).any()
    skipped = solve(midgame, "margins")
    assert not skipped.solved.any() and not skipped.legal.any() and not skipped.nodes.any()


@jax.jit
def bit_level_and_engine(states):
    """What the solver computes on packed words, and the engine's own answers."""
    words = jax.vmap(solver.pack, out_axes=1)(states)
    _, _, low_bits, high_bits = solver._evaluate_words(words)
    return dict(moves=solver._legal_bits(words), unpacked=jax.vmap(solver.unpack, in_axes=1)(words),
                low=low_bits, high=high_bits), dict(
        moves=solver._move_bits(jax.vmap(game.legal_action_mask)(states)), unpacked=states,
        bounds=jax.vmap(solver.margin_bounds)(states))


def test_bit_level_moves_and_packing_match_the_engine(endgames):
    first_moves = np.argmax(np.asarray(legal_batch(endgames)), axis=1)
    children = jax.device_get(step_batch(endgames, first_moves))
    for batch in (endgames, children):
        bits, engine = jax.device_get(bit_level_and_engine(batch))
        np.testing.assert_array_equal(bits["moves"], engine["moves"])
        for name, value in engine["unpacked"].items():
            np.testing.assert_array_equal(bits["unpacked"][name], value, err_msg=name)
        np.testing.assert_array_equal(bits["low"], engine["bounds"][0])
        np.testing.assert_array_equal(bits["high"], engine["bounds"][1])


# ----------------------------------------------------------------------------- the agent


@pytest.fixture(scope="module")
def midgames():
    """Positions before the decks run out (turns 0..14), the same number as the endgames."""
    before, _, _ = random_playout(64)(jax.random.key(1200))
    flat = jax.tree.map(lambda x: np.asarray(x)[:15].reshape((-1,) + x.shape[2:]), before)
    return flat


@pytest.fixture(scope="module")
def agent_act(endgames, midgames):
    """``act(states, keys)`` of ``solver+random`` over a batch of positions, compiled once."""
    agent = Agent("solver+random", solver_act(make_agent("random").act))
    size = endgames.turn.shape[0] + 256
    example = jax.tree.map(lambda x: jax.ShapeDtypeStruct((size,) + x.shape[1:], x.dtype), endgames)
    keys = jax.random.split(jax.random.key(0), size)
    return jax.jit(jax.vmap(agent.act)).lower(example, keys).compile(OPTIMIZED)


def test_the_solver_agent_plays_a_best_move_and_sees_only_what_its_player_knows(
        endgames, midgames, truth, agent_act):
    mid = take(midgames, np.arange(256))
    assert not np.asarray(is_solvable_batch(mid)).any()
    batch = jax.tree.map(lambda a, b: np.concatenate([a, b]), jax.device_get(endgames), mid)
    size = batch.turn.shape[0]
    keys = jax.random.split(jax.random.key(5), size)
    actions = np.asarray(agent_act(batch, keys))
    # Endgames: a move of the largest margin under best play (hence result-optimal).
    n = endgames.turn.shape[0]
    chosen = truth.action_margin[np.arange(n), actions[:n]]
    assert truth.legal[np.arange(n), actions[:n]].all()
    np.testing.assert_array_equal(chosen, truth.margin)
    # Nothing is hidden in an endgame: every world the mover may imagine is the true one.
    n_keys = jax.random.split(jax.random.key(3), n)
    for k in range(3):
        worlds = sample_worlds(endgames, endgames.current_player, jax.vmap(jax.random.fold_in, (0, None))(n_keys, k))
        for name, value in jax.device_get(worlds).items():
            np.testing.assert_array_equal(value, np.asarray(endgames[name]), err_msg=name)
    # Elsewhere the cards the mover cannot see (the opponent's hand and both decks'
    # order) are dealt again: the agent's moves do not change.
    redealt = sample_worlds(batch, batch.current_player, jax.random.split(jax.random.key(9), size))
    changed = np.any(np.asarray(redealt.hand) != batch.hand, axis=(1, 2)) | np.any(
        np.asarray(redealt.deck) != batch.deck, axis=(1, 2))
    assert changed[n:].mean() > 0.9 and not changed[:n].any()
    np.testing.assert_array_equal(np.asarray(agent_act(jax.device_get(redealt), keys)), actions)


def test_solver_agent_specs():
    assert make_agent("solver+heuristic").name == "solver+heuristic"
    assert make_agent("solver+mcts-8@worlds=2").name == "solver+mcts-8@worlds=2"
    for bad in ("solver", "solver+", "solverx+random", "solver+nonsense"):
        with pytest.raises(AgentSpecError):
            make_agent(bad)
    tictactoe = get_game("tictactoe")
    assert "solver+<agent>" in agent_names("beastybar") and "solver+<agent>" not in agent_names(tictactoe)
    with pytest.raises(AgentSpecError, match=r"solver\+<agent> plays beastybar only, not tictactoe"):
        make_agent("solver+random", game=tictactoe)


# ----------------------------------------------------------------------------- the yardstick


@pytest.fixture(scope="module")
def suite():
    from beastybar_jax.games.beastybar.endgame.suite import load_suite

    return load_suite()


def test_the_suite_scores_one_integer_action_per_position(suite):
    """Actions shaped ``[N, 1]`` broadcast to ``[N, N]`` and scored perfect play 48%."""
    from beastybar_jax.games.beastybar.endgame.suite import score_moves

    best = np.argmax(np.where(suite.legal, suite.action_margin.astype(np.int32), -1000), axis=1)
    assert score_moves(suite, best).keeps_result == 1.0
    for bad in (best[:, None], best[:-1], best.astype(np.float32)):
        with pytest.raises(ValueError, match="one integer action per position"):
            score_moves(suite, bad)


def test_a_suite_file_is_saved_where_named_and_a_bad_one_is_refused_in_one_line(suite, tmp_path):
    """A suite round-trips through any file name (NumPy would have added .npz to one without
    it); a file that is not a suite (broken, not an archive, empty, arrays that disagree,
    a position without a decision) is a SuiteError naming the file, never a traceback or a
    score of nothing."""
    import dataclasses

    from beastybar_jax.games.beastybar.endgame.suite import SuiteError, load_suite, save_suite

    small = suite.subset(np.arange(5))
    save_suite(small, tmp_path / "no_extension")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["no_extension"]
    back = load_suite(tmp_path / "no_extension")
    np.testing.assert_array_equal(back.action_margin, small.action_margin)
    np.testing.assert_array_equal(back.states.queue, small.states.queue)

    def written(suite_, path) -> None:  # as save_suite writes, without its check
        np.savez(path, action_margin=suite_.action_margin, legal=suite_.legal, source=suite_.source,
                 sources=np.array(suite_.sources), **{f"state_{k}": np.asarray(v) for k, v in suite_.states.items()})

    def broken(name: str, content: bytes | None = None, suite_: object = None) -> str:
        path = tmp_path / name
        if content is not None:
            path.write_bytes(content)
        else:
            written(suite_, path)
            with pytest.raises(SuiteError, match="not written to"):  # save_suite refuses to write it
                save_suite(suite_, tmp_path / "refused.npz")
        with pytest.raises(SuiteError) as raised:
            load_suite(path)
        assert str(path) in str(raised.value) and "\n" not in str(raised.value)
        return str(raised.value)

    assert "NumPy cannot read it" in broken("zip.npz", b"PK\x03\x04garbage")
    assert "NumPy cannot read it" in broken("text.npz", b"not a suite at all")
    np.save(tmp_path / "array.npy", np.zeros(3))
    assert "one array" in broken("one.npz", (tmp_path / "array.npy").read_bytes())
    assert "holds no positions" in broken("empty.npz", suite_=suite.subset(np.arange(0)))
    assert "action_margin has shape" in broken(
        "short.npz", suite_=dataclasses.replace(small, action_margin=small.action_margin[:3]))
    no_moves = dataclasses.replace(small, legal=np.zeros_like(small.legal))
    assert "fewer than two legal moves" in broken("no_moves.npz", suite_=no_moves)

    # A byte flipped anywhere in a saved suite: it loads as it was, or it is refused in one
    # line (zlib's own error came through as a traceback).
    data = (tmp_path / "no_extension").read_bytes()
    for offset in range(0, len(data), max(1, len(data) // 60)):
        damaged = bytearray(data)
        damaged[offset] ^= 0x5A
        (tmp_path / "flipped.npz").write_bytes(bytes(damaged))
        try:
            load_suite(tmp_path / "flipped.npz")
        except SuiteError as e:
            assert "flipped.npz" in str(e)


def test_the_share_kept_where_the_result_is_at_stake(suite):
    """Where every legal move keeps the result only the margin is at stake, and any agent
    keeps it; ``keeps_at_stake`` scores the rest, the positions that test calculation."""
    from beastybar_jax.games.beastybar.endgame.positions import keeps_result
    from beastybar_jax.games.beastybar.endgame.suite import score_moves

    keeps = keeps_result(suite.legal, suite.action_margin, suite.margin)
    at_stake = ((~keeps) & suite.legal).any(axis=1)  # a legal move that loses the result
    assert at_stake.sum() == 5_241 and (~at_stake).sum() == 6_807
    rng = np.random.default_rng(0)
    moves = np.array([rng.choice(np.flatnonzero(row)) for row in suite.legal])
    score = score_moves(suite, moves)
    kept = keeps[np.arange(len(suite)), moves]
    assert score.at_stake == 5_241 and score.keeps_at_stake == pytest.approx(kept[at_stake].mean())
    assert score.keeps_result == pytest.approx((6_807 + kept[at_stake].sum()) / len(suite))
    safe = suite.subset(np.flatnonzero(~at_stake)[:10])  # nothing at stake: nothing to score there
    none = score_moves(safe, moves[np.flatnonzero(~at_stake)[:10]])
    assert none.at_stake == 0 and none.keeps_at_stake is None and none.keeps_result == 1.0


def test_the_suite_holds_ten_thousand_real_decisions_from_varied_games(suite):
    n = len(suite)
    assert n >= 10_000
    assert len(suite.sources) >= 7 and set(np.unique(suite.source)) == set(range(len(suite.sources)))
    assert np.asarray(is_solvable_batch(suite.states)).all()
    np.testing.assert_array_equal(np.asarray(legal_batch(suite.states)), suite.legal)
    margins = np.where(suite.legal, suite.action_margin, suite.margin[:, None])
    assert (suite.legal.sum(axis=1) >= 2).all() and (margins != suite.margin[:, None]).any(axis=1).all()
    assert {-1, 0, 1} <= set(np.unique(suite.result))
    assert (cards_left(suite.states) == 9).any()  # some before the last draw


def test_the_suite_margins_are_exact(suite, endgames, solve):
    size = endgames.turn.shape[0]
    sample = suite.subset(np.linspace(0, len(suite) - 1, size).astype(int))
    solution = solve(sample.states, "margins")
    np.testing.assert_array_equal(solution.legal, sample.legal)
    np.testing.assert_array_equal(np.where(sample.legal, solution.action_margin, 0), sample.action_margin)


def test_exact_policy_targets_are_the_result_keeping_moves_of_the_suite(suite, endgames, solve):
    """The policy target of a solved position (``exact_targets.exact_policy_target`` on the
    solver's result-keeping moves, as ``alphazero.exact_policy_targets`` makes it) has
    as support exactly the moves whose exact margin has the position's sign, from the
    suite's stored margins; a search target with no weight on them gives way to uniform."""
    from beastybar_jax.alphazero.exact_targets import exact_policy_target

    size = endgames.turn.shape[0]
    sample = suite.subset(np.linspace(0, len(suite) - 1, size).astype(int))
    solution = solve(sample.states, "results")
    keeps = np.asarray(solution.result_optimal_actions) & sample.legal
    optimal = sample.legal & (np.sign(sample.action_margin) == sample.result[:, None])
    uniform = sample.legal / sample.legal.sum(-1, keepdims=True)
    target = np.asarray(exact_policy_target(jnp.asarray(uniform), jnp.asarray(keeps), jnp.asarray(solution.solved)))
    assert np.asarray(solution.solved).all()
    np.testing.assert_array_equal(target > 0, optimal)
    np.testing.assert_allclose(target[optimal], (1 / optimal.sum(-1, keepdims=True)).repeat(optimal.shape[1], 1)[optimal],
                               rtol=1e-6)
    assert (optimal.sum(-1) < sample.legal.sum(-1)).any()  # some moves are thrown away
    throwing = ~optimal & sample.legal  # a search that only likes those moves
    only_bad = np.where(throwing, 1.0, 0.0) / np.maximum(throwing.sum(-1, keepdims=True), 1)
    target = np.asarray(exact_policy_target(jnp.asarray(only_bad), jnp.asarray(keeps), jnp.asarray(solution.solved)))
    rows = throwing.any(-1)
    np.testing.assert_array_equal(target[rows] > 0, optimal[rows])


def test_endgame_scores(suite):
    from beastybar_jax.games.beastybar.endgame.suite import evaluate_agent, score_moves

    best = np.argmax(np.where(suite.legal, suite.action_margin, -100), axis=1)
    perfect = score_moves(suite, best, "perfect")
    assert (perfect.keeps_result, perfect.best_margin, perfect.margin_lost, perfect.illegal) == (1.0, 1.0, 0.0, 0)
    worst = score_moves(suite, np.argmin(np.where(suite.legal, suite.action_margin, 100), axis=1), "worst")
    assert worst.best_margin == 0.0 and worst.margin_lost > 1.0
    assert worst.throws_win + worst.throws_draw == pytest.approx(1.0 - worst.keeps_result)
    assert score_moves(suite, np.full(len(suite), -1)).illegal == len(suite)
    sample = suite.subset(np.arange(0, len(suite), len(suite) // 300))
    random = evaluate_agent(make_agent("random"), sample, jax.random.key(0), chunk=512)
    assert random.positions == len(sample) and random.illegal == 0
    assert 0.2 < random.keeps_result < 0.95 and random.margin_lost > 0


def test_scores_by_turn_result_moves_and_source_are_each_groups_own(suite):
    """``score_groups``: every position in exactly one group, each group's shares counted
    over its own positions here by hand, and the groups' throws adding up to the suite's."""
    from beastybar_jax.games.beastybar.endgame.suite import position_groups, score_groups, score_moves

    rng = np.random.default_rng(1)
    moves = np.array([rng.choice(np.flatnonzero(row)) for row in suite.legal])
    chosen = np.sign(suite.action_margin[np.arange(len(suite)), moves])
    turn = np.asarray(suite.states.turn)
    by_turn = score_groups(suite, moves, "turn")
    assert [label for label, _ in by_turn] == [str(t) for t in sorted(set(turn.tolist()))]
    for label, score in by_turn:
        at = turn == int(label)
        assert score.positions == at.sum()
        assert score.throws_win == pytest.approx(np.mean((suite.result[at] == 1) & (chosen[at] < 1)))
        assert score.keeps_result == pytest.approx(np.mean(chosen[at] == suite.result[at]))
    whole = score_moves(suite, moves)
    assert sum(s.throws_win * s.positions for _, s in by_turn) == pytest.approx(whole.throws_win * len(suite))
    by_result = dict(score_groups(suite, moves, "result"))
    assert list(by_result) == ["won", "drawn", "lost"]
    assert by_result["won"].positions == (suite.result == 1).sum() and by_result["lost"].throws_win == 0.0
    assert by_result["won"].keeps_result == pytest.approx(1 - by_result["won"].throws_win)  # a won game kept or thrown
    for by in ("moves", "source"):
        index = np.concatenate([i for _, i in position_groups(suite, by)])
        np.testing.assert_array_equal(np.sort(index), np.arange(len(suite)))  # a partition
    assert [label for label, _ in position_groups(suite, "source")] == list(suite.sources)
    moves_of = dict(position_groups(suite, "moves"))
    assert (suite.legal[moves_of["2"]].sum(axis=1) == 2).all()
    with pytest.raises(ValueError, match="grouped by one of turn, moves, result, source"):
        position_groups(suite, "depth")


# ----------------------------------------------------------------------------- exact value targets


@pytest.mark.slow
def test_exact_value_and_policy_targets_are_the_solvers(endgames, solve):
    """Self-play with exact value and policy targets (``alphazero.exact_value_targets``,
    ``exact_policy_targets``): every stored position the solver can solve has its exact
    result for the player to move as value target, and a policy target on the moves
    that keep that result only, both where its game ended in the iteration that played
    it and where the game went on into the next iteration (the targets wait in the
    slot's trajectory)."""
    from jax.flatten_util import ravel_pytree

    from beastybar_jax import search
    from beastybar_jax.alphazero import exact_targets, replay, selfplay

    flat_example, unravel = ravel_pytree(game.init(jax.random.key(0)))
    # The records' observations are the whole state, so the test can solve each stored position.
    spy = game.BEASTYBAR._replace(observe=lambda s, player: ravel_pytree(s)[0], observation_size=flat_example.size)
    num_games, moves = 6, 18
    search_config = search.SearchConfig(num_simulations=2, max_num_considered_actions=2)

    def iteration(state, buffer, key):  # AlphaZero's self-play with exact targets
        start = state
        state, played, _ = selfplay.play_moves(spy, search.uniform_evaluator(spy), search_config, state, key, moves,
                                               temperature=1.0, temperature_drop_move=24)
        played, state, solved = exact_targets.apply(spy, played, state, budget=0, policy_targets=True)
        return state, selfplay.insert_finished(spy, buffer, start, played), solved

    state = selfplay.init(spy, jax.random.key(1), num_games)
    buffer = replay.init(1024, spy.observation_size, spy.num_actions)
    play = jax.jit(iteration).lower(state, buffer, jax.random.key(2)).compile(OPTIMIZED)

    size = endgames.turn.shape[0]

    def expected(observations):
        """``(solvable, exact result, result-keeping moves)`` of the states behind the observations."""
        states = jax.vmap(unravel)(jnp.asarray(observations))
        solvable = np.asarray(is_solvable_batch(states))
        index = np.flatnonzero(solvable)
        assert 0 < index.size <= size
        padded = np.concatenate([index, np.full(size - index.size, index[0])])
        result = np.zeros(solvable.shape, np.float32)
        keeps = np.zeros(solvable.shape + (game.NUM_ACTIONS,), bool)
        solution = solve(take(states, padded), "results")
        result[index] = solution.result[:index.size]
        keeps[index] = np.asarray(solution.result_optimal_actions)[:index.size]
        return solvable, result, keeps

    def check_policies(policy, solvable, keeps):
        """Solved positions: a distribution on result-keeping moves only."""
        np.testing.assert_allclose(policy[solvable].sum(-1), 1.0, rtol=1e-5)
        assert not (policy[solvable] > 0)[~keeps[solvable]].any()

    # Iteration 1: 18 moves, no game over yet; the solvable positions played so far
    # (from the 16th play on) are solved and wait in the state.
    state, buffer, solved = play(state, buffer, jax.random.key(3))
    assert int(buffer.size) == 0 and int(solved) > 0
    length = np.asarray(state.length)
    recorded = np.arange(state.trajectory.player.shape[1])[None, :] < length[:, None]
    solvable, result, keeps = expected(np.asarray(state.trajectory.observation)[recorded])
    np.testing.assert_array_equal(np.asarray(state.trajectory.exact)[recorded], solvable)
    np.testing.assert_array_equal(np.asarray(state.trajectory.value)[recorded][solvable], result[solvable])
    check_policies(np.asarray(state.trajectory.policy)[recorded], solvable, keeps)

    # Iteration 2: the games end and reach the buffer; then new games start.
    state, buffer, _ = play(state, buffer, jax.random.key(4))
    stored = jax.tree.map(lambda x: np.asarray(x)[:int(buffer.size)], buffer.records)
    assert int(buffer.size) >= num_games * 21  # every slot finished its game
    solvable, result, keeps = expected(stored.observation)
    assert solvable.sum() >= 5 * num_games
    np.testing.assert_array_equal(stored.value[solvable], result[solvable])
    np.testing.assert_array_equal(stored.exact, solvable)  # flagged for alphazero.exact_policy_weight
    check_policies(stored.policy, solvable, keeps)
    # Some solved positions have moves that throw the result away, and none is a target.
    assert (stored.legal_mask[solvable] & ~keeps[solvable]).any()
    assert np.isin(stored.value, [-1.0, 0.0, 1.0]).all()
