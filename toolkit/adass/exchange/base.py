"""The Exchange protocol (``reduce(flat_grad, count)`` per rank), the exchange registry, and the
check that an exchange, a codec and a memory can work together before anything runs.

An exchange works on the device of the gradient it is given (its buffers are made there, its codec
and memory follow the tensors they see); what arrives from peers is on the transport's ``device``,
which is the replicas' device too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace
from typing import Any

import torch

from ..codecs import Codec
from ..codecs.base import ChunkKey
from ..memory import Memory, build_pair
from ..registry import Registry, SpecError, parse_spec
from .link import CodecClock
from .report import StepReport
from .transport import Transfer, Transport

__all__ = ["EXCHANGES", "Exchange", "check", "make_exchange", "output_buffer"]

EXCHANGES = Registry("exchange")


class Exchange(ABC):
    """Averages flat gradients across workers; one object per rank, all ranks call in lock-step.

    Parameters
    ----------
    transport : Transport
        This rank's endpoint.
    codec : Codec or str
        How gradient chunks travel (a spec string is built with ``adass.memory.build_pair``, so the
        older ``ef(SPEC)`` names the memory).
    memory : Memory or str, optional
        What this rank keeps around its own share from step to step (a name is built for the codec);
        None or ``"none"``: nothing.
    seed : int
        Run seed; with the step and chunk id it seeds every codec draw, the same on every rank.
    run : str
        Run id written into the traffic records.
    epoch : int
        Epoch written into the traffic records (set it as training goes on); the codec follows it
        (``Codec.set_epoch``: a sparsifier's ratio warm-up).

    Attributes
    ----------
    codec : Codec
        The codec whose payloads travel.
    memory : Memory or None
        The memory around this rank's own share (error feedback, momentum correction): each chunk
        is compensated before it is encoded and the memory keeps what the encoding lost; None
        without. Saved by :meth:`state_dict`.
    step : int
        The step the next ``reduce`` belongs to; it counts up by one per call.
    clock : CodecClock
        Where the last call spent its time; see :meth:`report`.
    spreads_nonfinite : bool
        Whether a NaN or Inf in any worker's ``flat_grad`` reaches every worker's result (a lossless
        dense ring sums raw floats, so one does), with every result bit-identical: the engine then
        checks the result for non-finite values instead of agreeing on them before the exchange.
        False (the default) where a codec may hide them (a quantizer's scale, a sparsifier).
    pulls_parameters : bool
        Whether ``reduce`` returns parameters after an optimizer step that servers took (a parameter
        server with ``update=server``) rather than the mean gradient; workers then copy the result
        into their model and do not step.
    lockstep : bool
        Whether every worker's ``reduce`` of a step waits for every other worker's (False for an
        asynchronous parameter server, ``ps:mode=async|ssp``: there ``count`` is the push's share of
        the step's planned global batch, and workers run no per-step collective of their own).
    """

    name = "exchange"
    pulls_parameters: bool = False
    spreads_nonfinite: bool = False
    lockstep: bool = True

    def __init__(
        self, transport: Transport, codec: Codec | str, *, memory: Memory | str | None = None,
        seed: int = 0, run: str = "", epoch: int = 0,
    ) -> None:  # fmt: skip
        self.transport = transport
        self.codec, self.memory = build_pair(codec, memory)
        self.seed, self.epoch, self.step = seed, epoch, 0
        self.transport.log.run = run
        self.clock = CodecClock()

    @property
    def device(self) -> torch.device:
        """Where this rank's payloads arrive and a server's sums are made: the transport's device."""
        return self.transport.device

    @property
    def epoch(self) -> int:
        """The epoch of the next ``reduce``; setting it sets the codec's (every rank alike)."""
        return self._epoch

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self._epoch = int(epoch)
        self.codec.set_epoch(self._epoch)

    def set_layers(self, shapes: list[tuple[int, ...]]) -> None:
        """Tell the exchange the parameter shapes its flat gradients are made of, in order (the
        engine does, from the model); a codec that compresses whole layers (``powersgd``) needs
        them, others ignore them."""
        low_rank = self.codec.low_rank()
        if low_rank is not None:
            low_rank.set_layers(shapes)

    def take_momentum(self, momentum: float) -> bool:
        """Where this exchange's memory owns the optimizer's momentum (momentum correction), it keeps
        ``momentum`` as its factor and this returns True: the optimizer must then step without
        momentum. False otherwise."""
        return self.memory is not None and self.memory.take_momentum(momentum)

    @abstractmethod
    def reduce(
        self, flat_grad: torch.Tensor, count: float | None = None, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The average of every worker's ``flat_grad``, weighted by their ``count``.

        Parameters
        ----------
        flat_grad : Tensor
            This worker's gradient, any shape (flattened); the same length on every worker.
        count : float, optional
            This worker's sample count in the step. None on every worker: equal weights, and no
            counts travel. Either all workers pass a count or none does.
        out : Tensor, optional
            Contiguous float32 tensor of ``n`` values on ``flat_grad``'s device for the result; it
            may be ``flat_grad`` itself (an in-place reduce, like ``torch.distributed.all_reduce``).

        Returns
        -------
        Tensor
            float32 ``(n,)`` on ``flat_grad``'s device (``out`` where given), bit-identical on every
            worker.
        """

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of this exchange: the memory's state (``memory``: error-feedback
        residuals, with momentum correction also the velocities) and what the codec learnt (``codec``, see
        ``Codec.observe``), as CPU tensors; empty where there is neither."""
        state = {} if self.memory is None else {"memory": self.memory.state_dict()}
        codec_state = self.codec.codec_state()
        if codec_state:
            state["codec"] = codec_state
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` gave (a memory's state is ignored without a memory)."""
        if self.memory is not None and "memory" in state:
            self.memory.load_state_dict(state["memory"])
        if "codec" in state:
            self.codec.load_codec_state(state["codec"])

    def _observe(self, out: torch.Tensor, pieces: Any) -> None:
        """Show the codec each piece of the step's result, which every rank holds alike (call it
        before ``step`` moves on, so the keys are the step's)."""
        for p in pieces:
            self.codec.observe(out[p.lo : p.hi], self._key(p.pid))

    @classmethod
    def check(cls, codec: Codec, memory: Memory | None = None, **params: Any) -> None:
        """Raise SpecError (one line) if this exchange cannot work with ``codec`` and ``memory``."""
        return None

    def report(self) -> StepReport:
        """The account of the last ``reduce`` (or server step): its seconds by kind of work and the
        transfers this rank received since the previous report (handed over once)."""
        return StepReport(**self.clock.timers(), traffic=self.transport.log.drain())

    @property
    def rank(self) -> int:
        return self.transport.rank

    def _key(self, chunk: int, hop: int = 0) -> ChunkKey:
        """The codec key of piece ``chunk`` this step, encoded by this rank at ``hop``."""
        return replace(ChunkKey(self.seed, self.step, chunk), rank=self.rank, hop=hop)

    def _meta(self, phase: str, hop: int, chunk: int, raw_bytes: int | None = None) -> Transfer:
        return Transfer(phase, hop, chunk, self.step, self.epoch, raw_bytes)


def output_buffer(out: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """``out`` checked (contiguous float32 with ``like``'s values, on its device) as a flat view, or
    a new tensor beside ``like``."""
    n = like.numel()
    if out is None:
        return torch.empty(n, dtype=torch.float32, device=like.device)
    if out.dtype != torch.float32 or out.numel() != n or not out.is_contiguous() or out.device != like.device:
        raise ValueError(f"out must be a contiguous float32 tensor of {n} values on {like.device}; got "
                         f"{out.dtype} {tuple(out.shape)} on {out.device}")  # fmt: skip
    return out.view(-1)


def make_exchange(
    spec: str, transport: Transport, codec: Codec | str, *, memory: Memory | str | None = None,
    kernels: str | None = None, **context: Any,
) -> Exchange:  # fmt: skip
    """Build an exchange from a spec (``ring:strategy=shared_scale``, ``ps:servers=2``).

    Parameters
    ----------
    spec : str
        The exchange spec.
    transport : Transport
        This rank's endpoint.
    codec : Codec or str
        The gradient codec (checked against the exchange first); a spec may name its memory the
        older way (``ef(topk:ratio=0.01)``).
    memory : Memory or str, optional
        The memory around this rank's own share (``none``, ``ef``, ``mc``, ``dmc``); None: none.
    kernels : {"reference", "fused"}, optional
        The kernels a codec and memory built here from their specs fix (see ``adass.codecs.kernels``);
        None: the default. A codec given built keeps its own.
    **context
        ``seed``, ``run``, ``epoch``.

    Raises
    ------
    SpecError
        A bad spec or an impossible exchange/codec/memory triple, before anything is sent.
    """
    codec, memory = build_pair(codec, memory, kernels)
    check(spec, codec, memory)
    return EXCHANGES.build(spec, transport=transport, codec=codec, memory=memory, **context)


def check(exchange_spec: str, codec_spec: str | Codec, memory: str | Memory | None = None) -> str:
    """Check that an exchange spec, a codec spec and a memory can work together; return the exchange
    spec in canonical form.

    Raises
    ------
    SpecError
        One line naming the problem: a malformed or unknown spec, or an impossible pair such as
        ``ring:strategy=shared_scale`` with ``topk`` (its codes cannot add).
    """
    parsed = parse_spec(exchange_spec, "exchange")
    entry, values = EXCHANGES.resolve(parsed)
    codec, built = build_pair(codec_spec, memory)
    entry.factory.check(codec, built, **values)
    if not values:
        return entry.name
    return entry.name + ":" + ",".join(f"{k}={v}" for k, v in values.items())


def require(condition: bool, message: str) -> None:
    """Raise SpecError with ``message`` unless ``condition``."""
    if not condition:
        raise SpecError(message)
