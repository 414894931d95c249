"""KIP-380 broker generations: the broker epoch is the czxid of /brokers/ids/<id>.

The seed: "The czxid (create transaction id) of the broker's zookeeper ephemeral znode will be
used for broker generation"; brokers reject LeaderAndIsr / UpdateMetadata / StopReplica for an
older generation (STALE_BROKER_EPOCH, 77); the controller rejects a ControlledShutdown from an
older generation; BrokerChange processing detects new, dead and bounced brokers by czxid.
Shipped Kafka (reference §4) also accepts -1 (UNKNOWN_BROKER_EPOCH) and newer epochs.
"""

from __future__ import annotations

from model import zookeeper as zkm
from model.actions import (
    Deliver,
    OpenSession,
    ProcessBrokerChange,
    RegisterBroker,
    RestartBroker,
    SendControlledShutdown,
    StopBroker,
)
from model.bugs import CORRECT
from model.invariants import witnessed
from model.outcome import error_of
from model.scopes import SCOPES, initial_state
from model.state import (
    Budget,
    ControlledShutdown,
    LeaderAndIsr,
    LiveBroker,
    LocalReplica,
    PartitionState,
    StopReplica,
    UpdateMetadata,
    broker_path,
    partition_state_path,
)
from model.step import step
from model.types import UNKNOWN_BROKER_EPOCH, Errors, ReplicaRole, ZkCode
from model.zk_era import (
    broker_epoch_is_stale,
    classify_broker_change,
    decide_control_request,
    decide_controlled_shutdown,
)
from model.zookeeper import WatchKind
from tests.conftest import TWO_PARTITIONS, messages, only, run, run_steps, tree, znode

# The warm "bounce" scope: broker 0 (epoch 5) is controller in epoch 1, broker 1 has epoch 7.
OLD_UM = UpdateMetadata(controller_id=0, controller_epoch=1, broker_epoch=7, dest=1, partitions=((0, 0),))
OLD_LISR = LeaderAndIsr(0, 1, 7, dest=1, partition=0, leader=0, leader_epoch=0, isr=(0, 1))
BOUNCE = (StopBroker(1), RestartBroker(1), OpenSession(1), RegisterBroker(1))


def bounce_start():
    return initial_state(SCOPES["bounce"])


# ---- registration -----------------------------------------------------------------------------


def test_registration_broker_epoch_is_the_czxid_of_its_ephemeral_znode():
    """KIP-380 §Broker Registration in Zookeeper: multi [Create(ephemeral), SetData(version 0)] and
    take the czxid from the returned stat."""
    state = bounce_start()
    for broker, session, czxid in ((0, 1, 5), (1, 2, 7)):
        node = znode(state, broker_path(broker))
        assert (node.czxid, node.mzxid, node.version, node.ephemeral_owner) == (czxid, czxid, 1, session)
        assert state.brokers[broker].epoch == czxid
        assert state.brokers[broker].registered


def test_registration_again_after_a_restart_gives_a_greater_epoch():
    """KIP-380 §Motivation: the generation is "unique & monotonically increasing" per (re)join."""
    state = run(bounce_start(), StopBroker(1), RestartBroker(1), OpenSession(1))
    assert state.brokers[1].epoch == UNKNOWN_BROKER_EPOCH and not state.brokers[1].registered
    assert state.zk.zxid == 11
    state = run(state, RegisterBroker(1))
    assert state.ghost.last_multi == (ZkCode.OK, ZkCode.OK)
    node = znode(state, broker_path(1))
    assert (node.czxid, node.version) == (12, 1)
    assert state.brokers[1].epoch == 12 > 7
    assert state.history.registered_epoch(1) == 12


def test_registration_session_id_is_reused_but_the_epoch_is_not():
    """KIP-380 §Rejected Alternatives: the session id comes back after a bounce; the czxid does not."""
    state = run(bounce_start(), *BOUNCE)
    assert state.brokers[1].session == 2  # the same id as the previous generation's session
    assert state.brokers[1].epoch == 12  # but a new generation


# ---- the pure decisions -----------------------------------------------------------------------


