"""Training across lab hosts: a dask scheduler and workers on addresses of their own, the client on a lab host.

Gloo binds where each Dask worker lives, so the run connects (it timed out when gloo advertised the
address the host name resolves to, 127.0.0.1) and ends with the same parameters as on loopback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from lab_cases import lab

from adass.allocator import ENVIRON
from adass.netlab import start_cluster
from adass.runtime.cluster import read_checkpoint

pytestmark = pytest.mark.netlab

RUN = ["--data", "synthetic:n=512", "--batch-size", "128", "--epochs", "1", "--seed", "5", "--quiet",
       "--timeout-s", "180"]  # fmt: skip
# exchange -> replicas; PS takes one more Dask worker as its server, so both runs use 4 workers on 4 hosts
ARMS = {"ring": 4, "ps": 3}


@pytest.fixture(scope="module")
def lab_cluster(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lab")
    with lab(folder, hosts=4, rate="1gbit") as state:
        address = start_cluster(state, workers=4, timeout_s=180)
        yield state, address


def train(out: Path, exchange: str, *prefix: str, scheduler: str = "") -> None:
    argv = [*prefix, sys.executable, "-m", "adass.cli", "train", *RUN, "--exchange", exchange,
            "--workers", str(ARMS[exchange]), "--out", str(out)]  # fmt: skip
    if scheduler:
        argv += ["--scheduler", scheduler]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


def test_lab_processes_keep_freed_memory_as_the_embedded_cluster_s_workers_do(lab_cluster) -> None:
    state, _ = lab_cluster
    assert len(state.processes) == 5  # the scheduler and four workers
    for entry in state.processes:
        environ = Path(f"/proc/{entry.pid}/environ").read_bytes().split(b"\0")
        seen = dict(item.decode().split("=", 1) for item in environ if b"=" in item)
        assert {key: seen.get(key) for key in ENVIRON} == ENVIRON, entry.role


# the ring across lab hosts is matched with loopback in test_no_shared_folder.py (data over HTTP too)
@pytest.mark.parametrize("exchange", ["ps"])
def test_a_run_across_lab_hosts_matches_loopback(lab_cluster, tmp_path, exchange: str) -> None:
    state, address = lab_cluster
    lab_dir = str(Path(state.path).parent)
    in_lab = [
        sys.executable,
        "-m",
        "adass.netlab",
        "run",
        "--name",
        state.name,
        "--state-dir",
        lab_dir,
        "--host",
        "0",
        "--",
    ]
    train(tmp_path / "lab", exchange, *in_lab, scheduler=address)
    train(tmp_path / "loopback", exchange)
    lab_eval, loop_eval = (pd.read_parquet(tmp_path / d / "eval.parquet") for d in ("lab", "loopback"))
    assert lab_eval["test_acc"].tolist() == loop_eval["test_acc"].tolist()
    for rank in range(ARMS[exchange]):
        a, b = (torch.load(read_checkpoint(tmp_path / d).folder / f"rank{rank}.pt", weights_only=True)["model"]
                for d in ("lab", "loopback"))  # fmt: skip
        for key in a:
            assert torch.equal(a[key], b[key]), (rank, key)
