"""Tidy run records (steps, traffic, selection, evaluation) and the sinks that collect them.

Units live in the field names (``_s`` seconds, ``_bytes`` bytes). A run directory holds
``config.json`` and one Parquet file per record kind.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from .provenance import provenance

__all__ = [
    "EvalRecord",
    "MemorySink",
    "OUTCOME_FILE",
    "ParquetSink",
    "RECORD_FILES",
    "SelectionRecord",
    "Sink",
    "StepRecord",
    "TrafficRecord",
    "DROPPED",
    "as_row",
    "RENAMED",
    "atomic_write_bytes",
    "atomic_write_text",
    "load_run",
    "upgrade",
]


def _column(doc: str, default: Any = MISSING) -> Any:
    """A record field with its meaning (``metadata["doc"]``): the record schema in the documentation
    is written from these, so a column and its description live in one place."""
    return field(default=default, metadata={"doc": doc})


@dataclass
class StepRecord:
    """One optimizer step of one replica (``steps.parquet``); each field's meaning is its ``_column`` doc.

    The times are this replica's, in the order the step runs them (compute, encode, comm, decode); a
    run in one process has no exchange, so its encode, comm and decode seconds are 0.
    """

    run: str = _column("the run's label")
    epoch: int = _column("epoch, from 0")
    step: int = _column("step, from 0, running on across epochs")
    rank: int = _column("the replica")
    samples: int = _column("samples backpropagated in the local batch")
    loss: float = _column("their mean loss")
    compute_s: float = _column("seconds of forward and backward")
    encode_s: float = _column(
        "seconds of codec work before and between hops: weighting, encode, the hops' add or decode-add-re-encode",
        0.0,
    )
    comm_s: float = _column(
        "the rest of the exchange's wall time, which is not codec work: sending, receiving, waiting for the slowest peer, framing and copies",
        0.0,
    )
    decode_s: float = _column("seconds turning the final payloads into the averaged gradient", 0.0)
    staleness: int = _column(
        "asynchronous PS (`mode=async|ssp`): updates the servers applied between the parameters this gradient was computed on and the update it went into, the most over shards; 0 in lock-step",
        0,
    )


@dataclass
class TrafficRecord:
    """One message delivered by the exchange (``traffic.parquet``); each field's meaning is its
    ``_column`` doc. ``seconds`` is measured, ``sim_seconds`` modelled by ``--link``.
    """

    run: str = _column("the run's label")
    epoch: int = _column("epoch, from 0")
    step: int = _column("step, from 0, running on across epochs")
    phase: str = _column(
        "`push`, `pull` (parameter server), `reduce_scatter`, `all_gather` (ring) or `scale` (the ring's shared-scale agreement, one round before the reduce); "
        "a low-rank codec's two rounds put `p.` and `q.` before these (`p.reduce_scatter`, `q.push`)"
    )
    hop: int = _column("the hop within the phase")
    src: int = _column("sending rank (PS shards are the last ranks)")
    dst: int = _column("receiving rank")
    chunk: int = _column("the gradient chunk")
    raw_bytes: int = _column("the values' size in fp32")
    wire_bytes: int = _column("the encoded payload's size")
    seconds: float = _column(
        "measured: from the send (without a stamp from the sender, from the posted receive) to delivery, queueing behind earlier messages included"
    )
    sim_seconds: float = _column(
        "modelled: what the `--link` model (latency plus bytes over bandwidth) says the message takes; 0 without `--link`"
    )


@dataclass
class SelectionRecord:
    """One sample of one replica's shard in one epoch (``selection.parquet``); each field's meaning is
    its ``_column`` doc."""

    run: str = _column("the run's label")
    epoch: int = _column("epoch, from 0")
    rank: int = _column("the replica whose shard holds the sample")
    sample_id: int = _column("the sample's position in the training split")
    bound: float = _column(
        "its score when the epoch's selection was made (ADASS: the gradient-norm bound; other policies: the last loss); `inf` never visited, NaN unknown"
    )
    kept: bool = _column("whether the epoch visits it")


@dataclass
class EvalRecord:
    """The end of one epoch (``eval.parquet``), with the run's running totals; each field's meaning is
    its ``_column`` doc."""

    run: str = _column("the run's label")
    epoch: int = _column("the epoch just trained")
    train_s: float = _column(
        "training seconds so far, evaluation and set-up excluded (so policies compare fairly); called `wall_s` before, and read under the new name from older runs"
    )
    backprops: int = _column("sample passes with a backward pass so far, over all replicas")
    forwards: int = _column("every forward pass so far (probes and refreshes included)")
    wire_bytes: int = _column("bytes exchanged so far (encoded payloads; 0 in one process)")
    train_loss: float = _column("the epoch's sample-weighted mean training loss")
    test_loss: float = _column("cross-entropy on the test split")
    test_acc: float = _column("accuracy on the test split")
    kept_frac: float = _column("the share of the training set the epoch visited", 1.0)


RECORD_FILES: dict[type, str] = {
    EvalRecord: "eval.parquet",
    StepRecord: "steps.parquet",
    SelectionRecord: "selection.parquet",
    TrafficRecord: "traffic.parquet",
}


#: Columns that older runs wrote under another name (renamed on load) or no longer write (dropped).
RENAMED: dict[type, dict[str, str]] = {EvalRecord: {"wall_s": "train_s"}}
DROPPED: dict[type, tuple[str, ...]] = {StepRecord: ("wait_s",)}
#: Columns added after runs had been written: older frames get them, at the field's default, on load.
ADDED: dict[type, tuple[str, ...]] = {StepRecord: ("staleness",)}


def as_row(record: Any) -> dict[str, Any]:
    """A record's fields as a dict, in field order: what ``dataclasses.asdict`` gives for these records,
    whose fields are all scalars, without its recursive deep copy (10 µs a record, paid per step)."""
    return dict(vars(record))


def columns(kind: type) -> list[str]:
    """The column names of a record kind, in order."""
    return [f.name for f in fields(kind)]


def upgrade(kind: type, frame: pd.DataFrame) -> pd.DataFrame:
    """A frame of ``kind`` read from an older run, with today's column names."""
    old = RENAMED.get(kind, {})
    frame = frame.rename(columns={k: v for k, v in old.items() if v not in frame.columns})
    frame = frame.drop(columns=[c for c in DROPPED.get(kind, ()) if c in frame.columns])
    defaults = {f.name: f.default for f in fields(kind)}
    missing = {c: defaults[c] for c in ADDED.get(kind, ()) if c not in frame.columns}
    return frame.assign(**missing) if missing else frame


