"""``adass.cli.commands``: progress bars that end with their runs, and the Dask link on a line of its own."""

from __future__ import annotations

import re
import subprocess
import sys

from adass.cli.commands import _bar
from adass.metrics import EvalRecord

TINY = ["--data", "synthetic:n=120,d=4,classes=3,test=30", "--model", "mlp:hidden=8", "--epochs", "2"]


def _record(epoch: int) -> EvalRecord:
    return EvalRecord(run="r", epoch=epoch, train_s=0.1, backprops=10, forwards=10, wire_bytes=0,
                      train_loss=1.0, test_loss=1.0, test_acc=0.5)  # fmt: skip


def test_a_bar_closes_when_its_run_has_trained_every_epoch():
    bar, update = _bar("full seed 0", total=2, quiet=False)
    update(_record(0))
    assert not bar.disable  # still counting: the run goes on
    update(_record(1))
    assert bar.disable and bar.n == 2  # closed with its own elapsed time and rate


def test_compare_closes_each_bar_before_the_next_run_starts(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "adass.cli", "compare", *TINY, "--samplers", "full", "random:ratio=0.5",
         "--out", str(tmp_path / "cmp")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # the first run's bar is finished and closed before the second run's bar appears; an open bar
    # would stay on screen below the new one (tqdm moves the cursor up with ESC[A to redraw it)
    pieces = [p for p in re.split(r"[\r\n]", result.stderr) if p.strip()]
    full = [i for i, p in enumerate(pieces) if p.startswith("full seed 0")]
    second = [i for i, p in enumerate(pieces) if p.startswith("random:ratio=0.5 seed 0")]
    assert "\x1b[A" not in result.stderr
    assert full and second and max(full) < min(second) and "2/2" in pieces[max(full)]


def test_the_dask_link_is_printed_on_its_own_line_above_the_bar_when_asked_for(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "adass.cli", "train", *TINY, "--workers", "1", "--dask-dashboard",
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    pieces = re.split(r"[\r\n]", result.stderr)
    assert any(p.startswith("Dask dashboard: http://127.0.0.1:") for p in pieces), result.stderr
