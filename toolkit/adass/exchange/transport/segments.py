"""How large a ring's pipeline pieces are on a gloo link: small pieces between hosts, so encoding
one piece overlaps sending the last, and whole chunks on loopback, where every extra message costs
a peer a wake-up and nothing is gained.
"""

from __future__ import annotations

import ipaddress
import socket

__all__ = ["LOOPBACK_SEGMENT_BYTES", "NETWORK_SEGMENT_BYTES", "is_loopback", "segment_bytes_for"]

# Between hosts: 256 KiB is 2 ms at 1 Gbit, long enough to amortise a message's overhead and short
# enough that a 10 MB gradient's four chunks make ten pieces each to pipeline.
NETWORK_SEGMENT_BYTES = 256 << 10
# On loopback: more than any chunk, so chunks travel whole (few large pieces measured fastest with
# more processes than cores).
LOOPBACK_SEGMENT_BYTES = 64 << 20


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address, or a name resolved here) is a loopback address.

    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("10.0.0.2")
    (True, True, False)
    """
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False  # a name that does not resolve here names no local loopback either
    return bool(resolved) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in resolved)


def segment_bytes_for(host: str) -> int:
    """The pipeline piece size for a rank whose own address is ``host``: whole chunks on
    loopback (every peer is then on this machine), :data:`NETWORK_SEGMENT_BYTES` otherwise.

    >>> segment_bytes_for("127.0.0.1") == LOOPBACK_SEGMENT_BYTES
    True
    >>> segment_bytes_for("10.0.0.2") // 1024
    256
    """
    return LOOPBACK_SEGMENT_BYTES if is_loopback(host) else NETWORK_SEGMENT_BYTES
