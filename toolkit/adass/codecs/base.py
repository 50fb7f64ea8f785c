"""The Codec protocol: what a codec declares and does to a chunk; the little types it speaks in
(ChunkKey, Payload, seeded randomness) live in ``chunks.py``.

Codecs do math only; they never call a collective. Exchanges move payloads and look only at the
capabilities a codec declares.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from .chunks import ChunkKey, Payload, as_chunk, generator_for, seed_for, stable_seed
from .kernels import REFERENCE
from .kernels import choose as choose_kernels
from .traits import Traits

__all__ = [
    "ChunkKey", "Codec", "KeyedValues", "Payload", "Selector", "SentValues", "Traits", "as_chunk", "generator_for",
    "seed_for", "stable_seed",
]  # fmt: skip


class SentValues(Protocol):
    """What a codec's ``sparse`` declaration gives: the coordinates a payload sent, and the decoded
    values there."""

    def sent_coordinates(self, payload: Payload) -> torch.Tensor:
        """The coordinates (int64, of the dense chunk) whose values ``payload`` carries."""
        ...

    def decode_sent(self, payload: Payload) -> torch.Tensor | None:
        """The float32 values ``decode`` writes at ``sent_coordinates(payload)``, in that order,
        without the dense chunk, where the codec can give them so; None otherwise."""
        ...


class Selector(Protocol):
    """What an exchange asks of the part of a codec that keeps coordinates following from the chunk
    key (a :class:`~adass.codecs.sparse.Sparsifier`)."""

    def k_for(self, numel: int) -> int:
        """How many values a chunk of ``numel`` keeps."""
        ...

    def split(self, x: torch.Tensor, key: ChunkKey) -> tuple[torch.Tensor, Payload]:
        """The kept values ``(k,)`` and the payload without them (indices, header)."""
        ...

    def expand(self, values: torch.Tensor, rest: Payload, out: torch.Tensor | None = None) -> torch.Tensor:
        """The dense chunk ``values`` and ``rest`` stand for (written into ``out`` when given)."""
        ...

    def scatter(self, values: torch.Tensor, rest: Payload, out: torch.Tensor) -> None:
        """Write ``values`` (with any gain of the decode) at their coordinates of ``out`` (zeros)."""
        ...


@dataclass(frozen=True)
class KeyedValues:
    """A codec that keeps coordinates following from the chunk key alone, seen as its two parts.

    Every worker keeps the same coordinates of a chunk, so the kept value vectors of different
    workers line up and an exchange may reduce them as short dense vectors.

    Attributes
    ----------
    selector : Selector
        Picks the coordinates: ``split(x, key)`` gives the kept values and the rest of the payload,
        ``k_for(numel)`` their number, ``scatter(values, rest, out)`` writes them back (with any
        gain of the codec's decode) into ``out`` that holds zeros.
    values : Codec or None
        Encodes the ``(k,)`` vector of kept values; None: they travel as float32 as they are.
    """

    selector: Selector
    values: Codec | None = None


class Codec(ABC):
    """Encode a dense fp32 chunk into a Payload and back.

    What it declares, so an exchange and a memory never look at its class:

    traits : Traits
        The capabilities of its payloads (``traits.py``): summable, shared scale, fixed size,
        lossless, requantizable, contractive.
    sparse : SentValues or None
        For a codec that sends a few coordinates of a chunk (a sparsifier, or a stack behind one):
        what tells which ones a payload carries, ``sent_coordinates(payload)``, and the decoded
        values there alone, ``decode_sent(payload)`` (momentum correction masks and renews them).
        None (the default) where every coordinate travels.
    name : str
        The canonical spec string: ``make_codec(codec.name)`` builds an equal codec.

    The codec's own setting:

    kernels : {"reference", "fused"}
        The kernels its methods run (``adass.codecs.kernels``), fixed when it is built: the
        ``kernels`` argument, else the default of that moment. Both give the same bits; the choice
        is not part of ``name``, and variants (``with_shared_scale``) keep it.

    Notes
    -----
    One class serves both plain and shared-scale use: the mode is a spec flag (``shared=true`` for
    QSGD) that ``with_shared_scale()`` sets, so the canonical name records it.

    How an exchange drives a codec, per chunk (``r``: this rank, ``h``: the hop):

    - summable, no shared scale (fp32/fp16/bf16, ``randk``): ``p = codec.encode(x, key)``; at each
      hop ``p = codec.add(received, own)``; ``codec.decode(p)`` is the sum. Random-k coordinates
      depend on (seed, step, chunk) only, so every rank's payload of one chunk is aligned.
    - ``shared_scale``: ``codec = codec.with_shared_scale()``; ``s = codec.local_scale(x, key)``;
      all ranks take the elementwise max of ``s`` (a small float32 vector); then
      ``p = codec.encode(x, replace(key, rank=r), scale=agreed)`` and hops ``codec.add`` as above.
      Integer codes add exactly; the code width grows by up to ``ceil(log2 P)`` bits and
      ``nbytes`` reports the wider packing. The same holds for ``randk+qsgd`` (RS+Q), whose
      ``local_scale`` needs ``key`` because it scales the values at the shared coordinates.
    - ``requantize`` (any codec): decode the received partial sum, add the own chunk, and encode
      again with ``replace(key, rank=r, hop=h)`` so each re-encoding rounds independently.
    - not summable (``topk``): forward payloads unchanged (all-gather) and decode each.

    Methods say more about a codec's structure, so an exchange never looks at its class:
    ``keyed_values()`` (coordinates that follow from the chunk key, and the codec of the kept
    values), ``low_rank()`` (factors of whole layers, reduced in two rounds), ``set_epoch(epoch)``
    (a wire format that follows a schedule) and ``observe(averaged,
    key)`` with ``codec_state()`` (a codec that learns from the averaged result every worker holds
    after an all-reduce, and what a checkpoint keeps of it). A memory (``adass.memory``) asks only
    ``contractive`` and ``sparse``.
    """

    traits: Traits = Traits()
    sparse: SentValues | None = None
    name: str = "codec"
    kernels: str = REFERENCE  # where a subclass never calls Codec.__init__: it has no fused paths

    def __init__(self, kernels: str | None = None) -> None:
        self.kernels = choose_kernels(kernels)

    @abstractmethod
    def encode(self, x: torch.Tensor, key: ChunkKey, scale: torch.Tensor | None = None) -> Payload:
        """Encode ``x`` (1-D float32) for chunk ``key``; ``scale`` only where ``needs_shared_scale``."""

    @abstractmethod
    def decode(self, payload: Payload) -> torch.Tensor:
        """The dense float32 tensor of length ``payload.numel`` that ``payload`` stands for: a new
        tensor (never the payload's memory), which the caller may change in place."""

    def bytes_per_value(self) -> float:
        """About how many wire bytes a payload spends per dense value (headers left out); an
        exchange sizes its pipeline pieces by it."""
        return 4.0

    def encode_scaled(self, x: torch.Tensor, key: ChunkKey, weight: float) -> Payload:
        """``encode(x * weight)``; codecs that keep a few values of ``x`` scale only those."""
        return self.encode(x * weight, key)

    def decode_into(self, payload: Payload, out: torch.Tensor) -> None:
        """Write ``decode(payload)`` into ``out`` (a float32 tensor of ``payload.numel`` values);
        codecs whose decode is mostly zeros write their values straight into place."""
        out.copy_(self.decode(payload))

    def requantize(self, received: Payload, x: torch.Tensor, key: ChunkKey, weight: float = 1.0) -> Payload:
        """One hop of a ring's ``requantize``: ``encode(decode(received) + x * weight, key)``, the
        sum made as ``add_(x, alpha=weight)`` makes it. This is the reference; codecs with a faster
        route to the same bits (QSGD's fused kernel) override it."""
        total = self.decode(received)  # a new tensor (the decode contract)
        total.add_(as_chunk(x), alpha=weight)
        return self.encode(total, key)

    def add(self, a: Payload, b: Payload) -> Payload:
        """Sum of two payloads without decoding; only for ``summable`` codecs."""
        raise TypeError(f"codec {self.name!r} is not summable")

    def template(self, numel: int) -> Payload | None:
        """What every ``encode`` of a chunk of ``numel`` values gives, whatever the values and the
        key: the tensors' names, dtypes and shapes (as tensors without memory of their own), the
        header and its size. None (the default) where any of it varies, e.g. with the chunk key.

        An exchange that knows a transfer's chunk length moves only the tensors' bytes of such a
        payload and rebuilds the rest from this.
        """
        return None

    def keyed_template(self, numel: int, key: ChunkKey) -> Payload | None:
        """As :meth:`template`, for codecs whose layout and header follow from the chunk length and
        the chunk key (random-k names the key in its header): what every ``encode`` of a chunk of
        ``numel`` values with ``key`` gives. None (the default) where anything else varies."""
        return None

    def local_scale(self, x: torch.Tensor, key: ChunkKey | None = None) -> torch.Tensor:
        """This worker's scale for ``x``; only for ``needs_shared_scale`` codecs.

        ``key`` is needed by codecs that select coordinates first (``randk+qsgd``) and by error
        feedback (which scales the compensated chunk); plain QSGD ignores it. Passing it always
        is safe.
        """
        raise TypeError(f"codec {self.name!r} does not use a shared scale")

    def with_shared_scale(self) -> Codec:
        """The shared-scale variant of this codec (itself if it already needs a shared scale)."""
        if self.traits.needs_shared_scale:
            return self
        raise TypeError(f"codec {self.name!r} has no shared-scale mode")

    def keyed_values(self) -> KeyedValues | None:
        """Where this codec keeps coordinates that follow from the chunk key alone (the same on
        every worker): its selector and the codec of the kept values. None (the default) otherwise."""
        return None

    def low_rank(self) -> Any:
        """Where this codec sends low-rank factors of whole layers, reduced in two rounds per step
        that the exchange runs (``powersgd``): the object that does the math between the rounds
        (:class:`~adass.codecs.powersgd.PowerSGD`). None (the default) for per-chunk codecs."""
        return None

    def set_epoch(self, epoch: int) -> None:
        """Tell the codec which epoch the next encodings belong to (an exchange does, every rank
        alike); codecs whose wire format follows a schedule (the ratio warm-up of a sparsifier)
        change with it. Nothing by default."""
        return None

    def observe(self, averaged: torch.Tensor, key: ChunkKey) -> None:
        """Learn from chunk ``key``'s averaged result, which every worker holds alike after an
        all-reduce (an exchange calls it after each step, on every rank, with each piece of the
        result). Codecs that choose coordinates from shared knowledge (``sharedk``) keep state from
        it; nothing by default."""
        return None

    def codec_state(self) -> dict[str, Any]:
        """What a checkpoint keeps of this codec's own state (what :meth:`observe` learnt); empty
        (the default) for codecs without state."""
        return {}

    def load_codec_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`codec_state` gave; nothing by default."""
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Codec) and type(other) is type(self) and other.name == self.name

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name))

    def __repr__(self) -> str:
        return self.name
