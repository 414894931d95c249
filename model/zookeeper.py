"""ZooKeeper as the control plane sees it: znodes, zxids, sessions, ephemerals, multi, watches.

Rules (ZooKeeper's own, as its PrepRequestProcessor and DataTree implement them):
- Every write request is one transaction and takes the next zxid, whether it succeeds or
  fails (a failed request is logged as an error txn). Creating and closing a session are
  transactions too. Reads take no zxid.
- A znode keeps its czxid for its whole life; setData bumps its version and sets its mzxid.
  Deleting and re-creating a path makes a new znode: version 0, a new czxid.
- ``multi`` runs its ops in order against the tree as the earlier ops left it, and applies all
  of them or none. Results are per op, as ZooKeeper reports them: on failure the ops before
  the failing one read OK, the failing one its own code, the ones after RUNTIMEINCONSISTENCY.
- A session that closes or expires takes its ephemeral znodes and its watches with it.
- Session ids are not ordered: a new session takes the smallest id not in use. KIP-380 §Rejected
  Alternatives rejects session ids as broker generations for exactly that reason. (Real ids are
  never reused; here they are, to keep states finite, so a client's session is its only if the
  id is alive *and* registered to that client: ``session_client``.)
- Watches are one-shot. A fired watch becomes a notification addressed to the session's client;
  the client consumes it when it processes the event, which may be much later.
- While ZooKeeper is unavailable (quorum lost), nothing is read, written, opened or expired.
- A client's reads come from the server it is connected to, which may lag the leader (``views``: the
  tree as of an older zxid, per client). ZooKeeper promises only that a client never reads older
  state than it has seen: a view is frozen at the current tree when its server falls behind
  (``lag``), so it starts at what the client saw, and it only catches up (``catch_up``), to the
  leader's tree. A write is decided at the leader, never against a view, and its server has applied
  it before answering, so a client's own write (``multi`` with ``reader``) ends its lag, and so does
  opening a session (createSession is a transaction too). Kafka 3.9's ZooKeeperClient has no sync
  request, so a view ends only then or when its server catches up. A session that moves to another
  server (its server lost) reconnects with the last zxid it saw and is refused by a server behind it,
  so its new server is one the client could have been lagging on from that moment: a view frozen when
  the client last looked, which ``lag`` already gives (``docs/model.md``, lagging ZooKeeper reads).

Abstraction: only the znodes the control plane reads exist; parents are implicit (no NoNode for
a missing parent, no NotEmpty on delete). Data is any hashable value. Seeded bugs
(``model.bugs``) that break ZooKeeper's own rules are threaded through as ``bugs``.

Types: a path the control plane names is declared as ``ZPath[D]`` or ``ZDir[D]`` (``model.types``),
and ``get`` and ``children`` read such a path's data as a ``D``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable
from enum import Enum
from typing import Generic, TypeVar, overload

from model.bugs import Bug
from model.record import Record, record
from model.types import ANY_VERSION, NO_SESSION, D, SessionId, ZDir, ZkCode, ZkVersion, ZPath, Zxid

D_co = TypeVar("D_co", bound=Hashable, covariant=True)


class WatchKind(Enum):
    DATA = "data"  # getData / exists: fires on create, setData, delete of the path
    CHILD = "child"  # getChildren: fires on create or delete of a child, and delete of the path


@record
class Znode(Record, Generic[D_co]):
    data: D_co
    version: ZkVersion
    czxid: Zxid
    mzxid: Zxid
    ephemeral_owner: SessionId  # NO_SESSION for a persistent znode


@record
class ZkView(Record):
    """The tree as a lagging server holds it: as of ``zxid``, older than the leader's."""

    zxid: Zxid
    paths: tuple[str, ...]
    nodes: tuple[Znode[Hashable], ...]


@record
class ZkState(Record):
    zxid: Zxid  # the last zxid handed out
    paths: tuple[str, ...]  # sorted; nodes[i] is the znode at paths[i]
    nodes: tuple[Znode[Hashable], ...]
    sessions: tuple[tuple[SessionId, int], ...]  # live sessions, sorted: (session id, client id)
    watches: frozenset[tuple[SessionId, str, WatchKind]]
    notifications: frozenset[tuple[int, str, WatchKind]]  # fired, not yet consumed: (client, path, kind)
    available: bool
    views: tuple[tuple[int, ZkView], ...] = ()  # sorted by client: the lagging server each reads from


# ---- multi ops ---------------------------------------------------------------------------

@record
class Check(Record):
    path: str
    version: ZkVersion


@record
class Create(Record):
    path: str
    data: Hashable
    ephemeral: bool = False


@record
class SetData(Record):
    path: str
    data: Hashable
    version: ZkVersion = ANY_VERSION


@record
class Delete(Record):
    path: str
    version: ZkVersion = ANY_VERSION


Op = Check | Create | SetData | Delete

NO_BUGS: frozenset[Bug] = frozenset()


# ---- construction and reads --------------------------------------------------------------

