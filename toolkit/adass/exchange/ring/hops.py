"""What a ring schedule moves payloads over (:class:`Hops`): the transport to the neighbours, the clock
that times the arithmetic, and how each transfer is named in the traffic records.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from ..link import CodecClock
from ..transport import Transfer, Transport

__all__ = ["ALL_GATHER", "REDUCE_SCATTER", "Hops"]

REDUCE_SCATTER, ALL_GATHER = "reduce_scatter", "all_gather"  # the phases of the traffic records


@dataclass(frozen=True)
class Hops:
    """One ring step's links and names, as its exchange gives them to a schedule.

    Attributes
    ----------
    transport : Transport
        Point-to-point payloads between this rank and the others.
    clock : CodecClock
        Times the reducer's arithmetic (``clock.encoding``, ``clock.decoding``) apart from the waits.
    meta : callable
        ``meta(phase, hop, chunk)``: what travels with a transfer, for the records.
    repeat : callable
        ``repeat(phase, hop, piece id)``: the name of a framed transfer that recurs every step with
        one layout, or None.
    """

    transport: Transport
    clock: CodecClock
    meta: Callable[[str, int, int], Transfer]
    repeat: Callable[[str, int, int], Hashable | None]

    @property
    def rank(self) -> int:
        return self.transport.rank

    @property
    def world(self) -> int:
        return self.transport.world

    @property
    def right(self) -> int:
        """The neighbour this rank sends to."""
        return (self.rank + 1) % self.world

    @property
    def left(self) -> int:
        """The neighbour this rank receives from."""
        return (self.rank - 1) % self.world
