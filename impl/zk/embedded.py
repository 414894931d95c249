"""ZooKeeper's semantics in memory: the port's deterministic adapter, for the simulator.

How it works, and which ZooKeeper code each part follows:
- The tree is a dict ``path -> _Znode``, each znode with the set of its children's names. ``/``
  and ZooKeeper's built-in ``/zookeeper``, ``/zookeeper/config`` and ``/zookeeper/quota`` are
  there from the start with zxid 0, as on a fresh server.
- A write request is prepared, then applied, as PrepRequestProcessor and DataTree split it.
  Preparing checks the op against the tree seen through an overlay of the changes the earlier
  ops of the same multi would make (PrepRequestProcessor's outstanding ChangeRecords), so a
  multi is checked without touching the tree; only when every op passes are the ops applied,
  in order. Nothing is copied and nothing rolled back. A single write is a multi of one that
  raises instead of returning results.
- The checks, in PrepRequestProcessor's order: create: parent missing NONODE, path present
  NODEEXISTS, ephemeral parent NOCHILDRENFOREPHEMERALS; setData and check: NONODE, BADVERSION;
  delete: NONODE, BADVERSION, then NOTEMPTY.
- Every request that reaches the server and writes takes the next zxid, successful or not
  (a failed one is an error txn), and so do createSession and closeSession (an expiry is a
  closeSession the server issues). A multi takes one zxid, whatever its number of ops.
- Stat as DataTree keeps it: czxid for the znode's life, setData bumps version and mzxid, a
  child create or delete sets the parent's pzxid; the parent counts child creates and reports
  ``cversion = 2 * creates - children`` (DataNode.copyStat). A re-created path is a new znode.
- Watches: two tables ``path -> sessions`` (data and child watches, as the server's
  WatchManagers), each entry one-shot; ``armed_watches`` lists them, for the refinement map
  (an inspection beyond the port). Firing records ``(zxid, session, path, kind)``; a drain
  sorts by that tuple. On delete, a session already notified through a data watch is not
  notified again through its child watch on the same path (DataTree.deleteNode).
- Sessions: ids ``SESSION_ID_BASE + n``, n counting up from 0, never reused. No clock, no
  threads, no randomness: the same calls give the same results, zxids and ids.
- Lagging servers (an inspection and fault beyond the port, as ``set_available``): ``lag(session)``
  connects a session to a server that stops applying transactions, so its reads (getData, exists,
  getChildren) see the tree as it was then; ``catch_up(session)`` brings that server up to the
  leader. A write is decided against the leader's tree, and the server applies it before it
  answers, so any write request of the session ends its lag (model.zookeeper's views).
"""

from __future__ import annotations

from collections.abc import Sequence

from impl.zk.port import (
    ANY_VERSION,
    ConnectionLoss,
    CreateOp,
    DeleteOp,
    NoNode,
    Op,
    OpResult,
    SessionExpired,
    SetDataOp,
    Stat,
    WatchEvent,
    WatchKind,
    ZkCode,
    error_for,
    parent_of,
    validate_data,
    validate_deletable,
    validate_op,
    validate_path,
)

__all__ = ["SESSION_ID_BASE", "EmbeddedZk"]

SESSION_ID_BASE = 0x1_0000_0000

_OK = ZkCode.OK
_NO_NODE = ZkCode.NO_NODE
_NODE_EXISTS = ZkCode.NODE_EXISTS
_BAD_VERSION = ZkCode.BAD_VERSION
_NOT_EMPTY = ZkCode.NOT_EMPTY
_NO_CHILDREN = ZkCode.NO_CHILDREN_FOR_EPHEMERALS
_OK_RESULT = OpResult(ZkCode.OK)  # also what an op before a failing one reports
_INCONSISTENT = OpResult(ZkCode.RUNTIME_INCONSISTENCY)
_BUILT_IN = ("/zookeeper", "/zookeeper/config", "/zookeeper/quota")


