"""The dashboard page without a browser: Start/Stop, errors, and records reaching every view of the table."""

import logging
import time
import warnings

import holoviews as hv
import panel as pn
import torch
from bokeh.models import ColumnDataSource
from synthetic_records import eval_records, ring_traffic, selection_frame, step_rows

from adass.dashboard import (
    VIEWS,
    Dashboard,
    DaskLink,
    DatasetLoaded,
    EvalDone,
    LiveFeed,
    RunBoard,
    SelectionFrame,
    StepRows,
    TrafficRows,
    View,
)
from adass.dashboard.views import STEPS
from adass.data import Dataset
from adass.viz import find_runs

TINY = {
    "data": "synthetic:n=120,d=4,classes=3,test=30",
    "model": "mlp:hidden=8",
    "batch_size": 16,
    "epochs": 2,
}


def rows_per_source(plot) -> list[int]:
    return [max((len(v) for v in m.data.values()), default=0)
            for m in plot.state.references() if isinstance(m, ColumnDataSource)]  # fmt: skip


def test_a_bad_option_is_shown_in_the_page_and_logged(caplog):
    dashboard = Dashboard(defaults={"sampler": "adass:eps=7"})
    with caplog.at_level(logging.ERROR, logger="adass.dashboard"):
        dashboard.start()
    assert dashboard.alert.visible and "--sampler" in dashboard.alert.object
    assert any("--sampler" in r.getMessage() for r in caplog.records)
    assert dashboard.run is None and not dashboard.start_button.disabled


def test_a_failing_run_is_shown_in_the_page_and_logged(caplog):
    dashboard = Dashboard(defaults={**TINY, "data": "idx:/nonexistent/folder"})
    with caplog.at_level(logging.ERROR, logger="adass.dashboard"):
        dashboard.start()
        poll_until_idle(dashboard)
    assert dashboard.alert.visible and "--data" in dashboard.alert.object
    assert "failed" in dashboard.status.object
    assert any(
        r.name == "adass.dashboard.background" and r.exc_info for r in caplog.records
    )  # the traceback, for the log


