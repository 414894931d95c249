"""ZooKeeper as model/zookeeper.py models it: zxids, znode stats, multi, sessions, watches.

KIP-380 builds broker generations on ZooKeeper's own guarantees (a czxid is fixed for a znode's
life and zxids only grow; multi is atomic), and KIP-866 §Controller Leadership builds controller
fencing on a multi that checks /controller_epoch. These tests pin those guarantees exactly as
ZooKeeper's PrepRequestProcessor and DataTree implement them, with exact zxids and versions.
"""

from __future__ import annotations

from model import zookeeper as zkm
from model.actions import ExpireSession, OpenSession, RegisterBroker, StopBroker, UpdateFeatures, ZkOutage, ZkRecover
from model.scopes import SCOPES, initial_state
from model.state import Budget
from model.step import step
from model.types import ANY_VERSION, NO_SESSION, ZkCode
from model.zookeeper import Check, Create, Delete, SetData, WatchKind
from tests.conftest import run, tree, znode

OK = ZkCode.OK
RI = ZkCode.RUNTIME_INCONSISTENCY


def ensemble(**extra):
    """/a (zxid 1) and /a/b (zxid 2), plus a session 1 for client 7 (zxid 3)."""
    zk = zkm.initial({"/a": "a", "/a/b": "b", **extra})
    zk, session = zkm.open_session(zk, 7)
    assert session == 1
    return zk


# ---- zxids and stats ------------------------------------------------------------------------------


def test_initial_ensemble_creates_each_node_in_its_own_transaction():
    """A fresh ensemble: the persistent nodes were created one per zxid, in path order."""
    zk = zkm.initial({"/b": 2, "/a": 1})
    assert zk.zxid == 2
    assert zk.paths == ("/a", "/b")
    assert [(n.czxid, n.mzxid, n.version, n.ephemeral_owner) for n in zk.nodes] == [(1, 1, 0, 0), (2, 2, 0, 0)]
    assert zk.sessions == () and zk.watches == frozenset() and zk.notifications == frozenset()


def test_create_takes_the_next_zxid_and_starts_at_version_zero():
    """KIP-380 §Broker Registration: a new znode's czxid is the zxid of the transaction that made it."""
    zk = ensemble()
    after, results = zkm.multi(zk, 1, (Create("/c", "c"),))
    assert results == (OK,)
    assert after.zxid == 4
    node = znode(after, "/c")
    assert (node.data, node.version, node.czxid, node.mzxid, node.ephemeral_owner) == ("c", 0, 4, 4, NO_SESSION)


def test_setdata_bumps_version_and_mzxid_and_keeps_czxid():
    """ZooKeeper stat rules: setData is a new mzxid and version; the czxid stays for the node's life."""
    zk = ensemble()
    zk, results = zkm.multi(zk, 1, (SetData("/a", "a2", 0),))
    assert results == (OK,)
    zk, results = zkm.multi(zk, 1, (SetData("/a", "a3", 1),))
    assert results == (OK,)
    node = znode(zk, "/a")
    assert (node.data, node.version, node.czxid, node.mzxid) == ("a3", 2, 1, 5)
    assert zk.zxid == 5


def test_delete_then_create_is_a_new_znode_with_a_new_czxid_and_version_zero():
    """KIP-380: a re-created /brokers/ids/<id> is a new generation because its czxid is new."""
    zk = ensemble()
    zk, _ = zkm.multi(zk, 1, (SetData("/a/b", "b2"),))  # zxid 4, version 1
    zk, results = zkm.multi(zk, 1, (Delete("/a/b", 1),))  # zxid 5
    assert results == (OK,) and zkm.get(zk, "/a/b") is None
    zk, results = zkm.multi(zk, 1, (Create("/a/b", "b3"),))  # zxid 6
    assert results == (OK,)
    node = znode(zk, "/a/b")
    assert (node.version, node.czxid, node.mzxid) == (0, 6, 6)


def test_failed_write_takes_a_zxid_and_changes_no_znode():
    """ZooKeeper logs a failed request as an error txn: the zxid advances, the tree does not change."""
    zk = ensemble()
    after, results = zkm.multi(zk, 1, (SetData("/a", "x", 5),))
    assert results == (ZkCode.BAD_VERSION,)
    assert after.zxid == zk.zxid + 1 == 4
    assert tree(after) == tree(zk)


def test_reads_take_no_zxid():
    """getData / getChildren / session lookups are not transactions."""
    zk = ensemble()
    before = zk.zxid
    assert zkm.get(zk, "/a").data == "a"
    assert zkm.get(zk, "/nope") is None
    assert [name for name, _ in zkm.children(zk, "/a")] == ["b"]
    assert zkm.session_alive(zk, 1) and zkm.session_client(zk, 1) == 7
    assert zk.zxid == before == 3


