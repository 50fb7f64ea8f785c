"""``adass dashboard``: its flags, and bad values failing with one line before anything is served."""

import socket
import subprocess
import sys

import pytest

from adass.cli import main


def test_help_lists_the_flags():
    result = subprocess.run([sys.executable, "-m", "adass.cli", "dashboard", "--help"], capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0
    for flag in ("--port", "--address", "--scheduler", "--runs", "127.0.0.1"):
        assert flag in result.stdout


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--port", "0"], "--port"),
        (["--port", "70000"], "--port"),
        (["--port", "http"], "--port"),
        (["--runs", "/nonexistent/runs"], "--runs"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(capsys, args, flag):
    assert main(["dashboard", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flag in err


def test_runs_must_be_a_folder_not_a_file(tmp_path, capsys):
    path = tmp_path / "runs.txt"
    path.write_text("")
    assert main(["dashboard", "--runs", str(path)]) == 2
    assert "--runs" in capsys.readouterr().err


def test_a_taken_port_is_one_line_too(capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["dashboard", "--port", str(port)]) == 2
    err = capsys.readouterr()
    assert len(err.err.strip().splitlines()) == 1 and "--port" in err.err and str(port) in err.err
