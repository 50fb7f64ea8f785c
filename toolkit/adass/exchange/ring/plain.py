"""The ring all-reduce with nothing but the idea, to read before the fast one (``schedule.py``):
one chunk per hop, each hop finished before the next, and at every hop decode, add, encode.

Rank ``r`` owns chunk ``r``. Reduce-scatter: at hop ``s`` it sends its partial sum of chunk
``r-s-1`` to ``r+1``, receives chunk ``r-s-2`` from ``r-1``, decodes it, adds its own share and
encodes the sum for the next hop; the last hop brings chunk ``r``, whose sum it encodes once as the
final. All-gather: the finals go round the ring unchanged and every rank decodes them, so all ranks
end with the same bits.
"""

from __future__ import annotations

import torch

from ...codecs.base import Payload
from ..base import Exchange, output_buffer
from ..chunking import ChunkLayout
from .reducer import FINAL_HOP

__all__ = ["PlainRing"]


class PlainRing(Exchange):
    """Ring All-Reduce in blocking hops of decode, add, encode, with equal weights.

    It gives the fast ring's bits where the fast ring does the same arithmetic: fp32, whose
    ``DenseAdd`` adds in place what this decodes and adds; QSGD under ``requantize``, with the
    same codec keys at every hop; random-k with ``scale=false``, whose kept values add alike.
    fp16/bf16 differ in the last bits (the fast ring rounds each share to half precision before
    adding it). Codecs whose decode scales what it scatters (random-k with ``scale=true``) must
    not be decoded and encoded again hop by hop, and top-k would keep other coordinates at every
    hop: the fast ring reduces the first as kept values and all-gathers the second.

    Parameters
    ----------
    transport, codec, seed, run, epoch
        See :class:`~adass.exchange.base.Exchange` (error feedback is not applied here).
    """

    name = "plain_ring"

    def reduce(
        self, flat_grad: torch.Tensor, count: float | None = None, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        if count is not None:
            raise ValueError("the plain ring averages with equal weights; pass no count")
        world, r, codec = self.transport.world, self.rank, self.codec
        x = flat_grad.detach().reshape(-1).to(torch.float32)
        out = output_buffer(out, x)
        piece = {p.chunk: p for p in ChunkLayout(x.numel(), world).all_pieces()}  # empty chunks: none
        weight = 1.0 / world

        c, payload = (r - 1) % world, None  # hop 0: this rank's own share of chunk r-1
        if c in piece:
            payload = codec.encode(x[piece[c].lo : piece[c].hi] * weight, self._key(piece[c].pid, 0))
        for s in range(world - 1):
            received = self._hop("reduce_scatter", s, c, payload, (c - 1) % world in piece)
            c, payload = (c - 1) % world, None  # the chunk that arrived
            if received is not None:
                total = codec.decode(received)
                total.add_(x[piece[c].lo : piece[c].hi], alpha=weight)
                last = s == world - 2  # the owner's final encoding gets draws of its own
                payload = codec.encode(total, self._key(piece[c].pid, FINAL_HOP if last else s + 1))
        for g in range(world):  # c == r: start with this rank's final
            if c in piece:
                out[piece[c].lo : piece[c].hi] = codec.decode(payload)
            if g < world - 1:
                payload = self._hop("all_gather", g, c, payload, (c - 1) % world in piece)
                c = (c - 1) % world
        self._observe(out, piece.values())
        self.step += 1
        return out

    def _hop(self, phase: str, hop: int, chunk: int, payload: Payload | None, expect: bool) -> Payload | None:
        """Send ``payload`` of ``chunk`` to the right (None: the chunk is empty, nothing travels)
        and, if ``expect``, receive the next chunk from the left; both are done on return."""
        t, world = self.transport, self.transport.world
        meta = self._meta(phase, hop, chunk)
        sending = None if payload is None else t.isend((self.rank + 1) % world, payload, meta)
        received = t.recv((self.rank - 1) % world) if expect else None
        if sending is not None:
            sending.wait()
        return received
