"""Conformance of the ZooKeeper port: the same cases on the embedded store and on a real server.

Every case runs on both adapters (``port`` is parametrized over ``embedded`` and ``kazoo``); the
kazoo one talks to the session's ZooKeeper 3.8 server (tests/zk_server.py). Each test works under
a root path of its own, so tests on the shared server do not see each other. Zxids are compared
as offsets from ``last_zxid()`` at the start of a case: a real server has handed out others
before, but from there on both adapters must count the same transactions.

The last tests drive both adapters with one script, scripted and seeded-random, and compare
every result, every watch event and the final trees.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from impl.zk import (
    BadVersion,
    CheckOp,
    ConnectionLoss,
    CreateOp,
    DeleteOp,
    EmbeddedZk,
    NoChildrenForEphemerals,
    NodeExists,
    NoNode,
    NotEmpty,
    OpResult,
    SessionExpired,
    SetDataOp,
    Stat,
    WatchEvent,
    ZkCode,
    ZkPort,
)
from model.types import ZkCode as ModelZkCode

TIMEOUT_MS = 10_000
OK = OpResult(ZkCode.OK)
RI = OpResult(ZkCode.RUNTIME_INCONSISTENCY)
_roots = itertools.count()


def _kazoo_port(hosts: str) -> ZkPort:
    from impl.zk.kazoo_port import KazooPort

    return KazooPort(hosts)


@pytest.fixture(params=["embedded", "kazoo"])
def port(request: pytest.FixtureRequest) -> Iterator[ZkPort]:
    adapter = EmbeddedZk() if request.param == "embedded" else _kazoo_port(request.getfixturevalue("real_zk"))
    try:
        yield adapter
    finally:
        adapter.close()


@pytest.fixture
def root(request: pytest.FixtureRequest) -> str:
    return f"/{request.node.originalname}-{next(_roots)}"


def _open(port: ZkPort, root: str) -> int:
    """A session, and the test's root znode created by it."""
    session = port.open_session(TIMEOUT_MS)
    port.create(session, root, b"")
    return session


# ---- zxids and Stat ------------------------------------------------------------------------

def test_create_czxid_follows_creation_order(port: ZkPort, root: str) -> None:
    """Each create is a txn with the next zxid: czxid = mzxid = pzxid = that zxid, version 0."""
    s = _open(port, root)
    stats = [port.create(s, f"{root}/{name}", name.encode()) for name in ("c", "a", "b")]
    base = stats[0].czxid
    assert [st.czxid for st in stats] == [base, base + 1, base + 2]
    assert port.last_zxid() == base + 2
    for st in stats:
        assert (st.mzxid, st.pzxid, st.version, st.cversion, st.num_children, st.ephemeral_owner) == (
            st.czxid, st.czxid, 0, 0, 0, 0)
        assert st.data_length == 1


def test_set_data_moves_version_and_mzxid_keeps_czxid(port: ZkPort, root: str) -> None:
    """DataTree.setData bumps version and sets mzxid; czxid stays for the znode's life."""
    s = _open(port, root)
    created = port.create(s, f"{root}/n", b"v0")
    first = port.set_data(s, f"{root}/n", b"v1", version=0)
    second = port.set_data(s, f"{root}/n", b"v22")
    assert (first.czxid, first.version, first.mzxid) == (created.czxid, 1, created.czxid + 1)
    assert (second.czxid, second.version, second.mzxid, second.data_length) == (created.czxid, 2,
                                                                                 created.czxid + 2, 3)
    assert port.get_data(s, f"{root}/n") == (b"v22", second)


def test_write_failed_still_takes_a_zxid(port: ZkPort, root: str) -> None:
    """PrepRequestProcessor logs a failed write as an error txn: it takes a zxid (seen as a czxid gap)."""
    s = _open(port, root)
    first = port.create(s, f"{root}/n", b"")
    failures: list[tuple[type[Exception], Callable[[], object]]] = [
        (BadVersion, lambda: port.set_data(s, f"{root}/n", b"x", version=5)),
        (NodeExists, lambda: port.create(s, f"{root}/n", b"")),
        (NoNode, lambda: port.delete(s, f"{root}/missing")),
        (NoNode, lambda: port.create(s, f"{root}/missing/child", b"")),
    ]
    for i, (error, call) in enumerate(failures, start=1):
        with pytest.raises(error):
            call()
        assert port.last_zxid() == first.czxid + i
    assert port.create(s, f"{root}/m", b"").czxid == first.czxid + len(failures) + 1


