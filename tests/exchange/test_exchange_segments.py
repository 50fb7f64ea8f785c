"""Pipeline pieces: 256 KiB between hosts, whole chunks on loopback; a ring cut into pieces gives
the same sums as one sending whole chunks."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest
from exchange_cases import segmented_ring_over_gloo

from adass.exchange.transport import LOOPBACK_SEGMENT_BYTES, NETWORK_SEGMENT_BYTES, segment_bytes_for
from adass.exchange.transport.segments import is_loopback
from adass.launch import run_processes


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.3.0.9", True), ("::1", True), ("[::1]", True), ("localhost", True),
     ("10.77.0.2", False), ("192.168.1.5", False), ("fe80::1", False), ("no-such-host.invalid", False)],
)  # fmt: skip
def test_loopback_hosts_send_whole_chunks_and_others_pipeline(host, loopback):
    assert is_loopback(host) == loopback
    assert segment_bytes_for(host) == (LOOPBACK_SEGMENT_BYTES if loopback else NETWORK_SEGMENT_BYTES)
    assert NETWORK_SEGMENT_BYTES == 256 * 1024


def test_a_segmented_gloo_ring_gives_the_whole_chunk_ring_s_bits():
    world, n = 3, 200_003  # chunks of ~267 KB: two network pieces each
    sizes = [LOOPBACK_SEGMENT_BYTES, NETWORK_SEGMENT_BYTES, 20_000]
    results = run_processes(segmented_ring_over_gloo, world, (n, sizes), timeout_s=120)
    for result in results:
        whole = result[LOOPBACK_SEGMENT_BYTES]
        assert whole["pieces"] == 2 * (world - 1)  # one piece a hop
        for size in sizes[1:]:
            assert np.array_equal(result[size]["result"], whole["result"]), size
        assert result[NETWORK_SEGMENT_BYTES]["pieces"] == 2 * 2 * (world - 1)
        assert result[20_000]["pieces"] > result[NETWORK_SEGMENT_BYTES]["pieces"]
    for other in results[1:]:
        assert np.array_equal(
            other[NETWORK_SEGMENT_BYTES]["result"], results[0][NETWORK_SEGMENT_BYTES]["result"]
        )
    assert multiprocessing.active_children() == []
