"""The lab's state cannot be turned against the user who runs it (as root) on a shared machine.

A state folder another user owns, or may enter, or reaches through a symbolic link, is refused in one
line before anything is written; files in it are never written through a link; ``down`` signals only
processes that are still the ones the lab started, and deletes only namespaces under the lab's prefix.
"""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from lab_cases import lab_name, namespaces, netlab, require_lab

from adass.netlab import LabError, LabState, start_cluster, stop_processes, subnet_for
from adass.netlab.private import default_state_dir, make_private
from adass.netlab.state import Process
from adass.netlab.topology import destroy, plan

PROBLEMS = {
    "foreign": "is owned by nobody",
    "open": "has mode 0777, which lets other users in",
    "link": "is a symbolic link",
}


@pytest.fixture
def need_lab() -> None:
    require_lab()


def _nobody() -> int:
    return pwd.getpwnam("nobody").pw_uid


def _folder(tmp_path: Path, kind: str) -> Path:
    """A state folder the lab must refuse, made as another user (or a careless one) would leave it."""
    folder = tmp_path / kind
    if kind == "link":
        real = tmp_path / "elsewhere"
        real.mkdir(mode=0o700)
        folder.symlink_to(real)
        return folder
    folder.mkdir(mode=0o700)
    if kind == "foreign":
        os.chown(folder, _nobody(), -1)
    else:
        folder.chmod(0o777)
    return folder


