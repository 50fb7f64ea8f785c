"""What a browser user of the dashboard may start: data only from the folders and schedulers given on
the dashboard's command line, a capped number of workers and size of data.

The page runs code as the dashboard's owner, so its boxes must not reach files or clusters the owner
did not offer. Refusals are one line that names the option, never the contents of a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import RunConfig
from ..data import DATASETS
from ..registry import SpecError, parse_spec

__all__ = ["RunPolicy"]


@dataclass(frozen=True)
class RunPolicy:
    """The limits of the runs a dashboard page may start.

    Attributes
    ----------
    data_dirs : tuple of Path
        Folders data files may be read from (``--data-dir``); none: only the bundled and synthetic sets.
    schedulers : tuple of str
        Dask scheduler addresses a run may use (``--allow-scheduler``); none: the embedded cluster only.
    max_workers : int
        Most workers one run may ask for.
    max_data_bytes : float
        Largest synthetic set (features as float32) one run may draw.
    """

    data_dirs: tuple[Path, ...] = ()
    schedulers: tuple[str, ...] = ()
    max_workers: int = 8
    max_data_bytes: float = 2.0 * 2**30

    def check(self, config: RunConfig) -> None:
        """Raise SpecError in one line if ``config`` asks for more than this policy allows."""
        scheduler = config.cluster.scheduler
        for option in ("workers", "replicas"):
            count = getattr(config.cluster, option)
            if count > self.max_workers:
                raise SpecError(f"--{option}: {count} is over this dashboard's limit of {self.max_workers}")
        if scheduler and scheduler not in self.schedulers:
            allowed = ", ".join(self.schedulers) or "none (start the dashboard with --allow-scheduler ADDR)"
            raise SpecError(
                f"--scheduler: {scheduler!r} is not one this dashboard may use; allowed: {allowed}"
            )
        self._check_data(config.data.data)

    def _check_data(self, text: str) -> None:
        spec = parse_spec(text, "--data")
        if spec.name == "synthetic":
            n, d, test = (
                float(spec.args.get(k, default)) for k, default in (("n", 4000), ("d", 20), ("test", 1000))
            )
            if 4.0 * (n + test) * d > self.max_data_bytes:
                raise SpecError(f"--data: {n + test:.0f} x {d:.0f} features is over this dashboard's limit of "
                                f"{self.max_data_bytes / 2**30:.1f} GiB")  # fmt: skip
        for key in DATASETS.paths.get(spec.name, ()):  # the loader's file and folder parameters
            if key in spec.args and not self._inside(spec.args[key]):
                where = ", ".join(str(d) for d in self.data_dirs) or "none (start it with --data-dir DIR)"
                raise SpecError(f"--data: this dashboard reads files only inside its data folders: {where}")

    def _inside(self, path: str) -> bool:
        target = Path(path).expanduser().resolve()
        return any(target.is_relative_to(folder.expanduser().resolve()) for folder in self.data_dirs)