def test_broker_epoch_is_stale_only_when_older_and_known():
    """KIP-380 §Broker Rejects...: only smaller epochs are stale; -1 (shipped UNKNOWN_BROKER_EPOCH) and
    newer ones are not (reference §4)."""
    assert broker_epoch_is_stale(6, 7)
    assert not broker_epoch_is_stale(7, 7)
    assert not broker_epoch_is_stale(8, 7)  # KAFKA-9839: newer epochs are accepted
    assert not broker_epoch_is_stale(UNKNOWN_BROKER_EPOCH, 7)  # ZkBrokerEpochManager: -1 accepted


def test_decide_control_request_refuses_an_older_broker_epoch_with_stale_broker_epoch():
    """KIP-380 §Broker Rejects Control Requests Applied to Former Generations (77)."""
    broker = bounce_start().brokers[1].replace(epoch=12)
    for request in (OLD_UM, OLD_LISR, StopReplica(0, 1, 7, dest=1, partition=0, delete_partition=False)):
        assert error_of(decide_control_request(broker, request, CORRECT)) is Errors.STALE_BROKER_EPOCH
    assert Errors.STALE_BROKER_EPOCH == 77


def test_decide_control_request_accepts_unknown_current_and_newer_broker_epochs():
    """Shipped Kafka (reference §4): -1 is UNKNOWN_BROKER_EPOCH and accepted; newer is accepted (KAFKA-9839)."""
    broker = bounce_start().brokers[1]
    assert broker.epoch == 7
    for epoch in (UNKNOWN_BROKER_EPOCH, 7, 8, 100):
        assert error_of(decide_control_request(broker, OLD_LISR.replace(broker_epoch=epoch), CORRECT)) is Errors.NONE


def test_decide_control_request_refuses_an_older_controller_epoch_with_stale_controller_epoch():
    """KAFKA-6082 / ReplicaManager: a request from an older controller epoch is STALE_CONTROLLER_EPOCH (11)."""
    broker = bounce_start().brokers[1].replace(controller_epoch=2)
    assert error_of(decide_control_request(broker, OLD_LISR, CORRECT)) is Errors.STALE_CONTROLLER_EPOCH
    assert error_of(decide_control_request(broker, OLD_UM, CORRECT)) is Errors.STALE_CONTROLLER_EPOCH
    assert error_of(decide_control_request(broker, OLD_LISR.replace(controller_epoch=2), CORRECT)) is Errors.NONE
    assert error_of(decide_control_request(broker, OLD_LISR.replace(controller_epoch=3), CORRECT)) is Errors.NONE
    assert Errors.STALE_CONTROLLER_EPOCH == 11


def test_decide_control_request_checks_the_broker_epoch_before_the_controller_epoch():
    """KafkaApis checks the broker epoch first: a request stale in both ways is STALE_BROKER_EPOCH."""
    broker = bounce_start().brokers[1].replace(epoch=12, controller_epoch=2)
    assert error_of(decide_control_request(broker, OLD_LISR, CORRECT)) is Errors.STALE_BROKER_EPOCH


def test_decide_controlled_shutdown_refuses_an_older_generation():
    """KIP-380 §Controller Rejects ControlledShutdownRequest Sent from Former Generations."""
    controller = bounce_start().brokers[0]
    assert controller.controller.cached_epoch(1) == 7
    stale = ControlledShutdown(1, 6, 0)
    assert error_of(decide_controlled_shutdown(controller, stale, CORRECT)) is Errors.STALE_BROKER_EPOCH
    assert error_of(decide_controlled_shutdown(controller, ControlledShutdown(1, 7, 0), CORRECT)) is Errors.NONE
    assert error_of(decide_controlled_shutdown(controller, ControlledShutdown(1, 8, 0), CORRECT)) is Errors.NONE
    unknown = ControlledShutdown(1, UNKNOWN_BROKER_EPOCH, 0)
    assert error_of(decide_controlled_shutdown(controller, unknown, CORRECT)) is Errors.NONE


def test_decide_controlled_shutdown_for_a_broker_not_live_is_broker_not_available():
    """doControlledShutdown: an id that is not live nor shutting down is BrokerNotAvailable (8)."""
    controller = bounce_start().brokers[0]
    role = controller.controller.replace(live=(LiveBroker(0, 5, controller.config.supported),))
    m = ControlledShutdown(1, 7, 0)
    refused = decide_controlled_shutdown(controller.replace(controller=role), m, CORRECT)
    assert error_of(refused) is Errors.BROKER_NOT_AVAILABLE


