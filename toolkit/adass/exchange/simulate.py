"""A notebook-sized simulator: one exchange step of P virtual workers (threads, inproc transport),
with every transfer recorded and the step time taken from the link model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch

from ..codecs import Codec
from ..memory import build_pair
from ..registry import SpecError, parse_spec
from .base import EXCHANGES, check
from .link import Link, parse_link, stage_seconds, traffic_frame
from .topology import Topology, topology_of
from .transport import MAX_WORLD, PHASES, InProcHub, split_phase

__all__ = ["SimulationResult", "simulate"]


@dataclass
class SimulationResult:
    """What one simulated step produced.

    Attributes
    ----------
    outputs : list of Tensor
        The averaged gradient each worker ended with (bit-identical across workers).
    traffic : DataFrame
        One row per transfer, the columns of :class:`~adass.metrics.TrafficRecord`.
    sim_seconds : float
        Modelled step time under ``link`` (0 without a link), see :meth:`step_seconds`.
    exchange, codec : str
        Canonical specs of what ran.
    link : Link or None
        The link model used for ``sim_seconds``.
    topology : Topology
        The exchange family's declaration, whose time model turns the traffic into seconds.
    """

    outputs: list[torch.Tensor]
    traffic: pd.DataFrame
    sim_seconds: float
    exchange: str
    codec: str
    link: Link | None = None
    topology: Topology = field(default_factory=Topology, repr=False)

    @property
    def wire_bytes(self) -> int:
        """Bytes of all payloads that travelled in the step."""
        return int(self.traffic["wire_bytes"].sum())

    @property
    def raw_bytes(self) -> int:
        """What the same transfers would have cost as dense fp32."""
        return int(self.traffic["raw_bytes"].sum())

    def step_seconds(self, link: str | Link) -> float:
        """Modelled step time under another link, from the same traffic.

        The step is a sequence of stages (ring: the scale agreement of ``shared_scale``, then each
        reduce-scatter and all-gather hop; PS: push, then pull). A stage takes ``latency + B*8 /
        bandwidth`` with ``B`` the bytes of its busiest port: for a ring hop the slowest transfer,
        for a PS stage a server's ingress (push) or egress (pull), which serialise P transfers.
        """
        return self.topology.step_seconds(self.traffic, Link.parse(link))

    def stages(self, link: str | Link | None = None) -> dict:
        """Modelled seconds per stage (under ``link``, or the one the step ran with)."""
        chosen = Link.parse(link) if link is not None else self.link
        if chosen is None:
            raise ValueError("no link model: pass one")
        return stage_seconds(self.traffic, chosen, self.topology.stage)


def _run_ranks(hub: InProcHub, work: Callable[[int], None]) -> None:
    """Run ``work(rank)`` for every rank of ``hub`` on its own thread; re-raise the first failure
    (the others are woken by ``hub.abort`` instead of waiting for messages that will not come)."""
    errors: list[BaseException] = []

    def guarded(rank: int) -> None:
        try:
            work(rank)
        except BaseException as err:  # noqa: BLE001 - re-raised below, after the other threads stop
            errors.append(err)
            hub.abort()

    threads = [threading.Thread(target=guarded, args=(r,), name=f"adass-sim-{r}") for r in range(hub.world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _in_step_order(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in the order the step runs them: by round (a low-rank codec's ``p`` before ``q``), phase
    (``PHASES``), hop, then sender."""
    parts = [split_phase(phase) for phase in frame.phase]
    rank = {p: i for i, p in enumerate(PHASES)}
    keyed = frame.assign(_round=[r for r, _ in parts], _order=[rank.get(p, len(PHASES)) for _, p in parts])
    keyed = keyed.sort_values(["_round", "_order", "hop", "src", "dst", "chunk"], kind="stable")
    return keyed.drop(columns=["_round", "_order"]).reset_index(drop=True)


