"""The port on a real ZooKeeper server, through kazoo: one KazooClient per session.

It exists to check that the embedded store is ZooKeeper: the conformance suite runs the same
cases on both. It is driven from one thread, one request at a time.

How it works, and the traps it handles:
- Session id = ``client.client_id[0]``. kazoo's command retry is off, so a request is sent once.
- Errors: kazoo's exceptions carry ZooKeeper's wire code; each maps to the port's exception.
- ``multi``: kazoo's ``transaction().commit()`` does not raise when an op fails; it returns the
  per-op list, ``RolledBackError`` (the server's code 0) for the ops before the failing one,
  the failing op's exception, ``RuntimeInconsistency`` after it. Mapped one to one to OpResults.
- Zxids: the reply header of every response carries one (kazoo keeps it in
  ``client.last_zxid``): for a write, the zxid of its txn, failed or not; for a read, the last
  zxid the server has processed. A write's zxid is read from the writing client; after opening,
  closing or expiring a session, from a read on the adapter's own inspection session, which is
  also what ``snapshot`` reads with. So ``last_zxid`` is exact as long as nobody else writes to
  the server. The inspection session is opened in ``__init__`` and takes one zxid.
- Expiry: ZooKeeper's test-suite trick. A second client connects with the session's
  ``(id, password)`` (the server closes the first client's connection: CLIENT_RECONNECT) and is
  stopped: its closeSession expires the session on the server (one txn, as an expiry by the
  SessionTracker). The first client must not win the reconnect race against the second, so
  its host list is first pointed at a closed port; it is stopped after the expiry.
- A session never comes back: after LOST (its session expired) kazoo would open a *new* session
  on its own. A listener on every client points its host list at a closed port on LOST, on the
  connection thread before kazoo reconnects, and the session is marked expired; its client is
  stopped on the next call (a client cannot be stopped from its own thread). This also covers
  a session the server expires on its own (a stalled process).
- Watches: kazoo runs watch callbacks on each client's callback thread. The callback queues
  ``(session, path, kind)``; kazoo hands the same WatchedEvent to the data and the child
  watcher of a deleted path, which is one server event, so a repeat of the last event object is
  dropped. Delivery is made deterministic: after every transaction, for every live session
  with an armed watch, (1) a ``sync`` round trip (except for the writer itself): the server
  queued the notifications of a txn on every watcher's connection before answering the
  writer, so the sync's reply comes after them on that connection and kazoo has dispatched
  them to the callback queue when ``sync`` returns; (2) a marker callback through
  ``handler.dispatch_callback``, waited for: the queue is FIFO and served by one thread, so
  every callback queued before it has run. The events gathered are then stamped with the
  txn's zxid. Sessions without armed watches cost nothing. Both steps are needed: with the
  marker alone the conformance suite missed events in 3 runs of 3, with the sync alone in 1 of 3.
- kazoo drops a client's watches when its connection is lost and reconnected (it fires NONE
  events to them); that would silently lose events, so it is recorded and the next
  ``drain_watch_events`` raises.
- ``set_available(False)`` is emulated here: the server stays up and every request raises
  ConnectionLoss without reaching it. Sessions do not expire meanwhile (kazoo keeps pinging),
  as in the port's rule.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import Callback, EventType, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from impl.zk.port import (
    ANY_VERSION,
    ConnectionLoss,
    CreateOp,
    DeleteOp,
    Op,
    OpResult,
    SessionExpired,
    SetDataOp,
    Stat,
    WatchEvent,
    WatchKind,
    ZkCode,
    error_for,
    validate_data,
    validate_deletable,
    validate_op,
    validate_path,
)

__all__ = ["KazooPort"]

_LOG = logging.getLogger("kraftcheck.zk.kazoo")
# One child logger per client, so that the clients taking part in an expiry (which log their
# dropped connections as warnings) can be quietened without touching the others.
_CLIENT_NUMBERS = itertools.count()
# A closed port on loopback: where a client whose session is dead may try to reconnect.
_NOWHERE = "127.0.0.1:1"
_KINDS: dict[str, WatchKind] = {
    EventType.CREATED: "created",
    EventType.DELETED: "deleted",
    EventType.CHANGED: "changed",
    EventType.CHILD: "child",
}


def _stat(st: ZnodeStat) -> Stat:
    return Stat(st.czxid, st.mzxid, st.pzxid, st.version, st.cversion, st.ephemeralOwner, st.numChildren,
                st.dataLength)


class _Session:
    __slots__ = ("sid", "client", "timeout_ms", "armed", "last_event", "on_watch")

    def __init__(self, sid: int, client: KazooClient, timeout_ms: int) -> None:
        self.sid = sid
        self.client = client
        self.timeout_ms = timeout_ms
        self.armed: set[tuple[bool, str]] = set()  # (is a child watch, path), guarded by the port's lock
        self.last_event: WatchedEvent | None = None  # only touched on the client's callback thread
        self.on_watch: Callable[[WatchedEvent], None] = lambda event: None


class KazooPort:
    """The port on a real ZooKeeper server (``hosts``: kazoo's connect string)."""

    def __init__(self, hosts: str, *, request_timeout: float = 10.0) -> None:
        self._hosts = hosts
        self._timeout = request_timeout
        self._lock = threading.Lock()
        self._sessions: dict[int, _Session] = {}
        self._dead: set[int] = set()
        self._inbox: list[tuple[int, str, WatchKind]] = []  # arrived, not yet stamped with a zxid
        self._fired: list[tuple[int, int, str, WatchKind]] = []
        self._faults: list[str] = []
        self._zombies: list[KazooClient] = []  # clients of sessions that expired on their own, to stop
        self._available = True
        self._closed = False
        self._admin = self._start_client(30_000)
        self._zxid = self._read_zxid()

    # ---- sessions ----------------------------------------------------------------------

    def _start_client(
        self, timeout_ms: int, client_id: tuple[int, bytes] | None = None, *, quiet: bool = False
    ) -> KazooClient:
        logger = _LOG.getChild(f"client{next(_CLIENT_NUMBERS)}")
        if quiet:
            logger.setLevel(logging.ERROR)
        client = KazooClient(
            hosts=self._hosts,
            timeout=timeout_ms / 1000.0,
            client_id=client_id,
            connection_retry=KazooRetry(max_tries=-1, delay=0.01, backoff=1.5, max_delay=0.2),
            command_retry=None,
            logger=logger,
        )
        # After LOST kazoo would open a new session: send it nowhere first (runs on its thread).
        client.add_listener(lambda kazoo_state: client.set_hosts(_NOWHERE) if kazoo_state == KazooState.LOST else None)
        try:
            client.start(timeout=self._timeout)  # on a time-out kazoo stops and closes the client
        except KazooTimeoutError as exc:
            raise ConnectionLoss() from exc
        return client

    def open_session(self, timeout_ms: int) -> int:
        if timeout_ms <= 0:
            raise ValueError(f"session timeout must be positive: {timeout_ms}")
        if not self._available:
            raise ConnectionLoss()
        client = self._start_client(timeout_ms)
        sid = client.client_id[0]
        session = _Session(sid, client, timeout_ms)
        session.on_watch = lambda event: self._on_watch(session, event)
        client.add_listener(lambda state: self._on_state(session, state))
        with self._lock:
            self._sessions[sid] = session
        self._zxid = self._read_zxid()
        return sid

    def close_session(self, session: int) -> None:
        state = self._ending(session)
        if state is None:
            return
        state.client.stop()  # closeSession; kazoo waits for the server's answer
        state.client.close()
        self._settle(self._read_zxid(), None)

    def expire_session(self, session: int) -> None:
        state = self._ending(session)
        if state is None:
            return
        state.client.logger.setLevel(logging.ERROR)  # its dropped connection is the point
        state.client.set_hosts(_NOWHERE)
        ghost = self._start_client(state.timeout_ms, client_id=state.client.client_id, quiet=True)
        ghost.stop()
        ghost.close()
        state.client.stop()
        state.client.close()
        self._settle(self._read_zxid(), None)

    def session_alive(self, session: int) -> bool:
        return session in self._sessions

    def credentials(self, session: int) -> tuple[int, bytes]:
        """The live session's ``(id, password)``: for injecting faults from outside the adapter."""
        client_id = self._live(session).client.client_id
        assert client_id is not None
        return client_id

    def _ending(self, session: int) -> _Session | None:
        """The live session to close or expire, now marked dead; None if it is dead already."""
        self._known(session)
        if not self._available:
            raise ConnectionLoss()
        with self._lock:
            state = self._sessions.pop(session, None)
            self._dead.add(session)
        return state

    def _known(self, session: int) -> None:
        if session not in self._sessions and session not in self._dead:
            raise ValueError(f"unknown ZooKeeper session {session:#x}")

    def _live(self, session: int) -> _Session:
        state = self._sessions.get(session)
        if state is None:
            self._known(session)
        if not self._available:
            raise ConnectionLoss()
        if state is None:
            self._reap()
            raise SessionExpired()
        client_id = state.client.client_id
        if client_id is None or client_id[0] != session:
            self._lost(state)
            raise SessionExpired()
        return state

    def _lost(self, state: _Session) -> None:
        """The server expired the session on its own: it stays dead, its client is stopped."""
        with self._lock:
            if self._sessions.pop(state.sid, None) is not None:
                self._dead.add(state.sid)
                self._zombies.append(state.client)
        self._reap()

    def _on_state(self, state: _Session, kazoo_state: str) -> None:
        # Runs on the client's connection thread, which cannot stop its own client: _reap does.
        if kazoo_state == KazooState.LOST:
            with self._lock:
                if self._sessions.pop(state.sid, None) is not None:
                    self._dead.add(state.sid)
                    self._zombies.append(state.client)
                    _LOG.warning("ZooKeeper session %#x expired on its own", state.sid)

    def _reap(self) -> None:
        with self._lock:
            zombies, self._zombies = self._zombies, []
        for client in zombies:
            client.stop()
            client.close()

    # ---- writes ------------------------------------------------------------------------

    def create(self, session: int, path: str, data: bytes, ephemeral: bool = False) -> Stat:
        validate_path(path)
        validate_data(data)
        state = self._live(session)
        with self._translated(state, path):
            _, st = state.client.create(path, data, ephemeral=ephemeral, include_data=True)
        self._written(state)
        return _stat(st)

    def set_data(self, session: int, path: str, data: bytes, version: int = ANY_VERSION) -> Stat:
        validate_path(path)
        validate_data(data)
        state = self._live(session)
        with self._translated(state, path):
            st = state.client.set(path, data, version=version)
        self._written(state)
        return _stat(st)

    def delete(self, session: int, path: str, version: int = ANY_VERSION) -> None:
        validate_deletable(path)
        state = self._live(session)
        with self._translated(state, path):
            state.client.delete(path, version=version)
        self._written(state)

    def multi(self, session: int, ops: Sequence[Op]) -> list[OpResult]:
        ops = [validate_op(op) for op in ops]
        state = self._live(session)
        transaction = state.client.transaction()
        for op in ops:
            if type(op) is CreateOp:
                transaction.create(op.path, op.data, ephemeral=op.ephemeral)
            elif type(op) is SetDataOp:
                transaction.set_data(op.path, op.data, version=op.version)
            elif type(op) is DeleteOp:
                transaction.delete(op.path, version=op.version)
            else:
                transaction.check(op.path, op.version)
        with self._translated(state, None):
            replies = transaction.commit()
        self._written(state)
        return [_op_result(reply) for reply in replies]

    def _written(self, state: _Session) -> None:
        self._settle(state.client.last_zxid, state)

    @contextmanager
    def _translated(self, state: _Session, path: str | None, *, write: bool = True) -> Iterator[None]:
        """kazoo's exceptions as the port's; a failed write still took a zxid and is settled."""
        try:
            yield
        except kz.SessionExpiredError as exc:
            self._lost(state)
            raise SessionExpired(path) from exc
        except (kz.ConnectionLoss, kz.ConnectionDropped, KazooTimeoutError) as exc:
            raise ConnectionLoss(path) from exc
        except kz.ZookeeperError as exc:
            try:
                code = ZkCode.of_wire(exc.code)
            except KeyError:
                raise
            if write:
                self._written(state)
            raise error_for(code, path) from exc

    # ---- watches -----------------------------------------------------------------------

    def _on_watch(self, state: _Session, event: WatchedEvent) -> None:
        # Runs on the client's callback thread.
        kind = _KINDS.get(event.type)
        if kind is None:
            with self._lock:
                if state.sid in self._sessions and state.armed:
                    self._faults.append(f"kazoo dropped the watches of session {state.sid:#x} ({event.state})")
            return
        if event is state.last_event:
            return
        state.last_event = event
        with self._lock:
            if state.sid not in self._sessions:
                return
            if kind != "child":
                state.armed.discard((False, event.path))
            if kind in ("child", "deleted"):
                state.armed.discard((True, event.path))
            self._inbox.append((state.sid, event.path, kind))

    def _arm(self, state: _Session, is_child: bool, path: str) -> None:
        with self._lock:
            state.armed.add((is_child, path))

    def _settle(self, zxid: int, writer: _Session | None) -> None:
        """Wait until every watch event the txn ``zxid`` fired has been queued; stamp them."""
        with self._lock:
            targets = [state for state in self._sessions.values() if state.armed]
        pending = [(state, state.client.sync_async("/")) for state in targets if state is not writer]
        for state, result in pending:
            result.get(timeout=self._timeout)
        markers = []
        for state in targets:
            marker = threading.Event()
            state.client.handler.dispatch_callback(Callback("watch", marker.set, ()))
            markers.append(marker)
        for marker in markers:
            if not marker.wait(self._timeout):
                raise RuntimeError("a kazoo callback thread did not drain its queue")
        with self._lock:
            self._fired.extend((zxid, sid, path, kind) for sid, path, kind in self._inbox)
            self._inbox.clear()
        self._zxid = max(self._zxid, zxid)

    # ---- reads -------------------------------------------------------------------------

    def get_data(self, session: int, path: str, watch: bool = False) -> tuple[bytes, Stat]:
        validate_path(path)
        state = self._live(session)
        with self._translated(state, path, write=False):
            data, st = state.client.get(path, watch=state.on_watch if watch else None)
        if watch:
            self._arm(state, False, path)
        return data, _stat(st)

    def exists(self, session: int, path: str, watch: bool = False) -> Stat | None:
        validate_path(path)
        state = self._live(session)
        with self._translated(state, path, write=False):
            st = state.client.exists(path, watch=state.on_watch if watch else None)
        if watch:
            self._arm(state, False, path)
        return None if st is None else _stat(st)

    def get_children(self, session: int, path: str, watch: bool = False) -> list[str]:
        validate_path(path)
        state = self._live(session)
        with self._translated(state, path, write=False):
            children = state.client.get_children(path, watch=state.on_watch if watch else None)
        if watch:
            self._arm(state, True, path)
        return sorted(children)

    # ---- inspection and faults ---------------------------------------------------------

    def drain_watch_events(self) -> list[WatchEvent]:
        with self._lock:
            if self._faults:
                raise RuntimeError("; ".join(self._faults))
            fired = sorted(self._fired)
            self._fired.clear()
        return [WatchEvent(session, path, kind) for _, session, path, kind in fired]

    def set_available(self, flag: bool) -> None:
        self._available = bool(flag)

    def last_zxid(self) -> int:
        return self._zxid

    def _read_zxid(self) -> int:
        """The server's last processed zxid, from a read's reply header."""
        self._admin.exists("/")
        return self._admin.last_zxid

    def snapshot(self, root: str = "/") -> dict[str, tuple[bytes, Stat]]:
        validate_path(root)
        out: dict[str, tuple[bytes, Stat]] = {}
        self._walk(root, out)
        return dict(sorted(out.items()))

    def _walk(self, path: str, out: dict[str, tuple[bytes, Stat]]) -> None:
        if path == "/zookeeper":
            return
        try:
            data, st = self._admin.get(path)
            children = self._admin.get_children(path)
        except kz.NoNodeError:
            return
        out[path] = (data, _stat(st))
        for child in children:
            self._walk(("" if path == "/" else path) + "/" + child, out)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            states = list(self._sessions.values())
            self._sessions.clear()
            self._dead.update(state.sid for state in states)
        for client in [state.client for state in states] + [self._admin]:
            client.stop()
            client.close()
        self._reap()

    def __enter__(self) -> KazooPort:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _op_result(reply: object) -> OpResult:
    if isinstance(reply, kz.RolledBackError):
        return OpResult(ZkCode.OK)
    if isinstance(reply, kz.ZookeeperError):
        return OpResult(ZkCode.of_wire(reply.code))
    if isinstance(reply, ZnodeStat):
        return OpResult(ZkCode.OK, _stat(reply), None)
    if isinstance(reply, str):
        return OpResult(ZkCode.OK, None, reply)
    if reply is True:
        return OpResult(ZkCode.OK)
    raise RuntimeError(f"unexpected multi result from kazoo: {reply!r}")
