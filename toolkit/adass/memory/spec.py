"""A run's codec and memory from its two options, ``--codec`` and ``--memory``: the one place where
the older spellings that name the memory inside the codec spec are read.

Those spellings are ``NAME(SPEC)`` for any memory ``NAME`` but ``none`` (``ef(topk:ratio=0.01)``,
``mc(...)``, ``dmc(...)``), around the whole spec and once, or ``NAME=true`` on any part of a stack
(``randk:ratio=0.01,scale=false,ef=true+qsgd:bits=8``). ``--memory ef --codec topk:ratio=0.01`` is
the same run as ``--codec 'ef(topk:ratio=0.01)'``; naming a memory both ways is refused.
"""

from __future__ import annotations

from ..codecs import Codec, make_codec
from ..codecs.spec import split_top
from ..registry import Param, SpecError, parse_spec
from .base import MEMORIES, Memory

__all__ = ["build_pair", "make_memory", "split_memory"]

NONE = "none"  # the memory that builds nothing


def _aliases() -> list[str]:
    """The memories a codec spec may name: every registered one but ``none``."""
    return [name for name in MEMORIES.names() if name != NONE]


def _listed(items: list[str]) -> str:
    """``a, b and c``."""
    return " and ".join(filter(None, [", ".join(items[:-1]), items[-1]]))


def _flag(name: str) -> Param:
    return Param(False, f"wrap the whole spec in memory {name}, {name}(SPEC)")


def _take_flags(part: str) -> tuple[str, set[str]]:
    """Remove ``NAME=true|false`` arguments of memory names from one registry part; return the rest
    and the memories set to true."""
    spec = parse_spec(part, "codec")
    named = set(_aliases()) & spec.args.keys()
    if not named:
        return part, set()
    wanted = {k for k in named if _flag(k).convert(f"codec {part!r}", k, spec.args[k])}
    rest = {k: v for k, v in spec.args.items() if k not in named}
    return str(type(spec)(spec.name, rest)), wanted


def _wrapper(text: str) -> str | None:
    """The memory's name where ``text`` is one ``NAME(...)`` around the whole spec; None otherwise."""
    for name in _aliases():
        if text.startswith(name + "(") and text.endswith(")") and len(split_top(text, "+")) == 1:
            return name
    return None


def _from_codec(text: str) -> tuple[str, str]:
    """``(codec spec, memory name)`` of a codec spec that may name its memory."""
    names = _listed([f"{n}(...)" for n in _aliases()])
    wrapper = _wrapper(text)
    if wrapper is not None:
        inner, memory = _from_codec(text[len(wrapper) + 1 : -1].strip())
        if memory != NONE:
            why = f"{wrapper}(...) is given twice" if memory == wrapper else f"one of {names} at most"
            raise SpecError(f"codec {text!r}: {why}")
        return inner, wrapper
    parts = [p.strip() for p in split_top(text, "+")]
    if any("(" in p for p in parts):
        raise SpecError(f"codec {text!r}: {names} must wrap the whole spec")
    stripped = [_take_flags(p) if p else (p, set()) for p in parts]
    wanted = set().union(*(flags for _, flags in stripped))
    if len(wanted) > 1:
        raise SpecError(f"codec {text!r}: one of {_listed([f'{n}=true' for n in _aliases()])} at most")
    if not wanted:
        return text, NONE
    return "+".join(p for p, _ in stripped), wanted.pop()


def split_memory(codec: str, memory: str = NONE) -> tuple[str, str]:
    """The codec spec and the memory name a run's ``codec`` and ``memory`` options stand for.

    Parameters
    ----------
    codec : str
        A codec spec, which may name its memory (``ef(topk:ratio=0.01)``, ``...,mc=true``).
    memory : str
        A registered memory name (``none``, ``ef``, ``mc``, ``dmc``).

    Returns
    -------
    tuple of str
        ``(codec spec without the memory, memory name)``.

    Raises
    ------
    SpecError
        One line: an unknown memory, a malformed spelling, or a memory named both ways.
    """
    MEMORIES.entry(str(memory).strip())
    text = str(codec).strip()
    if not text:
        raise SpecError("codec: an empty spec is not allowed")
    inner, named = _from_codec(text)
    if named != NONE and memory != NONE:
        raise SpecError(
            f"codec {text!r} names memory {named} and memory {memory} is given too; "
            f"name it once: memory {named}, codec {inner!r}"
        )
    return inner, named if named != NONE else memory


def make_memory(memory: str | Memory | None, codec: Codec) -> Memory | None:
    """The memory ``memory`` names (a built one as it is), checked against ``codec``, with the codec's
    kernels; None for ``none``.

    Raises
    ------
    SpecError
        An unknown memory, or one that cannot work with ``codec`` (one line).
    """
    if memory is None or isinstance(memory, Memory):
        built = memory
    else:
        built = MEMORIES.build(str(memory).strip(), kernels=codec.kernels)
    if built is not None:
        built.check(codec)
    return built


def build_pair(
    codec: str | Codec, memory: str | Memory | None = None, kernels: str | None = None
) -> tuple[Codec, Memory | None]:
    """Build a run's codec and memory from its ``codec`` and ``memory`` options (see
    :func:`split_memory`); a codec built here for a memory is its memory variant (QSGD's
    ``rounding=auto`` rounds to the nearest level).

    Parameters
    ----------
    codec : str or Codec
        A codec spec, which may name its memory the older way; a built codec is used as it is.
    memory : str or Memory, optional
        A memory name, or a built memory (used as it is); None: ``none``.
    kernels : {"reference", "fused"}, optional
        The kernels what is built here fixes (``adass.codecs.kernels``); None: the default now. A
        memory built for a built codec takes the codec's.

    Returns
    -------
    tuple
        ``(codec, memory)``, the memory None for ``none``; the memory is checked against the codec.

    Raises
    ------
    SpecError
        A bad spec, a memory named twice, or a memory that cannot work with the codec (one line).
    """
    given = memory if isinstance(memory, Memory) else None
    name = memory if isinstance(memory, str) else NONE
    if isinstance(codec, str):
        codec_spec, name = split_memory(codec, name)
        if given is not None and name != NONE:
            raise SpecError(f"codec {codec!r} names memory {name}, and a built memory is given too")
        codec = make_codec(codec_spec, kernels, for_memory=given is not None or name != NONE)
    return codec, make_memory(given if given is not None else name, codec)
