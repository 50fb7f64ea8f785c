"""Transports: point-to-point payloads between ranks (``base.py``), in one process (``inproc``) or
between processes over torch.distributed gloo (``gloo``), with the wire formats they own: framing
of payloads, bare buffers for payloads of a known layout, and the layouts a ring's framed transfers
keep from step to step, and the pipeline piece sizes of a gloo link (``segments``).
"""

from .base import PHASES, RecvHandle, SendHandle, TrafficLog, Transfer, Transport, split_phase
from .gloo import GlooTransport
from .inproc import MAX_WORLD, InProcHub, InProcTransport
from .segments import LOOPBACK_SEGMENT_BYTES, NETWORK_SEGMENT_BYTES, is_loopback, segment_bytes_for

__all__ = [
    "LOOPBACK_SEGMENT_BYTES",
    "MAX_WORLD",
    "NETWORK_SEGMENT_BYTES",
    "PHASES",
    "GlooTransport",
    "InProcHub",
    "InProcTransport",
    "RecvHandle",
    "SendHandle",
    "TrafficLog",
    "Transfer",
    "Transport",
    "is_loopback",
    "segment_bytes_for",
    "split_phase",
]
