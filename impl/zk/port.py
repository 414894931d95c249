"""The ZooKeeper port: what kraftcheck's nodes may ask of ZooKeeper, and what they get back.

The nodes of ``impl/`` never talk to ZooKeeper: they emit requests as effects, and the simulator
executes them against a ``ZkPort`` and feeds the results back. Two adapters implement it and a
conformance suite (tests/test_zk_port.py) runs the same cases on both:
- ``impl.zk.embedded.EmbeddedZk``: ZooKeeper's semantics in memory, deterministic and fast;
- ``impl.zk.kazoo_port.KazooPort``: a real ZooKeeper 3.8 server through kazoo.

Rules every adapter keeps (ZooKeeper's own, as PrepRequestProcessor and DataTree implement them):
- Every write request is one transaction with the next zxid, whether it succeeds or fails (a
  failed request is logged as an error txn); so is a ``multi``, even an empty or failed one.
  createSession and closeSession (also the one the server issues on expiry) are transactions.
  Reads take no zxid.
- ``multi`` is all or nothing and does not raise when an op fails: it returns one ``OpResult``
  per op, as ZooKeeper 3.8 reports them: the ops before the failing one ``OK`` (the server sends
  an ErrorResult with code 0, which kazoo calls RolledBackError), the failing op its own code,
  the ops after it ``RUNTIME_INCONSISTENCY``; nothing is applied. A successful multi reports
  ``OK`` with the created path for a create, the new Stat for a setData, neither for a check
  or a delete. Only session and connection errors raise from ``multi``.
- Watches are one-shot, belong to the session that set them and die with it. A data watch
  (getData, exists) fires on setData and delete of its path, an exists watch also on create; a
  child watch (getChildren) fires on create or delete of a child and on delete of its path. A
  session with a data and a child watch on a deleted path gets one ``deleted`` event (DataTree
  passes the watchers already notified to the second trigger). ``drain_watch_events`` returns
  the events in the order (zxid of the triggering transaction, session, path, kind).
- A session that is closed or has expired stays dead: every later call with it raises
  ``SessionExpired`` (the Java client reports SESSIONEXPIRED on a closed handle too); closing or
  expiring a dead session again does nothing. An unknown session id is a caller bug: ValueError.
- While ZooKeeper is unavailable (``set_available(False)``) every request, including opening,
  closing and expiring a session, raises ``ConnectionLoss``, and no session expires.
  ``session_alive``, ``drain_watch_events``, ``last_zxid`` and ``snapshot`` are inspection, not
  requests, and keep working.
- Paths are ZooKeeper's: absolute, no trailing slash, no empty, ``.`` or ``..`` segment. A bad
  path, or deleting ``/``, is a caller bug: ValueError before any transaction (the server would
  answer BadArguments). Sequential and container znodes and ACLs are not part of the port.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, Protocol, assert_never, runtime_checkable

from model.types import ZkCode as ModelZkCode

__all__ = [
    "ANY_VERSION",
    "BadVersion",
    "CheckOp",
    "CloseSession",
    "ConnectionLoss",
    "CreateOp",
    "CreateSession",
    "DeleteOp",
    "Exists",
    "GetChildren",
    "GetData",
    "Multi",
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
    "ZkRequest",
    "error_for",
    "execute",
    "parent_of",
    "validate_data",
    "validate_deletable",
    "validate_op",
    "validate_path",
]

ANY_VERSION = -1


class ZkCode(Enum):
    """ZooKeeper result codes (KeeperException.Code) the port reports.

    The model's ``model.types.ZkCode`` by the same names and values, plus the two codes that
    only a real tree with parents can produce (the model's parents are implicit): NOTEMPTY and
    NOCHILDRENFOREPHEMERALS. A separate enum because ``model/`` stays as the model needs it;
    ``to_model``/``of_model`` convert.
    """

    OK = "OK"
    BAD_VERSION = "BADVERSION"
    NO_NODE = "NONODE"
    NODE_EXISTS = "NODEEXISTS"
    RUNTIME_INCONSISTENCY = "RUNTIMEINCONSISTENCY"
    CONNECTION_LOSS = "CONNECTIONLOSS"
    SESSION_EXPIRED = "SESSIONEXPIRED"
    NOT_EMPTY = "NOTEMPTY"
    NO_CHILDREN_FOR_EPHEMERALS = "NOCHILDRENFOREPHEMERALS"

    @property
    def wire(self) -> int:
        """The integer code on ZooKeeper's wire (KeeperException.Code.intValue)."""
        return _WIRE[self]

    @classmethod
    def of_wire(cls, code: int) -> ZkCode:
        return _OF_WIRE[code]

    def to_model(self) -> ModelZkCode:
        """The model's code; ValueError for the codes the model does not have."""
        return ModelZkCode(self.value)

    @classmethod
    def of_model(cls, code: ModelZkCode) -> ZkCode:
        return cls(code.value)


_WIRE = {
    ZkCode.OK: 0,
    ZkCode.RUNTIME_INCONSISTENCY: -2,
    ZkCode.CONNECTION_LOSS: -4,
    ZkCode.NO_NODE: -101,
    ZkCode.BAD_VERSION: -103,
    ZkCode.NO_CHILDREN_FOR_EPHEMERALS: -108,
    ZkCode.NODE_EXISTS: -110,
    ZkCode.NOT_EMPTY: -111,
    ZkCode.SESSION_EXPIRED: -112,
}
_OF_WIRE = {wire: code for code, wire in _WIRE.items()}
# The port's codes are a superset of the model's, by value.
assert {c.value for c in ModelZkCode} <= {c.value for c in ZkCode}


# ---- errors ------------------------------------------------------------------------------

class ZkError(Exception):
    """A ZooKeeper error result; ``code`` says which."""

    code: ZkCode = ZkCode.RUNTIME_INCONSISTENCY

    def __init__(self, path: str | None = None) -> None:
        super().__init__(f"{self.code.value} {path}" if path else self.code.value)
        self.path = path


class NoNode(ZkError):
    code = ZkCode.NO_NODE


class NodeExists(ZkError):
    code = ZkCode.NODE_EXISTS


class BadVersion(ZkError):
    code = ZkCode.BAD_VERSION


class NotEmpty(ZkError):
    code = ZkCode.NOT_EMPTY


class NoChildrenForEphemerals(ZkError):
    code = ZkCode.NO_CHILDREN_FOR_EPHEMERALS


class SessionExpired(ZkError):
    code = ZkCode.SESSION_EXPIRED


class ConnectionLoss(ZkError):
    code = ZkCode.CONNECTION_LOSS


_ERRORS: dict[ZkCode, type[ZkError]] = {
    cls.code: cls for cls in (NoNode, NodeExists, BadVersion, NotEmpty, NoChildrenForEphemerals, SessionExpired,
                              ConnectionLoss)
}


def error_for(code: ZkCode, path: str | None = None) -> ZkError:
    """The exception a single (non-multi) request raises for ``code``."""
    return _ERRORS.get(code, ZkError)(path)


# ---- data --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Stat:
    """ZooKeeper's Stat, without the wall-clock fields (ctime, mtime) and the ACL version.

    ``cversion`` is what the server reports: DataNode.copyStat gives ``2 * creates - children``
    (the server stores the number of child creates), which is the number of child creates and
    deletes for every znode except the built-in ``/`` and ``/zookeeper``.
    """

    czxid: int
    mzxid: int
    pzxid: int
    version: int
    cversion: int
    ephemeral_owner: int  # the owning session's id, 0 for a persistent znode
    num_children: int
    data_length: int


@dataclass(frozen=True, slots=True)
class CheckOp:
    path: str
    version: int


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes
    ephemeral: bool = False


@dataclass(frozen=True, slots=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int = ANY_VERSION


Op = CheckOp | CreateOp | SetDataOp | DeleteOp


@dataclass(frozen=True, slots=True)
class OpResult:
    """One op's result in a multi: the created path for a create, the new Stat for a setData."""

    code: ZkCode
    stat: Stat | None = None
    path: str | None = None


WatchKind = Literal["created", "deleted", "changed", "child"]


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A fired watch: NodeCreated, NodeDeleted, NodeDataChanged or NodeChildrenChanged."""

    session: int
    path: str
    kind: WatchKind


# ---- paths -------------------------------------------------------------------------------

def validate_path(path: str) -> str:
    """ZooKeeper's PathUtils.validatePath, without the sequential suffix: ValueError if bad."""
    if (
        type(path) is str
        and path[:1] == "/"
        and path[-1:] != "/"
        and "//" not in path
        and "/." not in path
        and path.isascii()
        and path.isprintable()
    ):
        return path  # the common case, checked in one pass of C loops
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"znode path must be absolute: {path!r}")
    if path == "/":
        return path
    if path.endswith("/"):
        raise ValueError(f"znode path must not end with '/': {path!r}")
    for segment in path[1:].split("/"):
        if segment in ("", ".", ".."):
            raise ValueError(f"bad segment {segment!r} in znode path {path!r}")
    for char in path:
        if (
            "\x00" <= char <= "\x1f"
            or "\x7f" <= char <= "\x9f"
            or "\ud800" <= char <= "\uf8ff"
            or "\ufff0" <= char <= "\uffff"
        ):
            raise ValueError(f"character {char!r} not allowed in znode path {path!r}")
    return path


def validate_deletable(path: str) -> str:
    """A path that may be deleted: any valid path but ``/`` (the server says BadArguments)."""
    if validate_path(path) == "/":
        raise ValueError("the root znode cannot be deleted")
    return path


def validate_data(data: bytes) -> bytes:
    if not isinstance(data, bytes):
        raise TypeError(f"znode data must be bytes, not {type(data).__name__}")
    return data


def validate_op(op: Op) -> Op:
    """A multi op checked as the client checks it before sending: ValueError or TypeError."""
    if type(op) is CreateOp or type(op) is SetDataOp:
        validate_path(op.path)
        validate_data(op.data)
    elif type(op) is DeleteOp:
        validate_deletable(op.path)
    elif type(op) is CheckOp:
        validate_path(op.path)
    else:
        raise TypeError(f"not a multi op: {op!r}")
    return op


def parent_of(path: str) -> str:
    """The parent of a validated path other than ``/``."""
    cut = path.rfind("/")
    return path[:cut] if cut > 0 else "/"


# ---- the port ----------------------------------------------------------------------------

@runtime_checkable
class ZkPort(Protocol):
    """ZooKeeper as the simulator drives it, one request at a time. Session ids are opaque."""

    def open_session(self, timeout_ms: int) -> int:
        """createSession; returns the new session's id (never reused)."""
        ...

    def close_session(self, session: int) -> None:
        """closeSession from the client: its ephemerals are deleted, its watches go."""
        ...

    def expire_session(self, session: int) -> None:
        """A fault: the server expires the session (ephemerals and watches go)."""
        ...

    def session_alive(self, session: int) -> bool: ...

    def create(self, session: int, path: str, data: bytes, ephemeral: bool = False) -> Stat:
        """NoNode if the parent is missing, NodeExists if the path is there."""
        ...

    def set_data(self, session: int, path: str, data: bytes, version: int = ANY_VERSION) -> Stat: ...

    def delete(self, session: int, path: str, version: int = ANY_VERSION) -> None:
        """BadVersion before NotEmpty, as PrepRequestProcessor checks them."""
        ...

    def multi(self, session: int, ops: Sequence[Op]) -> list[OpResult]:
        """All or nothing; per-op results, never raises for an op's failure."""
        ...

    def get_data(self, session: int, path: str, watch: bool = False) -> tuple[bytes, Stat]:
        """NoNode (and no watch set) if the path is missing."""
        ...

    def exists(self, session: int, path: str, watch: bool = False) -> Stat | None:
        """The watch is set whether or not the path exists; on an absent path it fires on create."""
        ...

    def get_children(self, session: int, path: str, watch: bool = False) -> list[str]:
        """Sorted child names; NoNode (and no watch set) if the path is missing."""
        ...

    def drain_watch_events(self) -> list[WatchEvent]:
        """The watch events fired since the last drain, ordered by (zxid, session, path, kind)."""
        ...

    def set_available(self, flag: bool) -> None: ...

    def last_zxid(self) -> int:
        """The zxid of the last transaction."""
        ...

    def snapshot(self, root: str = "/") -> dict[str, tuple[bytes, Stat]]:
        """``root`` and every znode under it, without ``/zookeeper`` and its children."""
        ...

    def close(self) -> None: ...


# ---- requests: what a node asks of the port, as an effect ----------------------------------------
# One frozen value per ZooKeeper operation a node uses (ZooKeeper's OpCode names), executed on the
# port method of that name by ``execute``; a node yields one and is sent back the method's result,
# or has its ZkError thrown in (``impl.protocol``).

@dataclass(frozen=True, slots=True)
class CreateSession:
    """createSession; the result is the new session's id."""

    timeout_ms: int


@dataclass(frozen=True, slots=True)
class CloseSession:
    """closeSession from the client."""

    session: int


@dataclass(frozen=True, slots=True)
class Exists:
    """exists: the Stat, or None; ``watch`` sets a data watch."""

    session: int
    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class GetData:
    """getData: (data, Stat); NoNode if absent."""

    session: int
    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class GetChildren:
    """getChildren: the sorted child names; ``watch`` sets a child watch."""

    session: int
    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class Multi:
    """multi: one transaction of typed ops, all or nothing; one OpResult per op."""

    session: int
    ops: tuple[Op, ...]


ZkRequest = CreateSession | CloseSession | Exists | GetData | GetChildren | Multi


def tree_deletion(session: int, path: str) -> Generator[ZkRequest, Any, list[Op]]:
    """The ops deleting ``path`` and every znode below it, deepest first, as Kafka's recursive deletes list them
    (ZkTopicMigrationClient.recursiveChildren, KafkaZkClient.deleteRecursive): yields the GetChildren requests of a
    node's handler (``impl.protocol``); none when ``path`` is gone."""
    try:
        children = yield GetChildren(session, path)
    except NoNode:
        return []
    ops: list[Op] = []
    for child in children:
        ops += yield from tree_deletion(session, f"{path}/{child}")
    return ops + [DeleteOp(path, ANY_VERSION)]


def execute(port: ZkPort, request: ZkRequest) -> Any:
    """Run one request on ``port``: the result, or the port's ZkError raised."""
    match request:
        case GetData(session, path, watch):
            return port.get_data(session, path, watch)
        case Exists(session, path, watch):
            return port.exists(session, path, watch)
        case Multi(session, ops):
            return port.multi(session, ops)
        case GetChildren(session, path, watch):
            return port.get_children(session, path, watch)
        case CreateSession(timeout_ms):
            return port.open_session(timeout_ms)
        case CloseSession(session):
            return port.close_session(session)
        case _:
            assert_never(request)
