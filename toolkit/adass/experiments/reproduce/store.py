"""Finished runs of ``adass reproduce``, one JSON file each under ``DIR/runs/<section>/<key>.json``.

A run's key is a hash of everything that decides its result: the plan's name, the section, the run's
full configuration and the arm's own settings (label, replicas, links). Re-running the same plan into
the same folder finds every finished run under its key and runs only the rest; a different plan, or an
edited arm, hashes to other keys, so its rows are never taken for these. Each file is written whole
(a temporary file renamed into place), so an interrupted run leaves finished rows and nothing half-written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...metrics import atomic_write_text

__all__ = ["RUNS", "RunStore"]

#: the folder under ``--out`` that holds finished runs
RUNS = "runs"


def _plain(value: Any) -> Any:
    """numpy and pandas scalars as the Python numbers JSON writes (``json`` rejects ``np.int64``)."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


@dataclass(frozen=True)
class RunStore:
    """The finished runs of one plan under ``root`` (``DIR/runs``); picklable, so worker processes
    write their own rows.

    Attributes
    ----------
    root : Path
        The store's folder.
    plan : str
        The plan's name, part of every key.
    """

    root: Path
    plan: str

    def key(self, section: str, config: dict, **arm: Any) -> str:
        """A stable key for one run: 20 hex digits of the SHA-256 of its description in canonical JSON.

        Parameters
        ----------
        section : str
            Which part of the report the run belongs to (``quantize``, ``dml_samplers``).
        config : dict
            The run's full configuration (``RunConfig.to_dict()``).
        **arm
            Whatever else decides the result (label, replicas, link settings).
        """
        text = json.dumps({"plan": self.plan, "section": section, "config": config, "arm": arm},
                          sort_keys=True, default=_plain)  # fmt: skip
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def path(self, section: str, key: str) -> Path:
        return self.root / section / f"{key}.json"

    def load(self, section: str, key: str) -> dict | None:
        """The finished run's row, or None when it has not run (or its file does not parse)."""
        try:
            return json.loads(self.path(section, key).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def save(self, section: str, key: str, row: dict) -> None:
        """Write ``row`` whole under ``key`` (floats round-trip exactly; NaN as JSON's ``NaN``)."""
        path = self.path(section, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(row, default=_plain))
