"""``adass bench exchange``: codecs x PS/ring in the simulator (wire bytes, error, modelled step time)
and real gloo processes on loopback (throughput against torch's all_reduce, and a 1 Gbit throttled link).

Loopback timings are the slowest rank's, median over repeats, with the two contenders interleaved
in one process group so that both see the same machine; the throughput ratio is the median of the
ratios of neighbouring runs. On the throttled link the codecs take turns in the same way, and a
codec's speedup is the median over rounds of fp32's time over its own.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import pandas as pd
import torch

from ...exchange import Link, check, simulate
from ...registry import SpecError
from ...tables import markdown_table
from . import write_report

__all__ = ["CODECS", "EXCHANGES", "run", "targets"]

CODECS = ["fp32", "fp16", "qsgd:bits=8", "qsgd:bits=4", "randk:ratio=0.01",
          "randk:ratio=0.01+qsgd:bits=8", "topk:ratio=0.01"]  # fmt: skip
EXCHANGES = ["ps", "ring", "ring:strategy=shared_scale"]
LINKS = {"1gbit": "1gbit,50us", "10gbit": "10gbit,5us"}
THROTTLED = ["fp32", "qsgd:bits=8", "randk:ratio=0.01"]
THROTTLE_LINK = "1gbit,50us"
THROTTLE_RING = (
    "ring:segment_kb=1024"  # 1 MiB on the wire: pieces small enough for codec math to overlap the link
)


def _grads(workers: int, n: int, seed: int = 0) -> list[torch.Tensor]:
    """Correlated worker gradients: a common direction plus each worker's own noise."""
    gen = torch.Generator().manual_seed(seed)
    common = torch.randn(n, generator=gen)
    return [common + 0.5 * torch.randn(n, generator=gen) for _ in range(workers)]


def simulated(workers: list[int], n: int) -> pd.DataFrame:
    """Part (a): every codec under every exchange that can take it, P virtual workers."""
    rows = []
    for p in workers:
        grads = _grads(p, n, seed=p)
        exact = torch.stack(grads).mean(0)
        for exchange in EXCHANGES:
            base = None
            for codec in CODECS:
                try:
                    check(exchange, codec)
                except SpecError:
                    continue  # e.g. shared_scale with fp16: nothing to share
                result = simulate(grads, exchange=exchange, codec=codec, link=LINKS["1gbit"])
                base = result.wire_bytes if codec == "fp32" else base
                error = (result.outputs[0] - exact).norm() / exact.norm()
                rows.append({
                    "workers": p, "exchange": exchange, "codec": codec, "wire_bytes": result.wire_bytes,
                    "wire_vs_fp32": result.wire_bytes / base if base else float("nan"),
                    "rel_error": float(error), "sim_1gbit_ms": 1e3 * result.step_seconds(LINKS["1gbit"]),
                    "sim_10gbit_ms": 1e3 * result.step_seconds(LINKS["10gbit"]),
                })  # fmt: skip
    # shared_scale has no fp32 row of its own: compare it with the ring's fp32
    frame = pd.DataFrame(rows)
    ring_fp32 = frame[(frame.exchange == "ring") & (frame.codec == "fp32")].set_index("workers").wire_bytes
    shared = frame.exchange == "ring:strategy=shared_scale"
    frame.loc[shared, "wire_vs_fp32"] = frame.loc[shared, "wire_bytes"] / frame.loc[shared, "workers"].map(
        ring_fp32
    )
    return frame


def _timed(fn, x: torch.Tensor) -> float:
    return _timed_cpu(fn, x)[0]


def _timed_cpu(fn, x: torch.Tensor) -> tuple[float, float, float]:
    """One timed call of ``fn`` on a fresh copy of ``x``: the slowest rank's wall seconds, and the
    largest and the summed CPU seconds of the ranks' processes (every thread: gloo's too)."""
    import torch.distributed as dist

    work = x.clone()  # both contenders reduce in place into a fresh copy, made outside the clock
    dist.barrier()
    start, cpu = time.perf_counter(), time.process_time()
    fn(work)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    most = torch.tensor([wall, cpu], dtype=torch.float64)
    dist.all_reduce(most, op=dist.ReduceOp.MAX)
    total = torch.tensor([cpu], dtype=torch.float64)
    dist.all_reduce(total)
    return float(most[0]), float(most[1]), float(total[0])


