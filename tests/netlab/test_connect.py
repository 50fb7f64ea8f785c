"""A rank that cannot reach its peers fails with one line naming the ranks and the addresses tried."""

from __future__ import annotations

import subprocess
import sys

import pytest
from lab_cases import lab

pytestmark = pytest.mark.netlab

JOIN = """
import pathlib, sys, time
import torch.distributed as dist
from adass.runtime.cluster.bootstrap import GroupConnectError, init_group
rank, host, folder = int(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
(folder / f"ready{rank}").touch()  # imports done: both ranks start the 2 s rendezvous together
deadline = time.time() + 120
while len(list(folder.glob("ready*"))) < 2 and time.time() < deadline:
    time.sleep(0.02)
try:
    store = dist.FileStore(str(folder / "store"), 2)  # the rendezvous works: the pairs cannot connect
    init_group(store, rank, 2, 2.0, host=host, bind="lo")  # gloo waits some multiple of it
    print("joined")
except GroupConnectError as err:
    print(err)
"""


def test_ranks_bound_to_loopback_on_different_hosts_fail_in_one_line(tmp_path) -> None:
    # binding loopback on every host is what gloo did by itself where host names resolve to 127.0.0.1
    with lab(tmp_path, hosts=2, rate="1gbit") as state:
        ranks = [
            subprocess.Popen(["ip", "netns", "exec", h.netns, sys.executable, "-c", JOIN, str(h.index), h.address,
                              str(tmp_path)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            for h in state.hosts
        ]  # fmt: skip
        outputs = [r.communicate(timeout=300)[0].strip() for r in ranks]
    for rank, text in enumerate(outputs):
        other = 1 - rank
        assert text.count("\n") == 0, text
        assert text.startswith(f"rank {rank} of 2 (at 127.0.0.1 on lo) could not connect its process group")
        assert f"to rank {other} at 127.0.0.1 on lo" in text