def test_read_takes_no_zxid(port: ZkPort, root: str) -> None:
    """Reads (getData, exists, getChildren) are not transactions, watched or not."""
    s = _open(port, root)
    zxid = port.last_zxid()
    port.get_data(s, root, watch=True)
    port.exists(s, f"{root}/missing", watch=True)
    port.get_children(s, root, watch=True)
    with pytest.raises(NoNode):
        port.get_data(s, f"{root}/missing")
    assert port.last_zxid() == zxid
    assert port.create(s, f"{root}/n", b"").czxid == zxid + 1


def test_session_open_close_expire_take_a_zxid(port: ZkPort, root: str) -> None:
    """createSession and closeSession are txns; an expiry is the closeSession the server issues."""
    s = _open(port, root)
    zxid = port.last_zxid()
    a = port.open_session(TIMEOUT_MS)
    b = port.open_session(TIMEOUT_MS)
    assert port.last_zxid() == zxid + 2
    port.close_session(a)
    assert port.last_zxid() == zxid + 3
    port.expire_session(b)
    assert port.last_zxid() == zxid + 4
    port.close_session(a)  # a dead session: nothing to do, no txn
    port.expire_session(b)
    assert port.last_zxid() == zxid + 4
    assert port.create(s, f"{root}/n", b"").czxid == zxid + 5


def test_session_ids_increase_and_are_not_reused(port: ZkPort) -> None:
    """ZooKeeper's SessionTrackerImpl hands out ids from an incrementing counter."""
    ids = []
    for _ in range(3):
        ids.append(port.open_session(TIMEOUT_MS))
        port.close_session(ids[-1])
    assert ids == sorted(ids) and len(set(ids)) == 3


def test_cversion_counts_child_creates_and_deletes(port: ZkPort, root: str) -> None:
    """DataNode.copyStat reports cversion = 2*creates - children; pzxid is the last child change."""
    s = _open(port, root)
    port.create(s, f"{root}/a", b"")
    port.create(s, f"{root}/b", b"")
    port.delete(s, f"{root}/a")
    zxid = port.last_zxid()
    _, st = port.get_data(s, root)
    assert (st.cversion, st.num_children, st.pzxid, st.version) == (3, 1, zxid, 0)
    assert port.get_children(s, root) == ["b"]


def test_create_recreated_path_is_a_new_znode(port: ZkPort, root: str) -> None:
    """Delete then create of a path makes a new znode: version 0 and a new czxid."""
    s = _open(port, root)
    old = port.create(s, f"{root}/n", b"")
    port.set_data(s, f"{root}/n", b"x")
    port.delete(s, f"{root}/n", version=1)
    new = port.create(s, f"{root}/n", b"y")
    assert (new.version, new.czxid) == (0, old.czxid + 3)


# ---- errors --------------------------------------------------------------------------------

def test_create_errors_as_zookeeper_checks_them(port: ZkPort, root: str) -> None:
    """Create: missing parent NONODE, existing path NODEEXISTS, ephemeral parent NOCHILDRENFOREPHEMERALS."""
    s = _open(port, root)
    port.create(s, f"{root}/e", b"", ephemeral=True)
    with pytest.raises(NoNode):
        port.create(s, f"{root}/x/y", b"")
    with pytest.raises(NodeExists):
        port.create(s, root, b"")
    with pytest.raises(NodeExists):
        port.create(s, "/", b"")
    with pytest.raises(NoChildrenForEphemerals) as caught:
        port.create(s, f"{root}/e/child", b"")
    assert caught.value.code is ZkCode.NO_CHILDREN_FOR_EPHEMERALS


def test_delete_errors_bad_version_before_not_empty(port: ZkPort, root: str) -> None:
    """Delete: NONODE; BADVERSION is checked before NOTEMPTY (PrepRequestProcessor's order)."""
    s = _open(port, root)
    port.create(s, f"{root}/p", b"")
    port.create(s, f"{root}/p/c", b"")
    with pytest.raises(BadVersion):
        port.delete(s, f"{root}/p", version=3)
    with pytest.raises(NotEmpty):
        port.delete(s, f"{root}/p")
    with pytest.raises(NoNode):
        port.delete(s, f"{root}/q")
    port.delete(s, f"{root}/p/c", version=0)
    port.delete(s, f"{root}/p", version=0)
    assert port.exists(s, f"{root}/p") is None


def test_set_data_errors(port: ZkPort, root: str) -> None:
    """setData: NONODE on a missing path, BADVERSION on a stale version; nothing changes."""
    s = _open(port, root)
    port.create(s, f"{root}/n", b"a")
    with pytest.raises(NoNode):
        port.set_data(s, f"{root}/m", b"b")
    with pytest.raises(BadVersion):
        port.set_data(s, f"{root}/n", b"b", version=1)
    data, st = port.get_data(s, f"{root}/n")
    assert (data, st.version) == (b"a", 0)


