"""Parameter-server views: bytes in and out of every shard on the star (dedicated or colocated), and
the staleness of every replica's steps."""

import holoviews as hv
import pandas as pd
import torch
from synthetic_records import ps_traffic, ring_traffic, step_rows

from adass.exchange import simulate
from adass.viz import held_shards, server_bytes, server_ranks, staleness_counts, staleness_histogram, topology
from adass.viz.staleness import SYNC_CAPTION


def star(spec: str, workers: int = 4) -> pd.DataFrame:
    """The traffic of one real exchange step of ``workers`` replicas (1000 fp32 values each)."""
    return simulate([torch.ones(1000) for _ in range(workers)], spec, "fp32").traffic


def test_server_bytes_count_each_shards_pushes_and_pulls():
    per_server = server_bytes(ps_traffic(replicas=3))  # 4 steps of 3 pushes of 100 B and pulls of 400 B
    assert per_server.to_dict("records") == [{"shard": 0, "rank": 3, "push_bytes": 1200, "pull_bytes": 4800,
                                              "push_messages": 12, "pull_messages": 12}]  # fmt: skip
    assert server_bytes(ring_traffic(world=3)).empty and held_shards(ring_traffic(world=3)) == {}


def test_colocated_shards_are_drawn_on_the_replicas_that_serve_them():
    dedicated, colocated = star("ps:servers=2"), star("ps:servers=2,colocated=true")
    ours, theirs = server_bytes(colocated), server_bytes(dedicated)
    assert ours["rank"].tolist() == [0, 1] and theirs["rank"].tolist() == [4, 5]
    # a shard holds 500 values: 2000 B (+ an 8-byte count) from each worker but its own; from all 4
    assert ours["push_bytes"].tolist() == [3 * 2008] * 2 and theirs["push_bytes"].tolist() == [4 * 2008] * 2
    assert ours["pull_bytes"].tolist() == [3 * 2000] * 2 and theirs["pull_bytes"].tolist() == [4 * 2000] * 2
    assert (ours["pull_messages"] == 3).all() and (theirs["pull_messages"] == 4).all()
    assert held_shards(colocated) == {0: 0, 1: 1} and server_ranks(colocated) == []
    view = topology(colocated, world=4, servers=0)
    roles = dict(
        zip(view.Points.II.dimension_values("name"), view.Points.II.dimension_values("role"), strict=True)
    )
    assert roles == {"r0+ps0": "replica+server", "r1+ps1": "replica+server", "r2": "replica", "r3": "replica"}
    assert view.opts.get().kwargs["title"].startswith("PS star, colocated")
    labels = sorted(view.Labels.III.dimension_values("text"))
    assert labels == ["ps0: push 6.0 kB, pull 6.0 kB", "ps1: push 6.0 kB, pull 6.0 kB"]
    dedicated_view = topology(dedicated, world=6, servers=2)
    assert dedicated_view.opts.get().kwargs["title"].startswith("PS star:")
    assert len(dedicated_view.Labels.III) == 2
    hv.render(view), hv.render(dedicated_view)


def test_a_colocated_run_is_a_star_before_its_first_traffic_and_its_shards_are_listed_clear_of_the_links():
    empty = star("ps:servers=2,colocated=true").iloc[0:0]
    before = topology(empty, world=4, servers=0, held={0: 0, 1: 1})
    assert before.opts.get().kwargs["title"].startswith("PS star, colocated")
    nodes = before.Points.II
    sizes = dict(zip(nodes.dimension_values("name"), nodes.dimension_values("size"), strict=True))
    assert sizes["r0+ps0"] > sizes["r2"]  # the longer name gets a node it fits in
    assert topology(empty, world=4, servers=0).opts.get().kwargs["title"].startswith("ring")

    view = topology(star("ps:servers=4,colocated=true"), world=4, servers=0)
    labels = view.Labels.III
    xs, ys = labels.dimension_values("x"), labels.dimension_values("y")
    assert len(labels) == 4 and (xs < -1.0).all()  # one line per shard, left of the circle's nodes
    assert (ys > 0.8).all() and len(set(ys)) == 4  # in the top corner, one under the other
    many = topology(star("ps:servers=6,colocated=true", workers=6), world=6, servers=0).Labels.III
    assert len(many) == 5 and "2 more shards" in many.dimension_values("text")[-1]
    hv.render(before), hv.render(view)


def test_staleness_counts_every_ranks_steps_by_how_stale_they_were():
    steps = pd.DataFrame(step_rows(ranks=2, steps=4)).assign(staleness=[0, 0, 1, 0, 2, 0, 1, 0])
    counts = staleness_counts(steps)
    assert counts.to_dict("records") == [{"rank": 0, "staleness": 0, "steps": 1}, {"rank": 0, "staleness": 1, "steps": 2},
                                         {"rank": 0, "staleness": 2, "steps": 1}, {"rank": 1, "staleness": 0, "steps": 4}]  # fmt: skip
    view = staleness_histogram(steps)
    assert view.opts.get().kwargs["title"] == "staleness: mean 0.50, max 2 steps over 8 steps"
    hv.render(view)


def test_a_synchronous_run_shows_staleness_0_with_a_caption_saying_why():
    for steps in (pd.DataFrame(step_rows(ranks=3, steps=2)),  # records from before the column existed
                  pd.DataFrame(step_rows(ranks=3, steps=2)).assign(staleness=0)):  # fmt: skip
        view = staleness_histogram(steps)
        assert view.opts.get().kwargs["title"] == SYNC_CAPTION
        assert view.data["steps"].sum() == 6 and set(view.data["staleness"]) == {"0"}
        hv.render(view)
    assert staleness_histogram(pd.DataFrame()).opts.get().kwargs["title"] == "staleness: no steps yet"
