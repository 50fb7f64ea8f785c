"""Every file loader reads by path, by ``file://`` URL and over ``http://`` alike; unusable URLs are
refused in one line naming the URL and what to install."""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_files import arrays, write_idx, write_npy, write_parquet
from web import serve

from adass.data import DataError, load_dataset
from adass.locations import Location, LocationError, check_location


def _files(root: Path) -> dict[str, str]:
    """A spec per loader of files, with ``{base}`` where the folder of the files goes."""
    data = arrays(n_train=30, n_test=9)
    write_idx(root / "idx", data)
    write_npy(root / "npy", data)
    write_parquet(root / "t.parquet", n=30)
    rng = np.random.default_rng(0)
    (root / "t.csv").write_text(
        "a,b,y\n" + "".join(f"{rng.normal():.3f},{rng.normal():.3f},{i % 2}\n" for i in range(20))
    )
    (root / "t.svm").write_text(
        "".join(f"{i % 2} 1:{rng.normal():.3f} 2:{rng.normal():.3f}\n" for i in range(20))
    )
    (root / "cifar").mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (2, 3072), dtype=np.uint8), b"labels": [0, 1]}
        (root / "cifar" / name).write_bytes(pickle.dumps(batch))
    return {"idx": "idx:{base}/idx", "npy": "npy:{base}/npy", "parquet": "parquet:{base}/t.parquet,label=y",
            "csv": "csv:{base}/t.csv,label=y", "svmlight": "svmlight:{base}/t.svm", "cifar10": "cifar10:{base}/cifar"}  # fmt: skip


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("files")
    specs = _files(root)
    with serve(root) as (url, _):
        yield root, url, specs


def _same(a, b) -> None:
    for field in ("x_train", "y_train", "x_test", "y_test"):
        assert torch.equal(getattr(a, field), getattr(b, field)), field
    assert (a.shape, a.classes) == (b.shape, b.classes)


@pytest.mark.parametrize("loader", ["idx", "npy", "parquet", "csv", "svmlight", "cifar10"])
def test_a_loader_reads_the_same_by_path_file_url_and_http(files, loader):
    root, url, specs = files
    if loader == "svmlight":
        pytest.importorskip("sklearn")
    by_path = load_dataset(specs[loader].format(base=root), seed=2)
    _same(by_path, load_dataset(specs[loader].format(base=f"file://{root}"), seed=2))
    _same(by_path, load_dataset(specs[loader].format(base=url), seed=2))


def test_a_file_missing_at_a_url_is_named(files):
    _, url, _ = files
    with pytest.raises(DataError, match=f"^npy: file {url}/nowhere/x_train.npy not found$"):
        load_dataset(f"npy:{url}/nowhere")


@pytest.mark.parametrize(
    ("url", "words"),
    [("s3://bucket/data", "'s3://bucket/data' needs the package s3fs; pip install s3fs"),
     ("gs://bucket/data", "'gs://bucket/data' needs the package gcsfs; pip install gcsfs"),
     ("nope://x/y", "'nope://x/y': unknown protocol nope://")],
)  # fmt: skip
def test_an_unusable_url_is_one_line_naming_it_and_what_to_install(url, words):
    for package in ("s3fs", "gcsfs"):  # the message is about packages that are not there
        if url.startswith(package[:2]) and importlib.util.find_spec(package) is not None:
            pytest.skip(f"{package} is installed")
    with pytest.raises(LocationError) as err:
        check_location(url)
    assert str(err.value).startswith(words) and "\n" not in str(err.value)
    with pytest.raises(DataError, match=f"^npy: {words.split(';')[0]}"):  # and the loader names itself first
        load_dataset(f"npy:{url}")


def test_a_location_joins_and_writes_through_its_file_system(tmp_path):
    where = Location(f"file://{tmp_path}") / "a" / "b.txt"
    assert str(where) == f"file://{tmp_path}/a/b.txt" and where.local == tmp_path / "a" / "b.txt"
    where.parent.make_dirs()
    where.write_text("hello")
    assert (tmp_path / "a" / "b.txt").read_text() == "hello" and where.parent.names() == ["b.txt"]
    memory = Location("memory://adass-test/x.json")
    memory.write_text("{}")
    assert memory.read_text() == "{}" and memory.parent.names("*.json") == ["x.json"]
    memory.parent.remove(recursive=True)
    assert not memory.exists()
