"""Per-epoch checkpoints that cannot mislead a resume: one folder per epoch, then one atomic pointer.

Checkpoints live where ``--checkpoint`` says (a folder or any fsspec URL; by default the run's
``--out``), under ``checkpoints/``.

``checkpoints/epoch-000003/`` holds every replica's ``rank<r>.pt``, every PS server shard's
``server<s>.pt`` and ``state.json`` (epoch, running totals, the options a resume must keep); the
run's record files are flushed next; only then does ``checkpoints/latest.json`` move to the new
folder, by one rename (on an object store, which has no rename, by one upload written last: the
store shows it whole or not at all). Run folders of the earlier layout
(``rank<r>.pt`` and ``state.json`` directly in ``checkpoints/``, without options) still resume; the
first epoch published afterwards replaces them. A crash at any instant leaves the
pointer on a complete epoch; records of later epochs that reached the files are dropped on resume
(every record names its epoch), so a resumed run repeats no epoch and loses no row.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..config import RunConfig
from ..data import Dataset, shard_indices
from ..locations import Location, is_url
from ..registry import SpecError
from .replica import sampler_layout
from .reshard import reshard_states

__all__ = [
    "FIXED_OPTIONS",
    "WORLD_OPTIONS",
    "Checkpoint",
    "check_resume",
    "checkpoint_location",
    "checkpoints_of",
    "epoch_folder",
    "fixed_options",
    "has_checkpoint",
    "publish",
    "read_checkpoint",
    "read_checkpoint_state",
    "read_state",
    "reshard_checkpoint",
    "state_bytes",
    "state_from_bytes",
    "write_state",
]

POINTER = "latest.json"
#: options a resume takes from the checkpoint: a different value would not continue the same run
#: (``workers`` is saved too, but a resume may change it)
FIXED_OPTIONS = ("data", "shard", "model", "sampler", "batch_size", "lr", "momentum", "weight_decay",
                 "schedule", "seed", "codec", "exchange", "workers", "replicas")  # fmt: skip
#: saved options a resume may change: where the replicas live and how many there are
WORLD_OPTIONS = ("workers", "replicas")


@dataclass
class Checkpoint:
    """The last complete epoch of a run folder: its number, folder, running totals and saved options."""

    epoch: int
    folder: Path | Location  # a Path on this machine's file system
    totals: dict[str, float]
    options: dict[str, Any]

    @property
    def replicas(self) -> int | None:
        """How many replicas wrote it (None for a checkpoint that does not say): the Dask workers, else
        the virtual replicas, else the one model of a run in a single process."""
        if "workers" not in self.options:
            return None
        return int(self.options["workers"] or self.options.get("replicas") or 1)


#: where a run folder (or ``--checkpoint`` location) keeps its checkpoints
Where = str | Path | Location


def state_bytes(state: dict[str, Any]) -> bytes:
    """One rank's (or server's) state as the bytes of its file."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def state_from_bytes(data: bytes) -> dict[str, Any]:
    """A state from :func:`state_bytes`: tensors and plain values only, never pickled code."""
    return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")


def write_state(path: Where, state: dict[str, Any]) -> None:
    """One rank's (or server's) state to ``path`` (a path or URL) atomically (see :meth:`Location.write_bytes`)."""
    Location.of(path).write_bytes(state_bytes(state))


def read_state(path: Where) -> dict[str, Any]:
    """A state :func:`write_state` saved: tensors and plain values only, never pickled code."""
    return state_from_bytes(Location.of(path).read_bytes())


def checkpoint_location(config: RunConfig, run_dir: Where | None) -> Location | None:
    """Where a run keeps its checkpoints: ``--checkpoint`` when given, else its run folder ``run_dir``
    (None: nowhere). A path is made absolute here: a Dask worker started elsewhere writes it too."""
    where = config.cluster.checkpoint or run_dir
    if where is None or str(where) == "":
        return None
    if isinstance(where, Location):
        return where
    return Location(where if is_url(str(where)) else Path(where).expanduser().absolute())


def _place(location: Location) -> Path | Location:
    """A folder as its plain path where it is on this machine, else as a Location."""
    return location.local if location.local is not None else location


def checkpoints_of(run_dir: Where) -> Location:
    """The ``checkpoints/`` folder of a run folder or ``--checkpoint`` location."""
    return Location.of(run_dir) / "checkpoints"


def epoch_folder(run_dir: Where, epoch: int) -> Path | Location:
    """Where epoch ``epoch``'s checkpoint files go (created empty, any leftover of a crash removed)."""
    folder = checkpoints_of(run_dir) / f"epoch-{epoch:06d}"
    folder.remove(recursive=True)
    folder.make_dirs()
    return _place(folder)


def publish(run_dir: Where, epoch: int, totals: dict[str, float], options: dict[str, Any]) -> None:
    """Make epoch ``epoch`` the one a resume starts from (its rank files are written), then drop older ones.

    ``state.json`` goes into the epoch folder, then the pointer moves by one rename (one upload on an
    object store, after every other file): before it, a resume sees the previous epoch whole; after
    it, this one.
    """
    root = checkpoints_of(run_dir)
    name = f"epoch-{epoch:06d}"
    state = {"epoch": epoch, "totals": totals, "options": options}
    (root / name / "state.json").write_text(json.dumps(state))
    (root / POINTER).write_text(json.dumps({"epoch": epoch, "folder": name}))
    for old in root.names("epoch-*"):
        if old != name:
            (root / old).remove(recursive=True)
    for older in [*root.names("rank*.pt"), "state.json"]:  # files of the layout before epoch folders
        (root / older).remove()


