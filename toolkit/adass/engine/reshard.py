"""A checkpoint of P replicas turned into one of P' replicas: a run goes on with fewer (or more) workers.

Model, optimizer, counters and step are alike on every replica (they apply the same averaged
gradient), so every new replica takes replica 0's. A sampler's state is per sample of its shard:
each sampler says, in ``state_layout``, which of its entries are

- ``"sample"``: a tensor with one row per sample of the shard (losses, bounds, kept flags);
- ``"indexed"``: a list of tuples whose first item is a tensor of shard positions and whose other
  tensor items are aligned with it (observations waiting to be folded in);
- ``"pooled"``: a list of tensors every replica pools anyway (slopes all-gathered for one drift
  rate), which the new replica 0 gets whole;
- ``"summed"``: a count over the shard (how often a bound held), summed onto the new replica 0.

Entries it does not name are taken from replica 0. Samples travel by their index in the training
set, so every sample keeps its own history on whichever new replica holds it. The exchange's
error-feedback memory is kept per chunk of a P-rank ring and does not carry over to another P: it
starts empty, which loses at most one step's unsent remainder. A parameter-server shard that a
replica serves (``ps:colocated=true,update=server``) stays with its rank: shard s lives in rank s
whatever P is, and the shards' layout depends on their count alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

__all__ = ["reshard_states"]


def _global(values: Sequence[torch.Tensor], old: Sequence[torch.Tensor], n_train: int) -> torch.Tensor:
    """Per-sample rows of every old replica placed at their training-set positions."""
    first = values[0]
    whole = torch.zeros((n_train, *first.shape[1:]), dtype=first.dtype)
    for rows, where in zip(values, old, strict=True):
        whole[where] = rows
    return whole


def _indexed(lists: Sequence[list], old: Sequence[torch.Tensor], new: torch.Tensor, n_train: int) -> list:
    """Items of every old replica's list, re-addressed to the positions of the shard ``new``."""
    position = torch.full((n_train,), -1, dtype=torch.int64)
    position[new] = torch.arange(int(new.numel()))
    out = []
    for items, where in zip(lists, old, strict=True):
        for item in items:
            local, *rest = item
            local_new = position[where[local]]
            mine = local_new >= 0
            aligned = [
                r[mine] if isinstance(r, torch.Tensor) and r.shape[:1] == local.shape else r for r in rest
            ]
            if bool(mine.any()):
                out.append((local_new[mine], *aligned))
    return out


def _sampler_state(states: Sequence[Mapping[str, Any]], layout: Mapping[str, str], old: Sequence[torch.Tensor],
                   new: torch.Tensor, n_train: int, first: bool) -> dict[str, Any]:  # fmt: skip
    out = dict(states[0])
    for key, kind in layout.items():
        if key not in states[0]:
            continue
        values = [s[key] for s in states]
        if kind == "sample":
            out[key] = _global(values, old, n_train)[new].clone()
        elif kind == "indexed":
            out[key] = _indexed(values, old, new, n_train)
        elif kind == "pooled":
            out[key] = [t for v in values for t in v] if first else []
        elif kind == "summed":
            out[key] = sum(values) if first else type(values[0])(0)
        else:
            raise ValueError(
                f"state_layout: {key!r} has kind {kind!r}; expected sample, indexed, pooled or summed"
            )
    return out


def reshard_states(
    states: Sequence[Mapping[str, Any]],
    old: Sequence[torch.Tensor],
    new: Sequence[torch.Tensor],
    layout: Mapping[str, str],
    n_train: int,
) -> list[dict[str, Any]]:
    """The replica states of shards ``new`` made from those of shards ``old``.

    Parameters
    ----------
    states : list of dict
        ``ReplicaState.state_dict`` of every old replica, in rank order.
    old, new : list of Tensor
        Training-set indices of each old and each new replica's shard.
    layout : dict
        The sampler's ``state_layout`` (see the module docstring).
    n_train : int
        Size of the training set.

    Returns
    -------
    list of dict
        One state per new replica, loadable by ``ReplicaState.load_state_dict``.
    """
    if len(states) != len(old):
        raise ValueError(f"{len(states)} replica states for {len(old)} shards")
    out = []
    for rank, shard in enumerate(new):
        # a replica's throughput estimate belongs to its rank in the old world: measured anew
        state = {k: v for k, v in states[0].items() if k not in ("exchange", "throughput")}
        held = states[rank].get("exchange", {}).get("shard") if rank < len(states) else None
        if held is not None:
            state["exchange"] = {"shard": held}
        state["sampler"] = _sampler_state(
            [s["sampler"] for s in states], layout, old, shard, n_train, rank == 0
        )
        out.append(state)
    return out
