"""The dashboard page without a browser: controls from the option definitions, Start/Stop, live updates."""

import logging
import time
import warnings

import holoviews as hv
import param
import pytest
from bokeh.models import ColumnDataSource
from viz_records import eval_records, ring_traffic, selection_frame, step_rows

from adass.config import SECTIONS, options
from adass.metrics import ParquetSink
from adass.registry import SpecError
from adass.viz import ConfigControls, Dashboard, LiveFeed, RunComparison, app_options, build_app, find_runs

TINY = {
    "data": "synthetic:n=120,d=4,classes=3,test=30",
    "model": "mlp:hidden=8",
    "batch_size": 16,
    "epochs": 2,
}


def rows_per_source(plot) -> list[int]:
    return [max((len(v) for v in m.data.values()), default=0)
            for m in plot.state.references() if isinstance(m, ColumnDataSource)]  # fmt: skip


def test_every_option_has_a_widget_with_its_bounds_and_doc():
    controls = ConfigControls()
    for name, section in SECTIONS.items():
        pane = controls.panes[name]
        for option, p in options(section).items():
            (widget,) = [w for w in pane.layout if option in " ".join(getattr(w, "css_classes", []))]
            assert p.doc.split(" (")[0] in widget.description
            if isinstance(p, (param.Integer, param.Number)):
                assert (widget.start, widget.end) == p.bounds
            if isinstance(p, param.Selector):
                assert list(widget.options) == list(p.objects)
    controls.set(epochs=3, sampler="adass:eps=0.2", workers=2)
    config = controls.config()
    assert (config.optim.epochs, config.sampler.sampler, config.cluster.workers) == (3, "adass:eps=0.2", 2)
    controls.set(sampler="bogus")
    with pytest.raises(SpecError, match="--sampler"):
        controls.config()


def test_a_bad_option_is_shown_in_the_page_and_logged(caplog):
    dashboard = Dashboard(defaults={"sampler": "adass:eps=7"})
    with caplog.at_level(logging.ERROR, logger="adass.viz"):
        dashboard.start()
    assert dashboard.alert.visible and "--sampler" in dashboard.alert.object
    assert any("--sampler" in r.getMessage() for r in caplog.records)
    assert dashboard.run is None and not dashboard.start_button.disabled


def test_a_failing_run_is_shown_in_the_page_and_logged(caplog):
    dashboard = Dashboard(defaults={**TINY, "data": "idx:/nonexistent/folder"})
    with caplog.at_level(logging.ERROR, logger="adass.viz"):
        dashboard.start()
        poll_until_idle(dashboard)
    assert dashboard.alert.visible and "--data" in dashboard.alert.object
    assert "failed" in dashboard.status.object
    assert any(
        r.name == "adass.viz.runner" and r.exc_info for r in caplog.records
    )  # the traceback, for the log


def test_records_reach_every_live_view_through_the_streams():
    dashboard = Dashboard(heavy_ms=0)
    renderer = hv.renderer("bokeh")
    plots = {name: renderer.get_plot(view) for name, view in dashboard.views.items()}
    before = {name: rows_per_source(plot) for name, plot in plots.items()}
    dashboard.feed, dashboard.world = LiveFeed(), 3
    for record in eval_records(3):
        dashboard.feed.put("eval", record)
    dashboard.feed.put("steps", step_rows(ranks=3))
    dashboard.feed.put("traffic", ring_traffic(world=3).to_dict("records"))
    dashboard.feed.put("selection", selection_frame(n=90, epochs=3, ranks=3))
    dashboard.feed.put("link", "http://127.0.0.1:8787/status")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. Bokeh's warning about columns of unequal length
        dashboard.poll()
    after = {name: rows_per_source(plot) for name, plot in plots.items()}
    for name in ("accuracy", "loss", "kept", "topology", "traffic", "chunks", "timeline"):
        assert sum(after[name]) > sum(before[name]), name
    histogram = plots["bounds"].current_frame.Histogram
    assert histogram.Kept.dimension_values(1).sum() + histogram.Dropped.dimension_values(1).sum() == 90
    assert len(dashboard.evals.data) == 3
    assert plots["raster"].current_frame.data.shape == (90, 3)  # every rank's samples, every epoch
    assert "http://127.0.0.1:8787/status" in dashboard.link.object
    hardest = renderer.get_plot(dashboard.hardest.object)
    assert sum(rows_per_source(hardest)) >= 8


def test_a_60000_sample_selection_reaches_the_page_as_a_small_raster():
    dashboard = Dashboard()
    plot = hv.renderer("bokeh").get_plot(dashboard.views["raster"])
    dashboard.feed = LiveFeed()
    selection = selection_frame(n=60_000, epochs=3, ranks=4)
    for (_, _), part in selection.groupby(["epoch", "rank"]):  # as train_distributed writes it
        dashboard.feed.put("selection", part)
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
    assert list(dashboard.evals.data["epoch"]) == [0, 1]
    (saved,) = find_runs(tmp_path)
    assert dashboard.compare.chosen.options == [saved]
    assert len(dashboard.compare.plot.object.Curve) == 1


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
    while not len(dashboard.evals.data) and time.monotonic() < deadline:
        dashboard.poll()
        time.sleep(0.05)
    dashboard.stop()
    assert dashboard.stop_button.disabled and "stopping" in dashboard.status.object
    poll_until_idle(dashboard)
    assert "stopped" in dashboard.status.object and 1 <= len(dashboard.evals.data) < 10_000
    dashboard.controls.set(epochs=1)
    dashboard.start()
    poll_until_idle(dashboard)
    assert list(dashboard.evals.data["epoch"]) == [0]  # a new run starts from empty views


def test_the_x_axis_choice_redraws_the_learning_curves():
    dashboard = Dashboard()
    plot = hv.renderer("bokeh").get_plot(dashboard.views["accuracy"])
    dashboard.feed = LiveFeed()
    for record in eval_records(3):
        dashboard.feed.put("eval", record)
    dashboard.poll()
    dashboard.x_axis.value = "backprops"
    assert plot.current_frame.Curve.I.kdims[0].name == "backprops"
    assert list(plot.current_frame.Curve.I.dimension_values(0)) == [100, 200, 300]


def test_comparison_finds_nested_runs_and_overlays_the_chosen(tmp_path, tiny_config):
    for where in ("a", "sweep/runs/b", "sweep/runs/c"):
        sink = ParquetSink(tmp_path / where, tiny_config.to_dict())
        for record in eval_records(3, run=where):
            sink.write(record)
        sink.close()
    (tmp_path / "not-a-run").mkdir()
    compare = RunComparison(tmp_path)
    assert compare.chosen.options == ["a", "sweep/runs/b", "sweep/runs/c"]
    compare.chosen.value = ["a", "sweep/runs/c"]
    compare.y.value = "test_loss"
    assert {c.label for c in compare.plot.object.Curve} == {"a", "sweep/runs/c"}
    assert "sampler full" in compare.table.object["what"].iloc[0]
    assert RunComparison(None).message.visible


def test_app_options_and_page():
    assert app_options(["--runs", "some/dir", "--scheduler", "tcp://h:1"]) == {
        "runs_dir": "some/dir", "scheduler": "tcp://h:1"}  # fmt: skip
    page = build_app(poll=False)
    assert page.get_root() is not None
