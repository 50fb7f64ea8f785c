"""What the ``adass`` subcommands do once their input is validated: progress bars and summary tables."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from ..config import RunConfig
from ..data import DataError, load_dataset, shift_warning, standardization_record
from ..devices import check_device
from ..engine import RunStore, check_resume, checkpoint_location, has_checkpoint
from ..experiments.compare import compare
from ..experiments.reading import reading
from ..locations import Location
from ..metrics import EvalRecord, ParquetSink
from ..registry import SpecError
from ..runtime import run
from ..runtime.model_memory import check_model_fits
from ..runtime.replica_count import check_replica_count
from ..tables import markdown_table

__all__ = ["run_bench", "run_compare", "run_dashboard", "run_reproduce", "run_train"]


def _bar(desc: str, total: int, quiet: bool) -> tuple[tqdm, Callable[[EvalRecord], None]]:
    """A bar of ``total`` epochs and the progress callback that advances it (and closes it at the end,
    so its elapsed time and rate are those of its own run)."""
    bar = tqdm(total=total, desc=desc, unit="epoch", disable=quiet, file=sys.stderr, dynamic_ncols=True)

    def update(record: EvalRecord) -> None:
        bar.set_postfix(
            kept=f"{record.kept_frac:.2f}", loss=f"{record.train_loss:.3f}", acc=f"{record.test_acc:.3f}"
        )
        bar.update(1)
        if bar.total is not None and bar.n >= bar.total:
            bar.close()

    return bar, update


def _print_dashboard_link(handle) -> None:
    """The Dask dashboard's address, on a line of its own above any progress bar (where one is served)."""
    if handle.dashboard_link:
        tqdm.write(f"Dask dashboard: {handle.dashboard_link}", file=sys.stderr)


def _load_data(config: RunConfig):
    try:
        dataset = load_dataset(config.data.data, seed=config.optim.seed)
    except DataError as err:
        raise SpecError(f"--data: {err}") from None
    check_model_fits(config, dataset)
    check_replica_count(config, dataset)
    warning = shift_warning(dataset)
    if warning:
        print(f"adass: {warning}", file=sys.stderr)
    return dataset


def run_train(config: RunConfig, out: Path, quiet: bool = False, resume: bool = False) -> int:
    """``adass train``: one run (in this process, on ``--replicas`` threads or ``--workers`` Dask
    workers), records and checkpoints under ``out``."""
    done = 0
    if resume:  # checked whole before anything is written or started
        done = check_resume(config, checkpoint_location(config, out)).epoch + 1
    dataset = _load_data(config)
    before = None if resume else _entries(out)
    _writable(out)
    try:
        _import_lazy_torch()
        bar, update = _bar(config.sampler.sampler, config.optim.epochs, quiet)
        bar.update(done)
        sink = ParquetSink(out, {**config.to_dict(), "standardization": standardization_record(dataset)})
        with bar:
            try:
                result = run(config, sink=sink, progress=update, dataset=dataset, checkpoint_dir=out,
                             resume=resume, **_cluster_feedback(config, bar))  # fmt: skip
            except DataError as err:  # a worker that cannot read the files this process read
                raise SpecError(f"--data: {err}") from None
    except BaseException:
        if not resume:
            _remove_unfinished(out, before, checkpoint_location(config, out))
        raise
    c = result.counters
    summary = _summary(config, result.final, c.backprops, c.forwards, c.train_s, dataset.n_train)
    print(markdown_table(summary))
    kinds = "eval, selection, steps" + (", traffic" if config.backend != "local" else "")
    print(f"records: {out}/ ({kinds} .parquet, config.json)")
    return 0


def _import_lazy_torch() -> None:
    """Import what torch loads on first use before the run starts: its first optimizer imports
    ``torch._dynamo`` (about a second), and a Ctrl-C that lands inside that import leaves torch half
    imported, so the run ended with an unrelated error (or killed by the signal) instead of the
    one-line interrupt message with its checkpoint kept."""
    import torch._dynamo  # noqa: F401