def test_request_bad_arguments_are_caller_bugs(port: ZkPort, root: str) -> None:
    """PathUtils.validatePath runs in the client: a bad path or an unknown session is a ValueError, no txn."""
    s = _open(port, root)
    zxid = port.last_zxid()
    for bad in ("relative", f"{root}/", f"{root}//x", f"{root}/./x", f"{root}/../x", ""):
        with pytest.raises(ValueError):
            port.create(s, bad, b"")
    with pytest.raises(ValueError):
        port.delete(s, "/")
    with pytest.raises(ValueError):
        port.multi(s, [CreateOp(f"{root}/ok", b""), DeleteOp("bad")])
    with pytest.raises(TypeError):
        port.create(s, f"{root}/n", "text")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        port.get_data(123456789, root)
    assert port.last_zxid() == zxid
    assert port.exists(s, f"{root}/ok") is None


# ---- multi ---------------------------------------------------------------------------------

def test_multi_bad_version_applies_nothing(port: ZkPort, root: str) -> None:
    """DataTree.processTxn on a failed multi: ops before OK (code 0), BADVERSION, then RUNTIMEINCONSISTENCY."""
    s = _open(port, root)
    port.create(s, f"{root}/n", b"a")
    port.create(s, f"{root}/d", b"")
    before = port.snapshot(root)
    zxid = port.last_zxid()
    results = port.multi(s, [
        CheckOp(f"{root}/n", 0),
        SetDataOp(f"{root}/n", b"b"),
        CheckOp(f"{root}/n", 0),  # stale: the setData before it made the version 1
        CreateOp(f"{root}/new", b""),
        DeleteOp(f"{root}/d"),
    ])
    assert results == [OK, OK, OpResult(ZkCode.BAD_VERSION), RI, RI]
    assert port.snapshot(root) == before
    assert port.last_zxid() == zxid + 1


@pytest.mark.parametrize(
    "ops, failing, code",
    [
        (lambda r: [CreateOp(f"{r}/x/y", b"")], 0, ZkCode.NO_NODE),
        (lambda r: [CreateOp(f"{r}/a", b""), CreateOp(f"{r}/n", b"")], 1, ZkCode.NODE_EXISTS),
        (lambda r: [CheckOp(f"{r}/n", -1), DeleteOp(f"{r}/n"), CheckOp(f"{r}/n", -1)], 2, ZkCode.NO_NODE),
        (lambda r: [CreateOp(f"{r}/n/c", b""), DeleteOp(f"{r}/n")], 1, ZkCode.NOT_EMPTY),
        (lambda r: [CreateOp(f"{r}/e", b"", True), CreateOp(f"{r}/e/c", b""), SetDataOp(r, b"")], 1,
         ZkCode.NO_CHILDREN_FOR_EPHEMERALS),
        (lambda r: [SetDataOp(f"{r}/n", b"", 0), SetDataOp(f"{r}/n", b"", 0)], 1, ZkCode.BAD_VERSION),
    ],
    ids=["no-parent", "exists", "deleted-earlier", "not-empty", "ephemeral-parent", "version-bumped-earlier"],
)
def test_multi_failure_results_per_op(
    port: ZkPort, root: str, ops: Callable[[str], list[Any]], failing: int, code: ZkCode
) -> None:
    """Each op is checked against the tree as the earlier ops of the multi leave it (ChangeRecords)."""
    s = _open(port, root)
    port.create(s, f"{root}/n", b"")
    before = port.snapshot(root)
    batch = ops(root)
    results = port.multi(s, batch)
    assert results == [OK] * failing + [OpResult(code)] + [RI] * (len(batch) - failing - 1)
    assert port.snapshot(root) == before


def test_multi_success_results_and_one_zxid(port: ZkPort, root: str) -> None:
    """A successful multi is one txn: create reports its path, setData its Stat, check and delete nothing."""
    s = _open(port, root)
    port.create(s, f"{root}/old", b"")
    zxid = port.last_zxid() + 1
    results = port.multi(s, [
        CreateOp(f"{root}/p", b""),
        CreateOp(f"{root}/p/c", b"c"),
        SetDataOp(f"{root}/p", b"pp", 0),
        CheckOp(f"{root}/p", 1),
        DeleteOp(f"{root}/old", 0),
    ])
    p_stat = Stat(czxid=zxid, mzxid=zxid, pzxid=zxid, version=1, cversion=1, ephemeral_owner=0, num_children=1,
                  data_length=2)
    assert results == [OpResult(ZkCode.OK, None, f"{root}/p"), OpResult(ZkCode.OK, None, f"{root}/p/c"),
                       OpResult(ZkCode.OK, p_stat, None), OK, OK]
    assert port.last_zxid() == zxid
    assert port.get_data(s, f"{root}/p") == (b"pp", p_stat)
    assert port.get_data(s, f"{root}/p/c")[1].czxid == zxid
    assert port.get_children(s, root) == ["p"]


