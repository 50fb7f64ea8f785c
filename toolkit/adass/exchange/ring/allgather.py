"""The all-gather schedule, sibling of the pipelined reduce-scatter (``schedule.py``) for codecs whose
payloads cannot add: every rank's payload of every piece goes round the ring unchanged, and each rank
sums what it gathered (:class:`~adass.exchange.ring.gather_sum.GatherSum`).
"""

from __future__ import annotations

import torch

from ...codecs.base import Payload
from ..chunking import ChunkLayout, Piece
from ..transport import SendHandle
from .gather_sum import GatherSum
from .hops import ALL_GATHER, Hops

__all__ = ["gather_pieces"]


def gather_pieces(hops: Hops, layout: ChunkLayout, reducer: GatherSum, out: torch.Tensor) -> None:
    """All-gather every rank's payloads of ``layout``'s pieces around the ring, then sum them into
    ``out`` with ``reducer``'s arithmetic. At hop ``s`` rank ``r`` forwards rank ``r-s``'s payloads."""
    t, clock, world, r = hops.transport, hops.clock, hops.world, hops.rank
    pieces = layout.all_pieces()
    with clock.encoding:
        mine = [reducer.first(p) for p in pieces]
    if world > 1:
        pending = [(s, (r - s - 1) % world, p, t.irecv(hops.left, repeat=hops.repeat(ALL_GATHER, s, p.pid)))
                   for s in range(world - 1) for p in pieces]  # fmt: skip
        sends = [_forward(hops, payload, 0, p) for p, payload in zip(pieces, mine, strict=True)]
        for s, origin, p, handle in pending:
            received = handle.wait()
            if s < world - 2:
                sends.append(_forward(hops, received, s + 1, p))
            reducer.take(origin, p, received)
        for h in sends:
            h.wait()
    with clock.decoding:
        reducer.sum_into(pieces, r, world, out)


def _forward(hops: Hops, payload: Payload, hop: int, piece: Piece) -> SendHandle:
    """Send ``payload`` of ``piece`` on to the right neighbour at ``hop`` of the all-gather."""
    meta = hops.meta(ALL_GATHER, hop, piece.chunk)
    return hops.transport.isend(hops.right, payload, meta, repeat=hops.repeat(ALL_GATHER, hop, piece.pid))
