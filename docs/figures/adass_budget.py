"""Draw docs/plots/adass_budget.png: the ADASS budget on the bundled digits.

Run from the checkout: ``python docs/figures/adass_budget.py``. It trains the demo MLP on
``mnist5k`` with ``adass:eps=0.2,warmup=2,resample=0,min_keep=0.1`` (the budget dropped whole) for five epochs (two of warm-up on full data; epoch 2 is the first
selecting one) and plots the bounds that epoch's selection saw, smallest first, against the share
of the total bound sum they hold.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from adass.config import RunConfig  # noqa: E402
from adass.metrics import SelectionRecord  # noqa: E402
from adass.runtime import train  # noqa: E402

EPS = 0.2
OUT = Path(__file__).resolve().parents[1] / "plots" / "adass_budget.png"


def main() -> None:
    config = RunConfig.from_flat(data="mnist5k", model="mlp:hidden=128", sampler=f"adass:eps={EPS},warmup=2,resample=0,min_keep=0.1", epochs=5)
    selection = train(config).sink.frame(SelectionRecord)
    epoch = selection[selection["epoch"] == 2]
    bounds = np.sort(epoch["bound"].to_numpy(dtype=float))
    share = np.cumsum(bounds) / bounds.sum()
    samples = np.arange(1, len(bounds) + 1) / len(bounds)
    dropped = float((~epoch["kept"].astype(bool)).mean())

    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=110)
    ax.plot(samples, share, color="#1f77b4", label="share of the bound sum")
    ax.axhline(EPS, color="#d62728", linestyle="--", label=f"budget eps = {EPS}")
    ax.axvline(dropped, color="gray", linestyle=":", label=f"{dropped:.0%} of the samples dropped")
    ax.set_xlabel("share of samples, smallest bound first")
    ax.set_ylabel("share of the total bound sum")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", frameon=False)
    ax.set_title("ADASS on mnist5k, epoch 2: what the budget drops")
    fig.tight_layout()
    fig.savefig(OUT)
    print(f"{OUT}: {dropped:.1%} dropped at eps={EPS}")


if __name__ == "__main__":
    main()
