"""The live dashboard: option controls, Start/Stop, the live views and the Compare tab, in one page.

A periodic callback in the page's own thread drains the run's :class:`~adass.dashboard.feed.LiveFeed`
into :class:`~adass.dashboard.live_state.LiveState` and sends each changed source of
:mod:`adass.dashboard.views` to its ``hv.streams.Buffer`` or ``hv.streams.Pipe``; nothing touches the
page from the training or Dask threads.

Runs belong to the server's :class:`~adass.dashboard.board.RunBoard`, not to a page: closing a page
leaves its run going, and a page that opens shows the run in progress (any page may stop it). A
view is drawn once its source has something to show; until then a light placeholder says what it
waits for, so an idle page costs the server little to build.
"""

from __future__ import annotations

import html
import logging
import time
from collections.abc import Hashable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import holoviews as hv
import panel as pn
from bokeh.events import ConnectionLost

from ..registry import SpecError
from ..viz.curves import X_AXES
from ..viz.style import HEIGHT, WIDTH
from .background import BackgroundRun, run_colocated, run_world
from .board import RunBoard
from .comparison import RunComparison
from .controls import ConfigControls
from .feed import FeedReader, LiveFeed
from .live_state import LiveState, Part
from .policy import RunPolicy
from .views import VIEWS, Refresh, Source, View

__all__ = ["Dashboard"]

log = logging.getLogger(__name__)

