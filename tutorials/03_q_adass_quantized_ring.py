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
# # 03 · Q-ADASS: quantized gradients inside the ring
#
# Notebook 02 ended with the whole fp32 gradient crossing the network at every step. Quantizing
# it to $b$ bits per value cuts that by up to $32/b$. For a Parameter Server this is easy: each
# worker quantizes its push and the server decodes. Inside a Ring All-Reduce it is not, because
# the ring *adds* messages as they travel. This notebook shows why an ordinary quantizer (QSGD)
# does not survive reduce-scatter unchanged, the two ways `adass` makes it work (requantize at
# every hop, or agree on a shared scale), and what the number of bits costs in accuracy and buys in
# traffic when ADASS training runs on top: Q-ADASS.
#
# **Quick mode.** `ADASS_TUTORIAL_QUICK=1` (set by the test suite) uses fewer workers in the
# simulations, fewer bit widths and fewer epochs; leave it unset for the full sizes.

# %%
import os
from dataclasses import replace

import holoviews as hv
import numpy as np
import pandas as pd
import torch

from adass.runtime.cluster import connect, train_distributed
from adass.codecs import ChunkKey, make_codec
from adass.config import RunConfig
from adass.data import load_dataset
from adass.exchange import simulate
from adass.failures import Diverged
from adass.metrics import EvalRecord, MemorySink

hv.extension("bokeh")

QUICK = os.environ.get("ADASS_TUTORIAL_QUICK") == "1"
SIM_WORKERS = [2, 4, 8, 16] if QUICK else [2, 4, 8, 16, 32, 64]
SIM_VALUES = 20_000 if QUICK else 100_000
TRAIN_BITS = [2, 8] if QUICK else [1, 2, 4, 8]
STRATEGIES = ["shared_scale"] if QUICK else ["requantize", "shared_scale"]
EPOCHS = 3 if QUICK else 10
BATCH = 256 if QUICK else 64  # quick mode: fewer, larger steps (each quantized step costs several messages)
print(f"quick mode: {QUICK}; simulated P = {SIM_WORKERS}; trained bits = {TRAIN_BITS}, {EPOCHS} epochs of batch {BATCH}")

# %% [markdown]
# ## QSGD in one paragraph
#
# QSGD cuts a chunk into buckets of $d$ values (512 here) and gives each bucket one scale, its
# largest magnitude $M$. It places $L + 1$ evenly spaced levels on $[-M, M]$ ($L = 2^b - 2$, so
# that zero is a level; at $b = 1$, $L = 1$ and the two levels $\pm M$ make a stochastic sign) and
# rounds every value to one of its two neighbouring levels, at random,
# with the probabilities that make the result *unbiased*: $\mathbb E[Q(x)] = x$. With level
# spacing $\Delta = 2M/L$ and $b \ge 2$, the added variance per value is at most $\min(\Delta^2/4,\;\Delta|x|)$.
# On the wire go $b$ bits per value (the level index $u$, sign included) and one float32 scale per
# bucket; value $u$ stands for $M\,(2u - L)/L$.

# %%
gen = torch.Generator().manual_seed(0)
x = torch.randn(10_000, generator=gen)
key = ChunkKey(seed=0, step=0, chunk=0)
rows = []
for bits in (1, 2, 4, 8):
    codec = make_codec(f"qsgd:bits={bits}")
    payload = codec.encode(x, key)
    one = codec.decode(payload)
    many = torch.stack([codec.decode(codec.encode(x, replace(key, step=s))) for s in range(64)]).mean(0)
    rows.append({"bits": bits, "wire_bytes": payload.nbytes, "fp32_bytes": payload.raw_bytes,
                 "compression": payload.raw_bytes / payload.nbytes,
                 "rel_error_one": float((one - x).norm() / x.norm()),
                 "rel_error_mean_of_64": float((many - x).norm() / x.norm())})  # fmt: skip
pd.DataFrame(rows).style.format({"compression": "{:.1f}x", "rel_error_one": "{:.3f}", "rel_error_mean_of_64": "{:.3f}"})

# %% [markdown]
# One encoding is noisy (at 1 or 2 bits the noise is larger than the signal), but the mean of 64
# independent encodings is eight times closer, $\sqrt{64} = 8$: the noise averages out because it is unbiased and
# independent. That is the property the ring must preserve.
#
# ## Why QSGD does not drop into reduce-scatter
#
# At every reduce-scatter hop a worker receives a *partial sum* of a chunk from its left
# neighbour, adds its own share, and forwards the result. Suppose both arrive as QSGD payloads:
# $(u, M_1)$ from the neighbour and $(v, M_2)$ of its own. Their sum
#
# $$\frac{M_1(2u - L) + M_2(2v - L)}{L}$$
#
# lies on no grid of $b$-bit codes unless $M_1 = M_2$. And even with one common scale $M$ the
# integer sum $u + v$ runs from $0$ to $2L$, one bit wider; after the $P - 1$ hops of
# reduce-scatter a sum of $P$ codes needs up to $\lceil \log_2 P \rceil$ extra **headroom bits**.
# So the codec refuses to add payloads with their own scales:

