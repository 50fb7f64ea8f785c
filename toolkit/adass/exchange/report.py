"""What one exchange call reports to its caller afterwards: where its time went, the transfers its
rank received, and how far an asynchronous server's reply lagged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..metrics import TrafficRecord

__all__ = ["StepReport"]


@dataclass(frozen=True)
class StepReport:
    """The account of an exchange's last ``reduce`` (or server step), given by ``Exchange.report``.

    Attributes
    ----------
    encode_s : float
        Codec math making what is sent (weighting, scales, encoding, each hop's add or
        requantization).
    decode_s : float
        Decoding final payloads into the result.
    comm_s : float
        The rest of the call: posting, framing and waiting on transfers. The three add up to the
        call's wall time.
    traffic : list of TrafficRecord
        The transfers this rank received since the previous report (each is reported once).
    staleness : int
        How many updates the servers had applied between the parameters the gradient was computed
        on and the update it went into (0 in lock-step).
    held_s : float
        Seconds the servers held their reply back under their consistency model (the longest over
        shards; 0 in lock-step), which a worker's throughput leaves out.
    """

    encode_s: float = 0.0
    decode_s: float = 0.0
    comm_s: float = 0.0
    traffic: list[TrafficRecord] = field(default_factory=list)
    staleness: int = 0
    held_s: float = 0.0
