"""A throttled gloo transport sends a small bare tensor and its stamp as one message, a large one as
two; both arrive whole, in order, and paced from their send time."""

from __future__ import annotations

import multiprocessing

from exchange_cases import stamped_values_over_gloo

from adass.exchange.transport.gloo import JOINED_STAMP_MAX_BYTES
from adass.runtime.launch import run_processes


def test_small_bare_tensors_travel_with_their_stamp_in_one_message() -> None:
    small, edge = 10, JOINED_STAMP_MAX_BYTES // 4
    sizes = [small, edge, edge + 1, 0, small]  # the two rules interleaved on one pair of ranks
    sender, receiver = run_processes(stamped_values_over_gloo, 2, (sizes, "1gbit,100us"), timeout_s=60)
    assert sender["messages"] == [1, 1, 2, 1, 1]
    assert receiver["equal"] == [True] * len(sizes)
    assert all(seconds >= sim * 0.999 for seconds, sim in receiver["timing"]), receiver["timing"]
    assert multiprocessing.active_children() == []
