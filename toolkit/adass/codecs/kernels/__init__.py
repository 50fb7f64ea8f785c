"""Codec kernels: the pure-torch reference, or fused numba loops for the hot paths.

A codec fixes its kernels when it is built (``Codec.kernels``; ``make_codec(spec, kernels=...)``);
its methods read that choice and nothing else, so codecs with different choices may run side by
side, on threads too. ``"fused"`` routes QSGD encode and decode at 2, 4 and 8 bits, random-k's
gather and scatter and the tail of its coordinate draws (after torch's own uniform and log1p),
``sharedk``'s choice of coordinates and the delay-aware momentum memory through single-pass numba
loops (``fused.py``, ``select.py``), and a ring hop's QSGD requantize and shared-scale code sum
through ``ring.py``; ``"reference"`` keeps the codec on its pure-torch code. Both give bit-identical
payloads for the same key. The fused loops run on the CPU only: CUDA tensors, other widths and
float64 math always take the reference.

A codec built without a choice takes the default: the environment variable ``ADASS_CODEC_KERNELS``
(``reference`` or ``fused``, read at import), else ``fused`` where numba imports; ``use`` changes the
default for codecs built afterwards (never for codecs already built).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["FUSED", "KERNELS", "REFERENCE", "active", "available", "check", "choose", "use", "using"]

REFERENCE, FUSED = "reference", "fused"
KERNELS = (REFERENCE, FUSED)


def available() -> bool:
    """Whether numba imports, so that the fused kernels can run."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def check(kernels: str) -> str:
    """``kernels`` if it names kernels that can run here.

    Raises
    ------
    ValueError
        Not one of :data:`KERNELS`.
    RuntimeError
        ``"fused"`` where numba does not import.
    """
    if kernels not in KERNELS:
        raise ValueError(f"codec kernels {kernels!r} unknown; expected one of {KERNELS}")
    if kernels == FUSED and not available():
        raise RuntimeError("fused codec kernels need numba, which does not import here")
    return kernels


def _from_environment() -> str:
    """``ADASS_CODEC_KERNELS`` if set (checked), else ``"fused"`` where numba imports."""
    chosen = os.environ.get("ADASS_CODEC_KERNELS", "").strip()
    if not chosen:
        return FUSED if available() else REFERENCE
    if chosen not in KERNELS:
        raise ValueError(f"ADASS_CODEC_KERNELS={chosen!r} unknown; expected one of {KERNELS}")
    if chosen == FUSED and not available():
        raise RuntimeError("ADASS_CODEC_KERNELS=fused needs numba, which does not import here")
    return chosen


_default = {"kernels": _from_environment()}


def choose(kernels: str | None = None) -> str:
    """The kernels a codec being built fixes: ``kernels`` (checked), or the default where None."""
    return _default["kernels"] if kernels is None else check(kernels)


def use(kernels: str) -> str:
    """Make ``kernels`` the default of codecs built from now on; returns the previous default."""
    previous, _default["kernels"] = _default["kernels"], check(kernels)
    return previous


def active() -> str:
    """The default codec kernels: what a codec built now without a choice takes."""
    return _default["kernels"]


@contextmanager
def using(kernels: str) -> Iterator[None]:
    """``use(kernels)`` for the duration of a ``with`` block: the default of the codecs built in it."""
    previous = use(kernels)
    try:
        yield
    finally:
        use(previous)
