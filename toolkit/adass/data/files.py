"""Finding and reading dataset files, with errors that name the file and what is wrong."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from .base import DataError, DataNotFound

__all__ = ["find_file", "read_bytes", "require_dir"]


def require_dir(kind: str, path: str) -> Path:
    """Return ``path`` as a directory, or raise DataError naming it."""
    if not path:
        raise DataError(f"{kind}: no directory given; write {kind}:DIR")
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise DataNotFound(f"{kind}: directory {folder} does not exist")
    return folder


def find_file(kind: str, folder: Path, name: str, gz: bool = True) -> Path:
    """Return ``folder/name``, or ``folder/name.gz`` when only that exists (with ``gz``)."""
    plain = folder / name
    if plain.is_file():
        return plain
    packed = folder / (name + ".gz")
    if gz and packed.is_file():
        return packed
    wanted = f"{plain} (or {packed.name})" if gz else str(plain)
    raise DataNotFound(f"{kind}: file {wanted} not found")


def read_bytes(kind: str, path: Path) -> bytes:
    """Read a whole file, decompressing it when its name ends in ``.gz``."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as stream:
                return stream.read()
        return path.read_bytes()
    except FileNotFoundError:
        raise DataNotFound(f"{kind}: file {path} not found") from None
    except (OSError, EOFError, zlib.error) as err:
        # gzip.BadGzipFile is an OSError; a cut-off archive raises EOFError
        raise DataError(f"{kind}: {path}: cannot read ({type(err).__name__}: {err})") from None
