"""The codec registry and ``make_codec``: spec strings such as ``ef(randk:ratio=0.01+qsgd:bits=8)``.

Grammar: ``SPEC := ef(SPEC) | mc(SPEC) | dmc(SPEC) | PART ('+' PART)*`` where each ``PART`` is a registry spec
(``NAME:key=value,...``). ``A+B`` stacks: the sparsifier ``A`` keeps some values and the codec ``B``
encodes that value vector. ``ef(...)`` is error feedback (``ef.py``), ``mc(...)`` momentum
correction and ``dmc(...)`` its delay-aware variant (``mc.py``); one wrapper at most. A part may
also carry ``ef=true``, ``mc=true`` or ``dmc=true``, which wraps the whole spec the same way.
"""

from __future__ import annotations

from typing import Any

from ..registry import Param, Registry, SpecError, parse_spec, value_text
from .base import Codec
from .kernels import choose as choose_kernels

__all__ = ["CODECS", "canonical", "make_codec"]

CODECS = Registry("codec")
WRAP_FLAGS = {
    "ef": Param(False, "wrap the whole spec in error feedback, ef(SPEC)"),
    "mc": Param(False, "wrap the whole spec in momentum correction, mc(SPEC)"),
    "dmc": Param(False, "wrap the whole spec in delay-aware momentum correction, dmc(SPEC)"),
}


def _wrapper(name: str) -> type[Codec]:
    """The class of the whole-spec wrapper ``name(SPEC)``."""
    from .ef import ErrorFeedback
    from .mc import DelayAwareMomentumCorrection, MomentumCorrection

    return {"ef": ErrorFeedback, "mc": MomentumCorrection, "dmc": DelayAwareMomentumCorrection}[name]


def canonical(name: str, params: dict[str, Param], values: dict[str, Any]) -> str:
    """The canonical spec string of a registered codec: every declared parameter, in order."""
    if not params:
        return name
    return name + ":" + ",".join(f"{k}={value_text(values[k])}" for k in params)


def _split_top(text: str, sep: str) -> list[str]:
    """Split ``text`` on ``sep`` outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SpecError(f"codec {text!r}: unbalanced ')'")
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise SpecError(f"codec {text!r}: unbalanced '('")
    parts.append(text[start:])
    return parts


def _take_flags(part: str) -> tuple[str, set[str]]:
    """Remove ``ef=...`` and ``mc=...`` arguments from one registry part; return the rest and the
    wrappers set to true."""
    spec = parse_spec(part, "codec")
    if not WRAP_FLAGS.keys() & spec.args.keys():
        return part, set()
    wraps = {
        k for k, p in WRAP_FLAGS.items() if k in spec.args and p.convert(f"codec {part!r}", k, spec.args[k])
    }
    rest = {k: v for k, v in spec.args.items() if k not in WRAP_FLAGS}
    return str(type(spec)(spec.name, rest)), wraps


def _wrapped(text: str) -> str | None:
    """The wrapper's name where ``text`` is one ``ef(...)`` or ``mc(...)``; None otherwise."""
    for name in WRAP_FLAGS:
        if text.startswith(name + "(") and text.endswith(")") and len(_split_top(text, "+")) == 1:
            return name
    return None


def make_codec(spec: str, kernels: str | None = None) -> Codec:
    """Build a codec from a spec string.

    Parameters
    ----------
    spec : str
        ``fp32``, ``fp16``, ``bf16``, ``qsgd:bits=4,bucket=512``, ``randk:ratio=0.01``,
        ``topk:ratio=0.01``, stacks such as ``randk:ratio=0.01+qsgd:bits=8``, error feedback
        ``ef(SPEC)`` and momentum correction ``mc(SPEC)`` (or ``ef=true``/``mc=true`` on any part).
    kernels : {"reference", "fused"}, optional
        The kernels every part fixes (``Codec.kernels``); None: the default now
        (``ADASS_CODEC_KERNELS``, see ``adass.codecs.kernels``).

    Returns
    -------
    Codec
        Its ``name`` is the canonical spec; ``make_codec(codec.name)`` builds an equal codec.

    Raises
    ------
    SpecError
        A malformed spec, an unknown codec or parameter, or a value out of bounds (one line).
    """
    text = str(spec).strip()
    if not text:
        raise SpecError("codec: an empty spec is not allowed")
    kernels = choose_kernels(kernels)
    wrapper = _wrapped(text)
    if wrapper is not None:
        inner = make_codec(text[len(wrapper) + 1 : -1], kernels)
        if inner.error_feedback()[1] is not None:
            twice = inner.name.startswith(wrapper + "(")
            raise SpecError(
                f"codec {text!r}: "
                + (
                    f"{wrapper}(...) is given twice"
                    if twice
                    else "one of ef(...), mc(...) and dmc(...) at most"
                )
            )
        return _wrapper(wrapper)(inner)
    parts = [p.strip() for p in _split_top(text, "+")]
    if any(not p for p in parts):
        raise SpecError(f"codec {text!r}: empty part around '+'")
    if any("(" in p for p in parts):
        raise SpecError(f"codec {text!r}: ef(...), mc(...) and dmc(...) must wrap the whole spec")
    stripped = [_take_flags(p) for p in parts]
    wraps = set().union(*(flags for _, flags in stripped))
    if len(wraps) > 1:
        raise SpecError(f"codec {text!r}: one of ef=true, mc=true and dmc=true at most")
    codecs = [CODECS.build(p, kernels=kernels) for p, _ in stripped]
    codec = codecs[-1]
    if len(codecs) > 1:
        from .stack import StackCodec

        for outer in reversed(codecs[:-1]):
            codec = StackCodec(outer, codec)
    for name in wraps:
        codec = _wrapper(name)(codec)
    return codec
