"""What a page knows about its run, built from typed messages: bounded frames and the parts that changed."""

import pytest
from synthetic_records import eval_records, ring_traffic, selection_frame, step_rows

from adass.dashboard import (
    DaskLink,
    Done,
    EpochTraffic,
    EvalDone,
    LiveState,
    Part,
    RunError,
    SelectionFrame,
    Status,
    StepRows,
    TrafficRows,
)


def test_state_keeps_the_last_steps_per_rank_and_counts_them_all():
    state = LiveState(max_steps=5)
    changed = state.apply(
        [StepRows(step_rows(ranks=2, steps=8)), StepRows(step_rows(ranks=2, steps=4, first=8))]
    )
    assert changed == {Part.STEPS}
    assert state.steps_seen == 24
    assert state.steps.groupby("rank")["step"].apply(list).to_dict() == {
        0: [7, 8, 9, 10, 11],
        1: [7, 8, 9, 10, 11],
    }


def test_full_epoch_traffic_replaces_the_sampled_rows_even_when_they_arrive_late():
    state = LiveState()
    assert state.apply([TrafficRows(ring_traffic(steps=range(0, 20, 10)).to_dict("records"))]) == {
        Part.TRAFFIC
    }
    assert sorted(state.traffic["step"].unique()) == [0, 10]
    full = ring_traffic(steps=range(0, 20))
    state.apply([EpochTraffic(full)])
    late = ring_traffic(steps=range(10, 11)).to_dict("records")  # a sampled step of epoch 0, after the fact
    state.apply(
        [TrafficRows(late), TrafficRows(ring_traffic(steps=range(20, 21), epoch=1).to_dict("records"))]
    )
    assert len(state.traffic) == len(full) + len(late)  # no double counting of epoch 0
    assert sorted(state.traffic["step"].unique()) == list(range(21))


def test_state_merges_each_ranks_selection_and_takes_new_evaluations_once():
    state = LiveState()
    selection = selection_frame(n=40, epochs=2, ranks=2)
    for (_, _), part in selection.groupby(["epoch", "rank"]):
        assert state.apply([SelectionFrame(part)]) == {Part.SELECTION}
    assert len(state.selection) == 40 and set(state.selection["epoch"]) == {1}
    assert state.grid.matrix()[1].shape == (40, 2)
    assert state.apply([EvalDone(r) for r in eval_records(3)]) == {Part.EVALS, Part.STATUS}
    assert len(state.take_new_evals()) == 3 and len(state.take_new_evals()) == 0
    assert list(state.evals["epoch"]) == [0, 1, 2]
    assert state.status.startswith("epoch 2 done")  # 0-based, as the plots draw the epochs
    state.reset(world=3, servers=1, epochs=4)
    state.apply([EvalDone(eval_records(3)[-1])])
    assert state.status.startswith("epoch 2 done (3 of 4)")
    assert (state.world, state.servers) == (3, 1)
    changed = state.apply([RunError("--data: no such file"), Done("failed (x)")])
    assert changed == {Part.ERROR, Part.STATUS}
    assert state.error.startswith("--data") and state.done and state.status == "failed (x)"


def test_link_and_status_lines_and_a_reset_that_forgets_the_run():
    state = LiveState()
    assert state.apply([DaskLink("http://127.0.0.1:8787/status"), Status("training")]) == {
        Part.LINK,
        Part.STATUS,
    }
    assert (state.dashboard_link, state.status) == ("http://127.0.0.1:8787/status", "training")
    state.apply([StepRows(step_rows())])
    state.reset(world=4)
    assert state.world == 4 and state.status == "idle" and not len(state.steps) and not state.dashboard_link


def test_anything_but_a_message_is_refused():
    with pytest.raises(TypeError, match="tuple"):
        LiveState().apply([("status", "a kind by name")])
