"""What a transport remembers of the framed payloads of repeating transfers (``repeat=`` of
``isend``/``irecv``): a transfer that recurs step after step keeps one layout, so from its second
time on its receive is posted with its buffer ready and head and body travel as one message.

Sender and receiver stay in step without a word: a rank joins head and body for a transfer it has
sent before, and its peer, which received that transfer before, posts a joined receive for it.
"""

from __future__ import annotations

from collections.abc import Hashable

import torch

from ...codecs.base import Payload
from . import framing

__all__ = ["LayoutMemory", "template"]


def template(payload: Payload) -> Payload:
    """A payload with ``payload``'s layout (names, dtypes, shapes) and no memory of its own."""
    tensors = {
        k: torch.empty([1] * t.dim(), dtype=t.dtype).expand(t.shape) for k, t in payload.tensors.items()
    }
    return Payload(tensors, payload.numel)


class LayoutMemory:
    """Layouts of the framed payloads one rank sent and received, by transfer key."""

    def __init__(self) -> None:
        self._sent: dict[Hashable, framing.Layout] = {}
        self._received: dict[Hashable, Payload] = {}

    def expected(self, key: Hashable) -> Payload | None:
        """The layout a receive of ``key`` will bring (a template), if it came before."""
        return self._received.get(key)

    def received(self, key: Hashable, payload: Payload) -> None:
        """Note the layout of a payload received for ``key``."""
        if key not in self._received:
            self._received[key] = template(payload)

    def joined(self, key: Hashable, payload: Payload) -> bool:
        """Whether to send ``payload`` for ``key`` as one message (the receiver expects it so).

        Raises
        ------
        RuntimeError
            The layout of ``key`` differs from an earlier time's: a repeating transfer must keep it.
        """
        layout = framing.layout_of(payload)
        before = self._sent.setdefault(key, layout)
        if before is layout:
            return False
        if before != layout:
            raise RuntimeError(f"transfer {key}: layout {layout} differs from an earlier step's {before}")
        return True
