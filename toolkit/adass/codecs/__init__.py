"""Gradient codecs: dense floats, QSGD, random-k, top-k, shared-k, PowerSGD's low-rank factors, and
stacks of them (a memory such as error feedback lives beside a codec, in ``adass.memory``).

Build one from a spec with ``make_codec("randk:ratio=0.01+qsgd:bits=8")``; the protocol lives in
``base.py``. Codecs do math only and never call a collective.
"""

from . import fp, powersgd, qsgd, randk, shared, topk  # noqa: F401  (each module registers its codecs)
from .base import ChunkKey, Codec, Payload, as_chunk, generator_for, stable_seed
from .fp import FloatCodec
from .packing import bits_for, pack_bits, packed_nbytes, unpack_bits
from .powersgd import PowerSGD
from .qsgd import QSGD
from .randk import RandomK
from .shared import SharedK
from .sparse import Sparsifier, kept_count
from .spec import CODECS, make_codec
from .stack import StackCodec
from .topk import TopK
from .warmup import warmup_ratio

__all__ = [
    "CODECS",
    "QSGD",
    "ChunkKey",
    "Codec",
    "FloatCodec",
    "Payload",
    "PowerSGD",
    "RandomK",
    "SharedK",
    "Sparsifier",
    "StackCodec",
    "TopK",
    "as_chunk",
    "bits_for",
    "generator_for",
    "kept_count",
    "make_codec",
    "pack_bits",
    "packed_nbytes",
    "stable_seed",
    "unpack_bits",
    "warmup_ratio",
]
