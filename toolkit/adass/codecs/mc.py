"""Momentum correction around any codec: ``mc(SPEC)`` is error feedback whose memory also applies
SGD momentum to the worker's own gradient before encoding, and masks the momentum of what a
sparsifier sent (Lin et al., "Deep Gradient Compression", ICLR 2018; see ``momentum.py``).

An exchange keeps the memory as it keeps ``ef(SPEC)``'s (``error_feedback()``); since the memory
owns the momentum, the optimizer must step without it (``Exchange.take_momentum``). ``dmc(SPEC)``
is the delay-aware variant (``sent_momentum.py``), whose velocity only what is sent renews.
"""

from __future__ import annotations

from .ef import ErrorFeedback
from .momentum import MomentumMemory
from .sent_momentum import SentMomentumMemory

__all__ = ["DelayAwareMomentumCorrection", "MomentumCorrection"]


class MomentumCorrection(ErrorFeedback):
    """Wrap ``inner`` with a :class:`MomentumMemory` (residuals and velocities; momentum factor 0
    until an exchange sets the run's): ``mc(SPEC)``."""

    wrapper = "mc"
    memory_type = MomentumMemory


class DelayAwareMomentumCorrection(ErrorFeedback):
    """Wrap ``inner`` with a :class:`SentMomentumMemory` (velocities only what is sent renews;
    momentum factor 0 until an exchange sets the run's): ``dmc(SPEC)``."""

    wrapper = "dmc"
    memory_type = SentMomentumMemory
