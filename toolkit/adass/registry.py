"""Name -> factory registries for plug-ins, built from spec strings such as ``qsgd:bits=4,bucket=512``.

A spec is ``NAME`` or ``NAME:key=value,key=value``. Each registered factory declares its parameters
once (type, default, bounds, one-line doc); parsing, validation, ``--help`` text and dashboard
widgets all come from that declaration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import param

from .options import Param, SpecError

__all__ = ["Entry", "Param", "Registry", "Spec", "SpecError", "parse_spec", "value_text"]


@dataclass(frozen=True)
class Spec:
    """A parsed spec: the plug-in name and its raw ``key=value`` arguments (strings).

    A first argument without ``=`` (``idx:DIR``, ``svmlight:PATH,test=PATH``) is kept as ``path``.
    """

    name: str
    args: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        if not self.args:
            return self.name
        parts = [v if k == "path" and i == 0 else f"{k}={v}" for i, (k, v) in enumerate(self.args.items())]
        return self.name + ":" + ",".join(parts)


def parse_spec(text: str, kind: str = "spec") -> Spec:
    """Split ``NAME:key=value,...`` into a Spec; a malformed string raises SpecError."""
    text = str(text).strip()
    if not text:
        raise SpecError(f"{kind}: an empty spec is not allowed")
    name, _, rest = text.partition(":")
    name = name.strip()
    args: dict[str, str] = {}
    if rest.strip():
        for i, part in enumerate(rest.split(",")):
            key, sep, value = part.partition("=")
            key = key.strip()
            if i == 0 and not sep and key:
                key, sep, value = "path", "=", part
            if not sep or not key:
                raise SpecError(f"{kind}: {text!r}: expected key=value after ':', got {part!r}")
            if key in args:
                raise SpecError(f"{kind}: {text!r}: {key} given twice")
            args[key] = value.strip()
    return Spec(name, args)


@dataclass(frozen=True)
class Entry:
    """A registered factory with its declared parameters."""

    name: str
    factory: Callable[..., Any]
    params: dict[str, Param]
    doc: str

    def usage(self) -> str:
        if not self.params:
            return self.name
        inner = [k.upper() if k == "path" else f"{k}={p.default}" for k, p in self.params.items()]
        return f"{self.name}:{','.join(inner)}"

    def parameterized(self) -> type[param.Parameterized]:
        """A ``param.Parameterized`` class with one Parameter per declared parameter.

        Panel renders it (or an instance of it) as widgets: ``pn.Param(entry.parameterized())``;
        bounds, choices and docs come from the declaration. :meth:`Registry.editor` gives an instance
        holding a spec's values and :meth:`spec` turns values back into a spec.
        """
        attrs: dict[str, Any] = {key: p.parameter() for key, p in self.params.items()}
        attrs["__doc__"] = self.doc
        return type(param.Parameterized)(self.name, (param.Parameterized,), attrs)

    def spec(self, values: dict[str, Any]) -> str:
        """The spec text of ``values`` (parameters left at their default are not written)."""
        args = {
            key: value_text(values[key])
            for key, p in self.params.items()
            if key in values and values[key] != p.default
        }
        return str(Spec(self.name, args))


def value_text(value: Any) -> str:
    """A parameter value as spec text: ``true``/``false``, floats by ``repr`` (they read back equal)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


class Registry:
    """Plug-ins of one kind (``sampler``, ``codec``, ...), looked up by name.

    Examples
    --------
    >>> SAMPLERS = Registry("sampler")
    >>> @SAMPLERS.register("random", ratio=Param(0.5, "kept share", low=0.0, high=1.0))
    ... def make_random(ratio, **context): ...
    >>> SAMPLERS.build("random:ratio=0.3", n=100)
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def register(self, name: str, doc: str = "", **params: Param) -> Callable:
        """Decorator: register ``factory(**params, **context)`` under ``name``."""

        def decorate(factory: Callable) -> Callable:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            text = doc or ((factory.__doc__ or "").strip().splitlines() or [""])[0]
            self._entries[name] = Entry(name, factory, dict(params), text)
            return factory

        return decorate

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries[n] for n in self.names())

    def entry(self, name: str) -> Entry:
        if name not in self._entries:
            raise SpecError(f"{self.kind}: {name!r} is not allowed; expected one of {'|'.join(self.names())}")
        return self._entries[name]

    def resolve(self, spec: str | Spec) -> tuple[Entry, dict[str, Any]]:
        """Parse and validate a spec; return its entry and the converted parameters (defaults filled)."""
        parsed = spec if isinstance(spec, Spec) else parse_spec(spec, self.kind)
        entry = self.entry(parsed.name)
        owner = f"{self.kind} {str(parsed)!r}"
        unknown = sorted(set(parsed.args) - set(entry.params))
        if "path" in unknown and next(iter(parsed.args)) == "path":
            raise SpecError(
                f"{owner}: expected key=value after ':' (allowed keys: {', '.join(entry.params)})"
            )
        if unknown:
            known = ", ".join(entry.params) or "no parameters"
            raise SpecError(f"{owner}: unknown parameter {unknown[0]!r}; allowed: {known}")
        values = {k: p.default for k, p in entry.params.items()}
        for key, raw in parsed.args.items():
            values[key] = entry.params[key].convert(owner, key, raw)
        return entry, values

    def validate(self, spec: str | Spec) -> str:
        """Check a spec without building it; return it normalised (canonical text)."""
        parsed = spec if isinstance(spec, Spec) else parse_spec(spec, self.kind)
        self.resolve(parsed)
        return str(parsed)

    def editor(self, spec: str | Spec) -> param.Parameterized:
        """An instance of the entry's :meth:`Entry.parameterized` class holding the spec's values."""
        entry, values = self.resolve(spec)
        return entry.parameterized()(**values)

    def build(self, spec: str | Spec, **context: Any) -> Any:
        """Build the plug-in named by ``spec``; ``context`` carries run objects (dataset, seed, ...)."""
        entry, values = self.resolve(spec)
        return entry.factory(**values, **context)

    def help(self, indent: str = "  ") -> str:
        """Every entry with its doc line and, below it, each parameter's default and allowed values."""
        lines = []
        for e in self:
            lines.append(f"{indent}{e.name}" + (f"  - {e.doc}" if e.doc else ""))
            for key, p in e.params.items():
                shown = key.upper() if key == "path" else f"{key}={p.default}"
                lines.append(f"{indent}    {shown:<22} {p.allowed()}" + (f"; {p.doc}" if p.doc else ""))
        return "\n".join(lines)