def _usable_cores() -> int:
    """Cores this process may run on (its affinity where the platform tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _in_place(exchange):
    """One reduce of ``w`` into itself, the call both loopback parts time."""
    return lambda w: exchange.reduce(w, out=w)


def loopback_worker(
    rank: int, world: int, sizes_mb: list[float], repeats: int, throttled_repeats: int
) -> list[dict]:
    """Runs in each spawned process: our ring against ``all_reduce``, then codecs on a throttled link."""
    import torch.distributed as dist

    from ...exchange import GlooTransport, make_exchange

    rows = []
    ring = make_exchange("ring", GlooTransport(tag_base=0), "fp32")
    for mb in sizes_mb:
        x = torch.randn(int(mb * 1e6 / 4), generator=torch.Generator().manual_seed(rank))
        _timed(_in_place(ring), x)  # warm-up: first-touch of buffers
        _timed(dist.all_reduce, x)
        ours, theirs = [], []
        for _ in range(repeats):
            ours.append(_timed(_in_place(ring), x))
            theirs.append(_timed(dist.all_reduce, x))
        paired = statistics.median(t / o for o, t in zip(ours, theirs, strict=True))  # pairs share the load
        rows.append({"part": "loopback", "workers": world, "size_mb": mb, "codec": "fp32",
                     "ring_s": statistics.median(ours), "all_reduce_s": statistics.median(theirs),
                     "throughput_ratio": paired})  # fmt: skip
        # the codecs take turns, repeat by repeat, so a slow spell of the machine hits them alike
        slow = {codec: make_exchange(THROTTLE_RING, GlooTransport(link=THROTTLE_LINK, throttle=True,
                                                                  tag_base=10 * (i + 1)), codec)
                for i, codec in enumerate(THROTTLED)}  # fmt: skip
        wire = {}
        for codec, exchange in slow.items():
            _timed(_in_place(exchange), x)
            wire[codec] = sum(r.wire_bytes for r in exchange.report().traffic)
        times: dict[str, list[tuple[float, float, float]]] = {codec: [] for codec in slow}
        for _ in range(throttled_repeats):
            for codec, exchange in slow.items():
                times[codec].append(_timed_cpu(_in_place(exchange), x))
        for codec in slow:
            walls = [t[0] for t in times[codec]]
            speedup = statistics.median(f[0] / t for f, t in zip(times["fp32"], walls, strict=True))
            rows.append({"part": "throttled", "workers": world, "size_mb": mb, "codec": codec,
                         "ring_s": statistics.median(walls), "wire_bytes_rank": wire[codec],
                         "speedup_vs_fp32": speedup,
                         "cpu_s_rank": statistics.median(t[1] for t in times[codec]),
                         "cpu_s_all": statistics.median(t[2] for t in times[codec]),
                         "cores": _usable_cores()})  # fmt: skip
        del x
    return rows


def loopback(workers: list[int], sizes_mb: list[float], repeats: int, throttled_repeats: int) -> pd.DataFrame:
    """Part (b): spawned gloo processes on 127.0.0.1, one process group per worker count."""
    from ...runtime.launch import run_processes

    rows = []
    for p in workers:
        rows += run_processes(loopback_worker, p, (sizes_mb, repeats, throttled_repeats), timeout_s=900)[0]
    frame = pd.DataFrame(rows)
    fast = frame.part == "loopback"
    frame.loc[fast, "ring_gb_s"] = frame.size_mb / 1e3 / frame.ring_s
    frame.loc[fast, "all_reduce_gb_s"] = frame.size_mb / 1e3 / frame.all_reduce_s
    slow = frame.part == "throttled"
    frame["model_s"] = frame.apply(lambda r: _ring_model_s(r.workers, r.wire_bytes_rank), axis=1).where(slow)
    if slow.any():
        limits(frame)
    return frame


def limits(frame: pd.DataFrame) -> None:
    """Add to the throttled rows what bounds their time (in place).

    ``cpu_floor_s``: the least wall time the ranks' measured CPU allows on this machine, their
    summed CPU over its cores (or the busiest rank's, if more). ``limit``: ``cpu`` where that
    floor exceeds the link model's time, else ``link``. ``own_core_s``: the least wall time with
    a core for each rank, the larger of the busiest rank's CPU and the link model (CPU work fully
    overlapping the link). ``own_core_speedup``: fp32's ``own_core_s`` over the codec's, at the
    same worker count and size: what the speedup could reach where the ranks do not share cores.
    """
    slow = frame.part == "throttled"
    rows = frame[slow]
    floor = pd.concat([rows.cpu_s_all / rows.cores, rows.cpu_s_rank], axis=1).max(axis=1)
    own = pd.concat([rows.cpu_s_rank, rows.model_s], axis=1).max(axis=1)
    cases = list(zip(rows.workers, rows.size_mb, strict=True))
    fp32 = {case: t for case, codec, t in zip(cases, rows.codec, own, strict=True) if codec == "fp32"}
    frame.loc[slow, "cpu_floor_s"] = floor
    frame.loc[slow, "limit"] = (floor > rows.model_s).map({True: "cpu", False: "link"})
    frame.loc[slow, "own_core_s"] = own
    frame.loc[slow, "own_core_speedup"] = [fp32[case] / t for case, t in zip(cases, own, strict=True)]


def _ring_model_s(workers: int, wire_bytes_rank: float) -> float:
    """Link-model time of one ring step: a rank's bytes over the link plus a latency per hop."""
    link = Link.parse(THROTTLE_LINK)
    return 2 * (workers - 1) * link.latency_s + wire_bytes_rank * 8 / link.bandwidth_bps


