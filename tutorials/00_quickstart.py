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
# # 00 · Quickstart: one distributed run and its records
#
# This notebook trains a small network on two Dask workers, with adaptive sample selection
# (ADASS) choosing the samples of every epoch and a Ring All-Reduce averaging the gradients.
# Then it opens the records of that run with pandas: evaluation per epoch, one row per step and
# worker, one row per transfer on the wire, and one row per sample and epoch saying whether the
# sample was kept.
#
# **Quick mode.** With the environment variable `ADASS_TUTORIAL_QUICK=1` (the test suite sets
# it) every notebook in `tutorials/` uses smaller sizes (fewer epochs, smaller sweeps) so that it
# finishes in well under a minute and a half. Leave it unset to see the full story.

# %%
import os
import shutil
import tempfile

import holoviews as hv
import pandas as pd

from adass import viz
from adass.runtime.cluster import connect, train_distributed
from adass.config import RunConfig
from adass.metrics import EvalRecord, ParquetSink, load_run

hv.extension("bokeh")

QUICK = os.environ.get("ADASS_TUTORIAL_QUICK") == "1"
EPOCHS = 4 if QUICK else 15
WORKERS = 2
print(f"quick mode: {QUICK}; {EPOCHS} epochs on {WORKERS} workers")

# %% [markdown]
# ## What one distributed run does
#
# Data-parallel training keeps one full copy of the model on each of $P$ workers and splits the
# $n$ training samples into $P$ shards. At every step, worker $r$ computes the gradient $g_r$ of
# its own local batch of $m_r$ samples; the *exchange* then hands every worker the same weighted
# mean
#
# $$\bar g = \sum_{r=1}^{P} \frac{m_r}{m}\, g_r, \qquad m = \sum_r m_r,$$
#
# and every worker applies the same optimizer step with $\bar g$. Because the replicas start from
# the same weights (the run seed builds them) and receive bit-identical averages, they stay
# identical without ever broadcasting the model.
#
# Once per epoch, the sampler on each worker decides which of its samples the epoch visits. With
# `adass` the workers agree on one global budget (notebook 01 explains it), so a worker with many
# easy samples drops more of them than a worker with hard ones; they still take the same number of
# steps, and a worker that runs out of samples sends a zero-weight gradient.
#
# ## Start a cluster
#
# `connect(n_workers=P)` starts an embedded Dask `LocalCluster`: $P$ worker processes with one
# thread each, on 127.0.0.1. Notebook 05 connects to a scheduler that is already running instead.
# The Dask dashboard link shows the workers' tasks and memory while a run goes on.

# %%
handle = connect(n_workers=WORKERS)
print("Dask dashboard:", handle.dashboard_link)
handle.workers()

# %% [markdown]
# ## Configure and train
#
# A run is described by one `RunConfig`. `from_flat` takes every option by name and checks each
# value before anything starts; the same options are the flags of `adass train`. Plug-ins are
# named by spec strings: `adass:eps=0.2,warmup=1,final=1,drop=0` is the ADASS sampler with a budget
# of 20%, one warm-up epoch on the full data and a last epoch on the full data too; half of the
# samples within the budget are trained anyway, at weight 2, so the expected gradient stays the full
# one. (Left to themselves, `final=auto` keeps that last epoch only where the learning rate has not
# decayed by then, and `drop=0.02` skips the smallest 2% of the bound sum outright.)
#
# The records go to a `ParquetSink`: in memory while the run goes on, then one Parquet file per
# record kind plus `config.json`, in a folder of their own.

# %%
config = RunConfig.from_flat(
    data="mnist5k",  # 4,000 training and 1,000 test digits, bundled with the project
    model="mlp:hidden=128",
    sampler="adass:eps=0.2,warmup=1,final=1,drop=0",
    epochs=EPOCHS,
    batch_size=64,  # the global batch: 32 samples per worker and step
    lr=0.05,
    workers=WORKERS,
    exchange="ring",
    codec="fp32",
    seed=0,
)
pd.DataFrame(
    [(section, option, value) for section, values in config.to_dict().items() for option, value in values.items()],
    columns=["section", "option", "value"],
).set_index(["section", "option"])

# %%
run_dir = tempfile.mkdtemp(prefix="adass-quickstart-")
sink = ParquetSink(run_dir, config.to_dict())


def show(record: EvalRecord) -> None:
    print(f"epoch {record.epoch:2d}  kept {record.kept_frac:5.1%}  "
          f"test accuracy {record.test_acc:.3f}  {record.wire_bytes / 1e6:7.1f} MB sent so far")


result = train_distributed(config, sink=sink, handle=handle, progress=show)
result.totals

# %% [markdown]
# ## The records, in pandas
#
# Four tidy tables come back, each a list of dataclass records (`adass.metrics`); the units are
# in the column names (`_s` seconds, `_bytes` bytes). `load_run` reads a finished run folder into
# a dictionary of DataFrames, so the same analysis works on runs made earlier or from the command
# line (`adass train ... --workers 2 --out DIR`).

# %%
run = load_run(run_dir)
sorted(run)

# %% [markdown]
# **Evaluation**: one row per epoch. `backprops` counts sample passes with a backward pass, summed
# over workers; `kept_frac` is the share of the training set the epoch visited. The warm-up and
# final epochs keep everything; the epochs between them visit only what ADASS kept.

