"""Dense float codecs: fp32 (lossless) and fp16/bf16 (round to half precision on the wire).

All three are summable. ``add`` adds in fp32 and rounds the sum back to the wire dtype, so a
half-precision sum is rounded once per addition; exchanges divide by the worker count *before*
summing in half precision, which keeps partial sums in range (fp16 overflows beyond 65504).
"""

from __future__ import annotations

import torch

from .base import ChunkKey, Codec, Payload, as_chunk
from .spec import CODECS
from .traits import Traits

__all__ = ["FloatCodec"]

_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


class FloatCodec(Codec):
    """Send the chunk densely as ``fp32``, ``fp16`` or ``bf16``.

    Parameters
    ----------
    dtype_name : {"fp32", "fp16", "bf16"}
        The wire dtype.
    kernels : {"reference", "fused"}, optional
        Kept for the codecs that wrap it (``Codec.kernels``); its own math is torch's.

    Notes
    -----
    Wire layout: one tensor ``values`` of ``numel`` elements in the wire dtype; no header (the chunk
    length is part of the agreed chunking, and the tensor carries it anyway).
    """

    def __init__(self, dtype_name: str = "fp32", kernels: str | None = None) -> None:
        super().__init__(kernels)
        if dtype_name not in _DTYPES:
            raise ValueError(f"dtype_name={dtype_name!r}; expected one of {'|'.join(_DTYPES)}")
        self.name = dtype_name
        self.dtype = _DTYPES[dtype_name]
        self.traits = Traits(summable=True, lossless=self.dtype == torch.float32)

    def bytes_per_value(self) -> float:
        return float(self.dtype.itemsize)

    def encode(self, x: torch.Tensor, key: ChunkKey, scale: torch.Tensor | None = None) -> Payload:
        """Cast ``x`` to the wire dtype (a copy, so later changes to ``x`` do not reach the payload)."""
        x = as_chunk(x)
        return Payload({"values": x.to(self.dtype, copy=True)}, numel=x.numel())

    def decode(self, payload: Payload) -> torch.Tensor:
        """The values as a new float32 tensor (never a view of the payload)."""
        return payload.tensors["values"].to(torch.float32, copy=True)

    def template(self, numel: int) -> Payload:
        return Payload({"values": torch.empty(1, dtype=self.dtype).expand(numel)}, numel=numel)

    def add(self, a: Payload, b: Payload) -> Payload:
        """Elementwise sum, computed in fp32 and rounded once to the wire dtype."""
        if a.numel != b.numel:
            raise ValueError(f"{self.name}: cannot add payloads of {a.numel} and {b.numel} values")
        total = a.tensors["values"].to(torch.float32) + b.tensors["values"].to(torch.float32)
        return Payload({"values": total.to(self.dtype)}, numel=a.numel)


def _register(dtype_name: str, doc: str) -> None:
    @CODECS.register(dtype_name, doc=doc)
    def build(kernels: str | None = None, for_memory: bool = False) -> FloatCodec:
        return FloatCodec(dtype_name, kernels)


_register("fp32", "dense float32, lossless")
_register("fp16", "dense float16 (add in fp32, round back)")
_register("bf16", "dense bfloat16 (add in fp32, round back)")
