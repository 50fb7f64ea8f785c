"""Waiting on all ranks together: the first failure ends the wait at once, named by rank and worker."""

from concurrent.futures import Future

import pytest

from adass.data import DataError, DataNotFound
from adass.failures import Diverged, LostRank, RunFailure
from adass.runtime.cluster.waiting import call_all, wait_all

ADDRESSES = ["tls://127.0.0.1:1", "tls://127.0.0.1:2", "tls://127.0.0.1:3"]


def _futures(*outcomes) -> list[Future]:
    futures = []
    for outcome in outcomes:
        future: Future = Future()
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        elif outcome is not None:
            future.set_result(outcome)
        futures.append(future)  # None: still running (a rank stuck waiting for a dead peer)
    return futures


def test_results_come_back_in_rank_order():
    assert wait_all(_futures("a", "b", "c"), ADDRESSES, 10, "epoch 0") == ["a", "b", "c"]


def test_a_later_ranks_error_is_seen_while_rank_0_still_waits():
    futures = _futures(None, "b", ConnectionError("Connection closed by peer\n  at gloo ..."))
    with pytest.raises(LostRank) as caught:
        wait_all(futures, ADDRESSES, 600, "epoch 3")
    assert str(caught.value) == (f"epoch 3: rank 2 on worker {ADDRESSES[2]} failed: ConnectionError: "
                                 "Connection closed by peer")  # fmt: skip


def test_a_worker_that_left_is_named_as_the_cause():
    futures = _futures(RuntimeError("gloo: connection reset"), None, None)
    with pytest.raises(LostRank, match=f"worker {ADDRESSES[1]} \\(rank 1\\) left the cluster"):
        wait_all(futures, ADDRESSES, 600, "epoch 1", alive=lambda: {ADDRESSES[0], ADDRESSES[2]})


def test_the_runs_own_verdict_passes_through_unchanged_in_kind():
    with pytest.raises(Diverged, match="^epoch 2: not finite"):
        wait_all(_futures(Diverged("not finite"), None, None), ADDRESSES, 600, "epoch 2")


def test_ranks_that_never_answer_fail_at_the_timeout_by_name():
    with pytest.raises(LostRank, match=r"ranks \[0, 2\]"):
        wait_all(_futures(None, "b", None), ADDRESSES, 0.2, "epoch 0")


class _Member:
    """An actor handle: a call returns a future, or is refused at once (its worker is gone)."""

    def __init__(self, outcome) -> None:
        self.outcome, self.calls = outcome, []

    def step(self, *args):
        self.calls.append(args)
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return _futures(self.outcome)[0]


def test_calls_go_to_every_rank_with_their_arguments_and_come_back_in_order():
    members = [_Member("a"), _Member("b"), _Member("c")]
    assert call_all(members, "step", (4, "x"), ADDRESSES, 10, "epoch 4") == ["a", "b", "c"]
    assert [m.calls for m in members] == [[(4, "x")]] * 3


def test_a_call_refused_before_it_leaves_names_the_worker_that_left():
    members = [
        _Member("a"),
        _Member(RuntimeError("Worker holding Actor was lost.  Status: lost")),
        _Member("c"),
    ]
    with pytest.raises(LostRank, match=f"epoch 5: worker {ADDRESSES[1]} \\(rank 1\\) left the cluster"):
        call_all(members, "step", (), ADDRESSES, 600, "epoch 5", alive=lambda: {ADDRESSES[0], ADDRESSES[2]})
    assert members[2].calls == []  # nothing more is sent once a rank is known to be lost


def test_a_call_refused_because_the_scheduler_is_gone_ends_the_run_without_a_restart():
    def alive() -> set[str]:
        raise RunFailure("the Dask scheduler tcp://127.0.0.1:9 is gone (client connecting)")

    members = [_Member(RuntimeError("Worker holding Actor was lost.  Status: cancelled")), _Member("b")]
    with pytest.raises(RunFailure) as caught:
        call_all(members, "step", (), ADDRESSES, 600, "epoch 0", alive=alive)
    assert not isinstance(caught.value, LostRank) and "scheduler" in str(caught.value)


def test_a_refused_call_with_every_worker_present_is_named_by_rank_and_error():
    members = [_Member("a"), _Member("b"), _Member(OSError("Timed out trying to connect"))]
    with pytest.raises(LostRank) as caught:
        call_all(members, "step", (), ADDRESSES, 600, "epoch 1", alive=lambda: set(ADDRESSES))
    assert (
        str(caught.value)
        == f"epoch 1: rank 2 on worker {ADDRESSES[2]} failed: OSError: Timed out trying to connect"
    )


def test_a_worker_that_cannot_read_the_data_ends_the_wait_naming_it_and_why():
    futures = _futures(None, DataNotFound("svmlight: file /d/x.svm not found"), None)
    with pytest.raises(DataError) as caught:
        wait_all(futures, ADDRESSES, 600, "joining the process group")
    assert str(caught.value) == (
        f"rank 1 on worker {ADDRESSES[1]}: svmlight: file /d/x.svm not found (with --data-to-workers read each "
        "worker reads --data itself: its files must be at that URL or path on every worker's machine; auto or "
        "stream sends a worker that lacks them its rows from this process)"
    )


def test_a_worker_without_the_runs_code_ends_the_run_without_a_restart():
    try:
        try:
            raise ModuleNotFoundError("No module named 'adass'", name="adass")
        except ModuleNotFoundError as missing:
            raise RuntimeError(
                "Error during deserialization of the task graph. This frequently\noccurs if"
            ) from missing
    except RuntimeError as err:
        failed = err
    with pytest.raises(RunFailure) as caught:
        wait_all(_futures(None, failed, None), ADDRESSES, 600, "starting the actors")
    assert not isinstance(caught.value, LostRank)
    assert str(caught.value) == (f"starting the actors: rank 1 on worker {ADDRESSES[1]} cannot load the run's code "
                                 "(ModuleNotFoundError: No module named 'adass'); every worker needs the same adass, "
                                 "torch and dask as this process")  # fmt: skip


def test_a_worker_short_of_memory_for_the_data_is_not_told_about_paths():
    futures = _futures(
        DataError("svmlight: /d/x.svm would need 9.0 GiB; 4.0 GiB of memory is available"), None
    )
    with pytest.raises(DataError) as caught:
        wait_all(futures, ADDRESSES[:2], 600, "joining the process group")
    assert (
        str(caught.value)
        == f"rank 0 on worker {ADDRESSES[0]}: svmlight: /d/x.svm would need 9.0 GiB; 4.0 GiB of memory is available"
    )
