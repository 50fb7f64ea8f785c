"""Every tutorial notebook runs top to bottom in quick mode, and each .ipynb matches its paired .py.

The notebooks are executed with nbclient in a ``python3`` kernel of this interpreter (see
``conftest.py``), with ``ADASS_TUTORIAL_QUICK=1`` in the kernel's environment so that only the
sizes shrink. Wall times are recorded and printed at the end of the session, never asserted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
jupytext = pytest.importorskip("jupytext")
pytest.importorskip("ipykernel")

TUTORIALS = Path(__file__).resolve().parents[2] / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("[0-9][0-9]_*.ipynb"))
CELL_TIMEOUT_S = 300


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def test_every_notebook_is_found():
    assert NOTEBOOKS, f"no numbered notebooks under {TUTORIALS}"
    scripts = sorted(TUTORIALS.glob("[0-9][0-9]_*.py"))
    assert _ids(scripts) == _ids(NOTEBOOKS), "every tutorial needs both its .ipynb and its .py"


def _cells(notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_paired_and_in_sync(path: Path):
    script = path.with_suffix(".py")
    assert script.exists(), f"{path.name} has no paired {script.name}"
    from_ipynb = jupytext.read(path)
    from_py = jupytext.read(script)
    assert "py:percent" in from_ipynb.metadata.get("jupytext", {}).get("formats", ""), (
        f"{path.name}: jupytext metadata must pair it with the percent-format .py"
    )
    assert _cells(from_ipynb) == _cells(from_py), (
        f"{path.name} and {script.name} differ; run `jupytext --sync {script.name}`"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_stored_without_outputs(path: Path):
    notebook = nbformat.read(path, as_version=4)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert not cell.outputs, f"{path.name}: cell {index} is stored with outputs"
            assert cell.execution_count is None, f"{path.name}: cell {index} has an execution count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_runs_in_quick_mode(
    path: Path,
    python3_kernel: str,
    wall_times: dict[str, float],
    record_property: Callable[[str, object], None],
):
    notebook = nbformat.read(path, as_version=4)
    env = {**os.environ, "ADASS_TUTORIAL_QUICK": "1"}
    env.setdefault("OMP_NUM_THREADS", "1")  # a shared CI machine: no oversubscribed torch threads
    client = nbclient.NotebookClient(
        notebook,
        kernel_name=python3_kernel,
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(TUTORIALS)}},
    )
    start = time.perf_counter()
    try:
        client.execute(env=env)  # a failing cell raises CellExecutionError with its traceback
    finally:
        wall_times[path.stem] = time.perf_counter() - start
        record_property("wall_s", round(wall_times[path.stem], 1))
    errors = [
        (index, output.get("ename"))
        for index, cell in enumerate(notebook.cells)
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors, f"{path.name}: cells raised {errors}"
