"""Which reducer a ring uses, and which schedule drives it, from the capabilities a codec declares
and the ring's strategy: the first row of :data:`REDUCERS` whose condition holds.

Summable payloads go through the pipelined reduce-scatter (``schedule.py``) with a per-piece reducer;
payloads that cannot add go round the sibling all-gather schedule (``allgather.py``).

>>> from adass.codecs import make_codec
>>> [choose(make_codec(c), "requantize").name for c in ("fp32", "fp16", "randk", "qsgd", "topk")]
['dense', 'direct', 'sparse', 'requantize', 'allgather']
>>> choose(make_codec("qsgd"), "shared_scale").name
'shared_scale'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ...codecs import Codec
from ..chunking import ChunkLayout
from .allgather import gather_pieces
from .dense import DenseAdd
from .direct import DirectAdd
from .gather_sum import GatherSum
from .hops import Hops
from .lowrank import LowRank, factor_rounds
from .reducer import Reducer
from .requantize import Requantize
from .schedule import reduce_pieces
from .shared_scale import SharedScale
from .sparse_add import SparseAdd

__all__ = ["REDUCERS", "Row", "Schedule", "choose"]

#: ``schedule(hops, layout, reducer, out)``: moves one step's payloads and drives the row's reducer
Schedule = Callable[[Hops, ChunkLayout, Any, torch.Tensor], None]


@dataclass(frozen=True)
class Row:
    """One row of the table: a reducer and when it applies.

    Attributes
    ----------
    name : str
        What the ring records as its reducer.
    applies : callable
        ``applies(codec, strategy, feedback)``: ``codec`` is the codec that travels, ``strategy``
        the ring's, ``feedback`` whether the own share must go through the exchange's memory (error
        feedback around a lossy codec, or momentum correction around any).
    build : type of Reducer
        The arithmetic, built once per step.
    schedule : Schedule
        What drives it: :func:`~adass.exchange.ring.schedule.reduce_pieces` (per-piece reducers) or
        :func:`~adass.exchange.ring.allgather.gather_pieces` (:class:`GatherSum`).
    """

    name: str
    applies: Callable[[Codec, str, bool], bool]
    build: type[Reducer]
    schedule: Schedule = reduce_pieces


def _adds(codec: Codec) -> bool:
    """Payloads add as they are, with no scale to agree on (fp32/fp16/bf16, random-k)."""
    return codec.traits.summable and not codec.traits.needs_shared_scale


def _float_values(codec: Codec) -> bool:
    """Coordinates follow from the chunk key and the kept values travel as float32 (random-k)."""
    keyed = codec.keyed_values()
    return keyed is not None and keyed.values is None


# A low-rank codec (powersgd) reduces its factors in rounds of its own under any strategy. Summable
# codecs that need no scale add directly under either strategy, since there is nothing to
# agree on: lossless ones (fp32) as raw values summed in place (unless a memory must see the share:
# momentum correction, mc(fp32), is then a direct add), plain random-k as its kept values
# summed in place (with error feedback, its encoded share, whose residual the memory keeps);
# quantizers requantize or share a scale; codecs that are neither (top-k) fall back to an
# all-gather of payloads.
REDUCERS: tuple[Row, ...] = (
    Row("lowrank", lambda codec, strategy, feedback: codec.low_rank() is not None, LowRank, factor_rounds),
    Row("allgather", lambda codec, strategy, feedback: strategy == "allgather", GatherSum, gather_pieces),
    Row(
        "dense",
        lambda codec, strategy, feedback: _adds(codec) and codec.traits.lossless and not feedback,
        DenseAdd,
    ),
    Row(
        "sparse",
        lambda codec, strategy, feedback: _adds(codec) and _float_values(codec) and not feedback,
        SparseAdd,
    ),  # fmt: skip
    Row("direct", lambda codec, strategy, feedback: _adds(codec), DirectAdd),
    Row("shared_scale", lambda codec, strategy, feedback: strategy == "shared_scale", SharedScale),
    Row("requantize", lambda codec, strategy, feedback: codec.traits.requantizable, Requantize),
    Row("allgather", lambda codec, strategy, feedback: True, GatherSum, gather_pieces),
)


def choose(codec: Codec, strategy: str, feedback: bool = False) -> Row:
    """The first row of :data:`REDUCERS` that applies to ``codec`` under ``strategy``."""
    return next(row for row in REDUCERS if row.applies(codec, strategy, feedback))
