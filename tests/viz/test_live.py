"""The live path without a page: feed, sink, page state, and a background run that can be stopped."""

import threading

import pandas as pd
import pytest
from viz_records import eval_records, ring_traffic, selection_frame, step_rows

from adass.config import RunConfig
from adass.metrics import EvalRecord, MemorySink, SelectionRecord, StepRecord, TrafficRecord, load_run
from adass.viz import BackgroundRun, LiveFeed, LiveSink, LiveState, StopRun

TINY = {"data": "synthetic:n=120,d=4,classes=3,test=30", "model": "mlp:hidden=8", "batch_size": 16}


def messages_until_done(feed: LiveFeed, run: BackgroundRun, timeout_s: float = 60.0) -> list:
    assert run.join(timeout_s), "the run did not end"
    return feed.drain()


def test_feed_is_safe_to_fill_from_many_threads():
    feed = LiveFeed()
    threads = [
        threading.Thread(target=lambda i=i: [feed.put("steps", [i]) for _ in range(500)]) for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(feed.drain()) == 2000 and feed.drain() == []


def test_sink_forwards_records_and_keeps_them_only_in_the_inner_sink():
    feed, inner = LiveFeed(), MemorySink()
    sink = LiveSink(feed, inner=inner)
    sink.write(eval_records(1)[0])
    sink.write(StepRecord("r", 0, 0, 0, 8, 1.0, 0.01))
    sink.write_frame(SelectionRecord, selection_frame(n=10, epochs=1))
    sink.write_frame(TrafficRecord, ring_traffic())
    sink.write_frame(StepRecord, pd.DataFrame(step_rows()))  # distributed steps arrive live instead
    assert [kind for kind, _ in feed.drain()] == ["eval", "steps", "selection", "epoch_traffic"]
    assert not any(sink.frames.values()) and not any(sink.records.values())
    assert len(inner.frame(StepRecord)) == 1 + len(step_rows()) and len(inner.frame(SelectionRecord)) == 10


def test_stop_raises_at_the_next_record():
    feed = LiveFeed()
    sink = LiveSink(feed)
    sink.write(StepRecord("r", 0, 0, 0, 8, 1.0, 0.01))
    feed.stop()
    with pytest.raises(StopRun):
        sink.write(StepRecord("r", 0, 1, 0, 8, 1.0, 0.01))
    with pytest.raises(StopRun):
        feed.progress(eval_records(1)[0])


def test_state_keeps_the_last_steps_per_rank_and_counts_them_all():
    state = LiveState(max_steps=5)
    changed = state.apply(
        [("steps", step_rows(ranks=2, steps=8)), ("steps", step_rows(ranks=2, steps=4, first=8))]
    )
    assert changed == {"steps"}
    assert state.steps_seen == 24
    assert state.steps.groupby("rank")["step"].apply(list).to_dict() == {
        0: [7, 8, 9, 10, 11],
        1: [7, 8, 9, 10, 11],
    }


def test_full_epoch_traffic_replaces_the_sampled_rows_even_when_they_arrive_late():
    state = LiveState()
    state.apply([("traffic", ring_traffic(steps=range(0, 20, 10)).to_dict("records"))])
    assert sorted(state.traffic["step"].unique()) == [0, 10]
    full = ring_traffic(steps=range(0, 20))
    state.apply([("epoch_traffic", full)])
    late = ring_traffic(steps=range(10, 11)).to_dict("records")  # a sampled step of epoch 0, after the fact
    state.apply(
        [("traffic", late), ("traffic", ring_traffic(steps=range(20, 21), epoch=1).to_dict("records"))]
    )
    assert len(state.traffic) == len(full) + len(late)  # no double counting of epoch 0
    assert sorted(state.traffic["step"].unique()) == list(range(21))


def test_state_merges_each_ranks_selection_and_takes_new_evaluations_once():
    state = LiveState()
    selection = selection_frame(n=40, epochs=2, ranks=2)
    for (_, _), part in selection.groupby(["epoch", "rank"]):
        state.apply([("selection", part)])
    assert len(state.selection) == 40 and set(state.selection["epoch"]) == {1}
    assert state.grid.matrix()[1].shape == (40, 2)
    state.apply([("eval", r) for r in eval_records(3)])
    assert len(state.take_new_evals()) == 3 and len(state.take_new_evals()) == 0
    assert list(state.evals["epoch"]) == [0, 1, 2]
    state.apply([("error", "--data: no such file"), ("done", "failed (x)")])
    assert state.error.startswith("--data") and state.done and state.status == "failed (x)"


def test_background_run_trains_saves_and_reports(tmp_path):
    config = RunConfig.from_flat(**TINY, epochs=2, sampler="adass:eps=0.2")
    feed = LiveFeed()
    run = BackgroundRun(config, feed, run_id="one", save_dir=tmp_path).start()
    kinds = [kind for kind, _ in messages_until_done(feed, run)]
    assert kinds.count("eval") == 2 and kinds.count("selection") == 2 and "dataset" in kinds
    assert kinds[-1] == "done" and run.outcome == "finished (one)"
    saved = load_run(tmp_path / "one")
    assert list(saved["eval"]["epoch"]) == [0, 1] and len(saved["selection"]) == 2 * 120


def test_stopping_a_background_run_keeps_the_finished_epochs(tmp_path):
    config = RunConfig.from_flat(**TINY, epochs=500, sampler="full")
    feed = LiveFeed()
    run = BackgroundRun(config, feed, run_id="long", save_dir=tmp_path)
    seen: list = []

    def stop_after_an_epoch(record: EvalRecord) -> None:
        seen.append(record)
        if record.epoch >= 1:
            run.stop()
        LiveFeed.progress(feed, record)

    feed.progress = stop_after_an_epoch  # the page's Stop button, pressed once two epochs are done
    run.start()
    messages = messages_until_done(feed, run)
    assert run.outcome == "stopped (long)" and messages[-1] == ("done", "stopped (long)")
    assert 2 <= len(seen) < 500
    assert len(load_run(tmp_path / "long")["eval"]) >= 2


def test_a_failing_run_reports_one_line():
    config = RunConfig.from_flat(**{**TINY, "data": "idx:/nonexistent/folder"}, epochs=1)
    feed = LiveFeed()
    run = BackgroundRun(config, feed).start()
    messages = messages_until_done(feed, run)
    errors = [payload for kind, payload in messages if kind == "error"]
    assert len(errors) == 1 and errors[0].startswith("--data:") and "\n" not in errors[0]
    assert run.outcome.startswith("failed")
