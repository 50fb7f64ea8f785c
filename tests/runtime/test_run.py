"""``run``: one entry for in-process and distributed runs, and how a run is stopped."""

import threading

from adass.metrics import EvalRecord, MemorySink, Sink, StepRecord
from adass.runtime import run


def test_run_trains_in_process_without_workers(tiny_config):
    sink = MemorySink()
    assert isinstance(sink, Sink)
    result = run(tiny_config, sink=sink, run_id="here")
    assert not result.stopped and result.model is not None
    evals = sink.frame(EvalRecord)
    assert list(evals["epoch"]) == [0, 1, 2] and set(evals["run"]) == {"here"}
    assert result.counters.backprops == 3 * result.dataset.n_train


def test_a_set_event_stops_before_the_first_epoch(tiny_config):
    stop = threading.Event()
    stop.set()
    result = run(tiny_config, stop=stop)
    assert result.stopped and result.final is None and result.sink.frame(StepRecord).empty


def test_a_stop_within_an_epoch_ends_the_run_after_that_step(tiny_config):
    steps_per_epoch = 8  # 240 samples, batches of 32
    seen = []

    def stop() -> bool:
        seen.append(1)
        return len(seen) > steps_per_epoch + 4  # one check per epoch start and one per step

    result = run(tiny_config, stop=stop)
    assert result.stopped
    assert list(result.sink.frame(EvalRecord)["epoch"]) == [0]  # the half epoch is not evaluated
    assert len(result.sink.frame(StepRecord)) == steps_per_epoch + 3
