"""Lab helpers for tests: a lab per test (or module), always taken down; skipped without root/iproute2, failed under CI=true."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adass.netlab import LabError, LabState, lab_down, lab_up, require_tools
from adass.netlab.system import sh


def lab_unavailable(reason: str) -> None:
    """CI runs as root and must exercise the lab; elsewhere a missing lab is a skip."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"the network lab is needed under CI=true: {reason}")
    pytest.skip(f"no network lab here: {reason}")


def lab_name() -> str:
    """Unique per process and call, so parallel runs never share namespaces."""
    return f"t{os.getpid() % 100_000}{secrets.token_hex(2)}"


def require_lab() -> None:
    """Root and iproute2 here, or the test is unavailable (see :func:`lab_unavailable`)."""
    try:
        require_tools()
    except LabError as err:
        lab_unavailable(str(err))


def netlab(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m adass.netlab ARGS`` as a user runs it."""
    return subprocess.run([sys.executable, "-m", "adass.netlab", *args], capture_output=True, text=True,
                          timeout=120, env=env)  # fmt: skip


def namespaces() -> set[str]:
    return {
        line.split()[0]
        for line in sh(["ip", "netns", "list"], check=False).stdout.splitlines()
        if line.strip()
    }


@contextlib.contextmanager
def lab(state_dir: Path, hosts: int, rate: str) -> Iterator[LabState]:
    """Build a lab; whatever happens in the body, take it down and check nothing of it is left."""
    try:
        require_tools()
        state = lab_up(hosts, rate, lab_name(), state_dir)
    except LabError as err:
        lab_unavailable(str(err))
    try:
        yield state
    finally:
        lab_down(state)
        left = {state.switch, *(h.netns for h in state.hosts)} & namespaces()
        assert not left, f"namespaces left behind: {left}"


#: the range-answering web server of the data tests, run as a script inside a lab host
WEB_SERVER = Path(__file__).resolve().parents[1] / "data" / "web.py"


@contextlib.contextmanager
def web_server(state: LabState, host: int, folder: Path, log: Path, port: int = 8000) -> Iterator[str]:
    """Serve ``folder`` over HTTP from lab host ``host`` for the block's duration; yield its base URL.

    The server prints one line per answer (the asking address, the request, the status) into ``log``.
    It is this test's own child: it is ended by its PID, whatever happens in the block.
    """
    address = state.host(host).address
    with open(log, "wb") as out:
        server = subprocess.Popen(["ip", "netns", "exec", state.host(host).netns, sys.executable, str(WEB_SERVER),
                                   str(folder), address, str(port)], stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while b"serving" not in log.read_bytes():
            assert server.poll() is None, f"the web server exited: {log.read_text()[-1000:]}"
            assert time.monotonic() < deadline, "the web server did not start within 60 s"
            time.sleep(0.1)
        yield f"http://{address}:{port}"
    finally:
        server.kill()
        server.wait()