def test_records_reach_every_live_view_through_the_streams():
    dashboard = Dashboard(heavy_ms=0)
    renderer = hv.renderer("bokeh")
    plots = {name: renderer.get_plot(view) for name, view in dashboard.views.items()}
    assert set(plots) == {view.name for view in VIEWS}
    before = {name: rows_per_source(plot) for name, plot in plots.items()}
    dashboard.clear(world=3)
    dashboard.feed = LiveFeed()
    for record in eval_records(3):
        dashboard.feed.put(EvalDone(record))
    dashboard.feed.put(StepRows(step_rows(ranks=3)))
    dashboard.feed.put(TrafficRows(ring_traffic(world=3).to_dict("records")))
    dashboard.feed.put(SelectionFrame(selection_frame(n=90, epochs=3, ranks=3)))
    dashboard.feed.put(DaskLink("http://127.0.0.1:8787/status"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. Bokeh's warning about columns of unequal length
        dashboard.poll()
    after = {name: rows_per_source(plot) for name, plot in plots.items()}
    for name in ("accuracy", "loss", "kept", "topology", "traffic", "chunks", "timeline", "staleness"):
        assert sum(after[name]) > sum(before[name]), name
    histogram = plots["bounds"].current_frame.Histogram
    assert histogram.Kept.dimension_values(1).sum() + histogram.Dropped.dimension_values(1).sum() == 90
    assert len(dashboard.streams["evals"].data) == 3
    assert plots["raster"].current_frame.data.shape == (90, 3)  # every rank's samples, every epoch
    assert "http://127.0.0.1:8787/status" in dashboard.link.object
    assert sum(rows_per_source(plots["hardest"])) >= 8


def test_a_60000_sample_selection_reaches_the_page_as_a_small_raster():
    dashboard = Dashboard()
    plot = hv.renderer("bokeh").get_plot(dashboard.views["raster"])
    dashboard.feed = LiveFeed()
    selection = selection_frame(n=60_000, epochs=3, ranks=4)
    for (_, _), part in selection.groupby(["epoch", "rank"]):  # as train_distributed writes it
        dashboard.feed.put(SelectionFrame(part))
    dashboard.poll()
    (image,) = [
        m.data["image"][0]
        for m in plot.state.references()
        if isinstance(m, ColumnDataSource) and "image" in m.data
    ]
    assert image.shape == (400, 3)
    assert "60000 samples x 3 epochs" in plot.state.title.text


def test_start_runs_in_the_background_and_the_saved_run_can_be_compared(tmp_path):
    dashboard = Dashboard(runs_dir=tmp_path, defaults=TINY)
    dashboard.start()
    assert dashboard.start_button.disabled and not dashboard.stop_button.disabled
    poll_until_idle(dashboard)  # polling is what the periodic callback does in a served page
    assert dashboard.stop_button.disabled
    assert "finished" in dashboard.status.object and not dashboard.alert.visible
    assert list(dashboard.streams["evals"].data["epoch"]) == [0, 1]
    (saved,) = find_runs(tmp_path)
    assert dashboard.compare.chosen.options == [saved]
    assert len(dashboard.compare.plot.object.Curve) == 1
    assert not dashboard.link.visible  # an in-process run has no Dask cluster to link to
    # a second run is picked in the Compare tab as soon as it is saved, beside the first
    time.sleep(1.1)  # run ids carry the second they start
    dashboard.start()
    poll_until_idle(dashboard)
    assert sorted(dashboard.compare.chosen.value) == sorted(find_runs(tmp_path))
    assert len(dashboard.compare.plot.object.Curve) == 2


def poll_until_idle(dashboard: Dashboard, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while dashboard.start_button.disabled and time.monotonic() < deadline:
        dashboard.poll()
        time.sleep(0.05)
    assert not dashboard.start_button.disabled, "the run did not end"


def test_stop_ends_a_run_early_and_the_page_can_start_again():
    dashboard = Dashboard(defaults={**TINY, "epochs": 10_000})
    dashboard.start()
    deadline = time.monotonic() + 60
    while not len(dashboard.streams["evals"].data) and time.monotonic() < deadline:
        dashboard.poll()
        time.sleep(0.05)
    dashboard.stop()
    assert dashboard.stop_button.disabled and "stopping" in dashboard.status.object
    poll_until_idle(dashboard)
    assert "stopped" in dashboard.status.object and 1 <= len(dashboard.streams["evals"].data) < 10_000
    dashboard.controls.set(epochs=1)
    dashboard.start()
    poll_until_idle(dashboard)
    assert list(dashboard.streams["evals"].data["epoch"]) == [0]  # a new run starts from empty views


def test_the_x_axis_choice_redraws_the_learning_curves():
    dashboard = Dashboard()
    plot = hv.renderer("bokeh").get_plot(dashboard.views["accuracy"])
    dashboard.feed = LiveFeed()
    for record in eval_records(3):
        dashboard.feed.put(EvalDone(record))
    dashboard.poll()
    assert plot.state.x_range.end <= 2.5
    dashboard.x_axis.value = "backprops"
    assert plot.current_frame.Curve.I.kdims[0].name == "backprops"
    assert list(plot.current_frame.Curve.I.dimension_values(0)) == [100, 200, 300]
    # the range starts afresh from the new axis's data instead of keeping the epochs'
    assert plot.state.x_range.start >= 90 and plot.state.x_range.end <= 310


def image_data(n: int = 90) -> Dataset:
    images = torch.rand(n, 1, 6, 4)
    return Dataset(
        "toy", images, torch.arange(n) % 3, images[:10], torch.zeros(10, dtype=torch.long), (1, 6, 4), 3
    )


def test_image_data_turns_the_samples_views_into_image_strips_run_after_run():
    dashboard = Dashboard()
    dashboard.panel().get_root()  # drawn, as in a served page
    for _ in range(2):  # a second run starts from placeholders again, then draws images again
        dashboard.clear()
        dashboard.feed = LiveFeed()
        dashboard.feed.put(DatasetLoaded(image_data()))
        dashboard.poll()
        (waiting,) = dashboard.cells["hardest"].objects  # the data set alone: nothing to draw yet
        assert "adass-waiting" in waiting.css_classes and "choice of samples" in waiting.object
        dashboard.feed.put(SelectionFrame(selection_frame(n=90, epochs=2, ranks=1)))
        dashboard.poll()
        for which in ("hardest", "easiest"):
            assert dashboard.cells[which].objects == [dashboard.panes[which]]
            strip = dashboard.views[which].last
            assert isinstance(strip, hv.RGB) and strip.data.shape[:2] == (6, 8 * 5 - 1), which


def test_a_new_view_is_one_row_of_the_table():
    def steps_per_rank(steps) -> hv.Bars:
        return hv.Bars(steps.groupby("rank").size().rename("steps").reset_index(), "rank", "steps")

    dashboard = Dashboard(
        views=(*VIEWS, View("steps_per_rank", STEPS, steps_per_rank, row=4, column=0)), heavy_ms=0
    )
    page = dashboard.panel()
    assert any(c is dashboard.cells["steps_per_rank"] for c in page.select(pn.Column))  # its place, waiting
    plot = hv.renderer("bokeh").get_plot(dashboard.views["steps_per_rank"])
    dashboard.feed = LiveFeed()
    dashboard.feed.put(StepRows(step_rows(ranks=2, steps=5)))
    dashboard.poll()
    assert list(plot.current_frame.dimension_values("steps")) == [5, 5]
    pane = dashboard.panes["steps_per_rank"]
    assert any(p is pane for p in page.select(type(pane)))  # drawn in its place once steps arrived


def test_a_colocated_run_is_drawn_as_a_star_before_its_first_traffic():
    dashboard = Dashboard(heavy_ms=0)  # every poll redraws
    plot = hv.renderer("bokeh").get_plot(dashboard.views["topology"])
    dashboard.clear(world=3, servers=0, epochs=2, held={0: 0, 1: 1})  # as start() sets it for colocated=true
    dashboard.feed = LiveFeed()
    dashboard.poll()
    assert plot.state.title.text.startswith("PS star, colocated"), plot.state.title.text
    dashboard.clear(world=3, servers=0, epochs=2)  # a ring of the same size
    dashboard.poll()
    assert plot.state.title.text.startswith("ring"), plot.state.title.text


def test_a_run_outlives_its_page_and_a_page_that_opens_shows_and_stops_it():
    board = RunBoard()
    first = Dashboard(defaults={**TINY, "epochs": 10_000}, board=board)
    first.start()
    run = first.run
    first.close()  # the page is gone (a reload, a closed tab): the run is not
    time.sleep(0.5)
    assert run.running
    second = Dashboard(board=board)  # a page that opens now shows the run in progress from its start
    assert second.run is run and second.start_button.disabled and not second.stop_button.disabled
    deadline = time.monotonic() + 60
    while len(second.streams["evals"].data) < 2 and time.monotonic() < deadline:
        second.poll()
        time.sleep(0.05)
    assert list(second.streams["evals"].data["epoch"][:2]) == [0, 1]  # replayed from the first epoch on
    assert second.runs_shown.value == run.run_id and "running" in next(iter(second.runs_shown.options))
    second.stop()
    poll_until_idle(second)
    assert not run.running and "stopped" in second.status.object
    assert "stopped" in next(iter(second.runs_shown.options))


def test_a_page_polls_fast_only_while_it_shows_a_run_and_stops_when_its_connection_is_lost():
    from bokeh.document import Document
    from bokeh.events import ConnectionLost
    from panel.io.state import set_curdoc

    dashboard = Dashboard(defaults={**TINY, "epochs": 10_000}, poll_ms=300, idle_ms=1000)
    doc = Document()
    with set_curdoc(doc):
        dashboard.attach()
        assert dashboard._callback.period == 1000  # nothing to show: it polls for a run list only
        dashboard.start()
        assert dashboard._callback.period == 300  # a run in progress: its records come three times a second
        doc.callbacks.trigger_event(ConnectionLost())  # what the server does when the tab's socket closes
    assert dashboard._callback is None
    dashboard.stop()
    poll_until_idle(dashboard)