def initial(nodes: dict[str, Hashable]) -> ZkState:
    """A fresh ensemble holding persistent ``nodes``, created one per zxid in path order."""
    paths = tuple(sorted(nodes))
    znodes = tuple(
        Znode(nodes[p], ZkVersion(0), Zxid(i + 1), Zxid(i + 1), NO_SESSION) for i, p in enumerate(paths)
    )
    return ZkState(Zxid(len(paths)), paths, znodes, (), frozenset(), frozenset(), True)


@overload
def get(zk: ZkState, path: ZPath[D]) -> Znode[D] | None: ...
@overload
def get(zk: ZkState, path: str) -> Znode[Hashable] | None: ...
def get(zk: ZkState, path: str) -> Znode[Hashable] | None:
    i = bisect_left(zk.paths, path)
    if i < len(zk.paths) and zk.paths[i] == path:
        return zk.nodes[i]
    return None


def get_existing(zk: ZkState, path: ZPath[D]) -> Znode[D]:
    """The znode at ``path``, which the caller knows exists (it was just written, or is never deleted).

    Fails loudly when it does not: the caller's reading of the tree is wrong, which is a bug."""
    node = get(zk, path)
    if node is None:
        raise LookupError(f"no znode at {path}, which the caller knows to exist")
    return node


def parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


@overload
def children(zk: ZkState, path: ZDir[D]) -> tuple[tuple[str, Znode[D]], ...]: ...
@overload
def children(zk: ZkState, path: str) -> tuple[tuple[str, Znode[Hashable]], ...]: ...
def children(zk: ZkState, path: str) -> tuple[tuple[str, Znode[Hashable]], ...]:
    """The (child name, znode) pairs directly under ``path``, in name order."""
    prefix = path + "/"
    i = bisect_left(zk.paths, prefix)
    found: list[tuple[str, Znode[Hashable]]] = []
    while i < len(zk.paths) and zk.paths[i].startswith(prefix):
        rest = zk.paths[i][len(prefix):]
        if "/" not in rest:
            found.append((rest, zk.nodes[i]))
        i += 1
    return tuple(found)


def session_alive(zk: ZkState, session: SessionId) -> bool:
    return any(s == session for s, _ in zk.sessions)


def session_client(zk: ZkState, session: SessionId) -> int | None:
    for s, client in zk.sessions:
        if s == session:
            return client
    return None


def seen_by(zk: ZkState, client: int) -> ZkState:
    """ZooKeeper as ``client`` reads it: the tree of its server's view when it lags, else the leader's.

    Pass the result to ``get`` and ``children`` only; watches, sessions and writes are the leader's."""
    for c, view in zk.views:
        if c == client:
            return zk.replace(zxid=view.zxid, paths=view.paths, nodes=view.nodes)
        if c > client:
            break
    return zk


def lagging(zk: ZkState, client: int) -> bool:
    return any(c == client for c, _ in zk.views)


def lag(zk: ZkState, client: int) -> ZkState:
    """``client``'s server stops applying transactions: from now on it reads the tree as it is now."""
    view = ZkView(zk.zxid, zk.paths, zk.nodes)
    return zk.replace(views=tuple(sorted(zk.views + ((client, view),), key=lambda cv: cv[0])))


def catch_up(zk: ZkState, client: int) -> ZkState:
    """``client``'s server has applied every transaction: it reads the leader's tree again."""
    if not lagging(zk, client):
        return zk
    return zk.replace(views=tuple(cv for cv in zk.views if cv[0] != client))


# ---- sessions ----------------------------------------------------------------------------

def open_session(zk: ZkState, client: int) -> tuple[ZkState, SessionId]:
    """createSession is a transaction: the server the new session connects to has applied it before it answers,
    so a view of ``client``'s ends here, as with any write of its own."""
    zk = catch_up(zk, client)
    used = {s for s, _ in zk.sessions}
    session = SessionId(1)
    while session in used:
        session = SessionId(session + 1)
    sessions = tuple(sorted(zk.sessions + ((session, client),)))
    return zk.replace(zxid=Zxid(zk.zxid + 1), sessions=sessions), session


def close_session(zk: ZkState, session: SessionId, bugs: frozenset[Bug] = NO_BUGS) -> ZkState:
    """closeSession or expiry: the session's ephemerals and watches go in one transaction."""
    zxid = Zxid(zk.zxid + 1)
    doomed = () if Bug.EXPIRY_KEEPS_EPHEMERALS in bugs else tuple(
        p for p, n in zip(zk.paths, zk.nodes) if n.ephemeral_owner == session
    )
    paths, nodes = list(zk.paths), list(zk.nodes)
    for path in doomed:
        i = paths.index(path)
        del paths[i], nodes[i]
    watches = frozenset(w for w in zk.watches if w[0] != session)
    zk = zk.replace(
        zxid=zxid,
        paths=tuple(paths),
        nodes=tuple(nodes),
        sessions=tuple(s for s in zk.sessions if s[0] != session),
        watches=watches,
    )
    return _fire(zk, [(p, "delete") for p in doomed])


