"""The live dashboard app: page, option controls, a run in the background, its messages and serving.

Views come from :mod:`adass.viz`; :data:`~adass.dashboard.views.VIEWS` says which the page shows, what
each reads and where it sits. ``adass dashboard`` and a checkout's ``dashboards/app.py`` serve the page.
"""

from .background import BackgroundRun, new_run_id, run_colocated, run_world
from .board import RunBoard
from .comparison import RunComparison
from .controls import ConfigControls, option_widget
from .feed import FeedReader, LiveFeed, LiveSink, StopRun
from .live_state import LiveState, Part
from .messages import (
    DaskLink,
    DatasetLoaded,
    Done,
    EpochTraffic,
    EvalDone,
    Message,
    RunError,
    SelectionFrame,
    Status,
    StepRows,
    TrafficRows,
)
from .page import Dashboard
from .serve import app_options, build_app, serve_dashboard
from .spec_editor import SpecEditor
from .views import VIEWS, Refresh, Source, View

__all__ = [
    "VIEWS",
    "BackgroundRun",
    "ConfigControls",
    "DaskLink",
    "Dashboard",
    "DatasetLoaded",
    "Done",
    "EpochTraffic",
    "EvalDone",
    "FeedReader",
    "LiveFeed",
    "LiveSink",
    "LiveState",
    "Message",
    "Part",
    "Refresh",
    "RunBoard",
    "RunComparison",
    "RunError",
    "SelectionFrame",
    "Source",
    "SpecEditor",
    "Status",
    "StepRows",
    "StopRun",
    "TrafficRows",
    "View",
    "app_options",
    "build_app",
    "new_run_id",
    "option_widget",
    "run_colocated",
    "run_world",
    "serve_dashboard",
]