def test_decide_controlled_shutdown_sent_to_a_broker_that_is_not_controller_is_stale_controller_epoch():
    """Shipped doControlledShutdown (reference §4): "not active => ControllerMovedException (maps to
    STALE_CONTROLLER_EPOCH 11, not NOT_CONTROLLER)". The seed names no code for this case, so the
    shipped one decides; the model answers NOT_CONTROLLER (41) and marks no difference.
    """
    not_controller = bounce_start().brokers[1]
    m = ControlledShutdown(0, 5, 1)
    assert error_of(decide_controlled_shutdown(not_controller, m, CORRECT)) is Errors.STALE_CONTROLLER_EPOCH


def test_classify_broker_change_by_czxid():
    """KIP-380 §Controller Detects Bounced Broker: new, dead and bounced (same id, higher czxid)."""
    known = {0: 5, 1: 7, 2: 9}
    current = {0: 5, 1: 12, 3: 13}
    assert classify_broker_change(known, current) == (frozenset({3}), frozenset({2}), frozenset({1}))
    assert classify_broker_change(known, dict(known)) == (frozenset(), frozenset(), frozenset())
    assert classify_broker_change({}, {0: 5}) == (frozenset({0}), frozenset(), frozenset())


# ---- stale requests at the broker -----------------------------------------------------------------


def test_control_request_for_the_previous_generation_leaves_the_broker_unchanged():
    """KIP-380 §Broker Rejects...: broker 1 re-registered (epoch 12); the old controller requests
    addressed to epoch 7 change nothing when delivered."""
    state = run(bounce_start(), *BOUNCE)
    for old in (OLD_LISR, OLD_UM):
        assert error_of(decide_control_request(state.brokers[1], old, CORRECT)) is Errors.STALE_BROKER_EPOCH
        after = run(state, Deliver(old))
        assert after.brokers[1] == state.brokers[1]
        assert after.network == state.network - {old}
        assert "BouncedBrokerGetsOldGenerationRequest" in witnessed(state, Deliver(old), after)


def test_restarted_broker_before_registering_does_not_apply_previous_generation_requests():
    """KIP-380 §Motivation, third case (KAFKA-7235): "If the first LeaderAndIsrRequest that a broker
    processes is sent by the active controller before its startup" the broker mishandles it.

    Broker 1 stops and restarts; before it has registered (so before it knows its new epoch) the
    controller's LeaderAndIsr for its previous generation (broker epoch 7) is delivered. Shipped
    Kafka processes no request before registering (KafkaServer.startup starts the request
    processors after zkClient.registerBroker), so the new process must not apply it. The model
    applies it: the process has epoch -1, and 7 < -1 is false.
    """
    state = run(bounce_start(), StopBroker(1), RestartBroker(1))
    assert state.brokers[1].epoch == UNKNOWN_BROKER_EPOCH and not state.brokers[1].registered
    after = step(state, Deliver(OLD_LISR))  # either not deliverable yet, or delivered and refused
    after = state if after is None else after
    assert after.brokers[1].replicas == (None,)
    assert after.brokers[1].controller_epoch == 0


# ---- ControlledShutdown at the controller ---------------------------------------------------------


def test_controlled_shutdown_from_the_previous_generation_moves_no_leadership():
    """KIP-380 §Motivation, second case: a ControlledShutdown retried across a bounce reaches the
    controller after it cached the new generation; it is refused and nothing is written or sent."""
    state = run(bounce_start(), SendControlledShutdown(1))
    shutdown = only(state, ControlledShutdown, 0)
    assert shutdown == ControlledShutdown(broker_id=1, broker_epoch=7, dest=0)
    state = run(state, *BOUNCE, ProcessBrokerChange(0))
    assert state.brokers[0].controller.cached_epoch(1) == 12
    assert error_of(decide_controlled_shutdown(state.brokers[0], shutdown, CORRECT)) is Errors.STALE_BROKER_EPOCH
    after = run(state, Deliver(shutdown))
    assert "StaleControlledShutdownArrives" in witnessed(state, Deliver(shutdown), after)
    assert tree(after) == tree(state) and after.zk.zxid == state.zk.zxid
    assert after.network == state.network - {shutdown}
    assert znode(after, partition_state_path(0)).data == PartitionState(0, 0, (0, 1), 0)


