"""The view functions on synthetic records: what each draws, and that each renders with Bokeh."""

import holoviews as hv
import numpy as np
import pandas as pd
import pytest
import torch
from bokeh.models import ColumnDataSource
from synthetic_records import eval_records, ps_traffic, ring_traffic, selection_frame

from adass.data import Dataset
from adass.viz import (
    KeptGrid,
    aggregate_rows,
    bound_histogram,
    chunk_bytes,
    extreme_ids,
    extreme_samples,
    human_bytes,
    kept_fraction,
    kept_raster,
    learning_curve,
    link_totals,
    loss_curves,
    montage,
    overlay_runs,
    selection_threshold,
    server_ranks,
    step_phases,
    topology,
    traffic_heatmap,
    worker_timeline,
)
from adass.viz.traffic import empty_traffic


def sources(element) -> list[dict]:
    """The data of every ColumnDataSource Bokeh would send for ``element``."""
    fig = hv.render(element)
    return [dict(m.data) for m in fig.references() if isinstance(m, ColumnDataSource)]


def test_learning_curves_follow_the_chosen_axis(evals):
    acc = learning_curve(evals, "test_acc", "backprops")
    curve = acc.Curve.I
    assert curve.kdims[0].name == "backprops" and curve.vdims[0].name == "test_acc"
    np.testing.assert_allclose(curve.dimension_values("test_acc"), evals["test_acc"])
    loss = loss_curves(evals, "wire_bytes")
    assert {c.vdims[0].name for c in loss} == {"train_loss", "test_loss"}
    kept = kept_fraction(evals)
    np.testing.assert_allclose(kept.Curve.I.dimension_values("kept_frac"), 0.7)
    for element in (acc, loss, kept, learning_curve(pd.DataFrame(), "test_acc", "epoch")):
        assert hv.render(element).name.startswith("adass-")


def test_threshold_is_the_smallest_kept_bound_of_a_bound_ordered_drop(selection):
    last = selection[selection["epoch"] == 3]
    assert selection_threshold(last) == pytest.approx(last.loc[last["kept"], "bound"].min())
    assert selection_threshold(selection[selection["epoch"] == 0]) is None  # nothing dropped
    shuffled = last.assign(kept=np.random.default_rng(1).permutation(last["kept"].to_numpy()))
    assert selection_threshold(shuffled) is None  # not dropped by bound: no single threshold


def test_a_resampled_epoch_has_its_cut_where_everything_above_is_kept():
    """ADASS with ``resample``: below its cut half the samples come back at random, above it all are kept."""
    rng = np.random.default_rng(4)
    bound = np.sort(rng.random(400))
    kept = np.ones(400, bool)
    kept[:240] = rng.random(240) < 0.5  # the budget: the 240 smallest bounds, half of them drawn back
    rows = pd.DataFrame({"bound": rng.permutation(bound), "kept": False})
    order = np.argsort(rows["bound"].to_numpy())
    rows.loc[order, "kept"] = kept
    cut = selection_threshold(rows)
    highest_dropped = bound[:240][~kept[:240]].max()
    assert cut == bound[kept & (bound > highest_dropped)].min() and highest_dropped < cut <= bound[240]
    assert (rows.loc[rows["bound"] >= selection_threshold(rows), "kept"]).all()


def test_bound_histogram_counts_every_finite_bound_and_marks_the_threshold(selection):
    frame = selection.copy()
    frame.loc[frame.index[-5:], ["bound", "kept"]] = [np.inf, True]  # never visited, so kept
    hist = bound_histogram(frame)
    kept, dropped, line = hist.Histogram.Kept, hist.Histogram.Dropped, hist.VLine.Threshold
    last = frame[frame["epoch"] == 3]
    finite = np.isfinite(last["bound"])
    assert kept.dimension_values(1).sum() == (last["kept"] & finite).sum()
    assert dropped.dimension_values(1).sum() == (~last["kept"] & finite).sum()
    assert line.data == pytest.approx(np.log10(selection_threshold(last)))
    assert "5 unvisited" in hist.opts.get().kwargs["title"]
    first = bound_histogram(frame, epoch=0)
    assert first.VLine.Threshold.opts.get("style").kwargs["line_alpha"] == 0.0  # no threshold: hidden
    hv.render(hist), hv.render(bound_histogram(frame.iloc[:0]))


def test_kept_grid_merges_ranks_and_epochs_in_any_order(selection):
    grid = KeptGrid()
    for (_, _), part in selection.sample(frac=1.0, random_state=0).groupby(["epoch", "rank"]):
        grid.add(part)
    epochs, values = grid.matrix()
    assert list(epochs) == [0, 1, 2, 3] and values.shape == (300, 4)
    wide = selection.pivot(index="sample_id", columns="epoch", values="kept").to_numpy(float)
    np.testing.assert_array_equal(values, wide)