def test_multi_later_ops_see_earlier_ones(port: ZkPort, root: str) -> None:
    """PrepRequestProcessor checks each op against the outstanding changes of the ops before it."""
    s = _open(port, root)
    old = port.create(s, f"{root}/p", b"")
    port.create(s, f"{root}/p/c", b"")
    results = port.multi(s, [DeleteOp(f"{root}/p/c"), DeleteOp(f"{root}/p"), CreateOp(f"{root}/p", b"again"),
                             CheckOp(f"{root}/p", 0), SetDataOp(f"{root}/p", b"x", 0), CheckOp(f"{root}/p", 1)])
    assert [r.code for r in results] == [ZkCode.OK] * 6
    data, st = port.get_data(s, f"{root}/p")
    assert (data, st.version, st.czxid, st.num_children) == (b"x", 1, old.czxid + 2, 0)


def test_multi_empty_takes_a_zxid(port: ZkPort, root: str) -> None:
    """An empty multi is still a request through PrepRequestProcessor: a txn with nothing in it."""
    s = _open(port, root)
    zxid = port.last_zxid()
    assert port.multi(s, []) == []
    assert port.last_zxid() == zxid + 1


# ---- sessions and ephemerals ---------------------------------------------------------------

@pytest.mark.parametrize("end", ["close_session", "expire_session"])
def test_session_end_takes_ephemerals_and_stays_dead(port: ZkPort, root: str, end: str) -> None:
    """closeSession (the client's, or the server's on expiry) deletes the ephemerals; later calls: SESSIONEXPIRED."""
    s = _open(port, root)
    a = port.open_session(TIMEOUT_MS)
    st = port.create(a, f"{root}/eph", b"", ephemeral=True)
    assert st.ephemeral_owner == a and port.session_alive(a)
    getattr(port, end)(a)
    assert not port.session_alive(a)
    assert port.exists(s, f"{root}/eph") is None
    for call in (
        lambda: port.get_data(a, root),
        lambda: port.exists(a, root),
        lambda: port.create(a, f"{root}/x", b""),
        lambda: port.multi(a, [CheckOp(root, -1)]),
        lambda: port.delete(a, root),
    ):
        with pytest.raises(SessionExpired):
            call()
    assert port.session_alive(s)


def test_session_expired_client_never_comes_back(real_zk: str, root: str) -> None:
    """kazoo reopens a *new* session after LOST; the adapter must not: no createSession after an expiry."""
    from kazoo.client import KazooClient

    from impl.zk.kazoo_port import KazooPort

    with KazooPort(real_zk) as port:
        s = _open(port, root)
        a = port.open_session(TIMEOUT_MS)
        port.expire_session(a)
        zxid = port.last_zxid()
        time.sleep(0.5)  # kazoo's reconnect backoff here is at most 0.2 s
        observer = KazooClient(hosts=real_zk)
        observer.start()
        try:
            observer.exists("/")
            assert observer.last_zxid == zxid + 1  # only the observer's own createSession
        finally:
            observer.stop()
            observer.close()
        with pytest.raises(SessionExpired):
            port.exists(a, root)
        assert port.session_alive(s)


def test_session_expired_on_its_own_stays_expired(real_zk: str, root: str) -> None:
    """A session the server expires behind kazoo's back: LOST -> CONNECTED would open a new session; none."""
    from kazoo.client import KazooClient

    from impl.zk.kazoo_port import KazooPort

    with KazooPort(real_zk) as port:
        s = _open(port, root)
        a = port.open_session(TIMEOUT_MS)
        port.create(a, f"{root}/eph", b"", ephemeral=True)
        observer = KazooClient(hosts=real_zk)
        observer.start()
        try:
            for _ in range(5):  # the first client may win the reconnect race; then the ghost must try again
                ghost = KazooClient(hosts=real_zk, client_id=port.credentials(a))
                ghost.start()
                ghost.stop()
                ghost.close()
                if observer.exists(f"{root}/eph") is None:
                    break
            assert observer.exists(f"{root}/eph") is None
            zxid = observer.last_zxid
            deadline = time.monotonic() + 60  # kazoo notices at its next ping: seconds on a loaded machine
            while port.session_alive(a) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not port.session_alive(a)
            time.sleep(0.5)  # longer than kazoo's reconnect backoff here (at most 0.2 s)
            observer.exists("/")
            assert observer.last_zxid == zxid, "a new session was opened after the expiry"
        finally:
            observer.stop()
            observer.close()
        with pytest.raises(SessionExpired):
            port.exists(a, root)
        assert port.session_alive(s)


