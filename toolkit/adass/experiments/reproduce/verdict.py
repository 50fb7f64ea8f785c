"""A claim's verdict from its checks: ``holds``, ``does not hold`` or ``holds only when ...``.

A check is one goal measured in one setting (``when``: a dataset, a replica count, an arm). A setting
passes when all its checks pass; the claim holds when every setting passes and does not hold when none
does. Checks may also name the data set they ran on (``setting``): a claim measured on several data
sets gets a verdict per data set (:func:`verdicts`). Accuracy goals compare seed means (:func:`mean_se` gives the standard error reported beside them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

__all__ = ["Check", "brief", "checks_table", "deficit_pts", "mean_se", "plus_minus", "verdict", "verdicts"]


@dataclass(frozen=True)
class Check:
    """One goal in one setting.

    Attributes
    ----------
    when : str
        The setting (``mnist5k``, ``P=4``, ``bits=4, shared_scale, ef``).
    goal : str
        What is asked, with its target (``accuracy within 0.5 points of fp32``).
    passed : bool
        Whether the measured numbers meet it.
    measured : str
        The numbers, with their standard errors.
    setting : str
        The data set the numbers come from, where a claim runs on several ("": the claim's only one).
    """

    when: str
    goal: str
    passed: bool
    measured: str
    setting: str = ""


def verdict(checks: Sequence[Check]) -> str:
    """The one-line verdict of a claim.

    Parameters
    ----------
    checks : sequence of Check
        Every check of the claim; settings keep their first-seen order.

    Returns
    -------
    str
        ``holds`` when every setting passes, ``does not hold`` when none does (or there are no
        checks), else ``holds only when A; B`` naming the settings that pass.

    Examples
    --------
    >>> verdict([Check("P=2", "ring faster", True, ""), Check("P=4", "ring faster", False, "")])
    'holds only when P=2'
    """
    settings: dict[str, bool] = {}
    for check in checks:
        settings[check.when] = settings.get(check.when, True) and bool(check.passed)
    passing = [when for when, ok in settings.items() if ok]
    if settings and len(passing) == len(settings):
        return "holds"
    if not passing:
        return "does not hold"
    return "holds only when " + "; ".join(passing)


def brief(checks: Sequence[Check]) -> str:
    """The verdict of :func:`verdict` in a few words, for the report's summary table.

    Settings named ``GROUP, ARM`` (``ratio 0.1, dmc``) are counted per group instead of listed: a
    summary cell that names fifteen arms is read by nobody; the claim's own section lists them.

    Examples
    --------
    >>> brief([Check("ratio 0.1, ef", "g", True, ""), Check("ratio 0.1, mc", "g", False, ""),
    ...        Check("ratio 0.01, ef", "g", False, "")])
    'holds only at ratio 0.1 (1 of 2 arms)'
    >>> brief([Check("P=2", "ring faster", True, ""), Check("P=4", "ring faster", False, "")])
    'holds only when P=2'
    """
    text = verdict(checks)
    whens = list(dict.fromkeys(c.when for c in checks))
    if not text.startswith("holds only when") or not all(", " in w for w in whens):
        return text
    passing = set(text.removeprefix("holds only when ").split("; "))
    groups: dict[str, list[bool]] = {}
    for when in whens:
        groups.setdefault(when.split(", ")[0], []).append(when in passing)
    parts = [f"{group} ({sum(ok)} of {len(ok)} arms)" for group, ok in groups.items() if any(ok)]
    return "holds only at " + " and ".join(parts)


def verdicts(checks: Sequence[Check]) -> dict[str, str]:
    """The verdict of each data set's checks, in first-seen order (one entry, ``""``, where no check
    names one).

    Examples
    --------
    >>> verdicts([Check("4 bits", "within 0.5", True, "", "mnist5k"),
    ...           Check("4 bits", "within 0.5", False, "", "hard")])
    {'mnist5k': 'holds', 'hard': 'does not hold'}
    """
    groups: dict[str, list[Check]] = {}
    for check in checks:
        groups.setdefault(check.setting, []).append(check)
    return {setting: verdict(group) for setting, group in groups.items()} or {"": verdict([])}


def mean_se(values: Sequence[float] | pd.Series) -> tuple[float, float]:
    """Mean and standard error (sample spread over the root of the count; NaN for one value)."""
    series = pd.Series(values, dtype=float).dropna()
    if series.empty:
        return float("nan"), float("nan")
    se = float(series.std(ddof=1) / math.sqrt(len(series))) if len(series) > 1 else float("nan")
    return float(series.mean()), se


def plus_minus(mean: float, se: float) -> str:
    """``+0.12 ± 0.05``, or ``+0.12 (one seed)`` where there is no standard error."""
    return f"{mean:+.2f} ± {se:.2f}" if se == se else f"{mean:+.2f} (one seed)"


def deficit_pts(reference: pd.Series, arm: pd.Series) -> tuple[float, float]:
    """How many accuracy points ``arm`` is below ``reference`` on average, with its standard error.

    Both are accuracies (0..1) indexed by seed; the difference of the seed means is reported with the
    standard error of the per-seed differences (paired: the same seed shares data and initial weights).
    """
    paired = (reference - arm).dropna()
    mean, se = mean_se(100 * paired)
    return mean, se


def checks_table(checks: Sequence[Check]) -> pd.DataFrame:
    """The checks as a table: ``when``, ``goal``, ``met`` (yes/no) and ``measured``, after a ``setting``
    column where checks name their data sets."""
    columns = ["when", "goal", "met", "measured"]
    if any(c.setting for c in checks):
        columns.insert(0, "setting")
    return pd.DataFrame(
        [{"setting": c.setting, "when": c.when, "goal": c.goal, "met": "yes" if c.passed else "no",
          "measured": c.measured} for c in checks],
        columns=columns,
    )  # fmt: skip
