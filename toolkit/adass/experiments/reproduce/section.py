"""What a claim's experiments hand to the report: text, tables, plots, checks and the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ...tables import markdown_table
from .verdict import Check, brief, checks_table, verdicts

__all__ = ["Section"]


@dataclass
class Section:
    """One claim's part of the report.

    Attributes
    ----------
    key : str
        Short name; CSV files are ``<key>_<table>.csv``.
    claim : str
        The claim as the thesis states it.
    lines : list of str
        Markdown: what ran and the tables, in order.
    tables : dict
        Table name -> frame, written as CSV.
    plots : list of str
        PNG files under ``plots/``.
    checks : list of Check
        The goals the verdict is computed from.
    not_run : list of str
        Arms left out because their codec is not in this build, with the reason.
    extra : str
        Appended to the verdict line (numbers reported beside it, e.g. the communication share).
    """

    key: str
    claim: str
    lines: list[str] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    plots: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    extra: str = ""

    @property
    def verdict(self) -> str:
        """The claim's verdict, or ``set: verdict; set: verdict`` where it ran on several data sets."""
        by_setting = verdicts(self.checks)
        if len(by_setting) == 1:
            return next(iter(by_setting.values()))
        return "; ".join(f"{setting}: {text}" for setting, text in by_setting.items())

    def briefs(self) -> dict[str, str]:
        """The verdict of each data set in a few words (:func:`~.verdict.brief`); ``""`` keys the
        claim's only one."""
        groups: dict[str, list[Check]] = {}
        for check in self.checks:
            groups.setdefault(check.setting, []).append(check)
        return {setting: brief(group) for setting, group in groups.items()} or {"": brief([])}

    def markdown(self, number: int) -> list[str]:
        """The section as report lines, ending with its goals and the one-line verdict."""
        out = [f"## Claim {number}: {self.claim}", "", *self.lines]
        if self.not_run:
            out += ["Arms not run (their codecs are not in this build):", "",
                    *[f"- `{text}`" for text in self.not_run], ""]  # fmt: skip
        for name in self.plots:
            out += [f"![{name}](plots/{name})", ""]
        out += ["Goals (seed means; `±` is the standard error over seeds):", "",
                markdown_table(checks_table(self.checks)), ""]  # fmt: skip
        tail = f" ({self.extra})" if self.extra else ""
        by_setting = verdicts(self.checks)
        if len(by_setting) == 1:
            out += [f"**Verdict, claim {number}: {self.verdict}**{tail}", ""]
        else:  # one line per data set: a verdict holds or fails on each
            for setting, text in by_setting.items():
                out += [f"**Verdict, claim {number}, {setting}: {text}**", ""]
            out += [self.extra, ""] if self.extra else []
        return out