def test_unavailable_every_request_raises_connection_loss(port: ZkPort, root: str) -> None:
    """While ZooKeeper is unavailable nothing is read, written, opened, closed or expired."""
    s = _open(port, root)
    zxid = port.last_zxid()
    port.set_available(False)
    for call in (
        lambda: port.open_session(TIMEOUT_MS),
        lambda: port.close_session(s),
        lambda: port.expire_session(s),
        lambda: port.create(s, f"{root}/n", b""),
        lambda: port.set_data(s, root, b""),
        lambda: port.delete(s, root),
        lambda: port.multi(s, []),
        lambda: port.get_data(s, root),
        lambda: port.exists(s, root),
        lambda: port.get_children(s, root),
    ):
        with pytest.raises(ConnectionLoss):
            call()
    assert port.session_alive(s) and port.last_zxid() == zxid
    port.set_available(True)
    assert port.create(s, f"{root}/n", b"").czxid == zxid + 1


# ---- watches -------------------------------------------------------------------------------

def test_watch_data_fires_once_for_another_sessions_write(port: ZkPort, root: str) -> None:
    """A getData watch is one-shot: the first setData fires NodeDataChanged, visible when the write returns."""
    s = _open(port, root)
    w = port.open_session(TIMEOUT_MS)
    port.create(s, f"{root}/n", b"")
    port.get_data(w, f"{root}/n", watch=True)
    port.set_data(s, f"{root}/n", b"1")
    assert port.drain_watch_events() == [WatchEvent(w, f"{root}/n", "changed")]
    port.set_data(s, f"{root}/n", b"2")
    port.delete(s, f"{root}/n")
    assert port.drain_watch_events() == []


def test_watch_exists_on_absent_path_fires_on_create(port: ZkPort, root: str) -> None:
    """exists sets a watch even on an absent path; it fires NodeCreated (getData on it sets none)."""
    s = _open(port, root)
    w = port.open_session(TIMEOUT_MS)
    assert port.exists(w, f"{root}/n", watch=True) is None
    with pytest.raises(NoNode):
        port.get_data(w, f"{root}/m", watch=True)
    port.create(s, f"{root}/n", b"")
    port.create(s, f"{root}/m", b"")
    assert port.drain_watch_events() == [WatchEvent(w, f"{root}/n", "created")]


def test_watch_child_fires_once_on_child_create_or_delete(port: ZkPort, root: str) -> None:
    """A getChildren watch fires NodeChildrenChanged on a child's create or delete, once; not on setData."""
    s = _open(port, root)
    w = port.open_session(TIMEOUT_MS)
    port.get_children(w, root, watch=True)
    port.set_data(s, root, b"x")
    assert port.drain_watch_events() == []
    port.create(s, f"{root}/a", b"")
    port.create(s, f"{root}/b", b"")
    assert port.drain_watch_events() == [WatchEvent(w, root, "child")]
    port.get_children(w, root, watch=True)
    port.delete(s, f"{root}/a")
    assert port.drain_watch_events() == [WatchEvent(w, root, "child")]


def test_watch_data_and_child_on_deleted_path_fire_once(port: ZkPort, root: str) -> None:
    """DataTree.deleteNode does not notify a watcher twice: one NodeDeleted for a data and a child watch."""
    s = _open(port, root)
    w = port.open_session(TIMEOUT_MS)
    port.create(s, f"{root}/n", b"")
    port.get_data(w, f"{root}/n", watch=True)
    port.get_children(w, f"{root}/n", watch=True)
    port.get_children(w, root, watch=True)
    port.delete(s, f"{root}/n")
    assert port.drain_watch_events() == [WatchEvent(w, root, "child"), WatchEvent(w, f"{root}/n", "deleted")]


def test_watch_own_write_fires_own_watch(port: ZkPort, root: str) -> None:
    """A session's watch fires on its own write too (the server does not look at who wrote)."""
    s = _open(port, root)
    port.exists(s, f"{root}/n", watch=True)
    port.create(s, f"{root}/n", b"")
    assert port.drain_watch_events() == [WatchEvent(s, f"{root}/n", "created")]


@pytest.mark.parametrize("end", ["close_session", "expire_session"])
def test_watch_dies_with_its_session(port: ZkPort, root: str, end: str) -> None:
    """Watches belong to the session (its connection) that set them and go when it ends."""
    s = _open(port, root)
    w = port.open_session(TIMEOUT_MS)
    port.create(s, f"{root}/n", b"")
    port.get_data(w, f"{root}/n", watch=True)
    port.get_children(w, root, watch=True)
    getattr(port, end)(w)
    port.set_data(s, f"{root}/n", b"x")
    port.create(s, f"{root}/m", b"")
    assert port.drain_watch_events() == []


