"""Random-k with shared coordinates: every worker draws the same ``k`` indices from the chunk key.

The indices come from ``generator_for(key, "randk")`` (run seed, step, chunk; not the rank), drawn
without a full permutation (``sampling.py``) and cached for the decodes that follow, so only
the ``k`` values travel and value vectors of different workers line up: payloads add elementwise
(summable), which lets a ring reduce-scatter them like dense chunks. With ``scale=true`` decoding
multiplies by ``n/k``, which makes the estimate unbiased (each coordinate is kept with probability
``k/n``). With ``block=B`` the coordinates come in runs of ``B`` neighbours (``sampling.block_sample``):
still each kept with probability ``k/n``, but about ``B`` times fewer random draws, and gathers and
scatters that copy runs instead of single values. That saves CPU on large chunks; on a small model
runs cost accuracy at small shares (docs/concepts/rs-adass.md).

Wire layout: ``values`` float32 ``(k,)``. Header (12 bytes): numel, step and chunk as uint32; the
receiver re-derives the indices from them and the run seed, which every worker knows. Inside a
ring, where both sides know which chunk a transfer carries, the values travel alone
(``exchange.ring``).
"""

from __future__ import annotations

import torch

from ..registry import Param
from .base import ChunkKey, KeyedValues, Payload, as_chunk, generator_for
from .coordinates import IndexCache, block_sample, distinct_sample
from .kernels import FUSED
from .sparse import Sparsifier
from .spec import CODECS, canonical
from .traits import Traits
from .warmup import WARMUP

__all__ = ["RandomK", "HEADER_BYTES"]

HEADER_BYTES = 4 + 4 + 4  # numel, step, chunk (uint32 each)

PARAMS = {
    "ratio": Param(0.01, "share of values kept (k >= 1 when the chunk is not empty)", low=0.0, high=1.0),
    "scale": Param(
        True,
        "multiply by n/k on decode, so the estimate is unbiased (not contractive: "
        "error feedback needs scale=false)",
    ),
    "warmup": WARMUP,
    "block": Param(
        1, "coordinates kept in runs of this many neighbours (1: each drawn alone)", low=1, high=65536
    ),
}


def _fusable(kernels: str, x: torch.Tensor, idx: torch.Tensor) -> bool:
    """Whether the fused gather/scatter handles ``x`` (``kernels`` fused, CPU, contiguous float32)."""
    return (
        kernels == FUSED and x.device.type == "cpu" and x.dtype == torch.float32
        and x.is_contiguous() and not x.requires_grad and idx.numel() > 0
    )  # fmt: skip