def test_children_lists_only_direct_children_in_name_order():
    """getChildren(/brokers/ids) as the controller reads it: direct children only, in name order."""
    zk = zkm.initial({"/r": 0, "/r/2": 2, "/r/10": 10, "/r/2/deep": 3, "/rx": 4})
    assert [name for name, _ in zkm.children(zk, "/r")] == ["10", "2"]


def test_open_and_close_session_each_take_a_zxid():
    """createSession and closeSession are transactions in ZooKeeper."""
    zk = zkm.initial({"/a": 1})
    zk, s1 = zkm.open_session(zk, 0)
    assert (s1, zk.zxid, zk.sessions) == (1, 2, ((1, 0),))
    zk = zkm.close_session(zk, s1)
    assert (zk.zxid, zk.sessions) == (3, ())


# ---- multi ------------------------------------------------------------------------------------------


def test_multi_ops_see_the_tree_as_earlier_ops_left_it():
    """KIP-380 §Broker Registration: create + setData(version 0) in one multi returns the stat atomically."""
    zk = ensemble()
    after, results = zkm.multi(zk, 1, (Create("/c", "c", ephemeral=True), SetData("/c", "c2", 0), Check("/c", 1)))
    assert results == (OK, OK, OK)
    node = znode(after, "/c")
    # One transaction: the create and the setData share the zxid.
    assert (node.data, node.version, node.czxid, node.mzxid, node.ephemeral_owner) == ("c2", 1, 4, 4, 1)
    assert after.zxid == 4


def test_multi_with_bad_version_in_the_middle_applies_nothing():
    """All or nothing: OK for the ops before the failing one, its code, RUNTIMEINCONSISTENCY after."""
    zk = ensemble()
    ops = (Create("/c", "c"), Check("/a", 3), SetData("/a/b", "x"), Delete("/a"))
    after, results = zkm.multi(zk, 1, ops)
    assert results == (OK, ZkCode.BAD_VERSION, RI, RI)
    assert tree(after) == tree(zk)
    assert after.zxid == 4


def test_multi_with_no_node_applies_nothing():
    """multi all-or-nothing with NONODE in the middle (ZooKeeper DataTree multi results)."""
    zk = ensemble()
    after, results = zkm.multi(zk, 1, (SetData("/a", "x", 0), Delete("/missing"), Create("/d", 1)))
    assert results == (OK, ZkCode.NO_NODE, RI)
    assert tree(after) == tree(zk) and after.zxid == 4


def test_multi_with_node_exists_applies_nothing():
    """multi all-or-nothing with NODEEXISTS: an earlier delete in the same multi is rolled back too."""
    zk = ensemble()
    after, results = zkm.multi(zk, 1, (Delete("/a/b", 0), Create("/a", "again"), SetData("/a", "x")))
    assert results == (OK, ZkCode.NODE_EXISTS, RI)
    assert tree(after) == tree(zk) and after.zxid == 4


def test_multi_failing_on_its_first_op_reports_runtime_inconsistency_for_the_rest():
    """A controller write whose /controller_epoch check fails first (KIP-866 §Controller Leadership):
    every later op reads RUNTIMEINCONSISTENCY."""
    zk = ensemble()
    after, results = zkm.multi(zk, 1, (Check("/missing", 0), Create("/c", 1), SetData("/a", 2)))
    assert results == (ZkCode.NO_NODE, RI, RI)
    assert tree(after) == tree(zk) and after.zxid == 4


def test_check_on_a_missing_node_is_no_node_and_with_wrong_version_bad_version():
    """The check op the controller's fencing relies on (KIP-866 §Controller Leadership)."""
    zk = ensemble()
    assert zkm.multi(zk, 1, (Check("/missing", ANY_VERSION),))[1] == (ZkCode.NO_NODE,)
    assert zkm.multi(zk, 1, (Check("/a", 1),))[1] == (ZkCode.BAD_VERSION,)
    assert zkm.multi(zk, 1, (Check("/a", 0),))[1] == (OK,)


def test_version_minus_one_matches_any_version():
    """ZooKeeper's -1: setData, delete and check without a version condition."""
    zk = ensemble()
    zk, _ = zkm.multi(zk, 1, (SetData("/a", "x", 0), SetData("/a", "y", 1)))  # /a at version 2
    after, results = zkm.multi(zk, 1, (Check("/a", ANY_VERSION), SetData("/a", "z", ANY_VERSION)))
    assert results == (OK, OK)
    assert znode(after, "/a").version == 3
    after, results = zkm.multi(after, 1, (Delete("/a", ANY_VERSION),))
    assert results == (OK,) and zkm.get(after, "/a") is None


