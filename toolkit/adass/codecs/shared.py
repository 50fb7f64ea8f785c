"""Shared-knowledge coordinate selection (``sharedk``): random-k whose coordinates every worker
derives from what all workers already hold, the averaged gradients of earlier steps.

After a ring all-reduce every worker holds the *same* averaged gradient, bit for bit. A codec that
looks at it (``Codec.observe``, which the ring calls with each piece of the result) can therefore
choose the next step's coordinates deterministically, the same on every worker, with nothing
sent: payloads stay aligned, so they still add in the reduce-scatter like random-k's.

Per coordinate it keeps a *rate* (an exponential average of how much of the averaged gradient a
send of that coordinate carried, per unit of growth) and a *wait* (steps since it was last sent,
i.e. how many steps its error-feedback residual has been accumulating). The expected size of what
waits there now is ``rate * G(wait)``: with ``growth=walk``, ``G(w) = sqrt(w)`` (residuals that
grow like a random walk, the gradient's sign changing), with ``growth=linear``, ``G(w) = w`` (a
steady drift). A share ``top`` of the ``k`` slots goes to the coordinates of largest score, the
rest to coordinates drawn from the shared seed among the others, so every coordinate keeps a
chance and a rate never goes stale for good. Coordinates never sent take the mean rate of those
that were (``unseen=mean``) or go first (``unseen=first``: a sweep over the chunk at the start).

This is an approximation of global top-k of the accumulated residual (Stich, Cordonnier and Jaggi,
"Sparsified SGD with Memory", NeurIPS 2018, show that any contractive selection converges under
error feedback; top-k contracts most), at random-k's wire cost: decoding scatters the kept values
unscaled, so the codec is contractive and meant for ``ef(...)``/``mc(...)``/``dmc(...)``.

Where nothing is observed (a parameter server, where workers never see the averaged gradient of
the others' encodings, and one-step simulations) every chunk has no state and selection falls back
to shared-seed random-k: still aligned on every worker.

Wire layout: as random-k's (``randk.py``): ``values`` float32 ``(k,)``, 12-byte header.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..registry import Param
from .base import ChunkKey, generator_for
from .coordinates import distinct_sample
from .kernels import FUSED
from .randk import PARAMS as RANDK_PARAMS
from .randk import RandomK
from .spec import CODECS, canonical

__all__ = ["GROWTH", "ChunkState", "SharedK", "top_sorted"]


def _sqrt(wait: torch.Tensor) -> torch.Tensor:
    """The correctly rounded float32 square root. torch's vectorised float32 ``sqrt`` may be one
    unit in the last place off; numpy's float64 root rounded to float32 is exact, as the fused
    kernel's, so both paths score alike."""
    return torch.from_numpy(np.sqrt(wait.cpu().numpy().astype(np.float64)).astype(np.float32))


#: how the residual waiting at a coordinate grows with the steps since it was sent
GROWTH: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "walk": _sqrt,  # sign-changing gradients: a random walk
    "linear": lambda wait: wait,  # a steady drift
}


