"""What an exchange family declares about its ranks before any is built: the ranks it needs besides
the workers, the server shards workers run beside their model, and how its step time is modelled.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from ..registry import SpecError
from .link import Link, stage_seconds
from .transport import split_phase

__all__ = ["TOPOLOGIES", "ServerTopology", "Topology", "declares", "topology_of"]

T = TypeVar("T", bound=type)


class Topology:
    """Every rank a worker, and every ``(phase, hop)`` a stage of its own (a ring).

    The methods take the exchange spec's parameters (defaults filled, as ``EXCHANGES.resolve``
    gives them), so a run's shape is known from its configuration alone.
    """

    def extra_ranks(self, **params: Any) -> int:
        """Ranks besides the workers that the exchange needs (parameter-server shards)."""
        return 0

    def colocated_shards(self, **params: Any) -> dict[int, int]:
        """``{replica rank: shard}`` of the server shards that replicas run beside their model."""
        return {}

    def check_workers(self, workers: int, **params: Any) -> None:
        """Raise SpecError (one line) if the exchange cannot run on ``workers`` replicas."""
        return None

    def stage(self, phase: str, hop: int) -> Hashable:
        """The stage of the time model a transfer belongs to (see ``link.stage_seconds``)."""
        return (phase, hop)

    def step_seconds(self, records: Any, link: Link) -> float:
        """Modelled time of one step from its traffic records."""
        return float(sum(stage_seconds(records, link, self.stage).values()))


class ServerTopology(Topology):
    """Workers plus ``servers`` shards: on ranks of their own, or (``colocated``) inside workers
    ``0..servers-1``; a step is a push stage then a pull stage."""

    def extra_ranks(self, servers: int = 1, colocated: bool = False, **params: Any) -> int:
        return 0 if colocated else servers

    def colocated_shards(self, servers: int = 1, colocated: bool = False, **params: Any) -> dict[int, int]:
        return {s: s for s in range(servers)} if colocated else {}

    def check_workers(self, workers: int, servers: int = 1, colocated: bool = False, **params: Any) -> None:
        if colocated and servers > workers:
            raise SpecError(f"exchange 'ps:servers={servers},colocated=true': shard s lives in worker s, so "
                            f"servers must be <= workers ({workers}); give servers=1..{workers} or more workers")  # fmt: skip

    def stage(self, phase: str, hop: int) -> str:
        round_name, own = split_phase(phase)  # each round of a low-rank codec pushes and pulls
        stage = "pull" if own == "pull" else "push"
        return f"{round_name}.{stage}" if round_name else stage


#: exchange name -> its family's declaration; a name without one is a plain all-worker exchange
TOPOLOGIES: dict[str, Topology] = {}


def declares(topology: Topology) -> Callable[[T], T]:
    """Class decorator: ``topology`` is the declaration of the exchange registered as ``cls.name``."""

    def decorate(cls: T) -> T:
        TOPOLOGIES[cls.name] = topology  # type: ignore[attr-defined]
        return cls

    return decorate


def topology_of(name: str) -> Topology:
    """The declaration of exchange ``name`` (a registry entry's name)."""
    return TOPOLOGIES.get(name, _PLAIN)


_PLAIN = Topology()
