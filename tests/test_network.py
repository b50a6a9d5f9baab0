"""The policy-value network: both torsos in both compute dtypes, output shapes and
ranges, float32 parameters, the optional score head, the attention torso's masking
of empty queue places, and clear errors for bad configs."""

from __future__ import annotations

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jax_core

from beastybar_jax.games import beastybar as game
from beastybar_jax.games.beastybar import BEASTYBAR_TOKENS
from beastybar_jax.network import (
    NetworkConfig,
    NetworkOutput,
    count_params,
    init_params,
    make_network,
    precast,
)
from helpers.tiny_training import FAST_COMPILE

GAME = game.BEASTYBAR
WIDTH, DEPTH = 32, 1
QUEUE_LENGTHS = (0, 1, 2, 3, 4)  # one observation per queue length


TORSOS, DTYPES = ("mlp", "attention"), ("float32", "bfloat16")


def compile_fast(fn, *example_args):
    """``fn`` compiled for the shapes of ``example_args`` with cheap XLA optimisation
    (the tests' batches are tiny, so compile time is what costs)."""
    return jax.jit(fn).lower(*example_args).compile(FAST_COMPILE)


@pytest.fixture(scope="module")
def observations():
    """``float32[5, 149]`` observations of dealt games whose queues hold 0..4 cards."""

    def build(key):
        states = jax.vmap(game.init)(jax.random.split(key, len(QUEUE_LENGTHS)))
        cards = jnp.asarray([[11, 12 + 6, 3, 12 + 1, -1]] * len(QUEUE_LENGTHS), jnp.int8)  # lion, zebra, ...
        filled = jnp.arange(5)[None, :] < jnp.asarray(QUEUE_LENGTHS)[:, None]
        states = states.replace(queue=jnp.where(filled, cards, -1).astype(jnp.int8))
        return jax.vmap(game.observe)(states, states.current_player)

    key = jax.random.key(0)
    return compile_fast(build, key)(key)


def build(config, observations, params=None):
    """``(params, apply)`` for ``config``: fresh parameters (unless given) and a
    compiled ``apply``."""
    network = make_network(config, GAME)
    if params is None:
        key = jax.random.key(1)
        params = compile_fast(lambda k: init_params(network, k, GAME.observation_size), key)(key)
    return params, compile_fast(network.apply, params, observations)


@pytest.fixture(scope="module")
def models(observations):
    """``{(torso, dtype): (params, apply, output)}``; both dtypes of a torso share
    parameters (they differ only in arithmetic)."""
    result = {}
    for torso in TORSOS:
        for dtype in DTYPES:
            config = NetworkConfig(torso=torso, width=WIDTH, depth=DEPTH, num_heads=4, dtype=dtype)
            shared = result[torso, DTYPES[0]][0] if dtype != DTYPES[0] else None
            params, apply = build(config, observations, shared)
            result[torso, dtype] = params, apply, apply(params, observations)
    return result


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("torso", TORSOS)
def test_outputs_have_the_promised_shapes_and_ranges(models, torso, dtype):
    params, _, out = models[torso, dtype]
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(params))
    assert isinstance(out, NetworkOutput)
    batch = len(QUEUE_LENGTHS)
    assert out.policy_logits.shape == (batch, GAME.num_actions)
    assert out.value.shape == (batch,) and out.score_margin.shape == (batch,)
    for field in (out.policy_logits, out.value, out.score_margin):
        assert field.dtype == jnp.float32
        assert np.all(np.isfinite(np.asarray(field)))
    assert np.all(np.abs(np.asarray(out.value)) <= 1.0)
    # Different positions get different predictions (the torso reads its input).
    assert np.ptp(np.asarray(out.policy_logits), axis=0).max() > 0
    print(f"{torso}/{dtype}: {count_params(params):,} parameters")


@pytest.mark.gpu
@pytest.mark.parametrize("torso", TORSOS)
def test_bfloat16_compute_tracks_float32(models, torso):
    (_, _, a), (_, _, b) = models[torso, "float32"], models[torso, "bfloat16"]
    assert not np.array_equal(a.policy_logits, b.policy_logits)  # bfloat16 arithmetic is in use
    np.testing.assert_allclose(b.policy_logits, a.policy_logits, atol=0.05)
    np.testing.assert_allclose(b.value, a.value, atol=0.05)


