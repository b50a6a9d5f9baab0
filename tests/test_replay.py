"""The device replay ring: masked in-order insert, wrap-around, uniform sampling."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from beastybar_jax.alphazero import replay

OBS, ACTIONS = 3, 5


def records_with_ids(ids):
    """Records whose every field encodes an id, so we can see where each one went."""
    ids = jnp.asarray(ids, jnp.float32)
    n = ids.shape[0]
    return replay.Records(
        observation=jnp.broadcast_to(ids[:, None], (n, OBS)),
        legal_mask=jnp.ones((n, ACTIONS), bool),
        policy=jnp.broadcast_to(ids[:, None], (n, ACTIONS)),
        player=(ids % 2).astype(jnp.int8),
        value=ids,
        score_margin=-ids,
        exact=ids > 2,
    )


insert = jax.jit(replay.insert)


def test_insert_keeps_only_valid_records_in_order():
    buffer = replay.init(8, OBS, ACTIONS)
    buffer = insert(buffer, records_with_ids([1, 2, 3, 4, 5]), jnp.array([True, False, True, False, True]))
    assert int(buffer.size) == 3 and int(buffer.write_index) == 3 and int(buffer.total_inserted) == 3
    np.testing.assert_array_equal(buffer.records.value[:4], [1, 3, 5, 0])
    np.testing.assert_array_equal(buffer.records.observation[:3, 0], [1, 3, 5])
    np.testing.assert_array_equal(buffer.records.score_margin[:3], [-1, -3, -5])
    np.testing.assert_array_equal(buffer.records.player[:3], [1, 1, 1])
    np.testing.assert_array_equal(buffer.records.exact[:4], [False, True, True, False])


def test_ring_wraps_and_overwrites_the_oldest():
    buffer = replay.init(4, OBS, ACTIONS)
    buffer = insert(buffer, records_with_ids([1, 2, 3]), jnp.ones(3, bool))
    buffer = insert(buffer, records_with_ids([4, 5, 6]), jnp.ones(3, bool))
    assert int(buffer.size) == 4 and int(buffer.write_index) == 2
    np.testing.assert_array_equal(buffer.records.value, [5, 6, 3, 4])


def test_more_valid_records_than_capacity_keeps_the_last_ones():
    buffer = replay.init(4, OBS, ACTIONS)
    buffer = insert(buffer, records_with_ids(np.arange(1, 11)), jnp.ones(10, bool))
    assert int(buffer.size) == 4
    assert sorted(np.asarray(buffer.records.value).tolist()) == [7, 8, 9, 10]


def test_no_valid_record_changes_nothing():
    buffer = replay.init(4, OBS, ACTIONS)
    buffer = insert(buffer, records_with_ids([1, 2]), jnp.ones(2, bool))
    after = insert(buffer, records_with_ids([7, 8]), jnp.zeros(2, bool))
    jax.tree.map(np.testing.assert_array_equal, buffer, after)


def test_sampling_is_uniform_over_filled_slots_only():
    buffer = replay.init(16, OBS, ACTIONS)
    buffer = insert(buffer, records_with_ids([1, 2, 3, 4]), jnp.ones(4, bool))
    batch = jax.jit(replay.sample, static_argnums=2)(buffer, jax.random.key(0), 4000)
    values = np.asarray(batch.value)
    assert set(values.tolist()) == {1, 2, 3, 4}  # never an empty slot (value 0)
    counts = np.bincount(values.astype(int), minlength=5)[1:]
    assert np.all(np.abs(counts - 1000) < 150), counts
    np.testing.assert_array_equal(np.asarray(batch.observation)[:, 0], values)  # fields stay aligned
