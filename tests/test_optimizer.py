"""The learners' optimizer and update loop: optax's clipping and AdamW, computed with fewer
kernels (the gradients' norm over one vector, the metrics leaving the loop as one), with
the results and the optimizer state of the plain optax chain."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from beastybar_jax.learning.optimizer import global_norm, make_optimizer, make_schedule, scan_updates
from helpers import tiny_training

PARAMS = {"dense": {"kernel": jnp.ones((5, 3)), "bias": jnp.zeros((3,))}, "scale": jnp.full((4,), 0.5)}


def plain_optimizer(config, total_updates):
    """The chain as optax writes it: clipping by the norm of the tree, AdamW with its mask."""
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adamw(make_schedule(config, total_updates), weight_decay=config.weight_decay,
                    mask=lambda params: jax.tree.map(lambda p: p.ndim > 1, params)))


def test_global_norm_is_the_norm_of_all_leaves_together():
    tree = jax.tree.map(lambda x, k: jax.random.normal(jax.random.key(k), x.shape), PARAMS, {"dense": {
        "kernel": 1, "bias": 2}, "scale": 3})
    expected = np.sqrt(sum(np.sum(np.square(np.asarray(leaf))) for leaf in jax.tree.leaves(tree)))
    np.testing.assert_allclose(global_norm(tree), expected, rtol=1e-6)


def test_the_optimizer_updates_as_the_plain_optax_chain_and_keeps_its_state():
    config = tiny_training.tiny_config("unused")
    ours, plain = make_optimizer(config, 100), plain_optimizer(config, 100)
    state, plain_state = ours.init(PARAMS), plain.init(PARAMS)
    # The same state, leaf for leaf: checkpoints written with either restore into the other.
    assert jax.tree.structure(state) == jax.tree.structure(plain_state)
    params = plain_params = PARAMS
    for step in range(8):  # past the warmup, so the schedule's rate is not 0
        # Norms far below the clip and far above it in turn (Adam is blind to a constant scale).
        scale = 0.01 if step % 2 else 100.0
        grads = jax.tree.map(lambda p, i=step: scale * jax.random.normal(jax.random.key(i), p.shape), PARAMS)
        updates, state = ours.update(grads, state, params)
        plain_updates, plain_state = plain.update(grads, plain_state, plain_params)
        params, plain_params = optax.apply_updates(params, updates), optax.apply_updates(plain_params, plain_updates)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), params, plain_params)
    assert not np.allclose(params["dense"]["kernel"], PARAMS["dense"]["kernel"])  # it did move them


def test_scan_updates_returns_the_scans_carry_and_each_metrics_mean():
    def update(total, x):
        return total + x, {"x": x, "square": x * x}

    xs = jnp.arange(1.0, 6.0)
    total, means = scan_updates(update, jnp.zeros(()), xs)
    assert float(total) == 15.0
    assert list(means) == ["x", "square"]
    np.testing.assert_allclose([means["x"], means["square"]], [3.0, 11.0])
