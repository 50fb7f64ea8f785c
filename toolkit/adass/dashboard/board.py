"""The runs one dashboard server started, shared by all its pages: a run outlives the page it came from.

A page that closes leaves its run going; a page that opens (a reload, a second tab) shows the run in
progress by replaying its :class:`~adass.dashboard.feed.LiveFeed`, and any page may stop it. The board
lives as long as the server: :func:`~adass.dashboard.serve.serve_dashboard` makes one and stops its
runs when the server stops.
"""

from __future__ import annotations

import threading

from .background import BackgroundRun

__all__ = ["RunBoard"]


class RunBoard:
    """Runs started from one server's pages, newest last.

    Parameters
    ----------
    keep : int
        Finished runs remembered besides those still running (their pages can still be looked at).
    """

    def __init__(self, keep: int = 8) -> None:
        self.keep = keep
        self._runs: dict[str, BackgroundRun] = {}
        self._lock = threading.Lock()
        self.version = 0  # grows with every change of the list, so pages know when to refresh theirs

    def add(self, run: BackgroundRun) -> None:
        """Remember ``run`` (started or about to be)."""
        with self._lock:
            self._runs[run.run_id] = run
            finished = [k for k, r in self._runs.items() if not r.running and k != run.run_id]
            for key in finished[: max(0, len(finished) - self.keep)]:
                del self._runs[key]
            self.version += 1

    def get(self, run_id: str) -> BackgroundRun | None:
        with self._lock:
            return self._runs.get(run_id)

    def runs(self) -> list[BackgroundRun]:
        """Every remembered run, newest first."""
        with self._lock:
            return list(reversed(self._runs.values()))

    def latest(self) -> BackgroundRun | None:
        """The newest run still going, else the newest one (None before the first)."""
        runs = self.runs()
        return next((r for r in runs if r.running), runs[0] if runs else None)

    def stop_all(self, timeout_s: float = 60.0) -> None:
        """Stop every run and wait for them (each tears its own cluster down)."""
        runs = self.runs()
        for run in runs:
            run.stop()
        for run in runs:
            run.join(timeout_s)