@pytest.mark.parametrize("torso", TORSOS)
def test_precast_casts_the_weights_the_network_casts_and_changes_no_output(models, observations, torso):
    """A bfloat16 network's torso weights come back in bfloat16 and its outputs stay the
    same bit for bit; LayerNorm's parameters and the heads, used in float32, stay float32
    (the parameters are perturbed, so that a LayerNorm cast to bfloat16 would show); a
    float32 network's parameters come back unchanged; a stack casts leaf by leaf alike."""
    config = NetworkConfig(torso=torso, width=WIDTH, depth=DEPTH, num_heads=4, dtype="bfloat16")
    network = make_network(config, GAME)
    params, apply, _ = models[torso, "bfloat16"]
    keys = iter(jax.random.split(jax.random.key(2), len(jax.tree.leaves(params))))
    params = jax.tree.map(lambda x: x + 0.3 * jax.random.normal(next(keys), x.shape), params)
    cast = precast(network, params, GAME.observation_size)

    dtypes = {jax.tree_util.keystr(path): leaf.dtype for path, leaf in jax.tree_util.tree_leaves_with_path(cast)}
    assert {k for k, d in dtypes.items() if d == jnp.bfloat16} == {
        k for k in dtypes if "Torso" in k and "LayerNorm" not in k}
    assert sum(d == jnp.bfloat16 for d in dtypes.values()) >= 4
    want, got = apply(params, observations), compile_fast(network.apply, cast, observations)(cast, observations)
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    stack = jax.tree.map(lambda x: jnp.stack([x, x]), params)
    stacked = precast(network, stack, GAME.observation_size, stacked=True)
    assert jax.tree.map(lambda x: x.dtype, stacked) == jax.tree.map(lambda x: x.dtype, cast)
    f32 = make_network(config.model_copy(update=dict(dtype="float32")), GAME)
    assert all(a is b for a, b in zip(jax.tree.leaves(precast(f32, params, GAME.observation_size)),
                                      jax.tree.leaves(params)))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_torso_kernel_gives_the_networks_outputs(models, observations, dtype):
    """The MLP torso as one Pallas kernel (interpreted on a CPU, Triton's on a GPU) gives the
    network's outputs to the compute dtype's rounding, on 70 rows (a block of 64 and a
    part block) and perturbed weights (a wrong LayerNorm, bias or ReLU would show), from
    the weights :func:`precast` cast; ``for_inference()`` picks the kernel only where
    traced for a GPU, in bfloat16, for a network that scores afterstates (the learners' XLA
    form is what they differentiate), the interpreter's or none where
    ``for_gpu(kernels=...)`` says so, and none where the config says ``torso_kernel: xla``
    (unless the caller asks for one)."""
    from beastybar_jax.games import tracing

    network = make_network(NetworkConfig(torso="mlp", width=WIDTH, depth=2, dtype=dtype), GAME)
    keys = iter(jax.random.split(jax.random.key(3), 64))
    params = compile_fast(lambda k: init_params(network, k, GAME.observation_size), next(keys))(next(keys))
    params = jax.tree.map(lambda x: x + 0.3 * jax.random.normal(next(keys), x.shape), params)
    rows = jnp.tile(observations, (14, 1)) * jax.random.uniform(next(keys), (70, 1), minval=0.5, maxval=1.5)
    want = compile_fast(network.apply, params, rows)(params, rows)
    on_gpu = jax.default_backend() == "gpu"
    kernel = network.for_inference("pallas" if on_gpu else "interpret")
    cast = precast(kernel, params, GAME.observation_size)
    got = compile_fast(kernel.apply, cast, rows)(cast, rows)
    tolerance = dict(float32=2e-3 if on_gpu else 1e-5, bfloat16=0.02)[dtype]  # XLA's float32 GEMMs may use TF32
    for name in ("policy_logits", "value", "score_margin"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), atol=tolerance * np.abs(getattr(
            want, name)).max(), err_msg=name)
    assert np.ptp(np.asarray(want.value)) > 0.1  # the rows differ

    scorer = make_network(NetworkConfig(**{**network.config.model_dump(), "afterstates": dict(width=8)}), GAME)
    scorer_params = jax.eval_shape(lambda k: init_params(scorer, k, GAME.observation_size), next(keys))

    def uses_kernel(network, for_gpu, kernels="triton"):
        weights = params if network.config.afterstates is None else scorer_params
        with tracing.for_gpu(for_gpu, kernels=kernels):
            jaxpr = jax.make_jaxpr(network.apply)(weights, rows).jaxpr
        torso = list(_torso_kernel_calls(jaxpr))  # the engine has kernels too
        return bool(torso) and ("interpret" if all(eqn.params["interpret"] for eqn in torso) else "pallas")

    assert uses_kernel(scorer.for_inference(), True) == (dtype == "bfloat16" and "pallas")
    assert uses_kernel(scorer.for_inference(), True, "interpret") == (dtype == "bfloat16" and "interpret")
    assert not uses_kernel(scorer.for_inference(), True, "xla")
    assert not uses_kernel(scorer.for_inference(), False) and not uses_kernel(scorer, True)
    assert not uses_kernel(network.for_inference(), True)  # no afterstates: XLA's operations
    xla = make_network(scorer.config.model_copy(update=dict(torso_kernel="xla")), GAME)
    assert not uses_kernel(xla.for_inference(), True)
    assert uses_kernel(xla.for_inference("auto"), True) == (dtype == "bfloat16" and "pallas")
    assert uses_kernel(network.for_inference("pallas"), True) == "pallas"


