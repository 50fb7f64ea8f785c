"""How sample counts travel with the gradient, so that a weighted mean needs no round of its own.

A rank's count rides in every payload it starts or extends, and is added hop by hop like the data:
codec payloads carry the partial sum in their header (8 bytes on the wire, a float64), dense fp32
buffers in two extra float32 slots after the values (the float64's bytes, copied, never added as
floats). Counts are first rounded to multiples of 2**-20 (sample counts, integers, are unchanged), so
that every partial sum is exact: the total is the same whatever order a chunk met the ranks in.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..codecs.base import Payload

__all__ = ["COUNT_BYTES", "TAIL", "grid_count", "read_tail", "require_positive", "split_count",
           "with_count", "write_tail"]  # fmt: skip

COUNT_BYTES = 8  # a float64 on the wire
TAIL = 2  # float32 slots that hold one float64 count after a dense buffer's values
_GRID = 2.0**20
_LIMIT = 2.0**26  # with up to 128 ranks every partial sum stays below 2**33: exact on the grid


def grid_count(count: float) -> float:
    """``count`` rounded to a multiple of 2**-20, so sums of counts are exact in any order.

    Raises
    ------
    ValueError
        A count that is not finite or not below 2**26 in magnitude.
    """
    value = float(count)
    if not math.isfinite(value) or abs(value) >= _LIMIT:
        raise ValueError(f"sample count {count!r} is not allowed; expected a finite number below 2**26")
    return round(value * _GRID) / _GRID


def require_positive(total: float) -> None:
    """Raise ValueError unless the counts of a step add up to a positive total."""
    if not total > 0:
        raise ValueError(f"sample counts add up to {total}; need a positive total")


def with_count(payload: Payload, count: float) -> Payload:
    """``payload`` with ``count`` beside the codec's header (the tensors are shared, not copied)."""
    header = {"codec": payload.header, "count": count}
    return Payload(payload.tensors, payload.numel, header, payload.header_bytes + COUNT_BYTES)


def split_count(payload: Payload) -> tuple[Payload, float]:
    """The codec's payload and the count of a payload made by :func:`with_count`."""
    header = payload.header
    inner = Payload(payload.tensors, payload.numel, header["codec"], payload.header_bytes - COUNT_BYTES)
    return inner, float(header["count"])


def write_tail(tail: torch.Tensor, count: float) -> None:
    """Store ``count`` in ``tail`` (8 bytes: two float32 slots, or eight uint8), as the bytes of a
    float64."""
    if tail.device.type == "cpu":  # through numpy: a fraction of the cost of a new tensor
        tail.numpy().view(np.float64)[0] = count
        return
    tail.view(torch.uint8).copy_(torch.tensor([count], dtype=torch.float64).view(torch.uint8))


def read_tail(tail: torch.Tensor) -> float:
    """The count :func:`write_tail` stored in ``tail``."""
    if tail.device.type == "cpu":
        return float(tail.numpy().view(np.float64)[0])
    return float(tail.view(torch.uint8).clone().view(torch.float64)[0])
