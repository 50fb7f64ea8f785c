"""One replica's training state and step: sample -> grads -> exchange -> optimizer, plus its records.

A :class:`ReplicaEngine` knows nothing about Dask: it is given an exchange (over any transport) and
an :class:`Agreement` (small collectives among replicas), so the same code runs in Dask actors and
in plain ``torch.multiprocessing`` tests.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from .codecs.base import stable_seed
from .config import RunConfig
from .data import Dataset, shard_indices
from .exchange import Exchange
from .metrics import StepRecord
from .models import build_model, is_linear
from .sampling import build_sampler, drop_within_budget
from .trainer import Counters, backprop_batch, evaluate, lr_at, make_optimizer, optimizer_step

__all__ = ["Agreement", "EpochReport", "ReplicaEngine", "global_dropper", "global_pooler", "replica_seed"]


class Agreement:
    """Small collectives among the replicas (not the PS servers) through torch.distributed."""

    def __init__(self, group: Any = None) -> None:
        self.group = group

    def sum_int(self, value: int) -> int:
        t = torch.tensor([int(value)], dtype=torch.int64)
        torch.distributed.all_reduce(t, group=self.group)
        return int(t.item())

    def sum_float(self, value: float) -> float:
        t = torch.tensor([float(value)], dtype=torch.float64)
        torch.distributed.all_reduce(t, group=self.group)
        return float(t.item())

    def gather(self, values: torch.Tensor) -> list[torch.Tensor]:
        """Every replica's 1-D float tensor (lengths may differ), in rank order."""
        world = torch.distributed.get_world_size(self.group)
        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
        torch.distributed.all_gather(sizes, torch.tensor([values.numel()], dtype=torch.int64), group=self.group)
        longest = max(int(s) for s in sizes)
        if longest == 0:
            return [torch.zeros(0) for _ in range(world)]
        padded = torch.full((longest,), float("nan"), dtype=torch.float64)
        padded[: values.numel()] = values.double()
        out = [torch.empty(longest, dtype=torch.float64) for _ in range(world)]
        torch.distributed.all_gather(out, padded, group=self.group)
        return [o[: int(s)].float() for o, s in zip(out, sizes, strict=True)]


def global_dropper(agreement: Agreement, rank: int) -> Callable[[torch.Tensor, float, float], torch.Tensor]:
    """A drop rule with one global budget: all bounds are gathered, the same prefix is cut everywhere.

    Exact, and cheap next to gradients: 4 bytes per training sample per epoch.
    """

    def drop(bounds: torch.Tensor, eps: float, min_keep: float) -> torch.Tensor:
        parts = agreement.gather(bounds)
        total = sum(p.numel() for p in parts)
        mask = drop_within_budget(torch.cat(parts), eps, total - math.ceil(min_keep * total))
        start = sum(p.numel() for p in parts[:rank])
        return mask[start : start + bounds.numel()]

    return drop