def test_controlled_shutdown_moves_leadership_within_the_isr_and_stops_the_leaving_follower():
    """doControlledShutdown: partitions the broker leads move to the next live ISR replica, it leaves
    the ISR of the ones it follows (leader epochs bump) and gets StopReplica for those."""
    state = initial_state(TWO_PARTITIONS)
    # zxids: 4 initial nodes, broker 0 registers at 6, broker 1 at 8, election 9, /features 10.
    assert (state.brokers[0].epoch, state.brokers[1].epoch, state.zk.zxid) == (6, 8, 10)
    assert state.network == frozenset()
    assert state.brokers[1].replicas == (LocalReplica(0, ReplicaRole.LEADER), LocalReplica(0, ReplicaRole.FOLLOWER))
    state = run(state, SendControlledShutdown(1))
    shutdown = ControlledShutdown(broker_id=1, broker_epoch=8, dest=0)
    assert state.network == {shutdown}
    after = run(state, Deliver(shutdown))
    assert after.ghost.last_multi == (ZkCode.OK, ZkCode.OK, ZkCode.OK)  # epoch check + 2 partition states
    assert after.zk.zxid == 11
    p0, p1 = znode(after, partition_state_path(0)), znode(after, partition_state_path(1))
    assert (p0.data, p0.version, p0.mzxid) == (PartitionState(0, 1, (0,), 1), 1, 11)
    assert (p1.data, p1.version, p1.mzxid) == (PartitionState(0, 1, (0,), 1), 1, 11)
    assert after.network == {
        LeaderAndIsr(0, 1, 6, dest=0, partition=0, leader=0, leader_epoch=1, isr=(0,)),
        LeaderAndIsr(0, 1, 6, dest=0, partition=1, leader=0, leader_epoch=1, isr=(0,)),
        StopReplica(0, 1, 8, dest=1, partition=1, delete_partition=False),
    }
    done = run(after, *(Deliver(m) for m in messages(after)))
    assert done.brokers[0].replicas == (LocalReplica(1, ReplicaRole.LEADER), LocalReplica(1, ReplicaRole.LEADER))
    # StopReplica stops the follower replica but keeps its leader epoch.
    assert done.brokers[1].replicas == (LocalReplica(0, ReplicaRole.LEADER), LocalReplica(0, ReplicaRole.STOPPED))


# ---- the fast bounce --------------------------------------------------------------------------------


def test_fast_bounce_is_detected_by_czxid_and_old_generation_requests_are_refused():
    """KIP-380 §Motivation, fourth case, and §Controller Detects Bounced Broker.

    Broker 1 stops and comes back (restart, open session, register) before controller 0 processes
    the /brokers/ids notification. The ids look unchanged ({0, 1}), but broker 1's czxid went from
    7 to 12, so the controller treats it as bounced: it caches epoch 12 and sends start-up requests
    with it. The requests still in flight for generation 7 are refused by generation 12.
    """
    steps = run_steps(bounce_start(), *BOUNCE)
    state = steps[-1][2]
    assert sorted(int(name) for name, _ in zkm.children(state.zk, "/brokers/ids")) == [0, 1]
    assert state.zk.notifications == {(0, "/brokers/ids", WatchKind.CHILD)}  # one, not yet processed
    assert state.brokers[0].controller.cached_epoch(1) == 7

    before, action = state, ProcessBrokerChange(0)
    state = run(state, action)
    assert "FastBounceDetected" in witnessed(before, action, state)
    assert state.brokers[0].controller.epochs() == {0: 5, 1: 12}
    assert state.zk.notifications == frozenset()
    assert (1, "/brokers/ids", WatchKind.CHILD) in state.zk.watches  # re-armed for the controller's session
    new_um = UpdateMetadata(controller_id=0, controller_epoch=1, broker_epoch=12, dest=1, partitions=((0, 0),))
    new_lisr = LeaderAndIsr(0, 1, 12, dest=1, partition=0, leader=0, leader_epoch=0, isr=(0, 1))
    assert state.network - before.network == {new_um, new_lisr}
    assert set(messages(state, dest=1)) == {OLD_UM, OLD_LISR, new_um, new_lisr}

    state = run(state, Deliver(OLD_LISR), Deliver(OLD_UM))
    assert state.brokers[1].replicas == (None,) and state.brokers[1].metadata == ()
    state = run(state, Deliver(new_lisr), Deliver(new_um))
    assert state.brokers[1].replicas == (LocalReplica(0, ReplicaRole.FOLLOWER),)
    assert state.brokers[1].metadata == ((0, 0),)
    assert state.brokers[1].controller_epoch == 1