# %%
qsgd = make_codec("qsgd:bits=4")
a, b = torch.randn(1000, generator=gen), 3 * torch.randn(1000, generator=gen)
pa, pb = qsgd.encode(a, replace(key, rank=0)), qsgd.encode(b, replace(key, rank=1))
try:
    qsgd.add(pa, pb)
except TypeError as err:
    print("TypeError:", err)

# %% [markdown]
# **Shared scale.** If the workers first agree on one scale per bucket (the elementwise max of
# their own scales, a tiny all-reduce: one float per 512 values), their codes live on the same grid
# and add as integers, exactly. The payload records how many codes it sums and widens its packing
# as needed:

# %%
shared = qsgd.with_shared_scale()
agreed = torch.maximum(shared.local_scale(a), shared.local_scale(b))
sa = shared.encode(a, replace(key, rank=0), scale=agreed)
sb = shared.encode(b, replace(key, rank=1), scale=agreed)
total = shared.add(sa, sb)
print("codes add exactly:", torch.equal(shared.codes(total), shared.codes(sa) + shared.codes(sb)))
print("decoded sum matches the sum of decodings:",
      torch.allclose(shared.decode(total), shared.decode(sa) + shared.decode(sb), atol=1e-6))

width = [{"summed": 1, "bits": sa.header["bits"], "wire_bytes": sa.nbytes}]
acc = sa
for r in range(2, 17):
    acc = shared.add(acc, shared.encode(a, replace(key, rank=r), scale=agreed))
    width.append({"summed": r, "bits": acc.header["bits"], "wire_bytes": acc.nbytes})
hv.Curve(pd.DataFrame(width), "summed", "bits").opts(
    interpolation="steps-post", width=420, height=280, title="code width of a sum of 4-bit codes",
    xlabel="codes summed (P)", ylabel="bits per value") * hv.Scatter(pd.DataFrame(width), "summed", "bits")  # fmt: skip

# %% [markdown]
# **Requantize.** The other way keeps every message at $b$ bits: at each hop decode the partial
# sum, add the own share in float, and quantize again for the next hop (with fresh, independent
# rounding). The chunk's owner quantizes the finished sum once, and the all-gather forwards those
# bytes unchanged, so all workers still end bit-identical. The price is noise: every one of the
# $P - 1$ re-encodings adds rounding error to a partial sum whose scale grows along the ring.
#
# | | bytes per message | extra messages | error |
# |---|---|---|---|
# | requantize | $b$ bits per value, constant | none | grows with $P$ (one rounding per hop) |
# | shared scale | grows to $b + \lceil\log_2 P\rceil$ bits | one max-all-reduce of the scales | each worker rounds once; the noise averages out |
#
# ## The two strategies in the simulator
#
# One ring step of $P$ virtual workers, each with a gradient that shares a common direction plus
# its own noise. The error is that of the averaged gradient every worker ends with, against the
# exact fp32 average.

