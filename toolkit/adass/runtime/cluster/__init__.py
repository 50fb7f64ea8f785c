"""The Dask runtime: connect to a cluster, Replica and Server actors, process groups, live events."""

from ...engine import RunStore, check_resume, read_checkpoint, read_checkpoint_state
from .bootstrap import GroupConnectError
from .connect import ClusterHandle, connect, connect_for
from .events import EventRelay, topic_for
from .runner import DaskBackend, DistributedResult, train_distributed

__all__ = [
    "ClusterHandle",
    "DaskBackend",
    "DistributedResult",
    "EventRelay",
    "GroupConnectError",
    "RunStore",
    "check_resume",
    "connect",
    "connect_for",
    "read_checkpoint",
    "read_checkpoint_state",
    "topic_for",
    "train_distributed",
]
