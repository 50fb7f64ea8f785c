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
# # 05 · Scale out on Dask
#
# So far every run started its own `LocalCluster`. Dask is the engine, though, and the same run
# goes to any Dask cluster: one started by hand with the `dask` command line, a batch system
# through dask-jobqueue, Kubernetes through dask-kubernetes. This notebook connects to a
# scheduler by its address, lists what changes on a real cluster (and on GPUs), and then uses
# the simulator to look at what no laptop can host: 64 workers on a slow link.
#
# **Quick mode.** `ADASS_TUTORIAL_QUICK=1` (set by the test suite) uses a shorter training run,
# a smaller gradient and fewer codecs at 64 workers; leave it unset for the full sizes.

# %%
import os

import holoviews as hv
import pandas as pd
import torch

from distributed import LocalCluster

from adass.runtime.cluster import connect, train_distributed
from adass.devices import group_backend, local_device
from adass.config import RunConfig
from adass.exchange import Link, simulate

hv.extension("bokeh")

QUICK = os.environ.get("ADASS_TUTORIAL_QUICK") == "1"
EPOCHS = 2 if QUICK else 8
SIM_VALUES = 10_000 if QUICK else 101_770  # the 101,770 values of mlp:hidden=128
SWEEP_WORKERS = [4, 16, 64] if QUICK else [2, 4, 8, 16, 32, 64]
print(f"quick mode: {QUICK}; {EPOCHS} epochs; simulated gradient of {SIM_VALUES:,} values")

# %% [markdown]
# ## Connecting to a scheduler address
#
# A Dask cluster is one *scheduler* plus any number of *workers*, found by the scheduler's
# address, e.g. `tcp://10.0.0.5:8786`. On a set of machines you would start them yourself:
#
# ```bash
# dask scheduler --port 8786                                   # on the head node
# dask worker tcp://10.0.0.5:8786 --nworkers 1 --nthreads 1   # on every worker machine
# ```
#
# Here a local cluster stands in for that: we start one with `connect(n_workers=2)` and then
# talk to it *only through its address*, exactly as to a remote one. With an address,
# `connect(address, n_workers=P)` opens a client and waits until at least $P$ workers have joined;
# closing that handle closes the client, never the cluster (it belongs to whoever started it).

# %%
# a plain-tcp cluster stands in for one someone else runs (the embedded one speaks TLS with its own keys)
local = LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0", memory_limit=0)
address = local.scheduler_address
print("scheduler address:", address)

remote = connect(address, n_workers=2)
print("embedded cluster:", remote.embedded)
print("workers:", remote.workers())
print("dashboard:", remote.dashboard_link)
remote.close()

# %% [markdown]
# The run itself only needs the address: with `scheduler=` set in the configuration,
# `train_distributed` connects, starts one replica actor per worker, forms the process group,
# trains, and disconnects. The command line does the same with
# `adass train --scheduler tcp://10.0.0.5:8786 --workers 2 ...`.

# %%
config = RunConfig.from_flat(data="mnist5k", model="mlp:hidden=128", sampler="adass:eps=0.2,warmup=1,final=1,drop=0",
                             epochs=EPOCHS, batch_size=64, lr=0.05, workers=2, exchange="ring",
                             codec="fp32", scheduler=address)  # fmt: skip
result = train_distributed(config)
print(f"test accuracy {result.final.test_acc:.3f} after {EPOCHS} epochs; "
      f"{result.totals['wire_bytes'] / 1e6:.0f} MB exchanged; the cluster still has "
      f"{len(local.workers)} workers")

# %%
local.close()

