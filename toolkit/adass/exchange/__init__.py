"""Gradient exchanges (Parameter Server, Ring All-Reduce) over transports (in-process, gloo),
with a link model for simulated time; ``simulate`` runs one step of P virtual workers.
"""

from . import ps, ring  # noqa: F401  (each module registers its exchange)
from .base import EXCHANGES, Exchange, check, make_exchange
from .chunking import ChunkLayout, Piece, chunk_bounds
from .clock import CodecClock
from .gloo import GlooTransport
from .inproc import InProcHub, InProcTransport
from .launch import free_port, run_processes
from .link import Link, LinkClock, parse_link
from .ps import ParameterServer
from .ring import RingExchange
from .simulate import SimulationResult, simulate
from .timing import stage_seconds, traffic_frame
from .transport import PHASES, RecvHandle, SendHandle, TrafficLog, Transfer, Transport

__all__ = [
    "EXCHANGES",
    "PHASES",
    "ChunkLayout",
    "CodecClock",
    "Exchange",
    "GlooTransport",
    "InProcHub",
    "InProcTransport",
    "Link",
    "LinkClock",
    "ParameterServer",
    "Piece",
    "RecvHandle",
    "RingExchange",
    "SendHandle",
    "SimulationResult",
    "TrafficLog",
    "Transfer",
    "Transport",
    "check",
    "chunk_bounds",
    "free_port",
    "make_exchange",
    "parse_link",
    "run_processes",
    "simulate",
    "stage_seconds",
    "traffic_frame",
]