def _torso_kernel_calls(jaxpr):
    """The ``pallas_call`` equations of the torso kernel in ``jaxpr``, at any depth."""
    for eqn in jaxpr.eqns:
        name = eqn.params.get("name", eqn.params.get("name_and_src_info"))
        if eqn.primitive.name == "pallas_call" and "mlp_torso" in str(name):
            yield eqn
        for sub in jax_core.jaxprs_in_params(eqn.params):
            yield from _torso_kernel_calls(sub)


def _weight_casts_in_loops(jaxpr, weight_shapes, in_loop=False) -> int:
    """``convert_element_type`` ops inside loop bodies (``while``, ``scan``) whose operand
    is a float32 array of one of ``weight_shapes``."""
    count = 0
    for eqn in jaxpr.eqns:
        operand = eqn.invars[0].aval if eqn.invars else None
        count += (in_loop and eqn.primitive.name == "convert_element_type" and operand.dtype == jnp.float32
                  and tuple(operand.shape) in weight_shapes)
        inner = in_loop or eqn.primitive.name in ("while", "scan")
        count += sum(_weight_casts_in_loops(sub, weight_shapes, inner) for sub in jax_core.jaxprs_in_params(eqn.params))
    return count


def test_the_search_and_the_rollout_cast_no_weight_at_every_iteration():
    """The search's simulations and PPO's rollout moves apply a bfloat16 network to the
    weights :func:`precast` cast before their loop (on a GPU each cast would be a kernel
    launch per iteration); the rollout's opponent pool (a stack of parameters) too."""
    from beastybar_jax.agents import make_agent
    from beastybar_jax.config import load_config
    from beastybar_jax.ppo import rollout
    from beastybar_jax.search import SearchConfig, network_evaluator, run_search
    from helpers import REPO_ROOT

    config = load_config(REPO_ROOT / "configs" / "ppo_quick.yaml", [
        "num_games=4", "network.width=24", "network.depth=1", "network.dtype=bfloat16", "ppo.opponents=[self, pool]",
        "ppo.opponent_weights=[1, 1]", "ppo.pool_size=2"])
    network = make_network(config.network, GAME)
    params = jax.eval_shape(lambda k: init_params(network, k, GAME.observation_size), jax.random.key(0))
    pool = jax.tree.map(lambda x: jax.ShapeDtypeStruct((2,) + x.shape, x.dtype), params)
    shapes = {tuple(x.shape) for x in jax.tree.leaves(params) + jax.tree.leaves(pool)}
    states = jax.vmap(GAME.init)(jax.random.split(jax.random.key(0), 4))

    def search(params):
        return run_search(GAME, network_evaluator(GAME, network, params), states, jax.random.key(0),
                          SearchConfig(algorithm="gumbel", num_simulations=4))

    def rollout_moves(params, pool):
        opponents = rollout.make_opponents(config.ppo, 4, GAME, network, make_agent)
        games = rollout.Games(states=states, learner_seat=jnp.zeros(4, jnp.int32), length=jnp.zeros(4, jnp.int32))
        return rollout.play(GAME, network, params, pool, opponents, games, jax.random.key(0), 2)

    for program, args in ((search, (params,)), (rollout_moves, (params, pool))):
        jaxpr = jax.make_jaxpr(program)(*args).jaxpr
        assert _weight_casts_in_loops(jaxpr, shapes) == 0
        assert sum(eqn.primitive.name == "convert_element_type" for eqn in jaxpr.eqns) >= 2  # cast before


