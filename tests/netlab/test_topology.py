"""The lab as a user drives it: ``up`` builds namespaces on a bridge, ``down`` leaves nothing behind."""

from __future__ import annotations

import os
import subprocess

import pytest
from lab_cases import lab_name, namespaces, netlab, require_lab

pytestmark = pytest.mark.netlab


@pytest.fixture
def need_lab() -> None:
    require_lab()


def test_up_builds_hosts_on_a_bridge_and_down_removes_everything(tmp_path, need_lab) -> None:
    name, state = lab_name(), ["--state-dir", str(tmp_path)]
    root_links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.count("\n")
    try:
        up = netlab("up", "--name", name, "--hosts", "3", "--rate", "1gbit", *state)
        assert up.returncode == 0, up.stderr
        made = {f"adass-{name}-sw", *(f"adass-{name}-h{i}" for i in range(3))}
        assert made <= namespaces()
        # the hosts sit on one /24 of the lab's own, the switch holds the bridge with one port per host
        addr = subprocess.run(["ip", "-n", f"adass-{name}-h2", "-o", "-4", "addr", "show", "eth0"],
                              capture_output=True, text=True).stdout  # fmt: skip
        assert " 10.77." in addr and ".3/24" in addr
        ports = subprocess.run(["ip", "-n", f"adass-{name}-sw", "-o", "link", "show", "master", "br0"],
                               capture_output=True, text=True).stdout  # fmt: skip
        assert ports.count("\n") == 3
        qdisc = subprocess.run(["tc", "-n", f"adass-{name}-h0", "qdisc", "show", "dev", "eth0"],
                               capture_output=True, text=True).stdout  # fmt: skip
        assert "tbf" in qdisc and "1Gbit" in qdisc
        # nothing was added to the root namespace
        assert (
            subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.count("\n")
            == root_links
        )
        status = netlab("status", "--name", name, *state)
        assert status.returncode == 0 and "4 of 4 namespaces present" in status.stdout
    finally:
        down = netlab("down", "--name", name, *state)
    assert down.returncode == 0, down.stderr
    assert not made & namespaces()
    assert not list(tmp_path.iterdir())  # state file and logs are gone too


def test_without_iproute2_the_lab_says_so_in_one_line(tmp_path) -> None:
    done = netlab("up", "--state-dir", str(tmp_path), env={**os.environ, "PATH": str(tmp_path)})
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "iproute2" in done.stderr or "root" in done.stderr


def test_down_of_an_unknown_lab_is_one_line(tmp_path, need_lab) -> None:
    done = netlab("down", "--name", "nosuchlab", "--state-dir", str(tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "nosuchlab" in done.stderr
    bad = netlab("up", "--name", "Bad Name", "--state-dir", str(tmp_path))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--name: 'Bad Name'" in bad.stderr
    assert not list(tmp_path.iterdir())
