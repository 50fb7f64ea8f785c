"""The rest of an epoch for more replicas: a worker that joins mid-epoch trains from the next commit.

At a commit point every replica pauses (all of them at the same step: they agree on it) and says
what its plan still holds (:class:`EpochRest`): the samples it visited, those it had yet to visit
in its order and with their weights, and every sample's bound as the epoch's selection saw it. The
samples travel by their index in the training set. Each sample of the rest goes to the new replica
whose shard holds it, which also gets that sample's selection state (see :mod:`adass.engine.reshard`),
so every observation lands where the sample lives. The epoch keeps its steps: each new replica
spreads its part of the rest over the steps left, and each step's global batch is the sum of the
new local batches (the same samples as before, cut into the same number of steps).

>>> import torch
>>> rests = [EpochRest(torch.tensor([0, 2, 4]), torch.tensor([0]), torch.tensor([2, 4]), torch.ones(2),
...                    torch.zeros(3)),
...          EpochRest(torch.tensor([1, 3, 5]), torch.tensor([1]), torch.tensor([5, 3]), torch.ones(2),
...                    torch.zeros(3))]
>>> parts = split_rest(rests, [torch.tensor([0, 3]), torch.tensor([1, 4]), torch.tensor([2, 5])], steps=3, at=1)
>>> [p.indices.tolist() for p in parts], [p.batches[1:] for p in parts]
([[0, 1], [0, 1], [0, 1]], [[slice(1, 1, None), slice(1, 2, None)], [slice(1, 1, None), slice(1, 2, None)], [slice(0, 1, None), slice(1, 2, None)]])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from .batches import Split, spread_evenly
from .commits import Commit, EpochResume
from .reshard import reshard_states

__all__ = ["EpochRest", "RestPart", "rest_commits", "split_rest"]


@dataclass
class EpochRest:
    """What one replica's plan of an epoch holds after ``at`` steps, by training-set index.

    Attributes
    ----------
    ids : Tensor
        ``(n,)`` the replica's shard.
    visited : Tensor
        Samples its steps so far took.
    remaining : Tensor
        Samples its later steps would have taken, in its visiting order.
    weights : Tensor
        ``remaining``'s loss weights.
    bounds : Tensor
        ``(n,)`` every sample's bound as the epoch's selection saw it (for the epoch's records).
    """

    ids: torch.Tensor
    visited: torch.Tensor
    remaining: torch.Tensor
    weights: torch.Tensor
    bounds: torch.Tensor


@dataclass
class RestPart:
    """One new replica's part of an epoch's rest, in positions of its own shard.

    Attributes
    ----------
    indices : Tensor
        The epoch's selection for this replica: the samples its shard's holders visited, then
        those of the rest, in visiting order.
    weights : Tensor
        Their loss weights (those of the visited samples are not used again).
    batches : list of slice
        Every step's local batch in ``indices``; the steps already done take none.
    totals : list of float
        Every step's global batch, over all new replicas.
    kept : list of int
        Every new replica's kept samples (visited and to visit), in rank order.
    bounds : Tensor
        ``(n,)`` its samples' bounds as the epoch's selection saw them.
    """

    indices: torch.Tensor
    weights: torch.Tensor
    batches: list[slice]
    totals: list[float]
    kept: list[int]
    bounds: torch.Tensor


def split_rest(
    rests: Sequence[EpochRest], shards: Sequence[torch.Tensor], steps: int, at: int, batch_size: int = 1,
    split: Split = spread_evenly,
) -> list[RestPart]:  # fmt: skip
    """The rest of an epoch of ``steps`` steps, paused after ``at`` of them on the replicas whose
    ``rests`` are given, shared out to replicas of the training-set shards ``shards``.

    A sample of the rest goes to the shard that holds it, in the order of the old replicas (rank
    by rank, each in its own visiting order); each new replica spreads its part over the
    ``steps - at`` steps left as ``split`` says.
    """
    n_train = 1 + max(int(t.max()) for t in [*shards, *(r.ids for r in rests)] if t.numel())
    owner = torch.full((n_train,), -1, dtype=torch.int64)
    position = torch.full((n_train,), -1, dtype=torch.int64)
    bounds = torch.zeros(n_train, dtype=torch.float64)
    for rank, shard in enumerate(shards):
        owner[shard], position[shard] = rank, torch.arange(int(shard.numel()))
    for rest in rests:
        bounds[rest.ids] = rest.bounds.double()
    visited = torch.cat([r.visited for r in rests])
    remaining = torch.cat([r.remaining for r in rests])
    weights = torch.cat([r.weights for r in rests])
    left = steps - at
    mine = []
    for rank in range(len(shards)):
        seen, rest = owner[visited] == rank, owner[remaining] == rank
        mine.append((position[visited[seen]], position[remaining[rest]], weights[rest]))
    cuts = [split(int(r.numel()), left, batch_size) for _, r, _ in mine]
    totals = [0.0] * at + [float(sum(c[i].stop - c[i].start for c in cuts)) for i in range(left)]
    kept = [int(v.numel() + r.numel()) for v, r, _ in mine]
    parts = []
    for (seen, rest, w), cut, shard in zip(mine, cuts, shards, strict=True):
        done = int(seen.numel())
        batches = [slice(done, done)] * at + [slice(done + c.start, done + c.stop) for c in cut]
        parts.append(RestPart(torch.cat([seen, rest]), torch.cat([torch.ones(done), w.float()]), batches, totals,
                              kept, bounds[shard].clone()))  # fmt: skip
    return parts


def rest_commits(
    commits: Sequence[Commit], rests: Sequence[EpochRest], shards: Sequence[torch.Tensor], layout: Mapping[str, str],
    n_train: int, steps: int, batch_size: int,
) -> list[tuple[Commit, RestPart]]:  # fmt: skip
    """Every new replica's commit and part of the rest, from the old replicas' ``commits`` at the
    point they paused (the same one) and their ``rests``.

    The states are resharded as a checkpoint's are (:mod:`adass.engine.reshard`: every sample's
    selection state, its observations of the epoch so far included, goes where the sample now
    lives; the model, optimizer and step are replica 0's; the exchange's memory starts empty). A
    replica of an old rank keeps its counters and its report of the epoch so far; a new one reports
    from the commit on.
    """
    first = commits[0]
    states = reshard_states([c.state for c in commits], [r.ids for r in rests], shards, layout, n_train)
    parts = split_rest(rests, shards, steps, first.at, batch_size)
    out = []
    for rank, (state, part) in enumerate(zip(states, parts, strict=True)):
        if rank < len(commits):
            state["counters"], resume = dict(commits[rank].state["counters"]), commits[rank].resume
        else:
            started = first.resume.base
            resume = EpochResume(first.at, {}, {"step": started["step"], "elapsed_s": started["elapsed_s"]})
        out.append((Commit(first.epoch, state, resume), part))
    return out
