"""The table of live views: every row names a source the page can fill and draws that source's data."""

import holoviews as hv
import pytest

from adass.dashboard import VIEWS, Dashboard, LiveState, Refresh


def test_view_names_are_unique_and_their_controls_are_the_pages():
    names = [view.name for view in VIEWS]
    assert len(names) == len(set(names))
    follows = set(Dashboard(views=()).follows)
    assert all(set(view.follows) <= follows for view in VIEWS)


@pytest.mark.parametrize("view", VIEWS, ids=lambda view: view.name)
def test_every_view_draws_its_source_before_any_record_arrives(view):
    data = view.source.read(LiveState())
    element = view.draw(data, **{name: "epoch" for name in view.follows})
    assert isinstance(element, hv.core.ViewableElement)
    hv.render(element)


def test_no_view_streams_and_the_costly_views_are_throttled():
    refresh = {view.name: view.source.refresh for view in VIEWS}
    # a streamed plot keeps its x range when the x axis changes: even the evaluations are sent whole
    assert {name for name, r in refresh.items() if r is Refresh.APPEND} == set()
    assert {name for name, r in refresh.items() if r is Refresh.THROTTLED} == {
        "topology", "traffic", "chunks", "timeline", "staleness"}  # fmt: skip