def test_succeeded_only_when_every_op_is_ok():
    """A multi succeeded only if every per-op result is OK."""
    assert zkm.succeeded((OK, OK))
    assert not zkm.succeeded((OK, ZkCode.BAD_VERSION, RI))


# ---- unavailable ensemble, dead sessions --------------------------------------------------------------


def test_write_while_zookeeper_is_unavailable_is_connection_loss_and_changes_nothing():
    """Quorum lost: no write reaches the ensemble, so not even a zxid is taken."""
    zk = ensemble().replace(available=False)
    after, results = zkm.multi(zk, 1, (Create("/c", 1), SetData("/a", 2)))
    assert results == (ZkCode.CONNECTION_LOSS, ZkCode.CONNECTION_LOSS)
    assert after == zk


def test_write_on_a_dead_session_is_session_expired_and_changes_nothing():
    """A zombie whose session expired cannot write through it (SESSIONEXPIRED); no transaction is logged."""
    zk = zkm.close_session(ensemble(), 1)
    after, results = zkm.multi(zk, 1, (Create("/c", 1),))
    assert results == (ZkCode.SESSION_EXPIRED,)
    assert after == zk


def test_outage_disables_every_zookeeper_action_until_recovery():
    """ZooKeeper loses its quorum: no session opens or expires, no broker registers, no controller
    writes, and no zxid is taken until it serves again. A broker stopped meanwhile exits without
    closing its session (KafkaServer.shutdown gives up on ZooKeeper), which lives on."""
    scope = SCOPES["fencing"].replace(budget=Budget(outages=2, expiries=1, restarts=1, operator=1, max_in_flight=6))
    state = initial_state(scope)
    down = run(state, ZkOutage())
    assert down.zk.available is False and down.zk.zxid == state.zk.zxid == 9
    assert step(down, ExpireSession(1)) is None
    stopped = step(down, StopBroker(1))
    assert stopped is not None and not stopped.brokers[1].alive and stopped.zk == down.zk
    assert step(down, UpdateFeatures(0, "group_coordinator", 2, True)) is None
    up = run(down, ZkRecover())
    assert up.zk == state.zk
    expired = run(up, ExpireSession(2))  # broker 1's session: zxid 10
    assert expired.zk.zxid == 10
    down = run(expired, ZkOutage())
    assert step(down, OpenSession(1)) is None
    reopened = run(down, ZkRecover(), OpenSession(1), RegisterBroker(1))
    assert reopened.zk.zxid == 12
    assert znode(reopened, "/brokers/ids/1").czxid == 12


# ---- sessions and ephemerals ----------------------------------------------------------------------


def test_session_close_deletes_its_ephemerals_and_watches_only():
    """Expiry/close takes the session's ephemerals and watches with it, in one transaction."""
    zk = ensemble()
    zk, s2 = zkm.open_session(zk, 8)  # zxid 4
    zk, _ = zkm.multi(zk, 1, (Create("/a/e1", 1, ephemeral=True),))  # zxid 5
    zk, _ = zkm.multi(zk, s2, (Create("/a/e2", 2, ephemeral=True),))  # zxid 6
    zk = zkm.add_watch(zk, 1, "/a/b", WatchKind.DATA)
    zk = zkm.add_watch(zk, s2, "/a", WatchKind.CHILD)
    after = zkm.close_session(zk, 1)
    assert after.zxid == 7
    assert zkm.get(after, "/a/e1") is None
    assert znode(after, "/a/e2").ephemeral_owner == s2
    assert after.sessions == ((s2, 8),)
    assert after.watches == frozenset()  # session 1's watch is gone; s2's child watch fired
    assert after.notifications == {(8, "/a", WatchKind.CHILD)}


def test_session_ids_are_not_monotonic_a_freed_id_is_handed_out_again():
    """KIP-380 §Rejected Alternatives: a session id is no generation, it is not monotonically increasing."""
    zk = zkm.initial({})
    zk, s1 = zkm.open_session(zk, 0)
    zk, s2 = zkm.open_session(zk, 1)
    zk = zkm.close_session(zk, s1)
    zk, s3 = zkm.open_session(zk, 0)
    assert (s1, s2, s3) == (1, 2, 1)
    assert s3 < s2


def test_session_expiry_in_the_cluster_frees_the_registration_of_its_broker():
    """A broker's /brokers/ids/<id> is ephemeral: its session expiring removes it and nothing else."""
    state = initial_state(SCOPES["fencing"])
    assert znode(state, "/brokers/ids/1").ephemeral_owner == 2
    after = run(state, ExpireSession(2))
    assert zkm.get(after.zk, "/brokers/ids/1") is None
    assert after.zk.zxid == state.zk.zxid + 1
    assert after.zk.sessions == ((1, 0),)
    # The controller's child watch on /brokers/ids fired for broker 0's process.
    assert after.zk.notifications == {(0, "/brokers/ids", WatchKind.CHILD)}
    # Re-registering needs a new session first.
    assert step(after, RegisterBroker(1)) is None


