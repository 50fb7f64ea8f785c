"""Small collectives among the replicas (sums and gathers of a few numbers), beside the gradient exchange.

The replicas agree on an epoch's steps, ADASS's one global budget and its pooled drift rate through an
:class:`Agreement`: ``LocalAgreement`` for one process, ``TorchAgreement`` over a torch.distributed
group, and ``InProcAgreement`` for virtual replicas that are threads of one process. Every agreement
counts the bytes it sends to each peer (``take_bytes``); the engine records them as ``agree`` traffic.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from ..sampling.agreement import Agreement

__all__ = ["Agreement", "AgreementBoard", "InProcAgreement", "LocalAgreement", "TorchAgreement"]


class _ByteCount:
    """The per-peer byte count every agreement keeps: ``raw`` is the payload, ``wire`` adds padding
    and size headers."""

    raw_sent = wire_sent = 0

    def _count(self, raw: int, wire: int) -> None:
        self.raw_sent += raw
        self.wire_sent += wire

    def take_bytes(self) -> tuple[int, int]:
        sent = (self.raw_sent, self.wire_sent)
        self.raw_sent = self.wire_sent = 0
        return sent


class LocalAgreement(_ByteCount):
    """The agreement of a world of one: every collective returns this replica's own values (no bytes)."""

    rank, world = 0, 1

    def sum_int(self, value: int) -> int:
        return int(value)

    def gather(self, values: torch.Tensor) -> list[torch.Tensor]:
        return [values.reshape(-1).float()]


class TorchAgreement(_ByteCount):
    """Collectives through torch.distributed over ``group`` (the default group when None).

    ``gather`` sends an int64 size, then the values as float32 padded to the longest part.
    """

    def __init__(self, group: Any = None) -> None:
        self.group = group
        self.rank = torch.distributed.get_rank(group)
        self.world = torch.distributed.get_world_size(group)

    def sum_int(self, value: int) -> int:
        t = torch.tensor([int(value)], dtype=torch.int64)
        torch.distributed.all_reduce(t, group=self.group)
        self._count(8, 8)
        return int(t.item())

    def gather(self, values: torch.Tensor) -> list[torch.Tensor]:
        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(self.world)]
        own = torch.tensor([values.numel()], dtype=torch.int64)
        torch.distributed.all_gather(sizes, own, group=self.group)
        longest = max(int(s) for s in sizes)
        self._count(8 + 4 * values.numel(), 8 + 4 * longest)
        if longest == 0:
            return [torch.zeros(0) for _ in range(self.world)]
        # all_gather needs equal lengths: pad to the longest, cut each part back to its size
        padded = torch.full((longest,), float("nan"), dtype=torch.float32)
        padded[: values.numel()] = values.reshape(-1).float()
        out = [torch.empty(longest, dtype=torch.float32) for _ in range(self.world)]
        torch.distributed.all_gather(out, padded, group=self.group)
        return [o[: int(s)].clone() for o, s in zip(out, sizes, strict=True)]


class AgreementBoard:
    """What ``world`` in-process replicas (threads) share: one slot per rank and a barrier.

    Parameters
    ----------
    world : int
        Number of replicas.
    timeout_s : float
        A replica that waits longer for the others raises (``threading.BrokenBarrierError``).
    """

    def __init__(self, world: int, timeout_s: float = 120.0) -> None:
        if world < 1:
            raise ValueError(f"world={world} is not allowed; expected an integer >= 1")
        self.world = world
        self._slots: list[Any] = [None] * world
        self._barrier = threading.Barrier(world, timeout=timeout_s)

    def agreement(self, rank: int) -> InProcAgreement:
        """The agreement of replica ``rank``."""
        return InProcAgreement(self, rank)

    def abort(self) -> None:
        """Wake every waiting replica with an error (a peer failed)."""
        self._barrier.abort()

    def exchange(self, rank: int, value: Any) -> list[Any]:
        """Post ``value`` for ``rank``; return every rank's value, in rank order."""
        self._slots[rank] = value
        self._barrier.wait()  # everyone has posted
        values = list(self._slots)
        self._barrier.wait()  # everyone has read: the slots may be reused
        return values


class InProcAgreement(_ByteCount):
    """Replica ``rank``'s view of an :class:`AgreementBoard` (built by ``board.agreement(rank)``).

    Bytes are counted as :class:`TorchAgreement` sends them: an int64 per sum, float32 values.
    """

    def __init__(self, board: AgreementBoard, rank: int) -> None:
        self.board, self.rank, self.world = board, rank, board.world

    def sum_int(self, value: int) -> int:
        self._count(8, 8)
        return sum(int(v) for v in self.board.exchange(self.rank, int(value)))

    def gather(self, values: torch.Tensor) -> list[torch.Tensor]:
        # values leave as float32 copies, as TorchAgreement returns them
        parts = [v.clone() for v in self.board.exchange(self.rank, values.reshape(-1).float())]
        self._count(8 + 4 * values.numel(), 8 + 4 * max(p.numel() for p in parts))
        return parts
