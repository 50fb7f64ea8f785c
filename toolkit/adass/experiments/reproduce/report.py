"""``adass reproduce``: run every claim's experiments and write ``report.md``, its CSV tables and PNG plots.

Every finished run is kept at once under ``--out/runs`` (:mod:`.store`); running the same plan into the
same folder again reuses them and runs only the rest. The report, tables and plots are written into a
fresh folder beside ``--out`` first and moved into place at the end, so a failed or interrupted run
leaves no half-written report.
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path

from ...metrics import atomic_write_text
from . import claim_dml, claim_quantize, claim_sparsify
from .arms import LINKS
from .parallel import Runner
from .plan import SIZES_ENV, Plan
from .section import Section
from .store import RUNS, RunStore

__all__ = ["CLAIMS", "REPORT", "environment", "reproduce"]

REPORT = "report.md"
#: the claims in the thesis's order: each module's ``count(plan)`` says how many runs each of its
#: parts has and ``run(plan, out, runner)`` runs them and returns its section
CLAIMS = [claim_dml, claim_quantize, claim_sparsify]


def environment(
    plan: Plan, argv: Sequence[str], elapsed_s: float, load: tuple[float, float, float], jobs: int = 1
) -> list[str]:
    """The report's environment section: versions, cores, load, links and the exact command line."""
    command = shlex.join(["adass", *argv])
    sizes = os.environ.get(SIZES_ENV, "")
    return [
        "## Environment", "",
        f"- command: `{command}`" + (f" with `{SIZES_ENV}={sizes}`" if sizes else ""),
        f"- plan: `{plan.name}` ({plan.seeds} seed(s)); finished "
        f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} after {elapsed_s / 60:.1f} min",
        f"- python {platform.python_version()}, torch {version('torch')}, dask {version('dask')}, "
        f"distributed {version('distributed')}, adass {version('adass')}",
        f"- {os.cpu_count()} CPU cores ({platform.machine()}, {platform.system()}), load average "
        f"{load[0]:.1f} at the start; one torch thread per training process or replica; {jobs} job(s) "
        "(runs reused from an earlier invocation keep the times they were measured with)",
        f"- simulated links: {', '.join(f'{k} = `{v}`' for k, v in LINKS.items())} (latency plus bytes over "
        "bandwidth per transfer); real processes talk over loopback, paced where a link is named",
        "",
    ]  # fmt: skip


def _summary(sections: Sequence[Section]) -> list[str]:
    """One row per claim and data set, each verdict in a few words (the sections list the arms)."""
    lines = ["| claim | data set | verdict |", "|:--|:--|:--|"]
    for i, section in enumerate(sections, 1):
        for k, (setting, text) in enumerate(section.briefs().items()):
            claim = f"{i}. {section.claim}" if k == 0 else ""
            lines.append(f"| {claim} | {setting or 'all'} | {text} |")
    return [*lines, ""]


def _write(folder: Path, plan: Plan, argv: Sequence[str], sections: Sequence[Section], elapsed_s: float,
           load: tuple[float, float, float], jobs: int) -> None:  # fmt: skip
    for section in sections:
        for name, frame in section.tables.items():
            atomic_write_text(folder / f"{section.key}_{name}.csv", frame.to_csv(index=False))
    text = ["# adass reproduce", "",
            "The experiments behind the three claims of the thesis behind adass. Every verdict is computed "
            "from the numbers below; accuracy is compared with seed means, and `±` is the standard error "
            "over seeds (of the per-seed differences where two arms are compared).", "",
            *_summary(sections)]  # fmt: skip
    for number, section in enumerate(sections, 1):
        text += section.markdown(number)
    text += environment(plan, argv, elapsed_s, load, jobs)
    atomic_write_text(folder / REPORT, "\n".join(text))


def _move_into(staging: Path, out: Path) -> None:
    """Move every entry of ``staging`` into ``out`` (replacing entries of the same name), the report last."""
    out.mkdir(parents=True, exist_ok=True)
    entries = sorted(staging.iterdir(), key=lambda p: p.name == REPORT)
    for entry in entries:
        target = out / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(entry, target)


def run_counts(plan: Plan) -> str:
    """The number of runs of each claim and its parts, as printed before any starts.

    Claims 2 and 3 count the same fp32 runs; claim 3 reuses claim 2's.
    """
    parts = []
    for number, claim in enumerate(CLAIMS, 1):
        counts = claim.count(plan)
        detail = f" ({', '.join(f'{k} {v}' for k, v in counts.items())})" if len(counts) > 1 else ""
        parts.append(f"claim {number}: {sum(counts.values())}{detail}")
    return f"runs of plan {plan.name!r}: " + "; ".join(parts)


def reproduce(plan: Plan, out: Path, argv: Sequence[str], quiet: bool = False, jobs: int = 1,
              fresh: bool = False) -> list[Section]:  # fmt: skip
    """Run every claim of ``plan`` and write ``out/report.md`` with its tables and plots.

    Parameters
    ----------
    plan : Plan
        Sizes and arms.
    out : Path
        Destination folder (created; entries of the same names are replaced). Finished runs are
        kept under ``out/runs`` as they finish, and reused by the next invocation of the same plan.
    argv : sequence of str
        The command line after ``adass``, quoted in the report.
    quiet : bool
        No progress lines.
    jobs : int
        Worker processes for the independent runs (samplers, grids); 1 runs them here.
    fresh : bool
        Forget the finished runs under ``out/runs`` first (``--overwrite``).

    Returns
    -------
    list of Section
        One per claim, with its checks and verdict.
    """
    start, load = time.perf_counter(), os.getloadavg()
    if fresh:
        shutil.rmtree(out / RUNS, ignore_errors=True)
    (out / RUNS).mkdir(parents=True, exist_ok=True)
    if not quiet:
        print(run_counts(plan) + f"; finished runs are kept under {out / RUNS}", file=sys.stderr, flush=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        (staging / "plots").mkdir()
        with Runner(RunStore(out / RUNS, plan.name), jobs, quiet) as runner:
            sections = [claim.run(plan, staging, runner) for claim in CLAIMS]
        _write(staging, plan, argv, sections, time.perf_counter() - start, load, jobs)
        _move_into(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for number, section in enumerate(sections, 1):
        print(f"claim {number}: {section.verdict}")
    print(f"report: {out / REPORT}")
    return sections
