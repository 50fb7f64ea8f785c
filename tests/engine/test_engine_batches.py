"""How a selection is cut into an epoch's steps: the module's examples, and the split's invariants."""

import doctest

import pytest

from adass.engine import batches
from adass.engine.batches import in_order, spread_evenly


def test_examples_hold():
    assert doctest.testmod(batches).failed == 0


@pytest.mark.parametrize("split", [in_order, spread_evenly])
@pytest.mark.parametrize(("n", "batch_size"), [(0, 4), (1, 4), (10, 3), (32, 32), (33, 32)])
def test_every_sample_lands_in_exactly_one_step(split, n, batch_size):
    steps = -(-n // batch_size)
    parts = split(n, steps, batch_size)
    assert len(parts) == steps
    assert [i for part in parts for i in range(n)[part]] == list(range(n))


def test_a_replica_with_fewer_samples_than_steps_spreads_them_out():
    assert [s.stop - s.start for s in spread_evenly(2, 5, 1)] == [0, 0, 1, 0, 1]
