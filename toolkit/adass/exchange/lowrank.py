"""How an exchange drives a low-rank codec (``powersgd``) through one step: two reductions of dense
float32 vectors, ``P`` (with the layers that travel whole) then ``Q``, around this rank's memory.

The exchange brings the reduction (a ring all-reduce, or a push to the servers and a pull back) and
names the rounds in its traffic records (``p.`` and ``q.`` before its own phase names); this file
holds the order of the math, the same for every exchange:

1. ``c = memory.compensate(share)``; ``f = codec.factorize(c)``; round ``p`` reduces ``f.first``;
2. ``q = f.second(p_sum)`` (every rank orthonormalizes the same sum alike); round ``q`` reduces ``q``;
3. ``f.expand(q_sum, out)`` writes the result; the codec keeps ``Q`` for the next step's warm start;
   the memory keeps ``c - weight * result`` (this rank's part of what the low-rank result left out,
   as torch's hook keeps ``input - output`` for every worker).

During the codec's warm-up the exchange reduces the whole gradient as fp32 instead, and the memory
is left alone.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..codecs import Codec
from ..codecs.base import ChunkKey
from ..memory import Memory
from .base import require
from .link import CodecClock

__all__ = ["ROUNDS", "Reduction", "check_low_rank", "factored_step"]

#: the two rounds of a compressed step, as their traffic phases begin
ROUNDS = ("p", "q")

#: ``reduction(round, vector)``: the weighted mean over ranks of every rank's ``vector``, the same
#: bits on every rank
Reduction = Callable[[str, torch.Tensor], torch.Tensor]


def check_low_rank(owner: str, codec: Codec, memory: Memory | None) -> None:
    """Raise SpecError unless ``memory`` can sit around the low-rank ``codec``: none, or plain error
    feedback (a memory that reads only sent coordinates, or owns the momentum, has no place here)."""
    require(
        memory is None or (not memory.owns_momentum and not memory.reads_sent_only),
        f"{owner}: memory {getattr(memory, 'name', '')!r} around codec {codec.name!r}: a low-rank "
        "codec takes error feedback (--memory ef) or none",
    )


def factored_step(
    codec: Codec, memory: Memory | None, share: torch.Tensor, key: ChunkKey, reduction: Reduction,
    out: torch.Tensor, weight: float, clock: CodecClock,
) -> None:  # fmt: skip
    """One compressed step of this rank's ``share`` (its flat gradient as it enters the mean), with
    the result written into ``out``.

    Parameters
    ----------
    codec : Codec
        A low-rank codec past its warm-up (``codec.low_rank().begin_step()`` said so).
    memory : Memory or None
        Error feedback around this rank's share, under ``key``.
    share, key
        This rank's weighted gradient and the step's key (chunk 0: the whole gradient).
    reduction : Reduction
        The exchange's weighted mean of a vector over ranks.
    out : Tensor
        (numel,) float32 for the result; may not be ``share``.
    weight : float
        What the mean multiplies ``share`` by, relative to the result: the memory keeps
        ``compensated - weight * result``.
    clock : CodecClock
        Times the math (``encoding`` before each round, ``decoding`` after the last).
    """
    low_rank = codec.low_rank()
    with clock.encoding:
        compensated = share if memory is None else memory.compensate(share, key)
        step = low_rank.factorize(compensated, key)
    p_sum = reduction(ROUNDS[0], step.first)
    with clock.encoding:
        q = step.second(p_sum)
    q_sum = reduction(ROUNDS[1], q)
    with clock.decoding:
        low_rank.keep(step.expand(q_sum, out))
        if memory is not None:
            memory.update(compensated, out * weight, key)
