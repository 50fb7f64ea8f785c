"""Drive one training run from a background thread, reporting through a LiveFeed.

A page's callbacks must never block, and a synchronous Dask client inside them stalls the page, so
the run gets a thread of its own and, for distributed runs, its own client and cluster (started and
torn down by ``train_distributed``). A run of one model or of replicas on threads trains in a process
of its own (:mod:`adass.dashboard.own_process`); the thread relays its messages.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from pathlib import Path

from ..config import RunConfig
from ..data import DataError, load_dataset
from ..metrics import OUTCOME_FILE, EvalRecord, atomic_write_text
from ..registry import SpecError
from ..runtime.model_memory import check_model_fits
from .feed import LiveFeed, StopRun
from .messages import DatasetLoaded, Done, EvalDone, Message, RunError, Status
from .own_process import run_in_own_process
from .policy import RunPolicy
from .training import train_for_page

__all__ = ["BackgroundRun", "new_run_id", "run_colocated", "run_world"]

log = logging.getLogger(__name__)


def new_run_id(config: RunConfig) -> str:
    """``dashboard-<sampler>-<YYYYmmdd-HHMMSS>-<6 hex>``, safe as a folder name and unique even for
    runs started in the same second."""
    sampler = "".join(ch if ch.isalnum() or ch in "=._-" else "_" for ch in config.sampler.sampler)
    return f"dashboard-{sampler}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def run_world(config: RunConfig) -> int:
    """Ranks a run of ``config`` has: replicas plus Parameter Server shards (0 for one model in this
    process, which exchanges nothing)."""
    return 0 if config.backend == "local" else config.world + config.servers


def run_colocated(config: RunConfig) -> dict[int, int]:
    """``{replica rank: shard}`` of the PS shards a run's replicas serve (``colocated=true``), so the
    topology is a star before the first traffic arrives; empty for other runs."""
    return {} if config.backend == "local" else config.colocated_shards()


class BackgroundRun:
    """One run of ``config`` on a daemon thread; its records, status and errors go to ``feed``.

    Parameters
    ----------
    config : RunConfig
        A validated configuration; ``workers == 0`` trains in this process, otherwise on Dask.
    feed : LiveFeed
        Where records and status messages go.
    run_id : str, optional
        Label of the run's records (a fresh :func:`new_run_id` if omitted).
    save_dir : path, optional
        Also keep the records in ``save_dir/<run_id>/`` (Parquet files and ``config.json``); a folder
        that already exists is never written into.
    policy : RunPolicy, optional
        What the run may use (data folders, schedulers, workers, data size); the defaults if omitted.
    """

    def __init__(self, config: RunConfig, feed: LiveFeed, run_id: str | None = None,
                 save_dir: str | Path | None = None, policy: RunPolicy | None = None) -> None:  # fmt: skip
        self.config, self.feed = config, feed
        self.policy = policy if policy is not None else RunPolicy()
        self.run_id = run_id or new_run_id(config)
        self.save_dir = None if save_dir is None else Path(save_dir) / self.run_id
        self.outcome = ""
        self.epochs_done = 0
        self.started_unix_s = time.time()
        self._thread = threading.Thread(target=self._main, name=f"adass-run-{self.run_id}", daemon=True)

    def start(self) -> BackgroundRun:
        """Start the thread; returns ``self``."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the run to stop; it does at its next record (a step in-process, an epoch on Dask)."""
        self.feed.stop()

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait for the thread; True once it has ended."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    @property
    def running(self) -> bool:
        """Whether the thread is still alive."""
        return self._thread.is_alive()

    @property
    def state(self) -> str:
        """``running``, or how it ended: ``finished``, ``stopped`` or ``failed``."""
        return "running" if self.running or not self.outcome else self.outcome.split(" ", 1)[0]

    def label(self) -> str:
        """One line for a list of runs: its id, what it trains and how it stands."""
        c = self.config
        where = {"dask": f"{c.cluster.workers} workers", "threads": f"{c.cluster.replicas} replicas"}.get(
            c.backend, "this process"
        )
        done = f"{self.epochs_done}/{c.optim.epochs} epochs"
        return f"{self.run_id} ({c.data.data}, {c.sampler.sampler}, {where}): {self.state}, {done}"

    def _progress(self, record: EvalRecord) -> None:
        self.epochs_done = int(record.epoch) + 1
        self.feed.progress(record)

    def _main(self) -> None:
        try:
            self.policy.check(self.config)
            if self.save_dir is not None:
                self.save_dir.parent.mkdir(parents=True, exist_ok=True)
                self.save_dir.mkdir()  # exists already: another run's records, never overwritten
            self.outcome = self._train()
        except StopRun:
            self.outcome = f"stopped ({self.run_id})"
        except Exception as err:  # the page shows it; the log keeps the traceback
            log.exception("run %s failed", self.run_id)
            self.feed.put(RunError(_one_line(err)))
            self.outcome = f"failed ({self.run_id})"
        finally:
            self._write_outcome()
            self.feed.put(Done(self.outcome or f"ended ({self.run_id})"))

    def _write_outcome(self) -> None:
        """``outcome.json`` beside the saved records: how the run ended, so Compare can say so."""
        if self.save_dir is None or not self.save_dir.is_dir():
            return
        ended = (self.outcome or "failed").split(" ", 1)[0]  # written from the run's own thread, still alive
        record = {"outcome": ended, "epochs_done": self.epochs_done, "epochs": self.config.optim.epochs}
        try:
            atomic_write_text(self.save_dir / OUTCOME_FILE, json.dumps(record))
        except OSError as err:  # the records are what matters; the page still says how the run ended
            log.error("run %s: cannot write its outcome: %s", self.run_id, err)

    def _train(self) -> str:
        config = self.config
        self.feed.put(Status(f"loading {config.data.data}"))
        try:
            dataset = load_dataset(config.data.data, seed=config.optim.seed)
        except DataError as err:
            raise SpecError(f"--data: {err}") from None
        check_model_fits(config, dataset)
        self.feed.put(DatasetLoaded(dataset))
        if config.backend == "dask":  # the work is on the workers; this thread only coordinates
            ended = train_for_page(config, self.feed, dataset, self.run_id, self.save_dir, self._progress)
        else:
            ended = run_in_own_process(config, self.feed, self.run_id, self.save_dir, self._seen)
        return f"{ended} ({self.run_id})"

    def _seen(self, message: Message) -> None:
        if isinstance(message, EvalDone):
            self.epochs_done = int(message.record.epoch) + 1


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if isinstance(err, SpecError) else f"{type(err).__name__}: {text}"
