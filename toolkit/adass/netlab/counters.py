"""The kernel's byte counters of each lab host's ``eth0``, read inside its namespace.

``ip netns exec NS`` mounts a sysfs of that namespace, so ``/sys/class/net/eth0/statistics`` there
counts the host's own link: every byte of every frame it sent or received (Ethernet, IP and TCP
headers included; no preamble or FCS on a veth), whatever process sent it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .state import LabState
from .system import LabError, sh
from .topology import DEVICE

__all__ = ["LinkBytes", "read_counters", "since"]


@dataclass(frozen=True)
class LinkBytes:
    """Bytes and packets one host's interface sent (``tx``) and received (``rx``)."""

    tx_bytes: int
    rx_bytes: int
    tx_packets: int
    rx_packets: int

    def __sub__(self, other: LinkBytes) -> LinkBytes:
        return LinkBytes(self.tx_bytes - other.tx_bytes, self.rx_bytes - other.rx_bytes,
                         self.tx_packets - other.tx_packets, self.rx_packets - other.rx_packets)  # fmt: skip


_FIELDS = ("tx_bytes", "rx_bytes", "tx_packets", "rx_packets")


def read_counters(state: LabState) -> dict[int, LinkBytes]:
    """Every host's counters now, by host index.

    Raises
    ------
    LabError
        A namespace is gone or its counters cannot be read.
    """
    paths = [f"/sys/class/net/{DEVICE}/statistics/{name}" for name in _FIELDS]
    counts = {}
    for host in state.hosts:
        done = sh(["ip", "netns", "exec", host.netns, "cat", *paths])
        values = [int(v) for v in done.stdout.split()]
        if len(values) != len(_FIELDS):
            raise LabError(f"lab {state.name}: unreadable counters on host {host.index}: {done.stdout!r}")
        counts[host.index] = LinkBytes(*values)
    return counts


def since(before: dict[int, LinkBytes], after: dict[int, LinkBytes]) -> dict[int, LinkBytes]:
    """Per host, what the counters grew by between two readings."""
    return {host: after[host] - before[host] for host in after}
