"""Sharding across workers: a partition, near-equal iid sizes, determinism, and Dirichlet label skew."""

from __future__ import annotations

import pytest
import torch

from adass.data import shard_indices
from adass.registry import SpecError


@pytest.fixture
def labels() -> torch.Tensor:
    return torch.arange(1003) % 10  # 10 classes, n not divisible by the worker counts


def assert_partition(shards: list[torch.Tensor], n: int) -> None:
    assert all(s.dtype == torch.int64 and s.numel() > 0 for s in shards)
    assert torch.equal(torch.sort(torch.cat(shards)).values, torch.arange(n))


def label_skew(labels: torch.Tensor, shards: list[torch.Tensor]) -> float:
    """Mean total-variation distance between each worker's label mix and the global one."""
    overall = torch.bincount(labels).float() / labels.numel()
    mixes = [torch.bincount(labels[s], minlength=overall.numel()).float() / s.numel() for s in shards]
    return sum(0.5 * (m - overall).abs().sum().item() for m in mixes) / len(mixes)


@pytest.mark.parametrize("world", [1, 3, 7, 16])
def test_iid_is_a_near_equal_partition(labels, world):
    shards = shard_indices(labels, world, "iid", seed=0)
    assert len(shards) == world
    assert_partition(shards, labels.numel())
    sizes = [s.numel() for s in shards]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("spec", ["iid", "dirichlet:alpha=0.3"])
def test_same_seed_same_shards(labels, spec):
    a = shard_indices(labels, 5, spec, seed=11)
    b = shard_indices(labels, 5, spec, seed=11)
    c = shard_indices(labels, 5, spec, seed=12)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a, c, strict=True))


@pytest.mark.parametrize("world", [2, 8, 32])
def test_dirichlet_is_a_partition(labels, world):
    assert_partition(shard_indices(labels, world, "dirichlet:alpha=0.5", seed=3), labels.numel())


def test_small_alpha_skews_labels_large_alpha_does_not(labels):
    iid = label_skew(labels, shard_indices(labels, 8, "iid", seed=0))
    skewed = label_skew(labels, shard_indices(labels, 8, "dirichlet:alpha=0.1", seed=0))
    mild = label_skew(labels, shard_indices(labels, 8, "dirichlet:alpha=1000", seed=0))
    assert iid < 0.1 and mild < 0.1
    assert skewed > 0.5


def test_every_worker_gets_a_sample_even_with_tiny_alpha():
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3])
    for world in (5, 10):
        shards = shard_indices(labels, world, "dirichlet:alpha=0.001", seed=4)
        assert_partition(shards, labels.numel())


@pytest.mark.parametrize("world", [0, -1, 11])
def test_world_out_of_range(world):
    with pytest.raises(ValueError, match=rf"world={world}.*\[1, 10\]"):
        shard_indices(torch.zeros(10, dtype=torch.int64), world)


def test_bad_spec():
    with pytest.raises(SpecError, match="alpha"):
        shard_indices(torch.zeros(10, dtype=torch.int64), 2, "dirichlet:alpha=0")
    with pytest.raises(SpecError, match="iid"):
        shard_indices(torch.zeros(10, dtype=torch.int64), 2, "random")
