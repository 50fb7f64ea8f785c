"""Two-bit QSGD with error feedback trains under the ring's ``requantize``: every rank keeps what its
own encoding lost, partial sum included, and the memory rounds to the nearest level. Before, the
memory saw only a worker's own encoding; the hops' errors went uncompensated and the loss diverged."""

from __future__ import annotations

import math

import pytest

from adass.config import RunConfig
from adass.runtime import train

DATA = "synthetic:n=800,d=16,classes=4,noise=0.0,hard=0.3,test=300"


def _loss(exchange: str, codec: str, seed: int) -> float:
    config = RunConfig.from_flat(data=DATA, model="mlp:hidden=32", sampler="full", epochs=3, batch_size=32,
                                 lr=0.1, workers=4, exchange=exchange, codec=codec, seed=seed)  # fmt: skip
    return train(config, replicas=4).final.test_loss


@pytest.mark.parametrize("strategy", ["requantize", "shared_scale"])
def test_two_bit_error_feedback_keeps_the_test_loss_of_fp32(strategy: str) -> None:
    """Measured test losses, seeds 0 and 1: fp32 0.549 and 0.434; requantize 0.560 and 0.432 (the
    old memory: 2391 at seed 0); shared_scale 0.540 and 0.426; 2 bits without feedback 0.909, 0.458."""
    for seed in (0, 1):
        fp32 = _loss("ring", "fp32", seed)
        ours = _loss(f"ring:strategy={strategy}", "ef(qsgd:bits=2)", seed)
        assert math.isfinite(ours) and ours < 1.3 * fp32 + 0.05, (seed, ours, fp32)