class _Znode:
    __slots__ = ("data", "czxid", "mzxid", "pzxid", "version", "creates", "owner", "children", "cached")

    def __init__(self, data: bytes, zxid: int, owner: int) -> None:
        self.data = data
        self.czxid = zxid
        self.mzxid = zxid
        self.pzxid = zxid
        self.version = 0
        self.creates = 0  # child creates: DataTree's stored cversion
        self.owner = owner
        self.children: set[str] = set()
        self.cached: Stat | None = None  # the Stat until the znode changes (a frozen dataclass costs ~2 us)

    @property
    def nchildren(self) -> int:
        return len(self.children)

    def stat(self) -> Stat:
        if self.cached is None:
            n = len(self.children)
            self.cached = Stat(self.czxid, self.mzxid, self.pzxid, self.version, 2 * self.creates - n, self.owner, n,
                               len(self.data))
        return self.cached


class _Pending:
    """What a multi's earlier ops would have made of a znode (a ChangeRecord)."""

    __slots__ = ("version", "owner", "nchildren")

    def __init__(self, version: int, owner: int, nchildren: int) -> None:
        self.version = version
        self.owner = owner
        self.nchildren = nchildren


class _Session:
    __slots__ = ("timeout_ms", "ephemerals", "watches")

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.ephemerals: set[str] = set()
        self.watches: set[tuple[bool, str]] = set()  # (is a child watch, path)


