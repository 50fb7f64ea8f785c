"""The codec registry and ``make_codec``: spec strings such as ``ef(randk:ratio=0.01+qsgd:bits=8)``.

Grammar: ``SPEC := ef(SPEC) | PART ('+' PART)*`` where each ``PART`` is a registry spec
(``NAME:key=value,...``). ``A+B`` stacks: the sparsifier ``A`` keeps some values and the codec ``B``
encodes that value vector. A part may also carry ``ef=true``, which wraps the whole spec in ``ef(...)``.
"""

from __future__ import annotations

from typing import Any

from ..registry import Param, Registry, SpecError, parse_spec, value_text
from .base import Codec

__all__ = ["CODECS", "canonical", "make_codec"]

CODECS = Registry("codec")
EF = Param(False, "wrap the whole spec in error feedback, ef(SPEC)")


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


def _take_ef(part: str) -> tuple[str, bool]:
    """Remove an ``ef=...`` argument from one registry part; return the rest and its value."""
    spec = parse_spec(part, "codec")
    if "ef" not in spec.args:
        return part, False
    value = EF.convert(f"codec {part!r}", "ef", spec.args["ef"])
    rest = {k: v for k, v in spec.args.items() if k != "ef"}
    return str(type(spec)(spec.name, rest)), value


def make_codec(spec: str) -> Codec:
    """Build a codec from a spec string.

    Parameters
    ----------
    spec : str
        ``fp32``, ``fp16``, ``bf16``, ``qsgd:bits=4,bucket=512``, ``randk:ratio=0.01``,
        ``topk:ratio=0.01``, stacks such as ``randk:ratio=0.01+qsgd:bits=8``, and error feedback
        ``ef(SPEC)`` (or ``ef=true`` on any part).

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
    if text.startswith("ef(") and text.endswith(")") and len(_split_top(text, "+")) == 1:
        from .ef import ErrorFeedback

        inner = make_codec(text[3:-1])
        if isinstance(inner, ErrorFeedback):
            raise SpecError(f"codec {text!r}: ef(...) is given twice")
        return ErrorFeedback(inner)
    parts = [p.strip() for p in _split_top(text, "+")]
    if any(not p for p in parts):
        raise SpecError(f"codec {text!r}: empty part around '+'")
    if any("(" in p for p in parts):
        raise SpecError(f"codec {text!r}: ef(...) must wrap the whole spec")
    stripped = [_take_ef(p) for p in parts]
    wrap = any(flag for _, flag in stripped)
    codecs = [CODECS.build(p) for p, _ in stripped]
    codec = codecs[-1]
    if len(codecs) > 1:
        from .stack import StackCodec

        for outer in reversed(codecs[:-1]):
            codec = StackCodec(outer, codec)
    if wrap:
        from .ef import ErrorFeedback

        codec = ErrorFeedback(codec)
    return codec