def has_checkpoint(run_dir: Where) -> bool:
    """Whether a run folder (or ``--checkpoint`` location) has published an epoch."""
    return (checkpoints_of(run_dir) / POINTER).exists()


def read_checkpoint(run_dir: Where, ranks: int | None = None, saved_ranks: bool = False) -> Checkpoint:
    """The run folder's last complete checkpoint, every file of it checked; SpecError in one line if not.

    Parameters
    ----------
    run_dir : path
        A run folder (``adass train --out``).
    ranks : int, optional
        Replicas whose ``rank<r>.pt`` must be there and load (as tensors only, never pickled code).
    saved_ranks : bool
        Check as many replicas as the checkpoint says wrote it (``ranks`` where it does not say).
    """
    where = f"--resume: {str(run_dir)!r}"
    root = checkpoints_of(run_dir)
    pointer = root / POINTER
    older = root / "state.json"  # the layout before per-epoch folders: one set of files, in place
    if not pointer.exists() and not older.exists():
        raise SpecError(f"{where} has no checkpoint (checkpoints/{POINTER} missing)")
    try:
        folder = root / str(json.loads(pointer.read_text())["folder"]) if pointer.exists() else root
        state = json.loads((folder / "state.json").read_text())
        checkpoint = Checkpoint(
            int(state["epoch"]), _place(folder), dict(state["totals"]), dict(state.get("options", {}))
        )
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SpecError(f"{where}: the checkpoint is corrupt ({type(err).__name__}: {err})") from None
    if saved_ranks:
        ranks = checkpoint.replicas or ranks
    for rank in range(ranks or 0):
        path = folder / f"rank{rank}.pt"
        try:
            read_state(path)
        except Exception as err:  # torch raises many kinds for a truncated or foreign file
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise SpecError(
                f"{where}: checkpoint file {path.name} is corrupt ({type(err).__name__}: {first[:120]})"
            ) from None
    return checkpoint


def read_checkpoint_state(run_dir: Where) -> dict[str, Any]:
    """``{"epoch": last complete epoch, "totals": running totals}`` of a run folder's checkpoint."""
    checkpoint = read_checkpoint(run_dir)
    return {"epoch": checkpoint.epoch, "totals": checkpoint.totals}


def fixed_options(config: RunConfig) -> dict[str, Any]:
    """The options of ``config`` a resume must keep, by name."""
    flat = config.flat()
    return {k: flat[k] for k in FIXED_OPTIONS}


def check_resume(config: RunConfig, run_dir: Where) -> Checkpoint:
    """The checkpoint ``config`` continues from; SpecError in one line if it is corrupt, was trained
    with other options (the worker count may differ), or already has ``config.optim.epochs`` epochs."""
    checkpoint = read_checkpoint(run_dir, config.world, saved_ranks=True)
    saved, now = checkpoint.options, fixed_options(config)
    # another replica count or backend is allowed: the replicas' states follow their samples
    # (reshard_checkpoint), and every backend saves the same rank files
    differ = [k for k, v in now.items() if k in saved and saved[k] != v and k not in WORLD_OPTIONS]
    if differ:
        said = ", ".join(f"--{k.replace('_', '-')} {saved[k]!r} (given {now[k]!r})" for k in differ)
        raise SpecError(f"--resume: the checkpoint was trained with {said}; a resume keeps the saved options")
    done = checkpoint.epoch + 1
    if done >= config.optim.epochs:
        raise SpecError(f"--epochs: {config.optim.epochs} asks for no more than the {done} epochs already "
                        f"trained in {str(run_dir)!r}; give more to continue")  # fmt: skip
    return checkpoint


def reshard_checkpoint(checkpoint: Checkpoint, config: RunConfig, dataset: Dataset) -> Checkpoint:
    """``checkpoint`` of ``checkpoint.replicas`` replicas as one of ``config.world`` replicas.

    The new rank files go into a folder of their own beside the epoch's (``epoch-000003-of-2``), which
    the next published epoch removes; the epoch's own files are left as they are. See
    :mod:`adass.engine.reshard` for what follows the samples and what starts afresh.
    """
    old_world, new_world = checkpoint.replicas, config.world
    if old_world is None or old_world == new_world:
        return checkpoint
    seed, spec = config.optim.seed, config.data.shard
    old = shard_indices(dataset.y_train, old_world, spec, seed=seed)
    new = shard_indices(dataset.y_train, new_world, spec, seed=seed)
    source = Location.of(checkpoint.folder)
    states = [read_state(source / f"rank{r}.pt") for r in range(old_world)]
    layout = sampler_layout(config)
    folder = source.parent / f"{source.name}-of-{new_world}"
    folder.remove(recursive=True)
    folder.make_dirs()
    for rank, state in enumerate(reshard_states(states, old, new, layout, dataset.n_train)):
        write_state(folder / f"rank{rank}.pt", state)
    for server in source.names("server*.pt"):  # server shards keep theirs: their count is fixed
        (folder / server).write_bytes((source / server).read_bytes())
    options = {**checkpoint.options, "workers": config.cluster.workers, "replicas": config.cluster.replicas}
    return Checkpoint(checkpoint.epoch, _place(folder), dict(checkpoint.totals), options)