@runtime_checkable
class Sink(Protocol):
    """Where a run's records go: one record at a time, or many of one kind as a DataFrame.

    A run writes StepRecords as it goes (in-process runs: one per step; distributed runs: a frame per
    epoch), then each epoch's selection and traffic frames and its EvalRecord, and calls ``close``
    once at the end. Sinks that keep files may also have ``flush()`` (called at checkpoints) and
    ``resume()`` (start from the records a resumed run left).
    """

    def write(self, record: Any) -> None:
        """One record (a ``StepRecord``, ``EvalRecord``, ...)."""
        ...

    def write_frame(self, kind: type, frame: pd.DataFrame) -> None:
        """Many records of ``kind`` at once, a DataFrame with (at least) ``kind``'s columns."""
        ...

    def close(self) -> None:
        """The run has ended: keep what was written."""
        ...


class MemorySink:
    """Keeps records in lists, by kind; ``frame(kind)`` gives a DataFrame."""

    def __init__(self) -> None:
        self.records: dict[type, list[Any]] = {kind: [] for kind in RECORD_FILES}
        self.frames: dict[type, list[pd.DataFrame]] = {kind: [] for kind in RECORD_FILES}

    def write(self, record: Any) -> None:
        self.records[type(record)].append(record)

    def write_frame(self, kind: type, frame: pd.DataFrame) -> None:
        """Add many records of ``kind`` at once, as a DataFrame with its columns."""
        self.frames[kind].append(frame[columns(kind)])

    def extend(self, records: list[Any]) -> None:
        for r in records:
            self.write(r)

    def frame(self, kind: type) -> pd.DataFrame:
        parts = list(self.frames.get(kind, []))
        rows = self.records.get(kind, [])
        if rows:
            parts.append(pd.DataFrame([asdict(r) for r in rows], columns=columns(kind)))
        if not parts:
            return pd.DataFrame(columns=columns(kind))
        return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].reset_index(drop=True)

    def drop_after(self, epoch: int) -> None:
        """Forget every record of an epoch after ``epoch`` (a run going back to its checkpoint of ``epoch``)."""
        for kind in RECORD_FILES:
            frame = self.frame(kind)
            self.frames[kind] = [frame[frame["epoch"] <= epoch].reset_index(drop=True)]
            self.records[kind] = []

    def close(self) -> None:
        pass


class ParquetSink(MemorySink):
    """Collects records in memory and writes ``DIR/<kind>.parquet`` on ``flush``/``close``.

    With ``config``, ``DIR/config.json`` is written at once, with the package version and git
    commit that made the run under ``"adass"`` (see :func:`adass.provenance.provenance`).

    Every file is written atomically (temp file, then rename), so a crashed run never leaves a
    half-written Parquet file behind.
    """

    def __init__(self, out_dir: str | os.PathLike, config: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if config is not None:
            config = {**config, "adass": config.get("adass", provenance())}  # which code made the run
            atomic_write_text(self.out_dir / "config.json", json.dumps(config, indent=2, default=str))

    def resume(self) -> None:
        """Start from the records already in the folder (a resumed run appends to them)."""
        for kind, filename in RECORD_FILES.items():
            path = self.out_dir / filename
            if path.exists():
                self.frames[kind] = [upgrade(kind, pd.read_parquet(path))]
                self.records[kind] = []

    def flush(self) -> None:
        for kind, filename in RECORD_FILES.items():
            frame = self.frame(kind)
            _atomic_parquet(frame, self.out_dir / filename)

    def close(self) -> None:
        self.flush()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def _atomic_parquet(frame: pd.DataFrame, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: How a run that did not simply finish ended (``{"outcome": "stopped", "epochs_done": 3, "epochs": 20}``),
#: beside its records; a run folder without it is read as finished.
OUTCOME_FILE = "outcome.json"


def load_run(run_dir: str | os.PathLike) -> dict[str, Any]:
    """Read a run directory: ``{"config": dict, "eval": DataFrame, "steps": ..., "outcome": dict, ...}``.

    Runs written by older versions read with today's column names (see :data:`RENAMED`).
    """
    run_dir = Path(run_dir)
    out: dict[str, Any] = {"config": json.loads((run_dir / "config.json").read_text())}
    outcome = run_dir / OUTCOME_FILE
    out["outcome"] = json.loads(outcome.read_text()) if outcome.is_file() else {"outcome": "finished"}
    for kind, filename in RECORD_FILES.items():
        path = run_dir / filename
        key = filename.removesuffix(".parquet")
        out[key] = (
            upgrade(kind, pd.read_parquet(path)) if path.exists() else pd.DataFrame(columns=columns(kind))
        )
    return out
