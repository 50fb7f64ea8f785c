"""The server side of an exchange with server shards (a parameter server): what a rank that serves a
shard offers its runtime, and what a shard owns when the servers step the optimizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from ..metrics import TrafficRecord

__all__ = ["Server", "ShardUpdate", "as_server", "server_of"]


class ShardUpdate(Protocol):
    """What a server shard owns under ``update=server``: its slice of the parameters and of the
    optimizer state. Built by the runtime, which knows the model and the optimizer settings."""

    def __call__(self, mean: torch.Tensor | None, epoch: int, share: float = 1.0) -> torch.Tensor:
        """Step on the mean gradient slice (None: a step without samples, nothing changes) at
        ``share`` of the epoch's learning rate, and return the slice's parameters."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class Server(Protocol):
    """An exchange whose ranks may serve a shard: on a rank of its own (driven by
    :meth:`serve_epoch`) or inside a worker (``colocated=true``, served within ``reduce``).

    Attributes
    ----------
    epoch : int
        The epoch the next steps belong to (the runtime sets it before :meth:`serve_epoch`).
    pulls_parameters : bool
        Whether the shards own the parameters and step the optimizer (``update=server``); such a
        shard must be given them with :meth:`own` and its checkpoint holds them.
    """

    epoch: int
    pulls_parameters: bool

    def held_shard(self) -> tuple[int, int] | None:
        """``(shard, shards)``: the shard this rank serves, None where it serves none."""

    def own(self, shard_update: ShardUpdate) -> None:
        """Give this rank's shard the parameters and optimizer state it owns (``update=server``)."""

    def serve_epoch(self, steps: int, worker_steps: Sequence[int] = ()) -> list[TrafficRecord]:
        """An epoch of ``steps`` steps per worker on a rank that only serves; returns what the rank
        received. ``worker_steps``, where given, are every worker's own steps (an asynchronous
        server's epoch shared out by throughput)."""

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of this rank (a shard's parameters and optimizer state)."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` gave."""


def server_of(exchange: object) -> Server | None:
    """``exchange`` as a :class:`Server` where its family serves shards, None otherwise (a ring)."""
    return exchange if isinstance(exchange, Server) else None


def as_server(exchange: object) -> Server:
    """``exchange`` on a rank that only serves, as a :class:`Server` (TypeError where it cannot)."""
    server = server_of(exchange)
    if server is None:
        raise TypeError(f"exchange {getattr(exchange, 'name', exchange)!r} has no server ranks")
    return server
