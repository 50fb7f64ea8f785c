"""What a ring remembers of its framed payloads from step to step: a fixed-size codec gives the
payload of one (phase, hop, piece) the same layout every step, so from the second step on each
receive is posted with its buffer ready and head and body travel as one message.

Sender and receiver stay in step without a word: a rank joins head and body for a transfer it has
sent before (with the same length of gradient), and its right neighbour, which received that
transfer before, posts a joined receive for it.
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
    """Layouts of the framed payloads one rank sent and received, by transfer key.

    Parameters
    ----------
    enabled : bool
        Remember anything at all (only for fixed-size codecs, whose layouts repeat).
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._sent: dict[Hashable, framing.Layout] = {}
        self._received: dict[Hashable, Payload] = {}
        self._n = -1

    def start(self, n: int) -> None:
        """A new step over ``n`` values: forget everything if ``n`` changed (pieces change with it)."""
        if n != self._n:
            self._sent, self._received, self._n = {}, {}, n

    def expected(self, key: Hashable) -> Payload | None:
        """The layout a receive of ``key`` will bring (a template), if it came before."""
        return self._received.get(key)

    def received(self, key: Hashable, payload: Payload) -> None:
        """Note the layout of a payload received for ``key``."""
        if self.enabled and key not in self._received:
            self._received[key] = template(payload)

    def joined(self, key: Hashable, payload: Payload) -> bool:
        """Whether to send ``payload`` for ``key`` as one message (the receiver expects it so).

        Raises
        ------
        RuntimeError
            The codec changed the layout of ``key`` from an earlier step, though it is fixed-size.
        """
        if not self.enabled:
            return False
        layout = framing.layout_of(payload)
        before = self._sent.setdefault(key, layout)
        if before is layout:
            return False
        if before != layout:
            raise RuntimeError(f"transfer {key}: layout {layout} differs from an earlier step's {before}")
        return True
