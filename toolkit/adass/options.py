"""What an option accepts: one parser, one bounds check and one description for every ``param.Parameter``.

Run options (the sections of :mod:`adass.config`), the commands' own options (:mod:`adass.cli`) and
plug-in parameters (:class:`Param`, declared with ``@REGISTRY.register``) are all ``param``
Parameters, so a flag, a spec argument and a dashboard widget accept the same values and fail with
the same one-line message.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import param

__all__ = [
    "AUTO",
    "AutoInteger",
    "Param",
    "SpecError",
    "allowed",
    "check_value",
    "parse",
    "parse_bool",
    "parse_int",
    "parse_number",
    "within",
]

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class SpecError(ValueError):
    """A spec string or option value that cannot be used; the message is one line for the user."""


#: the word an :class:`AutoInteger` takes for "the owner decides"
AUTO = "auto"


class AutoInteger(param.Parameter):
    """An integer within ``bounds``, or the word ``auto``: the owner chooses the count itself."""

    __slots__ = ["bounds"]

    def __init__(self, default: Any = AUTO, *, bounds: tuple[float | None, float | None] = (None, None),
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(default=default, **kwargs)
        self.bounds = bounds


def parse_bool(raw: Any) -> bool:
    """``True``/``False``, or one of 1/true/yes/on and 0/false/no/off in any case; ValueError otherwise."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise ValueError(raw)


#: how a number is written in text: ASCII digits, an optional sign, point and exponent, or a word
#: for nan/infinity (they parse, so that the bounds check can name them); no underscores, no digits
#: of other scripts (Python's ``int`` and ``float`` take both, so ``１０`` and ``1_0`` passed)
_NUMBER_TEXT = re.compile(r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|nan|inf|infinity)",
                          re.IGNORECASE)  # fmt: skip
#: how an integer is written in text: ASCII digits with an optional sign, nothing else (``1e1`` and
#: ``3.0`` are refused where ``1.5`` is: an integer option takes what it says)
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_ASCII_SPACE = " \t\n\r\f\v"


def _text(raw: Any, pattern: re.Pattern[str]) -> str | None:
    """``raw`` with ASCII blanks around it stripped when it is text; ValueError unless it is written as
    ``pattern`` says. None for a value that is not text (a Python or NumPy number)."""
    if not isinstance(raw, str):
        return None
    text = raw.strip(_ASCII_SPACE)
    if not pattern.fullmatch(text):
        raise ValueError(raw)
    return text


def parse_number(raw: Any) -> float:
    """A float from a number or its ASCII text (``0.1``, ``1e-3``; ``nan`` and ``inf`` parse, the
    bounds check rejects them); ValueError for other text."""
    text = _text(raw, _NUMBER_TEXT)
    return float(raw if text is None else text)


def parse_int(raw: Any) -> int:
    """An int from an integral number (``3``, ``3.0``) or from text of ASCII digits with an optional
    sign (``3``, ``-2``); ValueError otherwise (``1e1``, ``3.0``, ``1_000`` and ``１０`` as text)."""
    text = _text(raw, _INTEGER_TEXT)
    if text is not None:
        return int(text)
    if isinstance(raw, int):
        return int(raw)
    as_float = float(raw)
    if not as_float.is_integer():  # also false for nan and inf
        raise ValueError(raw)
    return int(as_float)


def _parse_choice(p: param.Selector, raw: Any) -> Any:
    """Read ``raw`` as the type of the choices (``resnet:depth=20`` compares 20, not "20")."""
    objects = list(p.objects)
    if objects and all(isinstance(o, bool) for o in objects):
        return parse_bool(raw)
    if objects and all(isinstance(o, int) and not isinstance(o, bool) for o in objects):
        return parse_int(raw)
    if objects and all(isinstance(o, (int, float)) and not isinstance(o, bool) for o in objects):
        return parse_number(raw)
    return raw if raw in objects else str(raw).strip()


def parse(p: param.Parameter, raw: Any) -> Any:
    """``raw`` (text from a flag or a spec, or a Python value) as the parameter's type; ValueError
    or TypeError when it cannot be read as one."""
    if isinstance(p, param.Boolean):
        return parse_bool(raw)
    if isinstance(p, AutoInteger):
        return AUTO if isinstance(raw, str) and raw.strip().lower() == AUTO else parse_int(raw)
    if isinstance(p, param.Integer):
        return parse_int(raw)
    if isinstance(p, param.Number):
        return parse_number(raw)
    if isinstance(p, param.Selector):
        return _parse_choice(p, raw)
    if isinstance(p, param.List):
        return [str(item) for item in (raw if isinstance(raw, (list, tuple)) else [raw])]
    if isinstance(p, (param.String, param.Path)):
        return str(raw)
    return raw


def _within_bounds(p: param.Number, value: float) -> bool:
    lo, hi = p.bounds or (None, None)
    if math.isnan(value):
        return False  # every comparison with nan is false, so it would pass any bounds
    if math.isinf(value) and value not in (lo, hi):
        return False  # infinity only where a bound says so explicitly
    return (lo is None or value >= lo) and (hi is None or value <= hi)


