"""Waiting on all ranks together: the first failure ends the wait at once, named by rank and worker."""

from concurrent.futures import Future

import pytest

from adass.cluster.waiting import wait_all
from adass.failures import Diverged, LostRank

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