def test_watch_fires_when_an_expiry_deletes_an_ephemeral(port: ZkPort, root: str) -> None:
    """The expiry's closeSession txn deletes the ephemerals, which fires other sessions' watches."""
    s = _open(port, root)
    owner = port.open_session(TIMEOUT_MS)
    port.create(owner, f"{root}/eph", b"", ephemeral=True)
    port.exists(s, f"{root}/eph", watch=True)
    port.get_children(s, root, watch=True)
    port.expire_session(owner)
    assert port.drain_watch_events() == [WatchEvent(s, root, "child"), WatchEvent(s, f"{root}/eph", "deleted")]


def test_watch_events_ordered_by_zxid_session_path(port: ZkPort, root: str) -> None:
    """drain_watch_events lists events by the zxid that fired them, then session, then path."""
    s = _open(port, root)
    first = port.open_session(TIMEOUT_MS)
    second = port.open_session(TIMEOUT_MS)
    for w in (second, first):
        port.exists(w, f"{root}/b", watch=True)
        port.exists(w, f"{root}/a", watch=True)
        port.get_children(w, root, watch=True)
    port.exists(second, f"{root}/z", watch=True)
    port.multi(s, [CreateOp(f"{root}/b", b""), CreateOp(f"{root}/a", b"")])
    port.create(s, f"{root}/z", b"")
    assert port.drain_watch_events() == [
        WatchEvent(first, root, "child"),
        WatchEvent(first, f"{root}/a", "created"),
        WatchEvent(first, f"{root}/b", "created"),
        WatchEvent(second, root, "child"),
        WatchEvent(second, f"{root}/a", "created"),
        WatchEvent(second, f"{root}/b", "created"),
        WatchEvent(second, f"{root}/z", "created"),
    ]
    assert port.drain_watch_events() == []


# ---- the port module -----------------------------------------------------------------------

def test_code_superset_of_the_model_codes() -> None:
    """The port's codes include the model's by name and value, with ZooKeeper's wire numbers."""
    for code in ModelZkCode:
        assert ZkCode.of_model(code).to_model() is code
        assert ZkCode[code.name].value == code.value
    with pytest.raises(ValueError):
        ZkCode.NOT_EMPTY.to_model()
    assert [ZkCode.of_wire(c.wire) for c in ZkCode] == list(ZkCode)
    wires = (ZkCode.NOT_EMPTY.wire, ZkCode.NO_CHILDREN_FOR_EPHEMERALS.wire, ZkCode.BAD_VERSION.wire)
    assert wires == (-111, -108, -103)


def test_embedded_same_calls_same_ids_and_zxids() -> None:
    """The embedded store has no clock and no randomness: session ids count up from a fixed base."""
    from impl.zk.embedded import SESSION_ID_BASE

    def run() -> tuple[list[int], int, dict[str, tuple[bytes, Stat]]]:
        zk = EmbeddedZk()
        ids = [zk.open_session(TIMEOUT_MS) for _ in range(3)]
        zk.create(ids[1], "/e", b"", ephemeral=True)
        zk.expire_session(ids[0])
        return ids, zk.last_zxid(), zk.snapshot()

    assert run() == run()
    ids, zxid, tree = run()
    assert ids == [SESSION_ID_BASE, SESSION_ID_BASE + 1, SESSION_ID_BASE + 2] and zxid == 5
    assert tree["/e"][1].ephemeral_owner == ids[1] and "/zookeeper" not in tree


# ---- both adapters, one script -------------------------------------------------------------

