"""Transports: point-to-point payloads between ranks (``base.py``), in one process (``inproc``) or
between processes over torch.distributed gloo (``gloo``), with the wire formats they own: framing
of payloads, bare buffers for payloads of a known layout, and the layouts a ring's framed transfers
keep from step to step.
"""

from .base import PHASES, RecvHandle, SendHandle, TrafficLog, Transfer, Transport
from .gloo import GlooTransport
from .inproc import MAX_WORLD, InProcHub, InProcTransport

__all__ = [
    "MAX_WORLD",
    "PHASES",
    "GlooTransport",
    "InProcHub",
    "InProcTransport",
    "RecvHandle",
    "SendHandle",
    "TrafficLog",
    "Transfer",
    "Transport",
]