def add_watch(zk: ZkState, session: SessionId, path: str, kind: WatchKind) -> ZkState:
    return zk.replace(watches=zk.watches | {(session, path, kind)})


def consume(zk: ZkState, client: int, path: str, kind: WatchKind) -> ZkState:
    return zk.replace(notifications=zk.notifications - {(client, path, kind)})


def pending(zk: ZkState, client: int, path: str, kind: WatchKind) -> bool:
    return (client, path, kind) in zk.notifications


def _fire(zk: ZkState, events: list[tuple[str, str]]) -> ZkState:
    """Turn the watches that ``events`` (path, "create" | "set" | "delete") trigger into notifications."""
    if not zk.watches or not events:
        return zk
    triggered = set()
    for path, what in events:
        triggered.add((path, WatchKind.DATA))
        if what != "set":
            triggered.add((parent(path), WatchKind.CHILD))
        if what == "delete":
            triggered.add((path, WatchKind.CHILD))
    fired = [w for w in zk.watches if (w[1], w[2]) in triggered]
    if not fired:
        return zk
    clients = dict(zk.sessions)
    return zk.replace(
        watches=zk.watches.difference(fired),
        notifications=zk.notifications | {(clients[s], p, k) for s, p, k in fired},
    )


# ---- writes ------------------------------------------------------------------------------

def multi(
    zk: ZkState, session: SessionId, ops: tuple[Op, ...], bugs: frozenset[Bug] = NO_BUGS, reader: int | None = None
) -> tuple[ZkState, tuple[ZkCode, ...]]:
    """Run ``ops`` as one ZooKeeper transaction on behalf of ``session``.

    Returns the new state and one result code per op. The zxid advances even when the
    multi fails; the tree changes only when every op succeeds. ``reader``: the client whose
    server answers, which has applied everything up to this transaction when it does.
    """
    if not zk.available:
        return zk, (ZkCode.CONNECTION_LOSS,) * len(ops)
    if reader is not None:
        zk = catch_up(zk, reader)
    # NO_SESSION: a client that creates no ephemerals (a KRaft controller writes persistent znodes only).
    if session != NO_SESSION and not session_alive(zk, session):
        return zk, (ZkCode.SESSION_EXPIRED,) * len(ops)
    zxid = zk.zxid if Bug.WRITE_WITHOUT_ZXID in bugs else Zxid(zk.zxid + 1)
    tree = dict(zip(zk.paths, zk.nodes))
    events: list[tuple[str, str]] = []
    results: list[ZkCode] = []
    failed_at = -1
    for i, op in enumerate(ops):
        code = _apply(tree, op, zxid, session, bugs)
        results.append(code)
        if code is not ZkCode.OK:
            failed_at = i
            break
        if not isinstance(op, Check):  # a check reads; it triggers no watch
            events.append((op.path, _EVENT[type(op)]))
    if failed_at >= 0:
        results.extend([ZkCode.RUNTIME_INCONSISTENCY] * (len(ops) - failed_at - 1))
        if Bug.MULTI_APPLIES_PREFIX not in bugs or failed_at == 0:
            return zk.replace(zxid=Zxid(zk.zxid + 1)), tuple(results)
        # the seeded bug: keep what the ops before the failing one did
    paths = tuple(sorted(tree))
    zk = zk.replace(zxid=zxid, paths=paths, nodes=tuple(tree[p] for p in paths))
    return _fire(zk, events), tuple(results)


_EVENT = {Create: "create", SetData: "set", Delete: "delete"}


def _apply(tree: dict[str, Znode[Hashable]], op: Op, zxid: Zxid, session: SessionId, bugs: frozenset[Bug]) -> ZkCode:
    node = tree.get(op.path)
    match op:
        case Check(version=version):
            if node is None:
                return ZkCode.NO_NODE
            if version != ANY_VERSION and version != node.version:
                return ZkCode.BAD_VERSION
        case Create(data=data, ephemeral=ephemeral):
            if node is not None:
                return ZkCode.NODE_EXISTS
            owner = session if ephemeral else NO_SESSION
            tree[op.path] = Znode(data, ZkVersion(0), zxid, zxid, owner)
        case SetData(data=data, version=version):
            if node is None:
                return ZkCode.NO_NODE
            if version != ANY_VERSION and version != node.version:
                return ZkCode.BAD_VERSION
            czxid = zxid if Bug.SETDATA_RESETS_CZXID in bugs else node.czxid
            tree[op.path] = Znode(data, ZkVersion(node.version + 1), czxid, zxid, node.ephemeral_owner)
        case Delete(version=version):
            if node is None:
                return ZkCode.NO_NODE
            if version != ANY_VERSION and version != node.version:
                return ZkCode.BAD_VERSION
            del tree[op.path]
    return ZkCode.OK


def succeeded(results: tuple[ZkCode, ...]) -> bool:
    return all(r is ZkCode.OK for r in results)