def within(p: param.Parameter, value: Any) -> bool:
    """Whether a parsed value lies in the parameter's bounds or choices."""
    if isinstance(p, AutoInteger):
        return value == AUTO or _within_bounds(p, value)
    if isinstance(p, param.Number) and not isinstance(p, param.Boolean):
        return _within_bounds(p, value)
    if isinstance(p, param.Selector):
        return value in p.objects
    if isinstance(p, param.Foldername):
        path = Path(value)
        return path.is_dir() or (not p.check_exists and not path.exists())
    return True


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _interval(bounds: tuple[float | None, float | None]) -> str:
    """``[1, 16]``; a missing bound is open (``[0, inf)``: every finite number from 0)."""
    lo, hi = bounds
    left = "(-inf" if lo is None else f"[{_fmt(lo)}"
    right = "inf)" if hi is None else f"{_fmt(hi)}]"
    return f"{left}, {right}"


def allowed(p: param.Parameter) -> str:
    """What values a parameter accepts, in words (``an integer in [1, 16]``, ``one of max|l2``)."""
    if isinstance(p, param.Selector):
        return "one of " + "|".join(map(str, p.objects))
    if isinstance(p, param.Boolean):
        return "true|false"
    if isinstance(p, AutoInteger):
        return f"{AUTO} or an integer in {_interval(p.bounds)}"
    if isinstance(p, param.Number):
        kind = "an integer" if isinstance(p, param.Integer) else "a number"
        bounds = p.bounds or (None, None)
        if bounds == (None, None):
            return kind if isinstance(p, param.Integer) else "a finite number"
        return f"{kind} in {_interval(bounds)}"
    if isinstance(p, param.Foldername):
        return "an existing folder" if p.check_exists else "a folder"
    if isinstance(p, param.List):
        return "one or more values"
    return "a string"


def check_value(p: param.Parameter, raw: Any, where: str, key: str | None = None) -> Any:
    """Parse and check one value; raise SpecError with one line naming ``where``, the value and what
    is allowed.

    Parameters
    ----------
    p : param.Parameter
        The option's definition.
    raw : Any
        Text from a flag or spec, or a Python value.
    where : str
        What the message starts with: a flag (``--lr``) or a plug-in (``codec 'qsgd:bits=0'``).
    key : str, optional
        The plug-in parameter, shown as ``key=value``.

    Examples
    --------
    >>> check_value(param.Integer(8, bounds=(1, 16)), "4", "codec 'qsgd'", "bits")
    4
    >>> check_value(param.Number(0.1, bounds=(0, 1)), "nan", "--ratio")
    Traceback (most recent call last):
    ...
    adass.options.SpecError: --ratio: nan is not allowed; expected a number in [0, 1]
    """
    try:
        value = parse(p, raw)
    except (TypeError, ValueError):
        shown = repr(raw)  # could not be read at all: quote it
    else:
        if within(p, value):
            return value
        shown = str(raw)
    what = shown if key is None else f"{key}={shown}"
    raise SpecError(f"{where}: {what} is not allowed; expected {allowed(p)}")


@dataclass(frozen=True)
class Param:
    """One parameter of a plug-in, declared in a line: default, bounds or choices, and a one-line doc.

    The type is taken from ``default`` unless ``kind`` is given (``int``, ``float``, ``bool``,
    ``str``); a default of ``"auto"`` with ``kind=int`` declares an :class:`AutoInteger`.
    :meth:`parameter` gives the equivalent ``param.Parameter``, which is what values are checked
    against, so plug-in parameters and run options share one parser and one bounds check.

    Examples
    --------
    >>> bits = Param(8, "bits per code", low=1, high=16)
    >>> bits.convert("codec 'qsgd'", "bits", "4"), bits.allowed()
    (4, 'an integer in [1, 16]')
    """

    default: Any
    doc: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    kind: type | None = None

    @property
    def type(self) -> type:
        if self.kind is not None:
            return self.kind
        return type(self.default) if self.default is not None else str

    def parameter(self) -> param.Parameter:
        """A new ``param.Parameter`` with this default, bounds or choices and doc (one per owner class)."""
        if self.choices is not None:
            return param.Selector(default=self.default, objects=list(self.choices), doc=self.doc)
        kind = self.type
        if kind is int and self.default == AUTO:
            return AutoInteger(AUTO, bounds=(self.low, self.high), doc=self.doc)
        if kind is bool:
            return param.Boolean(self.default, doc=self.doc)
        if kind is int:
            return param.Integer(self.default, bounds=(self.low, self.high), doc=self.doc)
        if kind is float:
            return param.Number(self.default, bounds=(self.low, self.high), doc=self.doc)
        return param.String(self.default, doc=self.doc)

    @cached_property
    def definition(self) -> param.Parameter:
        """The parameter values are checked against (unowned; :meth:`parameter` makes one to own)."""
        return self.parameter()

    def allowed(self) -> str:
        """What values are allowed, in words; used in error messages and help."""
        return allowed(self.definition)

    def convert(self, owner: str, key: str, raw: Any) -> Any:
        """Parse and check one value; raise SpecError naming ``owner`` and ``key``."""
        return check_value(self.definition, raw, owner, key)