def global_pooler(agreement: Agreement, world: int) -> Callable[[torch.Tensor, int], torch.Tensor]:
    """Pooled observations: every replica's last ``limit // world`` values, in rank order.

    ADASS estimates its drift rate from observed slopes; a rate per replica would make the bounds
    of different replicas incomparable under the one global budget (a replica with a higher
    estimate keeps more), so every replica takes the same quantile of the same pooled values.
    """

    def pool(values: torch.Tensor, limit: int) -> torch.Tensor:
        share = max(1, limit // world)
        return torch.cat(agreement.gather(values[-share:]))

    return pool


def _plain_row(record: Any) -> dict[str, Any]:
    """A flat record dataclass as a dict (its fields hold plain values, so no deep copy is needed)."""
    return dict(vars(record))


def replica_seed(seed: int, rank: int) -> int:
    """The seed of replica ``rank``'s sampler (visiting order, random draws)."""
    return stable_seed(seed, "replica", rank) % (2**31)


@dataclass
class EpochReport:
    """What one replica did in one epoch; plain data, so it travels back from a Dask actor."""

    rank: int
    epoch: int
    samples: int = 0
    backprops: int = 0
    forwards: int = 0
    loss_sum: float = 0.0
    train_s: float = 0.0
    steps: list[dict] = field(default_factory=list)
    traffic: list[dict] = field(default_factory=list)
    selection: dict[str, list] = field(default_factory=dict)


class ReplicaEngine:
    """Model, optimizer, shard and sampler of replica ``rank`` of ``world``.

    Every replica builds the same initial model from the run seed, so no broadcast is needed; the
    exchange returns bit-identical averaged gradients, so the replicas stay identical.
    """

    def __init__(self, config: RunConfig, rank: int, world: int, dataset: Dataset, run_id: str = "run") -> None:
        o = config.optim
        self.config, self.rank, self.world, self.run_id = config, rank, world, run_id
        self.shard = shard_indices(dataset.y_train, world, config.data.shard, seed=o.seed)[rank]
        self.x, self.y = dataset.x_train[self.shard], dataset.y_train[self.shard]
        self.x_test, self.y_test = dataset.x_test, dataset.y_test
        self.model = build_model(config.model.model, dataset.shape, dataset.classes, seed=o.seed)
        self.sampler = build_sampler(
            config.sampler.sampler, n=int(self.shard.numel()), seed=replica_seed(o.seed, rank), epochs=o.epochs,
            feature_sq_norms=self.x.reshape(self.x.shape[0], -1).pow(2).sum(1), linear=is_linear(self.model),
        )  # fmt: skip
        self.optimizer = make_optimizer(self.model, config)
        # every gradient is a view of one flat buffer: backward fills it in place (backprop_batch
        # zeroes with set_to_none=False, which keeps the views), the exchange averages it in place,
        # and the optimizer reads the views; nothing is concatenated or copied
        params = list(self.model.parameters())
        self.flat_grad = torch.zeros(sum(p.numel() for p in params))
        offset = 0
        for p in params:
            p.grad = self.flat_grad[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
        self.measure_path = getattr(self.sampler, "uses_path", True)  # step lengths, for ADASS bounds
        self.batch_size = o.batch_size  # global: the replicas' local batches of a step add up to it
        self.counters = Counters()
        self.step = 0
        self.exchange: Exchange | None = None
        self.selection = None
        self.detail_every = 10  # full per-chunk traffic for every 10th step; totals for all
        self.live_every_s = 0.5  # live records leave in batches: first and last step, then every 0.5 s

    def attach(self, exchange: Exchange, agreement: Agreement | None) -> None:
        self.exchange = exchange
        if agreement is not None and hasattr(self.sampler, "dropper"):
            self.sampler.dropper = global_dropper(agreement, self.rank)
        if agreement is not None and hasattr(self.sampler, "pooler"):
            self.sampler.pooler = global_pooler(agreement, self.world)
        self.agreement = agreement

    # -- epoch ----------------------------------------------------------------------------
    def select(self, epoch: int) -> int:
        """Choose this epoch's samples; return how many this replica keeps."""
        self.selection = self.sampler.select(epoch)
        return len(self.selection)

    def agree_steps(self, epoch: int, agreement: Agreement) -> int:
        """Choose this epoch's samples, then agree with the other replicas on the epoch's steps: as
        many as one process would take with the global batch over all replicas' kept samples."""
        return math.ceil(agreement.sum_int(self.select(epoch)) / self.batch_size)

    def batch(self, s: int, steps: int) -> slice:
        """Where local batch ``s`` of ``steps`` lies in this replica's selection: the selection is
        split evenly over the steps, so a replica keeping more samples than another takes larger
        local batches instead of running on alone at the epoch's end (where every step would see
        a small, lopsided global batch at the full learning rate)."""
        n = len(self.selection)
        return slice(s * n // steps, (s + 1) * n // steps)

    def run_epoch(
        self, epoch: int, steps: int, live: Callable[[str, list[dict]], None] | None = None
    ) -> EpochReport:
        """Run ``steps`` synchronous steps over this replica's selection, split evenly (a replica with
        fewer samples than steps sends zero-weight gradients for its empty batches).

        ``live(kind, rows)`` receives batches while the epoch runs (after its first step, every
        ``live_every_s`` seconds, after its last step): ``"steps"`` rows (per-step totals, every step)
        and ``"traffic"`` rows (per-chunk detail of every ``detail_every``-th step).
        """
        o = self.config.optim
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(o.lr, o.schedule, epoch, o.epochs)
        self.exchange.epoch = epoch
        report = EpochReport(self.rank, epoch)
        backprops0, forwards0 = self.counters.backprops, self.counters.forwards
        start = sent = time.perf_counter()
        pending: list[dict] = []
        detail: list[dict] = []
        for s in range(steps):
            part = self.batch(s, steps)
            detail_from = len(report.traffic)
            row = self._step(epoch, self.selection.indices[part], self.selection.weights[part], report)
            report.steps.append(row)
            pending.append(row)
            if row["step"] % self.detail_every == 0:
                detail += report.traffic[detail_from:]
            now = time.perf_counter()
            if live is not None and (s in (0, steps - 1) or now - sent >= self.live_every_s):
                # every event wakes the scheduler and the client: a few per second keep the
                # progress live without taking the cores the ring is waiting for
                live("steps", pending)
                live("traffic", detail)
                pending, detail, sent = [], [], now
        report.train_s = time.perf_counter() - start
        report.backprops = self.counters.backprops - backprops0
        report.forwards = self.counters.forwards - forwards0
        report.selection = self._selection_columns(epoch)
        return report

    def _step(self, epoch: int, idx: torch.Tensor, weights: torch.Tensor, report: EpochReport) -> dict:
        t0 = time.perf_counter()
        loss_value, used = backprop_batch(self.model, self.sampler, self.x, self.y, idx, weights, self.counters)
        t1 = time.perf_counter()
        self.exchange.reduce(self.flat_grad, float(used), out=self.flat_grad)  # the average, in place
        t2 = time.perf_counter()
        times = self.exchange.timers()  # codec math of this reduce; the rest of its wall time is comm
        encode_s, decode_s = times["encode_s"], times["decode_s"]
        optimizer_step(self.model, self.optimizer, self.counters, self.measure_path)
        report.samples += used
        report.loss_sum += loss_value * used
        traffic = self.exchange.traffic()
        report.traffic += [_plain_row(r) for r in traffic]
        record = StepRecord(self.run_id, epoch, self.step, self.rank, used, loss_value, t1 - t0,
                            encode_s, max(0.0, t2 - t1 - encode_s - decode_s), decode_s)  # fmt: skip
        row = _plain_row(record)
        row["wire_bytes"] = int(sum(r.wire_bytes for r in traffic))
        row["raw_bytes"] = int(sum(r.raw_bytes for r in traffic))
        self.step += 1
        return row

    def _selection_columns(self, epoch: int) -> dict[str, list]:
        kept = torch.zeros(int(self.shard.numel()), dtype=torch.bool)
        kept[self.selection.indices] = True
        return {
            "epoch": [epoch] * int(self.shard.numel()), "rank": [self.rank] * int(self.shard.numel()),
            "sample_id": self.shard.tolist(), "bound": self.sampler.bounds().double().tolist(), "kept": kept.tolist(),
        }  # fmt: skip

    def evaluate(self) -> tuple[float, float]:
        return evaluate(self.model, self.x_test, self.y_test)

    # -- checkpoints ----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = {
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "sampler": self.sampler.state_dict(), "counters": asdict(self.counters), "step": self.step,
        }  # fmt: skip
        if self.exchange is not None:
            state["exchange"] = self.exchange.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.sampler.load_state_dict(state["sampler"])
        self.counters, self.step = Counters(**state["counters"]), int(state["step"])
        if self.exchange is not None:
            self.exchange.load_state_dict(state.get("exchange", state))  # (older checkpoints: "memory" on top)

