"""The report's PNG plots, drawn with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import pandas as pd  # noqa: E402

__all__ = ["bar_plot", "line_plot"]


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def bar_plot(path: Path, labels: Sequence[str], values: Sequence[float], errors: Sequence[float], ylabel: str,
             title: str, line: float | None = None, line_label: str = "") -> Path:  # fmt: skip
    """Horizontal bars with error bars (NaN errors draw none), and an optional vertical target line."""
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(labels) + 1.5))
    errors = [0.0 if pd.isna(e) else e for e in errors]
    ax.barh(range(len(labels)), values, xerr=errors, color="tab:blue", alpha=0.8, capsize=3)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(ylabel)
    ax.set_title(title, fontsize=10)
    if line is not None:
        ax.axvline(line, color="tab:red", linestyle="--", label=line_label)
        ax.legend(fontsize=8)
    return _save(fig, path)


_MARKERS = ("o", "s", "^")
_STYLES = ("-", "--", ":")


def line_plot(path: Path, frame: pd.DataFrame, x: str, y: str, group: str, xlabel: str, ylabel: str, title: str,
              logx: bool = False, yerr: str | None = None, line: float | None = None, line_label: str = "") -> Path:  # fmt: skip
    """One line per value of ``group``: ``y`` against ``x``, with error bars from ``yerr``."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for i, (name, part) in enumerate(frame.groupby(group, sort=False)):
        part = part.sort_values(x)
        errors = None if yerr is None else part[yerr].fillna(0.0)
        # ten colours; past them the line style and marker change too, so no two lines look alike
        ax.errorbar(part[x], part[y], yerr=errors, color=f"C{i % 10}", marker=_MARKERS[i // 10 % len(_MARKERS)],
                    linestyle=_STYLES[i // 10 % len(_STYLES)], capsize=3, label=str(name))  # fmt: skip
    if logx:  # ticks at the measured points, written plainly (2, 4, 8; 0.001, 0.01, 0.1)
        ax.set_xscale("log")
        ticks = sorted(frame[x].dropna().unique())
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
    if line is not None:
        ax.axhline(line, color="tab:red", linestyle="--", label=line_label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return _save(fig, path)
