"""The fallback for codecs whose payloads cannot add (top-k: ranks keep different coordinates):
all-gather every rank's payload of every piece around the ring, then each rank decodes and sums
them in rank order, so every rank ends with the same bits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ...codecs.base import Payload
from ..chunking import ChunkLayout
from ..counts import split_count, with_count
from .reducer import Reducer

if TYPE_CHECKING:
    from .schedule import RingExchange

__all__ = ["AllGather"]

_AG = "all_gather"


class AllGather(Reducer):
    """All-gather every rank's payloads (each with its rank's count) and sum them in rank order."""

    def run(self, ring: RingExchange, layout: ChunkLayout, out: torch.Tensor) -> None:
        t, clock = ring.transport, ring.clock
        world, r = t.world, t.rank
        pieces = layout.all_pieces()
        with clock.encoding:
            mine = [self.encode_own(self.share(p), p.pid) for p in pieces]
        got: dict[int, list[Payload]] = {r: mine}
        counts = {r: self.w.count}
        if world > 1:
            right, left = (r + 1) % world, (r - 1) % world
            pending = [(s, (r - s - 1) % world, i, t.irecv(left, repeat=ring.repeat(_AG, s, p.pid)))
                       for s in range(world - 1) for i, p in enumerate(pieces)]  # fmt: skip
            sends = [t.isend(right, with_count(pl, self.w.count) if self.counted else pl,
                             ring.meta(_AG, 0, p.chunk), repeat=ring.repeat(_AG, 0, p.pid))
                     for p, pl in zip(pieces, mine, strict=True)]  # fmt: skip
            for s, origin, i, handle in pending:
                received = handle.wait()
                if s < world - 2:
                    p = pieces[i]
                    sends.append(
                        t.isend(
                            right,
                            received,
                            ring.meta(_AG, s + 1, p.chunk),
                            repeat=ring.repeat(_AG, s + 1, p.pid),
                        )
                    )
                if self.counted:
                    received, counts[origin] = split_count(received)
                got.setdefault(origin, []).append(received)
            for h in sends:
                h.wait()
        total = (
            sum(counts[o] for o in range(world)) if self.counted and pieces else None
        )  # exact: grid counts
        factor = 1.0 if total is None else self.w.factor(total)
        with clock.decoding:
            for i, p in enumerate(pieces):
                acc = self.codec.decode(got[0][i])
                for origin in range(1, world):
                    acc += self.codec.decode(got[origin][i])
                out[p.lo : p.hi] = acc if factor == 1.0 else acc * factor
        self.total = total
