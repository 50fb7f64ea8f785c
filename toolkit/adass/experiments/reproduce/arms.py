"""The arms behind each claim of ``adass reproduce``, as plain data: edit these lists to change what runs.

Codec templates take ``{bits}`` or ``{ratio}``. An arm whose codec or exchange this build does not
accept (an edited list, a codec of a later version) is listed in the report as not run.
"""

from __future__ import annotations

__all__ = [
    "DML_EXCHANGES", "DML_LINKS", "DML_SAMPLERS", "FP32", "LINKS", "Q_BITS", "Q_CODECS", "Q_STRATEGIES",
    "RS_ARMS", "RS_ARMS_NOW", "RS_RATIOS", "SAMPLERS",
]  # fmt: skip

# ---- claim 1: ADASS-DML --------------------------------------------------------------------------
#: samplers beside ``full``; ``compare_runs`` adds ``full`` and every ADASS arm's two matched controls
SAMPLERS: list[str] = ["infobatch", "selective_backprop", "adass"]
#: label -> exchange spec of the distributed runs
DML_EXCHANGES: dict[str, str] = {"PS": "ps:servers=1", "ring": "ring"}
#: samplers of the distributed runs: ADASS-DML against full data on the same exchange
DML_SAMPLERS: list[str] = ["full", "adass"]
#: keys of ``adass.experiments.bench.dml.LINKS`` the real-process runs use ("none": loopback as it is)
DML_LINKS: list[str] = ["none", "1gbit"]

# ---- simulated links (claims 1 and 2) ------------------------------------------------------------
LINKS: dict[str, str] = {"1gbit": "1gbit,50us", "10gbit": "10gbit,5us"}

# ---- the reference of claims 2 and 3 -------------------------------------------------------------
#: (exchange, codec) every grid arm is compared with: the same ring, uncompressed
FP32: tuple[str, str] = ("ring", "fp32")

# ---- claim 2: Q-ADASS ----------------------------------------------------------------------------
Q_BITS: list[int] = [2, 4, 8]
Q_STRATEGIES: list[str] = ["requantize", "shared_scale"]
#: error feedback off / on
Q_CODECS: dict[str, str] = {"no ef": "qsgd:bits={bits}", "ef": "ef(qsgd:bits={bits})"}

# ---- claim 3: RS-ADASS ---------------------------------------------------------------------------
RS_RATIOS: list[float] = [0.1, 0.01, 0.001]
#: (label, exchange, codec template): each technique off and on, and stacked with 8-bit QSGD:
#: error feedback (ef), DGC momentum correction (mc), its delay-aware variant (dmc), a one-epoch
#: ratio warm-up (warmup=1, DGC's warm-up shortened to the runs' few epochs), and the coordinates
#: chosen from the averaged gradients every replica holds (sharedk) instead of the seed alone: without
#: a warm-up, never-sent coordinates go first (unseen=first); its 8-bit stack affords a three-epoch
#: warm-up within the wire budget
RS_ARMS: list[tuple[str, str, str]] = [
    ("randk", "ring", "randk:ratio={ratio},scale=false"),
    ("ef", "ring", "ef(randk:ratio={ratio},scale=false)"),
    ("mc", "ring", "mc(randk:ratio={ratio},scale=false)"),
    ("dmc", "ring", "dmc(randk:ratio={ratio},scale=false)"),
    ("ef+warmup", "ring", "ef(randk:ratio={ratio},scale=false,warmup=1)"),
    ("dmc+warmup", "ring", "dmc(randk:ratio={ratio},scale=false,warmup=1)"),
    ("ef+q8", "ring:strategy=shared_scale", "ef(randk:ratio={ratio},scale=false+qsgd:bits=8)"),
    (
        "dmc+warmup+q8",
        "ring:strategy=shared_scale",
        "dmc(randk:ratio={ratio},scale=false,warmup=1+qsgd:bits=8)",
    ),
    ("dmc sharedk", "ring", "dmc(sharedk:ratio={ratio},unseen=first)"),
    ("dmc sharedk+warmup", "ring", "dmc(sharedk:ratio={ratio},warmup=1)"),
    (
        "dmc sharedk+warmup3+q8",
        "ring:strategy=shared_scale",
        "dmc(sharedk:ratio={ratio},warmup=3+qsgd:bits=8)",
    ),
]
#: the arms of claim 3 whose codecs exist in every build (the test plan's)
RS_ARMS_NOW: list[tuple[str, str, str]] = [
    ("randk", "ring", "randk:ratio={ratio},scale=false"),
    ("ef", "ring", "ef(randk:ratio={ratio},scale=false)"),
    ("ef+q8", "ring:strategy=shared_scale", "ef(randk:ratio={ratio},scale=false+qsgd:bits=8)"),
    ("dmc sharedk", "ring", "dmc(sharedk:ratio={ratio},unseen=first)"),
]
