"""Which reducer a ring uses, from the capabilities a codec declares and the ring's strategy: the
first row of :data:`REDUCERS` whose condition holds.

>>> from adass.codecs import make_codec
>>> [choose(make_codec(c), "requantize").name for c in ("fp32", "fp16", "randk", "qsgd", "topk")]
['dense', 'direct', 'sparse', 'requantize', 'allgather']
>>> choose(make_codec("qsgd"), "shared_scale").name
'shared_scale'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...codecs import Codec
from .allgather import AllGather
from .dense import DenseAdd
from .direct import DirectAdd
from .reducer import Reducer
from .requantize import Requantize
from .shared import SharedScale
from .sparse import SparseAdd

__all__ = ["REDUCERS", "Row", "choose"]


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
        Built once per step.
    """

    name: str
    applies: Callable[[Codec, str, bool], bool]
    build: type[Reducer]


def _adds(codec: Codec) -> bool:
    """Payloads add as they are, with no scale to agree on (fp32/fp16/bf16, random-k)."""
    return codec.summable and not codec.needs_shared_scale


def _float_values(codec: Codec) -> bool:
    """Coordinates follow from the chunk key and the kept values travel as float32 (random-k)."""
    keyed = codec.keyed_values()
    return keyed is not None and keyed.values is None


# Summable codecs that need no scale add directly under either strategy, since there is nothing to
# agree on: lossless ones (fp32) as raw values summed in place (unless a memory must see the share:
# momentum correction, mc(fp32), is then a direct add), plain random-k as its kept values
# summed in place (with error feedback, its encoded share, whose residual the memory keeps);
# quantizers requantize or share a scale; codecs that are neither (top-k) fall back to an
# all-gather of payloads.
REDUCERS: tuple[Row, ...] = (
    Row("allgather", lambda codec, strategy, feedback: strategy == "allgather", AllGather),
    Row(
        "dense", lambda codec, strategy, feedback: _adds(codec) and codec.lossless and not feedback, DenseAdd
    ),
    Row(
        "sparse",
        lambda codec, strategy, feedback: _adds(codec) and _float_values(codec) and not feedback,
        SparseAdd,
    ),  # fmt: skip
    Row("direct", lambda codec, strategy, feedback: _adds(codec), DirectAdd),
    Row("shared_scale", lambda codec, strategy, feedback: strategy == "shared_scale", SharedScale),
    Row("requantize", lambda codec, strategy, feedback: codec.requantizable, Requantize),
    Row("allgather", lambda codec, strategy, feedback: True, AllGather),
)


def choose(codec: Codec, strategy: str, feedback: bool = False) -> Row:
    """The first row of :data:`REDUCERS` that applies to ``codec`` under ``strategy``."""
    return next(row for row in REDUCERS if row.applies(codec, strategy, feedback))
