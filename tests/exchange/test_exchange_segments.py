"""Pipeline pieces: 256 KiB between hosts, whole chunks on loopback; a ring cut into pieces gives
the same sums as one sending whole chunks."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest
from exchange_cases import ring_pair_over_gloo, segmented_ring_over_gloo

from adass.exchange.transport import LOOPBACK_SEGMENT_BYTES, NETWORK_SEGMENT_BYTES, segment_bytes_for
from adass.exchange.transport.segments import is_loopback
from adass.runtime.launch import run_processes


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


def test_a_pair_of_ranks_between_hosts_posts_receives_first_for_the_same_sums():
    """At P = 2 one peer is both neighbours: on loopback its sends go out first, between hosts its
    receives are posted first (so both directions of the link carry data at once); the sums agree."""
    codecs = ["fp32", "qsgd:bits=8", "randk:ratio=0.3+fp16"]
    results = run_processes(ring_pair_over_gloo, 2, (50_003, codecs, 64 << 10), timeout_s=120)
    for result in results:
        for codec in codecs:
            local, remote = result[(codec, False)], result[(codec, True)]
            assert (local["first"], remote["first"]) == ("send", "recv"), codec
            assert np.array_equal(local["result"], remote["result"]), codec
    for codec in codecs:  # every rank ends with the same result
        assert np.array_equal(results[0][(codec, True)]["result"], results[1][(codec, True)]["result"])
    assert multiprocessing.active_children() == []
