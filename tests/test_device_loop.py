"""The GPU's search loop (``search/device_loop.py``): its pieces against their plain
versions, and the program it compiles to: no host round trip inside a simulation.

The trees it builds are compared with stock mctx's in tests/test_mctx_patch.py. Here:
the Pallas walk (interpreted on the CPU) walks as the XLA walk does; the state packer
round-trips every dtype; and ``run_search``'s program, lowered for a CUDA GPU from this
CPU (``jax.export``), holds in its simulation loop no ``while`` without a constant bound
and no ``case``/``if`` (each a device-to-host copy and a wait per iteration on a GPU),
with and without the network's afterstates (whose list capacities are chosen once per
search, outside the loop); the dynamic loop's program, which has such loops, fails the
same check.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from jax import export
from mctx._src import action_selection, qtransforms

from beastybar_jax.games import tracing
from beastybar_jax.games.beastybar import BEASTYBAR
from beastybar_jax.network import NetworkConfig, init_params, make_network
from beastybar_jax.search import (SearchConfig, choice_kernel, device_loop, mctx_patch, network_evaluator, programs,
                                  run_search)

TRITON = "__gpu$xla.gpu.triton"


def random_links(batch: int, num_nodes: int, num_actions: int, seed: int):
    """``links [B, N+1, 4]`` of random trees (node i's parent is below i; about 70% of
    the nodes are some parent's cached next node) and each root's first child."""
    rng = np.random.default_rng(seed)
    next_node = np.full((batch, num_nodes), -1, np.int32)
    for b in range(batch):
        for i in range(1, num_nodes):
            if rng.random() < 0.7:
                next_node[b, rng.integers(0, i)] = i
    links = np.zeros((batch, num_nodes, device_loop.NUM_LINKS), np.int32)
    links[..., device_loop.NEXT] = next_node
    links[..., device_loop.SELECTED] = rng.integers(0, num_actions, (batch, num_nodes))
    root_action = rng.integers(0, num_actions, batch).astype(np.int32)
    return jnp.asarray(links), jnp.asarray(next_node[:, 0]), jnp.asarray(root_action)


@pytest.mark.parametrize("batch, max_depth", [(200, 12), (3, 1), (130, 40)])
def test_the_pallas_walk_walks_as_the_xla_walk(batch, max_depth):
    """Every output (path, parent, action, depth), with blocks of 128 games padded and
    walks cut at ``max_depth``."""
    links, first, root_action = random_links(batch, 21, 5, seed=batch)
    want = device_loop.walk(links, first, root_action, max_depth)
    got = device_loop.walk_pallas(links, first, root_action, max_depth, interpret=True)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(np.asarray(w), np.asarray(g))
    depths = np.asarray(want[3])
    assert depths.max() == min(max_depth - 1, depths.max()) and (max_depth == 1 or depths.max() > 1)


def test_a_kernel_under_vmap_is_one_call_over_every_game():
    """``per_game.on_each_device`` (how the kernels run on each device's own games) joins a
    ``jax.vmap``'s axis to the games, also where only some inputs are mapped: a search or a
    network agent vmapped over positions runs the same kernels."""
    links, first, root_action = random_links(6, 21, 5, seed=1)
    stacked = jax.tree.map(lambda x: x.reshape((2, 3) + x.shape[1:]), (links, first, root_action))
    walk = lambda *args: device_loop.walk_pallas(*args, max_depth=8, interpret=True)  # noqa: E731
    want = device_loop.walk(links, first, root_action, 8)
    got = jax.jit(jax.vmap(walk))(*stacked)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(np.asarray(w), np.asarray(g).reshape(w.shape))
    # The links shared along the mapped axis, the walks' starts mapped.
    got = jax.jit(jax.vmap(walk, in_axes=(None, 0, 0)))(links, jnp.stack([first, first]),
                                                       jnp.stack([root_action, root_action]))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(np.asarray(g), np.stack([np.asarray(w)] * 2))


def random_packed_rows(batch: int, num_nodes: int, num_actions: int, seed: int, max_visits: int = 20):
    """``(stats [B, N, 5], children_index [B, N, A], prior_logits [B, N, A], rows [B, 6])``
    of random trees: random visits (below ``max_visits``), values, rewards and discounts; each row with a random
    number of children (a tenth with every child visited, where the completed Q-values
    hold no unvisited child's mixed value: far from the Q-values here); 30% of the priors at float32's minimum (an illegal
    action); a fifth of the rows past the walk's end (``N``)."""
    rng = np.random.default_rng(seed)
    stats = np.zeros((batch, num_nodes, device_loop.NUM_STATS), np.float32)
    stats[..., device_loop.VISITS] = rng.integers(0, max_visits, (batch, num_nodes))
    stats[..., device_loop.RAW_VALUE] = 50 * rng.normal(size=(batch, num_nodes))  # mixed values past the Q-values
    stats[..., device_loop.VALUE] = rng.normal(size=(batch, num_nodes))
    stats[..., device_loop.REWARD] = np.where(rng.random((batch, num_nodes)) < 0.3, rng.normal(size=(batch, num_nodes)), 0)
    stats[..., device_loop.DISCOUNT] = rng.choice([-1.0, 1.0, 0.9, 0.0], (batch, num_nodes))
    index = np.full((batch, num_nodes, num_actions), -1, np.int32)
    for b in range(batch):
        for n in range(num_nodes):
            k = num_actions if rng.random() < 0.1 else rng.integers(0, num_actions + 1)
            index[b, n, rng.choice(num_actions, k, replace=False)] = rng.integers(0, num_nodes, k)
    prior = (2 * rng.normal(size=(batch, num_nodes, num_actions))).astype(np.float32)
    prior[rng.random(prior.shape) < 0.3] = np.finfo(np.float32).min
    rows = np.where(rng.random((batch, 6)) < 0.8, rng.integers(0, num_nodes, (batch, 6)), num_nodes).astype(np.int32)
    return tuple(map(jnp.asarray, (stats, index, prior, rows)))


def mctx_choices(stats, index, prior, rows, rule_fn):
    """mctx's ``rule_fn`` on each row as the XLA operations apply it (``_node_view``)."""
    tree = device_loop.PackedTree(stats=stats, links=None, children_index=index, children_prior_logits=prior,
                                  embeddings=None, root_invalid_actions=None, extra_data=None)
    own, children_index, children_stats, prior_rows = device_loop._views(tree, rows)

    def choose(*row):
        return rule_fn(jax.random.key(0), device_loop._node_view(*row, None, None), 0, 1)

    action = jax.vmap(jax.vmap(choose))(own, children_index, children_stats, prior_rows)
    return action, jnp.take_along_axis(children_index, action[..., None], axis=-1)[..., 0]


@pytest.mark.parametrize("num_actions, qtransform", [
    (6, {}), (31, dict(value_scale=0.3, maxvisit_init=20.0)), (31, dict(rescale_values=False, use_mixed_value=False)),
    (6, dict(rescale_values=False)), (6, dict(epsilon=10.0))])
def test_the_choice_kernel_chooses_as_mctxs_gumbel_rule(num_actions, qtransform):
    """Every row on a path (37 games: blocks of 32 padded) gets mctx's action and child,
    with the qtransform's arguments of the search's rule (each set changes some choice
    here); 6 and 31 children (Triton's 8 and 32 columns, the padding left out of every
    reduction)."""
    rule_fn = functools.partial(action_selection.gumbel_muzero_interior_action_selection,
                                qtransform=functools.partial(qtransforms.qtransform_completed_by_mix_value, **qtransform))
    rule = choice_kernel.rule_of(rule_fn)
    assert rule == choice_kernel.GumbelRule(**qtransform)
    stats, index, prior, rows = random_packed_rows(37, 17, num_actions, seed=num_actions + len(qtransform))
    want = jax.jit(lambda *a: mctx_choices(*a, rule_fn))(stats, index, prior, rows)
    kernel = lambda *a: choice_kernel.choices(*a, rule, device_loop.STAT_COLUMNS, interpret=True)  # noqa: E731
    got = jax.jit(kernel)(stats, index, prior, rows)
    on_path = np.asarray(rows) < stats.shape[1]
    for w, g in zip(want, got):
        np.testing.assert_array_equal(np.asarray(g)[on_path], np.asarray(w)[on_path])
    assert len(set(np.asarray(want[0])[on_path])) > 3  # the rows choose differently
    if qtransform:  # the arguments matter on these rows: mctx's default rule chooses otherwise somewhere
        default_fn = functools.partial(action_selection.gumbel_muzero_interior_action_selection,
                                       qtransform=qtransforms.qtransform_completed_by_mix_value)
        default = jax.jit(lambda *a: mctx_choices(*a, default_fn))(stats, index, prior, rows)
        assert (np.asarray(default[0]) != np.asarray(want[0]))[on_path].any()


def root_and_interior_choices(num_actions: int, num_simulations: int, max_considered: int, batch: int,
                              interpret: bool):
    """``(mctx's choices [B, 1 + 5], the kernel's, rows on a path [B, 1 + 5])`` (each a pair:
    actions, next nodes) on random trees whose first row is the root, chosen by mctx's Gumbel
    root rule, the rest by its interior rule; 70% of the root's actions illegal (fewer
    legal actions than are considered), and none in the first game."""
    root_fn = functools.partial(action_selection.gumbel_muzero_root_action_selection, num_simulations=num_simulations,
                                max_num_considered_actions=max_considered)
    interior_fn = functools.partial(action_selection.gumbel_muzero_interior_action_selection,
                                    qtransform=qtransforms.qtransform_completed_by_mix_value)
    root_rule = choice_kernel.root_rule_of(root_fn)
    assert root_rule == choice_kernel.GumbelRootRule(num_simulations, max_considered, choice_kernel.GumbelRule())
    stats, index, prior, rows = random_packed_rows(batch, 17, num_actions, seed=num_actions, max_visits=3)
    rows = rows.at[:, 0].set(mctx.Tree.ROOT_INDEX)
    rng = np.random.default_rng(num_actions)
    invalid = rng.random((batch, num_actions)) < 0.7
    invalid[0] = True  # no legal action: mctx's argmax of -inf everywhere
    gumbel = jnp.asarray(rng.gumbel(size=(batch, num_actions)), jnp.float32)
    tree = device_loop.PackedTree(stats=stats, links=None, children_index=index, children_prior_logits=prior,
                                  embeddings=None, root_invalid_actions=jnp.asarray(invalid),
                                  extra_data=action_selection.GumbelMuZeroExtraData(root_gumbel=gumbel))
    want_root = jax.jit(lambda tree: device_loop.root_choice(tree, jax.random.key(0), root_fn))(tree)
    want = jax.jit(lambda *a: mctx_choices(*a, interior_fn))(stats, index, prior, rows[:, 1:])
    want = tuple(jnp.concatenate([r[:, None], w], axis=1) for r, w in zip(want_root, want))
    got = jax.jit(lambda *a: choice_kernel.choices(
        *a, choice_kernel.rule_of(interior_fn), device_loop.STAT_COLUMNS, interpret=interpret, root=root_rule,
        root_gumbel=gumbel, root_invalid_actions=tree.root_invalid_actions))(stats, index, prior, rows)
    return want, got, np.asarray(rows) < stats.shape[1]


@pytest.mark.parametrize("num_actions, num_simulations, max_considered", [(6, 64, 4), (31, 8, 16)])
def test_the_choice_kernel_chooses_the_root_by_sequential_halving_as_mctx(num_actions, num_simulations,
                                                                          max_considered):
    """With the root rule, each game's first row is its root, chosen as mctx's Gumbel root
    rule chooses (its visits against Sequential Halving's table, the Gumbel noise, the
    invalid actions; at 8 simulations the visits run past the table's end, whose last
    column both read), and the other rows as before."""
    want, got, on_path = root_and_interior_choices(num_actions, num_simulations, max_considered, 37, interpret=True)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(np.asarray(g)[on_path], np.asarray(w)[on_path])
    assert len(set(np.asarray(want[0])[:, 0])) > 3  # the roots choose differently


@pytest.mark.gpu
def test_the_choice_kernel_compiled_by_triton_chooses_as_mctx():
    """On a GPU, the kernel as Triton compiles it (the search's own), root and interior
    rules, against mctx's rules as XLA compiles them there: the same action on every row
    but those whose two best scores differ in rounding (Triton and XLA may sum in other
    orders): at most 1%."""
    if jax.default_backend() != "gpu":
        pytest.skip("Triton compiles the kernel for a GPU only; the interpreter's is checked above")
    want, got, on_path = root_and_interior_choices(31, 64, 16, 300, interpret=False)
    differ = np.asarray(got[0])[on_path] != np.asarray(want[0])[on_path]
    assert differ.mean() <= 0.01, differ.sum()
    np.testing.assert_array_equal(np.asarray(got[1])[on_path][~differ], np.asarray(want[1])[on_path][~differ])


def test_the_choice_kernel_takes_only_gumbels_rule_with_constant_arguments():
    """PUCT's rule (random tie-breaking noise) and a traced scale stay XLA operations."""
    assert choice_kernel.rule_of(mctx.muzero_action_selection) is None
    assert choice_kernel.rule_of(action_selection.gumbel_muzero_interior_action_selection) is None  # not as gumbel_muzero_policy passes it
    traced = functools.partial(action_selection.gumbel_muzero_interior_action_selection, qtransform=functools.partial(
        qtransforms.qtransform_completed_by_mix_value, value_scale=jnp.float32(0.1)))
    assert choice_kernel.rule_of(traced) is None
    plain = functools.partial(action_selection.gumbel_muzero_interior_action_selection,
                              qtransform=qtransforms.qtransform_completed_by_mix_value)
    assert choice_kernel.rule_of(plain) == choice_kernel.GumbelRule()


def test_state_rows_round_trip_every_dtype():
    states = jax.vmap(BEASTYBAR.init)(jax.random.split(jax.random.key(0), 3))
    states = states.replace(rewards=jnp.asarray([[1.0, -1.0], [0.5, -0.0], [jnp.nan, 2.0]], jnp.float32))
    packer = device_loop.StatePacker.of(states)
    rows = packer.pack(states)
    assert rows.dtype == jnp.uint8 and rows.shape == (3, packer.num_bytes) and packer.num_bytes == 104
    for want, got in zip(jax.tree.leaves(states), jax.tree.leaves(packer.unpack(rows))):
        assert want.dtype == got.dtype
        np.testing.assert_array_equal(np.asarray(want).view(np.uint8), np.asarray(got).view(np.uint8))


# ----------------------------------------------------------------------------- the programs

NUM_SIMULATIONS = 5


def lowered_search(loop: str, afterstates: bool, platform: str = "cuda") -> str:
    """StableHLO of ``run_search`` (8 positions, a tiny bfloat16 network) with ``loop``,
    lowered for ``platform``."""
    replies = dict(afterstates=True, replies=True, afterstate_width=8) if afterstates else {}
    network = make_network(NetworkConfig(width=16, depth=1, dtype="bfloat16", **replies), BEASTYBAR)
    params = init_params(network, jax.random.key(0), BEASTYBAR.observation_size)
    states = jax.vmap(BEASTYBAR.init)(jax.random.split(jax.random.key(1), 8))
    config = SearchConfig(num_simulations=NUM_SIMULATIONS)

    def search(params, states, key):
        return run_search(BEASTYBAR, network_evaluator(BEASTYBAR, network, params), states, key, config)

    with mctx_patch.installed(loop=loop), tracing.for_gpu(platform != "cpu"):  # the program that platform runs
        exported = export.export(jax.jit(search), platforms=[platform],
                                 disabled_checks=[export.DisabledSafetyCheck.custom_call(TRITON)])(
            params, states, jax.random.key(2))
    return exported.mlir_module()


@pytest.mark.parametrize("afterstates", [False, True], ids=["plain", "afterstates"])
def test_the_gpu_program_has_no_host_round_trip_inside_a_simulation(afterstates):
    structure = programs.loop_structure(lowered_search("static-pallas", afterstates), NUM_SIMULATIONS)
    assert structure.host_round_trips == ()
    # The walk and Gumbel's choices (loops on the device), the network's torso where it
    # scores afterstates (network.gpu_torso) and, on one device, the recurring phase of each
    # engine step (the new node's; the afterstates' of its moves and replies).
    engine_steps = (3 if afterstates else 1) if jax.device_count() == 1 else 0
    assert structure.kernels.count(TRITON) == 2 + afterstates + engine_steps


def test_the_dynamic_loop_fails_the_same_check():
    structure = programs.loop_structure(lowered_search("dynamic", afterstates=False), NUM_SIMULATIONS)
    assert len(structure.unbounded_loops) == 2  # the walk down and the backup
    # On one device the engine's only: no walk or choice kernel (nor the torso's: no afterstates).
    assert structure.kernels.count(TRITON) == (jax.device_count() == 1)


def test_loop_ops_counts_the_simulation_body_of_a_compiled_program():
    """``programs.loop_ops`` finds the loop by its trip count and counts its kernels,
    its nested loops apart."""

    def f(x):
        def body(i, x):
            x = jnp.sin(x) @ x
            return jax.lax.while_loop(lambda y: jnp.sum(y) > 1.0, lambda y: y * 0.5, x)
        return jax.lax.fori_loop(0, 7, body, x)

    text = jax.jit(f).lower(jnp.ones((4, 4))).compile().as_text()
    ops = programs.loop_ops(text, 7)
    assert ops.by_opcode.get("while") == 1 and ops.total >= 2
    assert [count for _, count in ops.nested_loops] == [None]  # the inner loop's count is data
    with pytest.raises(ValueError, match="no loop with a known trip count of 8"):
        programs.loop_ops(text, 8)


def test_loop_ops_estimates_the_bytes_a_body_moves_by_scope():
    """An in-place update of one row of a 4 MB array moves the row (read and written),
    not the array; a vector's update reads and writes the vector; each under its scope."""

    def f(big, x):
        def body(i, carry):
            big, x = carry
            with jax.named_scope("update"):
                big = jax.lax.dynamic_update_slice(big, (x * 2.0)[None], (i, 0))
            with jax.named_scope("scale"):
                x = jnp.sin(x) + 1.0
            return big, x
        return jax.lax.fori_loop(0, 7, body, (big, x))

    row = 1024 * 4
    text = jax.jit(f).lower(jnp.zeros((1000, 1024)), jnp.ones(1024)).compile().as_text()
    ops = programs.loop_ops(text, 7, scopes=("update", "scale"))
    assert ops.bytes_by_scope["scale"] == 2 * row
    assert row <= ops.bytes_by_scope["update"] <= 2 * row + 64
    assert ops.bytes == sum(ops.bytes_by_scope.values()) < 10 * row
