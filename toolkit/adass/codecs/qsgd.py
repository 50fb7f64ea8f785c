"""QSGD: stochastic uniform b-bit quantization with one scale per bucket, unbiased.

Grid. Each bucket of ``bucket`` values is divided by its scale ``M`` (max-abs by default) and mapped
onto ``L + 1`` evenly spaced levels on ``[-M, M]``: level ``u`` in ``0..L`` stands for
``M * (2u - L) / L``. For ``bits >= 2``, ``L = 2**bits - 2`` (even, so zero is a level and there are
``s = L/2 = 2**(bits-1) - 1`` levels on each side, as in QSGD); for ``bits = 1``, ``L = 1`` (the two
levels are ``-M`` and ``+M``: stochastic sign). A value is rounded to one of its two neighbouring
levels with probabilities that make the result unbiased, so its variance is at most
``min(D**2/4, D*|x|)`` with level spacing ``D = 2M/L``.

Scale. ``norm=max`` (default) uses max-abs: every level is reachable, so the variance bound
``d*M**2/L**2`` per bucket is the tightest of the two. ``norm=l2`` uses the bucket's Euclidean norm
as in the QSGD paper, which gives the paper's bound ``min(d/s**2, sqrt(d)/s) * ||x||**2``.

Wire layout. ``codes``: the unsigned levels ``u`` (sign included: ``u < L/2`` is negative), packed
``bits`` wide, least significant bit first (see ``packing.py``), ``ceil(numel*bits/8)`` bytes;
``scales``: float32, one per bucket. Header (7 bytes): numel (uint32), code width (uint8), number of
payloads summed (uint16).

Shared scale (``shared=true``). Workers agree on the elementwise max of their ``local_scale``; with a
common ``M`` the sum of ``P`` payloads is ``M * (2U - P*L) / L`` with ``U`` the integer sum of their
codes, so ``add`` sums codes exactly and repacks them ``bits_for(P*L)`` wide
(at most ``bits + ceil(log2 P)``).

Speed. Encoding and decoding work on bucket views of the chunk (no padded copies), keep codes in the
narrowest integer type (uint8 up to 8 bits) and compute in float32 wherever that is exact enough
(``_math_dtype``), falling back to float64 otherwise. On the CPU, 2-, 4- and 8-bit payloads are
encoded and decoded by the fused kernels of ``kernels`` when they are selected (one pass per
bucket, byte-identical to the torch code here, which stays the reference).
"""

from __future__ import annotations

import numpy as np
import torch

from ..registry import Param
from .base import ChunkKey, Codec, Payload, as_chunk, seed_for
from .kernels import FUSED
from .packing import bits_for, code_dtype, pack_bits, packed_nbytes, unpack_bits
from .spec import CODECS, canonical
from .traits import Traits

__all__ = ["QSGD", "HEADER_BYTES"]

HEADER_BYTES = 4 + 1 + 2  # numel uint32, code width uint8, summed count uint16

PARAMS = {
    "bits": Param(8, "bits per code (sign included)", low=1, high=16),
    "bucket": Param(512, "values sharing one scale", low=1, high=2**31 - 1),
    "norm": Param("max", "bucket scale: max-abs or Euclidean norm", choices=("max", "l2")),
    "shared": Param(False, "workers agree one scale per bucket so codes add up (ring shared_scale)"),
    "rounding": Param(
        "auto",
        "stochastic (unbiased), nearest (contractive), or auto: nearest inside an error-feedback "
        "memory (ef, mc, dmc), stochastic elsewhere",
        choices=("auto", "stochastic", "nearest"),
    ),
}


_LANE = 2.0**-16  # resolution of the rounding draws: 16 random bits per value


def random_words(count: int, seed: int, device: torch.device) -> torch.Tensor:
    """``count`` int64 words with all 64 bits uniform, a function of ``seed`` and the device type.

    On the CPU they come from numpy's SFC64, which measured 2.5x faster here than the Mersenne
    Twister behind ``torch.Generator`` (0.47 ms against 1.16 ms for 256Ki words); on other devices
    from a torch generator there.
    """
    if device.type == "cpu" and count > 0:  # (numpy's empty array would come with stride 0)
        return torch.from_numpy(np.random.SFC64(seed).random_raw(count).view(np.int64))
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return torch.empty(count, dtype=torch.int64, device=device).random_(-(2**63), None, generator=gen)


