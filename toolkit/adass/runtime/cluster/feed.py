"""How each replica of a Dask run gets its data: it reads its own shard, or the client streams it.

The client has loaded the data once (to check it before any worker starts), so it draws the shards
(:func:`~adass.data.shard_indices`, the same draw every backend makes, so runs stay bit-identical)
and holds the training split's standardization. Each replica is sent a :class:`ShardOrder`: its row
numbers and those statistics. With ``--data-to-workers read`` it reads just its rows from ``--data``
(a URL, or a path on its own machine); with ``stream`` the client sends it those rows through Dask,
in pieces of :data:`PIECE_BYTES`, and no path need exist on the workers; ``auto`` reads where the
files are there and streams to the replicas that do not find them. Replicas of an asynchronous
exchange hand samples to each other, so they hold the whole training split besides their shard.

A replica that reads its shard keeps its rows in memory, or leaves them in the file and reads each
batch's rows as it trains (``--train-rows``; :func:`keeps_in_file` decides ``auto`` on the worker,
which knows its memory limit), so a shard larger than a worker's memory still trains.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ...config import RunConfig
from ...data import DATASETS, Dataset, Shard, Standardization, shard_indices
from ...registry import parse_spec

__all__ = ["IN_FILE_SHARE", "PIECE_BYTES", "ShardOrder", "feed_replicas", "keeps_in_file", "shard_orders"]

#: the most bytes of training rows one streamed message carries
PIECE_BYTES = 32 * 2**20
#: ``--train-rows auto`` leaves a shard in its file when its rows would take more than this share of
#: the worker's memory limit (the worker itself, the model and the test split need the rest)
IN_FILE_SHARE = 0.25

#: ``call(members, method, args_per_member, what)`` -> results in rank order (the backend's wait-on-all)
Call = Callable[[Sequence[Any], str, Sequence[Sequence[Any]], str], list]


@dataclass(frozen=True)
class ShardOrder:
    """What one replica is told to hold.

    Attributes
    ----------
    spec : str
        ``--data`` (paths made absolute).
    seed : int
        The run seed (holdout splits of files without a test file depend on it).
    indices : Tensor
        ``(n,)`` its rows of the training split, sorted.
    n_train : int
        Rows of the whole training split.
    standardization : Standardization
        The whole training split's statistics, fitted once by the client.
    whole : bool
        Hold the whole training split besides (replicas of an asynchronous exchange).
    fallback : bool
        Files not on this machine are no error: the client streams the shard instead (``auto``).
    train_rows : str
        ``--train-rows``: ``memory``, ``file`` or ``auto`` (see :func:`keeps_in_file`).
    row_bytes : int
        Bytes of one training row as a replica holds it (float32 features).
    """

    spec: str
    seed: int
    indices: torch.Tensor
    n_train: int
    standardization: Standardization
    whole: bool = False
    fallback: bool = False
    train_rows: str = "memory"
    row_bytes: int = 0


def keeps_in_file(order: ShardOrder, memory_limit: int | None) -> bool:
    """Whether the replica told ``order`` leaves its training rows in the file: ``file`` says so,
    ``memory`` and a replica holding the whole split (an asynchronous exchange) say no, and ``auto``
    says so where the format allows it and the rows would take more than :data:`IN_FILE_SHARE` of
    ``memory_limit`` (the worker's, in bytes; None or 0: no limit, so no)."""
    if order.whole or order.train_rows == "memory":
        return False
    if order.train_rows == "file":
        return True
    allowed = DATASETS.keeps_in_file.get(parse_spec(order.spec, DATASETS.kind).name, False)
    return bool(
        allowed and memory_limit and len(order.indices) * order.row_bytes > IN_FILE_SHARE * memory_limit
    )


def shard_orders(config: RunConfig, spec: str, dataset: Dataset, whole: Sequence[bool]) -> list[ShardOrder]:
    """One order per replica (rank order); ``whole[r]`` says whether replica ``r`` holds the whole split."""
    seed = config.optim.seed
    shards = shard_indices(dataset.y_train, len(whole), config.data.shard, seed=seed)
    fallback = config.data.data_to_workers == "auto"
    row_bytes = dataset.x_train[:1].numel() * 4
    return [ShardOrder(spec, seed, indices, dataset.n_train, dataset.standardization, bool(w), fallback,
                       config.data.train_rows, row_bytes)
            for indices, w in zip(shards, whole, strict=True)]  # fmt: skip


def feed_replicas(
    call: Call, replicas: Sequence[Any], orders: Sequence[ShardOrder], dataset: Dataset, how: str
) -> list[dict[str, Any]]:
    """Give every replica its shard, as ``how`` (``read``, ``stream`` or ``auto``) says; return each one's
    report (how its data came, ``load_s``, ``data_bytes``, ``rss_bytes``), in rank order."""
    reports: list[dict[str, Any] | None] = [None] * len(replicas)
    if how != "stream":
        reports = call(replicas, "read", [(o,) for o in orders], "reading the data")
    missing = [r for r, report in enumerate(reports) if report is None]
    if missing:
        streamed = stream(call, [replicas[r] for r in missing], [orders[r] for r in missing], dataset)
        for r, report in zip(missing, streamed, strict=True):
            reports[r] = report
    return reports


def stream(
    call: Call, replicas: Sequence[Any], orders: Sequence[ShardOrder], dataset: Dataset
) -> list[dict[str, Any]]:
    """Send each replica its rows (or the whole split where its order says), standardized as the
    client's copy is, in pieces of about :data:`PIECE_BYTES` (the first one carries the test split),
    all replicas in turn; then build them. Only the pieces of one round are copied at a time."""
    rows = [torch.arange(dataset.n_train) if o.whole else o.indices for o in orders]
    row_bytes = dataset.x_train[:1].numel() * dataset.x_train.element_size() + 16  # features, label, index
    step = max(1, PIECE_BYTES // row_bytes)
    rounds = max(max(1, -(-len(r) // step)) for r in rows)
    for round_ in range(rounds):
        due = [r for r in range(len(replicas)) if round_ == 0 or round_ * step < len(rows[r])]
        pieces = [(_piece(dataset, rows[r][round_ * step : (round_ + 1) * step], round_ == 0),) for r in due]
        call(
            [replicas[r] for r in due],
            "receive",
            pieces,
            f"streaming the data (piece {round_ + 1} of {rounds})",
        )
    return call(replicas, "take", [(o,) for o in orders], "building the replicas")


def _piece(dataset: Dataset, rows: torch.Tensor, with_test: bool) -> Shard:
    """Training rows ``rows`` of ``dataset``, with its test split on the first piece (empty on the others)."""
    x_test, y_test = (
        (dataset.x_test, dataset.y_test) if with_test else (dataset.x_test[:0], dataset.y_test[:0])
    )
    return Shard(rows, dataset.x_train[rows], dataset.y_train[rows], x_test, y_test, tuple(dataset.shape),
                 dataset.classes, dataset.n_train)  # fmt: skip