_NO_LINK = "Dask dashboard: starts with the run's cluster"
#: messages one poll takes in at most: a page that opens on a long run catches up over a few polls
_DRAIN = 10_000


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
        Period of the callback that moves records onto the page while it shows a run in progress.
    idle_ms : int
        Its period otherwise (a run started from another page shows in the run list within it): an
        idle page's polls cost the server little, but twenty of them three times a second add up.
    heavy_ms : int
        Least time between redraws of the views whose source is :attr:`Refresh.THROTTLED`.
    views : sequence of View
        The live views (:data:`~adass.dashboard.views.VIEWS` unless told otherwise).
    policy : RunPolicy, optional
        What the page's runs may use (data folders, schedulers, workers); the safe defaults if omitted.
    board : RunBoard, optional
        The server's runs, shared by its pages; the page shows the newest one in progress (a board of
        its own if omitted).
    """

    def __init__(self, runs_dir: str | Path | None = None, scheduler: str = "",
                 defaults: dict[str, Any] | None = None, poll_ms: int = 300, idle_ms: int = 1000, heavy_ms: int = 700,
                 views: Sequence[View] = VIEWS, policy: RunPolicy | None = None,
                 board: RunBoard | None = None) -> None:  # fmt: skip
        self.runs_dir = None if runs_dir is None else Path(runs_dir)
        self.policy = policy if policy is not None else RunPolicy()
        self.poll_ms, self.idle_ms, self.heavy_ms = poll_ms, idle_ms, heavy_ms
        self.table = tuple(views)
        self.sources = tuple(dict.fromkeys(view.source for view in self.table))  # each once, in table order
        self.controls = ConfigControls(
            {**({"scheduler": scheduler} if scheduler else {}), **(defaults or {})}
        )
        self.state = LiveState()
        self.board = board if board is not None else RunBoard()
        self._feed: LiveFeed | None = None
        self._reader: FeedReader | None = None
        self.run: BackgroundRun | None = None
        self._board_version = -1
        self._sent: dict[Source, float] = {}
        self._cost: dict[Source, float] = {}  # seconds the last redraw of each source took
        self._listed = 0.0
        self._dirty: set[Source] = set()
        self._callback: Any = None
        self._build_views()
        self._build_widgets()
        self.compare = RunComparison(self.runs_dir, load=False)  # read when its tab is first shown
        latest = self.board.latest()
        if latest is not None and latest.running:  # a reload, or another tab: show the run in progress
            self.show_run(latest)

    @property
    def feed(self) -> LiveFeed | None:
        """The feed of the run the page shows; setting it replays that feed from its first message."""
        return self._feed

    @feed.setter
    def feed(self, feed: LiveFeed | None) -> None:
        self._feed = feed
        self._reader = None if feed is None else feed.reader()

    # -- construction ------------------------------------------------------------------------
    def _build_views(self) -> None:
        """A stream per source and a DynamicMap per view; a view's pane is made when it is revealed."""
        self.x_axis = pn.widgets.Select(label="x axis", options={v: k for k, v in X_AXES.items()}, value="epoch",
                                        width=200, css_classes=["adass-x-axis"])  # fmt: skip
        #: page controls a view can follow, by the keyword its ``draw`` takes
        self.follows = {"x": hv.streams.Params(self.x_axis, ["value"], rename={"value": "x"})}
        self.streams = {source.name: self._stream(source) for source in self.sources}
        self.views: dict[str, hv.DynamicMap] = {}
        self.panes: dict[str, pn.pane.HoloViews] = {}
        self._shapes: dict[str, Hashable] = {}
        self.cells: dict[str, pn.Column] = {}
        for view in self.table:  # the plot's pane is made when the view is first revealed
            self._show(view, self.streams[view.source.name].data)
            self.cells[view.name] = pn.Column(self._placeholder(view), margin=0)

    def _placeholder(self, view: View) -> pn.pane.HTML:
        """What a view shows until its source has data: its name and what it waits for, at its size."""
        text = f"<b>{html.escape(view.name)}</b><br>{html.escape(view.source.waiting(self.state))}"
        return pn.pane.HTML(text, width=WIDTH, height=HEIGHT, margin=(5, 10),
                            css_classes=["adass-waiting", f"adass-waiting-{view.name}"],
                            styles={"border": "1px dashed #bbb", "color": "#666", "padding": "8px"})  # fmt: skip

    def _reveal(self, view: View) -> None:
        """Put ``view``'s plot in its place (once its source has something to show)."""
        if view.name not in self.panes:
            # each view has axes of its own (Panel would link axes whose dimensions share a name)
            self.panes[view.name] = pn.pane.HoloViews(self.views[view.name], sizing_mode="fixed",
                                                      linked_axes=False)  # fmt: skip
        cell = self.cells[view.name]
        if cell.objects[0] is not self.panes[view.name]:
            cell.objects = [self.panes[view.name]]

    def _conceal(self) -> None:
        """Every view back to its placeholder (a new run, nothing arrived yet)."""
        for view in self.table:
            self.cells[view.name].objects = [self._placeholder(view)]

    def _stream(self, source: Source) -> hv.streams.Stream:
        """A Buffer that new rows are appended to, or a Pipe that is sent the whole data each time."""
        empty = source.read(self.state)  # nothing has arrived yet
        if source.refresh is Refresh.APPEND:
            return hv.streams.Buffer(empty, length=1_000_000, index=False)
        return hv.streams.Pipe(data=empty)

    def _show(self, view: View, data: Any) -> None:
        """Give ``view``'s pane a DynamicMap, unless it has one that can draw ``data`` already."""
        shape = view.shape(data) if view.shape is not None else None
        if view.name in self.views and self._shapes[view.name] == shape:
            return
        streams = [self.streams[view.source.name], *(self.follows[name] for name in view.follows)]
        self.views[view.name] = hv.DynamicMap(partial(_draw, view.draw), streams=streams)
        if view.name in self.panes:
            self.panes[view.name].object = self.views[view.name]
        self._shapes[view.name] = shape

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
        self.link = pn.pane.HTML(_NO_LINK, css_classes=["adass-dask-link"], visible=False)
        self._picking = False
        self.runs_shown = pn.widgets.Select(label="runs of this server", options={}, visible=False, width=320,
                                            css_classes=["adass-runs"])  # fmt: skip
        self.runs_shown.param.watch(self._picked, "value")

    # -- actions -----------------------------------------------------------------------------
    def start(self, event: Any = None) -> None:
        """Validate the options and start a run in the background; a bad option shows in the page."""
        if self.run is not None and self.run.running:
            return
        try:
            config = self.controls.config()
        except SpecError as err:
            self._show_error(str(err))
            return
        self.alert.visible = False
        save = self.runs_dir if self.save.value and self.runs_dir is not None else None
        run = BackgroundRun(config, LiveFeed(), save_dir=save, policy=self.policy)
        log.info("starting run %s", run.run_id)
        self.board.add(run)
        run.start()
        self.show_run(run)
        self.status.object = f"**status:** starting {html.escape(run.run_id)}"

    def show_run(self, run: BackgroundRun) -> None:
        """Show ``run`` from its first message on (a run started here, elsewhere, or earlier)."""
        config = run.config
        world = run_world(config)
        servers = config.servers if world else 0  # the ranks that are not replicas
        self.clear(world, servers, config.optim.epochs, run_colocated(config))
        self.link.visible = config.backend == "dask"  # replicas on threads have no Dask dashboard
        self.run = run
        self.feed = run.feed
        self.alert.visible = False
        self._set_running(
            True
        )  # until its Done message is read (a replay of a finished run reads it at once)
        self._board_version = -1  # the run list names the run shown

    def clear(
        self, world: int = 0, servers: int = 0, epochs: int = 0, held: dict[int, int] | None = None
    ) -> None:
        """Forget the previous run; the views show the empty state at the next poll.

        ``world``, ``servers``, ``epochs`` and ``held`` describe the next run (see :meth:`LiveState.reset`).
        """
        self.state.reset(world, servers, epochs, held)
        # a Dask link only while a distributed run has its cluster
        self.link.param.update(object=_NO_LINK, visible=world > 0)
        for source in self.sources:
            if source.refresh is Refresh.APPEND:
                self.streams[source.name].clear()
        self._dirty = {source for source in self.sources if source.refresh is not Refresh.APPEND}
        self._sent.clear()
        self._conceal()

    def stop(self, event: Any = None) -> None:
        """Ask the current run to stop (after its current step in-process, its current epoch on Dask)."""
        if self.run is not None and self.run.running:
            self.run.stop()
            self.stop_button.disabled = True
            self.status.object = "**status:** stopping"

    def poll(self) -> None:
        """Move queued records into the views; the periodic callback calls this in the page's thread."""
        if self.board.version != self._board_version:
            self._list_runs()
        if self._reader is None:
            return
        changed = self.state.apply(self._reader.drain(_DRAIN))
        self._dirty |= {source for source in self.sources if source.parts & changed}
        now = time.monotonic()
        for source in self.sources:
            if source in self._dirty and self._due(source, now) and source.ready(self.state):
                self._dirty.discard(source)
                self._sent[source] = now
                self._send(source, source.read(self.state))
                self._cost[source] = time.monotonic() - now
                now = time.monotonic()
        if Part.LINK in changed and self.state.dashboard_link:
            url = html.escape(self.state.dashboard_link)
            self.link.object = f'Dask dashboard: <a href="{url}" target="_blank">{url}</a>'
        if Part.ERROR in changed:
            self._show_error(self.state.error)
        if Part.STATUS in changed:
            self.status.object = f"**status:** {html.escape(self.state.status)}"
        if self.state.done:
            self._finished()
        if Part.STATUS in changed and time.monotonic() - self._listed >= 1.0:  # how far the shown run is
            self._list_runs()

    def _due(self, source: Source, now: float) -> bool:
        """Whether ``source`` may be redrawn now: a throttled one ``heavy_ms`` after its last redraw,
        and any one no sooner than twice what that redraw cost (a fast run's page spends at most a
        third of the server's time on one view, and other pages and clicks get the rest)."""
        wait_s = self.heavy_ms / 1000 if source.refresh is Refresh.THROTTLED else 0.0
        return now - self._sent.get(source, -1e9) >= max(wait_s, 2 * self._cost.get(source, 0.0))

    def _send(self, source: Source, data: Any) -> None:
        stream = self.streams[source.name]
        stream.update(data=data)  # before any new DynamicMap, which draws from the stream's data
        for view in self.table:
            if view.source is source:
                self._show(view, data)
                self._reveal(view)
        hv.streams.Stream.trigger([stream])

    def _finished(self) -> None:
        self.state.done = False
        if self.run is not None:
            self.run.join(5.0)  # its last message is sent from the thread's final lines
        if self.state.dashboard_link:  # the run's cluster is gone with it: no dead link to follow
            url = html.escape(self.state.dashboard_link)
            self.link.object = f"Dask dashboard: closed with its run (was {url})"
        self._set_running(False)
        self._list_runs()  # the run list says how it ended
        if self.save.value and self.runs_dir is not None:
            self.compare.reload()

    def _list_runs(self) -> None:
        """The server's runs in the run picker, the one shown selected."""
        self._board_version = self.board.version
        self._listed = time.monotonic()
        runs = self.board.runs()
        self._picking = True
        try:
            self.runs_shown.param.update(options={r.label(): r.run_id for r in runs},
                                         value=self.run.run_id if self.run is not None else None,
                                         visible=bool(runs))  # fmt: skip
        finally:
            self._picking = False

    def _picked(self, event: Any) -> None:
        """Another run was picked: show it."""
        run = self.board.get(event.new) if event.new else None
        if not self._picking and run is not None and run is not self.run:
            self.show_run(run)

    def _set_running(self, running: bool) -> None:
        self.start_button.disabled = running
        self.stop_button.disabled = not running
        self.controls.set_disabled(running)
        if self._callback is not None:
            self._callback.period = self._period()

    def _period(self) -> int:
        """Milliseconds between polls: ``poll_ms`` while the page shows a run going on, else ``idle_ms``."""
        return self.idle_ms if self.stop_button.disabled else self.poll_ms

    def _show_error(self, text: str) -> None:
        log.error("dashboard: %s", text)
        self.alert.param.update(object=f"**error:** {html.escape(text)}", visible=True)

    # -- page --------------------------------------------------------------------------------
    def attach(self) -> None:
        """Start polling in the current document; a closed page stops polling, its run goes on."""
        self._callback = pn.state.add_periodic_callback(self.poll, period=self._period())
        if pn.state.curdoc is not None:  # served: this page's session only
            # a closed or reloaded tab drops its connection: stop drawing for it then, not when its
            # session is discarded minutes later
            pn.state.curdoc.on_event(ConnectionLost, lambda _event: self.close())
            pn.state.curdoc.on_session_destroyed(lambda _context: self.close())

    def close(self) -> None:
        """Stop polling; the run goes on (it belongs to the server's board: a page that opens shows it)."""
        if self._callback is not None:
            self._callback.stop()
            self._callback = None

    def panel(self) -> pn.viewable.Viewable:
        """The whole page: controls on the left, Live and Compare tabs on the right."""
        sidebar = pn.Column(
            pn.pane.Markdown("## adass\nadaptive sample selection, live"),
            pn.Row(self.start_button, self.stop_button), self.save, self.status, self.alert, self.runs_shown,
            self.link,
            self.controls.view(), width=340,
        )  # fmt: skip
        places: dict[int, dict[int, list[pn.Column]]] = {}
        for view in self.table:
            places.setdefault(view.row, {}).setdefault(view.column, []).append(self.cells[view.name])
        rows = [
            pn.Row(*(cell[0] if len(cell) == 1 else pn.Column(*cell) for _, cell in sorted(row.items())))
            for _, row in sorted(places.items())
        ]
        live = pn.Column(pn.Row(self.x_axis), *rows)
        tabs = pn.Tabs(("Live", live), ("Compare", self.compare.view()), dynamic=True)  # drawn when shown
        tabs.param.watch(self._tab_shown, "active")
        return pn.Row(sidebar, tabs)

    def _tab_shown(self, event: Any) -> None:
        if event.new == 1 and not self.compare.loaded:
            self.compare.reload()


def _draw(draw: Any, data: Any, **follows: Any) -> hv.Element:
    """A DynamicMap callback: the stream's data and the followed controls, handed to a view's ``draw``."""
    return draw(data, **follows)
