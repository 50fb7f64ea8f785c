"""A run on a background thread: it trains, saves, reports through its feed, stops when asked."""

import json
import time

from adass.config import RunConfig
from adass.dashboard import (
    BackgroundRun,
    DatasetLoaded,
    Done,
    EvalDone,
    LiveFeed,
    Message,
    RunError,
    SelectionFrame,
    Status,
    run_colocated,
    run_world,
)
from adass.metrics import load_run

TINY = {"data": "synthetic:n=120,d=4,classes=3,test=30", "model": "mlp:hidden=8", "batch_size": 16}


def messages_until_done(feed: LiveFeed, run: BackgroundRun, timeout_s: float = 60.0) -> list[Message]:
    assert run.join(timeout_s), "the run did not end"
    return feed.drain()


def test_background_run_trains_saves_and_reports(tmp_path):
    config = RunConfig.from_flat(**TINY, epochs=2, sampler="adass:eps=0.2")
    feed = LiveFeed()
    run = BackgroundRun(config, feed, run_id="one", save_dir=tmp_path).start()
    kinds = [type(m) for m in messages_until_done(feed, run)]
    assert kinds.count(EvalDone) == 2 and kinds.count(SelectionFrame) == 2 and DatasetLoaded in kinds
    assert kinds[-1] is Done and run.outcome == "finished (one)"
    saved = load_run(tmp_path / "one")
    assert list(saved["eval"]["epoch"]) == [0, 1] and len(saved["selection"]) == 2 * 120
    # config.json says how the data were standardized, as adass train's does
    recorded = json.loads((tmp_path / "one" / "config.json").read_text())["standardization"]
    assert recorded["setting"] == "auto" and len(recorded["mean"]) == 4


def test_stopping_a_background_run_keeps_the_finished_epochs(tmp_path):
    config = RunConfig.from_flat(**TINY, epochs=500, sampler="full")
    feed = LiveFeed()
    run = BackgroundRun(config, feed, run_id="long", save_dir=tmp_path).start()
    reader, evals = feed.reader(), 0
    while evals < 2 and run.running:  # the page's Stop button, pressed once two epochs are done
        evals += sum(isinstance(m, EvalDone) for m in reader.drain())
        time.sleep(0.02)
    run.stop()
    messages = messages_until_done(feed, run)
    assert run.outcome == "stopped (long)" and messages[-1] == Done("stopped (long)")
    assert 2 <= run.epochs_done < 500
    assert len(load_run(tmp_path / "long")["eval"]) >= 2
    assert json.loads((tmp_path / "long" / "outcome.json").read_text())["outcome"] == "stopped"


def test_a_run_of_one_model_trains_in_a_process_of_its_own():
    config = RunConfig.from_flat(**TINY, epochs=1)
    feed = LiveFeed()
    run = BackgroundRun(config, feed).start()
    messages = messages_until_done(feed, run)
    assert any(isinstance(m, Status) and "process of its own" in m.text for m in messages)
    assert run.outcome.startswith("finished") and run.epochs_done == 1


def test_a_failing_run_reports_one_line():
    config = RunConfig.from_flat(**{**TINY, "data": "idx:/nonexistent/folder"}, epochs=1)
    feed = LiveFeed()
    run = BackgroundRun(config, feed).start()
    messages = messages_until_done(feed, run)
    errors = [m.text for m in messages if isinstance(m, RunError)]
    assert len(errors) == 1 and errors[0].startswith("--data:") and "\n" not in errors[0]
    assert run.outcome.startswith("failed")


def test_world_counts_replicas_and_server_shards():
    assert run_world(RunConfig.from_flat(**TINY)) == 0  # in-process
    assert run_world(RunConfig.from_flat(**TINY, workers=3, exchange="ring")) == 3
    assert run_world(RunConfig.from_flat(**TINY, workers=3, exchange="ps:servers=2")) == 5
    colocated = RunConfig.from_flat(**TINY, workers=3, exchange="ps:servers=2,colocated=true")
    assert run_world(colocated) == 3 and run_colocated(colocated) == {0: 0, 1: 1}
    assert run_colocated(RunConfig.from_flat(**TINY, workers=3, exchange="ps:servers=2")) == {}
    assert run_colocated(RunConfig.from_flat(**TINY, workers=3, exchange="ring")) == {}


def _initial_environ(queue) -> None:
    """In a process forked from the process server: the environment it was started with."""
    with open("/proc/self/environ", "rb") as f:
        queue.put(dict(item.decode().split("=", 1) for item in f.read().split(b"\0") if b"=" in item))


def test_page_runs_and_their_dask_workers_fork_from_a_server_that_keeps_freed_memory():
    import sys

    import dask
    import pytest

    from adass.allocator import ENVIRON
    from adass.dashboard.own_process import process_context
    from adass.dashboard.serve import _warm_runs

    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc: Linux only")
    context = process_context()
    queue = context.Queue()
    child = context.Process(target=_initial_environ, args=(queue,))
    child.start()
    seen = queue.get(timeout=60)
    child.join(30)
    assert {key: seen.get(key) for key in ENVIRON} == ENVIRON  # as the embedded cluster's workers start
    with dask.config.set({"distributed.worker.multiprocessing-method": "spawn"}):
        _warm_runs()  # what the dashboard does when it starts serving
        assert dask.config.get("distributed.worker.multiprocessing-method") == "forkserver"
