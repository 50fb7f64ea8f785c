"""The rest of a paused epoch shared out to more replicas (adass.engine.joins)."""

import doctest

import torch

import adass.engine.joins
from adass.data.sharding import shard_indices
from adass.engine import EpochRest, split_rest


def test_the_module_example_holds():
    assert doctest.testmod(adass.engine.joins).failed == 0


def _rests(shards, steps, at, batch, generator):
    """Each old replica kept a random part of its shard, in a random order, and visited its first
    ``at`` batches of it."""
    rests = []
    for shard in shards:
        order = shard[torch.randperm(int(shard.numel()), generator=generator)]
        kept = order[: int(shard.numel()) * 2 // 3]
        cut = at * int(kept.numel()) // steps
        rests.append(EpochRest(shard, kept[:cut], kept[cut:], torch.rand(int(kept.numel()) - cut, generator=generator),
                               torch.rand(int(shard.numel()), generator=generator)))  # fmt: skip
    return rests


def test_every_sample_left_goes_once_to_the_replica_whose_shard_holds_it_with_its_weight():
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (301,), generator=generator)
    old, new = shard_indices(labels, 2, seed=1), shard_indices(labels, 3, seed=1)
    steps, at = 10, 4
    rests = _rests(old, steps, at, 20, generator)
    parts = split_rest(rests, new, steps, at, batch_size=20)
    weight_of = {int(i): float(w) for r in rests for i, w in zip(r.remaining, r.weights, strict=True)}
    bound_of = {int(i): float(b) for r in rests for i, b in zip(r.ids, r.bounds, strict=True)}
    trained = []
    for part, shard in zip(parts, new, strict=True):
        assert all(b.start == b.stop for b in part.batches[:at])  # the steps done take nothing again
        later = torch.cat([part.indices[b] for b in part.batches[at:]])
        ids = shard[later]  # positions in the new shard: its own samples only
        trained += ids.tolist()
        weights = torch.cat([part.weights[b] for b in part.batches[at:]])
        assert weights.tolist() == [weight_of[int(i)] for i in ids]
        assert part.bounds.tolist() == [bound_of[int(i)] for i in shard]
    assert sorted(trained) == sorted(weight_of)  # every sample left, once
    for step in range(at, steps):  # each step's global batch is the new local batches' sum
        assert parts[0].totals[step] == sum(p.batches[step].stop - p.batches[step].start for p in parts)
    visited = sum(int(r.visited.numel()) for r in rests)
    assert sum(parts[0].kept) == visited + len(weight_of) and all(p.kept == parts[0].kept for p in parts)