def targets(sim: pd.DataFrame, real: pd.DataFrame) -> pd.DataFrame:
    """The issue's goals, checked against this run's tables (measured, not asserted)."""
    ring = sim[sim.exchange == "ring"].groupby("codec").wire_vs_fp32.max()
    checks = [(f"ring {c} wire <= {limit}x fp32", ring.get(c, float("nan")) <= limit, f"{ring.get(c, float('nan')):.4f}x")
              for c, limit in [("qsgd:bits=8", 0.26), ("qsgd:bits=4", 0.14), ("randk:ratio=0.01", 0.011)]]  # fmt: skip
    fast = real[(real.part == "loopback") & (real.workers == real.workers.max())]
    for _, r in fast.iterrows():
        checks.append((f"ring fp32 >= 1.0x all_reduce, P={r.workers}, {r.size_mb:g} MB",
                       r.throughput_ratio >= 1.0, f"{r.throughput_ratio:.2f}x"))  # fmt: skip
    slow = real[(real.part == "throttled") & (real.workers == real.workers.max())]
    for codec, goal in [("qsgd:bits=8", 3.0), ("randk:ratio=0.01", 20.0)]:
        for _, r in slow[slow.codec == codec].iterrows():
            checks.append((f"1 Gbit: ring {codec} >= {goal:g}x faster than fp32, P={r.workers}, {r.size_mb:g} MB",
                           r.speedup_vs_fp32 >= goal, f"{r.speedup_vs_fp32:.2f}x"))  # fmt: skip
    return pd.DataFrame([{"goal": g, "met": "yes" if ok else "no", "measured": m} for g, ok, m in checks])


def run(out_dir: Path, quick: bool = False) -> pd.DataFrame:
    """Run the suite, print the tables, write ``exchange.md`` and ``exchange.csv``.

    Parameters
    ----------
    out_dir : Path
        Folder for the report (created if missing).
    quick : bool
        Small sizes and fewer workers (well under a minute), for smoke tests.

    Returns
    -------
    DataFrame
        Every row of both parts (``part`` = simulated, loopback or throttled).
    """
    if quick:
        sim = simulated([2, 4], 1 << 14)
        real = loopback([2], [1.0], repeats=2, throttled_repeats=1)
        n_text = "2^14"
    else:
        sim = simulated([2, 4, 8, 16], 1 << 20)
        real = loopback([2, 4], [10.0, 100.0], repeats=7, throttled_repeats=5)
        n_text = "2^20"
    sim.insert(0, "part", "simulated")
    goals = targets(sim, real)
    fast = real[real.part == "loopback"][["workers", "size_mb", "ring_s", "all_reduce_s", "ring_gb_s",
                                          "all_reduce_gb_s", "throughput_ratio"]]  # fmt: skip
    throttled = real[real.part == "throttled"]
    slow = throttled[["workers", "size_mb", "codec", "ring_s", "model_s", "speedup_vs_fp32",
                      "wire_bytes_rank"]]  # fmt: skip
    bounds = throttled[["workers", "size_mb", "codec", "ring_s", "cpu_s_rank", "cpu_s_all", "cpu_floor_s",
                        "model_s", "limit", "own_core_s", "own_core_speedup"]]  # fmt: skip
    cores = int(throttled.cores.iloc[0])
    text = [
        "# adass bench exchange", "",
        f"## Simulated: {n_text} fp32 values per worker, in-process workers, link model 1gbit,50us and 10gbit,5us", "",
        markdown_table(sim.drop(columns="part"), digits=4), "",
        "## Loopback: gloo processes on 127.0.0.1, ring fp32 against torch.distributed.all_reduce", "",
        markdown_table(fast, digits=3), "",
        f"## Loopback throttled to {THROTTLE_LINK}: `{THROTTLE_RING}` per codec "
        "(model_s: the link model's time for the bytes a rank received)", "",
        markdown_table(slow, digits=3), "",
        f"## What bounds the throttled times: CPU per reduce (every thread of a rank's process) on "
        f"{cores} usable cores, against the link model", "",
        "cpu_s_rank: the busiest rank's CPU seconds, cpu_s_all: all ranks' together (medians over "
        "rounds); cpu_floor_s: cpu_s_all over the cores (at least cpu_s_rank), the least wall time "
        "their CPU allows here; limit: the larger of that floor and model_s; own_core_s: "
        "max(cpu_s_rank, model_s), the least wall time with a core for each rank; own_core_speedup: "
        "fp32's own_core_s over the codec's, a bound, not a measurement.", "",
        markdown_table(bounds, digits=4), "",
        "## Goals", "", markdown_table(goals), "",
    ]  # fmt: skip
    frame = pd.concat([sim, real], ignore_index=True)
    write_report(out_dir, "exchange", text, {"exchange": frame})
    return frame