def _writable(out: Path) -> None:
    """``--out`` must be a folder this process can create and write in; SpecError in one line if not."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".adass-write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise SpecError(f"--out: cannot write in {str(out)!r} ({err.strerror or err})") from None


def _entries(out: Path) -> set[str] | None:
    """The names in ``out`` before a run writes there; None when the folder is not there yet."""
    return {p.name for p in out.iterdir()} if out.is_dir() else None


def _remove_unfinished(out: Path, before: set[str] | None, checkpoints: Location) -> None:
    """After a new run failed: unless it published a checkpoint (a finished epoch, which ``--resume``
    continues), remove what it wrote, so that the same command, corrected, finds ``out`` as it was
    (a ``config.json`` left alone would refuse it as a folder that holds results). Only entries that
    were not there before go, and the folder itself only when the run made it."""
    if has_checkpoint(checkpoints) or not out.is_dir():
        return
    if before is None:
        shutil.rmtree(out, ignore_errors=True)
        return
    for path in out.iterdir():
        if path.name not in before:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def _summary(
    config: RunConfig, final: EvalRecord, backprops: float, forwards: float, train_s: float, n: int
) -> pd.DataFrame:
    full_cost = n * config.optim.epochs
    row = {
        "sampler": config.sampler.sampler, "epochs": config.optim.epochs, "test_acc": final.test_acc,
        "test_loss": final.test_loss, "backprop_frac": backprops / full_cost, "forward_frac": forwards / full_cost,
        "train_s": train_s,
    }  # fmt: skip
    if config.backend != "local":
        count = "workers" if config.backend == "dask" else "replicas"
        row = {count: config.world, "exchange": config.exchange.exchange, "codec": config.codec.codec,
               **row, "wire_MB": final.wire_bytes / 1e6, "epoch_s": train_s / config.optim.epochs}  # fmt: skip
    return pd.DataFrame([row])


def _cluster_feedback(config: RunConfig, bar: tqdm) -> dict:
    """A live store that counts steps on the bar, and for a run on Dask a note of its dashboard."""
    store = RunStore()
    steps_seen = [0]

    def live(kind: str, rows: list[dict]) -> None:
        if kind == "steps":
            steps_seen[0] += len(rows)
            bar.set_description(f"{config.sampler.sampler} (steps {steps_seen[0]})", refresh=False)

    store.listeners.append(live)
    return (
        {"store": store, "on_ready": _print_dashboard_link} if config.backend == "dask" else {"store": store}
    )


def run_resume(folder: Path, changes: dict[str, object] | None = None, quiet: bool = False) -> int:
    """``adass train --resume DIR``: the saved configuration, from the last checkpoint on.

    ``changes`` may raise ``epochs`` and say where and on how many workers the run goes on (the
    replicas' states are re-sharded when the worker count differs)."""
    import json

    config_path = folder / "config.json"
    if not config_path.exists():
        raise SpecError(f"--resume: {str(folder)!r} holds no run (config.json missing)")
    try:
        saved = json.loads(config_path.read_text())
    except (OSError, ValueError) as err:
        raise SpecError(f"--resume: {str(config_path)!r} is unreadable ({type(err).__name__})") from None
    saved.pop("standardization", None)
    config = RunConfig.from_dict(saved)
    if changes:
        # a resume may move the replicas between Dask workers and threads of this process
        moved = (
            {"workers": 0} if changes.get("replicas") else {"replicas": 0} if changes.get("workers") else {}
        )
        config = config.replace(**{**moved, **changes})
    return run_train(config, folder, quiet=quiet, resume=True)


def run_compare(
    config: RunConfig, samplers: Sequence[str], seeds: int, out: Path, quiet: bool = False,
    exchanges: Sequence[str] = (), codecs: Sequence[str] = (),
) -> int:  # fmt: skip
    """``adass compare``: every variant for every seed; ``out/compare.csv`` and a table on stdout."""
    bars: list[tqdm] = []

    def progress_for(label: str, seed: int) -> Callable[[EvalRecord], None]:
        for earlier in bars:  # runs go one after another: a new run means the last one has ended
            earlier.close()
        bar, update = _bar(f"{label} seed {seed}", config.optim.epochs, quiet)
        bars.append(bar)
        return update

    _load_data(config)
    try:
        table = compare(config, samplers, seeds, out, progress_factory=progress_for, exchanges=exchanges,
                        codecs=codecs, on_cluster=_print_dashboard_link)  # fmt: skip
    finally:
        for bar in bars:
            bar.close()
    print(markdown_table(table))
    lines = reading(table)
    if lines:
        print("\n" + "\n".join(lines))
        with open(out / "compare.md", "a") as md:  # the table's own file keeps its reading
            md.write("\n" + "\n".join(lines) + "\n")
    print(f"table: {out / 'compare.csv'}; runs: {out / 'runs'}/")
    return 0


def run_bench(
    suite: str,
    out: Path,
    quick: bool = False,
    netlab: str = "",
    straggler_only: bool = False,
    lab_workers: int | None = None,
    powersgd_only: bool = False,
    against: str = "",
    device: str = "auto",
    seeds: int | None = None,
    settings: str = "",
) -> int:
    """``adass bench SUITE``: the suite prints its tables and writes ``out/<suite>.md`` and ``.csv``.

    ``netlab`` (link rates) runs the ``dml`` suite on a network lab with ``lab_workers`` replicas (the
    ``faults`` suite: a killed worker across a lab at one rate)
    (None: the suite's own; ``powersgd_only``: its PowerSGD arms alone), ``straggler_only`` its
    straggler case alone, ``device`` its replicas on
    ``cpu`` or ``cuda``; ``seeds`` the ``frontier``, ``adass_choice`` and ``faults`` suites' seeds, ``settings`` the
    ``frontier`` and ``adass_choice`` suites' settings;
    other suites refuse them.
    """
    from ..experiments.bench import load_suite

    if netlab and suite not in ("dml", "faults"):
        raise SpecError(f"--netlab: only the dml and faults suites run on a network lab, not {suite!r}")
    if suite == "faults" and "," in netlab:
        raise SpecError(f"--netlab: the faults suite runs at one link rate, not {netlab!r}")
    if lab_workers is not None and suite != "dml":
        raise SpecError(f"--lab-workers: only the dml suite sizes its network lab, not {suite!r}")
    if straggler_only and suite != "dml":
        raise SpecError(f"--straggler-only: only the dml suite has a straggler case, not {suite!r}")
    if straggler_only and netlab:
        raise SpecError("--straggler-only: runs on this machine's cluster; leave out --netlab")
    if powersgd_only and (suite != "dml" or not netlab):
        raise SpecError(
            "--powersgd-only: only the dml suite on a network lab (--netlab) has PowerSGD arms to run alone"
        )
    if lab_workers is not None and not netlab:
        raise SpecError(
            f"--lab-workers: {lab_workers} is not allowed without --netlab (it sizes the network lab)"
        )
    if device != "auto" and (suite != "dml" or netlab):
        where = "the network lab's hosts choose their own" if netlab else f"not {suite!r}"
        raise SpecError(f"--device: only the dml suite on this machine's cluster takes a device ({where})")
    if device == "cuda":  # before any cluster starts
        check_device(device)
    if against and suite != "equivalence":
        raise SpecError(f"--against: only the equivalence suite compares with a revision, not {suite!r}")
    if suite == "equivalence" and not against:
        raise SpecError(
            "--against: the equivalence suite needs the git revision to compare with (e.g. HEAD~1)"
        )
    if seeds and suite not in ("frontier", "adass_choice", "faults"):
        raise SpecError(f"--seeds: only the frontier, adass_choice and faults suites take it, not {suite!r}")
    if settings and suite not in ("frontier", "adass_choice"):
        raise SpecError(f"--settings: only the frontier and adass_choice suites take it, not {suite!r}")
    if settings:
        known = load_suite(suite).SETTINGS
        unknown = [name for name in settings.split(",") if name not in known]
        if unknown:
            raise SpecError(f"--settings: {unknown[0]!r} is not a setting of the {suite} suite; "
                            f"allowed: {', '.join(known)}")  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    given = {
        "netlab": netlab,
        "straggler_only": straggler_only,
        "lab_workers": lab_workers,
        "powersgd_only": powersgd_only,
        "against": against,
        "device": device if device != "auto" else "",
        "seeds": seeds,
        "settings": settings,
    }
    extra = {k: v for k, v in given.items() if v}
    # the faults suite on a network lab is a module of its own (the dml suite sends itself there)
    load_suite("faults_lab" if suite == "faults" and netlab else suite).run(out, quick=quick, **extra)
    return 0


def run_reproduce(out: Path, argv: Sequence[str], quick: bool = False, quiet: bool = False, jobs: int = 1,
                  fresh: bool = False) -> int:  # fmt: skip
    """``adass reproduce``: every claim's experiments; ``out/report.md`` with tables, plots and verdicts.

    ``argv`` (the command line after ``adass``) is quoted in the report; the sizes are ``--quick``'s
    or the full run's unless ``ADASS_REPRODUCE_SIZES`` names another plan. Finished runs under
    ``out/runs`` are reused unless ``fresh``; ``jobs`` worker processes share the independent runs.
    """
    from ..experiments.reproduce import plan_for, reproduce

    plan = plan_for(quick)
    _writable(out.parent if not out.exists() else out)
    reproduce(plan, out, argv, quiet=quiet, jobs=jobs, fresh=fresh)
    return 0


def run_dashboard(port: int, address: str, scheduler: str, runs: Path | None, show: bool = False,
                  **policy) -> int:  # fmt: skip
    """``adass dashboard``: serve the live dashboard until interrupted; ``policy`` holds
    ``data_dirs``, ``allow_schedulers``, ``max_workers`` and ``token`` (see ``serve_dashboard``)."""
    from ..dashboard import serve_dashboard

    serve_dashboard(port=port, address=address, runs_dir=runs, scheduler=scheduler, show=show, **policy)
    return 0
