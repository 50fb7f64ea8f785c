"""The live dashboard: option controls, Start/Stop, the live views and the Compare tab, in one page.

A periodic callback in the page's own thread drains the run's :class:`~adass.viz.feed.LiveFeed` into
``hv.streams.Buffer`` (evaluations) and ``hv.streams.Pipe`` s (selection, traffic, steps); nothing
touches the page from the training or Dask threads.
"""

from __future__ import annotations

import html
import logging
import time
from functools import partial
from pathlib import Path
from typing import Any

import holoviews as hv
import panel as pn

from ..registry import SpecError
from .comparison import RunComparison
from .controls import ConfigControls
from .curves import X_AXES, empty_evals, kept_fraction, learning_curve, loss_curves
from .feed import LiveFeed
from .raster import kept_raster
from .runner import BackgroundRun
from .samples import extreme_samples
from .selection import bound_histogram
from .state import LiveState
from .timeline import worker_timeline
from .topology import topology
from .traffic import chunk_bytes, traffic_heatmap

__all__ = ["Dashboard"]

log = logging.getLogger(__name__)


def _samples_view(data: tuple, which: str, images: bool) -> hv.Element:
    selection, dataset = data
    return extreme_samples(selection, dataset if images else None, which=which)


class Dashboard:
    """One page's controls, run and views.

    Parameters
    ----------
    runs_dir : path, optional
        Saved runs to compare; new runs are saved here too while "save" is ticked.
    scheduler : str
        Default Dask scheduler address of the cluster options (empty: an embedded LocalCluster).
    defaults : dict, optional
        Further flat option defaults for the controls.
    poll_ms : int
        Period of the callback that moves records onto the page.
    heavy_ms : int
        Least time between redraws of the traffic and timeline views.
    """

    def __init__(self, runs_dir: str | Path | None = None, scheduler: str = "",
                 defaults: dict[str, Any] | None = None, poll_ms: int = 300, heavy_ms: int = 700) -> None:  # fmt: skip
        self.runs_dir = None if runs_dir is None else Path(runs_dir)
        self.poll_ms, self.heavy_ms = poll_ms, heavy_ms
        self.controls = ConfigControls(
            {**({"scheduler": scheduler} if scheduler else {}), **(defaults or {})}
        )
        self.state = LiveState()
        self.feed: LiveFeed | None = None
        self.run: BackgroundRun | None = None
        self.world = 0
        self._sent: dict[str, float] = {}
        self._dirty: set[str] = set()
        self._callback: Any = None
        self._build_streams()
        self._build_widgets()
        self.compare = RunComparison(self.runs_dir)

    # -- construction ------------------------------------------------------------------------
    def _build_streams(self) -> None:
        self.evals = hv.streams.Buffer(empty_evals(), length=1_000_000, index=False)
        self.x_axis = pn.widgets.Select(label="x axis", options={v: k for k, v in X_AXES.items()}, value="epoch",
                                        width=200, css_classes=["adass-x-axis"])  # fmt: skip
        x_stream = hv.streams.Params(self.x_axis, ["value"], rename={"value": "x"})
        s = self.state
        self.selection_pipe = hv.streams.Pipe(data=s.selection)
        self.grid_pipe = hv.streams.Pipe(data=s.grid)
        self.traffic_pipe = hv.streams.Pipe(data=s.traffic)
        self.steps_pipe = hv.streams.Pipe(data=s.steps)
        dm = hv.DynamicMap
        self.views = {
            "accuracy": dm(
                lambda data, x: learning_curve(data, "test_acc", x), streams=[self.evals, x_stream]
            ),
            "loss": dm(lambda data, x: loss_curves(data, x), streams=[self.evals, x_stream]),
            "kept": dm(lambda data: kept_fraction(data), streams=[self.evals]),
            "bounds": dm(lambda data: bound_histogram(data), streams=[self.selection_pipe]),
            "raster": dm(lambda data: kept_raster(data), streams=[self.grid_pipe]),
            "topology": dm(lambda data: topology(data, self.world), streams=[self.traffic_pipe]),
            "traffic": dm(lambda data: traffic_heatmap(data), streams=[self.traffic_pipe]),
            "chunks": dm(lambda data: chunk_bytes(data), streams=[self.traffic_pipe]),
            "timeline": dm(lambda data: worker_timeline(data), streams=[self.steps_pipe]),
        }
        self.samples_pipe = hv.streams.Pipe(data=(s.selection, None))
        self.hardest = pn.pane.HoloViews(sizing_mode="fixed", linked_axes=False)
        self.easiest = pn.pane.HoloViews(sizing_mode="fixed", linked_axes=False)
        self._images: bool | None = None
        self._sample_views(images=False)

    def _sample_views(self, images: bool) -> None:
        """Easiest/hardest views for image data (strips) or other data (bars); rebuilt only when that changes."""
        if images == self._images:
            return
        self._images = images
        for pane, which in ((self.hardest, "hardest"), (self.easiest, "easiest")):
            view = partial(_samples_view, which=which, images=images)
            pane.object = hv.DynamicMap(view, streams=[self.samples_pipe])

    def _build_widgets(self) -> None:
        self.start_button = pn.widgets.Button(label="Start", color="primary", width=100,
                                              css_classes=["adass-start"])  # fmt: skip
        self.stop_button = pn.widgets.Button(label="Stop", color="danger", width=100, disabled=True,
                                             css_classes=["adass-stop"])  # fmt: skip
        self.start_button.on_click(self.start)
        self.stop_button.on_click(self.stop)
        self.save = pn.widgets.Checkbox(label=f"save runs to {self.runs_dir}", value=self.runs_dir is not None,
                                        visible=self.runs_dir is not None)  # fmt: skip
        self.status = pn.pane.Markdown("**status:** idle", css_classes=["adass-status"], margin=(0, 10))
        self.alert = pn.pane.Alert("", alert_type="danger", visible=False, css_classes=["adass-error"])
        self.link = pn.pane.HTML(
            "Dask dashboard: (starts with a distributed run)", css_classes=["adass-dask-link"]
        )

    # -- actions -----------------------------------------------------------------------------
    def start(self, event: Any = None) -> None:
        """Validate the options and start a run in the background; a bad option shows in the page."""
        if self.run is not None and self.run.running:
            return
        try:
            config = self.controls.config()
            from ..cluster import server_count

            self.world = config.cluster.workers + (server_count(config) if config.cluster.workers else 0)
        except SpecError as err:
            self._show_error(str(err))
            return
        self.alert.visible = False
        self.state.reset()
        self.evals.clear()
        self._dirty = {"selection", "traffic", "steps"}
        self._sent.clear()
        self.feed = LiveFeed()
        save = self.runs_dir if self.save.value and self.runs_dir is not None else None
        self.run = BackgroundRun(config, self.feed, save_dir=save)
        log.info("starting run %s", self.run.run_id)
        self.run.start()
        self._set_running(True)
        self.status.object = f"**status:** starting {html.escape(self.run.run_id)}"

    def stop(self, event: Any = None) -> None:
        """Ask the current run to stop (after its current step in-process, its current epoch on Dask)."""
        if self.run is not None and self.run.running:
            self.run.stop()
            self.stop_button.disabled = True
            self.status.object = "**status:** stopping"

    def poll(self) -> None:
        """Move queued records into the views; the periodic callback calls this in the page's thread."""
        if self.feed is None:
            return
        changed = self.state.apply(self.feed.drain())
        self._dirty |= changed & {"traffic", "steps", "selection"}
        if "eval" in changed:
            self.evals.send(self.state.take_new_evals())
        now = time.monotonic()
        if "dataset" in changed and self.state.dataset is not None:
            self._sample_views(self.state.dataset.is_image)
        if "selection" in self._dirty or "dataset" in changed:
            self._dirty.discard("selection")
            self.selection_pipe.send(self.state.selection)
            self.grid_pipe.send(self.state.grid)
            self.samples_pipe.send((self.state.selection, self.state.dataset))
        for part, pipe, data in (("traffic", self.traffic_pipe, self.state.traffic),
                                 ("steps", self.steps_pipe, self.state.steps)):  # fmt: skip
            if part in self._dirty and now - self._sent.get(part, 0.0) >= self.heavy_ms / 1000:
                self._dirty.discard(part)
                self._sent[part] = now
                pipe.send(data)
        if "link" in changed and self.state.dashboard_link:
            url = html.escape(self.state.dashboard_link)
            self.link.object = f'Dask dashboard: <a href="{url}" target="_blank">{url}</a>'
        if "error" in changed:
            self._show_error(self.state.error)
        if "status" in changed:
            self.status.object = f"**status:** {html.escape(self.state.status)}"
        if self.state.done:
            self._finished()

    def _finished(self) -> None:
        self.state.done = False
        if self.run is not None:
            self.run.join(5.0)  # its last message is sent from the thread's final lines
        self._set_running(False)
        if self.save.value and self.runs_dir is not None:
            self.compare.reload()

    def _set_running(self, running: bool) -> None:
        self.start_button.disabled = running
        self.stop_button.disabled = not running
        self.controls.set_disabled(running)

    def _show_error(self, text: str) -> None:
        log.error("dashboard: %s", text)
        self.alert.param.update(object=f"**error:** {html.escape(text)}", visible=True)

    # -- page --------------------------------------------------------------------------------
    def attach(self) -> None:
        """Start polling in the current document; a closed page stops its run."""
        self._callback = pn.state.add_periodic_callback(self.poll, period=self.poll_ms)
        if pn.state.curdoc is not None:  # served: this page's session only
            pn.state.curdoc.on_session_destroyed(lambda _context: self.close())

    def close(self) -> None:
        """Stop polling and the run (the run's thread tears its cluster down)."""
        if self._callback is not None:
            self._callback.stop()
            self._callback = None
        if self.run is not None:
            self.run.stop()

    def panel(self) -> pn.viewable.Viewable:
        """The whole page: controls on the left, Live and Compare tabs on the right."""
        # each view has axes of its own (Panel would link axes whose dimensions share a name)
        v = {
            name: pn.pane.HoloViews(view, sizing_mode="fixed", linked_axes=False)
            for name, view in self.views.items()
        }
        sidebar = pn.Column(
            pn.pane.Markdown("## adass\nadaptive sample selection, live"),
            pn.Row(self.start_button, self.stop_button), self.save, self.status, self.alert, self.link,
            self.controls.view(), width=340,
        )  # fmt: skip
        live = pn.Column(
            pn.Row(self.x_axis),
            pn.Row(v["accuracy"], v["loss"], v["kept"]),
            pn.Row(v["bounds"], v["raster"], pn.Column(self.hardest, self.easiest)),
            pn.Row(v["topology"], v["traffic"], v["chunks"]),
            pn.Row(v["timeline"]),
        )  # fmt: skip
        tabs = pn.Tabs(("Live", live), ("Compare", self.compare.view()), dynamic=False)
        return pn.Row(sidebar, tabs)
