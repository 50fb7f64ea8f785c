"""What a run says it sent is what the kernel carried, and a shaped link bounds the step.

Bytes. A ring fp32 run with 4 workers on 4 lab hosts records every transfer (TrafficRecord: src and
dst rank, wire bytes). Rank r runs on host r (ranks follow the sorted worker addresses, worker i on
host i). The kernel counts every frame leaving and entering each host's ``eth0``, Dask's own traffic
(tasks, heartbeats, the records streamed to the client) included, and that cannot be told apart from
gloo's in the counters. So the test subtracts a baseline: the same run (same data, model, epochs,
steps, records) with ``randk:ratio=0.001``, which moves a thousandth of the gradient bytes. Dask's
traffic is the same in both up to its jitter (heartbeats over a slightly different run time); the
difference of the counters is then the difference of the gradient traffic, which must match the
difference of the recorded wire bytes, per host and direction, within:

- TCP/IP framing: at most 66 bytes of headers (Ethernet 14, IPv4 20, TCP with timestamps 32) per
  segment of at most 1448 payload bytes (MTU 1500); the counters count one header per GSO packet, so
  fewer headers are also fine;
- the ACKs a host sends for what it receives: at most one 66-byte frame per received segment;
- gloo's own message headers and Dask's jitter: ``SLACK_BYTES`` per host.

Time. On a 100 Mbit link, every byte a host receives in a step passes its download's token bucket,
so the step (slowest rank: compute + codec + waiting on transfers) lasts at least the most bytes any
host received in it, less one bucket (which passes at line rate), over the rate.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from lab_cases import lab

from adass.netlab import read_counters, since, start_cluster
from adass.netlab.shaping import burst_bytes, parse_rate

pytestmark = pytest.mark.netlab

RATE = "100mbit"
HEADER_BYTES, MSS_BYTES = 66, 1448
SLACK_BYTES = 256 * 1024
# ~0.3M parameters: 1.2 MB of fp32 gradient a step, so the gradient traffic dwarfs Dask's
RUN = ["--data", "synthetic:n=512,d=64", "--model", "mlp:hidden=512,layers=2", "--batch-size", "128",
       "--epochs", "1", "--seed", "3", "--quiet", "--timeout-s", "300", "--workers", "4", "--exchange", "ring"]  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The ring fp32 run and its baseline, each with the counters' growth per host."""
    folder = tmp_path_factory.mktemp("traffic")
    with lab(folder / "lab", hosts=4, rate=RATE) as state:
        address = start_cluster(state, workers=4, timeout_s=180)
        out = {}
        for name, codec in (("fp32", "fp32"), ("baseline", "randk:ratio=0.001")):
            before = read_counters(state)
            argv = ["ip", "netns", "exec", state.hosts[0].netns, sys.executable, "-m", "adass.cli", "train", *RUN,
                    "--codec", codec, "--scheduler", address, "--out", str(folder / name)]  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, done.stderr[-2000:]
            out[name] = (folder / name, since(before, read_counters(state)))
        yield out


def _wire(run_dir: Path) -> tuple[pd.Series, pd.Series]:
    traffic = pd.read_parquet(run_dir / "traffic.parquet")
    return traffic.groupby("src")["wire_bytes"].sum(), traffic.groupby("dst")["wire_bytes"].sum()


def test_kernel_bytes_match_the_recorded_wire_bytes_per_host(runs) -> None:
    (fp32_dir, fp32), (base_dir, base) = runs["fp32"], runs["baseline"]
    sent, received = (a - b for a, b in zip(_wire(fp32_dir), _wire(base_dir), strict=True))
    assert (sent > 1_000_000).all(), sent  # the gradient traffic is what is measured
    for host in range(4):
        tx = fp32[host].tx_bytes - base[host].tx_bytes
        rx = fp32[host].rx_bytes - base[host].rx_bytes
        for counted, out, back in ((tx, sent[host], received[host]), (rx, received[host], sent[host])):
            ceiling = out * (1 + HEADER_BYTES / MSS_BYTES) + back * HEADER_BYTES / MSS_BYTES + SLACK_BYTES
            assert out - SLACK_BYTES <= counted <= ceiling, (host, counted, out, back)


def test_a_step_on_a_100mbit_link_takes_at_least_its_bytes_over_the_rate(runs) -> None:
    run_dir, _ = runs["fp32"]
    steps = pd.read_parquet(run_dir / "steps.parquet")
    traffic = pd.read_parquet(run_dir / "traffic.parquet")
    step_s = (
        (steps["compute_s"] + steps["encode_s"] + steps["comm_s"] + steps["decode_s"])
        .groupby(steps["step"])
        .max()
    )
    traffic = traffic[traffic["phase"] != "agree"]  # the epoch's budget agreement belongs to no step
    received = traffic.groupby(["step", "dst"])["wire_bytes"].sum().groupby(level="step").max()
    rate_bps = parse_rate(RATE)
    floor_s = (received - burst_bytes(rate_bps)) * 8 / rate_bps
    assert len(step_s) == len(floor_s) >= 4
    assert (floor_s > 0.05).all()  # a real bound: tens of milliseconds at least
    assert (step_s >= floor_s.reindex(step_s.index)).all(), pd.DataFrame(
        {"step_s": step_s, "floor_s": floor_s}
    )
