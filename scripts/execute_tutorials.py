"""Run the tutorial notebooks at full size and store them with their outputs (``make tutorials``).

Each ``tutorials/NN_name.py`` (the jupytext source) first updates its paired ``.ipynb`` (cells from
the script, pairing kept), then the notebook runs top to bottom in a fresh kernel of this interpreter
with the tutorials folder as its working directory, and is written back with its outputs. The
documentation site and the code host show those outputs; ``make test`` runs the notebooks again in
quick mode. Prints each notebook's wall time and stored size.

    python scripts/execute_tutorials.py [--quick] [tutorials/02_parameter_server_vs_ring.py ...]

``--quick`` runs them with ``ADASS_TUTORIAL_QUICK=1`` (smaller sizes, as the tests run them); the
notebook's first output says which mode it ran in.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"
CELL_TIMEOUT_S = 1800


def execute(script: Path, quick: bool = False) -> tuple[float, int]:
    """Update ``script``'s notebook from it, run the notebook and store its outputs; (seconds, bytes)."""
    notebook_path = script.with_suffix(".ipynb")
    subprocess.run([sys.executable, "-m", "jupytext", "--quiet", "--to", "ipynb", "--update", str(script),
                    "-o", str(notebook_path)], check=True)  # fmt: skip
    notebook = nbformat.read(notebook_path, as_version=4)
    env = {k: v for k, v in os.environ.items() if k != "ADASS_TUTORIAL_QUICK"}  # the full sizes
    if quick:
        env["ADASS_TUTORIAL_QUICK"] = "1"
    # the kernel starts in tutorials/: a relative PYTHONPATH entry must still name the same folder
    paths = env.get("PYTHONPATH", "").split(os.pathsep)
    env["PYTHONPATH"] = os.pathsep.join(str(Path(entry).resolve()) for entry in paths if entry)
    env.setdefault("OMP_NUM_THREADS", "1")
    client = NotebookClient(notebook, kernel_name="python3", timeout=CELL_TIMEOUT_S,
                            resources={"metadata": {"path": str(TUTORIALS)}})  # fmt: skip
    start = time.perf_counter()
    client.execute(env=env)
    seconds = time.perf_counter() - start
    for cell in notebook.cells:  # wall-clock stamps would change every run; the outputs are the point
        cell.metadata.pop("execution", None)
    nbformat.write(notebook, notebook_path)
    return seconds, notebook_path.stat().st_size


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    scripts = [Path(a) for a in argv if a != "--quick"] or sorted(TUTORIALS.glob("[0-9][0-9]_*.py"))
    for script in scripts:
        seconds, size = execute(script.resolve(), quick=quick)
        print(f"{script.stem:<36} {seconds:7.1f} s {size / 1e6:6.2f} MB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
