# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Parameter Server against Ring All-Reduce
#
# Every step, $P$ workers must turn their $P$ gradients into one average. A **Parameter Server**
# (PS) collects them at a server and sends the result back; a **Ring All-Reduce** passes chunks
# around a ring of workers so that every link carries the same load. This notebook counts the
# bytes on every link and the time per step as $P$ grows, first in the simulator (one exchange
# step of $P$ virtual workers, every byte real, time from a link model), then measured on real
# processes talking over gloo, with the link throttled to the same model.
#
# **Quick mode.** `ADASS_TUTORIAL_QUICK=1` (set by the test suite) shortens the worker sweeps;
# leave it unset for the full sizes.

# %%
import inspect
import os
import threading

import holoviews as hv
import pandas as pd
import torch

from adass import viz
from adass.runtime.cluster import connect, train_distributed
from adass.config import RunConfig
from adass.exchange import EXCHANGES, InProcHub, Link, simulate
from adass.exchange.ring.plain import PlainRing
from adass.exchange.topology import topology_of
from adass.metrics import StepRecord, TrafficRecord
from adass.models import build_model

hv.extension("bokeh")

QUICK = os.environ.get("ADASS_TUTORIAL_QUICK") == "1"
SIM_WORKERS = [2, 4, 8, 16, 32] if QUICK else [2, 4, 8, 16, 32, 48, 60]
MEASURED_WORKERS = [2] if QUICK else [2, 3, 4]
FAST, SLOW = "10gbit,5us", "1gbit,50us"
print(f"quick mode: {QUICK}; simulated P = {SIM_WORKERS}; measured P = {MEASURED_WORKERS}")

# %% [markdown]
# The gradient in this notebook is the one of `mlp:hidden=128` on 28x28 digits, $N$ = 101,770
# values, 407 kB in fp32. The simulator only needs one flat tensor per worker; random ones of that
# length do (with the lossless `fp32` codec the bytes do not depend on the values).

# %%
N = sum(p.numel() for p in build_model("mlp:hidden=128", (1, 28, 28), 10).parameters())


def worker_grads(workers: int, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(N, generator=gen) for _ in range(workers)]


print(f"N = {N:,} values = {4 * N / 1e3:.0f} kB per gradient in fp32")

# %% [markdown]
# ## Two ways to average
#
# **Parameter Server.** Each worker pushes its gradient ($N$ values) to the server and pulls the
# average back ($N$ values). A worker's own link is lightly used, but the server's link carries
# $P\,N$ values in and $P\,N$ out, one transfer after the other. With the usual
# latency-bandwidth model ($\alpha$ seconds per message, $\beta$ seconds per value), one step takes
#
# $$T_{\text{PS}} \approx 2\,\bigl(\alpha + P\,N\,\beta\bigr),$$
#
# growing linearly in $P$. Splitting the parameters over $S$ server shards divides the server
# term: $2(\alpha + \max(N, PN/S)\,\beta)$, at the price of $S$ more machines.
#
# **Ring All-Reduce.** Cut the gradient into $P$ chunks of $N/P$ values. In the
# *reduce-scatter* phase, at each of $P-1$ hops every worker sends one chunk to its right
# neighbour, which adds its own share; after $P-1$ hops worker $r$ holds the full sum of chunk $r$.
# The *all-gather* phase passes the finished chunks around the ring in $P-1$ more hops. Every
# worker sends $2(P-1)$ chunks:
#
# $$\text{values sent per worker} = 2\,\frac{P-1}{P}\,N \;<\; 2N, \qquad
# T_{\text{ring}} \approx 2(P-1)\,\alpha + 2\,\frac{P-1}{P}\,N\,\beta .$$
#
# The bandwidth term hardly grows with $P$; the latency term does, $2(P-1)\alpha$, which matters
# for small messages, many workers or slow links (notebook 05).
#
# ## The ring in code
#
# `PlainRing` is the ring with nothing but the idea: one chunk per hop, each hop finished before
# the next, and at every hop *decode* what arrived, *add* this worker's share, *encode* the sum
# for the next hop. The owner of a chunk encodes its full sum once; the all-gather forwards those
# bytes unchanged and every worker decodes them, so all workers end with the same bits.

