"""Fixtures of the notebook tests: a kernel of this interpreter, and the notebooks' wall times,
printed at the end of the session."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

_WALL_TIMES = pytest.StashKey[dict]()


@pytest.fixture(scope="session")
def kernel_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Jupyter data folder whose ``python3`` kernel runs this very interpreter (``sys.executable``).

    Put first on ``JUPYTER_PATH``, it wins over any ``python3`` kernel spec of the user or the
    system, so the notebooks always run against the package installed here.
    """
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"})
    )
    return root


@pytest.fixture
def wall_times(request: pytest.FixtureRequest) -> dict[str, float]:
    """Notebook name -> seconds its execution took; shown in the terminal summary."""
    return request.config.stash.setdefault(_WALL_TIMES, {})


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    times = config.stash.get(_WALL_TIMES, {})
    if not times:
        return
    terminalreporter.section("tutorial notebooks, quick mode (ADASS_TUTORIAL_QUICK=1)")
    for name, seconds in sorted(times.items()):
        terminalreporter.write_line(f"{name:<36} {seconds:6.1f} s")