class _Twin:
    """Runs each step on both adapters and compares results, errors, watch events and zxids.

    Sessions are named by their index in the script; zxids are offsets from the start.
    """

    def __init__(self, hosts: str) -> None:
        self.ports: list[ZkPort] = [EmbeddedZk(), _kazoo_port(hosts)]
        self.bases = [p.last_zxid() for p in self.ports]
        self.sessions: list[list[int]] = [[], []]  # per adapter: index -> session id
        self.trace: list[str] = []

    def close(self) -> None:
        for p in self.ports:
            p.close()

    def _norm(self, i: int, value: Any) -> Any:
        if isinstance(value, Stat):
            base = self.bases[i]
            owner = value.ephemeral_owner
            return replace(value, czxid=value.czxid - base, mzxid=value.mzxid - base, pzxid=value.pzxid - base,
                           ephemeral_owner=self.sessions[i].index(owner) + 1 if owner else 0)
        if isinstance(value, OpResult):
            return OpResult(value.code, self._norm(i, value.stat), value.path)
        if isinstance(value, WatchEvent):
            return WatchEvent(self.sessions[i].index(value.session), value.path, value.kind)
        if isinstance(value, (list, tuple)):
            return type(value)(self._norm(i, v) for v in value)
        if isinstance(value, dict):
            return {k: self._norm(i, v) for k, v in value.items()}
        return value

    def step(self, label: str, call: Callable[[ZkPort, list[int]], Any]) -> Any:
        """Run ``call(port, session ids)`` on both; they must agree. Returns the normalized outcome."""
        outcomes = []
        for i, p in enumerate(self.ports):
            try:
                result: Any = ("ok", self._norm(i, call(p, self.sessions[i])))
            except (ConnectionLoss, SessionExpired, NoNode, NodeExists, BadVersion, NotEmpty,
                    NoChildrenForEphemerals) as exc:
                result = ("error", type(exc).__name__)
            events = self._norm(i, p.drain_watch_events())
            outcomes.append((result, events, p.last_zxid() - self.bases[i]))
        self.trace.append(f"{label} -> {outcomes[0]}")
        assert outcomes[0] == outcomes[1], "\n".join(self.trace[-15:])
        return outcomes[0][0]

    def open(self) -> int:
        self.step("open", lambda p, ids: ids.append(p.open_session(TIMEOUT_MS)))
        return len(self.sessions[0]) - 1

    def snapshots_agree(self, root: str) -> dict[str, tuple[bytes, Stat]]:
        snaps = [self._norm(i, p.snapshot(root)) for i, p in enumerate(self.ports)]
        assert snaps[0] == snaps[1]
        return snaps[0]


@pytest.fixture
def twin(real_zk: str) -> Iterator[_Twin]:
    pair = _Twin(real_zk)
    try:
        yield pair
    finally:
        pair.close()


def test_twin_scripted_sequence_gives_the_same_tree(twin: _Twin, root: str) -> None:
    """One script on both adapters: the same results, events, zxid offsets and final znodes."""
    a, b, c = twin.open(), twin.open(), twin.open()
    twin.step("root", lambda p, ids: p.create(ids[a], root, b"r"))
    twin.step("watch root", lambda p, ids: p.get_children(ids[b], root, watch=True))
    twin.step("topics", lambda p, ids: p.multi(ids[a], [CreateOp(f"{root}/brokers", b""),
                                                        CreateOp(f"{root}/brokers/ids", b""),
                                                        CreateOp(f"{root}/controller_epoch", b"0")]))
    twin.step("watch epoch", lambda p, ids: p.get_data(ids[c], f"{root}/controller_epoch", watch=True))
    twin.step("watch controller", lambda p, ids: p.exists(ids[b], f"{root}/controller", watch=True))
    twin.step("elect", lambda p, ids: p.multi(ids[a], [CheckOp(f"{root}/controller_epoch", 0),
                                                       SetDataOp(f"{root}/controller_epoch", b"1", 0),
                                                       CreateOp(f"{root}/controller", b"a", True)]))
    twin.step("register b", lambda p, ids: p.create(ids[b], f"{root}/brokers/ids/1", b"b", ephemeral=True))
    twin.step("zombie", lambda p, ids: p.multi(ids[c], [CheckOp(f"{root}/controller_epoch", 0),
                                                        SetDataOp(f"{root}/controller_epoch", b"1")]))
    twin.step("expire a", lambda p, ids: p.expire_session(ids[a]))
    twin.step("elect c", lambda p, ids: p.multi(ids[c], [CheckOp(f"{root}/controller_epoch", 1),
                                                         SetDataOp(f"{root}/controller_epoch", b"2", 1),
                                                         CreateOp(f"{root}/controller", b"c", True)]))
    twin.step("close b", lambda p, ids: p.close_session(ids[b]))
    twin.step("stale a", lambda p, ids: p.set_data(ids[a], f"{root}/controller_epoch", b"9"))
    tree = twin.snapshots_agree(root)
    assert sorted(tree) == [root, f"{root}/brokers", f"{root}/brokers/ids", f"{root}/controller",
                            f"{root}/controller_epoch"]
    assert tree[f"{root}/controller"][1].ephemeral_owner == c + 1
    assert tree[f"{root}/controller_epoch"][0] == b"2"


