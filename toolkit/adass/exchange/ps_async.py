"""Asynchronous and stale-synchronous parameter servers (``ps:mode=async|ssp,staleness=k``): each
server shard applies a worker's push as it comes, at that push's share of the global batch, and
replies with its fresh parameters; under SSP a worker may run at most ``k`` steps ahead of the
slowest (Ho et al., "More Effective Distributed ML via a Stale Synchronous Parallel Parameter
Server", 2013).

Versions: a shard's version counts the updates it has applied. A push carries the version of the
shard's parameters its gradient was computed on; the shard notes how far it has moved on since
(the push's staleness) and returns it with its reply, so every step's record holds it. A push also
carries the worker's step, at which the reply is recorded (the traffic views window by step).

Epochs: the replies to the last push of an epoch wait for every worker's pushes of the epoch, so the
epoch ends on one model everywhere, and sample selection (with distributed ADASS's one global budget
per epoch) goes on as in lock-step. Within an epoch workers run no collective of their own.

Clocks: where the epoch is shared out by throughput (``adass.engine.shares``), workers take different
numbers of steps, and counting pushes would hold a fast worker, whose share has more steps, behind a
slow one for no reason. A worker's clock is therefore its progress through its own share, in steps
of the epoch's plan: ``pushes * steps / own_steps`` (its push count where every worker takes the
epoch's ``steps``). SSP lets a worker go on while its clock is at most ``k`` ahead of the lowest clock:
no worker is more than ``k`` plan steps (``k / steps`` of the epoch) ahead of the slowest.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

import torch

from ..codecs.base import Payload
from ..metrics import TrafficRecord
from .counts import split_count, with_count
from .ps import _EMPTY, ParameterServer, variant
from .report import StepReport
from .transport import SendHandle, Transfer

__all__ = ["AsyncParameterServer"]

_TAG_BYTES = 8  # a version or a staleness: an int64 on the wire


def _tagged(payload: Payload, **tags: int) -> Payload:
    """``payload`` with integer ``tags`` beside its codec header (tensors shared, not copied)."""
    header = {**payload.header, **tags} if "codec" in payload.header else {"codec": payload.header, **tags}
    return Payload(payload.tensors, payload.numel, header, payload.header_bytes + _TAG_BYTES * len(tags))


def _untagged(payload: Payload, *names: str) -> tuple[Payload, list[int]]:
    """The codec's payload and the tags ``names`` of a payload made by :func:`_tagged`."""
    header = dict(payload.header)
    values = [int(header.pop(n)) for n in names]
    inner_bytes = payload.header_bytes - _TAG_BYTES * len(names)
    if "count" in header:  # a push: the count stays, for split_count
        return Payload(payload.tensors, payload.numel, header, inner_bytes), values
    return Payload(payload.tensors, payload.numel, header["codec"], inner_bytes), values