class EmbeddedZk:
    """The in-memory ZooKeeper; see the module docstring for its rules."""

    def __init__(self) -> None:
        root = _Znode(b"", 0, 0)
        self._nodes: dict[str, _Znode] = {"/": root}
        for path in _BUILT_IN:
            # Added by DataTree's constructor without a create: no cversion bump.
            self._nodes[path] = _Znode(b"", 0, 0)
            self._nodes[parent_of(path)].children.add(path.rsplit("/", 1)[1])
        self._zxid = 0
        self._session_count = 0
        self._sessions: dict[int, _Session] = {}  # the live ones; ids below the count are dead
        self._data_watches: dict[str, set[int]] = {}
        self._child_watches: dict[str, set[int]] = {}
        self._fired: list[tuple[int, int, str, WatchKind]] = []
        self._available = True
        # session -> (zxid, path -> (data, stat, children)): the tree its lagging server holds
        self._views: dict[int, tuple[int, dict[str, tuple[bytes, Stat, tuple[str, ...]]]]] = {}

    # ---- sessions ----------------------------------------------------------------------

    def open_session(self, timeout_ms: int) -> int:
        if timeout_ms <= 0:
            raise ValueError(f"session timeout must be positive: {timeout_ms}")
        if not self._available:
            raise ConnectionLoss()
        self._zxid += 1
        session = SESSION_ID_BASE + self._session_count
        self._session_count += 1
        self._sessions[session] = _Session(timeout_ms)
        return session

    def close_session(self, session: int) -> None:
        self._end_session(session)

    def expire_session(self, session: int) -> None:
        # On the server an expiry is the closeSession txn the SessionTracker issues.
        self._end_session(session)

    def session_alive(self, session: int) -> bool:
        return session in self._sessions

    def session_timeout_ms(self, session: int) -> int:
        """The timeout a live session was opened with (the simulator decides when it expires)."""
        self._known(session)
        state = self._sessions.get(session)
        if state is None:
            raise SessionExpired()
        return state.timeout_ms

    def _end_session(self, session: int) -> None:
        self._known(session)
        if not self._available:
            raise ConnectionLoss()
        state = self._sessions.pop(session, None)
        if state is None:
            return
        self._zxid += 1
        zxid = self._zxid
        for is_child, path in state.watches:
            table = self._child_watches if is_child else self._data_watches
            watchers = table[path]
            watchers.discard(session)
            if not watchers:
                del table[path]
        state.watches.clear()
        for path in sorted(state.ephemerals):
            self._apply_delete(path, zxid)

    def _known(self, session: int) -> None:
        if not SESSION_ID_BASE <= session < SESSION_ID_BASE + self._session_count:
            raise ValueError(f"unknown ZooKeeper session {session:#x}")

    def _live(self, session: int) -> _Session:
        """The session's state for a request: ConnectionLoss first, then SessionExpired."""
        state = self._sessions.get(session)
        if state is None:
            self._known(session)
        if not self._available:
            raise ConnectionLoss()
        if state is None:
            raise SessionExpired()
        return state

    # ---- writes ------------------------------------------------------------------------

    def create(self, session: int, path: str, data: bytes, ephemeral: bool = False) -> Stat:
        validate_path(path)
        validate_data(data)
        self._live(session)
        self._views.pop(session, None)
        self._zxid += 1
        owner = session if ephemeral else 0
        code = self._prep_create(path, owner, None)
        if code is not _OK:
            raise error_for(code, path)
        return self._apply_create(path, data, owner, self._zxid).stat()

    def set_data(self, session: int, path: str, data: bytes, version: int = ANY_VERSION) -> Stat:
        validate_path(path)
        validate_data(data)
        self._live(session)
        self._views.pop(session, None)
        self._zxid += 1
        code = self._prep_version(path, version, None)
        if code is not _OK:
            raise error_for(code, path)
        return self._apply_set(path, data, self._zxid)

    def delete(self, session: int, path: str, version: int = ANY_VERSION) -> None:
        validate_deletable(path)
        self._live(session)
        self._views.pop(session, None)
        self._zxid += 1
        code = self._prep_delete(path, version, None)
        if code is not _OK:
            raise error_for(code, path)
        self._apply_delete(path, self._zxid)

    def multi(self, session: int, ops: Sequence[Op]) -> list[OpResult]:
        ops = [validate_op(op) for op in ops]
        self._live(session)
        self._views.pop(session, None)
        self._zxid += 1
        zxid = self._zxid
        overlay: dict[str, _Pending | None] = {}
        for i, op in enumerate(ops):
            if type(op) is CreateOp:
                code = self._prep_create(op.path, session if op.ephemeral else 0, overlay)
            elif type(op) is SetDataOp:
                code = self._prep_version(op.path, op.version, overlay)
                if code is _OK:
                    node = self._record(op.path, overlay)
                    assert node is not None
                    overlay[op.path] = _Pending(node.version + 1, node.owner, node.nchildren)
            elif type(op) is DeleteOp:
                code = self._prep_delete(op.path, op.version, overlay)
            else:
                code = self._prep_version(op.path, op.version, overlay)
            if code is not _OK:
                return [_OK_RESULT] * i + [OpResult(code)] + [_INCONSISTENT] * (len(ops) - i - 1)
        results = []
        for op in ops:
            if type(op) is CreateOp:
                self._apply_create(op.path, op.data, session if op.ephemeral else 0, zxid)
                results.append(OpResult(_OK, None, op.path))
            elif type(op) is SetDataOp:
                results.append(OpResult(_OK, self._apply_set(op.path, op.data, zxid), None))
            elif type(op) is DeleteOp:
                self._apply_delete(op.path, zxid)
                results.append(_OK_RESULT)
            else:
                results.append(_OK_RESULT)
        return results

    # Preparing: check an op against the tree as the earlier ops of its multi leave it
    # (``overlay``: path -> what they made of it, None if they deleted it; None for a single
    # request) and, in a multi, note the op's change in the overlay.

    def _record(self, path: str, overlay: dict[str, _Pending | None] | None) -> _Znode | _Pending | None:
        if overlay and path in overlay:
            return overlay[path]
        return self._nodes.get(path)

    def _prep_create(self, path: str, owner: int, overlay: dict[str, _Pending | None] | None) -> ZkCode:
        if path == "/":
            return _NODE_EXISTS
        parent_path = parent_of(path)
        parent = self._record(parent_path, overlay)
        if parent is None:
            return _NO_NODE
        if self._record(path, overlay) is not None:
            return _NODE_EXISTS
        if parent.owner:
            return _NO_CHILDREN
        if overlay is not None:
            overlay[path] = _Pending(0, owner, 0)
            overlay[parent_path] = _Pending(parent.version, parent.owner, parent.nchildren + 1)
        return _OK

    def _prep_version(self, path: str, version: int, overlay: dict[str, _Pending | None] | None) -> ZkCode:
        """check and setData: the znode exists and has the expected version."""
        node = self._record(path, overlay)
        if node is None:
            return _NO_NODE
        if version != ANY_VERSION and version != node.version:
            return _BAD_VERSION
        return _OK

    def _prep_delete(self, path: str, version: int, overlay: dict[str, _Pending | None] | None) -> ZkCode:
        code = self._prep_version(path, version, overlay)
        if code is not _OK:
            return code
        node = self._record(path, overlay)
        assert node is not None
        if node.nchildren:
            return _NOT_EMPTY
        if overlay is not None:
            parent_path = parent_of(path)
            parent = self._record(parent_path, overlay)
            assert parent is not None
            overlay[path] = None
            overlay[parent_path] = _Pending(parent.version, parent.owner, parent.nchildren - 1)
        return _OK

    # Applying: the op is known to succeed.

    def _apply_create(self, path: str, data: bytes, owner: int, zxid: int) -> _Znode:
        node = self._nodes[path] = _Znode(data, zxid, owner)
        cut = path.rfind("/")
        parent_path = path[:cut] if cut else "/"
        parent = self._nodes[parent_path]
        parent.children.add(path[cut + 1:])
        parent.creates += 1
        parent.pzxid = zxid
        parent.cached = None
        if owner:
            self._sessions[owner].ephemerals.add(path)
        if self._data_watches:
            self._fire(self._data_watches, path, "created", zxid)
        if self._child_watches:
            self._fire(self._child_watches, parent_path, "child", zxid)
        return node

    def _apply_set(self, path: str, data: bytes, zxid: int) -> Stat:
        node = self._nodes[path]
        node.data = data
        node.version += 1
        node.mzxid = zxid
        node.cached = None
        if self._data_watches:
            self._fire(self._data_watches, path, "changed", zxid)
        return node.stat()

    def _apply_delete(self, path: str, zxid: int) -> None:
        node = self._nodes.pop(path)
        cut = path.rfind("/")
        parent_path = path[:cut] if cut else "/"
        parent = self._nodes[parent_path]
        parent.children.discard(path[cut + 1:])
        if zxid > parent.pzxid:
            parent.pzxid = zxid
        parent.cached = None
        if node.owner:
            owner = self._sessions.get(node.owner)
            if owner is not None:
                owner.ephemerals.discard(path)
        notified = self._fire(self._data_watches, path, "deleted", zxid)
        self._fire(self._child_watches, path, "deleted", zxid, notified)
        self._fire(self._child_watches, parent_path, "child", zxid)

    def _fire(
        self,
        table: dict[str, set[int]],
        path: str,
        kind: WatchKind,
        zxid: int,
        already: set[int] | None = None,
    ) -> set[int] | None:
        watchers = table.pop(path, None)
        if watchers is None:
            return None
        is_child = table is self._child_watches
        for session in watchers:
            self._sessions[session].watches.discard((is_child, path))
            if already is None or session not in already:
                self._fired.append((zxid, session, path, kind))
        return watchers

    # ---- reads -------------------------------------------------------------------------

    def get_data(self, session: int, path: str, watch: bool = False) -> tuple[bytes, Stat]:
        validate_path(path)
        state = self._live(session)
        if session in self._views:
            data, stat, _ = self._seen(session, path)
            return data, stat
        node = self._nodes.get(path)
        if node is None:
            raise NoNode(path)
        if watch:
            self._watch(self._data_watches, state, session, False, path)
        return node.data, node.stat()

    def exists(self, session: int, path: str, watch: bool = False) -> Stat | None:
        validate_path(path)
        state = self._live(session)
        if session in self._views:
            try:
                return self._seen(session, path)[1]
            except NoNode:
                return None
        if watch:
            self._watch(self._data_watches, state, session, False, path)
        node = self._nodes.get(path)
        return None if node is None else node.stat()

    def get_children(self, session: int, path: str, watch: bool = False) -> list[str]:
        validate_path(path)
        state = self._live(session)
        if session in self._views:
            return list(self._seen(session, path)[2])
        node = self._nodes.get(path)
        if node is None:
            raise NoNode(path)
        if watch:
            self._watch(self._child_watches, state, session, True, path)
        return sorted(node.children)

    def _seen(self, session: int, path: str) -> tuple[bytes, Stat, tuple[str, ...]]:
        """``path`` as the session's lagging server holds it. Only the sessions of KRaft controllers and of
        ZooKeeper-mode brokers that are not the controller lag, and those set no watches, so a read from a view
        sets none."""
        found = self._views[session][1].get(path)
        if found is None:
            raise NoNode(path)
        return found

    @staticmethod
    def _watch(table: dict[str, set[int]], state: _Session, session: int, is_child: bool, path: str) -> None:
        table.setdefault(path, set()).add(session)
        state.watches.add((is_child, path))

    # ---- inspection and faults ---------------------------------------------------------

    def armed_watches(self) -> list[tuple[int, str, str]]:
        """``(session, path, "data" | "child")`` for every watch set and not fired yet, sorted.

        What the server's WatchManagers hold (``wchp``), for the refinement map: the model keeps
        the armed watches in its state. A data watch set by ``exists`` on an absent path is one.
        """
        armed = [(session, path, "data") for path, sessions in self._data_watches.items() for session in sessions]
        armed += [(session, path, "child") for path, sessions in self._child_watches.items() for session in sessions]
        return sorted(armed)

    def drain_watch_events(self) -> list[WatchEvent]:
        fired = sorted(self._fired)
        self._fired.clear()
        return [WatchEvent(session, path, kind) for _, session, path, kind in fired]

    def set_available(self, flag: bool) -> None:
        self._available = bool(flag)

    def lag(self, session: int) -> None:
        """The session's server stops applying transactions: its reads show the tree as it is now."""
        self._known(session)
        tree = {path: (node.data, node.stat(), tuple(sorted(node.children))) for path, node in self._nodes.items()}
        self._views[session] = (self._zxid, tree)

    def catch_up(self, session: int) -> None:
        """The session's server has applied every transaction: its reads show the leader's tree again."""
        self._views.pop(session, None)

    def lagging(self, session: int) -> bool:
        return session in self._views

    def view_snapshot(self, session: int) -> tuple[int, dict[str, tuple[bytes, Stat]]]:
        """(zxid, ``snapshot()``) of the tree the session's lagging server holds, for the refinement map."""
        zxid, tree = self._views[session]
        return zxid, {path: (data, stat) for path, (data, stat, _) in sorted(tree.items()) if not _is_built_in(path)}

    def last_zxid(self) -> int:
        return self._zxid

    def snapshot(self, root: str = "/") -> dict[str, tuple[bytes, Stat]]:
        validate_path(root)
        prefix = "/" if root == "/" else root + "/"
        return {
            path: (node.data, node.stat())
            for path, node in sorted(self._nodes.items())
            if (path == root or path.startswith(prefix)) and not _is_built_in(path)
        }

    def close(self) -> None:
        self._sessions.clear()
        self._data_watches.clear()
        self._child_watches.clear()
        self._fired.clear()
        self._views.clear()


def _is_built_in(path: str) -> bool:
    return path == "/zookeeper" or path.startswith("/zookeeper/")
