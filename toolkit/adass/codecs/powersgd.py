"""PowerSGD (Vogels, Karimireddy and Jaggi, NeurIPS 2019): each layer's gradient, seen as a matrix
``M`` (rows, cols), travels as two thin factors, ``P = M Q`` (rows, r) and ``Q' = M^T P^`` (cols, r),
with ``P^`` the orthonormalized sum of every worker's ``P``; the result is ``P^ Q'^T``.

Both factors are linear in ``M``, so each is an all-reduce of a short dense vector: an exchange runs
two rounds per step (``P`` with the small layers that travel whole, then ``Q``), and the codec does
the math between them (:class:`FactorStep`). One step of power iteration per training step is enough
because ``Q`` starts from the previous step's (warm start); the first ``Q`` is drawn from the run seed.

What travels whole, as torch's ``powerSGD_hook`` decides too: tensors of one dimension (biases),
and matrices whose factors would not save ``min_rate`` times their size,
``(rows + cols) * r * min_rate >= rows * cols``. A conv kernel (out, in, kh, kw) is the matrix
(out, in * kh * kw). Error feedback is the memory's (``--memory ef``), not the codec's.

>>> plan = plan_layers([(64, 784), (64,), (10, 64), (10,)], rank=8, min_rate=2.0)
>>> [(layer.rows, layer.cols, layer.rank) for layer in plan.layers]  # (10, 64) at rank 8 saves too little
[(64, 784, 8), (64, 1, 0), (10, 64, 0), (10, 1, 0)]
>>> plan.p_numel, plan.q_numel, plan.dense_numel
(512, 6272, 714)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..registry import Param
from .base import ChunkKey, Codec, Payload, as_chunk
from .chunks import generator_for
from .spec import CODECS, canonical
from .traits import Traits

__all__ = ["FactorPlan", "FactorStep", "Layer", "PowerSGD", "orthogonalize", "plan_layers"]

PARAMS = {
    "rank": Param(1, "rank r of each compressed layer's approximation", low=1, high=4096),
    "warmup": Param(0, "steps of plain fp32 averaging before compressing (torch's start_powerSGD_iter)",
                    low=0, high=1 << 40),
    "min_rate": Param(2.0, "compress a layer only where rows*cols > min_rate*(rows+cols)*r; else it "
                           "travels whole", low=0.0, high=1e9),
    "eps": Param(0.0, "added to each column's norm when orthonormalizing (0: a zero column stays zero)",
                 low=0.0, high=1.0),
    "start": Param("warmup", "first Q: 'warmup' (power steps on the last warm-up step's mean gradient; a "
                             "draw where warmup=0) or 'draw' (seeded draw, as torch's hook)",
                   choices=("warmup", "draw")),
}  # fmt: skip
#: power steps on the last warm-up step's mean gradient that start ``Q`` (``start=warmup``)
START_POWER_STEPS = 2


@dataclass(frozen=True)
class Layer:
    """One parameter's place in the flat gradient and how it travels.

    Attributes
    ----------
    lo, hi : int
        Its values in the flat gradient.
    rows, cols : int
        Its matrix shape: the first dimension, and the rest flattened (``(n, 1)`` for a vector).
    rank : int
        The rank of its factors; 0: it travels whole.
    """

    lo: int
    hi: int
    rows: int
    cols: int
    rank: int


@dataclass(frozen=True)
class FactorPlan:
    """Every layer of a model, and the lengths of what travels for them in each round.

    ``p_numel`` and ``q_numel`` add up the factors (``rows * r`` and ``cols * r``) of the
    compressed layers; ``dense_numel`` the values of the layers that travel whole (with ``P``).
    """

    layers: tuple[Layer, ...]

    @property
    def numel(self) -> int:
        return self.layers[-1].hi if self.layers else 0

    @property
    def compressed(self) -> tuple[Layer, ...]:
        return tuple(layer for layer in self.layers if layer.rank)

    @property
    def whole(self) -> tuple[Layer, ...]:
        return tuple(layer for layer in self.layers if not layer.rank)

    @property
    def p_numel(self) -> int:
        return sum(layer.rows * layer.rank for layer in self.compressed)

    @property
    def q_numel(self) -> int:
        return sum(layer.cols * layer.rank for layer in self.compressed)

    @property
    def dense_numel(self) -> int:
        return sum(layer.hi - layer.lo for layer in self.whole)


def plan_layers(shapes: Sequence[Sequence[int]], rank: int, min_rate: float) -> FactorPlan:
    """The :class:`FactorPlan` of parameters of ``shapes`` (in flat-gradient order)."""
    layers, lo = [], 0
    for shape in shapes:
        numel = math.prod(shape)
        rows = shape[0] if len(shape) else 1
        cols = numel // rows if rows else 0
        r = min(rows, cols, rank)
        worth = len(shape) > 1 and (rows + cols) * r * min_rate < rows * cols
        layers.append(Layer(lo, lo + numel, rows, cols, r if worth else 0))
        lo += numel
    return FactorPlan(tuple(layers))


def orthogonalize(m: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """Orthonormalize the columns of ``m`` (rows, r) in place by Gram-Schmidt, and return it.

    Each column is divided by its norm plus ``eps``; with ``eps = 0`` a column of zeros stays zero
    (instead of turning into NaN), so a layer whose gradient vanishes sends zeros.
    """
    for i in range(m.shape[1]):
        col = m[:, i : i + 1]
        norm = torch.linalg.vector_norm(col)
        if eps > 0:
            col.div_(norm + eps)
        elif norm > 0:
            col.div_(norm)
        if i + 1 < m.shape[1]:
            rest = m[:, i + 1 :]
            rest.sub_(col * (col * rest).sum(dim=0, keepdim=True))
    return m


class FactorStep:
    """One worker's share of one compressed step, between the exchange's two rounds.

    ``first`` is what the ``P`` round sums: every compressed layer's ``M Q`` then the whole layers'
    values. :meth:`second` takes that sum (the same on every worker), orthonormalizes each ``P`` and
    gives what the ``Q`` round sums, ``M^T P^``. :meth:`expand` writes ``P^ Q^T`` and the whole
    layers from the two sums. The matrices ``M`` are views of ``x``, which must not change meanwhile.
    """

    def __init__(self, plan: FactorPlan, x: torch.Tensor, qs: list[torch.Tensor], eps: float) -> None:
        self.plan, self.x, self.qs, self.eps = plan, x, qs, eps
        parts = [
            torch.mm(self._matrix(layer), q).reshape(-1) for layer, q in zip(plan.compressed, qs, strict=True)
        ]
        parts += [x[layer.lo : layer.hi] for layer in plan.whole]
        self.first = torch.cat(parts) if parts else x.new_zeros(0)  # (p_numel + dense_numel,)
        self.p_sum: torch.Tensor | None = None  # the P round's sum, once second() has it
        self.p_hat: torch.Tensor | None = None  # its orthonormalized factors, (p_numel,)

    def _matrix(self, layer: Layer) -> torch.Tensor:
        return self.x[layer.lo : layer.hi].view(layer.rows, layer.cols)

    def second(self, p_sum: torch.Tensor) -> torch.Tensor:
        """The ``Q`` round's vector (q_numel,) from the ``P`` round's sum (p_numel + dense_numel,)."""
        self.p_sum = p_sum
        self.p_hat = p_sum[: self.plan.p_numel].clone()
        parts, at = [], 0
        for layer in self.plan.compressed:
            p = orthogonalize(
                self.p_hat[at : at + layer.rows * layer.rank].view(layer.rows, layer.rank), self.eps
            )
            parts.append(torch.mm(self._matrix(layer).t(), p).reshape(-1))
            at += layer.rows * layer.rank
        return torch.cat(parts) if parts else self.x.new_zeros(0)

    def expand(self, q_sum: torch.Tensor, out: torch.Tensor) -> list[torch.Tensor]:
        """Write the step's result into ``out`` (numel,) and return each layer's ``Q`` (cols, r), to
        start the next step from."""
        if self.p_hat is None or self.p_sum is None:
            raise RuntimeError("FactorStep.expand before second")
        return assemble(self.plan, self.p_hat, self.p_sum[self.plan.p_numel :], q_sum, out)


def assemble(
    plan: FactorPlan, p_hat: torch.Tensor, dense: torch.Tensor, q: torch.Tensor, out: torch.Tensor
) -> list[torch.Tensor]:
    """Write ``P^ Q^T`` of every compressed layer and the whole layers' ``dense`` values into ``out``;
    return the ``Q`` of each compressed layer (views of ``q``)."""
    qs, p_at, q_at, d_at = [], 0, 0, 0
    for layer in plan.layers:
        if not layer.rank:
            n = layer.hi - layer.lo
            out[layer.lo : layer.hi].copy_(dense[d_at : d_at + n])
            d_at += n
            continue
        p = p_hat[p_at : p_at + layer.rows * layer.rank].view(layer.rows, layer.rank)
        qm = q[q_at : q_at + layer.cols * layer.rank].view(layer.cols, layer.rank)
        torch.mm(p, qm.t(), out=out[layer.lo : layer.hi].view(layer.rows, layer.cols))
        qs.append(qm)
        p_at, q_at = p_at + p.numel(), q_at + qm.numel()
    return qs


class PowerSGD(Codec):
    """Low-rank factors of each layer, reduced in two rounds: ``powersgd:rank=R,warmup=S``.

    Parameters
    ----------
    rank : int
        Rank ``r`` of each compressed layer (at most its rows and columns).
    warmup : int
        Steps of plain fp32 averaging first (the exchange sends the whole gradient); the codec
        counts steps itself, and a checkpoint keeps the count.
    min_rate : float
        A layer is compressed only where its factors are ``min_rate`` times smaller than it.
    eps : float
        Added to column norms when orthonormalizing.
    kernels : {"reference", "fused"}, optional
        Kept for uniformity (``Codec.kernels``); its math is torch's.

    Notes
    -----
    An exchange asks :meth:`low_rank` and drives the rounds (``adass.exchange.lowrank``); the layer
    shapes come from :meth:`set_layers` (the exchange's, which the engine calls with the model's).
    ``encode``/``decode`` compress one worker's gradient alone (the math with a world of one):
    payload tensors ``p`` (p_numel,), orthonormalized, ``q`` (q_numel,) and ``dense``
    (dense_numel,), all float32, no header.
    """

    traits = Traits(fixed_size=True)  # factors do not add as payloads: the exchange reduces rounds

    def __init__(self, rank: int = 1, warmup: int = 0, min_rate: float = 2.0, eps: float = 0.0,
                 start: str = "warmup", kernels: str | None = None) -> None:  # fmt: skip
        super().__init__(kernels)
        values = {"rank": rank, "warmup": warmup, "min_rate": min_rate, "eps": eps, "start": start}
        values = {k: PARAMS[k].convert("codec 'powersgd'", k, v) for k, v in values.items()}
        self.rank, self.warmup, self.min_rate, self.eps, self.start = (values[k] for k in PARAMS)
        self.name = canonical("powersgd", PARAMS, values)
        self.plan: FactorPlan | None = None
        self.qs: list[torch.Tensor] = []  # the last step's Q of each compressed layer (warm start)
        self.steps = 0  # steps begun, warm-up included

    def low_rank(self) -> PowerSGD:
        return self

    def set_layers(self, shapes: Sequence[Sequence[int]]) -> None:
        """The parameter shapes of the flat gradient, in order (a new plan forgets the kept ``Q``)."""
        plan = plan_layers([tuple(s) for s in shapes], self.rank, self.min_rate)
        if plan != self.plan:
            self.plan, self.qs = plan, []

    def require_plan(self, numel: int) -> FactorPlan:
        if self.plan is None or self.plan.numel != numel:
            have = "no layer shapes" if self.plan is None else f"layers of {self.plan.numel} values"
            raise ValueError(f"codec {self.name!r}: a gradient of {numel} values, but {have}; "
                             "give the parameter shapes with set_layers (Exchange.set_layers)")  # fmt: skip
        return self.plan

    def begin_step(self) -> bool:
        """Count a step begun; whether it compresses (False during the warm-up)."""
        self.steps += 1
        return self.steps > self.warmup

    def factorize(self, x: torch.Tensor, key: ChunkKey) -> FactorStep:
        """This worker's :class:`FactorStep` on ``x`` (its compensated flat share), from the kept ``Q``
        or, at first, from draws seeded by the run seed (the same on every worker)."""
        plan = self.require_plan(x.numel())
        return FactorStep(plan, x, self._start_qs(plan, key, x.device), self.eps)

    def warm(self, mean: torch.Tensor, key: ChunkKey) -> None:
        """After a warm-up step whose result ``mean`` (the whole mean gradient, the same bits on every
        worker) every worker holds: where the next step is the first compressed one and
        ``start=warmup``, its ``Q`` of each layer starts from :data:`START_POWER_STEPS` power steps
        on that layer of ``mean`` from the seeded draw, so the first factors follow the directions
        the gradient has just had instead of random ones."""
        if self.start != "warmup" or self.steps != self.warmup or self.qs:
            return
        plan = self.require_plan(mean.numel())
        qs = self._start_qs(plan, key, mean.device)
        for i, layer in enumerate(plan.compressed):
            m = mean[layer.lo : layer.hi].view(layer.rows, layer.cols)
            for _ in range(START_POWER_STEPS):
                qs[i] = orthogonalize(torch.mm(m.t(), orthogonalize(torch.mm(m, qs[i]), self.eps)), self.eps)
        self.qs = qs

    def keep(self, qs: list[torch.Tensor]) -> None:
        """Keep the step's ``Q`` of each layer (the same on every worker) to start the next from."""
        self.qs = [q.clone() for q in qs]

    def _start_qs(self, plan: FactorPlan, key: ChunkKey, device: torch.device) -> list[torch.Tensor]:
        if self.qs:
            return [orthogonalize(q.to(device, copy=True), self.eps) for q in self.qs]
        qs = []
        for i, layer in enumerate(plan.compressed):
            gen = generator_for(ChunkKey(key.seed, self.steps, i), "powersgd")
            q = torch.randn(layer.cols, layer.rank, generator=gen, dtype=torch.float32)
            qs.append(orthogonalize(q, self.eps).to(device))
        return qs

    def encode(self, x: torch.Tensor, key: ChunkKey, scale: torch.Tensor | None = None) -> Payload:
        """One worker's factors of ``x`` alone (the kept ``Q`` is read, never changed)."""
        x = as_chunk(x)
        step = self.factorize(x, key)
        q = step.second(step.first)
        dense = step.first[step.plan.p_numel :].clone()
        return Payload({"p": step.p_hat, "q": q, "dense": dense}, x.numel())  # type: ignore[dict-item]

    def decode(self, payload: Payload) -> torch.Tensor:
        """``P^ Q^T`` of every compressed layer, the whole layers as sent."""
        t = payload.tensors
        out = torch.empty(payload.numel, dtype=torch.float32, device=t["q"].device)
        assemble(self.require_plan(payload.numel), t["p"], t["dense"], t["q"], out)
        return out

    def codec_state(self) -> dict[str, Any]:
        """The step count and the kept ``Q`` of each compressed layer (CPU tensors)."""
        return {"steps": self.steps, "qs": [q.detach().cpu().clone() for q in self.qs]}

    def load_codec_state(self, state: dict[str, Any]) -> None:
        self.steps = int(state["steps"])
        self.qs = [q.to(torch.float32).clone() for q in state["qs"]]


@CODECS.register("powersgd", **PARAMS)
def build_powersgd(rank: int, warmup: int, min_rate: float, eps: float, start: str,
                   kernels: str | None = None, for_memory: bool = False) -> PowerSGD:  # fmt: skip
    """low-rank factors of each layer (PowerSGD), reduced in two rounds; small layers travel whole"""
    return PowerSGD(rank, warmup, min_rate, eps, start, kernels)