def uniform_offsets(
    n: int, offset: float, dtype: torch.dtype, seed: int, device: torch.device
) -> torch.Tensor:
    """``n`` draws ``offset + u`` with ``u`` uniform on the midpoints ``(j + 1/2) / 2**16`` of
    ``[0, 1)``, as ``dtype``, from ``seed``.

    The draws are 16-bit lanes of full-range 64-bit words (``random_words``): four values per
    word instead of one, which makes them several times cheaper than ``torch.rand``. Rounding
    ``floor(v + u)`` with them goes up with a chance within ``2**-17`` of ``frac(v)``, plus half an
    ulp of ``v`` for the rounding of the sum ``v + u`` (``2**-17`` for levels below 256 in float32;
    QSGD computes wider codes in float64).
    """
    words = random_words(-(-n // 4), seed, torch.device(device))
    lanes = words.view(torch.int16)[:n]  # uniform on [-2**15, 2**15)
    out = torch.empty(n, dtype=dtype, device=device)
    out.copy_(lanes)
    return out.mul_(_LANE).add_(offset + 0.5 + _LANE / 2)


class QSGD(Codec):
    """Stochastic uniform quantization with one scale per bucket.

    Parameters
    ----------
    bits : int
        Bits per code, 1..16 (the sign is part of the code).
    bucket : int
        Number of consecutive values sharing one scale.
    norm : {"max", "l2"}
        Scale of a bucket: max-abs or Euclidean norm.
    shared : bool
        Shared-scale mode: ``encode`` takes an agreed ``scale`` and payloads are summable.
    rounding : {"auto", "stochastic", "nearest"}
        How values round to levels (``auto``: stochastic, nearest under a memory).
    kernels : {"reference", "fused"}, optional
        The kernels its methods run, fixed now (``Codec.kernels``); None: the default.
    """

    def __init__(
        self,
        bits: int = 8,
        bucket: int = 512,
        norm: str = "max",
        shared: bool = False,
        rounding: str = "auto",
        kernels: str | None = None,
    ):
        super().__init__(kernels)
        values = {"bits": bits, "bucket": bucket, "norm": norm, "shared": shared, "rounding": rounding}
        for k, p in PARAMS.items():
            values[k] = p.convert("codec 'qsgd'", k, values[k])
        self.bits, self.bucket = values["bits"], values["bucket"]
        self.norm, self.shared, self.rounding = values["norm"], values["shared"], values["rounding"]
        self.nearest = self.rounding == "nearest"
        self.levels = 1 if self.bits == 1 else 2**self.bits - 2  # L: intervals on [-M, M]
        self.traits = Traits(
            summable=self.shared, needs_shared_scale=self.shared, can_share_scale=True, requantizable=True
        )
        self.name = canonical("qsgd", PARAMS, values)

    def with_shared_scale(self) -> QSGD:
        """The same quantizer in shared-scale mode (summable)."""
        return (
            self
            if self.shared
            else QSGD(self.bits, self.bucket, self.norm, True, self.rounding, self.kernels)
        )

    def bytes_per_value(self) -> float:
        return self.bits / 8 + 4 / self.bucket

    def buckets(self, numel: int) -> int:
        """Number of buckets (scales) for a chunk of ``numel`` values."""
        return -(-numel // self.bucket)

    def _rows(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` zero-padded to whole buckets, as ``(buckets, bucket)`` (a copy; for the bounds)."""
        nb = self.buckets(x.numel())
        padded = torch.zeros(nb * self.bucket, dtype=x.dtype, device=x.device)
        padded[: x.numel()] = x
        return padded.view(nb, self.bucket)

    def local_scale(self, x: torch.Tensor, key: ChunkKey | None = None) -> torch.Tensor:
        """This worker's per-bucket scale, shape ``(buckets,)`` float32 (``key`` is not used)."""
        x = as_chunk(x)
        if self.norm == "l2":
            parts = [torch.linalg.vector_norm(rows, dim=1) for rows in self._rows_of(x)]
        else:  # max-abs as max(max, -min): two reductions and no |x| copy
            parts = [torch.maximum(r.amax(dim=1), r.amin(dim=1).neg_()) for r in self._rows_of(x)]
        return torch.cat(parts)

    def encode(self, x: torch.Tensor, key: ChunkKey, scale: torch.Tensor | None = None) -> Payload:
        """Quantize ``x``; with ``scale`` (``(buckets,)``, e.g. the agreed max) use it instead of
        the local one. Values beyond the scale are clipped to it. The rounding draws come from
        ``seed_for(key, "qsgd", shared=False)``: independent across ranks and hops."""
        x = as_chunk(x)
        if self._fusable(x, scale):
            return self._encode_fused(x, key, scale)
        return self._encode_reference(x, key, scale)

    def _encode_reference(self, x: torch.Tensor, key: ChunkKey, scale: torch.Tensor | None) -> Payload:
        """``encode`` in pure torch: the reference, and the path for every device and width."""
        n, nb = x.numel(), self.buckets(x.numel())
        if scale is None:
            scale = self.local_scale(x)
        else:
            scale = scale.detach().to(device=x.device, dtype=torch.float32).reshape(-1)
            if scale.numel() != nb:
                raise ValueError(f"{self.name}: scale has {scale.numel()} entries; need {nb}")
        # stochastic rounding as one floor: code = floor(x * gain + L/2 + u), u uniform on [0, 1),
        # rounds the level x * gain + L/2 in [0, L] up with chance equal to its fractional part
        # (an all-zero bucket, M = 0, has x = 0 and any gain)
        # float32 rounds v + u to half an ulp of v: 2**-17 below 256; wider codes (levels up to
        # 2**16) would lose most of u's 16 bits, so they compute in float64
        half = self.levels / 2
        work = torch.float64 if self.levels > 256 else self._math_dtype(scale, self.levels)
        gain = half / torch.where(scale > 0, scale, torch.ones_like(scale)).to(work)
        if self.nearest:  # floor(level + 1/2): the nearest level, ties up
            level = torch.full((n,), half + 0.5, dtype=work, device=x.device)
        else:
            level = uniform_offsets(n, half, work, seed_for(key, "qsgd", shared=False), x.device)
        parts = zip(self._rows_of(x), self._rows_of(level), self._parts_of(gain, n), strict=True)
        for src, dst, g in parts:  # (rows, bucket) times (rows, 1): no padded copy
            dst.addcmul_(src, g[:, None])
        # levels stay below L + 1, and clipping keeps values beyond a given scale on the grid;
        # truncation is the floor, as every level is >= 0
        level.clamp_(0.0, self.levels)
        dtype = code_dtype(self.bits)
        # float -> int16 -> uint8 is several times faster than float -> uint8 on CPU
        codes = level.to(torch.int16).to(dtype) if dtype == torch.uint8 else level.to(dtype)
        return self._payload(codes, scale, n, count=1)

    def _fusable(self, x: torch.Tensor, scale: torch.Tensor | None) -> bool:
        """Whether the fused kernel encodes ``x``: selected, CPU float32, 2, 4 or 8 bits (buckets of whole bytes), max-abs
        scale, float32 math (no scale below ``2**-100``)."""
        if not (self.kernels == FUSED and self.bits in (8, 4, 2) and x.device.type == "cpu"):
            return False
        if x.dtype != torch.float32 or x.numel() == 0 or self.bucket % (8 // self.bits):
            return False
        if scale is None:
            return self.norm == "max"
        return scale.device.type == "cpu"

    def _encode_fused(self, x: torch.Tensor, key: ChunkKey, scale: torch.Tensor | None) -> Payload:
        """``encode`` by the fused kernel; falls back to the reference where a scale is tiny."""
        from .kernels import fused

        given, nb = None, self.buckets(x.numel())
        if scale is not None:
            given = scale.detach().to(torch.float32).reshape(-1).contiguous().numpy().copy()
            if given.size != nb:
                raise ValueError(f"{self.name}: scale has {given.size} entries; need {nb}")
        seed = seed_for(key, "qsgd", shared=False)
        values = x.detach().contiguous().numpy()
        codes, scales = fused.qsgd_encode(values, given, seed, self.bucket, self.bits, self.nearest)
        scales_t = torch.from_numpy(scales)
        if given is None and bool((scales_t == 0).any()):
            # an all-zero bucket's scale is a signed zero, whose sign follows torch's reductions
            scales_t = torch.where(scales_t == 0, self.local_scale(x), scales_t)
        if self._math_dtype(scales_t, self.levels) != torch.float32:  # a scale below 2**-100
            return self._encode_reference(x, key, scale)
        return self._fused_payload(codes, scales_t, x.numel())

    def _fused_payload(self, codes: np.ndarray, scales: torch.Tensor, n: int) -> Payload:
        """The payload of ``n`` values whose codes a fused kernel packed ``self.bits`` wide."""
        return Payload(
            {"codes": torch.from_numpy(codes), "scales": scales},
            numel=n,
            header={"numel": n, "bits": self.bits, "count": 1},
            header_bytes=HEADER_BYTES,
        )

    def requantize(self, received: Payload, x: torch.Tensor, key: ChunkKey, weight: float = 1.0) -> Payload:
        """``Codec.requantize`` by the fused kernel, one pass per bucket, where it applies (CPU,
        float32, 2, 4 or 8 bits, max-abs scales, not shared, no scale zero or below ``2**-100``);
        the reference otherwise. The same bits either way."""
        x = as_chunk(x)
        if not self._requantize_fusable(received, x):
            return super().requantize(received, x, key, weight)
        from .kernels import ring

        spacing = (received.tensors["scales"].to(torch.float64) * (2 / self.levels)).to(torch.float32)
        codes, scales = ring.qsgd_requantize(
            received.tensors["codes"].contiguous().numpy(), spacing.contiguous().numpy(), x.numpy(),
            weight, seed_for(key, "qsgd", shared=False), self.bucket, self.bits, self.levels / 2, self.nearest,
        )  # fmt: skip
        scales_t = torch.from_numpy(scales)
        # a zero scale's sign, and float64 math for tiny ones, are the reference's to decide
        if bool((scales_t == 0).any()) or self._math_dtype(scales_t, self.levels) != torch.float32:
            return super().requantize(received, x, key, weight)
        return self._fused_payload(codes, scales_t, x.numel())

    def _requantize_fusable(self, received: Payload, x: torch.Tensor) -> bool:
        """Whether the fused requantize applies to ``received`` and ``x`` (see ``requantize``)."""
        if self.shared or received.header["count"] != 1 or received.numel != x.numel():
            return False
        if not self._fusable(x, None) or received.header["bits"] != self.bits:
            return False
        codes, scales = received.tensors["codes"], received.tensors["scales"]
        return (
            codes.device.type == "cpu"
            and self._decode_dtype(received) == torch.float32
            and (scales.device.type == "cpu")
        )

    @staticmethod
    def _math_dtype(scale: torch.Tensor, total: int) -> torch.dtype:
        """float32 where it is exact enough, else float64. Exact enough: integer levels up to
        ``total`` (and twice that) are float32 integers, and every nonzero scale is at least
        ``2**-100``, so ``M/L`` and ``L/M`` stay normal float32 numbers."""
        if 2 * total >= 2**24:
            return torch.float64
        if scale.device.type == "cpu":  # numpy: a fraction of the cost of torch's small ops
            m = scale.numpy()
            tiny = bool(((m > 0) & (m < 2**-100)).any())
        else:
            tiny = bool(((scale > 0) & (scale < 2**-100)).any())
        return torch.float64 if tiny else torch.float32

    def _rows_of(self, t: torch.Tensor) -> list[torch.Tensor]:
        """Views of ``t`` ``(numel,)`` by bucket: the whole buckets ``(full, bucket)`` and, when
        ``numel`` is not a multiple of the bucket, the short last one ``(1, rest)``. No copies."""
        full = t.numel() // self.bucket * self.bucket
        rows = [t[:full].view(-1, self.bucket)]
        return rows + [t[full:].view(1, -1)] if t.numel() > full else rows

    def _parts_of(self, per_bucket: torch.Tensor, numel: int) -> list[torch.Tensor]:
        """A ``(buckets,)`` vector split like ``_rows_of`` splits ``numel`` values."""
        full = numel // self.bucket
        return list(per_bucket.split([full, 1])) if numel > full * self.bucket else [per_bucket]

    def _payload(self, codes: torch.Tensor, scale: torch.Tensor, n: int, count: int) -> Payload:
        width = max(self.bits, bits_for(count * self.levels))
        return Payload(
            {"codes": pack_bits(codes, width), "scales": scale.to(torch.float32)},
            numel=n,
            header={"numel": n, "bits": width, "count": count},
            header_bytes=HEADER_BYTES,
        )

    def template(self, numel: int) -> Payload | None:
        """The layout and header of every payload of ``numel`` values; None in shared-scale mode,
        where sums grow wider codes and count their payloads in the header."""
        if self.shared:
            return None
        width = max(self.bits, bits_for(self.levels))
        tensors = {"codes": torch.empty(1, dtype=torch.uint8).expand(packed_nbytes(numel, width)),
                   "scales": torch.empty(1, dtype=torch.float32).expand(self.buckets(numel))}  # fmt: skip
        header = {"numel": numel, "bits": width, "count": 1}
        return Payload(tensors, numel=numel, header=header, header_bytes=HEADER_BYTES)

    def codes(self, payload: Payload, dtype: torch.dtype = torch.int64) -> torch.Tensor:
        """The integer levels of ``payload`` (summed levels for a sum), ``(numel,)`` ``dtype``."""
        return unpack_bits(payload.tensors["codes"], payload.header["bits"], payload.numel, dtype)

    def decode(self, payload: Payload) -> torch.Tensor:
        """``M * (2U - count*L) / L`` per value: ``U - count*L/2`` is exact, then one multiply by
        ``2M/L`` (rounded once), in the type of ``_math_dtype``: float32 results are within two
        float32 ulps of the exact value, and exactly zero where the codes centre."""
        return self._decoded(payload, self._decode_dtype(payload)).to(torch.float32)

    def decode_into(self, payload: Payload, out: torch.Tensor) -> None:
        """``decode`` written straight into ``out`` where it computes in float32 (the same bits)."""
        exact = self._decode_dtype(payload)
        if exact == torch.float32 and out.dtype == torch.float32 and out.is_contiguous():
            self._decode_to(payload, out)
        else:
            out.copy_(self._decoded(payload, exact))

    def _decode_dtype(self, payload: Payload) -> torch.dtype:
        return self._math_dtype(payload.tensors["scales"], payload.header["count"] * self.levels)

    def _decoded(self, payload: Payload, exact: torch.dtype) -> torch.Tensor:
        out = torch.empty(payload.numel, dtype=exact, device=payload.tensors["scales"].device)
        self._decode_to(payload, out)
        return out

    def _decode_to(self, payload: Payload, out: torch.Tensor) -> None:
        n, total = payload.numel, payload.header["count"] * self.levels
        width, scale = payload.header["bits"], payload.tensors["scales"]
        spacing = (scale.to(torch.float64) * (2 / self.levels)).to(out.dtype)
        codes = payload.tensors["codes"]
        if (
            self.kernels == FUSED and width in (8, 4, 2) and out.dtype == torch.float32 and n
            and out.device.type == "cpu" and codes.device.type == "cpu" and out.is_contiguous()
        ):  # fmt: skip
            from .kernels import fused

            packed, gaps = codes.contiguous().numpy(), spacing.contiguous().numpy()
            fused.qsgd_decode(packed, gaps, out.numpy(), self.bucket, width, total / 2)
            return
        out.copy_(self.codes(payload, code_dtype(width))).sub_(total / 2)  # U - count*L/2
        for rows, d in zip(self._rows_of(out), self._parts_of(spacing, n), strict=True):
            rows.mul_(d[:, None])

    def add(self, a: Payload, b: Payload) -> Payload:
        """Sum of two shared-scale payloads: integer codes add, the width grows as needed."""
        if not self.shared:
            raise TypeError(f"codec {self.name!r} is not summable; use with_shared_scale()")
        if a.numel != b.numel:
            raise ValueError(f"{self.name}: cannot add payloads of {a.numel} and {b.numel} values")
        if not torch.equal(a.tensors["scales"], b.tensors["scales"]):
            raise ValueError(f"{self.name}: payloads were encoded with different scales")
        count = a.header["count"] + b.header["count"]
        width = max(self.bits, bits_for(count * self.levels))
        if self.kernels == FUSED and a.tensors["codes"].device.type == "cpu" and width <= 16:
            return self._add_fused(a, b, width, count)
        total = self.codes(a, code_dtype(width)) + self.codes(b, code_dtype(width))
        return self._payload(total, a.tensors["scales"], a.numel, count)

    def _add_fused(self, a: Payload, b: Payload, width: int, count: int) -> Payload:
        """``add`` by the fused kernel: the two code streams summed and packed in one pass."""
        from .kernels import ring

        packed = [p.tensors["codes"].contiguous().numpy() for p in (a, b)]
        summed = ring.add_codes(packed[0], a.header["bits"], packed[1], b.header["bits"], width, a.numel)
        return Payload(
            {"codes": torch.from_numpy(summed), "scales": a.tensors["scales"].to(torch.float32)},
            numel=a.numel,
            header={"numel": a.numel, "bits": width, "count": count},
            header_bytes=HEADER_BYTES,
        )

    def coordinate_variance_bound(self, x: torch.Tensor, scale: torch.Tensor | None = None) -> torch.Tensor:
        """Per-value bound on ``E(decode(encode(x))_i - x_i)**2``, float64 ``(numel,)``.

        ``min(D**2/4, D*|x_i|)`` with spacing ``D = 2M/L`` when zero is a level (``bits >= 2``);
        for ``bits = 1`` the exact variance ``M**2 - x_i**2`` of stochastic sign.
        """
        x = as_chunk(x)
        scale = self.local_scale(x) if scale is None else scale.to(torch.float32)
        m = scale.to(torch.float64)[:, None]  # (buckets, 1)
        mag = self._rows(x).abs().to(torch.float64).clamp(max=m)
        if self.bits == 1:
            bound = m**2 - mag**2
        else:
            spacing = 2 * m / self.levels
            bound = torch.minimum(spacing**2 / 4, spacing * mag)
        return bound.reshape(-1)[: x.numel()]

    def variance_bound(self, x: torch.Tensor, scale: torch.Tensor | None = None) -> float:
        """Upper bound on ``E||decode(encode(x)) - x||**2``: the sum of the per-value bounds."""
        return float(self.coordinate_variance_bound(x, scale).sum())


@CODECS.register("qsgd", **PARAMS)
def build_qsgd(
    bits: int, bucket: int, norm: str, shared: bool, rounding: str, kernels: str | None = None,
    for_memory: bool = False,
) -> QSGD:  # fmt: skip
    """b-bit quantization, one scale per bucket; stochastic rounding (unbiased) by default"""
    # Under a memory ``auto`` rounds to the nearest level: the memory carries what rounding drops to
    # the next step, and needs a contractive codec to stay bounded. Stochastic rounding's error is
    # not smaller than the value at few bits (``|x| (D - |x|)`` against ``x**2`` for ``|x| < D``, and
    # most of a bucket lies far below its max), so at 2 bits an error-feedback residual grows step
    # after step; rounding to the nearest level never errs by more than ``|x|``.
    if for_memory and rounding == "auto":
        rounding = "nearest"
    return QSGD(bits, bucket, norm, shared, rounding, kernels)