class RandomK(Sparsifier):
    """Keep ``k = round(ratio * n)`` coordinates drawn from the chunk key, the same on every worker.

    Parameters
    ----------
    ratio : float
        Share of values kept, in [0, 1]; at least one value is kept from a non-empty chunk.
    scale : bool
        Multiply the kept values by ``n/k`` on decode (unbiased estimate). Not contractive then,
        so error feedback refuses it.
    warmup : int
        Epochs of ratio warm-up (``warmup.py``); 0: ``ratio`` from the start. The canonical name
        leaves it out when 0.
    block : int
        Keep the coordinates in runs of this many neighbours (``sampling.block_sample``); 1: each
        drawn on its own. The canonical name leaves it out when 1.
    kernels : {"reference", "fused"}, optional
        The kernels its methods run, fixed now (``Codec.kernels``); None: the default.
    """

    def __init__(
        self,
        ratio: float = 0.01,
        scale: bool = True,
        warmup: int = 0,
        block: int = 1,
        kernels: str | None = None,
    ) -> None:
        super().__init__(kernels)
        self.ratio = PARAMS["ratio"].convert("codec 'randk'", "ratio", ratio)
        self.scale = PARAMS["scale"].convert("codec 'randk'", "scale", scale)
        self.warmup = PARAMS["warmup"].convert("codec 'randk'", "warmup", warmup)
        self.block = PARAMS["block"].convert("codec 'randk'", "block", block)
        self.traits = Traits(summable=True, contractive=not self.scale)
        values = {"ratio": self.ratio, "scale": self.scale, "warmup": self.warmup, "block": self.block}
        left_out = {"warmup": self.warmup == 0, "block": self.block == 1}
        named = {k: p for k, p in PARAMS.items() if not left_out.get(k, False)}
        self.name = canonical("randk", named, values)
        self._cache = IndexCache()

    def indices(
        self, numel: int, key: ChunkKey, device: str | torch.device = "cpu", k: int | None = None
    ) -> torch.Tensor:
        """The ``k`` sorted coordinates (int64) that every worker keeps for chunk ``key``.

        A uniform k-subset drawn by :func:`distinct_sample` (with ``block`` > 1, runs of neighbours
        drawn by :func:`block_sample`) from ``generator_for(key, "randk")``: a function of (run seed,
        step, chunk) and the chunk length only. Recent draws are cached
        (encode and every decode of a chunk ask for the same ones), so do not modify the result
        in place. ``k`` defaults to the current epoch's count (``k_for``); a receiver passes the
        number of values it got.
        """
        device = torch.device(device)
        k = self.k_for(numel) if k is None else k
        cache_key = (numel, k, key.seed, key.step, key.chunk, str(device))

        def draw() -> torch.Tensor:
            gen = generator_for(key, "randk", device=device, shared=True)
            if self.block > 1:
                return block_sample(numel, k, self.block, gen, device, kernels=self.kernels)
            return distinct_sample(numel, k, gen, device, kernels=self.kernels)

        return self._cache.get(cache_key, draw)

    def split(self, x: torch.Tensor, key: ChunkKey) -> tuple[torch.Tensor, Payload]:
        """The values at the shared coordinates, and a header naming the chunk."""
        idx = self.indices(x.numel(), key, x.device)
        if _fusable(self.kernels, x, idx):
            from .kernels import fused

            values = torch.empty(idx.numel(), dtype=x.dtype)
            fused.randk_gather(x.detach().numpy(), idx.numpy(), values.numpy())
        else:
            values = torch.index_select(x, 0, idx)  # faster than x[i]
        header = {"numel": x.numel(), "seed": key.seed, "step": key.step, "chunk": key.chunk}
        return values, Payload({}, x.numel(), header, HEADER_BYTES)

    def expand(self, values: torch.Tensor, rest: Payload, out: torch.Tensor | None = None) -> torch.Tensor:
        """Scatter ``values`` (times ``n/k`` with ``scale``) to the coordinates of the chunk key."""
        n = rest.numel
        out = torch.zeros(n, dtype=torch.float32, device=values.device) if out is None else out.zero_()
        self.scatter(values, rest, out)
        return out

    def scatter(self, values: torch.Tensor, rest: Payload, out: torch.Tensor) -> None:
        """:meth:`expand` into ``out`` that already holds zeros: only the kept coordinates are written."""
        n, h, k = rest.numel, rest.header, values.numel()
        if k:
            gain = n / k if self.scale else 1.0
            idx = self.indices(n, ChunkKey(h["seed"], h["step"], h["chunk"]), values.device, k)
            if _fusable(self.kernels, out, idx) and values.device.type == "cpu" and out.numel() == n:
                from .kernels import fused

                v = values.detach().to(torch.float32).contiguous()
                fused.randk_scatter(v.numpy(), idx.numpy(), gain, out.numpy())
            else:
                out.index_copy_(0, idx, values.to(torch.float32) * gain)

    @property
    def values_as_sent(self) -> bool:
        """Unscaled, the kept values land unchanged on the shared coordinates (increasing, in the
        values' order)."""
        return not self.scale

    def keyed_template(self, numel: int, key: ChunkKey) -> Payload:
        """``k_for(numel)`` float32 values and the header naming the chunk: a payload's layout
        follows from its length and key (the current epoch's share kept)."""
        header = {"numel": numel, "seed": key.seed, "step": key.step, "chunk": key.chunk}
        values = torch.empty(1, dtype=torch.float32).expand(self.k_for(numel))
        return Payload({"values": values}, numel, header, HEADER_BYTES)

    def kept_indices(self, rest: Payload, k: int) -> torch.Tensor:
        """The shared coordinates of the payload's chunk key."""
        h = rest.header
        return self.indices(rest.numel, ChunkKey(h["seed"], h["step"], h["chunk"]), k=k)

    def bytes_per_value(self) -> float:
        return 4.0 * self.current_ratio

    def keyed_values(self) -> KeyedValues:
        """The coordinates follow from the chunk key; the kept values travel as float32."""
        return KeyedValues(self)

    def encode_scaled(self, x: torch.Tensor, key: ChunkKey, weight: float) -> Payload:
        """``encode(x * weight)``, bit for bit, multiplying only the ``k`` kept values."""
        values, rest = self.split(as_chunk(x), key)
        return self.merge(values * weight, rest)

    def aligned(self, a: Payload, b: Payload) -> bool:
        """Same chunk length, run seed, step and chunk id: the same coordinates."""
        fields = ("numel", "seed", "step", "chunk")
        return all(a.header.get(f) == b.header.get(f) for f in fields)

    def add(self, a: Payload, b: Payload) -> Payload:
        """Elementwise sum of two aligned value vectors (same chunk key)."""
        if not self.aligned(a, b):
            raise ValueError(f"{self.name}: payloads of different chunk keys keep different coordinates")
        total = a.tensors["values"] + b.tensors["values"]
        return self.merge(total, self.rest_of(a))


@CODECS.register("randk", **PARAMS)
def build_randk(ratio: float, scale: bool, warmup: int, block: int, kernels: str | None = None,
                for_memory: bool = False) -> RandomK:  # fmt: skip
    """random-k with coordinates shared through the chunk key; only values travel"""
    return RandomK(ratio, scale, warmup, block, kernels)
