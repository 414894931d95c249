"""ZooKeeper reads from a lagging server (model.zookeeper views; scope ``stale-reads``).

Real ZooKeeper serves a session's reads from the server it is connected to, which may lag the leader; it
promises only that a client never reads older state than it has seen, its own writes included. Kafka 3.9's
ZooKeeperClient has no sync request at all (its AsyncRequest types are Create, Delete, Exists, GetData,
SetData, GetAcl, SetAcl, GetChildren and Multi), so what keeps a stale read from doing harm is the versions
its writes carry, checked at the leader (KIP-866 §Controller Leadership, §Dual Metadata Writes).
"""

from __future__ import annotations

from model import zookeeper as zkm
from model.actions import BecomeZkController, ZkServerLags
from model.bugs import Bug, Variant
from model.invariants import violations, witnessed
from model.migration import MigrationDriverState
from model.scopes import SCOPES, initial_state
from model.state import CONTROLLER, CONTROLLER_EPOCH, KRaftControllerZNode
from model.step import candidate_actions, step
from model.types import ZkCode
from model.zookeeper import Create, SetData
from properties.regressions import STALE_CLAIM
from tests.conftest import run

A, B = 3000, 3001


def test_lagging_view_is_frozen_never_older_than_seen_and_ends_with_the_clients_own_write():
    """A lagging server's tree is the one the client last saw; other clients' writes do not show in it; the
    client's own write is applied by its server before the answer, so its reads are current again."""
    zk = zkm.initial({"/a": 1})
    zk = zkm.lag(zk, A)
    zk, _ = zkm.multi(zk, zkm.NO_SESSION, (SetData("/a", 2),), reader=B)
    assert zkm.get(zkm.seen_by(zk, A), "/a").data == 1 and zkm.get(zkm.seen_by(zk, B), "/a").data == 2
    zk, results = zkm.multi(zk, zkm.NO_SESSION, (Create("/a", 3),), reader=A)
    assert results == (ZkCode.NODE_EXISTS,)  # decided at the leader, where /a exists
    assert not zkm.lagging(zk, A) and zkm.get(zkm.seen_by(zk, A), "/a").data == 2


def test_scopes_without_the_budget_offer_no_lag():
    """Existing scopes' pinned counts do not move: without ``stale_reads`` no lag is a candidate."""
    for name in ("migration", "handover", "dual-write"):
        state = initial_state(SCOPES[name])
        assert not any(isinstance(a, ZkServerLags) for a in candidate_actions(state, SCOPES[name]))


def test_stale_claim_is_refused_at_the_leader_and_retried_from_a_caught_up_server():
    """The old leader's server lags from before the new leader's claim; its driver, not yet told of the new
    leadership, claims from what it reads: /controller_epoch's old version. The multi fails (BadVersion) at
    the leader, the write brings its server up to date, and the driver stays in BECOME_CONTROLLER: the new
    leader's claim stands."""
    scope = SCOPES["stale-reads"]
    state = run(initial_state(scope), *STALE_CLAIM[:-1])
    claimed = state.zk
    after = step(state, STALE_CLAIM[-1])
    assert after is not None and violations(state, STALE_CLAIM[-1], after) == []
    assert after.ghost.last_multi[0] is ZkCode.BAD_VERSION
    assert zkm.get(after.zk, CONTROLLER).data == KRaftControllerZNode(B, zkm.get(claimed, CONTROLLER).data.kraft_epoch)
    assert zkm.get(after.zk, CONTROLLER_EPOCH) == zkm.get(claimed, CONTROLLER_EPOCH)
    assert not zkm.lagging(after.zk, A)
    assert after.controllers[0].driver.state is MigrationDriverState.BECOME_CONTROLLER
    assert "StaleReadRefusedAtLeader" in witnessed(state, STALE_CLAIM[-1], after)


def test_claim_trusting_its_stale_read_reuses_a_zk_controller_epoch():
    """The seeded bug claim_trusts_stale_read: without the versions, the same stale claim applies and writes
    back the epoch the new leader already holds; harmless when the server does not lag (no ZkServerLags)."""
    scope = SCOPES["stale-reads"]
    bug = Variant(frozenset({Bug.CLAIM_TRUSTS_STALE_READ}))
    state = run(initial_state(scope), *STALE_CLAIM[:-1], variant=bug)
    after = step(state, BecomeZkController(A), bug)
    assert after is not None
    assert "ZkControllerEpochsIncreaseAcrossHandOver" in violations(state, BecomeZkController(A), after)
    fresh = run(initial_state(scope), *STALE_CLAIM[1:-1], variant=bug)
    after = step(fresh, BecomeZkController(A), bug)
    assert after is None or violations(fresh, BecomeZkController(A), after) == []