@variant("mode", "async", "ssp")
class AsyncParameterServer(ParameterServer):
    """A parameter server whose shards apply pushes as they come (``mode=async``), or do so while
    holding back any worker more than ``staleness`` steps ahead of the slowest (``mode=ssp``).

    Built by the ``ps`` spec (see :class:`~adass.exchange.ps.ParameterServer` for the parameters);
    needs ``update=server``. Workers call ``reduce(flat_grad, share)`` once per step, ``share``
    being the push's part of the step's planned global batch (0: nothing to apply; a worker alone
    pushes 1.0); servers call :meth:`serve_epoch` once per epoch.

    Notes
    -----
    A shard steps its optimizer once per push, at ``share`` times the epoch's learning rate, so a
    global batch spread over P pushes moves the parameters about as one synchronous step does, and
    a single worker's run equals the synchronous one value for value.
    """

    lockstep = False

    def __init__(self, *args: Any, mode: str = "async", staleness: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, mode=mode, staleness=staleness, **kwargs)
        self.bound = math.inf if mode == "async" else staleness  # steps ahead of the slowest
        self.versions = [0] * self.servers  # a worker's: each shard's version it last pulled
        self.version = 0  # a server's: updates its shard has applied
        self._staleness, self._held_s = 0, 0.0  # a worker's: of its last reply (see report)
        self.epoch_steps: tuple[int, list[int]] = (
            0,
            [],
        )  # a server's: the epoch's steps and every worker's own

    # -- worker ---------------------------------------------------------------------------
    def reduce(
        self, flat_grad: torch.Tensor, count: float | None = None, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Push this worker's gradient at its ``count`` share of the global batch; return the
        parameters the shards replied with (see :meth:`ParameterServer.reduce`)."""
        self._staleness, self._held_s = 0, 0.0
        return super().reduce(flat_grad, count, out)

    def report(self) -> StepReport:
        """Besides the times and the traffic, the last reply's staleness and the seconds it was held."""
        return replace(super().report(), staleness=self._staleness, held_s=self._held_s)

    def _tag_push(self, shard: int, push: Payload, weight: float) -> Payload:
        # the step travels too: the server's reply is recorded at the step it answers
        return _tagged(with_count(push, weight), version=self.versions[shard], step=self.step)

    def _take_pull(self, shard: int, payload: Payload) -> Payload:
        reply, (version, staleness, held_us) = _untagged(payload, "version", "staleness", "held_us")
        self.versions[shard] = version
        self._staleness = max(self._staleness, staleness)
        self._held_s = max(self._held_s, held_us / 1e6)
        return reply

    # -- server ---------------------------------------------------------------------------
    def serve_step(self) -> torch.Tensor:
        raise RuntimeError(f"server rank {self.rank}: mode={self._mode} serves epochs; call serve_epoch()")

    @property
    def _mode(self) -> str:
        return "async" if self.bound == math.inf else "ssp"

    def serve_epoch(self, steps: int, worker_steps: Sequence[int] = ()) -> list[TrafficRecord]:
        """Take every worker's pushes of the epoch as they come: apply each, and reply to each worker
        once the consistency model lets it go on. Returns what this rank received.

        Parameters
        ----------
        steps : int
            The epoch's steps in its plan: every worker's pushes unless ``worker_steps`` says otherwise.
        worker_steps : sequence of int, optional
            Every worker's own steps (rank order), where the epoch is shared out by throughput.
        """
        if not self.is_server:
            raise RuntimeError(f"rank {self.rank} is a worker; call reduce() there")
        if self.shard_update is None:
            raise RuntimeError(f"server rank {self.rank}: mode={self._mode}, but own() gave it no parameters")
        own = list(worker_steps) or [steps] * self.workers
        if len(own) != self.workers or min(own) < 1:
            raise ValueError(f"worker_steps={own}: expected {self.workers} counts >= 1")
        self.clock.begin()
        self.epoch_steps = (steps, own)
        pushes = [0] * self.workers  # pushes of this epoch taken from each worker
        waiting: list[
            tuple[int, int, int, float]
        ] = []  # (worker, its step, staleness, arrival) not replied to
        sends: list[SendHandle] = []
        for _ in range(sum(own)):
            src, payload = self.transport.recv_any(range(self.workers))
            arrived = time.perf_counter()
            pushes[src] += 1
            waiting.append((src, *self._apply(payload), arrived))
            self.step += 1
            waiting = self._release(waiting, pushes, sends)
        for h in sends:
            h.wait()
        self.clock.end()
        return self.report().traffic

    def _apply(self, payload: Payload) -> tuple[int, int]:
        """Step the shard on one push (unless its share is 0); return the worker's step and the
        push's staleness."""
        tagged, (version, step) = _untagged(payload, "version", "step")
        push, share = split_count(tagged)
        staleness = self.version - version
        if share > 0:  # a push without samples (or skipped as non-finite) changes nothing
            with self.clock.decoding:
                grad = self.codec.decode(push) if push.numel else torch.zeros(0, device=self.device)
            self.shard_update(grad, self.epoch, share)
            self.version += 1
        return step, staleness

    def clocks(self, pushes: Sequence[int]) -> list[Fraction]:
        """Every worker's clock after ``pushes`` pushes of the epoch: its progress through its own
        share in plan steps (exact fractions, so that a bound of k is k)."""
        steps, own = self.epoch_steps
        return [Fraction(p * steps, n) for p, n in zip(pushes, own, strict=True)]

    def _may_go_on(self, worker: int, pushes: Sequence[int]) -> bool:
        """Whether ``worker`` may start its next step after ``pushes`` pushes of every worker."""
        own = self.epoch_steps[1]
        if pushes[worker] == own[worker]:  # its last push: the epoch ends on every worker's updates
            return pushes == own
        clocks = self.clocks(pushes)
        return clocks[worker] - min(clocks) <= self.bound

    def _release(
        self, waiting: list[tuple[int, int, int, float]], pushes: list[int], sends: list[SendHandle]
    ) -> list[tuple[int, int, int, float]]:
        """Reply with the shard's current parameters to every waiting worker that may go on; return
        those that must wait on."""
        held, reply = [], None
        shard = self.rank - self.workers
        for worker, step, staleness, arrived in waiting:
            if not self._may_go_on(worker, pushes):
                held.append((worker, step, staleness, arrived))
                continue
            if reply is None:  # encoded once for everyone released together: the same parameters
                params = self.shard_update(None, self.epoch)
                with self.clock.encoding:
                    reply = (
                        self.pull_codec.encode(params, self._pull_key(shard)) if params.numel() else _EMPTY
                    )
            held_us = round(1e6 * (time.perf_counter() - arrived))  # what the worker waits on the bound
            tagged = _tagged(reply, version=self.version, staleness=staleness, held_us=held_us)
            meta = Transfer("pull", 0, shard, step, self.epoch)  # recorded at the step it answers
            sends.append(self.transport.isend(worker, tagged, meta))
        return held

    # -- checkpoints ----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Besides the synchronous server's state, the versions: a server's own, a worker's of
        every shard (so staleness counts on across a resume)."""
        return {**super().state_dict(), "versions": [self.version] if self.is_server else list(self.versions)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if "versions" in state:
            if self.is_server:
                self.version = int(state["versions"][0])
            else:
                self.versions = [int(v) for v in state["versions"]]
