"""Fixtures for the codec tests."""

from __future__ import annotations

import pytest

from adass.codecs import ChunkKey


@pytest.fixture
def key() -> ChunkKey:
    return ChunkKey(seed=7, step=3, chunk=1)
