"""Top-k: keep the ``k`` values of largest magnitude; values and their indices travel.

Different workers keep different coordinates, so payloads are not summable (a ring falls back to
all-gather). Error feedback (``ef(topk:...)``) is the usual companion, since top-k is biased.

Wire layout: ``values`` float32 ``(k,)``; ``indices`` sorted ascending and bit-packed
``bits_for(numel - 1)`` wide (the smallest width that can address the chunk, e.g. 14 bits for
10,000 values). Header (9 bytes): numel and k (uint32), index width (uint8).
"""

from __future__ import annotations

import torch

from ..registry import Param
from .base import ChunkKey, Payload
from .packing import bits_for, pack_bits, unpack_bits
from .sparse import Sparsifier
from .spec import CODECS, canonical
from .traits import Traits
from .warmup import WARMUP

__all__ = ["TopK", "HEADER_BYTES"]

HEADER_BYTES = 4 + 4 + 1  # numel, k (uint32), index width (uint8)

PARAMS = {
    "ratio": Param(0.01, "share of values kept (k >= 1 when the chunk is not empty)", low=0.0, high=1.0),
    "warmup": WARMUP,
}


class TopK(Sparsifier):
    """Keep the ``k = round(ratio * n)`` values of largest magnitude.

    Parameters
    ----------
    ratio : float
        Share of values kept, in [0, 1]; at least one value is kept from a non-empty chunk.
    warmup : int
        Epochs of ratio warm-up (``warmup.py``); 0: ``ratio`` from the start. The canonical name
        leaves it out when 0.
    kernels : {"reference", "fused"}, optional
        Kept for the codecs that wrap it (``Codec.kernels``); its own math is torch's.
    """

    traits = Traits()  # nothing adds: workers keep different coordinates

    def __init__(self, ratio: float = 0.01, warmup: int = 0, kernels: str | None = None) -> None:
        super().__init__(kernels)
        self.ratio = PARAMS["ratio"].convert("codec 'topk'", "ratio", ratio)
        self.warmup = PARAMS["warmup"].convert("codec 'topk'", "warmup", warmup)
        named = PARAMS if self.warmup else {"ratio": PARAMS["ratio"]}
        self.name = canonical("topk", named, {"ratio": self.ratio, "warmup": self.warmup})

    def bytes_per_value(self) -> float:
        return self.current_ratio * 8.0  # a float32 value and, at most, a 32-bit index per kept value

    def split(self, x: torch.Tensor, key: ChunkKey) -> tuple[torch.Tensor, Payload]:
        """The ``k`` largest-magnitude values (in index order) and their packed indices."""
        n, k = x.numel(), self.k_for(x.numel())
        idx = torch.topk(x.abs(), k, sorted=False).indices.sort().values
        width = bits_for(n - 1)
        header = {"numel": n, "k": k, "index_bits": width}
        return x[idx], Payload({"indices": pack_bits(idx, width)}, n, header, HEADER_BYTES)

    def kept_indices(self, rest: Payload, k: int) -> torch.Tensor:
        """The transmitted indices."""
        h = rest.header
        return unpack_bits(rest.tensors["indices"], h["index_bits"], h["k"])

    def expand(self, values: torch.Tensor, rest: Payload, out: torch.Tensor | None = None) -> torch.Tensor:
        """Scatter ``values`` to their transmitted indices."""
        idx = self.kept_indices(rest, values.numel())
        out = (
            torch.zeros(rest.numel, dtype=torch.float32, device=values.device) if out is None else out.zero_()
        )
        out[idx] = values.to(torch.float32)
        return out


@CODECS.register("topk", **PARAMS)
def build_topk(ratio: float, warmup: int, kernels: str | None = None, for_memory: bool = False) -> TopK:
    """top-k by magnitude; values and packed indices travel; not summable"""
    return TopK(ratio, warmup, kernels)
