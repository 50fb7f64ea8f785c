"""The codec registry and ``make_codec``: spec strings such as ``randk:ratio=0.01+qsgd:bits=8``.

Grammar: ``SPEC := PART ('+' PART)*`` where each ``PART`` is a registry spec (``NAME:key=value,...``).
``A+B`` stacks: the sparsifier ``A`` keeps some values and the codec ``B`` encodes that value vector.
A memory (error feedback, momentum correction) is no part of a codec: ``adass.memory`` builds it
beside one, and reads the older spellings that named it inside the spec (``ef(SPEC)``).
"""

from __future__ import annotations

from typing import Any

from ..registry import Param, Registry, SpecError, value_text
from .base import Codec
from .kernels import choose as choose_kernels

__all__ = ["CODECS", "canonical", "make_codec", "split_top"]

CODECS = Registry("codec")


def canonical(name: str, params: dict[str, Param], values: dict[str, Any]) -> str:
    """The canonical spec string of a registered codec: every declared parameter, in order."""
    if not params:
        return name
    return name + ":" + ",".join(f"{k}={value_text(values[k])}" for k in params)


def split_top(text: str, sep: str) -> list[str]:
    """Split ``text`` on ``sep`` outside parentheses (SpecError where they do not balance)."""
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


def make_codec(spec: str, kernels: str | None = None, *, for_memory: bool = False) -> Codec:
    """Build a codec from a spec string.

    Parameters
    ----------
    spec : str
        ``fp32``, ``fp16``, ``bf16``, ``qsgd:bits=4,bucket=512``, ``randk:ratio=0.01``,
        ``topk:ratio=0.01``, ``sharedk:ratio=0.01``, and stacks such as
        ``randk:ratio=0.01+qsgd:bits=8``.
    kernels : {"reference", "fused"}, optional
        The kernels every part fixes (``Codec.kernels``); None: the default now
        (``ADASS_CODEC_KERNELS``, see ``adass.codecs.kernels``).
    for_memory : bool
        Build the variant a memory encodes with: every part's factory is told, and settings that
        depend on it follow (QSGD's ``rounding=auto`` rounds to the nearest level).

    Returns
    -------
    Codec
        Its ``name`` is the canonical spec; ``make_codec(codec.name)`` builds an equal codec.

    Raises
    ------
    SpecError
        A malformed spec, an unknown codec or parameter, a value out of bounds, or a memory named
        inside the spec (``ef(SPEC)``: ``adass.memory.build_pair`` reads that), in one line.
    """
    text = str(spec).strip()
    if not text:
        raise SpecError("codec: an empty spec is not allowed")
    kernels = choose_kernels(kernels)
    parts = [p.strip() for p in split_top(text, "+")]
    if any(not p for p in parts):
        raise SpecError(f"codec {text!r}: empty part around '+'")
    if any("(" in p for p in parts):
        raise SpecError(
            f"codec {text!r}: NAME(...) names a memory, which is built beside the codec "
            "(--memory, adass.memory.build_pair)"
        )
    codecs = [CODECS.build(p, kernels=kernels, for_memory=for_memory) for p in parts]
    codec = codecs[-1]
    if len(codecs) > 1:
        from .stack import StackCodec

        for outer in reversed(codecs[:-1]):
            codec = StackCodec(outer, codec)
    return codec
