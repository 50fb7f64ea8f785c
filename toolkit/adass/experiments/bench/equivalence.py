"""Same results before and after a change of shape: final parameters and wire bytes of a grid of runs,
this tree against an earlier git revision (``adass bench equivalence --against REV``).

Both sides run the same cases in processes of their own (:mod:`adass.experiments.bench.equivalence_probe`, with
each tree's ``toolkit/`` on the path): samplers x exchanges x codecs x memories x backends (one
model here, virtual replicas on threads, Dask workers). A case passes when the SHA-256 of every
replica's final parameters and the run's wire bytes are equal on both sides, bit for bit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pandas as pd

from ...config import RunConfig
from ...registry import SpecError
from ...tables import markdown_table
from . import write_report

__all__ = ["cases", "run"]

BASE = {"data": "synthetic:n=240,d=8,classes=3,test=60", "model": "mlp:hidden=16", "epochs": 3,
        "batch_size": 32, "threads": 1, "seed": 0}  # fmt: skip
SAMPLERS = ("full", "adass:eps=0.3,warmup=1,final=0", "random:ratio=0.5", "infobatch", "selective_backprop")
EXCHANGES = (
    "ring",
    "ring:strategy=shared_scale",
    "ps",
    "ps:servers=2,update=server",
    "ps:servers=2,colocated=true",
)
CODECS = ("fp32", "fp16", "bf16", "qsgd:bits=4", "randk:ratio=0.25", "topk:ratio=0.25",
          "randk:ratio=0.25+qsgd:bits=8", "sharedk:ratio=0.25")  # fmt: skip
#: error feedback and the two momentum corrections, each around a codec it suits
MEMORIES = ("ef(topk:ratio=0.25)", "mc(fp32)", "dmc(randk:ratio=0.25,scale=false)")
DASK = (("full", "ring", "fp32"), ("adass:eps=0.3,warmup=1,final=0", "ring", "qsgd:bits=4"),
        ("random:ratio=0.5", "ps", "fp16"), ("full", "ps:servers=2,update=server", "ef(topk:ratio=0.25)"))  # fmt: skip
THREADS, DASK_WORKERS = 3, 2


def cases(quick: bool = False) -> list[dict]:
    """The grid: every sampler in one process, every exchange with every codec and memory on
    threads (the samplers taking turns), every sampler on the ring and the PS with fp32, and a few
    Dask runs; pairs the exchange cannot carry are left out."""
    grid = [("local", 1, s, "ring", "fp32") for s in SAMPLERS]
    grid += [("threads", THREADS, SAMPLERS[i % len(SAMPLERS)], e, c)
             for i, (e, c) in enumerate((e, c) for e in EXCHANGES for c in CODECS + MEMORIES)]  # fmt: skip
    grid += [("threads", THREADS, s, e, "fp32") for s in SAMPLERS[1:] for e in ("ring", "ps")]
    grid += [("dask", DASK_WORKERS, s, e, c) for s, e, c in DASK]
    out = []
    for backend, world, sampler, exchange, codec in grid:
        flat = {**BASE, "sampler": sampler}
        if backend != "local":
            flat.update(exchange=exchange, codec=codec)
        try:
            config = RunConfig.from_flat(**flat, workers=world if backend != "local" else 0)
        except SpecError:
            continue
        name = f"{backend}/{world} {sampler.split(':')[0]} {exchange} {codec}"
        if any(c["id"] == name for c in out):
            continue
        out.append({"id": name, "backend": backend, "world": world, "servers": config.servers, "flat": flat})
    if quick:
        local = [c for c in out if c["backend"] != "dask"][::6]
        out = local + [c for c in out if c["backend"] == "dask"][:1]
    return out


def _tree_at(revision: str, into: Path) -> Path:
    """``toolkit/`` of ``revision`` of the git checkout this package lives in, unpacked under ``into``."""
    here = Path(__file__).resolve().parent
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=here, capture_output=True, text=True,
                             check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        raise SpecError(
            "--against: needs the package in a git checkout (make setup installs it so)"
        ) from None
    archive = into / "tree.tar"
    with open(archive, "wb") as fh:
        done = subprocess.run(
            ["git", "archive", revision, "toolkit"], cwd=top, stdout=fh, stderr=subprocess.PIPE
        )
    if done.returncode:
        why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["unknown revision"]
        raise SpecError(f"--against: {revision!r} is not a revision of {top} ({why[0]})")
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree" / "toolkit"


def _probe(toolkit: Path, cases_path: Path, results_path: Path, label: str) -> dict[str, dict]:
    probe = Path(__file__).with_name("equivalence_probe.py")
    env = {**os.environ, "PYTHONPATH": str(toolkit)}
    print(
        f"equivalence: {label}, {len(json.loads(cases_path.read_text()))} runs", file=sys.stderr, flush=True
    )
    subprocess.run([sys.executable, str(probe), str(cases_path), str(results_path)], env=env,
                   cwd=results_path.parent, check=True)  # fmt: skip
    return {r["id"]: r for r in json.loads(results_path.read_text())}


def compare(grid: list[dict], old: dict[str, dict], new: dict[str, dict]) -> pd.DataFrame:
    """One row per case: whether parameters and wire bytes agree, and any error on either side."""
    rows = []
    for case in grid:
        a, b = old.get(case["id"], {}), new.get(case["id"], {})
        error = a.get("error") or b.get("error") or ""
        rows.append({"case": case["id"], "backend": case["backend"],
                     "same_parameters": bool(not error and a["digest"] == b["digest"]),
                     "same_wire_bytes": bool(not error and a["wire_bytes"] == b["wire_bytes"]),
                     "wire_bytes": b.get("wire_bytes"), "test_acc": b.get("test_acc"), "error": error})  # fmt: skip
    return pd.DataFrame(rows)


def run(out_dir: Path, quick: bool = False, against: str = "") -> pd.DataFrame:
    """Both trees on the grid; print and write ``equivalence.md`` and ``.csv``."""
    if not against:
        raise SpecError("--against: give the git revision to compare this tree with (e.g. HEAD~1)")
    grid = cases(quick)
    with tempfile.TemporaryDirectory(prefix="adass-equivalence-") as tmp:
        root = Path(tmp)
        old_tree = _tree_at(against, root)
        cases_path = root / "cases.json"
        cases_path.write_text(json.dumps(grid))
        old = _probe(old_tree, cases_path, root / "old.json", f"revision {against}")
        new = _probe(Path(__file__).resolve().parents[3], cases_path, root / "new.json", "this tree")
    table = compare(grid, old, new)
    same = int((table["same_parameters"] & table["same_wire_bytes"]).sum())
    by_backend = table.groupby("backend")["same_parameters"].agg(["size", "sum"]).reset_index()
    lines = ["# adass bench equivalence", "",
             f"This tree against revision `{against}`: {same} of {len(table)} runs end with bit-identical "
             "parameters (SHA-256 of every replica's) and equal wire bytes.", "",
             markdown_table(by_backend.rename(columns={"size": "runs", "sum": "identical"})), "",
             markdown_table(table), ""]  # fmt: skip
    write_report(out_dir, "equivalence", lines, {"equivalence": table})
    return table