# %%
print(inspect.getsource(PlainRing.reduce))

# %% [markdown]
# The ring the toolkit runs (`ring`, `exchange/ring/schedule.py`) moves the same chunks, but posts
# every receive early, pipelines pieces, does its own work while transfers fly, adds fp32 values
# in place and carries sample counts inside the payloads. Its reducer for each kind of codec is
# chosen from the capabilities the codec declares (`exchange/ring/table.py`). Where both do the
# same arithmetic the results are the same bits: here for fp32 and for 4-bit QSGD, which the fast
# ring re-quantizes hop by hop with the same random draws.

# %%
def plain_ring(grads: list[torch.Tensor], codec: str) -> list[torch.Tensor]:
    """One step of the plain ring, one thread per worker."""
    hub, outputs = InProcHub(len(grads)), [None] * len(grads)

    def work(rank: int) -> None:
        outputs[rank] = PlainRing(hub.transport(rank), codec).reduce(grads[rank])

    threads = [threading.Thread(target=work, args=(rank,)) for rank in range(len(grads))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outputs


small = worker_grads(4)
for codec in ("fp32", "qsgd:bits=4"):
    fast = simulate(small, exchange="ring", codec=codec, link=None).outputs
    same = all(torch.equal(a, b) for a, b in zip(fast, plain_ring(small, codec), strict=True))
    print(f"{codec:12s} fast ring == plain ring, bit for bit: {same}")

# %% [markdown]
# ## Bytes on every link
#
# One simulated step with $P = 8$, drawn by the dashboard's topology view: arrows are links,
# their width and label the bytes that crossed them. In the ring every worker talks only to its
# neighbour, with the same load on every link; in the PS all traffic meets at the server (rank 8),
# whose two directions carry eight gradients each.

# %%
P = 8
ring = simulate(worker_grads(P), exchange="ring", codec="fp32", link=SLOW)
ps = simulate(worker_grads(P), exchange="ps", codec="fp32", link=SLOW)
(viz.topology(ring.traffic) + viz.topology(ps.traffic)).opts(shared_axes=False)

# %% [markdown]
# Each row of `traffic` is one transfer: its phase and hop, sender and receiver, the chunk, the
# bytes (`raw_bytes` as fp32, `wire_bytes` as sent) and the time the link model gives it.

# %%
ring.traffic.head()

# %% [markdown]
# ## As $P$ grows
#
# Now a sweep: for each $P$, one ring step, one PS step with one server, and one with four
# server shards. The busiest port is the most bytes any one rank sent or received in the step;
# the dashed lines are the formulas above.

# %%
def extra_ranks(exchange: str) -> int:
    """Ranks an exchange needs besides the workers (the PS server shards)."""
    entry, values = EXCHANGES.resolve(exchange)
    return topology_of(entry.name).extra_ranks(**values)


rows = []
for workers in SIM_WORKERS:
    grads = worker_grads(workers, seed=workers)
    for exchange in ("ring", "ps", "ps:servers=4"):
        if workers + extra_ranks(exchange) > 64:
            continue  # the in-process simulator holds at most 64 ranks
        result = simulate(grads, exchange=exchange, codec="fp32", link=SLOW)
        t = result.traffic
        rows.append({
            "P": workers, "exchange": exchange,
            "worker_sent_bytes": int(t[t.src == 0].wire_bytes.sum()),
            "busiest_port_bytes": int(max(t.groupby("src").wire_bytes.sum().max(), t.groupby("dst").wire_bytes.sum().max())),
            "step_ms_slow": 1e3 * result.step_seconds(SLOW), "step_ms_fast": 1e3 * result.step_seconds(FAST),
        })  # fmt: skip
sweep = pd.DataFrame(rows)
sweep.pivot(index="P", columns="exchange", values="busiest_port_bytes")

# %%
formula = pd.DataFrame({"P": sorted(set(sweep.P))})
formula["ring"] = 2 * (formula.P - 1) / formula.P * N * 4
formula["ps"] = formula.P * N * 4
formula["ps:servers=4"] = (formula.P * N * 4 / 4).clip(lower=N * 4)
colors = {"ring": "#1f77b4", "ps": "#d62728", "ps:servers=4": "#ff7f0e"}
# measured as wide, pale lines with markers; the formulas drawn last, thin and dashed, on top of them
measured_lines = [
    hv.Curve(sweep[sweep.exchange == name], "P", ("busiest_port_bytes", "bytes"), label=name).opts(
        color=c, line_width=6, alpha=0.35)
    * hv.Scatter(sweep[sweep.exchange == name], "P", "busiest_port_bytes").opts(color=c, size=7)
    for name, c in colors.items()
]  # fmt: skip
formula_lines = [hv.Curve(formula, "P", name, label=f"{name} (formula)").opts(color=c, line_dash="dashed",
                                                                             line_width=2)
                 for name, c in colors.items()]  # fmt: skip
busiest = hv.Overlay(measured_lines + formula_lines).opts(
    logy=True, width=680, height=380, legend_position="right",
    title="busiest port, bytes per step (dashed: formula)")  # fmt: skip
busiest

# %% [markdown]
# The same traffic, timed. `step_seconds(link)` replays a step's transfers under a link model:
# the step is a sequence of stages (each ring hop; the PS push and pull), and a stage lasts
# $\alpha + B/\text{bandwidth}$, with $B$ the bytes of its busiest port. One simulated step can be
# re-timed under any link without running it again.

# %%
def time_plot(column, link):
    return hv.Overlay([
        hv.Curve(sweep[sweep.exchange == name], "P", (column, "ms per step"), label=name).opts(color=c)
        * hv.Scatter(sweep[sweep.exchange == name], "P", column).opts(color=c, size=6)
        for name, c in colors.items()
    ]).opts(width=420, height=340, logy=True, legend_position="top_left", title=f"modelled step time, {link}")


(time_plot("step_ms_slow", SLOW) + time_plot("step_ms_fast", FAST)).opts(shared_axes=False)

# %% [markdown]
# ## Measured: real processes on a throttled link
#
# The simulator's time is a model. To check it, we train for one epoch on Dask workers that
# exchange gradients over gloo (TCP on this machine), with `link=` set: every transfer is then
# paced so that it finishes no earlier than the link model allows. Each step's traffic records
# give the modelled time of that very step; `encode_s + comm_s + decode_s` of the step records is
# the time each worker actually spent in the exchange (codec math, transfers and waiting for peers).
#
# A PS run needs one more Dask worker than it has replicas (the server), so the cluster has
# $\max P + 1$ workers. On loopback without throttling the network is nearly free and the
# difference between the exchanges disappears into Python overheads, which is why the link is
# throttled to 100 Mbit/s here.

# %%
MEASURE_LINK = "100mbit,500us"
handle = connect(n_workers=max(MEASURED_WORKERS) + 1)
measured = []
for workers in MEASURED_WORKERS:
    for exchange in ("ring", "ps"):
        config = RunConfig.from_flat(data="mnist5k", model="mlp:hidden=128", sampler="full", epochs=1,
                                     batch_size=500, lr=0.05, workers=workers, exchange=exchange,
                                     codec="fp32", link=MEASURE_LINK)  # fmt: skip
        result = train_distributed(config, handle=handle)
        steps, traffic = result.sink.frame(StepRecord), result.sink.frame(TrafficRecord)
        kind = topology_of(EXCHANGES.resolve(exchange)[0].name)  # the exchange family's time model
        modelled = pd.Series({step: kind.step_seconds(t, Link.parse(MEASURE_LINK)) for step, t in traffic.groupby("step")})
        exchange_s = steps.encode_s + steps.comm_s + steps.decode_s
        slowest = exchange_s.groupby(steps.step).max()  # a step ends when its slowest worker is done
        measured.append({"P": workers, "exchange": exchange, "steps": len(slowest),
                         "measured_ms": 1e3 * slowest.iloc[1:].median(),  # the first step pays set-up
                         "modelled_ms": 1e3 * modelled.iloc[1:].median(),
                         "bytes_per_step": int(traffic.wire_bytes.sum() / len(slowest))})  # fmt: skip
handle.close()
measured = pd.DataFrame(measured)
measured.style.format({"measured_ms": "{:.1f}", "modelled_ms": "{:.1f}", "bytes_per_step": "{:,}"})

# %%
long = measured.melt(id_vars=["P", "exchange"], value_vars=["measured_ms", "modelled_ms"], var_name="kind",
                     value_name="ms")  # fmt: skip
long["run"] = long.exchange + ", P=" + long.P.astype(str)
hv.Bars(long, ["run", "kind"], "ms").opts(width=560, height=340, title=f"time per step on {MEASURE_LINK}",
                                          xrotation=0, tools=["hover"], ylabel="ms per step")  # fmt: skip

# %% [markdown]
# What do these numbers say? The cell reads them: the PS step against the ring step at each $P$,
# and how far each measurement sits from its model.

# %%
by_p = measured.pivot(index="P", columns="exchange", values=["measured_ms", "modelled_ms"])
ps_vs_ring = (by_p["measured_ms"]["ps"] / by_p["measured_ms"]["ring"]).rename("ps / ring, measured")
model_ratio = (measured.measured_ms / measured.modelled_ms).set_axis(measured.exchange + ", P=" + measured.P.astype(str))
print(ps_vs_ring.round(2).to_frame().to_string())
print(f"measured / modelled: {model_ratio.min():.2f} to {model_ratio.max():.2f} "
      f"({', '.join(f'{k} {v:.2f}' for k, v in model_ratio.items())})")
slower = "slower" if (ps_vs_ring > 1).all() else "not always slower"
print(f"the PS step is {slower} than the ring step at every measured P "
      f"({ps_vs_ring.min():.1f}x to {ps_vs_ring.max():.1f}x); the models are "
      + ("within a factor of two of the measurements" if model_ratio.between(0.5, 2).all()
         else "off by more than a factor of two somewhere, so read them as orders of magnitude"))

# %% [markdown]
# Model and measurement are of the same size, and the ordering holds: the printed ratios say by
# how much the PS step exceeds the ring step here. They do not match exactly, for two reasons worth knowing. When
# a machine has fewer cores than processes (a laptop running five workers), every ring hop also
# waits for the next process to be scheduled, so the ring measures slower than its model as $P$
# grows. The PS can come out *below* its model: the model adds up a step's stages, while in a
# real run a worker that got its pull early starts its next push while the server is still
# sending to the others, so steps overlap a little. The ring has no such slack: every hop waits
# for the previous one.
#
# What to take away: at the same $P$ the ring moves less through any single port, and its step
# time stays nearly flat in $P$ until the latency term $2(P-1)\alpha$ takes over. More server
# shards help the PS, but each shard is another machine. Either way, the whole gradient crosses
# the network every step; notebooks 03 and 04 shrink it.
#
# ## Try this
#
# 1. Give the PS as many shards as there are workers (`ps:servers=8` for $P = 8$). Which formula
#    does its busiest port follow now, and how does its step time compare with the ring?
# 2. Re-time the $P = 32$ steps under a high-latency link, `1gbit,1ms`, with `step_seconds`. At
#    which $P$ does the ring's latency term overtake its bandwidth term?
# 3. Measure without throttling (`link=""`): how do `measured_ms` of ring and PS compare on
#    loopback, and why is the model no longer a guide?
