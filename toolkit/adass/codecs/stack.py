"""Stacked codecs: a sparsifier keeps ``k`` values and an inner codec encodes that value vector.

``randk:ratio=0.01+qsgd:bits=8`` is RS+Q: the shared random coordinates keep payloads aligned, and
the k values are quantized. The stack is summable when both parts are, i.e. ``randk`` with a
shared-scale QSGD (``with_shared_scale()``); then the ring reduces the aligned quantized vectors.

Wire layout: the sparsifier's own tensors and header (indices for top-k, the chunk key for
random-k), plus the inner payload's tensors under ``inner.<name>`` and its header under
``header["inner"]``; ``header_bytes`` is the sum of both headers.
"""

from __future__ import annotations

from typing import Any

import torch

from ..registry import SpecError
from .base import ChunkKey, Codec, KeyedValues, Payload, as_chunk
from .sparse import Sparsifier
from .traits import Traits

__all__ = ["StackCodec"]

_PREFIX = "inner."


class StackCodec(Codec):
    """Sparsify with ``outer``, then encode the kept values with ``inner``.

    Parameters
    ----------
    outer : Sparsifier
        Chooses the kept values (``randk`` or ``topk``).
    inner : Codec
        Encodes the ``(k,)`` value vector (for example ``qsgd``).
    """

    def __init__(self, outer: Codec, inner: Codec) -> None:
        if not isinstance(outer, Sparsifier):
            raise SpecError(
                f"codec {outer.name + '+' + inner.name!r}: only a sparsifier (randk|topk) "
                f"can stand before '+'; got {outer.name!r}"
            )
        super().__init__(outer.kernels)  # both parts run their own kernels; make_codec builds them alike
        self.outer, self.inner = outer, inner
        self.name = f"{outer.name}+{inner.name}"
        a, b = outer.traits, inner.traits
        self.traits = Traits(
            summable=a.summable and b.summable,
            needs_shared_scale=b.needs_shared_scale,
            can_share_scale=a.summable and b.can_share_scale,
            fixed_size=a.fixed_size and b.fixed_size,
            requantizable=outer.keyed_values() is not None and b.requantizable,
            contractive=a.contractive and b.contractive,
        )

    def bytes_per_value(self) -> float:
        return self.outer.current_ratio * self.inner.bytes_per_value()

    def set_epoch(self, epoch: int) -> None:
        """The sparsifier's warm-up follows the epoch."""
        self.outer.set_epoch(epoch)

    def observe(self, averaged: torch.Tensor, key: ChunkKey) -> None:
        """The sparsifier learns (it chooses the coordinates)."""
        self.outer.observe(averaged, key)

    def codec_state(self) -> dict[str, Any]:
        """The sparsifier's."""
        return self.outer.codec_state()

    def load_codec_state(self, state: dict[str, Any]) -> None:
        """The sparsifier's."""
        self.outer.load_codec_state(state)

    @property
    def sparse(self) -> StackCodec:  # type: ignore[override]
        """Itself: the sparsifier's coordinates, with the inner codec's values."""
        return self

    def sent_coordinates(self, payload: Payload) -> torch.Tensor:
        """The sparsifier's kept coordinates."""
        rest, inner = self._parts(payload)
        return self.outer.kept_indices(rest, inner.numel)

    def decode_sent(self, payload: Payload) -> torch.Tensor | None:
        """The inner codec's decoded values, where the sparsifier writes its values unchanged."""
        if not self.outer.values_as_sent:
            return None
        return self.inner.decode(self._parts(payload)[1]).to(torch.float32)

    def keyed_values(self) -> KeyedValues | None:
        """The sparsifier's coordinates, where they follow from the chunk key, and the inner codec."""
        return None if self.outer.keyed_values() is None else KeyedValues(self.outer, self.inner)  # type: ignore[arg-type]

    def keyed_template(self, numel: int, key: ChunkKey) -> Payload | None:
        """Where the sparsifier's header follows from the chunk key (random-k) and the inner codec
        has one layout for ``k`` values (fp16, bf16): the sparsifier's header and the inner
        template's tensors."""
        outer = self.outer.keyed_template(numel, key)
        inner = None if outer is None else self.inner.template(self.outer.k_for(numel))
        if outer is None or inner is None:
            return None
        return self._join(Payload({}, numel, dict(outer.header), outer.header_bytes), inner)

    def with_shared_scale(self) -> StackCodec:
        """The stack with the inner codec in shared-scale mode (summable with random-k)."""
        if self.traits.needs_shared_scale:
            return self
        if not self.traits.can_share_scale:
            raise TypeError(f"codec {self.name!r} has no shared-scale mode")
        return StackCodec(self.outer, self.inner.with_shared_scale())

    def local_scale(self, x: torch.Tensor, key: ChunkKey | None = None) -> torch.Tensor:
        """The inner codec's scale of the kept values; needs ``key`` (it picks the coordinates)."""
        if key is None:
            raise TypeError(f"codec {self.name!r}: local_scale needs the chunk key")
        values, _ = self.outer.split(as_chunk(x), key)
        return self.inner.local_scale(values, key)

    def encode(self, x: torch.Tensor, key: ChunkKey, scale: torch.Tensor | None = None) -> Payload:
        """Keep values with ``outer``, encode them with ``inner`` (``scale`` goes to ``inner``)."""
        values, rest = self.outer.split(as_chunk(x), key)
        return self._join(rest, self.inner.encode(values, key, scale=scale))

    def _join(self, rest: Payload, inner: Payload) -> Payload:
        tensors = {**rest.tensors, **{_PREFIX + k: t for k, t in inner.tensors.items()}}
        header = {**rest.header, "inner": inner.header, "inner_header_bytes": inner.header_bytes}
        return Payload(tensors, rest.numel, header, rest.header_bytes + inner.header_bytes)

    def _parts(self, payload: Payload) -> tuple[Payload, Payload]:
        """Split a stacked payload into the sparsifier's rest and the inner payload."""
        h = dict(payload.header)
        inner_header, inner_bytes = h.pop("inner"), h.pop("inner_header_bytes")
        inner_tensors = {k[len(_PREFIX) :]: t for k, t in payload.tensors.items() if k.startswith(_PREFIX)}
        rest_tensors = {k: t for k, t in payload.tensors.items() if not k.startswith(_PREFIX)}
        k = self.outer.k_for(payload.numel)
        rest = Payload(rest_tensors, payload.numel, h, payload.header_bytes - inner_bytes)
        return rest, Payload(inner_tensors, k, inner_header, inner_bytes)

    def decode(self, payload: Payload) -> torch.Tensor:
        """Decode the inner values, then scatter them with the sparsifier."""
        rest, inner = self._parts(payload)
        return self.outer.expand(self.inner.decode(inner), rest)

    def decode_into(self, payload: Payload, out: torch.Tensor) -> None:
        """Decode the inner values and scatter them straight into ``out``."""
        rest, inner = self._parts(payload)
        self.outer.expand(self.inner.decode(inner), rest, out=out)

    def add(self, a: Payload, b: Payload) -> Payload:
        """Sum of two aligned payloads: the inner payloads add (shared-scale QSGD codes add)."""
        if not self.traits.summable:
            raise TypeError(f"codec {self.name!r} is not summable")
        rest_a, inner_a = self._parts(a)
        rest_b, inner_b = self._parts(b)
        if not self.outer.aligned(rest_a, rest_b):
            raise ValueError(f"{self.name}: payloads of different chunk keys keep different coordinates")
        return self._join(rest_a, self.inner.add(inner_a, inner_b))
