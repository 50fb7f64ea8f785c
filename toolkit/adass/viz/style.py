"""Shared look of the views: sizes, phase colours, byte formatting and a hook that names a figure.

Importing this module registers HoloViews' Bokeh backend (without notebook output), so the views'
options validate in scripts, tests and served apps alike; notebooks still call ``hv.extension``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import holoviews.plotting.bokeh  # noqa: F401  (registers the backend the options below belong to)
from bokeh.models import CustomJSTickFormatter

__all__ = [
    "HEIGHT",
    "NO_EXCHANGE",
    "PHASE_COLORS",
    "WIDTH",
    "byte_ticks",
    "human_bytes",
    "last_steps_text",
    "named",
]

#: the title of every traffic view of a run that trains in one process: it sends nothing
NO_EXCHANGE = "no exchange: one process"
WIDTH = 420
HEIGHT = 260

#: Colours of the per-step phases in the worker timeline, in the order a step runs them.
PHASE_COLORS: dict[str, str] = {
    "compute": "#4c72b0",
    "encode": "#dd8452",
    "comm": "#c44e52",
    "decode": "#8172b3",
}


def human_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 kB'`` (powers of 1000, like network rates)."""
    value = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


#: Byte ticks in the browser, in the manner of :func:`human_bytes`, but read as one scale: every tick
#: of an axis takes the unit of the largest and as many decimals as the spacing needs, so neighbours
#: never print the same text (1.2 MB, 1.2 MB, 1.3 MB); ticks between whole bytes stay blank
_BYTES_JS = """
const units = ["B", "kB", "MB", "GB", "TB"];
let top = 0;
for (const t of ticks) top = Math.max(top, Math.abs(t));
let i = 0, scale = 1;
while (top / scale >= 1000 && i < units.length - 1) { scale *= 1000; i += 1; }
let step = Infinity;
for (let k = 1; k < ticks.length; k++) step = Math.min(step, Math.abs(ticks[k] - ticks[k - 1]));
const needed = (s) => isFinite(step) && step > 0 ? Math.max(0, Math.ceil(-Math.log10(step / s) - 1e-9)) : 1;
while (i > 0 && needed(scale) > 3) { scale /= 1000; i -= 1; }  // fine steps: a smaller unit
if (i == 0) return Number.isInteger(tick) ? Math.round(tick) + 0 + " B" : "";  // + 0: no "-0 B"
return (tick / scale).toFixed(needed(scale)) + " " + units[i];
"""


def byte_ticks() -> CustomJSTickFormatter:
    """A Bokeh tick formatter that writes byte counts as :func:`human_bytes` does (``1.4 MB``)."""
    return CustomJSTickFormatter(code=_BYTES_JS)


def last_steps_text(steps: int) -> str:
    """``'last 48 steps'`` (``'last step'`` for one): how much of a run a view shows, for its title."""
    return "last step" if steps == 1 else f"last {steps} steps"


def named(name: str) -> Callable[[Any, Any], None]:
    """A HoloViews plot hook that sets the Bokeh figure's ``name`` (tests and scripts find it by that)."""

    def hook(plot: Any, element: Any) -> None:
        plot.state.name = name

    return hook