def test_raster_of_60000_samples_is_aggregated_to_a_small_image():
    big = selection_frame(n=60_000, epochs=6, ranks=4)
    image = kept_raster(big, max_rows=400)
    assert image.data.shape[0] <= 400 and image.data.shape[1] == 6
    # each row is the kept share of its block of 150 consecutive samples; sample 0 is at the bottom
    blocks = big[big["epoch"] == 2].sort_values("sample_id")["kept"].to_numpy(float).reshape(400, 150).mean(1)
    np.testing.assert_allclose(image.data[::-1, 2], blocks, rtol=1e-6)
    (payload,) = [s for s in sources(image) if "image" in s]
    assert payload["image"][0].size <= 400 * 6  # what the page receives does not grow with n


def test_aggregate_rows_ignores_missing_cells():
    grid = np.array([[1, np.nan], [0, np.nan], [1, 1], [np.nan, 0]], dtype=np.float32)
    np.testing.assert_allclose(aggregate_rows(grid, 2), [[0.5, np.nan], [1.0, 0.5]])
    assert aggregate_rows(grid, 10) is grid


def test_easiest_and_hardest_are_the_extreme_bounds_drawn_as_images(selection):
    last = selection[selection["epoch"] == 3].sort_values("bound")
    easiest, hardest = extreme_ids(selection, k=5)
    assert list(easiest["sample_id"]) == list(last["sample_id"][:5])
    assert list(hardest["sample_id"]) == list(last["sample_id"][::-1][:5])
    images = torch.rand(300, 1, 6, 4)
    data = Dataset(
        "toy", images, torch.arange(300) % 3, images[:10], torch.zeros(10, dtype=torch.long), (1, 6, 4), 3
    )
    strip = extreme_samples(selection, data, k=5, which="hardest")
    assert isinstance(strip, hv.RGB) and strip.data.shape[:2] == (6, 5 * 5 - 1)
    first = int(hardest["sample_id"].iloc[0])
    np.testing.assert_allclose(strip.data[:, :4, 0], images[first, 0].numpy())
    bars = extreme_samples(selection, None, k=5, which="easiest")
    assert isinstance(bars, hv.Bars) and len(bars) == 5
    hv.render(strip), hv.render(bars), hv.render(extreme_samples(selection.iloc[:0]))


def test_montage_places_images_side_by_side():
    images = np.zeros((3, 3, 2, 2), dtype=np.float32)
    images[1] = 1.0
    out = montage(images)
    assert out.shape == (2, 8, 3)
    assert out[:, 3:5].min() == 1.0 and out[:, :2].max() == 0.0 and out[:, 2].min() == 1.0  # white gaps


def test_ring_topology_sums_bytes_per_directed_link():
    traffic = ring_traffic(world=3)
    totals = link_totals(traffic)
    assert set(zip(totals["src"], totals["dst"], strict=True)) == {(0, 1), (1, 2), (2, 0)}
    assert (totals["wire_bytes"] == 4 * 2 * 2 * 100).all()  # 4 steps x 2 phases x 2 hops x 100 B
    assert server_ranks(traffic) == []
    view = topology(traffic)
    assert "ring" in view.opts.get().kwargs["title"]
    assert sorted(view.Labels.I.dimension_values("text")) == [human_bytes(1600)] * 3
    hv.render(view), hv.render(topology(empty_traffic(), world=4)), hv.render(topology(empty_traffic()))


def test_star_topology_puts_servers_in_the_middle():
    traffic = ps_traffic(replicas=3)
    assert server_ranks(traffic) == [3]
    view = topology(traffic)
    nodes = view.Points.II
    centre = nodes.data[nodes.data["role"] == "server"]
    assert "star" in view.opts.get().kwargs["title"]
    assert float(centre["x"].iloc[0]) == 0.0 and float(centre["y"].iloc[0]) == 0.0
    assert len(view.Segments.I) == 6  # 3 pushes and 3 pulls


def test_heatmap_has_one_cell_per_step_and_link_and_keeps_the_last_steps():
    traffic = ring_traffic(world=3, steps=range(0, 100, 10))
    heat = traffic_heatmap(traffic, max_steps=4)
    cells = heat.data
    assert sorted(cells["step"].unique()) == [60, 70, 80, 90]
    assert set(cells["link"]) == {"0→1", "1→2", "2→0"}
    assert (cells["wire_bytes"] == 2 * 2 * 100).all()
    hv.render(heat), hv.render(traffic_heatmap(empty_traffic()))


def test_chunk_bytes_show_raw_and_wire_per_chunk_and_step():
    bars = chunk_bytes(ring_traffic(world=3, ratio=0.25))
    table = bars.data.pivot(index="chunk", columns="kind", values="bytes")
    # per step every chunk travels 2 hops in each of 2 phases
    assert (table["raw"] == 4 * 400).all() and (table["wire"] == 4 * 100).all()
    assert "wire/raw 0.25" in bars.opts.get().kwargs["title"]
    hv.render(bars), hv.render(chunk_bytes(empty_traffic()))


