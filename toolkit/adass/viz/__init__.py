"""HoloViews/Panel views of adass records, shared by the dashboard and notebooks.

Each view is a function from tidy records (DataFrames of ``adass.metrics`` records) to a HoloViews
element; :class:`Dashboard` puts them on one live page fed from a background run.
"""

from .comparison import RunComparison
from .controls import ConfigControls, widget_spec
from .curves import METRICS, X_AXES, kept_fraction, learning_curve, loss_curves
from .dashboard import Dashboard
from .feed import LiveFeed, LiveSink, StopRun
from .raster import KeptGrid, aggregate_rows, kept_raster
from .runner import BackgroundRun, new_run_id
from .runs import describe_run, find_runs, load_descriptions, load_evals, overlay_runs
from .samples import extreme_ids, extreme_samples, montage
from .selection import bound_histogram, latest_epoch, selection_threshold
from .serve import app_options, app_path, build_app, serve_dashboard
from .state import LiveState
from .style import human_bytes
from .timeline import step_phases, worker_timeline
from .topology import link_totals, node_layout, server_ranks, topology
from .traffic import chunk_bytes, link_names, traffic_heatmap

__all__ = [
    "METRICS",
    "X_AXES",
    "BackgroundRun",
    "ConfigControls",
    "Dashboard",
    "KeptGrid",
    "LiveFeed",
    "LiveSink",
    "LiveState",
    "RunComparison",
    "StopRun",
    "aggregate_rows",
    "app_options",
    "app_path",
    "bound_histogram",
    "build_app",
    "chunk_bytes",
    "describe_run",
    "extreme_ids",
    "extreme_samples",
    "find_runs",
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
    "new_run_id",
    "node_layout",
    "overlay_runs",
    "selection_threshold",
    "serve_dashboard",
    "server_ranks",
    "step_phases",
    "topology",
    "traffic_heatmap",
    "widget_spec",
    "worker_timeline",
]
