"""Gradient exchanges (Parameter Server, Ring All-Reduce) over transports (in-process, gloo),
with a link model for simulated time; ``simulate`` runs one step of P virtual workers.

Subsystems: the exchange algorithms (``base.py``, ``ps.py``, ``ring/``, with ``chunking.py`` and
``counts.py``; ``serving.py``, the server side of a parameter server; ``topology.py``, what a family declares of its ranks), ``transport/`` (moving payloads, and their wire formats), ``link/`` (the time
model) and ``simulate.py``.
"""

from . import ps, ps_async, ps_colocated, ring  # noqa: F401  (each module registers its exchange, mode or variant)
from .base import EXCHANGES, Exchange, check, make_exchange
from .chunking import ChunkLayout, Piece, chunk_bounds
from .link import Link, LinkClock, parse_link
from .ps import ParameterServer
from .ps_async import AsyncParameterServer
from .ps_colocated import ColocatedParameterServer
from .report import StepReport
from .ring import RingExchange
from .serving import Server, ShardUpdate, as_server, server_of
from .simulate import SimulationResult, simulate
from .topology import TOPOLOGIES, ServerTopology, Topology, topology_of
from .transport import GlooTransport, InProcHub, InProcTransport, Transport

__all__ = [
    "EXCHANGES",
    "AsyncParameterServer",
    "ChunkLayout",
    "ColocatedParameterServer",
    "Exchange",
    "GlooTransport",
    "InProcHub",
    "InProcTransport",
    "Link",
    "LinkClock",
    "ParameterServer",
    "Piece",
    "RingExchange",
    "Server",
    "ServerTopology",
    "ShardUpdate",
    "SimulationResult",
    "StepReport",
    "TOPOLOGIES",
    "Topology",
    "Transport",
    "as_server",
    "check",
    "chunk_bounds",
    "make_exchange",
    "parse_link",
    "server_of",
    "simulate",
    "topology_of",
]
