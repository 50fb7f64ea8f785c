"""What spawned gloo processes run to hold the ring's PowerSGD against torch's own ``powerSGD_hook``
on the same gradients (the functions must live in an importable module)."""

from __future__ import annotations

import gc
from collections.abc import Sequence

import torch
from exchange_cases import grads
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as torch_powersgd

from adass.codecs import ChunkKey, make_codec
from adass.exchange import GlooTransport, make_exchange


class Bucket:
    """The part of DDP's ``GradBucket`` the hook reads: one flat buffer, its per-parameter views, and
    the bucket's place (the only bucket, so also the last)."""

    def __init__(self, flat: torch.Tensor, shapes: Sequence[tuple[int, ...]]) -> None:
        self.flat, self.views, at = flat, [], 0
        for shape in shapes:
            n = torch.Size(shape).numel()
            self.views.append(flat[at : at + n].view(shape))
            at += n

    def buffer(self) -> torch.Tensor:
        return self.flat

    def gradients(self) -> list[torch.Tensor]:
        return self.views

    def index(self) -> int:
        return 0

    def is_last(self) -> bool:
        return True


def ring_against_torch_hook(
    rank: int, world: int, shapes: list, rank_r: int, warmup: int, steps: int
) -> list:
    """Per step: the ring's PowerSGD result and torch's hook result on this rank's ``grads`` of the
    step, with torch's first ``Q`` set to the one the codec starts from (so both start alike): after a
    warm-up, the codec's power steps on the last warm-up step's mean gradient; without one, its draw."""
    n = sum(torch.Size(s).numel() for s in shapes)
    spec = f"powersgd:rank={rank_r},warmup={warmup}"
    ring = make_exchange("ring", GlooTransport(), spec, memory="ef", seed=5)
    ring.set_layers(shapes)
    state = torch_powersgd.PowerSGDState(
        process_group=None,
        matrix_approximation_rank=rank_r,
        start_powerSGD_iter=warmup,
        min_compression_rate=2,
    )
    codec = ring.codec.low_rank()
    out = []
    for s in range(steps):
        if s == warmup:  # the Q the ring's codec starts its first compressed step from
            if codec.qs:
                qs = codec.qs
            else:
                first = make_codec(spec)
                first.set_layers(shapes)
                first.steps = warmup + 1
                qs = first._start_qs(first.plan, ChunkKey(5, 0, 0), torch.device("cpu"))
            state.q_memory_dict[0] = torch.cat([q.reshape(-1) for q in qs])
            state.p_memory_dict[0] = torch.empty(codec.plan.p_numel)
        x = grads(world, n, seed=100 + s)[rank]
        ours = ring.reduce(x.clone())
        theirs = torch_powersgd.powerSGD_hook(state, Bucket(x.clone(), shapes)).wait()
        out.append((ours, theirs.clone()))
    del state  # its futures' callbacks are released here, in the main thread, not in gloo's
    gc.collect()
    return out
