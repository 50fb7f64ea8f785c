"""The ring chooses its reducer from what a codec declares, never from the codec's class."""

from __future__ import annotations

import pytest
import torch

from adass.codecs import RandomK, make_codec
from adass.exchange import InProcHub, make_exchange
from adass.exchange.ring import choose


@pytest.mark.parametrize(
    ("codec", "strategy", "reducer"),
    [
        ("fp32", "requantize", "dense"),
        ("ef(fp32)", "requantize", "dense"),
        ("fp16", "shared_scale", "direct"),
        ("randk:ratio=0.1", "requantize", "sparse"),
        ("randk:ratio=0.1", "shared_scale", "sparse"),
        ("ef(randk:ratio=0.1,scale=false)", "requantize", "direct"),
        ("mc(fp32)", "requantize", "direct"),
        ("mc(randk:ratio=0.1,scale=false)", "requantize", "direct"),
        ("randk:ratio=0.1+fp16", "requantize", "direct"),
        ("qsgd:bits=4", "requantize", "requantize"),
        ("ef(qsgd:bits=4)", "requantize", "requantize"),
        ("randk:ratio=0.1+qsgd:bits=4", "requantize", "requantize"),
        ("qsgd:bits=4", "shared_scale", "shared_scale"),
        ("randk:ratio=0.1+qsgd:bits=4", "shared_scale", "shared_scale"),
        ("topk:ratio=0.1", "requantize", "allgather"),
        ("topk:ratio=0.1+qsgd:bits=4", "requantize", "allgather"),
        ("qsgd:bits=4", "allgather", "allgather"),
    ],
)
def test_the_ring_reduces_each_codec_by_its_capabilities(codec: str, strategy: str, reducer: str) -> None:
    hub = InProcHub(2)
    ring = make_exchange(f"ring:strategy={strategy}", hub.transport(0), codec)
    assert ring.reducer.name == reducer


class _OwnRandomK(RandomK):
    """A codec of its own that keeps random-k's coordinates: the ring need not know its class."""


def test_a_new_codec_with_keyed_float_values_is_reduced_as_sparse_values() -> None:
    assert choose(_OwnRandomK(0.1), "requantize").name == "sparse"
    assert choose(make_codec("randk:ratio=0.1+qsgd:bits=8"), "requantize").name == "requantize"


@pytest.mark.parametrize(
    "codec", ["qsgd:bits=4", "randk:ratio=0.1+qsgd:bits=4", "dmc(randk:ratio=0.1,scale=false)"]
)
def test_replicas_on_threads_keep_the_kernels_their_codecs_were_built_with(codec: str) -> None:
    from adass.codecs import kernels
    from adass.runtime import on_threads

    if not kernels.available():
        pytest.skip("numba does not import")
    gen = torch.Generator().manual_seed(4)
    grads = [torch.randn(3000, generator=gen) for _ in range(3)]

    def run(choice: list[str]) -> list[torch.Tensor]:
        hub = InProcHub(3)
        rings = [make_exchange("ring", hub.transport(r), codec, kernels=choice[r], seed=1) for r in range(3)]
        assert [ring.codec.kernels for ring in rings] == choice
        return on_threads(3, lambda r: rings[r].reduce(grads[r], count=float(r + 1)))

    reference = run(["reference"] * 3)
    for mixed in (["fused"] * 3, ["fused", "reference", "fused"]):
        assert all(torch.equal(a, b) for a, b in zip(reference, run(mixed), strict=True))
