"""Rate shaping with the kernel's token bucket filter (``tc ... tbf``).

``tbf`` shapes rate only. It adds no propagation delay: its queue (``queue_ms``) holds packets that
wait for tokens, which under load adds up to that much queueing delay. A latency model comes from the
toolkit's link model (``--link 1gbit,50us``), not from the lab (``netem`` is missing on many kernels).
"""

from __future__ import annotations

from ..exchange.link import Link
from ..registry import SpecError
from .system import LabError, sh

__all__ = ["burst_bytes", "parse_rate", "shape"]

MIN_BURST_BYTES = 32 * 1024  # a few full-size frames, and whole GSO segments at low rates


def parse_rate(text: str) -> float:
    """Bits per second from ``1gbit``, ``100mbit``, ... (the link model's bandwidth units).

    >>> parse_rate("100mbit")
    100000000.0
    """
    try:
        return Link.parse(f"{text},0s").bandwidth_bps
    except SpecError:
        raise LabError(
            f"--rate: {text!r} is not allowed; expected a bandwidth such as 1gbit or 100mbit"
        ) from None


def burst_bytes(rate_bps: float) -> int:
    """The bucket size: one millisecond at the rate, at least ``MIN_BURST_BYTES``.

    A transfer of B bytes therefore takes at least ``(B - burst) * 8 / rate`` seconds.
    """
    return max(int(rate_bps / 8 / 1000), MIN_BURST_BYTES)


def shape(netns: str, device: str, rate_bps: float, queue_ms: float = 20.0) -> None:
    """Limit ``device``'s egress in ``netns`` to ``rate_bps`` (replacing any root qdisc)."""
    sh([
        "tc", "-n", netns, "qdisc", "replace", "dev", device, "root", "tbf",
        "rate", f"{int(rate_bps)}bit", "burst", str(burst_bytes(rate_bps)), "latency", f"{queue_ms:g}ms",
    ])  # fmt: skip
