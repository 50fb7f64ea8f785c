"""Codec payloads as bare bytes: for a codec whose payloads of a chunk length always have one layout
and header (``Codec.template``), a transfer whose chunk both sides know needs only the tensors'
bytes, in one contiguous buffer that travels like the dense fp32 ring's values (no frame, no header).

Buffer layout: the partial count first where counts travel (a float64, 8 bytes), then the tensors
in order of falling element size (so each starts aligned to its own size, without padding), each
tensor's bytes as they are. The codec header and ``numel`` come from the template.
"""

from __future__ import annotations

import torch

from ...codecs.base import Payload
from ..counts import COUNT_BYTES, read_tail, write_tail

__all__ = ["BareLayout"]


class BareLayout:
    """Where each tensor of ``template``'s payloads lies in a bare buffer.

    Parameters
    ----------
    template : Payload
        The codec's template for the chunk length (``Codec.template``).
    counted : bool
        A partial sample count travels in front of the tensors.
    """

    def __init__(self, template: Payload, counted: bool) -> None:
        self.template = template
        self.counted = counted
        order = sorted(template.tensors.items(), key=lambda kv: -kv[1].element_size())  # stable
        at = COUNT_BYTES if counted else 0
        self.spans: list[tuple[str, torch.dtype, torch.Size, int, int]] = []
        for name, t in order:
            nbytes = t.numel() * t.element_size()
            self.spans.append((name, t.dtype, t.shape, at, nbytes))
            at += nbytes
        self.nbytes = at

    def empty(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """A new buffer to receive into."""
        return torch.empty(self.nbytes, dtype=torch.uint8, device=device)

    def pack(self, payload: Payload, count: float | None) -> Payload:
        """``payload`` (and ``count`` where counted) as one new buffer, the ``values`` of a bare payload.

        Raises
        ------
        RuntimeError
            ``payload`` does not have the template's layout or header: the codec broke its promise.
        """
        t = self.template
        if payload.numel != t.numel or payload.header != t.header or len(payload.tensors) != len(t.tensors):
            raise RuntimeError(f"payload of {payload.numel} values, header {payload.header}, does not "
                               f"match its codec's template ({t.numel} values, header {t.header})")  # fmt: skip
        device = next(iter(payload.tensors.values())).device if payload.tensors else "cpu"
        buf = self.empty(device)
        if self.counted:
            write_tail(buf[:COUNT_BYTES], count)
        for name, dtype, shape, at, nbytes in self.spans:
            src = payload.tensors[name]
            if src.dtype != dtype or src.shape != shape:
                raise RuntimeError(f"payload tensor {name!r} is {src.dtype} {tuple(src.shape)}; its "
                                   f"codec's template says {dtype} {tuple(shape)}")  # fmt: skip
            if nbytes:
                buf[at : at + nbytes] = src.reshape(-1).view(torch.uint8)
        return Payload({"values": buf}, t.numel)

    def unpack(self, bare: Payload) -> tuple[Payload, float | None]:
        """The codec payload (its tensors are views of the buffer) and the count of a bare payload."""
        buf = bare.tensors["values"]
        count = read_tail(buf[:COUNT_BYTES]) if self.counted else None
        tensors = {}
        for name, dtype, shape, at, nbytes in self.spans:
            tensors[name] = buf[at : at + nbytes].view(dtype).reshape(shape)
        t = self.template
        return Payload(tensors, t.numel, dict(t.header), t.header_bytes), count
