"""Codec kernels: the pure-torch reference, or fused numba loops for the hot paths.

``use("fused")`` (the default where numba imports) routes QSGD encode and decode at 2, 4 and 8 bits and
random-k's gather and scatter and the tail of its coordinate draws (after torch's own uniform and
log1p) through single-pass numba loops (``fused.py``), and a ring hop's
QSGD requantize and shared-scale code sum through ``ring.py``; ``use("reference")``
keeps every codec on its pure-torch code. The environment variable ``ADASS_CODEC_KERNELS``
(``reference`` or ``fused``) sets the choice at import. Both give bit-identical payloads for the
same key. The fused loops run on the CPU only: CUDA tensors, other widths and float64 math always
take the reference.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["KERNELS", "active", "available", "fused_enabled", "use", "using"]

KERNELS = ("reference", "fused")


def available() -> bool:
    """Whether numba imports, so that the fused kernels can run."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _from_environment() -> str:
    """``ADASS_CODEC_KERNELS`` if set (checked), else ``"fused"`` where numba imports."""
    chosen = os.environ.get("ADASS_CODEC_KERNELS", "").strip()
    if not chosen:
        return "fused" if available() else "reference"
    if chosen not in KERNELS:
        raise ValueError(f"ADASS_CODEC_KERNELS={chosen!r} unknown; expected one of {KERNELS}")
    if chosen == "fused" and not available():
        raise RuntimeError("ADASS_CODEC_KERNELS=fused needs numba, which does not import here")
    return chosen


_state = {"kernels": _from_environment()}


def use(kernels: str) -> str:
    """Select ``"reference"`` or ``"fused"`` codec kernels; returns the previous choice."""
    if kernels not in KERNELS:
        raise ValueError(f"codec kernels {kernels!r} unknown; expected one of {KERNELS}")
    if kernels == "fused" and not available():
        raise RuntimeError("fused codec kernels need numba, which does not import here")
    previous, _state["kernels"] = _state["kernels"], kernels
    return previous


def active() -> str:
    """The codec kernels in use: ``"reference"`` or ``"fused"``."""
    return _state["kernels"]


def fused_enabled() -> bool:
    """Whether the fused kernels are selected (and numba is there)."""
    return _state["kernels"] == "fused"


@contextmanager
def using(kernels: str) -> Iterator[None]:
    """``use(kernels)`` for the duration of a ``with`` block (not thread-local)."""
    previous = use(kernels)
    try:
        yield
    finally:
        use(previous)