def _codec_name(spec: str) -> str:
    """The canonical name of the codec that travels, inside its memory's where there is one."""
    codec, memory = build_pair(spec)
    return codec.name if memory is None else f"{memory.name}({codec.name})"


def simulate(
    grads: Sequence[torch.Tensor],
    exchange: str = "ring",
    codec: str | Codec = "qsgd:bits=4",
    link: str | Link | None = "1gbit,50us",
    seed: int = 0,
    counts: Sequence[float] | None = None,
    step: int = 0,
    timeout_s: float = 120.0,
    layers: Sequence[Sequence[int]] | None = None,
) -> SimulationResult:
    """Run one exchange step over P in-process workers.

    Parameters
    ----------
    grads : sequence of Tensor
        One flat gradient per worker (P of them, equal lengths).
    exchange : str
        Exchange spec, e.g. ``ring``, ``ring:strategy=shared_scale``, ``ps:servers=2``. PS servers
        run as extra virtual ranks.
    codec : str or Codec
        Codec spec; every worker gets its own instance.
    link : str or Link, optional
        Link model for ``sim_seconds`` (``"1gbit,50us"``); None: no time model.
    seed, step : int
        Run seed and step number (they seed every codec draw).
    counts : sequence of float, optional
        Per-worker sample counts for the weighted mean; None: equal weights.
    timeout_s : float
        Give up if a worker waits this long for a message.
    layers : sequence of shapes, optional
        The parameter shapes the gradients are made of (``Exchange.set_layers``), which a codec that
        compresses whole layers (``powersgd``) needs.

    Returns
    -------
    SimulationResult

    Examples
    --------
    >>> import torch
    >>> grads = [torch.randn(1000) for _ in range(4)]
    >>> result = simulate(grads, exchange="ring", codec="qsgd:bits=4")
    >>> result.traffic.groupby("phase").wire_bytes.sum()
    """
    workers = len(grads)
    codec_spec = codec.name if isinstance(codec, Codec) else str(codec)
    canonical = check(exchange, codec_spec)
    entry, params = EXCHANGES.resolve(parse_spec(exchange, "exchange"))
    world = workers + topology_of(entry.name).extra_ranks(**params)
    if params.get("update") == "server":  # one step of averaging: no model here for servers to own
        raise SpecError(f"simulate: {exchange!r}: update=server steps parameters the servers own; "
                        "simulate averages gradients (use update=replica)")  # fmt: skip
    if not 1 <= workers or world > MAX_WORLD:
        raise SpecError(
            f"simulate: {workers} workers (+ servers) is not allowed; expected 1..{MAX_WORLD} ranks"
        )
    sizes = {g.numel() for g in grads}
    if len(sizes) != 1:
        raise ValueError(f"every worker's gradient must have the same length; got {sorted(sizes)}")
    if counts is not None and len(counts) != workers:
        raise ValueError(f"{len(counts)} counts for {workers} workers")
    model = parse_link(link)
    hub = InProcHub(world, timeout_s=timeout_s)
    outputs: list[torch.Tensor | None] = [None] * workers
    records: list[list] = [[] for _ in range(world)]

    def work(rank: int) -> None:
        ex = EXCHANGES.build(exchange, transport=hub.transport(rank, model),
                             codec=codec_spec, seed=seed)  # fmt: skip
        ex.step = step
        if layers is not None:
            ex.set_layers([tuple(shape) for shape in layers])
        if rank < workers:
            outputs[rank] = ex.reduce(grads[rank], None if counts is None else counts[rank])
        else:
            ex.serve_step()
        records[rank] = ex.report().traffic

    _run_ranks(hub, work)
    topology = topology_of(entry.name)
    traffic = _in_step_order(traffic_frame([r for rank_records in records for r in rank_records]))
    seconds = topology.step_seconds(traffic, model) if model is not None and not traffic.empty else 0.0
    return SimulationResult(
        list(outputs), traffic, seconds, canonical, _codec_name(codec_spec), model, topology
    )
