"""What one replica holds: model, optimizer, its part of the data, sampler, counters and the flat
parameter and gradient buffers; and how that state goes into and out of a checkpoint.

Model, optimizer state and the flat buffers live on the replica's device (``--device``); its
samples and the sampler's scores stay on the host, and every batch travels to the device.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import torch

from ..codecs.base import stable_seed
from ..config import RunConfig
from ..data import Dataset, FileRows, Shard, shard_indices
from ..devices import run_device
from ..exchange import Exchange
from ..models import build_model, is_linear
from ..sampling import SAMPLERS, build_sampler
from .step import Counters, FlatSGD, StepLength, flatten_into, lr_at, make_optimizer

__all__ = ["ReplicaState", "replica_seed", "sampler_layout"]


def replica_seed(seed: int, rank: int) -> int:
    """The seed of replica ``rank``'s sampler (visiting order, random draws)."""
    return stable_seed(seed, "replica", rank) % (2**31)


def sampler_layout(config: RunConfig) -> Mapping[str, str]:
    """The ``state_layout`` of ``config``'s sampler (see :mod:`adass.engine.reshard`), read from its
    class: nothing is built."""
    return SAMPLERS.resolve(config.sampler.sampler)[0].factory.state_layout


def squared_norms(x: torch.Tensor | FileRows, chunk_bytes: int = 4 << 20) -> torch.Tensor:
    """``(n,)`` squared norms of ``(n, *shape)`` float32 samples, ``chunk_bytes`` of rows at a time: the
    squares of a whole shard at once would be a second copy of it, and rows left in their file are read
    a chunk at a time. Each row's sum is the same either way."""
    n, width = int(x.shape[0]), math.prod(x.shape[1:])
    rows = max(1, chunk_bytes // max(1, width * 4))
    norms = torch.empty(n)  # filled in place: no small tensor per chunk left between the chunks' buffers
    for start in range(0, n, rows):
        torch.sum(x[start : start + rows].reshape(-1, width).pow(2), 1, out=norms[start : start + rows])
    return norms


class ReplicaState:
    """Model, optimizer, samples and sampler of one replica; build it with :meth:`whole`, :meth:`shard`
    or :meth:`held` (from a :class:`~adass.data.Shard` read on the replica's own machine).

    Every replica builds the same initial model from the run seed, so no broadcast is needed.

    Parameters
    ----------
    config : RunConfig
        The run.
    shard : Shard
        This replica's training rows, the test split and, where it is held, the whole training split.
    sampler_seed : int
        Seed of this replica's sampler.

    Attributes
    ----------
    device : torch.device
        Where model, optimizer and gradients live: ``config.cluster.device`` (``auto`` resolved on
        this machine; a Dask run hands its replicas the device it resolved with its workers).
    """

    def __init__(self, config: RunConfig, shard: Shard, sampler_seed: int) -> None:
        o = config.optim
        self.config, self.indices = config, shard.indices
        self.x, self.y = shard.x, shard.y
        self.n_train = shard.n_train
        # the whole training set where it is held (None otherwise): where an epoch's work is shared
        # out by throughput, a replica trains on samples handed over from another's shard (``engine/work.py``)
        self.x_all, self.y_all = shard.x_all, shard.y_all
        self.x_test, self.y_test = shard.x_test, shard.y_test
        self.device = run_device(config.cluster.device)
        # built on the host from the run seed, then moved: the same initial values on every device
        model = build_model(config.model.model, shard.shape, shard.classes, seed=o.seed)
        self.model = model.to(self.device)
        self.sampler = build_sampler(
            config.sampler.sampler, n=shard.n, seed=sampler_seed, epochs=o.epochs,
            feature_sq_norms=squared_norms(self.x), linear=is_linear(self.model),
            last_lr=lr_at(1.0, o.schedule, o.epochs - 1, o.epochs),  # every schedule starts at its base rate
        )  # fmt: skip
        self.optimizer = make_optimizer(self.model, config)
        # every parameter is a view of one flat buffer: a step's length is one copy before it and one
        # subtraction after (StepLength), and pulled parameters are one copy in
        params = list(self.model.parameters())
        self.flat_params = torch.empty(sum(p.numel() for p in params), device=self.device)
        flatten_into(params, self.flat_params)
        # every gradient is a view of one flat buffer too: backward fills it in place (backprop_batch
        # zeroes the buffer, which keeps the views), the exchange averages it in place, and the
        # optimizer reads the views; nothing is concatenated or copied
        self.flat_grad = torch.zeros(self.flat_params.numel(), device=self.device)
        offset = 0
        for p in params:
            p.grad = self.flat_grad[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
        # the optimizer's step on the two flat buffers (torch's SGD bit for bit, without its per-parameter loop)
        self.flat_sgd = FlatSGD(self.flat_params, self.flat_grad)
        # step lengths, for ADASS bounds; None where the sampler does not read them
        self.step_length = StepLength(self.flat_params) if getattr(self.sampler, "uses_path", True) else None
        self.counters = Counters()
        self.step = 0

    @classmethod
    def whole(cls, config: RunConfig, dataset: Dataset) -> ReplicaState:
        """The only replica of a single-process run: every sample, the sampler seeded by the run seed."""
        return cls(config, Shard.of(dataset, torch.arange(dataset.n_train)), config.optim.seed)

    @classmethod
    def shard(cls, config: RunConfig, dataset: Dataset, rank: int, world: int) -> ReplicaState:
        """Replica ``rank`` of ``world``: its shard (``config.data.shard``) and its own sampler seed."""
        seed = config.optim.seed
        indices = shard_indices(dataset.y_train, world, config.data.shard, seed=seed)[rank]
        return cls(config, Shard.of(dataset, indices), replica_seed(seed, rank))

    @classmethod
    def held(cls, config: RunConfig, shard: Shard, rank: int) -> ReplicaState:
        """Replica ``rank`` from the shard it holds (its rows drawn as :meth:`shard` draws them)."""
        return cls(config, shard, replica_seed(config.optim.seed, rank))

    @property
    def n(self) -> int:
        """How many training samples this replica holds."""
        return int(self.indices.numel())

    def state_dict(self, exchange: Exchange | None = None) -> dict[str, Any]:
        """Model, optimizer, sampler, counters, step and the exchange's error-feedback memory."""
        state = {
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "sampler": self.sampler.state_dict(), "counters": asdict(self.counters), "step": self.step,
        }  # fmt: skip
        if exchange is not None:
            state["exchange"] = exchange.state_dict()  # error-feedback memory lives on the exchange
        return state

    def load_state_dict(self, state: dict[str, Any], exchange: Exchange | None = None) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.sampler.load_state_dict(state["sampler"])
        self.counters, self.step = Counters(**state["counters"]), int(state["step"])
        if exchange is not None and "exchange" in state:
            exchange.load_state_dict(state["exchange"])
