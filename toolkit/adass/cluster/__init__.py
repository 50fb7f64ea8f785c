"""The Dask runtime: connect to a cluster, Replica and Server actors, process groups, live events."""

from .bootstrap import GroupConnectError
from .checkpoints import check_resume, read_checkpoint
from .connect import ClusterHandle, connect, connect_for
from .events import EventRelay, RunStore, topic_for
from .runner import DistributedResult, read_checkpoint_state, server_count, train_distributed

__all__ = [
    "ClusterHandle",
    "DistributedResult",
    "EventRelay",
    "GroupConnectError",
    "RunStore",
    "check_resume",
    "connect",
    "connect_for",
    "read_checkpoint",
    "read_checkpoint_state",
    "server_count",
    "topic_for",
    "train_distributed",
]
