"""Shaping is real: a bounded transfer between two lab hosts takes at least its bytes over the rate."""

from __future__ import annotations

import subprocess
import sys

import pytest
from lab_cases import lab

from adass.netlab.shaping import burst_bytes, parse_rate

pytestmark = pytest.mark.netlab

RECEIVE = """
import socket, sys
server = socket.create_server((sys.argv[1], 5001))
print("ready", flush=True)
conn, _ = server.accept()
total = 0
while chunk := conn.recv(1 << 16):
    total += len(chunk)
conn.sendall(b"k")
print(total, flush=True)
"""
SEND = """
import socket, sys, time
conn = socket.create_connection((sys.argv[1], 5001), timeout=60)
start = time.perf_counter()
conn.sendall(bytes(int(sys.argv[2])))
conn.shutdown(socket.SHUT_WR)
conn.recv(1)  # the receiver has every byte
print(time.perf_counter() - start)
"""


def test_a_transfer_takes_at_least_its_bytes_over_the_rate(tmp_path) -> None:
    rate, nbytes = "100mbit", 4_000_000
    with lab(tmp_path, hosts=2, rate=rate) as state:
        a, b = state.hosts
        receiver = subprocess.Popen(["ip", "netns", "exec", b.netns, sys.executable, "-c", RECEIVE, b.address],
                                    stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:
            assert receiver.stdout.readline().strip() == "ready"
            sent = subprocess.run(["ip", "netns", "exec", a.netns, sys.executable, "-c", SEND, b.address, str(nbytes)],
                                  capture_output=True, text=True, timeout=120)  # fmt: skip
            assert sent.returncode == 0, sent.stderr
            assert int(receiver.stdout.readline()) == nbytes
        finally:
            receiver.kill()
            receiver.wait()
    # the bucket lets one burst through at line rate; everything after it waits for tokens
    floor_s = (nbytes - burst_bytes(parse_rate(rate))) * 8 / parse_rate(rate)
    assert float(sent.stdout) >= floor_s


def test_rates_parse_in_the_link_models_units() -> None:
    assert parse_rate("1gbit") == 1e9 and parse_rate("250kbit") == 250e3
    with pytest.raises(Exception, match="--rate: 'fast' is not allowed"):
        parse_rate("fast")
    assert burst_bytes(1e9) == 125_000 and burst_bytes(1e6) == 32 * 1024
