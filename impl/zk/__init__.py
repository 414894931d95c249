"""ZooKeeper behind one port: the interface (``port``), an in-memory store (``embedded``), a real
server through kazoo (``kazoo_port``) and a real server process for tests (``server``).

``kazoo_port`` and ``server`` are not imported here: the simulator needs neither kazoo nor Java.
"""

from impl.zk.embedded import EmbeddedZk
from impl.zk.port import (
    ANY_VERSION,
    BadVersion,
    CheckOp,
    ConnectionLoss,
    CreateOp,
    DeleteOp,
    NoChildrenForEphemerals,
    NodeExists,
    NoNode,
    NotEmpty,
    Op,
    OpResult,
    SessionExpired,
    SetDataOp,
    Stat,
    WatchEvent,
    WatchKind,
    ZkCode,
    ZkError,
    ZkPort,
)

__all__ = [
    "ANY_VERSION",
    "BadVersion",
    "CheckOp",
    "ConnectionLoss",
    "CreateOp",
    "DeleteOp",
    "EmbeddedZk",
    "NoChildrenForEphemerals",
    "NoNode",
    "NodeExists",
    "NotEmpty",
    "Op",
    "OpResult",
    "SessionExpired",
    "SetDataOp",
    "Stat",
    "WatchEvent",
    "WatchKind",
    "ZkCode",
    "ZkError",
    "ZkPort",
]
