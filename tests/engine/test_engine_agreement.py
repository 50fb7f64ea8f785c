"""Agreements: the in-process board and the torch.distributed group give the same answers."""

import threading

import pytest
from engine_cases import agreement_calls, on_threads, over_gloo

from adass.engine import Agreement, AgreementBoard, InProcAgreement, LocalAgreement
from adass.runtime.launch import run_processes


def test_local_agreement_is_a_world_of_one():
    local = LocalAgreement()
    assert isinstance(local, Agreement)
    assert agreement_calls(local) == {"sum": 1, "gather": [[]], "empty": [0]}


def test_in_process_replicas_agree_as_a_gloo_group_does():
    board = AgreementBoard(3)
    threads = on_threads(3, lambda r: agreement_calls(board.agreement(r)))
    processes = run_processes(over_gloo, 3, timeout_s=90)
    assert threads == processes
    assert threads[0]["sum"] == 6 and [len(g) for g in threads[0]["gather"]] == [0, 1, 2]
    assert isinstance(board.agreement(0), InProcAgreement)


def test_an_aborted_board_wakes_the_waiting_replicas():
    board = AgreementBoard(2, timeout_s=30)
    failed = threading.Event()

    def lonely() -> None:
        with pytest.raises(threading.BrokenBarrierError):
            board.agreement(0).sum_int(1)
        failed.set()

    t = threading.Thread(target=lonely)
    t.start()
    board.abort()
    t.join(10)
    assert failed.is_set()