@pytest.mark.parametrize("torso, width, depth", [("mlp", 48, 3), ("attention", 256, 4)])
def test_parameter_count(torso, width, depth):
    """Counted without compiling (``eval_shape``), and equal to the architecture's sum."""
    network = make_network(NetworkConfig(torso=torso, width=width, depth=depth), GAME)
    shapes = jax.eval_shape(lambda k: init_params(network, k, GAME.observation_size), jax.random.key(0))
    count = count_params(shapes)
    print(f"{torso} width {width} depth {depth}: {count:,} parameters")
    obs, actions = GAME.observation_size, GAME.num_actions
    dense = lambda n_in, n_out: n_in * n_out + n_out
    layer_norm = 2 * width
    if torso == "mlp":
        expected = (dense(obs, width)
                    + depth * (layer_norm + 2 * dense(width, width))  # one residual block
                    + layer_norm
                    + dense(width, actions) + 2 * dense(width, 1))    # policy, value, score heads
    else:
        start, tokens, features = BEASTYBAR_TOKENS
        attention = 4 * dense(width, width)                           # query, key, value, out
        mlp = dense(width, 2 * width) + dense(2 * width, width)
        expected = (dense(features, width) + dense(obs - tokens * features, width)  # card, table embeddings
                    + (tokens + 1) * width                                          # position embeddings
                    + depth * (2 * layer_norm + attention + mlp)
                    + layer_norm
                    + dense(2 * width, actions) + 2 * dense(2 * width, 1))  # heads read [table, card mean]
    assert count == expected


def test_score_head_is_optional(models, observations):
    params, apply = build(NetworkConfig(torso="mlp", width=WIDTH, depth=DEPTH, aux_score_head=False), observations)
    assert "score_head" not in params["params"]
    np.testing.assert_array_equal(apply(params, observations).score_margin, 0.0)
    with_head, _, out = models["mlp", "float32"]
    assert "score_head" in with_head["params"]
    assert np.all(np.asarray(out.score_margin) != 0)


def test_attention_torso_ignores_empty_queue_places(models, observations):
    """A random change to the learned position embedding of queue place 3 leaves the
    output exactly as it was unless place 3 holds a card (queue length 4)."""
    params, apply, before = models["attention", "float32"]
    params = flax.core.unfreeze(params)
    position = params["params"]["AttentionTorso_0"]["position_embedding"]
    assert position.shape == (BEASTYBAR_TOKENS.num_tokens + 1, WIDTH)  # table token + 4 places
    perturbed = jax.tree.map(lambda x: x, params)
    # Random, not constant: LayerNorm would erase a constant shift of a token.
    noise = jax.random.normal(jax.random.key(3), (WIDTH,))
    perturbed["params"]["AttentionTorso_0"]["position_embedding"] = position.at[1 + 3].add(noise)
    after = apply(perturbed, observations)
    for i, length in enumerate(QUEUE_LENGTHS):
        changed = np.abs(np.asarray(before.policy_logits[i] - after.policy_logits[i])).max()
        if length < 4:
            assert changed == 0 and before.value[i] == after.value[i], length
        else:
            assert changed > 1e-4


def test_attention_torso_rejects_observations_too_short_for_its_layout():
    network = make_network(NetworkConfig(torso="attention", width=WIDTH, depth=DEPTH), GAME)
    with pytest.raises(ValueError, match="token layout"):
        init_params(network, jax.random.key(0), 40)


@pytest.mark.parametrize("field, value, message", [
    ("torso", "resnet", "network.torso"),
    ("dtype", "float16", "network.dtype"),
    ("width", 0, "network.width"),
    ("num_heads", 3, "divisible by network.num_heads"),
])
def test_bad_network_config_names_the_key(field, value, message):
    kwargs = {"torso": "attention", "width": 32, "num_heads": 4, field: value}
    with pytest.raises(ValueError, match=message):
        NetworkConfig(**kwargs)


def test_an_empty_batch_gives_empty_outputs():
    """The champion's network on ``[0, O]`` observations was a ZeroDivisionError."""
    import jax.numpy as jnp

    from beastybar_jax.checkpoint import load_exported
    from beastybar_jax.games.beastybar.env import CHAMPION_DIR

    model = load_exported(CHAMPION_DIR)
    out = jax.jit(model.network.apply)(model.params, jnp.zeros((0, model.game.observation_size)))
    assert (out.policy_logits.shape, out.value.shape, out.score_margin.shape) == ((0, 31), (0,), (0,))