# %%
def correlated_grads(workers: int, n: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    common = torch.randn(n, generator=g)
    return [common + 0.5 * torch.randn(n, generator=g) for _ in range(workers)]


rows = []
for workers in SIM_WORKERS:
    grads = correlated_grads(workers, SIM_VALUES, seed=workers)
    exact = torch.stack(grads).mean(0)
    for exchange, codec in [("ring", "fp32"), ("ring:strategy=requantize", "qsgd:bits=4"),
                            ("ring:strategy=shared_scale", "qsgd:bits=4")]:  # fmt: skip
        result = simulate(grads, exchange=exchange, codec=codec, link="1gbit,50us")
        sent = result.traffic[result.traffic.src == 0].wire_bytes.sum()
        rows.append({"P": workers, "variant": "fp32" if codec == "fp32" else exchange.split("=")[1],
                     "rel_error": float((result.outputs[0] - exact).norm() / exact.norm()),
                     "sent_per_worker_bytes": int(sent), "step_ms": 1e3 * result.sim_seconds})  # fmt: skip
sim = pd.DataFrame(rows)
sim.pivot(index="P", columns="variant", values=["rel_error", "sent_per_worker_bytes"])

# %%
quantized = sim[sim.variant != "fp32"]
error_plot = hv.NdOverlay({v: hv.Curve(part, "P", "rel_error") * hv.Scatter(part, "P", "rel_error")
                           for v, part in quantized.groupby("variant")}, kdims="strategy")  # fmt: skip
bytes_plot = hv.NdOverlay({v: hv.Curve(part, "P", ("sent_per_worker_bytes", "bytes sent per worker"))
                           for v, part in sim.groupby("variant")}, kdims="variant")  # fmt: skip
(error_plot.opts(logx=True, width=400, height=320, title="error of the averaged gradient (4 bits)", legend_position="right")
 + bytes_plot.opts(logx=True, logy=True, width=420, height=320, title="bytes each worker sends per step",
                   legend_position="right")).opts(shared_axes=False)  # fmt: skip

# %% [markdown]
# Requantizing keeps messages small, but its error grows with $P$. The shared scale does the
# opposite: its error *falls* with $P$ (each worker's rounding is independent, so it averages out
# like the 64 encodings above), while its messages widen by the headroom bits. The traffic of a
# single shared-scale step shows where the bytes go: the reduce-scatter messages widen hop by hop,
# the all-gather forwards the widest ones, and the `scale` agreement costs almost nothing.

# %%
P = 8
step = simulate(correlated_grads(P, SIM_VALUES, seed=1), exchange="ring:strategy=shared_scale",
                codec="qsgd:bits=4", link="1gbit,50us")  # fmt: skip
per_hop = step.traffic.groupby(["phase", "hop"], sort=False).wire_bytes.mean().reset_index()
per_hop["stage"] = range(len(per_hop))
hv.Bars(per_hop, ["stage"], ["wire_bytes", "phase", "hop"]).opts(
    color="phase", cmap="Category10", tools=["hover"], width=620, height=300, xaxis=None, show_legend=True,
    title=f"mean message size at each stage of one step, P={P}, 4 bits, shared scale")  # fmt: skip

# %% [markdown]
# ## Bits against accuracy and traffic: Q-ADASS on Dask
#
# Now the real thing: ADASS training on two Dask workers whose gradients go through the quantized
# ring, for several bit widths, against the fp32 ring. Every run uses the same seed, data and
# sampler, so the differences come from the codec alone.

# %%
base = RunConfig.from_flat(data="mnist5k", model="mlp:hidden=128", sampler="adass:eps=0.2,warmup=1,final=1,drop=0",
                           epochs=EPOCHS, batch_size=BATCH, lr=0.05, workers=2, exchange="ring", codec="fp32")  # fmt: skip
variants = [("ring", "fp32")] + [(f"ring:strategy={s}", f"qsgd:bits={b}") for s in STRATEGIES for b in TRAIN_BITS]
# 2 bits with error feedback: the setting the thesis' claim leans on below 4 bits (see the claim below)
variants += [("ring:strategy=shared_scale", "ef(qsgd:bits=2)")]
handle = connect(n_workers=2)
runs, curves = [], []
for exchange, codec in variants:
    bits = codec.removesuffix(")").split("=")[-1]
    label = "fp32" if codec == "fp32" else f"{bits} bits, {exchange.split('=')[1]}" + (", ef" if codec.startswith("ef(") else "")
    sink = MemorySink()  # keeps the epochs a run finished, also when it stops itself
    try:
        train_distributed(base.replace(exchange=exchange, codec=codec), sink=sink, handle=handle)
        outcome = "finished"
    except Diverged as err:  # the loss blew up: the run stops after the epoch that shows it
        outcome = "diverged"
        print(f"{label}: {err}")
    evals = sink.frame(EvalRecord).assign(variant=label)
    curves.append(evals)
    last = evals.iloc[-1]
    runs.append({"variant": label, "test_acc": last.test_acc if outcome == "finished" else float("nan"),
                 "wire_MB": last.wire_bytes / 1e6, "vs_fp32": 0.0, "train_s": last.train_s, "outcome": outcome})  # fmt: skip
handle.close()
table = pd.DataFrame(runs)
table["vs_fp32"] = table.wire_MB / table.wire_MB.iloc[0]
table.style.format({"test_acc": "{:.3f}", "wire_MB": "{:.1f}", "vs_fp32": "{:.3f}", "train_s": "{:.1f}"})

# %%
curves = pd.concat(curves, ignore_index=True)
(
    hv.NdOverlay({v: hv.Curve(part, "epoch", "test_acc") for v, part in curves.groupby("variant", sort=False)},
                 kdims="variant").opts(width=420, height=340, legend_position="bottom_right", title="test accuracy")
    + hv.Scatter(table, ("wire_MB", "MB on the wire (whole run)"), ["test_acc", "variant"]).opts(
        size=9, color="variant", cmap="Category10", tools=["hover"], logx=True, width=420, height=340,
        title="accuracy against traffic", show_legend=False)
    * hv.Labels(table, ["wire_MB", "test_acc"], "variant").opts(text_font_size="8pt", yoffset=0.002)
).opts(shared_axes=False)  # fmt: skip

# %% [markdown]
# With two workers the headroom is a single bit, and only the finished sums carry it: each worker
# sends its own $b$-bit codes in the reduce-scatter and forwards $(b+1)$-bit sums in the
# all-gather, so the shared scale sends about $b + \tfrac12$ bits per value, and in return adds no
# rounding of its own. Look for the knee: the smallest $b$ whose accuracy matches fp32 is the
# setting to use, and the traffic column says how much it saves. (With the full sizes the table
# also has the requantize strategy next to the shared scale, and 1 bit, which neither strategy
# survives without error feedback: under requantize every hop rounds again and the loss blows up,
# so the run stops itself after the epoch that shows it and the table says "diverged"; under the
# shared scale it trains, but far behind fp32.)
#
# "Matches" needs a yardstick. Every run here has one seed, so the only spread at hand is that of
# the test set itself: an accuracy $p$ measured on $n$ test digits has a standard error of
# $\sqrt{p(1-p)/n}$. Differences within two of those are noise; a codec that *beats* fp32 by
# less than that has not beaten it.

# %%
n_test = load_dataset("mnist5k").n_test
fp32_acc = table.test_acc.iloc[0]
noise = 2 * np.sqrt(fp32_acc * (1 - fp32_acc) / n_test)
table["diff_vs_fp32"] = table.test_acc - fp32_acc
table["verdict"] = np.where(table.outcome == "diverged", "diverged",
                            np.where(table.diff_vs_fp32.abs() <= noise, "same as fp32 (within noise)",
                                     np.where(table.diff_vs_fp32 > 0, "better", "worse")))  # fmt: skip
print(f"fp32 {fp32_acc:.3f} on {n_test} test digits: differences within +-{noise:.3f} are noise")
print(table[["variant", "test_acc", "diff_vs_fp32", "vs_fp32", "verdict"]].to_string(index=False))
same = table.iloc[1:][~table.verdict.iloc[1:].isin(["worse", "diverged"])]
if len(same):
    pick = same.loc[same.wire_MB.idxmin()]
    print(f"cheapest variant not worse than fp32: {pick.variant}, {pick.vs_fp32:.1%} of fp32's traffic"
          + (f"; after only {EPOCHS} epochs this says little: the codecs' noise shows late in training"
             if EPOCHS < 10 else ""))
else:
    print("every quantized variant is worse than fp32 by more than the noise")

# %% [markdown]
# ## Does the claim hold here?
#
# The thesis says Q-ADASS quantizes inside the ring "without affecting the accuracy of the final
# model". Put as numbers (the goals `adass reproduce` checks, with five seeds): 4 bits and more
# within 0.5 points of fp32, and 2 bits *with error feedback* within 1 point; 2 bits without it
# is only reported. The verdict below is computed by the same function the report uses, from this
# notebook's own runs.

# %%
from adass.experiments.reproduce.claim_quantize import tolerance_pts
from adass.experiments.reproduce.verdict import Check, checks_table, verdict

checks = []
for row in table.iloc[1:].itertuples(index=False):
    bits, ef = int(row.variant.split()[0]), row.variant.endswith(", ef")
    tolerance = tolerance_pts(bits, ef)
    if tolerance is not None:
        behind = -100 * row.diff_vs_fp32
        checks.append(Check(row.variant, f"within {tolerance:g} points of fp32", behind <= tolerance,
                            f"{behind:+.2f} points below fp32"))  # fmt: skip
print(checks_table(checks).to_string(index=False))
print(f"Q-ADASS keeps fp32's accuracy: {verdict(checks)} (one seed, {EPOCHS} epochs)")

# %% [markdown]
# Read the verdicts with the run length in mind. After three quick epochs the codec's rounding is
# small next to the distance still to go, so a 2-bit run ahead of fp32 by less than the noise has
# not beaten it: one seed on a thousand test digits cannot separate them. At the full sizes (ten
# epochs) the verdict column is the one to read, and more seeds would tighten the yardstick.
#
# ## Try this
#
# 1. Rerun the simulator sweep at 2 bits. Up to which $P$ is requantizing still better than
#    fp32 in bytes *and* acceptable in error? And the shared scale?
# 2. Change the bucket size (`qsgd:bits=4,bucket=64` or `bucket=4096`): smaller buckets cost more
#    scales on the wire but track the gradient's magnitude more closely. Which wins at 2 bits?
# 3. Error feedback ran above at 2 bits with the shared scale. Try it with `ring:strategy=requantize`
#    and at 1 bit: where does it stop closing the gap to fp32? Then force the memory to round
#    stochastically (`ef(qsgd:bits=2,rounding=stochastic)`) and watch the training loss: why does
#    a memory want the nearest level (README, "Quantization under a memory")?