def _seen_total(state: ChunkState, kernels: str) -> tuple[int, float]:
    """How many coordinates of the chunk were sent before, and the float64 sum of their rates
    (lane by lane as ``select.seen_total`` adds them, so that both paths score alike)."""
    if kernels == FUSED and _plain_cpu(state):
        from .kernels import select

        count, total = select.seen_total(state.rate.numpy(), state.seen.numpy())
        return int(count), float(total)
    lanes = 8  # select._LANES
    rate = state.rate.to(torch.float64)
    rows = torch.zeros(1 + -(-rate.numel() // lanes), lanes, dtype=torch.float64)  # a row of +0.0 first
    rows.view(-1)[lanes : lanes + rate.numel()] = rate
    total = 0.0
    for lane in rows.cumsum(0)[-1].tolist():  # each lane in index order, then the lanes in order
        total += lane
    return int(state.seen.sum()), total


#: the rate a coordinate never sent is scored with, from how many coordinates of the chunk were sent
#: before and the sum of their rates (rates are zero where never sent, so the sum over all is the sum
#: over the seen)
UNSEEN: dict[str, Callable[[int, float], float]] = {
    "mean": lambda count, total: total / count if count else 1.0,  # an average coordinate
    "first": lambda count, total: float("inf"),  # before any coordinate that was sent: a sweep at the start
}


PARAMS = {
    "ratio": RANDK_PARAMS["ratio"],
    "top": Param(
        0.9,
        "share of the k slots given to the coordinates of highest score (the rest random)",
        low=0.0,
        high=1.0,
    ),  # fmt: skip
    "growth": Param(
        "walk", "how a waiting residual grows with the steps since its last send", choices=tuple(GROWTH)
    ),  # fmt: skip
    "decay": Param(
        0.5, "weight of the old rate in the average when a coordinate is sent again", low=0.0, high=1.0
    ),  # fmt: skip
    "unseen": Param(
        "mean",
        "the rate of a coordinate never sent: the mean of the others, or first in line",
        choices=tuple(UNSEEN),
    ),  # fmt: skip
    "warmup": RANDK_PARAMS["warmup"],
}


def top_sorted(scores: torch.Tensor, top: int, pick: Callable[[int, int], torch.Tensor]) -> torch.Tensor:
    """int64 indices of the ``top`` largest ``scores``, increasing: every score above the
    ``top``-th largest, and of the scores equal to it the ``r`` whose ranks (in index order)
    ``pick(m, r)`` gives out of the ``m`` there are. The reference of the fused radix select
    (``kernels/select.py``); it needs no tie order from ``torch.topk``."""
    if top == 0:
        return torch.empty(0, dtype=torch.int64)
    threshold = torch.topk(scores, top, sorted=False).values.min()
    above = scores > threshold
    equal = (scores == threshold).nonzero().flatten()
    need = top - int(above.sum())
    ties = equal if need == equal.numel() else equal[pick(equal.numel(), need)]
    return torch.sort(torch.cat([above.nonzero().flatten(), ties])).values


def _with_rest(best: torch.Tensor, positions: torch.Tensor, numel: int, kernels: str) -> torch.Tensor:
    """``best`` (increasing) joined by the coordinates at ``positions`` (increasing) among those
    of ``[0, numel)`` not in ``best``, increasing: a merge walk with the fused kernels, else a mask."""
    if kernels == FUSED:
        from .kernels import select

        drawn = np.empty(positions.numel(), dtype=np.int64)
        select.complement_at(best.numpy(), positions.numpy(), drawn)
        chosen = np.empty(best.numel() + drawn.size, dtype=np.int64)
        select.merge_sorted(best.numpy(), drawn, chosen)
        return torch.from_numpy(chosen)
    others = torch.ones(numel, dtype=torch.bool)
    others[best] = False
    pool = others.nonzero().flatten()  # (numel - best.numel(),), sorted
    return torch.sort(torch.cat([best, pool[positions]])).values


def _plain_cpu(state: ChunkState) -> bool:
    """Whether fused loops can read and update ``state`` in place: contiguous CPU tensors of the
    state's dtypes."""
    tensors = (state.rate, state.wait, state.seen)
    return all(t.device.type == "cpu" and t.is_contiguous() for t in tensors) and (
        state.rate.dtype, state.wait.dtype, state.seen.dtype) == (torch.float32, torch.float32, torch.bool)  # fmt: skip


@dataclass
class ChunkState:
    """What every worker knows alike about one chunk id.

    Attributes
    ----------
    rate : Tensor
        float32 ``(n,)``: the averaged magnitude per unit of growth seen when last sent (zero where
        never sent).
    wait : Tensor
        float32 ``(n,)``: steps the residual has accumulated since the coordinate was last sent
        (1 right after a send).
    seen : Tensor
        bool ``(n,)``: whether the coordinate was ever sent.
    """

    rate: torch.Tensor
    wait: torch.Tensor
    seen: torch.Tensor

    @classmethod
    def empty(cls, numel: int) -> ChunkState:
        zeros = torch.zeros(numel, dtype=torch.float32)
        return cls(zeros, torch.ones(numel, dtype=torch.float32), torch.zeros(numel, dtype=torch.bool))


class SharedK(RandomK):
    """Keep ``k`` coordinates chosen from what every worker knows: the highest scores and a random rest.

    Parameters
    ----------
    ratio : float
        Share of values kept, in [0, 1].
    top : float
        Share of the ``k`` slots taken by the coordinates of highest score ``rate * G(wait)``; the
        rest are drawn uniformly from the shared seed among the other coordinates.
    growth : {"walk", "linear"}
        ``G``: ``sqrt(wait)`` or ``wait``.
    decay : float
        ``rate <- decay * rate + (1 - decay) * |sent| / G(wait)`` at each send of a coordinate.
    unseen : {"mean", "first"}
        The rate a coordinate never sent is scored with: the mean rate of those sent, or infinite
        (every coordinate is sent once before the scores take over: a sweep at the start).
    warmup : int
        Epochs of ratio warm-up (``warmup.py``).
    kernels : {"reference", "fused"}, optional
        The kernels its methods run, fixed now (``Codec.kernels``); None: the default.

    Notes
    -----
    Decoding never scales (contractive), so the codec suits error feedback and momentum correction.
    The state is per chunk id; an exchange calls :meth:`observe` with every chunk of each step's
    averaged result, after the step, on every worker alike, and keeps :meth:`codec_state` in
    checkpoints.
    """

    def __init__(self, ratio: float = 0.01, top: float = 0.9, growth: str = "walk", decay: float = 0.5,
                 warmup: int = 0, unseen: str = "mean", kernels: str | None = None) -> None:  # fmt: skip
        owner = "codec 'sharedk'"
        super().__init__(ratio, scale=False, warmup=warmup, kernels=kernels)
        self.top = PARAMS["top"].convert(owner, "top", top)
        self.growth = PARAMS["growth"].convert(owner, "growth", growth)
        self.decay = PARAMS["decay"].convert(owner, "decay", decay)
        self.unseen = PARAMS["unseen"].convert(owner, "unseen", unseen)
        values = {"ratio": self.ratio, "top": self.top, "growth": self.growth, "decay": self.decay,
                  "unseen": self.unseen, "warmup": self.warmup}  # fmt: skip
        named = PARAMS if self.warmup else {k: p for k, p in PARAMS.items() if k != "warmup"}
        self.name = canonical("sharedk", named, values)
        self.states: dict[int, ChunkState] = {}

    def indices(
        self, numel: int, key: ChunkKey, device: str | torch.device = "cpu", k: int | None = None
    ) -> torch.Tensor:
        """The ``k`` sorted coordinates (int64) every worker keeps for chunk ``key``: random-k's
        where the chunk has no state yet, else the top scores and a shared-seed random rest."""
        device = torch.device(device)
        k = self.k_for(numel) if k is None else k
        state = self.states.get(key.chunk)
        if state is None or state.rate.numel() != numel:
            return super().indices(numel, key, device, k)
        cache_key = ("shared", numel, k, key.seed, key.step, key.chunk, str(device))
        return self._cache.get(cache_key, lambda: self._choose(state, numel, k, key).to(device))

    def scores(self, state: ChunkState) -> torch.Tensor:
        """``rate * G(wait)`` per coordinate; coordinates never sent take the rate ``unseen`` names.
        Canonical, so that they order as their bits do: NaN as +inf, nothing below +0.0."""
        rate = torch.where(state.seen, state.rate, self._fill(state))
        scores = (rate * GROWTH[self.growth](state.wait)).nan_to_num_(nan=float("inf"), posinf=float("inf"))
        return torch.where(scores > 0, scores, 0.0)

    def _fill(self, state: ChunkState) -> float:
        """The rate scored for coordinates never sent (0.0, unused, where every one was sent)."""
        count, total = _seen_total(state, self.kernels)
        return 0.0 if count == state.seen.numel() else UNSEEN[self.unseen](count, total)

    def _ties(self, key: ChunkKey, equal: int, need: int) -> torch.Tensor:
        """Which ``need`` of ``equal`` tied scores the top share takes (ranks in index order,
        increasing): a uniform choice from the chunk key's shared seed, so that runs of equal
        scores (coordinates never sent, waiting alike) favour no part of the chunk."""
        return distinct_sample(
            equal, need, generator_for(key, "sharedk-ties", shared=True), kernels=self.kernels
        )

    def _choose(self, state: ChunkState, numel: int, k: int, key: ChunkKey) -> torch.Tensor:
        """The highest-score ``round(top * k)`` coordinates (ties: a shared-seed choice) and ``k``
        minus those drawn among the rest, increasing."""
        top_k = min(k, round(self.top * k))
        best = self._top(state, top_k, key)
        if top_k == k:
            return best
        gen = generator_for(key, "sharedk", shared=True)
        positions = distinct_sample(numel - top_k, k - top_k, gen, kernels=self.kernels)
        return _with_rest(best, positions, numel, self.kernels)

    def _top(self, state: ChunkState, top_k: int, key: ChunkKey) -> torch.Tensor:
        """The ``top_k`` highest-score coordinates, increasing: the fused radix select or its
        pure-torch reference (the same indices)."""
        pick = lambda m, r: self._ties(key, m, r)  # noqa: E731
        if self.kernels != FUSED:
            return top_sorted(self.scores(state), top_k, pick)
        if not top_k:
            return torch.empty(0, dtype=torch.int64)
        from .kernels import select

        arrays = (state.rate.numpy(), state.wait.numpy(), state.seen.numpy())
        best = select.top_of_scores(*arrays, self._fill(state), self.growth == "linear", top_k,
                                    lambda m, r: pick(m, r).numpy())  # fmt: skip
        return torch.from_numpy(best)

    def observe(self, averaged: torch.Tensor, key: ChunkKey) -> None:
        """Learn from chunk ``key``'s averaged result (the same on every worker): the rates of the
        coordinates sent this step, and one more step of waiting for the others."""
        numel = averaged.numel()
        state = self.states.get(key.chunk)
        sent = self.indices(numel, key, "cpu")  # this step's coordinates (cached by the encode)
        if state is None or state.rate.numel() != numel:
            state = self.states[key.chunk] = ChunkState.empty(numel)
        averaged = averaged.detach().to("cpu", torch.float32)
        if self.kernels == FUSED and _plain_cpu(state):
            from .kernels import select

            select.observe(averaged.contiguous().numpy(), sent.numpy(), state.rate.numpy(), state.wait.numpy(),
                           state.seen.numpy(), self.decay, self.growth == "linear")  # fmt: skip
            return
        magnitude = averaged[sent].abs()
        per_growth = magnitude / GROWTH[self.growth](state.wait[sent])
        old = state.rate[sent]
        state.rate[sent] = torch.where(state.seen[sent], self.decay * old + (1.0 - self.decay) * per_growth,
                                       per_growth)  # fmt: skip
        state.seen[sent] = True
        state.wait.add_(1.0)
        state.wait[sent] = 1.0

    def codec_state(self) -> dict[str, Any]:
        """Rates, waits and seen flags by chunk id, as CPU tensors."""
        return {int(c): {"rate": s.rate.clone(), "wait": s.wait.clone(), "seen": s.seen.clone()}
                for c, s in self.states.items()}  # fmt: skip

    def load_codec_state(self, state: dict[str, Any]) -> None:
        """Replace the state with :meth:`codec_state`'s; cached selections are forgotten."""
        self.states = {}
        for c, s in state.items():
            seen = s["seen"].to(torch.bool).clone()
            rate = torch.where(seen, s["rate"].to(torch.float32), 0.0)  # no rate where never sent
            self.states[int(c)] = ChunkState(rate, s["wait"].to(torch.float32).clone(), seen)
        self._cache.clear()


@CODECS.register("sharedk", **PARAMS)
def build_sharedk(ratio: float, top: float, growth: str, decay: float, unseen: str, warmup: int,
                  kernels: str | None = None, for_memory: bool = False) -> SharedK:  # fmt: skip
    """random-k whose coordinates follow the shared averaged gradient: top scores plus a random rest"""
    return SharedK(ratio, top, growth, decay, warmup, unseen, kernels)
