"""The pipelined ring schedule: reduce-scatter (P-1 hops) then all-gather (P-1 hops) over pieces.

Rank ``r`` owns chunk ``r``: at reduce-scatter hop ``s`` it sends chunk ``r-s-1`` to ``r+1`` and
receives chunk ``r-s-2`` from ``r-1``; at all-gather hop ``s`` it forwards chunk ``r-s``. The owner's
final payload is what every rank decodes, so all ranks end with bit-identical results. What each hop
computes is the reducer's (:class:`~adass.exchange.ring.reducer.PieceReducer`); this schedule moves
the payloads, posts receives early, overlaps the reducer's work with the transfers and times it.
"""

from __future__ import annotations

import torch

from ...codecs.base import Payload
from ..chunking import ChunkLayout, Piece
from ..transport import RecvHandle, SendHandle
from .hops import ALL_GATHER, REDUCE_SCATTER, Hops
from .reducer import PieceReducer

__all__ = ["reduce_pieces"]


def reduce_pieces(hops: Hops, layout: ChunkLayout, reducer: PieceReducer, out: torch.Tensor) -> None:
    """Reduce-scatter then all-gather of ``layout``'s pieces with ``reducer``'s arithmetic; each
    final leaves as soon as the owner has made it."""
    world, r, clock = hops.world, hops.rank, hops.clock
    if world == 1:
        for p in layout.pieces[r]:
            with clock.encoding:
                final = reducer.finish(p, None, out)
            with clock.decoding:
                reducer.place(p, final, out)
        return
    # Receives are posted early, so data lands in place as it comes. Where the left and right
    # neighbours are one rank (P = 2), both directions share one gloo pair (one socket). On
    # loopback a receive posted first there makes the send behind it wait while the peer's
    # data is read, so each stage's sends go out first. Between hosts it is the other way
    # round: sends posted first go out one direction at a time, and 4 MB both ways at 1 Gbit
    # took 69 ms against 41 ms with the receives first (35 ms one way).
    sends_first = world == 2 and not hops.transport.between_hosts
    pending = None if sends_first else _post_reduce_scatter(hops, layout, reducer, out)
    sends = []
    for p in layout.pieces[(r - 1) % world]:
        with clock.encoding:
            first = reducer.first(p)
        sends.append(_send(hops, reducer, first, REDUCE_SCATTER, 0, p))
    if pending is None:
        pending = _post_reduce_scatter(hops, layout, reducer, out)
    with clock.encoding:  # this rank's own work for later hops, while hop 0 is on the link
        for p in layout.all_pieces():
            reducer.warm(p, out)
    gathers: list[tuple[int, Piece, RecvHandle]] = []
    finals: list[tuple[Piece, Payload]] = []
    for s in range(world - 1):
        last = s == world - 2
        if last and not sends_first:
            gathers = _post_all_gather(hops, layout, reducer, out)
        for p, handle in pending[s]:
            received = handle.wait()
            with clock.encoding:
                sent = reducer.finish(p, received, out) if last else reducer.combine(p, received, s + 1)
            sends.append(
                _send(hops, reducer, sent, ALL_GATHER, 0, p)
                if last
                else _send(hops, reducer, sent, REDUCE_SCATTER, s + 1, p)
            )
            if last:
                finals.append((p, sent))
    if sends_first:  # after the finals went out
        gathers = _post_all_gather(hops, layout, reducer, out)
    with clock.decoding:
        for p, final in finals:
            reducer.place(p, final, out)
    for g, p, handle in gathers:
        received = handle.wait()
        if g < world - 2:
            sends.append(_send(hops, reducer, received, ALL_GATHER, g + 1, p))
        with clock.decoding:
            reducer.place(p, received, out)
    for h in sends:
        h.wait()


def _post_reduce_scatter(hops: Hops, layout: ChunkLayout, reducer: PieceReducer,
                         out: torch.Tensor) -> list[list[tuple[Piece, RecvHandle]]]:  # fmt: skip
    """Post every reduce-scatter receive: per hop, the pieces of the chunk arriving then."""
    world, r = hops.world, hops.rank
    return [[(p, _post(hops, reducer, REDUCE_SCATTER, s, p, out)) for p in layout.pieces[(r - s - 2) % world]]
            for s in range(world - 1)]  # fmt: skip


def _post_all_gather(hops: Hops, layout: ChunkLayout, reducer: PieceReducer,
                     out: torch.Tensor) -> list[tuple[int, Piece, RecvHandle]]:  # fmt: skip
    """Post every all-gather receive; only once the last reduce-scatter hop has begun, when
    every chunk they write into (``out`` may be the input) has been read."""
    world, r = hops.world, hops.rank
    return [(g, p, _post(hops, reducer, ALL_GATHER, g, p, out))
            for g in range(world - 1) for p in layout.pieces[(r - g - 1) % world]]  # fmt: skip


def _send(
    hops: Hops, reducer: PieceReducer, payload: Payload, phase: str, hop: int, piece: Piece
) -> SendHandle:
    """Send ``payload`` of ``piece`` at ``hop`` of ``phase`` to the right neighbour."""
    meta = hops.meta(phase, hop, piece.chunk)
    if reducer.agreed:
        return hops.transport.isend_values(hops.right, payload.tensors["values"], payload.numel, meta)
    return hops.transport.isend(hops.right, payload, meta, repeat=hops.repeat(phase, hop, piece.pid))


def _post(
    hops: Hops, reducer: PieceReducer, phase: str, hop: int, piece: Piece, out: torch.Tensor
) -> RecvHandle:
    """Post the receive of ``piece`` at ``hop`` of ``phase``."""
    if reducer.agreed:  # (in process the buffer goes unused: payloads arrive by reference)
        into = reducer.reduce_buffer(piece) if phase == REDUCE_SCATTER else reducer.gather_buffer(piece, out)
        meta = hops.meta(phase, hop, piece.chunk)
        return hops.transport.irecv_values(hops.left, into, reducer.wire_numel(piece), meta)
    return hops.transport.irecv(hops.left, repeat=hops.repeat(phase, hop, piece.pid))
