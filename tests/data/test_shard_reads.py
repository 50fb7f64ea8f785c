"""A replica reads only its shard: the rows equal the whole read's shard (Parquet row groups, ``.npy``
maps and range reads, IDX records, packed or not), standardized with the whole split's statistics,
and what it keeps is its shard and the test split."""

from __future__ import annotations

import gzip
import io
import pickle

import numpy as np
import pytest
import torch
from tiny_files import arrays, write_idx, write_npy, write_parquet
from web import serve

from adass.data import DataError, FileRows, Shard, load_dataset, read_shard, shard_indices
from adass.data.records import read_records, spans


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    data = arrays(n_train=90, n_test=15, shape=(5, 4))
    write_idx(root / "idx", data)
    packed = write_idx(root / "idx-gz", data)
    for file in list(packed.iterdir()):
        file.with_name(file.name + ".gz").write_bytes(gzip.compress(file.read_bytes()))
        file.unlink()
    write_npy(root / "npy", data)
    write_npy(root / "npy-u8", data, dtype="uint8")
    write_parquet(root / "t.parquet", n=90, row_group_size=7)
    write_parquet(root / "test.parquet", n=20, seed=1)
    with serve(root) as (url, _):
        yield {
            "idx": f"idx:{root}/idx", "idx-gz": f"idx:{root}/idx-gz", "npy": f"npy:{root}/npy",
            "npy-u8": f"npy:{root}/npy-u8", "parquet": f"parquet:{root}/t.parquet,label=y",
            "parquet-test": f"parquet:{root}/t.parquet,label=y,test={root}/test.parquet,features=f2;f0",
            "idx-http": f"idx:{url}/idx", "npy-http": f"npy:{url}/npy",
            "parquet-http": f"parquet:{url}/t.parquet,label=y",
            "csv-whole-file": "synthetic:n=90,d=4,test=15",
        }  # fmt: skip


@pytest.mark.parametrize("name", ["idx", "idx-gz", "npy", "npy-u8", "parquet", "parquet-test", "idx-http",
                                  "npy-http", "parquet-http", "csv-whole-file"])  # fmt: skip
@pytest.mark.parametrize("sharding", ["iid", "dirichlet:alpha=0.3"])
def test_a_shard_read_alone_equals_the_whole_reads_shard(specs, name, sharding):
    spec = specs[name] + ("" if name == "csv-whole-file" else ",standardize=on")
    whole = load_dataset(spec, seed=4)  # standardized with the whole training split's statistics
    for rank, indices in enumerate(shard_indices(whole.y_train, 3, sharding, seed=4)):
        shard = read_shard(spec, 4, indices, whole.n_train, whole.standardization)
        assert torch.equal(shard.x, whole.x_train[indices]), rank  # bit for bit: same statistics, same rows
        assert torch.equal(shard.y, whole.y_train[indices])
        assert torch.equal(shard.x_test, whole.x_test) and torch.equal(shard.y_test, whole.y_test)
        assert (shard.shape, shard.classes, shard.n_train) == (
            tuple(whole.shape),
            whole.classes,
            whole.n_train,
        )


def test_a_replica_keeps_its_shard_and_the_test_split_only(specs):
    whole = load_dataset(specs["npy"], seed=0)
    indices = shard_indices(whole.y_train, 3, "iid", seed=0)[1]
    shard = read_shard(specs["npy"], 0, indices, whole.n_train, whole.standardization)
    assert shard.x_all is None and shard.y_all is None
    assert shard.x.shape == (indices.numel(), *whole.shape) and shard.x_test.shape == whole.x_test.shape
    row = whole.x_train[0].numel() * 4
    assert shard.nbytes == indices.numel() * (row + 8 + 8) + whole.n_test * (row + 8)
    held = read_shard(specs["npy"], 0, indices, whole.n_train, whole.standardization, whole=True)
    assert torch.equal(held.x_all, whole.x_train) and torch.equal(held.x, shard.x)  # for handed-over samples


