"""Data and checkpoints where they live: replicas read their own shard, or the client streams it to
them when the data is where only the client can see it; checkpoints go where ``--checkpoint`` says,
written by the client when the workers cannot reach it. Every way ends with the same parameters.

``memory://`` places are this process's own (each Dask worker is a process with an empty one), so
data and checkpoints there exist for the client alone.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from adass.config import RunConfig
from adass.data import load_dataset, shard_indices
from adass.locations import Location
from adass.registry import SpecError
from adass.runtime.cluster import connect, train_distributed
from adass.runtime.cluster.feed import ShardOrder, keeps_in_file


@pytest.fixture(scope="module")
def two_workers():
    handle = connect(n_workers=2)
    yield handle
    handle.close()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The same npy files on disk and in this process's memory file system."""
    folder = tmp_path_factory.mktemp("npy")
    rng = np.random.default_rng(0)
    arrays = {"x_train": rng.normal(size=(97, 5)) + 3, "y_train": np.arange(97) % 3,
              "x_test": rng.normal(size=(20, 5)) + 3, "y_test": np.arange(20) % 3}  # fmt: skip
    memory = Location("memory://adass-client-only/npy")
    for key, array in arrays.items():
        np.save(folder / f"{key}.npy", array.astype(np.float32 if key.startswith("x") else np.int64))
        (memory / f"{key}.npy").write_bytes((folder / f"{key}.npy").read_bytes())
    yield f"npy:{folder}", "npy:memory://adass-client-only/npy"
    memory.parent.remove(recursive=True)


def _config(data: str, epochs: int, **more) -> RunConfig:
    # two warm-up epochs: a 2-epoch first leg and the 3-epoch straight run both train their first two
    # epochs on all the data, so the leg resumed to 3 epochs matches the straight run
    return RunConfig.from_flat(data=data, model="mlp:hidden=8", sampler="adass:eps=0.2,warmup=2", epochs=epochs,
                               batch_size=16, lr=0.1, schedule="constant", workers=2, exchange="ring", codec="fp32", seed=5,
                               **more)  # fmt: skip


def _equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_streamed_shards_and_client_written_checkpoints_train_as_reading_does(two_workers, data):
    on_disk, client_only = data
    read = train_distributed(_config(on_disk, 3, data_to_workers="read"), handle=two_workers)
    whole = load_dataset(on_disk, seed=5)
    shards = shard_indices(whole.y_train, 2, "iid", seed=5)
    row = 5 * 4  # float32 features
    for report, shard in zip(read.data, shards, strict=True):  # its shard and the test split, nothing more
        assert report["how"] == "read" and report["n"] == shard.numel()
        assert report["data_bytes"] == shard.numel() * (row + 8 + 8) + whole.n_test * (row + 8)

    streamed = train_distributed(_config(client_only, 3, data_to_workers="stream"), handle=two_workers)
    assert [r["how"] for r in streamed.data] == ["stream", "stream"]
    assert _equal(streamed.parameters, read.parameters)

    # auto: the workers do not find the files and are streamed their shards; the checkpoint is the
    # client's alone, so it writes every replica's file
    checkpoint = "memory://adass-client-only/run"
    first = train_distributed(_config(client_only, 2, checkpoint=checkpoint), handle=two_workers)
    assert [r["how"] for r in first.data] == ["stream", "stream"]
    saved = Location(checkpoint) / "checkpoints"
    assert saved.names() == ["epoch-000001", "latest.json"]
    assert (saved / "epoch-000001").names("rank*.pt") == ["rank0.pt", "rank1.pt"]
    resumed = train_distributed(
        _config(client_only, 3, checkpoint=checkpoint), handle=two_workers, resume=True
    )
    for ours, straight in zip(
        resumed.parameters, read.parameters, strict=True
    ):  # as the runtime's resume tests
        torch.testing.assert_close(ours, straight, rtol=1e-6, atol=1e-7)


def test_workers_that_cannot_read_the_data_are_named_in_one_line(two_workers, data):
    _, client_only = data
    with pytest.raises(
        Exception, match="npy: file memory://adass-client-only/npy/x_train.npy not found"
    ) as err:
        train_distributed(_config(client_only, 1, data_to_workers="read"), handle=two_workers)
    assert "\n" not in str(err.value)


def test_rows_left_in_the_file_train_as_rows_held_in_memory(two_workers, data):
    on_disk, _ = data
    held = train_distributed(
        _config(on_disk, 2, data_to_workers="read", train_rows="memory"), handle=two_workers
    )
    in_file = train_distributed(
        _config(on_disk, 2, data_to_workers="read", train_rows="file"), handle=two_workers
    )
    assert [r["in_file"] for r in held.data] == [False, False]
    assert [r["in_file"] for r in in_file.data] == [True, True]
    for a, b in zip(held.data, in_file.data, strict=True):  # the features stay in the file: 5 float32 a row
        assert a["shard_bytes"] == b["shard_bytes"] == a["n"] * 5 * 4
        assert a["data_bytes"] - b["data_bytes"] == a["n"] * (5 * 4 - 8)  # the row numbers are held instead
    assert _equal(in_file.parameters, held.parameters)
    assert in_file.final.test_acc == held.final.test_acc


@pytest.mark.parametrize(
    ("train_rows", "spec", "limit", "whole", "expected"),
    [
        ("file", "npy:/d", None, False, True),
        ("memory", "npy:/d", 10_000, False, False),
        ("auto", "npy:/d", 10_000, False, True),  # 100 rows of 40 bytes: 4,000 > a quarter of 10,000
        ("auto", "npy:/d", 16_001, False, False),
        ("auto", "npy:/d", None, False, False),  # no memory limit
        ("auto", "csv:/d.csv", 10_000, False, False),  # read whole
        ("file", "npy:/d", 10_000, True, False),  # an asynchronous exchange's replica holds the whole split
    ],
)
def test_auto_leaves_rows_in_the_file_when_they_would_take_over_a_quarter_of_the_limit(
    train_rows, spec, limit, whole, expected
):
    order = ShardOrder(spec, 0, torch.arange(100), 400, None, whole, False, train_rows, 40)
    assert keeps_in_file(order, limit) is expected


def test_rows_can_stay_only_in_files_read_a_row_at_a_time(data):
    on_disk, _ = data
    with pytest.raises(
        SpecError, match=r"--train-rows: 'file' is not allowed for --data csv.*allowed for npy"
    ):
        _config("csv:/somewhere.csv", 1, train_rows="file")
    with pytest.raises(SpecError, match="--train-rows: 'file' needs --data-to-workers read or auto"):
        _config(on_disk, 1, train_rows="file", data_to_workers="stream")
    with pytest.raises(SpecError, match="--train-rows.*needs --workers 1 or more"):
        RunConfig.from_flat(data=on_disk, train_rows="file")