# %%
evals = run["eval"]
evals[["epoch", "kept_frac", "backprops", "wire_bytes", "train_loss", "test_loss", "test_acc", "train_s"]]

# %% [markdown]
# **Steps**: one row per step and worker, with the samples it used and where its time went
# (`compute_s` for forward and backward; the exchange is `encode_s` and `decode_s` for codec math
# plus `comm_s`, the rest of the exchange's time: transfers, waiting for the other worker and the
# bookkeeping between them). Both workers take the same number of steps
# in every epoch, each spreading its own samples evenly over them; the sample counts may differ.

# %%
steps = run["steps"]
steps.pivot_table(index="epoch", columns="rank", values="samples", aggfunc="sum")

# %%
steps.groupby("rank")[["compute_s", "encode_s", "comm_s", "decode_s"]].mean().mul(1e3).rename(columns=lambda c: c.replace("_s", "_ms"))

# %% [markdown]
# **Traffic**: one row per message a worker received. A ring step has two phases,
# `reduce_scatter` and `all_gather`, of $P-1$ hops each. With $P$ workers and a gradient of $N$
# values, each worker sends $2\,\frac{P-1}{P}\,N$ values per step (notebook 02 derives it). For
# $P = 2$ that is one gradient's worth, $4N$ bytes in fp32, plus 8 bytes: the sample counts for
# the weighted mean ride along in the reduce-scatter payload instead of costing a message.

# %%
traffic = run["traffic"]
n_params = sum(p.numel() for p in result.parameters)  # the trained weights, from worker 0
per_step = traffic.groupby(["step", "src"]).wire_bytes.sum()
print(f"model: {n_params:,} parameters = {4 * n_params:,} bytes in fp32")
print(f"bytes each worker sent per step (median over steps): {int(per_step.median()):,}")
print(f"2 (P-1)/P N * 4 bytes: {int(2 * (WORKERS - 1) / WORKERS * n_params * 4):,}")
traffic.groupby("phase")[["raw_bytes", "wire_bytes"]].sum()

# %% [markdown]
# **Selection**: one row per sample and epoch with the sample's current ADASS score (its
# gradient-norm bound) and whether the epoch kept it. `sample_id` is the position in the full
# training set, so the shards of the two workers fit together.

# %%
selection = run["selection"]
selection.groupby(["epoch", "rank"]).kept.mean().unstack("rank").style.format("{:.1%}")

# %% [markdown]
# ## A first look
#
# `adass.viz` turns these tables into the views of the dashboard: accuracy and the kept share per
# epoch, where each worker's time went in its last steps, the ring with the bytes on every link,
# and the bytes of every link at every step.

# %%
(
    viz.learning_curve(evals, "test_acc", "epoch")
    + viz.kept_fraction(evals)
    + viz.worker_timeline(steps, last_steps=20)
    + viz.topology(traffic)
    + viz.traffic_heatmap(traffic)
).cols(2).opts(shared_axes=False)

# %% [markdown]
# Besides the sink, the run streamed per-step totals while it ran, through Dask's structured
# events (`Worker.log_event` on the replicas, `Client.subscribe_topic` here). The dashboard uses
# that stream; `result.store` holds what arrived.

# %%
print(result.store.count("steps"), "step rows arrived live;", len(steps), "are in the sink")

# %% [markdown]
# ## What this run shows
#
# The numbers above, read together:

# %%
formula_bytes = 2 * (WORKERS - 1) / WORKERS * n_params * 4
final = evals.iloc[-1]
print(f"{EPOCHS} epochs on {WORKERS} workers reached test accuracy {final.test_acc:.3f}; ADASS visited "
      f"{evals.kept_frac.mean():.0%} of the training set per epoch on average "
      f"({evals.kept_frac.min():.0%} in its leanest epoch)")
extra = per_step.median() - formula_bytes
print(f"each worker sent the ring formula's {formula_bytes:,.0f} bytes per step plus {extra:,.0f} "
      + ("(the sample counts that ride along): the exchange moved what the theory says" if 0 <= extra <= 64
         else "more than the formula: look at the traffic table for the extra messages"))

# %% [markdown]
# ## Clean up
#
# `close()` stops the client and the worker processes it started. The run folder was a temporary
# one; for records you want to keep, give `ParquetSink` (or `adass train --out`) a folder of yours.

# %%
handle.close()
shutil.rmtree(run_dir)

# %% [markdown]
# ## Try this
#
# 1. Train the same configuration with `sampler="full"` (reuse a cluster: open one with
#    `connect(n_workers=2)` again) and compare the final `backprops` and `test_acc` of the two runs.
# 2. Send the gradients with 4-bit quantization: `codec="qsgd:bits=4",
#    exchange="ring:strategy=shared_scale"`. How do `wire_bytes` in `result.totals` change, and
#    what does the `traffic` table show per hop? (Notebook 03 explains the growth you will see.)
# 3. Run the same thing from a terminal and open it here with `load_run`:
#    `adass train --data mnist5k --sampler adass:eps=0.2,warmup=1,final=1,drop=0 --workers 2 --epochs 4 --out runs/quick`.