# %% [markdown]
# ## What changes on a real cluster
#
# The code above does not change; the environment around it does.
#
# - **One thread per worker, one replica per worker.** Replica actors share their worker's
#   thread, and the process group has one rank per process: start workers with
#   `--nthreads 1` (and `--nworkers` as many as you want replicas per machine). A Parameter
#   Server needs $S$ extra workers for its server shards.
# - **The same software everywhere.** Every worker unpickles the actors, so it needs the same
#   versions of `adass`, `torch` and `distributed` as the client. A shared environment (conda on
#   a shared file system, or one container image) is the simple way.
# - **Data.** The client draws every replica's shard; a replica reads its own rows from a path or
#   URL it can reach, or is streamed them by the client (`--data-to-workers auto`, the default), so
#   no folder has to be shared.
# - **Open ports between workers.** Gradients do not go through the scheduler: the replicas
#   form a torch.distributed process group among themselves (they meet through a key-value store
#   held by a Dask actor, over the cluster's own connection) and exchange peer to peer. The workers must reach each other directly, not just the scheduler.
# - **Timeouts.** `timeout_s` (300 s by default) bounds how long a replica waits for the others;
#   on a batch system, workers that are still queued should be waited for before the run starts
#   (`connect` does that with its `n_workers`).
#
# **dask-jobqueue** turns batch jobs into workers (install `dask-jobqueue`; here for Slurm):
#
# ```python
# from dask_jobqueue import SLURMCluster
# cluster = SLURMCluster(cores=1, processes=1, memory="8GB", walltime="02:00:00")
# cluster.scale(jobs=8)                                    # eight replicas
# handle = connect(cluster.scheduler_address, n_workers=8)  # waits until all eight run
# result = train_distributed(config.replace(workers=8), handle=handle)
# ```
#
# **dask-kubernetes** does the same with pods (install `dask-kubernetes`; the image must hold
# `adass`):
#
# ```python
# from dask_kubernetes.operator import KubeCluster
# cluster = KubeCluster(name="adass", image="registry.example/adass:0.1", n_workers=8,
#                       resources={"limits": {"cpu": "1", "memory": "8Gi"}})
# handle = connect(cluster.scheduler_address, n_workers=8)
# ```
#
# **GPUs and nccl.** With `--device cuda` (or `auto` where every worker has a GPU of its own),
# `adass` creates the process group with both backends, `cpu:gloo,cuda:nccl`: gradient bodies go
# over nccl straight from the device, frame heads and agreements over gloo. Give each worker exactly one GPU, for example with dask-cuda's
# `LocalCUDACluster` (one worker per GPU, each seeing only its own device) or with
# `dask worker ... --resources GPU=1` and `CUDA_VISIBLE_DEVICES` set per worker. On this machine:

# %%
device = local_device("auto")
print("device here:", device, "| process-group backend:", group_backend(device))

# %% [markdown]
# ## 64 workers on a slow link, in the simulator
#
# A real 64-worker cluster is rarely at hand; the in-process simulator runs one exchange step of
# up to 64 virtual workers (threads) and times it with the link model of notebook 02. Take a slow
# network: 100 Mbit/s with 1 ms latency, like machines that talk across a building or a busy
# cloud region.
#
# Recall the ring's time, $T_{\text{ring}} \approx 2(P-1)\,\alpha + 2\frac{P-1}{P}\,N\beta$:
# at $P = 64$ the latency term alone is $126\,\alpha = 126$ ms, whatever the codec does to $N$.
# A shared scale (notebook 03) runs one more ring, for the scales, so it pays that latency twice.
# The PS needs only two stages, but its server takes in all $P$ gradients (and the simulator's 64
# ranks leave room for 63 workers plus the server).

# %%
SLOW = "100mbit,1ms"
alpha_s = Link.parse(SLOW).latency_s


