"""Finding, opening and reading dataset files by path or fsspec URL, with errors that name the file."""

from __future__ import annotations

import gzip
import zlib
from typing import IO

from ..locations import Location, LocationError
from .base import DataError, DataNotFound

__all__ = ["find_file", "open_file", "read_bytes", "require_dir", "require_file"]


def _location(kind: str, text: str) -> Location:
    try:
        return Location(text)
    except LocationError as err:
        raise DataError(f"{kind}: {err}") from None


def require_dir(kind: str, path: str) -> Location:
    """Return ``path`` (a folder, or a URL of one) as a Location, or raise DataError naming it."""
    if not path:
        raise DataError(f"{kind}: no directory given; write {kind}:DIR")
    folder = _location(kind, path)
    if folder.local is not None and not folder.local.is_dir():
        raise DataNotFound(f"{kind}: directory {folder} does not exist")
    return folder  # a URL's folder may be a prefix only (object stores, web servers): its files say


def require_file(kind: str, path: str) -> Location:
    """Return ``path`` (a file, or a URL of one) as a Location, or raise DataNotFound naming it."""
    file = _location(kind, path)
    if not file.is_file():
        raise DataNotFound(f"{kind}: file {file} not found")
    return file


def find_file(kind: str, folder: Location, name: str, gz: bool = True) -> Location:
    """Return ``folder/name``, or ``folder/name.gz`` when only that exists (with ``gz``)."""
    plain = folder / name
    if plain.is_file():
        return plain
    packed = folder / (name + ".gz")
    if gz and packed.is_file():
        return packed
    wanted = f"{plain} (or {packed.name})" if gz else str(plain)
    raise DataNotFound(f"{kind}: file {wanted} not found")


def open_file(kind: str, file: Location, ranges: bool = False) -> IO[bytes]:
    """``file`` opened for reading, decompressed on the fly when its name ends in ``.gz``; with
    ``ranges`` (the caller reads spans it chose), a remote file fetches just what each read asks."""
    packed = file.name.endswith(".gz")
    uncached = {"cache_type": "none"} if ranges and not packed and file.local is None else {}
    try:
        return file.open("rb", compression="gzip" if packed else None, **uncached)
    except FileNotFoundError:
        raise DataNotFound(f"{kind}: file {file} not found") from None
    except OSError as err:
        raise DataError(f"{kind}: {file}: cannot read ({type(err).__name__}: {err})") from None


def read_bytes(kind: str, file: Location) -> bytes:
    """Read a whole file, decompressing it when its name ends in ``.gz``."""
    try:
        raw = file.read_bytes()
        return gzip.decompress(raw) if file.name.endswith(".gz") else raw
    except FileNotFoundError:
        raise DataNotFound(f"{kind}: file {file} not found") from None
    except (OSError, EOFError, zlib.error) as err:
        # gzip.BadGzipFile is an OSError; a cut-off archive raises EOFError
        raise DataError(f"{kind}: {file}: cannot read ({type(err).__name__}: {err})") from None
