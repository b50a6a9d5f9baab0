"""mctx_patch: both of our search loops build bitwise the trees of stock mctx, with its
actions and (to float rounding) its weights; their compiled loops rewrite no tree-sized
buffer; the static loop holds no host round trip inside a simulation.

Each case is compiled once per loop: inside ``mctx_patch.stock_mctx()`` (mctx's own
``search``/``backward``), with the ``"dynamic"`` loop (the CPU's), with the ``"static"``
one (the GPU's, its walk and cached choices as XLA operations) and as ``"kernels"``: the
static loop with the GPU's Pallas kernels (the walk, Gumbel's cached choices) run by
Pallas's interpreter (the policy cases), at XLA's cheapest backend optimisation level (the
HLO passes that decide copies and selects still run). The policy cases search a small synthetic
model (pseudo-random priors, values, rewards and discounts of -1, 1, 0.9 and 0, a root
with every action invalid like a finished game); the world case runs ``run_search`` on
Beasty Bar with ``K > 1`` determinizations and a finished game among the roots, against
stock mctx without a depth bound.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from mctx._src import search as mctx_search

from beastybar_jax.games.beastybar import BEASTYBAR
from beastybar_jax.search import SearchConfig, mctx_patch, programs, run_search
from helpers import random_playout
from helpers.tiny_training import SAME_BITS


MODES = {"stock": mctx_patch.stock_mctx, "dynamic": lambda: mctx_patch.installed(loop="dynamic"),
         "static": lambda: mctx_patch.installed(loop="static-xla"),
         "kernels": lambda: mctx_patch.installed(loop="static-interpret")}
LOOPS = ("dynamic", "static", "kernels")


def compile_search(fn, *args, mode: str):
    """``fn`` compiled for ``args`` with stock mctx or one of our loops. ``fn`` must be a
    fresh function: ``jax.jit`` caches traces per function. XLA:CPU's default emitters
    (``SAME_BITS``): the bits are compared, and the HLO checked is the one users get."""
    with MODES[mode]():
        return jax.jit(fn).lower(*args).compile(SAME_BITS)


def assert_bitwise_equal(expected, actual):
    leaves, actual_leaves = jax.tree.leaves(expected), jax.tree.leaves(actual)
    assert len(leaves) == len(actual_leaves)
    for want, got in zip(leaves, actual_leaves):
        want, got = np.asarray(want), np.asarray(got)
        assert want.dtype == got.dtype and want.shape == got.shape
        np.testing.assert_array_equal(want.view(np.uint8), got.view(np.uint8))  # bits, NaNs included


def assert_same_search(expected, actual, weights: str):
    """The trees bitwise equal; the actions equal; ``weights`` (the policy's output
    computed from the root after the search) equal to float rounding: XLA compiles that
    softmax anew around each loop, and its vectorised ``exp`` may round the last bit
    otherwise."""
    expected, actual = dict(expected), dict(actual)
    np.testing.assert_allclose(np.asarray(actual.pop(weights)), np.asarray(expected.pop(weights)), rtol=2e-6, atol=1e-7)
    assert_bitwise_equal(expected, actual)


# ----------------------------------------------------------------------------- the synthetic model

NUM_ACTIONS = 6
POLICY_BATCH = 5
DISCOUNTS = jnp.asarray([-1.0, 1.0, 0.9, 0.0])


def synthetic_step(node_hash):
    """Pseudo-random ``(prior logits [B, A], value [B], reward [B], discount [B])`` of
    the nodes ``node_hash`` ``int32[B]``."""
    # An integer hash (murmur3's finalizer) compiles much faster than jax.random.
    bits = node_hash.astype(jnp.uint32)[:, None] * jnp.uint32(0x9E3779B1) + jnp.arange(NUM_ACTIONS + 3, dtype=jnp.uint32)
    for shift, multiplier in ((16, 0x85EBCA6B), (13, 0xC2B2AE35), (16, 1)):
        bits = (bits ^ (bits >> shift)) * jnp.uint32(multiplier)
    uniforms = (bits >> 8).astype(jnp.float32) / float(1 << 24)  # [B, A + 3] in [0, 1)
    logits = 4.0 * uniforms[:, :NUM_ACTIONS] - 2.0
    value = 2.0 * uniforms[:, NUM_ACTIONS] - 1.0
    reward = jnp.where(uniforms[:, NUM_ACTIONS + 1] < 0.3, 6.0 * uniforms[:, NUM_ACTIONS + 1] - 1.0, 0.0)
    discount = DISCOUNTS[(4.0 * uniforms[:, NUM_ACTIONS + 2]).astype(jnp.int32)]
    return logits, value, reward, discount


def synthetic_recurrent_fn(params, rng_key, action, embedding):
    del params, rng_key
    child = embedding * 7919 + action.astype(jnp.int32) + 1
    logits, value, reward, discount = synthetic_step(child)
    return mctx.RecurrentFnOutput(reward=reward, discount=discount, prior_logits=logits, value=value), child


def synthetic_root():
    """Roots of ``POLICY_BATCH`` trees: root 0 has no valid action (a finished game),
    root 1 has two, the others all ``NUM_ACTIONS``."""
    embedding = jnp.arange(POLICY_BATCH, dtype=jnp.int32) + 11
    logits, value, _, _ = synthetic_step(embedding)
    invalid = np.zeros((POLICY_BATCH, NUM_ACTIONS), bool)
    invalid[0] = True
    invalid[1, 2:] = True
    return mctx.RootFnOutput(prior_logits=logits, value=value, embedding=embedding), jnp.asarray(invalid)


POLICY_CASES = {
    "gumbel-10": dict(policy="gumbel", num_simulations=10, max_depth=None),
    "gumbel-20-depth3": dict(policy="gumbel", num_simulations=20, max_depth=3),
    "puct-13": dict(policy="puct", num_simulations=13, max_depth=None),
    "puct-20-depth4": dict(policy="puct", num_simulations=20, max_depth=4),
}


def policy_search(policy: str, num_simulations: int, max_depth):
    """A fresh ``search(key) -> mctx.PolicyOutput`` of the synthetic model."""

    def search(key):
        root, invalid = synthetic_root()
        if policy == "gumbel":
            return mctx.gumbel_muzero_policy(
                (), key, root, synthetic_recurrent_fn, num_simulations, invalid_actions=invalid,
                max_depth=max_depth, max_num_considered_actions=4)
        return mctx.muzero_policy(
            (), key, root, synthetic_recurrent_fn, num_simulations, invalid_actions=invalid, max_depth=max_depth)

    return search


@pytest.fixture(scope="module")
def policy_searches():
    """``{mode: compiled(key) -> {case: mctx.PolicyOutput}}``: the cases in one
    program per mode (one compile each); the kernels only Gumbel's (PUCT's choices stay
    XLA operations, and the Pallas walk is checked against the XLA walk apart)."""

    def fresh_searches(names):
        searches = {name: policy_search(**POLICY_CASES[name]) for name in names}
        return lambda key: {name: search(key) for name, search in searches.items()}

    gumbel = [name for name, case in POLICY_CASES.items() if case["policy"] == "gumbel"]
    return {mode: compile_search(fresh_searches(gumbel if mode == "kernels" else POLICY_CASES), jax.random.key(0),
                                 mode=mode) for mode in MODES}


# ----------------------------------------------------------------------------- Beasty Bar worlds

WORLD_STATES = 3
# PUCT and max_depth are covered by the policy cases; this one runs our recurrent
# function, worlds and combine (one compile per mode: they cost ~10 s of CPU each), with
# run_search's depth bound (the game's length + 2), against stock mctx without one.
WORLD_CASES = {"gumbel-K2": SearchConfig(algorithm="gumbel", num_simulations=12, num_determinizations=2)}
UNBOUNDED = 1_000  # a max_depth no walk reaches: stock mctx's own search


def small_evaluator():
    """A fixed random linear policy and value of the observation: non-trivial priors
    and values at no compile cost."""
    rng = np.random.default_rng(0)
    policy = jnp.asarray(rng.normal(size=(BEASTYBAR.observation_size, BEASTYBAR.num_actions)), jnp.float32)
    value = jnp.asarray(rng.normal(size=(BEASTYBAR.observation_size,)) * 0.3, jnp.float32)

    def evaluate(states):
        observations = jax.vmap(BEASTYBAR.observe)(states, states.current_player)
        return observations @ policy, jnp.tanh(observations @ value)

    return evaluate


@pytest.fixture(scope="module")
def world_states():
    """An early, a late and a finished game."""
    before, _, final = random_playout(64)(jax.random.key(3))
    states = [jax.tree.map(lambda x: x[2, 0], before), jax.tree.map(lambda x: x[18, 1], before),
              jax.tree.map(lambda x: x[2], final)]
    states = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
    assert [bool(t) for t in states.terminated] == [False, False, True]
    return states


@pytest.fixture(scope="module")
def world_searches(world_states):
    """``{mode: compiled(states, key) -> {case: SearchOutput}}``; stock mctx searches
    without a depth bound."""

    def fresh_searches(bound):
        evaluate = small_evaluator()
        configs = {name: config.replace(max_depth=bound) for name, config in WORLD_CASES.items()}
        return lambda states, key: {name: run_search(BEASTYBAR, evaluate, states, key, config, add_noise=True)
                                    for name, config in configs.items()}

    return {mode: compile_search(fresh_searches(UNBOUNDED if mode == "stock" else None), world_states,
                                 jax.random.key(0), mode=mode)
            for mode in MODES if mode != "kernels"}  # the kernels' semantics: the policy cases


# ----------------------------------------------------------------------------- bitwise identity


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("mode", LOOPS)
def test_our_loops_build_bitwise_the_trees_of_stock_mctx(policy_searches, seed, mode):
    key = jax.random.key(seed)
    stock, patched = policy_searches["stock"](key), policy_searches[mode](key)
    for name in patched:
        assert_same_search(stock[name], patched[name], weights="action_weights")
        tree, num_simulations = patched[name].search_tree, POLICY_CASES[name]["num_simulations"]
        assert int(tree.node_visits[1, 0]) == num_simulations + 1
        assert int(jnp.sum(tree.children_visits[:, 0])) == POLICY_BATCH * num_simulations


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("mode", [loop for loop in LOOPS if loop != "kernels"])
def test_run_search_over_worlds_with_the_games_depth_bound_is_stock_mctx(world_searches, world_states, seed, mode):
    key = jax.random.key(seed)
    stock, patched = world_searches["stock"](world_states, key), world_searches[mode](world_states, key)
    for name, config in WORLD_CASES.items():
        assert_same_search(stock[name], patched[name], weights="action_weights")
        assert int(patched[name].visit_counts[2].sum()) == 0  # the finished game
        assert int(patched[name].visit_counts[0].sum()) == config.num_simulations * config.num_determinizations


@pytest.mark.slow
def test_backward_is_a_drop_in_for_mctx_backward(policy_searches):
    """Backing up any nodes of a tree, the root itself included, as mctx's
    ``backward`` does."""
    with mctx_patch.stock_mctx():
        stock_backward = mctx_search.backward
    tree = policy_searches["dynamic"](jax.random.key(2))["puct-20-depth4"].search_tree
    # The deepest-numbered node of each tree (with max_depth, not every slot is used),
    # and the root of tree 1.
    leaves = np.max(np.where(np.asarray(tree.parents) >= 0, np.arange(tree.parents.shape[1]), 0), axis=1)
    leaves[1] = 0
    assert leaves[0] > 0
    leaves = jnp.asarray(leaves, jnp.int32)
    stock = jax.jit(stock_backward, compiler_options=SAME_BITS)(tree, leaves)
    assert_bitwise_equal(stock, jax.jit(mctx_patch.backward, compiler_options=SAME_BITS)(tree, leaves))
    assert not np.array_equal(stock.node_visits, tree.node_visits)


# ----------------------------------------------------------------------------- no tree-sized rewrites

_INSTRUCTION = re.compile(r"^(?:ROOT )?%([\w.\-]+) = (.*?) ([a-z][\w\-]*)\(")
_ARRAY_DIMS = re.compile(r"\b[a-z]+\d*\[([\d,]*)\]")
_CALLED = re.compile(r"\b(?:calls|body|condition|to_apply|branch_computations)=\{?(%[\w.\-]+(?:, %[\w.\-]+)*)")
# Instructions that may produce a tree-sized buffer in a loop without rewriting it.
_IN_PLACE = {"parameter", "get-tuple-element", "tuple", "bitcast", "scatter", "dynamic-update-slice", "while", "constant"}


def tree_sized_rewrites(hlo_text: str, batch: int, num_nodes: int) -> list[str]:
    """Instructions inside while-loop bodies (fusions and nested loops included) that
    write a whole tree-sized buffer (a shape ``[batch, num_nodes, ...]``): copies,
    selects, broadcasts... Only in-place updates (scatter, dynamic-update-slice, or a
    fusion rooted at one) and aliases may produce one. Pick ``batch`` and
    ``num_nodes`` that no other array of the program starts with."""
    assert batch != num_nodes
    computations = programs.computations_of(hlo_text)

    def parse(line):
        match = _INSTRUCTION.match(line)
        if match is None:
            return None
        called = [c.strip().lstrip("%") for group in _CALLED.findall(line) for c in group.split(",")]
        return match.group(1), match.group(2), match.group(3), called

    def root_opcode(computation):
        return next(parse(line)[2] for line in computations[computation] if line.startswith("ROOT"))

    def tree_sized(shape):  # mctx's tree arrays are [B, N+1, ...]
        return any(tuple(int(d) for d in text.split(",")[:2] if d) in ((batch, num_nodes), (num_nodes, batch))
                   for text in _ARRAY_DIMS.findall(shape))

    loop_bodies = [re.search(r"body=%?([\w.\-]+)", line).group(1)
                   for lines in computations.values() for line in lines if (p := parse(line)) and p[2] == "while"]
    found, seen, pending = [], set(), [(body, body) for body in loop_bodies]
    while pending:
        computation, loop = pending.pop()
        if computation in seen:
            continue
        seen.add(computation)
        for line in computations[computation]:
            parsed = parse(line)
            if parsed is None:
                continue
            name, shape, opcode, called = parsed
            pending += [(c, c if opcode == "while" else loop) for c in called]
            if not tree_sized(shape) or opcode in _IN_PLACE:
                continue
            if opcode == "fusion" and root_opcode(called[0]) in ("scatter", "dynamic-update-slice"):
                continue
            found.append(f"{loop}: {name} = {opcode} {shape}")
    return found


@pytest.mark.slow
def test_search_loops_rewrite_no_tree_sized_buffer(policy_searches, world_searches):
    """Both loops update the tree in place: no loop body holds a copy, select or other
    full write of a ``[B, N+1, ...]`` buffer. Stock mctx's backward does (a select of
    the whole tree per step up), which the check must catch. The static loop's path
    arrays are ``[B, max_depth + 1]``, so it is checked where ``max_depth < N``: with
    the depth bound at ``N`` they take the tree's leading shape.
    The patterns are those of XLA:CPU's programs (CI); a GPU compiler schedules
    buffers its own way, and there the speed is shown by ``benchmark.py search``."""
    if jax.default_backend() != "cpu":
        pytest.skip("checks XLA:CPU's optimized HLO; not verified against the GPU compiler's")
    shapes = {name: (POLICY_BATCH, case["num_simulations"] + 1) for name, case in POLICY_CASES.items()}  # [B, N+1]
    shapes.update({name: (WORLD_STATES * config.num_determinizations, config.num_simulations + 1)
                   for name, config in WORLD_CASES.items()})
    programs = {("policy", mode): compiled.as_text() for mode, compiled in policy_searches.items()}
    programs.update({("world", mode): compiled.as_text() for mode, compiled in world_searches.items()})
    for (kind, mode), program in programs.items():
        if mode == "kernels":
            continue  # the Pallas interpreter's program: a CPU's test of the kernels, not run for speed
        for name, (batch, num_nodes) in shapes.items():
            bounded = name in POLICY_CASES and POLICY_CASES[name]["max_depth"] is not None
            if (name in POLICY_CASES) == (kind == "policy") and (mode != "static" or bounded):
                rewrites = tree_sized_rewrites(program, batch, num_nodes)
                assert bool(rewrites) == (mode == "stock"), (mode, name, rewrites[:3])


# ----------------------------------------------------------------------------- installation


def test_install_is_idempotent_and_blocks_restore_the_previous_search():
    assert mctx_patch.installed_loop() == "auto"  # loading run_search installed it
    mctx_patch.install()
    assert mctx_search.search.func is mctx_patch.search and mctx.search is mctx_search.search
    assert mctx_search.backward is mctx_patch.backward
    with mctx_patch.stock_mctx():
        assert not mctx_patch.is_installed()
        assert mctx_search.backward is not mctx_patch.backward and mctx.search is mctx_search.search
        with mctx_patch.installed(loop="static"):
            assert mctx_patch.installed_loop() == "static" and mctx.search is mctx_search.search
        assert not mctx_patch.is_installed()
    assert mctx_patch.installed_loop() == "auto"
    with pytest.raises(ValueError, match="loop must be one of"):
        mctx_patch.install(loop="fast")
    assert mctx_patch.installed_loop() == "auto"  # a refused name changes nothing
    assert mctx_patch.resolve_loop("auto") == ("dynamic" if jax.default_backend() == "cpu" else "static")


def test_an_mctx_with_other_internals_is_refused(monkeypatch):
    monkeypatch.setattr(mctx, "__version__", "0.0.99")
    with pytest.raises(mctx_patch.MctxPatchError, match="mctx 0.0.99 is installed"):
        mctx_patch.check_mctx()
    monkeypatch.undo()
    with mctx_patch.stock_mctx():
        monkeypatch.delattr(mctx_search, "backward")
        with pytest.raises(mctx_patch.MctxPatchError, match="backward is missing"):
            mctx_patch.install()
        monkeypatch.undo()
        assert not mctx_patch.is_installed()  # a refused install changes nothing
    assert mctx_patch.is_installed()
