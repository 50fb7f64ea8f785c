"""Which code made a run: the package version and, from a git checkout, the commit (kept in ``config.json``)."""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path

from . import __version__

__all__ = ["provenance"]


@lru_cache(maxsize=1)
def _commit() -> str | None:
    """The commit of the checkout this package is imported from (``-dirty`` with local edits), or None."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "."], cwd=here,
                               capture_output=True, text=True, timeout=5)  # fmt: skip
    except (OSError, subprocess.SubprocessError):  # no git, or it hangs
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def provenance() -> dict[str, str | None]:
    """``{"version": "0.1.0", "commit": "<sha>"}``; ``commit`` is None outside a git checkout (a wheel)."""
    return {"version": __version__, "commit": _commit()}
