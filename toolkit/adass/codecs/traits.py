"""What a codec declares about its payloads (:class:`Traits`), so that an exchange and a memory pick
their arithmetic from the declaration and never from the codec's class.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Traits"]


@dataclass(frozen=True)
class Traits:
    """The capabilities of a codec's payloads.

    Attributes
    ----------
    summable : bool
        ``add(a, b)`` combines two payloads without decoding (fp32/fp16/bf16, aligned random-k,
        shared-scale quantization). ``decode(add(a, b))`` stands for ``decode(a) + decode(b)``.
    needs_shared_scale : bool
        Workers must agree on a scale per chunk first: ``local_scale(x, key)`` gives a worker's own
        scale tensor, the exchange takes the elementwise max across workers and passes it as
        ``encode(x, key, scale=...)``; then integer codes add up exactly.
    can_share_scale : bool
        ``with_shared_scale()`` returns a variant of the codec with ``needs_shared_scale`` and
        ``summable`` set (QSGD, and stacks over it). The ring's ``shared_scale`` strategy asks for
        it; ``requantize`` uses the codec as given.
    fixed_size : bool
        Every payload of a chunk of a given length has the same size (aligned summing possible).
    lossless : bool
        ``decode(encode(x)) == x`` bit for bit.
    requantizable : bool
        A partial sum may be decoded, added to and encoded again at each hop of a ring (QSGD, and
        random-k stacks over it, whose kept values line up). Codecs whose payloads of different
        workers keep different coordinates (top-k) are not.
    contractive : bool
        False where decoding is known to amplify what it keeps (random-k with its ``n/k`` gain), so
        that ``||decode(encode(x)) - x||`` may exceed ``||x||`` and an error-feedback residual grows
        without bound; a memory refuses such a codec.
    """

    summable: bool = False
    needs_shared_scale: bool = False
    can_share_scale: bool = False
    fixed_size: bool = True
    lossless: bool = False
    requantizable: bool = False
    contractive: bool = True