def test_timeline_lays_each_ranks_phases_end_to_end(steps):
    phases = step_phases(steps, last_steps=5)
    rank1 = phases[phases["rank"] == 1].sort_values("start_s")
    assert sorted(rank1["step"].unique()) == [7, 8, 9, 10, 11]
    np.testing.assert_allclose(rank1["start_s"].to_numpy()[1:], rank1["end_s"].to_numpy()[:-1])
    assert set(rank1["phase"]) == {"compute", "encode", "comm", "decode"}  # zero-length waits are dropped
    assert rank1["end_s"].max() == pytest.approx(5 * (0.01 + 0.002 + 0.010 + 0.001))
    view = worker_timeline(steps, last_steps=5)
    assert [layer.label for layer in view] == ["compute", "encode", "comm", "decode"]
    hv.render(view), hv.render(worker_timeline(steps.iloc[:0]))


def test_saved_runs_overlay_one_curve_each(evals):
    view = overlay_runs(
        {"a": evals, "b": evals.assign(test_acc=evals["test_acc"] - 0.1)}, "test_acc", "train_s"
    )
    curves = view.Curve
    assert {c.label for c in curves} == {"a", "b"}
    assert hv.render(view).name == "adass-compare"


def test_standardized_images_are_drawn_at_the_loaders_scale_and_an_empty_strip_renders(selection):
    from adass.data import standardize

    pixels = torch.rand(300, 1, 6, 4) * 0.5  # a loader's [0, 1] scale
    raw = Dataset("toy", pixels, torch.arange(300) % 3, pixels[:10], torch.zeros(10, dtype=torch.long),
                  (1, 6, 4), 3)  # fmt: skip
    data = standardize(raw, "on")
    assert float(data.x_train.min()) < 0  # standardized: clipping would lose the dark half
    hardest = extreme_ids(selection, k=5)[1]
    strip = extreme_samples(selection, data, k=5, which="hardest")
    first = int(hardest["sample_id"].iloc[0])
    np.testing.assert_allclose(strip.data[:, :4, 0], pixels[first, 0].numpy(), atol=1e-5)
    # before any epoch: a blank strip that Bokeh still draws, with one tick saying why
    empty = extreme_samples(selection.iloc[:0], data, which="easiest")
    assert isinstance(empty, hv.RGB) and empty.opts.get().kwargs["xticks"] == [(0.5, "no epoch yet")]
    hv.render(empty)


def test_a_parameter_server_is_a_star_from_the_configuration_before_any_push():
    # epoch 0 of a PS run, before a push was sampled: the configuration already says who the server is
    view = topology(empty_traffic(), world=4, servers=1)
    nodes = view.Points.II
    roles = dict(zip(nodes.dimension_values("name"), nodes.dimension_values("role"), strict=True))
    assert roles == {"r0": "replica", "r1": "replica", "r2": "replica", "ps3": "server"}
    assert view.opts.get().kwargs["title"].startswith("PS star")
    ring = topology(ring_traffic(world=3), world=3, servers=0)
    title = ring.opts.get().kwargs["title"]
    steps = ring_traffic(world=3)["step"].nunique()
    assert title.startswith("ring") and title.endswith(f"last {steps} steps")


def test_byte_axes_and_colour_bars_read_as_bytes_and_shares_span_0_to_1(evals):
    from bokeh.models import ColorBar, CustomJSTickFormatter, Legend

    heat = hv.render(traffic_heatmap(ring_traffic(world=3)))
    (bar,) = heat.select(type=ColorBar)
    assert isinstance(bar.formatter, CustomJSTickFormatter) and '"MB"' in bar.formatter.code
    chunks = hv.render(chunk_bytes(ring_traffic(world=3, ratio=0.25)))
    assert isinstance(chunks.yaxis[0].formatter, CustomJSTickFormatter)
    (legend,) = chunks.select(type=Legend)
    assert legend.items  # which bars are raw and which are wire
    wire = hv.render(learning_curve(evals, x="wire_bytes"))
    assert isinstance(wire.xaxis[0].formatter, CustomJSTickFormatter)
    accuracy = hv.render(learning_curve(evals.iloc[:1]))  # one epoch: still a 0-1 axis, not 0-2
    assert (accuracy.y_range.start, accuracy.y_range.end) == (0.0, 1.02)


def test_the_loss_plot_shows_the_first_epoch_as_dots():
    one = pd.DataFrame([vars(eval_records(1)[0])])
    view = loss_curves(one)
    assert [len(s) for s in view.Scatter] == [1, 1]  # a line of one point draws nothing; a dot does


def test_every_traffic_view_of_a_one_process_run_says_it_has_no_exchange():
    from adass.viz.style import NO_EXCHANGE

    empty = empty_traffic()
    one_process = [traffic_heatmap(empty, world=0), chunk_bytes(empty, world=0), topology(empty, world=0)]
    assert [v.opts.get().kwargs["title"] for v in one_process] == [NO_EXCHANGE] * 3
    # a distributed run before its first traffic, and views that are not told the world, keep their titles
    waiting = [
        traffic_heatmap(empty, world=4),
        chunk_bytes(empty, world=4),
        traffic_heatmap(empty),
        chunk_bytes(empty),
    ]
    assert NO_EXCHANGE not in [v.opts.get().kwargs["title"] for v in waiting]
    ring = ring_traffic(world=3)
    assert traffic_heatmap(ring, world=0).opts.get().kwargs["title"].startswith("wire bytes per step")
    for view in one_process:
        hv.render(view)