# ---- a bounced partition leader ---------------------------------------------------------------------

LEADER_BOUNCE = TWO_PARTITIONS.replace(budget=Budget(restarts=1, max_in_flight=8))


def test_slow_bounce_of_a_partition_leader_moves_leadership_in_a_new_leader_epoch():
    """The controller processes broker 1's disappearance while it is down: broker 1 is dead, so its
    partition 0 (ISR (1, 0)) gets broker 0 as leader in leader epoch 1; broker 1 then comes back as
    a new broker. KIP-380 §Controller Detects Bounced Broker, "dead brokers: onBrokerFailure"."""
    state = initial_state(LEADER_BOUNCE)
    state = run(state, StopBroker(1), ProcessBrokerChange(0))
    assert znode(state, partition_state_path(0)).data == PartitionState(0, 1, (0,), 1)
    assert state.zk.zxid == 12  # stop at 11, the partition-state write at 12
    state = run(state, RestartBroker(1), OpenSession(1), RegisterBroker(1), ProcessBrokerChange(0))
    assert state.brokers[0].controller.epochs() == {0: 6, 1: 14}
    assert znode(state, partition_state_path(0)).data == PartitionState(0, 1, (0,), 1)


def test_fast_bounce_of_a_partition_leader_runs_broker_failure_before_startup():
    """KIP-380 §Controller Detects Bounced Broker, step 4: "bounced brokers: invoke
    onBrokerFailure(bounced brokers) first, then update broker generation in controller context
    for bounced brokers, finally invoke onBrokerStartup(bounced brokers)".

    Broker 1 leads partition 0 (ISR (1, 0)) and bounces before the controller processes the
    notification. A fast bounce must end like the slow one above: onBrokerFailure(1) elects broker
    0 in leader epoch 1 before broker 1's new generation is started, so the new generation never
    leads in the leader epoch its previous generation led in (seeded bug: bounce_skips_broker_failure).
    """
    state = initial_state(LEADER_BOUNCE)
    state = run(state, StopBroker(1), RestartBroker(1), OpenSession(1), RegisterBroker(1), ProcessBrokerChange(0))
    assert state.brokers[0].controller.epochs() == {0: 6, 1: 13}
    assert znode(state, partition_state_path(0)).data == PartitionState(0, 1, (0,), 1)


def test_leader_epochs_never_decrease_lets_only_a_deleting_stop_replica_remove_a_replica():
    """KIP-380 §Public Interfaces: StopReplicaRequest's delete_partitions removes the partition from the
    broker, a step LeaderEpochsNeverDecrease allows; a running broker's replica vanishing on any other
    step (a StopReplica that only stops it) breaks it."""
    from model.harness import Inject
    from model.zk_invariants import leader_epochs_never_decrease

    state = initial_state(TWO_PARTITIONS)
    b = state.brokers[1]
    assert b.replicas[0] is not None
    deleting = StopReplica(0, 1, b.epoch, dest=1, partition=0, delete_partition=True)
    taken = step(state, Inject(deleting), CORRECT)
    assert taken is not None and taken.brokers[1].replicas[0] is None
    assert leader_epochs_never_decrease(state, Inject(deleting), taken)
    stopping = deleting.replace(delete_partition=False)
    assert not leader_epochs_never_decrease(state, Inject(stopping), taken)
    assert not leader_epochs_never_decrease(state, Inject(deleting.replace(partition=1)), taken)
