"""A replica that reads its shard holds its shard: reading a quarter of an ``.npy`` data set (from a
path or over HTTP) grows a process's resident memory by that quarter, the test split and one read
block, not by the data set.

Each read runs in a fresh process with the allocator settings Dask workers get (freed blocks are
kept, so every copy made on the way would stay resident), after a warm-up read of a few rows that
pays torch's and the loaders' one-time costs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from web import serve

from adass.allocator import ENVIRON
from adass.data import load_dataset, shard_indices
from adass.data.records import BLOCK_BYTES

N_TRAIN, WIDTH, N_TEST = 96_000, 256, 2_000  # 98 MB of training rows: a shard of four is 25 MB
# what reading keeps besides the shard and its one block buffer: the finiteness mask (a byte per
# feature value), the test split as read before standardizing, labels and the heap's own rounding
SLACK_BYTES = 16 * 2**20

READ = """
import json, re, sys
import torch
from adass.data import read_shard
spec, order = sys.argv[1], sys.argv[2]
rows, n_train, stats = torch.load(order, weights_only=False)  # as the client sends them (a ShardOrder)
def anon():
    return int(re.search(r"RssAnon:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) * 1024
read_shard(spec, 0, rows[:8], n_train, stats)  # warm-up: torch's and the loaders' one-time costs
before = anon()
shard = read_shard(spec, 0, rows, n_train, stats)
print(json.dumps({"grew": anon() - before, "held": shard.nbytes}))
"""


@pytest.fixture(scope="module")
def npy(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("npy")
    rng = np.random.default_rng(0)
    for split, n in (("train", N_TRAIN), ("test", N_TEST)):
        np.save(folder / f"x_{split}.npy", rng.normal(size=(n, WIDTH)).astype(np.float32))
        np.save(folder / f"y_{split}.npy", (np.arange(n) % 3).astype(np.int64))
    return folder


def _read_in_a_fresh_process(spec: str, order: Path) -> dict:
    env = {**os.environ, **ENVIRON}
    done = subprocess.run([sys.executable, "-c", READ, spec, str(order)], capture_output=True, text=True,
                          env=env, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("where", ["path", "http"])
def test_reading_a_shard_keeps_the_shard_not_the_data_set(npy, where, tmp_path):
    whole = load_dataset(f"npy:{npy}")
    rows = shard_indices(whole.y_train, 4, "iid", seed=0)[1]
    order = tmp_path / "order.pt"
    torch.save((rows, whole.n_train, whole.standardization), order)
    with serve(npy) as (url, _):
        seen = _read_in_a_fresh_process(f"npy:{url if where == 'http' else npy}", order)
    data_set_bytes = whole.x_train.numel() * 4
    assert seen["held"] < data_set_bytes / 3  # a quarter of the rows, and the small test split
    assert seen["grew"] <= seen["held"] + BLOCK_BYTES + SLACK_BYTES, seen
    assert seen["held"] + BLOCK_BYTES + SLACK_BYTES < data_set_bytes  # a whole read would not pass
