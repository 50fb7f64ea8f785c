"""The hand-off from a run to its page: a thread-safe queue of typed messages, a sink feeding it, Stop."""

import threading

import pandas as pd
import pytest
from synthetic_records import eval_records, ring_traffic, selection_frame, step_rows

from adass.dashboard import (
    EpochTraffic,
    EvalDone,
    LiveFeed,
    LiveSink,
    SelectionFrame,
    StepRows,
    StopRun,
    TrafficRows,
)
from adass.metrics import MemorySink, SelectionRecord, StepRecord, TrafficRecord


def test_feed_is_safe_to_fill_from_many_threads():
    feed = LiveFeed()
    threads = [
        threading.Thread(target=lambda i=i: [feed.put(StepRows([{"step": i}])) for _ in range(500)])
        for i in range(4)
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
    sink.write_frame(StepRecord, pd.DataFrame(step_rows()))  # steps arrive live, through the run's store
    assert [type(m) for m in feed.drain()] == [EvalDone, SelectionFrame, EpochTraffic]
    assert not any(sink.frames.values()) and not any(sink.records.values())
    assert len(inner.frame(StepRecord)) == 1 + len(step_rows()) and len(inner.frame(SelectionRecord)) == 10


def test_rows_streamed_by_a_distributed_run_become_typed_messages():
    feed = LiveFeed()
    feed.listener("steps", step_rows(ranks=1, steps=2))  # what a RunStore hands its listeners
    feed.listener("traffic", ring_traffic().to_dict("records"))
    feed.listener("something-else", [{"a": 1}])  # kinds the page does not show are left out
    steps, traffic = feed.drain()
    assert isinstance(steps, StepRows) and [r["step"] for r in steps.rows] == [0, 1]
    assert isinstance(traffic, TrafficRows) and len(traffic.rows) == len(ring_traffic())


def test_stop_is_seen_by_the_run_and_raises_at_the_next_epoch():
    feed = LiveFeed()
    feed.progress(eval_records(1)[0])
    assert not feed.stopping
    feed.stop()
    assert feed.stopping  # the run's stop signal: checked after every step of one model in this process
    with pytest.raises(StopRun):
        feed.progress(eval_records(1)[0])
