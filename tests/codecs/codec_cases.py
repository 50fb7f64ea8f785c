"""Shared cases for the codec tests: the specs every codec test runs over, and seeded chunks."""

from __future__ import annotations

import torch

ALL_SPECS = [
    "fp32",
    "fp16",
    "bf16",
    "qsgd",
    "qsgd:bits=1",
    "qsgd:bits=3,bucket=7",
    "qsgd:bits=16,norm=l2",
    "qsgd:bits=4,shared=true",
    "randk:ratio=0.1",
    "randk:ratio=0.1,scale=false",
    "randk:ratio=0.3,scale=false,block=16",
    "topk:ratio=0.1",
    "sharedk:ratio=0.1",
    "randk:ratio=0.2+qsgd:bits=8",
    "randk:ratio=0.2+qsgd:bits=4,shared=true",
    "topk:ratio=0.2+qsgd:bits=8",
    # what a memory encodes with (its codec built for_memory: QSGD rounds to the nearest level)
    "qsgd:bits=2,rounding=nearest",
    "sharedk:ratio=0.1,warmup=2+qsgd:bits=8,rounding=nearest",
    "randk:ratio=0.1,scale=false+qsgd:bits=4,rounding=nearest",
    "randk:ratio=0.2,scale=false,block=8+fp16",
]


def chunk(n: int, seed: int = 0) -> torch.Tensor:
    """A reproducible float32 chunk of ``n`` values with a spread of magnitudes."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=gen) * torch.rand(n, generator=gen).mul(3).exp()


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """The bytes of ``t``: equal bytes, equal payload (signed zeros and NaN bits included)."""
    return t.contiguous().view(torch.uint8)


def reference_and_fused(fn):
    """``fn("reference")``, then ``fn("fused")``: ``fn`` runs what was built with those kernels
    (two codec instances, never one switched between them)."""
    return fn("reference"), fn("fused")
