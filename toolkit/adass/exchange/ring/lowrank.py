"""The ring's schedule for a low-rank codec (``powersgd``): a step is two ring all-reduces of dense
float32 vectors, the ``P`` factors (with the layers that travel whole) and then the ``Q`` factors,
each the fp32 ring's own reduce-scatter and all-gather (:class:`~.dense.DenseAdd` driven by
:func:`~.schedule.reduce_pieces`) over a layout of its own length. The math between the rounds is
the codec's, in the order ``adass.exchange.lowrank`` gives; during the codec's warm-up the whole
gradient goes round once as fp32 would.

Traffic records name the rounds: ``p.reduce_scatter``, ``p.all_gather``, ``q.reduce_scatter`` and
``q.all_gather`` (plain ``reduce_scatter`` and ``all_gather`` during the warm-up); their raw bytes
are the fp32 ring's for the same hops, counted in round ``p``, so wire over raw is the saving.
Sample counts ride in both rounds (the two float32 slots after each reduce-scatter piece), so the
owner of each piece scales its sum to the step's total and every rank gets the weighted mean
without knowing the total.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from ..chunking import ChunkLayout, Piece
from ..lowrank import ROUNDS, factored_step
from ..transport import Transfer
from .dense import DenseAdd
from .hops import Hops
from .reducer import Context, Reducer, Weighting
from .schedule import reduce_pieces

__all__ = ["LowRank", "factor_rounds"]


class LowRank(Reducer):
    """A rank's share of a low-rank step: its ``x`` and weighting, and the context the rounds' dense
    reducers are built from (the rounds set ``total`` as the fp32 ring would)."""

    def __init__(self, ctx: Context, x: torch.Tensor, weighting: Weighting, pieces: list[Piece]) -> None:
        super().__init__(ctx, x, weighting, pieces)
        self.ctx = ctx

    def dense(self, vector: torch.Tensor, weighting: Weighting, layout: ChunkLayout) -> DenseAdd:
        """The fp32 ring's reducer for ``vector`` over ``layout``; a fresh workspace per round where
        the ring keeps one (the two rounds differ in length)."""
        workspace = None if self.ctx.workspace is None else _fresh
        return DenseAdd(
            replace(self.ctx, memory=None, workspace=workspace), vector, weighting, layout.all_pieces()
        )


def _fresh(size: int, device: torch.device) -> torch.Tensor:
    return torch.empty(size, dtype=torch.float32, device=device)


def _named(hops: Hops, round_name: str, layout: ChunkLayout) -> Hops:
    """``hops`` whose transfers are recorded under ``round_name.<phase>``, with the raw bytes the
    fp32 ring sends on the same hop for the same chunk of the gradient (``layout``) in round ``p``
    and none in round ``q``: a step's raw bytes are fp32's, its wire bytes the factors'."""

    def meta(phase: str, hop: int, chunk: int) -> Transfer:
        lo, hi = layout.chunks[chunk]
        raw = 4 * (hi - lo) if round_name == ROUNDS[0] else 0
        return replace(hops.meta(phase, hop, chunk), phase=f"{round_name}.{phase}", raw_bytes=raw)

    return replace(hops, meta=meta)


def factor_rounds(hops: Hops, layout: ChunkLayout, reducer: LowRank, out: torch.Tensor) -> None:
    """One ring step of a low-rank codec into ``out``: the whole gradient during the warm-up,
    else the two factor rounds."""
    if not reducer.codec.low_rank().begin_step():
        dense = reducer.dense(reducer.x, reducer.w, layout)
        reduce_pieces(hops, layout, dense, out)
        reducer.total = dense.total
        reducer.codec.low_rank().warm(out, reducer.key(0, 0))
        return
    w = reducer.w
    # shares enter the mean at weight 1 with their counts, so each round's owner scales to the total
    counted = Weighting(1.0, w.count, w.hint)

    def reduction(round_name: str, vector: torch.Tensor) -> torch.Tensor:
        sub = ChunkLayout(vector.numel(), hops.world)
        dense = reducer.dense(vector, counted, sub)
        summed = torch.empty_like(vector)
        reduce_pieces(_named(hops, round_name, layout), sub, dense, summed)
        reducer.total = dense.total if dense.total is not None else reducer.total
        return summed

    with hops.clock.encoding:
        share = reducer.x * w.weight
    factored_step(
        reducer.codec, reducer.memory, share, reducer.key(0, 0), reduction, out, w.weight, hops.clock
    )