def correlated_grads(workers: int, n: int, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    common = torch.randn(n, generator=g)
    return [common + 0.5 * torch.randn(n, generator=g) for _ in range(workers)]


variants = [("ring", "fp32", 64), ("ps", "fp32", 63), ("ring", "randk:ratio=0.01+qsgd:bits=8", 64)]
if not QUICK:
    variants[2:2] = [("ring:strategy=requantize", "qsgd:bits=4", 64), ("ring:strategy=shared_scale", "qsgd:bits=4", 64),
                     ("ring", "randk:ratio=0.01", 64)]  # fmt: skip
steps = {}  # (exchange, codec, P) -> one simulated step; its traffic can be re-timed under any link
rows = []
for exchange, codec, workers in variants:
    result = steps[exchange, codec, workers] = simulate(correlated_grads(workers, SIM_VALUES), exchange=exchange,
                                                        codec=codec, link=SLOW)  # fmt: skip
    stages = result.stages()
    rows.append({"exchange": exchange, "codec": codec, "P": workers, "stages": len(stages),
                 "sent_by_worker0_bytes": int(result.traffic[result.traffic.src == 0].wire_bytes.sum()),
                 "step_ms": 1e3 * result.sim_seconds, "latency_ms": 1e3 * len(stages) * alpha_s})  # fmt: skip
slow = pd.DataFrame(rows)
slow["transfer_ms"] = slow.step_ms - slow.latency_ms
slow.style.format({"step_ms": "{:.1f}", "latency_ms": "{:.1f}", "transfer_ms": "{:.1f}",
                   "sent_by_worker0_bytes": "{:,}"})  # fmt: skip

# %%
ps_ms = float(slow.loc[slow.exchange == "ps", "step_ms"].iloc[0])
print(f"the PS step takes {ps_ms:,.0f} ms: two stages, but 63 gradients through the server's port; "
      "the chart shows the ring variants")
ring_rows = slow[slow.exchange != "ps"]
parts = ring_rows.melt(id_vars=["exchange", "codec"], value_vars=["latency_ms", "transfer_ms"], var_name="part",
                       value_name="ms")  # fmt: skip
parts["variant"] = parts.exchange.str.replace("ring:strategy=", "ring ") + " | " + parts.codec.str.replace(
    ",bucket=512,norm=max,shared=false,rounding=auto", "")  # fmt: skip
hv.Bars(parts, ["variant", "part"], "ms").opts(
    stacked=True, width=760, height=360, xrotation=20, tools=["hover"], legend_position="top_right",
    title=f"one ring step at P=64 on {SLOW}: latency against transfer time")  # fmt: skip

# %% [markdown]
# Compression shrinks the transfer part until the latency floor is all that is left. How the
# two parts trade as $P$ grows, for the dense ring and for the most compressed one (random-k plus
# 8-bit quantization), with the floor $2(P-1)\alpha$ dashed:

# %%
sweep = []
for workers in SWEEP_WORKERS:
    for codec in ("fp32", "randk:ratio=0.01+qsgd:bits=8"):
        if ("ring", codec, workers) not in steps:  # P = 64 ran above already
            steps["ring", codec, workers] = simulate(correlated_grads(workers, SIM_VALUES), exchange="ring",
                                                     codec=codec, link=SLOW)  # fmt: skip
        sweep.append({"P": workers, "codec": codec, "step_ms": 1e3 * steps["ring", codec, workers].sim_seconds})
sweep = pd.DataFrame(sweep)
floor = pd.DataFrame({"P": SWEEP_WORKERS, "ms": [1e3 * 2 * (p - 1) * alpha_s for p in SWEEP_WORKERS]})
(
    hv.NdOverlay({c: hv.Curve(part, "P", ("step_ms", "ms per step")) * hv.Scatter(part, "P", "step_ms")
                  for c, part in sweep.groupby("codec")}, kdims="codec")
    * hv.Curve(floor, "P", "ms", label="2(P-1) alpha").opts(color="gray", line_dash="dashed")
).opts(logx=True, logy=True, width=560, height=360, legend_position="top_left",
       title=f"ring step time on {SLOW}")  # fmt: skip

# %%
# read the sweep: how much the best codec saves against fp32, and how much of its step is latency
table = sweep.pivot(index="P", columns="codec", values="step_ms")
best = table.drop(columns="fp32").min(axis=1)
reading = pd.DataFrame({"fp32_ms": table["fp32"], "best_ms": best, "best_codec": table.drop(columns="fp32").idxmin(axis=1),
                        "speedup": table["fp32"] / best,
                        "latency_share_of_best": floor.set_index("P")["ms"] / best})  # fmt: skip
print(reading.round(2).to_string())
small, large = reading.index.min(), reading.index.max()
print(f"compression speeds the step up {reading.speedup[small]:.2f}x at P = {small} but "
      f"{reading.speedup[large]:.2f}x at P = {large}, where latency is "
      f"{reading.latency_share_of_best[large]:.0%} of the compressed step")

# %% [markdown]
# Two lessons for scaling out. First, on a slow link with many workers the ring is
# **latency-bound**: past a few dozen workers compression buys little more, and what helps is
# fewer messages: fewer steps, or exchanges with fewer hops in a row (hierarchical and tree
# all-reduces, which this toolkit does not implement). Second, **steps are the unit of cost**: the time of an epoch is its number of steps times the step time, and ADASS cuts the
# number of steps per epoch by its kept fraction. Sample selection and gradient compression
# attack the two factors of the same product, which is why the toolkit combines them
# (Q-ADASS, RS-ADASS).
#
# ## Try this
#
# 1. Re-time the $P = 64$ steps under a fast data-centre link, `25gbit,5us`, with
#    `steps[key].step_seconds("25gbit,5us")` (no need to simulate again). Which variant wins there?
# 2. Start a scheduler and two workers in a terminal (`dask scheduler`, then twice
#    `dask worker tcp://127.0.0.1:8786 --nthreads 1`) and run
#    `adass train --scheduler tcp://127.0.0.1:8786 --workers 2 --data mnist5k --epochs 3 --out runs/remote`.
#    Watch the Dask dashboard at http://127.0.0.1:8787 while it trains.
# 3. A PS with as many shards as workers: simulate `ps:servers=32` with 32 workers on `SLOW`.
#    Count its stages and compare its step time with the 32-worker ring.
