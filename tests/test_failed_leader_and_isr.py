"""A LeaderAndIsr that fails inside a ZK broker and is never repaired (issue #17 §4-5; docs/guide/real-kafka.md,
Findings).

Kafka 3.5 to 3.9 (met on 3.5.2, 3.7.2, 3.8.1 and 3.9.2): a KRaft controller in dual write sends a ZK broker a
LeaderAndIsr while the broker's ZooKeeper session is expired; the request also names a partition new to the broker,
whose log it cannot create (the topic config read throws SessionExpiredException), so it answers
UNKNOWN_SERVER_ERROR, having taken the new leader epoch of the partitions handled before, with no fetcher. The KRaft
controller drops the error, does not see the broker's new ZooKeeper registration, and later LeaderAndIsrs at the same
epoch start no fetcher: the broker never rejoins, and a reassignment adding it never completes.

Scope ``failed-leader-and-isr`` (dual write; an admin adds broker 1 to partition 0; broker 1's session may expire
once; the LeaderAndIsr may fail inside it once); the goal FailedLeaderAndIsrIsRepaired. kip's broker takes a control
request whole, so the freedom is kafka-3.9's; the seeded bug ``leader_and_isr_applied_part_way`` puts it into kip
(tests/test_seeded_bugs.py finds its lasso).
"""

from __future__ import annotations

from model.actions import (
    AlterPartitionReassignments,
    Deliver,
    DualWrite,
    ExpireSession,
    LeaderAndIsrFailsInBroker,
    OpenSession,
    RegisterBroker,
)
from model.bugs import CORRECT, Variant
from model.invariants import BY_NAME
from model.kraft import ControllerId
from model.kraft_quorum import alter_partition_refused, own_image
from model.migration import Profile
from model.scopes import SCOPES, initial_state
from model.state import LeaderAndIsr
from model.step import step
from model.types import BrokerId, PartitionId
from properties.liveness import HOLDS, VIOLATED, replay_lasso

SCOPE = SCOPES["failed-leader-and-isr"]
GOAL = "FailedLeaderAndIsrIsRepaired"
KAFKA_3_9 = Variant(profile=Profile.KAFKA_3_9)
B0, B1, P0, C0 = BrokerId(0), BrokerId(1), PartitionId(0), ControllerId(3000)


def test_kip_takes_the_request_whole_and_every_goal_holds(correct_liveness):
    """kip: no ZooKeeper read fails a control request part-way; the freedom is never enabled, and every goal holds on
    the complete graph, the reassignment's completion included."""
    result = correct_liveness(SCOPE.name, Profile.KIP)
    assert result.complete and result.distinct_states > 10_000
    assert {v.name: v.result for v in result.verdicts}[GOAL] == HOLDS
    assert not [v.name for v in result.verdicts if v.result == VIOLATED]


def test_kafka_39_leaves_the_follower_without_a_fetcher_for_good_and_the_lasso_replays(correct_liveness):
    """kafka-3.9: the lasso runs the expiry, the reassignment's dual write, the failed LeaderAndIsr and the broker's
    new registration, and stutters with broker 1 at the new leader epoch, no fetcher, outside the ISR."""
    result = correct_liveness(SCOPE.name, Profile.KAFKA_3_9)
    assert result.complete
    violated = {v.name: v for v in result.verdicts if v.result == VIOLATED}
    assert set(violated) == {GOAL}
    lasso = violated[GOAL].lasso
    assert replay_lasso(SCOPE, KAFKA_3_9, lasso, BY_NAME[GOAL]).ok
    actions = list(lasso.prefix) + list(lasso.loop)
    failed = next(i for i, a in enumerate(actions) if isinstance(a, LeaderAndIsrFailsInBroker))
    assert actions[failed].message.dest == B1
    state = initial_state(SCOPE)
    for action in lasso.prefix:
        state = step(state, action, KAFKA_3_9)
    local = state.brokers[B1].replicas[P0]
    assert local is not None and local.no_fetcher and local.leader_epoch == actions[failed].message.leader_epoch
    c = state.controllers[0]
    assert B1 in own_image(c).partitions[P0].adding  # the reassignment never completed
    assert alter_partition_refused(state, own_image(c), B0, P0, B1) is not None


def _failed_follower_request(variant: Variant):
    """The scope to the failed LeaderAndIsr: broker 1's session expired, the reassignment dual-written."""
    state = initial_state(SCOPE)
    for action in (ExpireSession(state.brokers[B1].session), AlterPartitionReassignments(C0, P0, (B0, B1)),
                   DualWrite(C0)):
        state = step(state, action, variant)
        assert state is not None, action
    (request,) = [m for m in state.network if isinstance(m, LeaderAndIsr) and m.dest == B1]
    return state, request


def test_only_a_broker_whose_session_expired_fails_and_a_newer_epoch_repairs_it():
    """The freedom needs the broker's session gone (a live one creates the log); under kip it is never enabled; a
    LeaderAndIsr at a newer leader epoch gives the follower a fetcher again, and a restart forgets it."""
    state, request = _failed_follower_request(KAFKA_3_9)
    assert step(state, LeaderAndIsrFailsInBroker(request), CORRECT) is None  # kip: taken whole
    failed = step(state, LeaderAndIsrFailsInBroker(request), KAFKA_3_9)
    assert failed is not None and failed.brokers[B1].replicas[P0].no_fetcher
    assert failed.budget.failed_leader_and_isrs == 0 and request not in failed.network
    registered = step(step(failed, OpenSession(B1), KAFKA_3_9), RegisterBroker(B1), KAFKA_3_9)
    again = registered.replace(network=registered.network | {request})
    assert step(again, LeaderAndIsrFailsInBroker(request), KAFKA_3_9) is None  # its new session reads ZooKeeper
    same_epoch = step(again, Deliver(request), KAFKA_3_9)
    assert same_epoch is None or same_epoch.brokers[B1].replicas[P0].no_fetcher  # "not a new epoch"
    newer = request.replace(leader_epoch=request.leader_epoch + 1)
    repaired = step(registered.replace(network=registered.network | {newer}), Deliver(newer), KAFKA_3_9)
    assert repaired is not None and not repaired.brokers[B1].replicas[P0].no_fetcher
    assert not BY_NAME[GOAL].when(repaired)
