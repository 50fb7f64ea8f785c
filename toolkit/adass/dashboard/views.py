"""The table of live views: what each one reads from the run's state, how it is drawn, and where it sits.

A view is one row of :data:`VIEWS`; the page builds every stream, plot and place from the table, so
adding a view is adding a row (and, if it reads something new, a :class:`Source`). Drawing is left to
the pure functions of :mod:`adass.viz`; the sources below are the state they read.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import Enum, auto
from functools import partial
from typing import Any

import holoviews as hv

from ..data import Dataset
from ..viz import (
    bound_histogram,
    chunk_bytes,
    extreme_samples,
    kept_fraction,
    kept_raster,
    learning_curve,
    loss_curves,
    staleness_histogram,
    topology,
    traffic_heatmap,
    worker_timeline,
)
from .live_state import LiveState, Part

__all__ = [
    "EVALS",
    "GRID",
    "LINKS",
    "SAMPLES",
    "SELECTION",
    "STEPS",
    "TRAFFIC",
    "VIEWS",
    "Refresh",
    "Source",
    "View",
]


class Refresh(Enum):
    """When a source's data goes to the page."""

    APPEND = auto()  # only the new rows, into an ``hv.streams.Buffer``, at the poll after they arrive
    CHANGED = auto()  # the whole data, into an ``hv.streams.Pipe``, at the poll after a change
    THROTTLED = auto()  # like CHANGED, but at most once per ``heavy_ms`` (views costly to redraw)


@dataclass(frozen=True)
class Source:
    """Data the page sends to views: read from :class:`LiveState`, stale when one of ``parts`` changed.

    ``read`` of an APPEND source returns only the rows that arrived since it was last read. Its views
    are drawn once one of ``needs`` (default: ``parts``) has arrived in the run, or ``early`` says the
    run's configuration alone is worth drawing; until then they show ``waiting``.
    """

    name: str
    read: Callable[[LiveState], Any]
    parts: frozenset[Part]
    refresh: Refresh
    waiting: Callable[[LiveState], str] = lambda state: "waiting for the run"
    early: Callable[[LiveState], bool] | None = None
    needs: frozenset[Part] | None = None

    def ready(self, state: LiveState) -> bool:
        """Whether the views of this source have something to draw."""
        needs = self.parts if self.needs is None else self.needs
        return bool(needs & state.seen) or (self.early is not None and self.early(state))


@dataclass(frozen=True)
class View:
    """One live view.

    Attributes
    ----------
    name : str
        The view's key in ``Dashboard.views`` and ``Dashboard.panes``.
    source : Source
        What it draws.
    draw : callable
        ``draw(data, **follows) -> hv.Element``; the page redraws it whenever its data is sent or a
        followed control changes.
    row, column : int
        Its place on the Live tab; views sharing a place stack in one column, in table order.
    follows : tuple of str
        Page controls passed to ``draw`` as keywords (``"x"``: the x axis of the learning curves).
    shape : callable, optional
        ``shape(data) -> key`` of the element type ``draw`` returns for ``data``; a HoloViews
        DynamicMap keeps one element type, so the page gives the view a new one when the key changes.
    """

    name: str
    source: Source
    draw: Callable[..., hv.Element]
    row: int
    column: int
    follows: tuple[str, ...] = ()
    shape: Callable[[Any], Hashable] | None = None


def _samples(data: tuple[Any, Dataset | None], which: str) -> hv.Element:
    selection, dataset = data
    return extreme_samples(selection, dataset, which=which)


def _images(data: tuple[Any, Dataset | None]) -> bool:
    """Whether the samples views draw image strips (image data) or bars (other data)."""
    return data[1] is not None and data[1].is_image


# the evaluations are few (one row per epoch), so each change sends them all: a streamed (APPEND) plot
# keeps its x range when the x axis changes, and holds its drawing once that range was updated
def _after_epoch(state: LiveState) -> str:
    return "drawn after the first epoch"


def _with_selection(state: LiveState) -> str:
    return "drawn with the first epoch's choice of samples"


def _with_traffic(state: LiveState) -> str:
    if not state.world and state.status != "idle":
        return "this run trains one model in one process: nothing is exchanged"
    return "drawn with the first gradients exchanged"


def _with_steps(state: LiveState) -> str:
    return "drawn with the first steps"


EVALS = Source("evals", LiveState.all_evals, frozenset({Part.EVALS}), Refresh.CHANGED, _after_epoch)
SELECTION = Source(
    "selection", lambda s: s.selection, frozenset({Part.SELECTION}), Refresh.CHANGED, _with_selection
)
GRID = Source("grid", lambda s: s.grid, frozenset({Part.SELECTION}), Refresh.CHANGED, _with_selection)
# the samples views draw nothing before a selection: the data set alone does not make them ready
SAMPLES = Source("samples", lambda s: (s.selection, s.dataset), frozenset({Part.SELECTION, Part.DATASET}),
                 Refresh.CHANGED, _with_selection, needs=frozenset({Part.SELECTION}))  # fmt: skip
TRAFFIC = Source(
    "traffic", lambda s: (s.traffic, s.world), frozenset({Part.TRAFFIC}), Refresh.THROTTLED, _with_traffic
)
# the topology is known from the run's configuration: drawn from the start of a run with ranks
LINKS = Source("links", lambda s: (s.traffic, s.world, s.servers, s.held), frozenset({Part.TRAFFIC}),
               Refresh.THROTTLED, _with_traffic, early=lambda s: s.world > 0)  # fmt: skip
STEPS = Source("steps", lambda s: s.steps, frozenset({Part.STEPS}), Refresh.THROTTLED, _with_steps)

#: The live views, in page order.
VIEWS: tuple[View, ...] = (
    View("accuracy", EVALS, partial(learning_curve, y="test_acc"), 0, 0, follows=("x",)),
    View("loss", EVALS, loss_curves, 0, 1, follows=("x",)),
    View("kept", EVALS, kept_fraction, 0, 2),
    View("bounds", SELECTION, bound_histogram, 1, 0),
    View("raster", GRID, kept_raster, 1, 1),
    View("hardest", SAMPLES, partial(_samples, which="hardest"), 1, 2, shape=_images),
    View("easiest", SAMPLES, partial(_samples, which="easiest"), 1, 2, shape=_images),
    View("topology", LINKS, lambda links: topology(*links), 2, 0),
    View("traffic", TRAFFIC, lambda t: traffic_heatmap(t[0], world=t[1]), 2, 1),
    View("chunks", TRAFFIC, lambda t: chunk_bytes(t[0], world=t[1]), 2, 2),
    View("timeline", STEPS, worker_timeline, 3, 0),
    View("staleness", STEPS, staleness_histogram, 3, 1),
)