@pytest.mark.parametrize("seed", [1, 4, 7])
def test_twin_random_sequence_agrees_op_by_op(twin: _Twin, root: str, seed: int) -> None:
    """A seeded random mix of writes with stale versions, multis, watched reads and session ends."""
    rng = random.Random(seed)
    paths = [f"{root}/{p}" for p in ("a", "b", "a/x", "a/y", "b/x", "c")]
    alive = [twin.open()]
    dead: list[int] = []
    twin.step("root", lambda p, ids: p.create(ids[alive[0]], root, b""))

    def version() -> int:
        return rng.choice([-1, -1, 0, 0, 1, 2])

    def op() -> Any:
        kind = rng.choice(["create", "set", "delete", "check"])
        path = rng.choice(paths)
        if kind == "create":
            return CreateOp(path, rng.choice([b"", b"d"]), rng.random() < 0.3)
        if kind == "set":
            return SetDataOp(path, bytes([rng.randrange(256)]), version())
        if kind == "delete":
            return DeleteOp(path, version())
        return CheckOp(path, version())

    for n in range(200):
        action = rng.choices(
            ["open", "close", "expire", "create", "set", "delete", "multi", "get", "exists", "children"],
            weights=[3, 2, 2, 16, 8, 8, 10, 8, 8, 8],
        )[0]
        if action == "open":
            if len(alive) < 4:
                alive.append(twin.open())
            continue
        if action in ("close", "expire"):
            target = rng.choice(alive + dead)
            twin.step(f"{n} {action} {target}", lambda p, ids: getattr(p, f"{action}_session")(ids[target]))
            if target in alive and len(alive) > 1:
                alive.remove(target)
                dead.append(target)
            elif target in alive:
                dead.append(alive.pop())
                alive.append(twin.open())
            continue
        s = rng.choice(alive + dead) if dead and rng.random() < 0.1 else rng.choice(alive)
        path = rng.choice(paths + [root] if action in ("get", "exists", "children") else paths)
        watch = rng.random() < 0.8
        call: Callable[[ZkPort, list[int]], Any]
        if action == "create":
            data, eph = bytes([rng.randrange(256)]), rng.random() < 0.2
            call = lambda p, ids: p.create(ids[s], path, data, ephemeral=eph)  # noqa: E731
        elif action == "set":
            data, v = bytes([rng.randrange(256)]), version()
            call = lambda p, ids: p.set_data(ids[s], path, data, version=v)  # noqa: E731
        elif action == "delete":
            v = version()
            call = lambda p, ids: p.delete(ids[s], path, version=v)  # noqa: E731
        elif action == "multi":
            ops = [op() for _ in range(rng.randint(1, 4))]
            call = lambda p, ids: p.multi(ids[s], ops)  # noqa: E731
        elif action == "get":
            call = lambda p, ids: p.get_data(ids[s], path, watch=watch)  # noqa: E731
        elif action == "exists":
            call = lambda p, ids: p.exists(ids[s], path, watch=watch)  # noqa: E731
        else:
            call = lambda p, ids: p.get_children(ids[s], path, watch=watch)  # noqa: E731
        twin.step(f"{n} {action} s{s} {path}", call)
    twin.snapshots_agree(root)
    outcomes = " ".join(twin.trace)
    # What the seeds must reach, so that a change to the mix cannot make the comparison vacuous
    # ("stat=None, path='" is a create's result in a successful multi).
    for seen in ("BadVersion", "NodeExists", "NoNode", "NotEmpty", "SessionExpired", "RUNTIME_INCONSISTENCY",
                 "stat=None, path='", "'created'", "'deleted'", "'changed'", "'child'"):
        assert seen in outcomes, f"seed {seed} never produced {seen}: the mix no longer covers it"


def test_embedded_lagging_server_serves_old_reads_until_caught_up_or_the_session_writes() -> None:
    """A session on a lagging server (model.zookeeper views) reads the tree as it was when its server fell behind:
    getData, exists and getChildren; another session reads the leader's. A write is decided at the leader
    (its version check sees the newest znode) and ends the lag; so does catching up."""
    zk = EmbeddedZk()
    behind, other = zk.open_session(TIMEOUT_MS), zk.open_session(TIMEOUT_MS)
    zk.create(other, "/a", b"1")
    zk.lag(behind)
    zk.set_data(other, "/a", b"2")
    zk.create(other, "/a/c", b"")
    assert zk.get_data(behind, "/a")[0] == b"1" and zk.get_children(behind, "/a") == []
    assert zk.exists(behind, "/a/c") is None and zk.get_data(other, "/a")[0] == b"2"
    stale_version = zk.get_data(behind, "/a")[1].version
    results = zk.multi(behind, [SetDataOp("/a", b"3", stale_version)])
    assert results[0].code is ZkCode.BAD_VERSION and not zk.lagging(behind)
    assert zk.get_data(behind, "/a")[0] == b"2" and zk.get_children(behind, "/a") == ["c"]
    zk.lag(behind)
    zk.delete(other, "/a/c")
    assert zk.get_children(behind, "/a") == ["c"]
    zk.catch_up(behind)
    assert zk.get_children(behind, "/a") == []
