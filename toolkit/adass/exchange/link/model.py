"""The link model: ``BANDWIDTH,LATENCY`` specs such as ``1gbit,50us``, the simulated time of a transfer,
and a clock that paces a real link so that no transfer finishes before the model allows.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from ...registry import SpecError

__all__ = ["Link", "LinkClock", "parse_link"]

_BANDWIDTH_UNITS = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
_LATENCY_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_QUANTITY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]+)\s*$")
_ALLOWED = (
    "expected BANDWIDTH,LATENCY such as 1gbit,50us "
    f"(bandwidth > 0 in {'|'.join(_BANDWIDTH_UNITS)}, latency >= 0 in {'|'.join(_LATENCY_UNITS)})"
)


@dataclass(frozen=True)
class Link:
    """A point-to-point link: every transfer takes ``latency + bytes * 8 / bandwidth`` seconds.

    Attributes
    ----------
    bandwidth_bps : float
        Bits per second, > 0.
    latency_s : float
        Seconds before the first byte arrives, >= 0.
    """

    bandwidth_bps: float
    latency_s: float

    def __post_init__(self) -> None:
        if not self.bandwidth_bps > 0 or not self.latency_s >= 0:
            raise SpecError(
                f"link: bandwidth {self.bandwidth_bps} b/s, latency {self.latency_s} s; {_ALLOWED}"
            )

    @classmethod
    def parse(cls, text: str | Link) -> Link:
        """Build a Link from ``"1gbit,50us"`` (a Link passes through unchanged).

        Raises
        ------
        SpecError
            One line naming the value and what is allowed.
        """
        if isinstance(text, Link):
            return text
        parts = str(text).strip().lower().split(",")
        if len(parts) != 2:
            raise SpecError(f"link: {text!r} is not allowed; {_ALLOWED}")
        bandwidth = _quantity(text, parts[0], _BANDWIDTH_UNITS)
        latency = _quantity(text, parts[1], _LATENCY_UNITS)
        if bandwidth <= 0:
            raise SpecError(f"link: {text!r} is not allowed; {_ALLOWED}")
        return cls(bandwidth, latency)

    def seconds(self, nbytes: int) -> float:
        """Modelled time of one transfer of ``nbytes`` bytes."""
        return self.latency_s + nbytes * 8 / self.bandwidth_bps

    def __str__(self) -> str:
        return f"{_short(self.bandwidth_bps, _BANDWIDTH_UNITS)},{_short(self.latency_s, _LATENCY_UNITS)}"


def parse_link(text: str | Link | None) -> Link | None:
    """``Link.parse`` that lets ``None`` (no link model) through."""
    return None if text is None else Link.parse(text)


def _quantity(text: str, part: str, units: dict[str, float]) -> float:
    match = _QUANTITY.match(part)
    if match is None or match.group(2) not in units:
        raise SpecError(f"link: {text!r} is not allowed; {_ALLOWED}")
    return float(match.group(1)) * units[match.group(2)]


def _short(value: float, units: dict[str, float]) -> str:
    # the largest unit in which the value is at least 1, e.g. 1e9 -> "1gbit", 5e-5 -> "50us"
    unit, factor = min(units.items(), key=lambda kv: kv[1])
    for name, f in sorted(units.items(), key=lambda kv: kv[1]):
        if value >= f:
            unit, factor = name, f
    number = value / factor
    return f"{number:g}{unit}"


class LinkClock:
    """Paces one endpoint's egress and ingress so transfers take at least the modelled time.

    Each direction is a serial resource: a transfer starts when the link is free and holds it for
    ``link.seconds(nbytes)``. The sender stamps each message with the time its egress would finish
    (``egress``); the receiver delivers it no earlier than that and no earlier than its own ingress
    allows (``ingress``), then sleeps until then. Times are ``time.time()`` seconds, so the stamps of
    processes on one machine agree; across machines the pacing is as good as their clocks.
    """

    def __init__(self, link: Link) -> None:
        self.link = link
        self._egress_free = 0.0
        self._ingress_free = 0.0
        self._lock = threading.Lock()

    def egress(self, nbytes: int, now: float) -> float:
        """Reserve the egress link for a message sent at ``now``; return when it has left."""
        with self._lock:
            done = max(now, self._egress_free) + self.link.seconds(nbytes)
            self._egress_free = done
            return done

    def ingress(self, nbytes: int, not_before: float) -> float:
        """Reserve the ingress link for a message the sender releases at ``not_before``."""
        with self._lock:
            done = max(not_before, self._ingress_free + self.link.seconds(nbytes))
            self._ingress_free = done
            return done
