"""Memories: what an exchange keeps around a worker's own share from step to step, beside the codec
that encodes it: none, error feedback (``ef``), momentum correction (``mc``) and its delay-aware
variant (``dmc``).

Build a run's pair with ``build_pair("topk:ratio=0.01", "ef")`` (or the older
``build_pair("ef(topk:ratio=0.01)")``); the protocol and the ``MEMORIES`` registry live in
``base.py``, one policy per module.
"""

from . import dmc, ef, mc, none  # noqa: F401  (each module registers its memory)
from .base import MEMORIES, Memory
from .dmc import DelayAwareMomentumCorrection
from .ef import ErrorFeedback
from .mc import MomentumCorrection
from .own import compensate, encode_own
from .paired import Paired
from .spec import build_pair, make_memory, split_memory

__all__ = [
    "MEMORIES",
    "DelayAwareMomentumCorrection",
    "ErrorFeedback",
    "Memory",
    "Paired",
    "MomentumCorrection",
    "build_pair",
    "compensate",
    "encode_own",
    "make_memory",
    "split_memory",
]