def test_statistics_come_from_the_whole_split_not_refitted_on_a_shard(specs):
    spec = specs["parquet"]
    whole = load_dataset(spec, seed=0)
    indices = shard_indices(whole.y_train, 2, "iid", seed=0)[0]
    with pytest.raises(ValueError, match="need its standardization"):
        load_dataset(spec, seed=0, rows=indices.numpy())
    part = load_dataset(spec, seed=0, rows=indices.numpy(), standardization=whole.standardization)
    assert part.standardization is whole.standardization  # the numbers a full load fits, as they were
    assert torch.equal(part.x_train, whole.x_train[indices])
    # statistics fitted on the shard alone would differ: this shard's mean is not zero under the whole's
    assert not torch.allclose(part.x_train.mean(0), torch.zeros(part.x_train.shape[1]), atol=1e-3)


def test_a_shard_travels_in_pieces_and_is_joined_back(specs):
    whole = load_dataset(specs["idx"], seed=0)
    indices = shard_indices(whole.y_train, 2, "iid", seed=0)[1]
    shard = Shard.of(whole, indices, whole=False)
    pieces = [Shard.of(whole, indices[:10], whole=False), Shard.of(whole, indices[10:], whole=False)]
    joined = Shard.join(pieces)
    assert torch.equal(joined.x, shard.x) and torch.equal(joined.indices, shard.indices)


def test_records_are_read_in_spans_and_come_back_in_the_order_asked():
    body = np.arange(200, dtype=np.uint8).reshape(50, 4)
    stream = io.BytesIO(b"head" + body.tobytes())
    rows = np.array([49, 0, 1, 2, 30])
    assert np.array_equal(read_records(stream, 4, 4, rows), body[rows])
    assert spans(np.array([0, 1, 2, 30, 49]), 4, block_bytes=64, gap_bytes=8) == [(0, 3), (3, 4), (4, 5)]


@pytest.mark.parametrize("name", ["npy", "npy-u8", "npy-http"])
def test_rows_left_in_the_file_read_as_the_held_shard_holds_them(specs, name):
    spec = specs[name] + ",standardize=on"
    whole = load_dataset(spec, seed=0)
    indices = shard_indices(whole.y_train, 3, "iid", seed=0)[2]
    held = read_shard(spec, 0, indices, whole.n_train, whole.standardization)
    kept = read_shard(spec, 0, indices, whole.n_train, whole.standardization, in_file=True)
    assert kept.in_file and not held.in_file and isinstance(kept.x, FileRows)
    assert kept.x.shape == held.x.shape and len(kept.x) == indices.numel()
    assert kept.nbytes == held.nbytes - indices.numel() * (held.x[0].numel() * 4 - 8)  # row numbers, no rows
    batch = torch.tensor([7, 0, 29, 7, 3])  # any order, repeats
    assert torch.equal(kept.x[batch], held.x[batch])  # bit for bit: same bytes, same statistics
    assert torch.equal(kept.x.index_select(0, batch), held.x.index_select(0, batch))
    assert torch.equal(kept.x[4:19], held.x[4:19]) and torch.equal(kept.x[np.array([1, 2])], held.x[1:3])
    assert torch.equal(torch.cat(list(kept.x.blocks(block_bytes=100))), held.x)
    assert torch.equal(kept.x.take(batch)[1:3], held.x[batch[1:3]])
    again = pickle.loads(pickle.dumps(kept.x))  # its open file does not travel; it opens its own
    assert torch.equal(again[batch], held.x[batch])
    kept.x.close()
    assert torch.equal(kept.x[batch], held.x[batch])


def test_rows_left_in_the_file_read_only_their_own_bytes_from_a_web_server(tmp_path):
    data = arrays(n_train=2000, n_test=10, shape=(64,))
    write_npy(tmp_path / "npy", data)
    with serve(tmp_path) as (url, sent):
        whole = load_dataset(f"npy:{url}/npy", seed=0)
        rows = torch.tensor([0, 1100, 1999])
        kept = read_shard(f"npy:{url}/npy", 0, rows, 2000, whole.standardization, in_file=True)
        sent.clear()
        assert torch.equal(kept.x[torch.tensor([2, 0])], whole.x_train[torch.tensor([1999, 0])])
    # two rows of 256 bytes, one range request each (rows 0 and 1999 lie 500 KB apart)
    assert sorted(size for _, size in sent) == [256, 256]


def test_only_files_read_a_row_at_a_time_leave_rows_in_the_file(specs):
    whole = load_dataset(specs["parquet"], seed=0)
    with pytest.raises(DataError, match=r"parquet: its files are read whole.*formats that can: npy"):
        read_shard(specs["parquet"], 0, torch.arange(5), whole.n_train, whole.standardization, in_file=True)
