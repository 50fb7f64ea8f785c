"""Every tutorial notebook runs top to bottom in quick mode, each .ipynb matches its paired .py, and
each is stored with the outputs of one full run (what the code host and the documentation show).

The notebooks are executed with nbclient in a ``python3`` kernel of this interpreter (see
``conftest.py``), with ``ADASS_TUTORIAL_QUICK=1`` in the kernel's environment so that only the
sizes shrink, two notebooks at a time. Wall times (each notebook's, while another ran beside it) are
recorded and printed at the end of the session, never asserted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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


#: what one stored notebook may weigh: its Bokeh plots are embedded documents, and a code host
#: stops rendering a notebook of many megabytes
MAX_STORED_BYTES = 3_000_000


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_stored_with_the_outputs_of_one_clean_run(path: Path):
    """``make tutorials`` ran it top to bottom: every code cell in order, no error, plots included."""
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    counts = [cell.execution_count for cell in code]
    assert counts == list(range(1, len(code) + 1)), f"{path.name}: not stored from one run (`make tutorials`)"
    outputs = [output for cell in code for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"], f"{path.name}: stored with an error"
    assert any("text/html" in o.get("data", {}) or "image/png" in o.get("data", {}) for o in outputs), (
        f"{path.name}: stored without a plot"
    )
    assert path.stat().st_size <= MAX_STORED_BYTES, f"{path.name}: {path.stat().st_size / 1e6:.1f} MB stored"


def _execute(path: Path) -> tuple[nbformat.NotebookNode, float]:
    """Run ``path`` in quick mode in a fresh kernel; the executed notebook and its wall time (a failing
    cell raises CellExecutionError with its traceback)."""
    notebook = nbformat.read(path, as_version=4)
    env = {**os.environ, "ADASS_TUTORIAL_QUICK": "1"}
    env.setdefault("OMP_NUM_THREADS", "1")  # a shared CI machine: no oversubscribed torch threads
    client = nbclient.NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(TUTORIALS)}},
    )
    start = time.perf_counter()
    client.execute(env=env)
    return notebook, time.perf_counter() - start


@pytest.fixture(scope="module")
def executions(kernel_path: Path) -> Iterator[dict[Path, Future]]:
    """Every notebook started at once, two kernels at a time (each kernel is a process of its own and
    mostly waits on one core or on its Dask workers), so the module takes about half the time."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(
            "JUPYTER_PATH", os.pathsep.join(filter(None, [str(kernel_path), os.environ.get("JUPYTER_PATH")]))
        )
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="notebook") as pool:
            futures = {path: pool.submit(_execute, path) for path in NOTEBOOKS}
            try:
                yield futures
            finally:
                for future in futures.values():
                    future.cancel()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_runs_in_quick_mode(
    path: Path,
    executions: dict[Path, Future],
    wall_times: dict[str, float],
    record_property: Callable[[str, object], None],
):
    notebook, seconds = executions[path].result()
    wall_times[path.stem] = seconds
    record_property("wall_s", round(seconds, 1))
    errors = [
        (index, output.get("ename"))
        for index, cell in enumerate(notebook.cells)
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors, f"{path.name}: cells raised {errors}"
