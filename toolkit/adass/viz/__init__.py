"""HoloViews views of adass records, shared by the dashboard and notebooks.

Each view is a pure function from tidy records (DataFrames of ``adass.metrics`` records, or a run's
saved folder for the comparison helpers) to a HoloViews element; nothing here serves a page, starts a
thread or runs training (the live page is :mod:`adass.dashboard`).
"""

from .curves import METRICS, X_AXES, kept_fraction, learning_curve, loss_curves
from .raster import KeptGrid, aggregate_rows, kept_raster
from .runs import describe_run, find_runs, load_descriptions, load_evals, overlay_runs
from .samples import display_pixels, extreme_ids, extreme_samples, montage
from .selection import bound_histogram, latest_epoch, selection_threshold
from .staleness import staleness_counts, staleness_histogram
from .style import byte_ticks, human_bytes
from .timeline import step_phases, worker_timeline
from .topology import held_shards, link_totals, node_layout, server_bytes, server_ranks, topology
from .traffic import chunk_bytes, link_names, traffic_heatmap

__all__ = [
    "METRICS",
    "X_AXES",
    "KeptGrid",
    "aggregate_rows",
    "bound_histogram",
    "byte_ticks",
    "chunk_bytes",
    "describe_run",
    "display_pixels",
    "extreme_ids",
    "extreme_samples",
    "find_runs",
    "held_shards",
    "human_bytes",
    "kept_fraction",
    "kept_raster",
    "latest_epoch",
    "learning_curve",
    "link_names",
    "link_totals",
    "load_descriptions",
    "load_evals",
    "loss_curves",
    "montage",
    "node_layout",
    "overlay_runs",
    "selection_threshold",
    "server_bytes",
    "server_ranks",
    "staleness_counts",
    "staleness_histogram",
    "step_phases",
    "topology",
    "traffic_heatmap",
    "worker_timeline",
]
