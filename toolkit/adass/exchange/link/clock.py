"""Where one ``reduce`` spends its time: codec math (encode, decode) against everything else (comm).

An exchange wraps its codec work in ``clock.encoding`` / ``clock.decoding`` and the whole call in
``begin`` / ``end``; ``timers()`` then splits the call's wall time into ``encode_s``, ``decode_s``
and ``comm_s`` (posting, waiting on and framing transfers), which add up to the wall time.
"""

from __future__ import annotations

import time

__all__ = ["CodecClock"]


class _Section:
    """A reusable ``with`` block that adds its duration to one field of a clock."""

    __slots__ = ("_clock", "_field", "_start")

    def __init__(self, clock: CodecClock, field: str) -> None:
        self._clock, self._field, self._start = clock, field, 0.0

    def __enter__(self) -> None:
        self._start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        elapsed = time.perf_counter() - self._start
        setattr(self._clock, self._field, getattr(self._clock, self._field) + elapsed)


class CodecClock:
    """Seconds of one exchange call, split by kind of work.

    Attributes
    ----------
    encode_s : float
        Making what is sent: weighting this rank's share, local scales, ``encode``, and each
        hop's ``add`` (or decode-add-re-encode).
    decode_s : float
        Turning final payloads into the averaged gradient (``decode``, final scaling, copies
        into the output).
    wall_s : float
        The whole call, from ``begin`` to ``end``.
    encoding, decoding
        ``with clock.encoding: ...`` adds the block's time to ``encode_s`` (``decode_s``).
    """

    def __init__(self) -> None:
        self.encode_s = self.decode_s = self.wall_s = 0.0
        self._start = 0.0
        self.encoding = _Section(self, "encode_s")
        self.decoding = _Section(self, "decode_s")

    def begin(self) -> None:
        """Start a new call: every field back to zero."""
        self.encode_s = self.decode_s = self.wall_s = 0.0
        self._start = time.perf_counter()

    def end(self) -> None:
        """The call is over: fix its wall time."""
        self.wall_s = time.perf_counter() - self._start

    def timers(self) -> dict[str, float]:
        """``encode_s``, ``decode_s`` and ``comm_s`` (the rest of the wall time) of the last call."""
        comm_s = max(0.0, self.wall_s - self.encode_s - self.decode_s)
        return {"encode_s": self.encode_s, "decode_s": self.decode_s, "comm_s": comm_s}