def _ticks(pid: int) -> int:
    """The process's start time, field 22 of /proc/PID/stat (fields 3.. follow the last ')')."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rindex(")") + 2 :].split()[19])


def _sleep() -> subprocess.Popen:
    """``sleep 120``, returned once it runs as ``sleep``: just after the fork it is still this Python,
    whose command differs from the one a test records (under load that moment can last)."""
    proc = subprocess.Popen(["sleep", "120"])
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 30
    while cmdline.read_bytes().split(b"\0")[0] != b"sleep" and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc


def _state(folder: Path, name: str = "demo", hosts: int = 1) -> LabState:
    make_private(folder)
    return plan(name, hosts, subnet_for(name), 1e9, str(folder / f"{name}.json"))


@pytest.mark.netlab
@pytest.mark.parametrize("kind", list(PROBLEMS))
def test_a_folder_that_is_not_the_users_alone_is_refused_in_one_line(tmp_path, need_lab, kind) -> None:
    folder = _folder(tmp_path, kind)
    name = lab_name()
    for command in (["up", "--hosts", "1", "--name", name], ["down", "--name", name]):
        done = netlab(*command, "--state-dir", str(folder))
        assert done.returncode != 0, done.stdout
        assert done.stderr.count("\n") == 1, done.stderr
        assert f"--state-dir: {folder} {PROBLEMS[kind]}" in done.stderr
        assert "or pass a folder of your own with --state-dir" in done.stderr
    assert not list(folder.iterdir())  # nothing written
    assert not {ns for ns in namespaces() if ns.startswith(f"adass-{name}-")}  # nothing built


@pytest.mark.netlab
def test_the_default_folder_is_checked_too(tmp_path, need_lab) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ADASS_NETLAB_DIR", "XDG_RUNTIME_DIR")}
    env["TMPDIR"] = str(tmp_path)
    squatted = tmp_path / f"adass-netlab-{os.geteuid()}"
    squatted.mkdir(mode=0o700)
    os.chown(squatted, _nobody(), -1)
    done = netlab("up", "--hosts", "1", "--name", lab_name(), env=env)
    assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
    assert f"--state-dir: {squatted} is owned by nobody (uid {_nobody()})" in done.stderr
    assert not list(squatted.iterdir())


def test_the_default_folder_is_per_user_and_created_private(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("ADASS_NETLAB_DIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = default_state_dir()
    assert folder == tmp_path / f"adass-netlab-{os.geteuid()}" and not folder.exists()
    make_private(folder)
    info = folder.lstat()
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.geteuid()
    # a runtime folder of the user's own is preferred
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert default_state_dir() == runtime / "adass-netlab"


def test_saving_never_writes_through_a_link(tmp_path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep")
    state = _state(tmp_path / "state")
    folder = Path(state.path).parent
    (folder / "demo.tmp").symlink_to(target)  # the temp file's name
    state.save()
    assert target.read_text() == "keep"
    saved = Path(state.path).lstat()
    assert stat.S_ISREG(saved.st_mode) and stat.S_IMODE(saved.st_mode) == 0o600
    assert LabState.load(Path(state.path)).hosts == state.hosts
    # a link in the state file's own place is replaced, its target untouched
    Path(state.path).unlink()
    Path(state.path).symlink_to(target)
    state.save()
    assert target.read_text() == "keep" and not Path(state.path).is_symlink()


def test_a_linked_state_file_or_log_is_refused(tmp_path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep")
    state = _state(tmp_path / "state")
    linked = Path(state.path).with_name("other.json")
    linked.symlink_to(target)
    with pytest.raises(LabError, match="is a symbolic link"):
        LabState.load(linked)
    # the scheduler's log is opened before anything starts: a link there stops the cluster
    state.logs_dir.mkdir(mode=0o700)
    (state.logs_dir / "scheduler.log").symlink_to(target)
    with pytest.raises(LabError, match="scheduler.log is a symbolic link"):
        start_cluster(state, workers=1)
    assert target.read_text() == "keep" and not LabState.load(Path(state.path)).processes


def test_down_signals_only_the_processes_the_lab_started(tmp_path, capfd) -> None:
    state = _state(tmp_path / "state")
    stranger, ours = _sleep(), _sleep()
    try:
        command = ["sleep", "120"]
        started = _ticks(stranger.pid)
        state.processes = [
            Process("worker", 0, stranger.pid, started - 1, "w0.log", command),  # a reused PID
            Process("worker", 0, stranger.pid, started, "w1.log", ["sleep", "60"]),  # another program
            Process("scheduler", 0, ours.pid, _ticks(ours.pid), "s.log", command),  # the lab's own
        ]
        stop_processes(state, grace_s=2.0)
        ours.wait(timeout=10)  # ended by the lab's signal (a process left running would time out here)
        assert not Path(f"/proc/{ours.pid}").exists()
        assert stranger.poll() is None  # still alive
        warnings = capfd.readouterr().err.splitlines()
        assert len(warnings) == 2 and all(f"pid {stranger.pid}" in w for w in warnings)
        assert "start time differs" in warnings[0] and "command differs" in warnings[1]
        assert not state.processes
    finally:
        for proc in (stranger, ours):
            proc.kill()
            proc.wait()


@pytest.mark.netlab
def test_netlab_down_leaves_a_stranger_at_a_recorded_pid_alone(tmp_path, need_lab) -> None:
    name = lab_name()
    state = _state(tmp_path / "state", name)  # planned only: down has no namespaces to delete
    stranger = _sleep()
    try:
        state.processes = [
            Process("worker", 0, stranger.pid, _ticks(stranger.pid) + 7, "w.log", ["sleep", "120"])
        ]
        state.save()
        done = netlab("down", "--name", name, "--state-dir", str(tmp_path / "state"))
        assert done.returncode == 0, done.stderr
        assert f"pid {stranger.pid} (worker on host 0) is not the process the lab started" in done.stderr
        assert stranger.poll() is None
        assert not list((tmp_path / "state").iterdir())
    finally:
        stranger.kill()
        stranger.wait()


@pytest.mark.netlab
def test_down_deletes_no_namespace_outside_the_labs_prefix(tmp_path, need_lab) -> None:
    name, victim = lab_name(), f"{lab_name()}-victim"
    subprocess.run(["ip", "netns", "add", victim], check=True)
    try:
        state = _state(tmp_path / "state", name)
        state.switch = victim  # a state file edited to name a namespace of someone else's
        state.save()
        done = netlab("down", "--name", name, "--state-dir", str(tmp_path / "state"))
        assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
        assert f"names namespaces not of lab {name} (its own are adass-{name}-*): {victim};" in done.stderr
        assert victim in namespaces()
        # the library's own teardown, given such a state directly, also leaves it alone
        assert destroy(state) == [] and victim in namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", victim], check=False)
    assert victim not in namespaces()


def test_state_files_record_the_labs_namespace_prefix(tmp_path) -> None:
    state = _state(tmp_path / "state")
    state.save()
    raw = json.loads(Path(state.path).read_text())
    assert raw["prefix"] == "adass-demo" and raw["switch"] == "adass-demo-sw"
    raw["prefix"] = "adass-other"
    Path(state.path).write_text(json.dumps(raw))
    with pytest.raises(LabError, match=r"names namespaces not of lab demo \(its own are adass-demo-\*\)"):
        LabState.load(Path(state.path))
