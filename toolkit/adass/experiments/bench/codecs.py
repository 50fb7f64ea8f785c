"""``adass bench codecs``: codec math against one read pass of the same tensor, on one core.

Each codec's encode and decode of a 2.5M-value float32 chunk (10 MB) is timed beside one read pass
(``x.abs().max()``) of the same tensor, with the reference (pure torch) and the fused kernels side
by side in the same run, and so are a ring hop's requantize (decode, add a share, encode), the
shared-scale code sum and ``sharedk``'s choice of a step's coordinates from its scores; random-k's
gather and scatter beside a plain ``index_select`` / ``index_copy_`` on the same indices. Timings are
medians over repeats that take turns, so that every contender sees the same machine; ``vs_read`` is
the read pass's time over the operation's (1.0: as fast as one read pass), ``vs_index`` the plain
index op's time over the operation's. Torch runs on one thread; the first calls (numba compiles or loads its cache) happen before any timing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch

from ...codecs import ChunkKey, kernels, make_codec
from ...codecs.shared import ChunkState
from ...tables import markdown_table
from . import write_report

__all__ = ["QSGD_CODECS", "RING_OPS", "SHAREDK", "TARGETS", "run"]

QSGD_CODECS = ["qsgd:bits=8", "qsgd:bits=4", "qsgd:bits=2"]
RANDK = "randk:ratio=0.01"
SHARED = "qsgd:bits=8,shared=true"  # a ring hop of shared_scale: 8-bit codes add into 9 bits
SHAREDK = "sharedk:ratio=0.01"  # choosing a step's coordinates from the shared scores: timed, no target
RING_OPS = [(spec, "requantize") for spec in QSGD_CODECS] + [(SHARED, "add")]  # timed, no target
TARGETS = {("qsgd:bits=8", "encode"): 0.5, ("qsgd:bits=4", "encode"): 0.4,
           ("qsgd:bits=8", "decode"): 0.5, ("qsgd:bits=4", "decode"): 0.5,
           (RANDK, "gather"): 0.5, (RANDK, "scatter"): 0.5}  # fmt: skip


def _median_times(ops: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds of each op, the ops taking turns ``repeats`` times after one untimed call."""
    for op in ops.values():
        op()
    times: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(repeats):
        for name, op in ops.items():
            start = time.perf_counter()
            op()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def measure(n: int, repeats: int) -> pd.DataFrame:
    """One row per (codec, operation, kernels): median time and rate against its baseline."""
    x = torch.randn(n, generator=torch.Generator().manual_seed(0))
    key = ChunkKey(0, 1, 2, rank=1)
    choices = ["reference", "fused"] if kernels.available() else ["reference"]
    ops: dict[str, Callable[[], object]] = {"read": lambda: x.abs().max()}
    for spec in QSGD_CODECS:
        payload = make_codec(spec).encode(x, key)
        for k in choices:
            codec = make_codec(spec, k)  # each kernel family on a codec of its own
            ops[f"{spec}|encode|{k}"] = lambda c=codec: c.encode(x, key)
            ops[f"{spec}|decode|{k}"] = lambda c=codec, p=payload: c.decode(p)
            ops[f"{spec}|requantize|{k}"] = lambda c=codec, p=payload: c.requantize(p, x, key, 0.25)
    shared = make_codec(SHARED)
    scale = shared.local_scale(x)
    pair = [shared.encode(x, ChunkKey(0, 1, 2, rank=r), scale=scale) for r in (1, 2)]
    for k in choices:
        codec = make_codec(SHARED, k)
        ops[f"{SHARED}|add|{k}"] = lambda c=codec: c.add(*pair)
    randk = make_codec(RANDK)
    idx = randk.indices(n, key)
    values, rest = randk.split(x, key)
    out = torch.zeros(n)
    ops["index_select"] = lambda: torch.index_select(x, 0, idx)
    ops["index_copy_"] = lambda: out.index_copy_(0, idx, values)
    for k in choices:
        codec = make_codec(RANDK, k)
        ops[f"{RANDK}|gather|{k}"] = lambda c=codec: c.split(x, key)
        ops[f"{RANDK}|scatter|{k}"] = lambda c=codec: c.scatter(values, rest, out)
    gen = torch.Generator().manual_seed(1)
    state = ChunkState(torch.rand(n, generator=gen), torch.randint(1, 50, (n,), generator=gen).float(),
                       torch.rand(n, generator=gen) < 0.9)  # fmt: skip
    state.rate.mul_(state.seen)  # no rate where never sent
    for k in choices:
        codec = make_codec(SHAREDK, k)
        ops[f"{SHAREDK}|choose|{k}"] = lambda c=codec: c._choose(state, n, c.k_for(n), key)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        median = _median_times(ops, repeats)
    finally:
        torch.set_num_threads(threads)
    rows = []
    for name, seconds in median.items():
        if "|" not in name:
            continue
        spec, op, k = name.split("|")
        base = "read" if spec != RANDK else ("index_select" if op == "gather" else "index_copy_")
        rows.append({"codec": spec, "op": op, "kernels": k, "ms": seconds * 1e3,
                     "in_GB_s": n * 4 / seconds / 1e9 if spec != RANDK else float("nan"),
                     "baseline": base, "baseline_ms": median[base] * 1e3,
                     "vs_baseline": median[base] / seconds,
                     "target": TARGETS.get((spec, op), float("nan"))})  # fmt: skip
    return pd.DataFrame(rows)


def run(out_dir: Path, quick: bool = False) -> pd.DataFrame:
    """Measure (2.5M values, 15 repeats; quick: 20k values, 3 repeats), print and write the table."""
    n, repeats = (20_000, 3) if quick else (2_500_000, 15)
    table = measure(n, repeats)
    lines = [f"# adass bench codecs{' (quick)' if quick else ''}", "",
             f"{n} float32 values, torch on one thread, median of {repeats} interleaved repeats; "
             "vs_baseline = baseline time / op time (read pass for qsgd, index_select/index_copy_ "
             "for random-k).", "", markdown_table(table)]  # fmt: skip
    write_report(out_dir, "codecs", lines, {"codecs": table})
    return table