# ---- watches ----------------------------------------------------------------------------------------


def test_data_watch_fires_once_on_setdata_for_the_sessions_client():
    """Watches are one-shot: the first change notifies the client, the next one does not."""
    zk = zkm.add_watch(ensemble(), 1, "/a", WatchKind.DATA)
    zk, _ = zkm.multi(zk, 1, (SetData("/a", "x"),))
    assert zk.notifications == {(7, "/a", WatchKind.DATA)}
    assert zk.watches == frozenset()
    assert zkm.pending(zk, 7, "/a", WatchKind.DATA)
    zk = zkm.consume(zk, 7, "/a", WatchKind.DATA)
    zk, _ = zkm.multi(zk, 1, (SetData("/a", "y"),))
    assert zk.notifications == frozenset()
    assert not zkm.pending(zk, 7, "/a", WatchKind.DATA)


def test_child_watch_fires_on_create_and_delete_of_a_child_not_on_its_setdata():
    """The controller's /brokers/ids watch (KIP-380 §Controller Detects Bounced Broker): a registration
    or its removal fires it; a data change of a registration does not."""
    zk = zkm.add_watch(ensemble(), 1, "/a", WatchKind.CHILD)
    zk, _ = zkm.multi(zk, 1, (SetData("/a/b", "x"),))
    assert zk.notifications == frozenset() and zk.watches == {(1, "/a", WatchKind.CHILD)}
    zk, _ = zkm.multi(zk, 1, (Create("/a/c", 1),))
    assert zk.notifications == {(7, "/a", WatchKind.CHILD)} and zk.watches == frozenset()
    zk = zkm.add_watch(zkm.consume(zk, 7, "/a", WatchKind.CHILD), 1, "/a", WatchKind.CHILD)
    zk, _ = zkm.multi(zk, 1, (Delete("/a/c"),))
    assert zk.notifications == {(7, "/a", WatchKind.CHILD)} and zk.watches == frozenset()


def test_data_watch_fires_on_create_and_delete_of_its_path():
    """exists() watches fire on NodeCreated; data watches on NodeDeleted."""
    zk = zkm.add_watch(ensemble(), 1, "/c", WatchKind.DATA)
    zk, _ = zkm.multi(zk, 1, (Create("/c", 1),))
    assert zk.notifications == {(7, "/c", WatchKind.DATA)}
    zk = zkm.add_watch(zkm.consume(zk, 7, "/c", WatchKind.DATA), 1, "/c", WatchKind.DATA)
    zk, _ = zkm.multi(zk, 1, (Delete("/c"),))
    assert zk.notifications == {(7, "/c", WatchKind.DATA)}


def test_failed_multi_fires_no_watch():
    """A failed multi changed nothing, so it fires nothing."""
    zk = zkm.add_watch(ensemble(), 1, "/a", WatchKind.DATA)
    after, results = zkm.multi(zk, 1, (SetData("/a", "x"), Check("/a/b", 9)))
    assert results == (OK, ZkCode.BAD_VERSION)
    assert after.watches == zk.watches and after.notifications == frozenset()


def test_watch_of_a_closed_session_never_fires():
    """A watch belongs to its session: once the session is closed, changes notify nobody."""
    zk = ensemble()
    zk, s2 = zkm.open_session(zk, 8)
    zk = zkm.add_watch(zk, 1, "/a", WatchKind.DATA)
    zk = zkm.close_session(zk, 1)
    zk, _ = zkm.multi(zk, s2, (SetData("/a", "x"),))
    assert zk.notifications == frozenset() and zk.watches == frozenset()


def test_check_op_in_a_multi_fires_no_watch():
    """A check reads a version and changes nothing, so ZooKeeper triggers no watch for it.

    Every controller write is a multi starting with Check(/controller_epoch) (KIP-866 §Controller
    Leadership); a watcher of /controller_epoch or of its parent must not be woken by it. In
    ZooKeeper's DataTree a check sub-txn (CheckVersionTxn) triggers nothing.
    """
    zk = zkm.add_watch(ensemble(), 1, "/a/b", WatchKind.DATA)
    zk = zkm.add_watch(zk, 1, "/a", WatchKind.CHILD)
    after, results = zkm.multi(zk, 1, (Check("/a/b", 0),))
    assert results == (OK,)
    assert after.notifications == frozenset()
    assert after.watches == zk.watches
