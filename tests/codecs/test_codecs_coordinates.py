"""Coordinate draws for random-k: k distinct sorted indices, a function of the seed only, uniform
over k-subsets (checked exactly on small cases), the same in runs of neighbours (``block_sample``:
each coordinate still kept with probability k/n), and the cache that spares decodes a second draw."""

from __future__ import annotations

import itertools
import pickle
import threading

import pytest
import torch
from codec_cases import reference_and_fused

from adass.codecs.coordinates import IndexCache, block_sample, distinct_sample

CASES = [(1, 0), (1, 1), (10, 1), (10, 5), (10, 6), (10, 10), (1000, 10), (1000, 499), (1000, 900)]


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("first_draws", [None, 1])  # 1: the first round is short, later ones top up
@pytest.mark.parametrize("n,k", CASES)
def test_k_distinct_sorted_in_range(n: int, k: int, first_draws: int | None) -> None:
    idx = distinct_sample(n, k, seeded(n + k), first_draws=first_draws)
    assert idx.dtype == torch.int64 and idx.shape == (k,)
    assert torch.all(idx[1:] > idx[:-1])  # strictly increasing: distinct and sorted
    if k:
        assert 0 <= int(idx[0]) and int(idx[-1]) < n


@pytest.mark.parametrize("n,k", CASES)
def test_same_seed_same_draw(n: int, k: int) -> None:
    assert torch.equal(distinct_sample(n, k, seeded(3)), distinct_sample(n, k, seeded(3)))


def test_seeds_differ() -> None:
    draws = {tuple(distinct_sample(10_000, 20, seeded(s)).tolist()) for s in range(20)}
    assert len(draws) == 20


@pytest.mark.parametrize("k", [-1, 11])
def test_bad_k_fails(k: int) -> None:
    with pytest.raises(ValueError, match=f"k={k}"):
        distinct_sample(10, k, seeded(0))


@pytest.mark.parametrize(
    "n,k,first_draws",
    [(5, 2, None), (6, 3, None), (5, 4, None), (6, 2, 1), (5, 3, 1)],  # sparse, 2k = n, complement
)
def test_every_k_subset_equally_likely(n: int, k: int, first_draws: int | None) -> None:
    # Count each of the C(n, k) subsets over T seeded draws; Pearson's statistic has
    # df = C(n, k) - 1 degrees of freedom (mean df, sd sqrt(2 df)); allow 7 sd above the mean
    # (p < 1e-4 for df >= 4).
    subsets = list(itertools.combinations(range(n), k))
    trials = 200 * len(subsets)
    counts = dict.fromkeys(subsets, 0)
    for s in range(trials):
        counts[tuple(distinct_sample(n, k, seeded(s), first_draws=first_draws).tolist())] += 1
    expected = trials / len(subsets)
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    df = len(subsets) - 1
    assert chi2 < df + 7 * (2 * df) ** 0.5, counts


def test_inclusion_frequency_is_k_over_n() -> None:
    # Each coordinate is kept in Binomial(T, k/n) of T draws: sd = sqrt(T p (1-p)) ~ 9.5 here.
    n, k, trials = 400, 40, 1000
    hits = torch.zeros(n)
    for s in range(trials):
        hits[distinct_sample(n, k, seeded(s))] += 1
    p = k / n
    sd = (trials * p * (1 - p)) ** 0.5
    assert float((hits - trials * p).abs().max()) < 4.5 * sd
    assert float(hits.sum()) == trials * k


BLOCK_CASES = [(1000, 300, 64), (1000, 1, 64), (1000, 10, 7), (128, 128, 64), (129, 64, 64), (130, 65, 64),
               (10, 3, 4), (10, 9, 4), (5, 2, 1), (1, 0, 8)]  # fmt: skip


@pytest.mark.parametrize("n,k,block", BLOCK_CASES)
def test_block_draws_are_k_distinct_sorted_in_range_and_follow_the_seed(n: int, k: int, block: int) -> None:
    for s in range(40):
        drawn = block_sample(n, k, block, seeded(s))
        assert drawn.dtype == torch.int64 and drawn.numel() == k
        assert bool((drawn[1:] > drawn[:-1]).all()) and (k == 0 or 0 <= int(drawn[0]) <= int(drawn[-1]) < n)
        assert torch.equal(drawn, block_sample(n, k, block, seeded(s)))


@pytest.mark.parametrize("n,k,block", BLOCK_CASES + [(250_000, 75_000, 64)])
def test_block_draws_are_the_same_under_both_kernels(n: int, k: int, block: int) -> None:
    for s in range(5):
        ref, fused = reference_and_fused(
            lambda kernels, s=s: block_sample(n, k, block, seeded(s), kernels=kernels)
        )
        assert torch.equal(ref, fused)


def test_block_draws_come_in_runs_of_neighbours() -> None:
    n, k, block = 10_000, 3_000, 50
    drawn = block_sample(n, k, block, seeded(3))
    breaks = int((drawn[1:] != drawn[:-1] + 1).sum())
    # at most one run per drawn block, one more where the rotation splits a block at the chunk's end
    assert breaks + 1 <= -(-k // block) + 1
    assert not torch.equal(drawn, block_sample(n, k, block, seeded(4)))


def test_block_draws_keep_every_coordinate_with_probability_k_over_n() -> None:
    # as for single draws: Binomial(T, k/n) hits per coordinate, the chunk's ends included
    n, k, block, trials = 203, 40, 8, 3000
    hits = torch.zeros(n)
    for s in range(trials):
        hits[block_sample(n, k, block, seeded(s))] += 1
    p = k / n
    sd = (trials * p * (1 - p)) ** 0.5
    assert float((hits - trials * p).abs().max()) < 4.5 * sd
    assert float(hits.sum()) == trials * k


def test_cache_returns_the_cached_tensor() -> None:
    cache, made = IndexCache(max_indices=100), []

    def make(size: int):
        def draw() -> torch.Tensor:
            made.append(size)
            return torch.arange(size)

        return draw

    first = cache.get("a", make(10))
    assert cache.get("a", make(10)) is first and made == [10]
    cache.get("b", make(60))
    cache.get("a", make(10))  # "a" is now the most recent
    cache.get("c", make(40))  # over budget: evicts "b", the least recent
    assert len(cache) == 2 and cache.get("a", make(10)) is first
    cache.get("b", make(60))
    assert made == [10, 60, 40, 60]
    big = cache.get("big", make(101))  # larger than the budget: returned, not kept
    assert big.numel() == 101 and "big" not in cache._entries
    cache.clear()
    assert len(cache) == 0


def test_cache_pickles_empty_and_is_shared_between_threads() -> None:
    cache = IndexCache(max_indices=1000)
    got: list[torch.Tensor] = []
    threads = [
        threading.Thread(target=lambda: got.append(cache.get("k", lambda: torch.arange(5)))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and all(torch.equal(g, torch.arange(5)) for g in got)
    assert len(cache) == 1
    copy = pickle.loads(pickle.dumps(cache))
    assert len(copy) == 0 and copy.max_indices == 1000
