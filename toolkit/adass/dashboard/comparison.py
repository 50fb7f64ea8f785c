"""The Compare tab: pick saved runs under a folder and overlay one of their curves."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import panel as pn

from ..viz.curves import METRICS, X_AXES
from ..viz.runs import find_runs, load_descriptions, load_evals, overlay_runs, run_outcomes

__all__ = ["RunComparison"]

log = logging.getLogger(__name__)


class RunComparison:
    """Widgets and an overlay plot over the runs saved under ``runs_dir``.

    Parameters
    ----------
    runs_dir : path, optional
        Folder searched for run folders (``config.json`` + ``eval.parquet``); without it the tab says
        how to give one.
    load : bool
        Look for runs now; otherwise at the first :meth:`reload` (a page reads its folder when the tab
        is first shown, so pages that never show it cost nothing).
    """

    def __init__(self, runs_dir: str | Path | None = None, load: bool = True) -> None:
        self.runs_dir = None if runs_dir is None else Path(runs_dir)
        self.runs: dict[str, Path] = {}
        self.outcomes: dict[str, str] = {}  # how each run ended; a run that did not finish is marked
        self.evals: dict[str, pd.DataFrame] = {}
        self.chosen = pn.widgets.MultiChoice(label="runs", options=[], sizing_mode="stretch_width",
                                             css_classes=["adass-compare-runs"])  # fmt: skip
        self.y = pn.widgets.Select(
            label="metric", options={v: k for k, v in METRICS.items()}, value="test_acc", width=180
        )
        self.x = pn.widgets.Select(
            label="against", options={v: k for k, v in X_AXES.items()}, value="epoch", width=180
        )
        self.reload_button = pn.widgets.Button(label="Reload runs", color="default", width=120)
        self.reload_button.on_click(lambda _event: self.reload())
        self.table = pn.pane.DataFrame(
            pd.DataFrame(columns=["run", "what"]), index=False, sizing_mode="stretch_width"
        )
        self.message = pn.pane.Alert("", alert_type="warning", visible=False)
        self.plot = pn.pane.HoloViews(overlay_runs({}), sizing_mode="fixed")
        for widget in (self.chosen, self.y, self.x):
            widget.param.watch(lambda _event: self.redraw(), "value")
        self.loaded = False
        if load:
            self.reload()

    def reload(self) -> None:
        """Look for run folders again (a run saved from the Live tab shows up here)."""
        self.loaded = True
        if self.runs_dir is None:
            self._say("Start the dashboard with --runs DIR to compare saved runs.")
            return
        known = set(self.runs)
        try:
            self.runs = find_runs(self.runs_dir)
            descriptions = load_descriptions(self.runs)
            self.outcomes = run_outcomes(self.runs)
        except (OSError, ValueError) as err:
            log.error("reading runs under %s: %s", self.runs_dir, err)
            self._say(f"--runs: {err}", "danger")
            return
        self.evals = {k: v for k, v in self.evals.items() if k in self.runs}
        self.table.object = pd.DataFrame({"run": list(descriptions), "what": list(descriptions.values())})
        # keep the choice, and add the runs saved since the last look (a run just finished shows at once)
        new = [name for name in self.runs if name not in known] if known else []
        chosen = [c for c in self.chosen.value if c in self.runs] + new or list(self.runs)[:4]
        self.chosen.param.update(options=list(self.runs), value=chosen)
        if not self.runs:
            self._say(f"No saved runs under {self.runs_dir} yet.")
        else:
            self.message.visible = False
        self.redraw()

    def redraw(self) -> None:
        """Overlay the chosen runs' curves."""
        try:
            for name in self.chosen.value:
                if name not in self.evals:
                    self.evals.update(load_evals({name: self.runs[name]}))
        except (OSError, ValueError, KeyError) as err:
            log.error("loading a saved run: %s", err)
            self._say(f"could not read a run: {err}", "danger")
            return
        self.plot.object = overlay_runs(
            {self._label(n): self.evals[n] for n in self.chosen.value}, self.y.value, self.x.value
        )

    def _label(self, name: str) -> str:
        """The run's name in the legend, with how it ended when it did not finish."""
        ended = self.outcomes.get(name, "finished")
        return name if ended == "finished" else f"{name} ({ended.upper()})"

    def _say(self, text: str, kind: str = "warning") -> None:
        self.message.param.update(object=text, alert_type=kind, visible=True)

    def view(self) -> pn.Column:
        """The tab: run picker, metric and axis choice, the overlay and a line per run."""
        return pn.Column(
            pn.Row(self.chosen, self.y, self.x, self.reload_button, sizing_mode="stretch_width"),
            self.message, self.plot, self.table, sizing_mode="stretch_width",
        )  # fmt: skip
