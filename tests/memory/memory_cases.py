"""Shared cases for the memory tests: a codec and its memory driven together, as an exchange drives
them around a worker's own share, and seeded chunks."""

from __future__ import annotations

import torch

from adass.memory import Paired  # noqa: F401  (the tests drive codec and memory as one)


def chunk(n: int, seed: int = 0) -> torch.Tensor:
    """A reproducible float32 chunk of ``n`` values with a spread of magnitudes."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=gen) * torch.rand(n, generator=gen).mul(3).exp()
