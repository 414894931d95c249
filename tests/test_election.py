"""ZooKeeper controller election and controller-epoch fencing.

KIP-866 §Controller Leadership: "/controller" names the active controller (ephemeral, so it goes
with the controller's session) and "/controller_epoch" fences old controllers: "Each write from a
ZK controller is actually a conditional multi-write with a 'check' operation on the
'/controller_epoch' ZNode's version." The election itself is KafkaZkClient
.registerControllerAndIncrementControllerEpoch: create /controller and compare-and-set
/controller_epoch to epoch + 1 in one multi.
"""

from __future__ import annotations

from model import zookeeper as zkm
from model.actions import (
    Deliver,
    ElectController,
    ExpireSession,
    InitializeController,
    ObserveControllerEpoch,
    OpenSession,
    RegisterBroker,
    ResignController,
    SendControlledShutdown,
    UpdateFeatures,
)
from model.bugs import CORRECT, Bug
from model.invariants import violations
from model.outcome import error_of
from model.scopes import GROUP_COORDINATOR, SCOPES, cold_state, initial_state, ranges
from model.state import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    FEATURES,
    AppliedWrite,
    ControlledShutdown,
    ControllerRole,
    FeaturesZNode,
    LeaderAndIsr,
    UpdateMetadata,
    partition_state_path,
)
from model.step import step
from model.types import Errors, FeatureStatus, ZkCode
from model.zk_era import decide_control_request, is_current_controller
from tests.conftest import buggy, messages, only, run, tree, znode

ZOMBIE_UPDATE = UpdateFeatures(0, GROUP_COORDINATOR, 2, True)


def registered_cold(scope_name: str):
    """Cold start of a scope with every broker's session open and registered (zxids 4..7)."""
    return run(
        cold_state(SCOPES[scope_name]),
        OpenSession(0),
        RegisterBroker(0),
        OpenSession(1),
        RegisterBroker(1),
    )


def test_election_winner_bumps_controller_epoch_and_holds_ephemeral_controller():
    """KafkaZkClient.registerControllerAndIncrementControllerEpoch: /controller + epoch CAS in one multi."""
    state = run(registered_cold("election"), ObserveControllerEpoch(0))
    assert state.brokers[0].observed_epoch == (0, 0)
    assert state.zk.zxid == 7  # observing is a read
    state = run(state, ElectController(0))
    assert state.ghost.last_multi == (ZkCode.OK, ZkCode.OK)
    assert state.zk.zxid == 8
    controller = znode(state, CONTROLLER)
    assert (controller.data, controller.czxid, controller.ephemeral_owner) == (0, 8, 1)
    epoch = znode(state, CONTROLLER_EPOCH)
    assert (epoch.data, epoch.version, epoch.czxid, epoch.mzxid) == (1, 1, 3, 8)
    assert state.brokers[0].controller == ControllerRole(epoch=1, epoch_zk_version=1, live=(), initialized=False)
    assert state.brokers[0].observed_epoch is None
    assert state.budget.elections == SCOPES["election"].budget.elections - 1
    assert is_current_controller(state, state.brokers[0])


def test_election_is_not_enabled_while_controller_znode_exists():
    """A broker that sees /controller does not run for election (KafkaController.elect)."""
    state = run(registered_cold("election"), ObserveControllerEpoch(0), ObserveControllerEpoch(1), ElectController(0))
    assert step(state, ElectController(1)) is None
    assert step(state, ObserveControllerEpoch(1)) is None


def test_election_race_loser_stale_compare_and_set_fails_with_bad_version_and_applies_nothing():
    """Two brokers read /controller_epoch = 0 (version 0); broker 0 wins epoch 1. Its session then
    expires, freeing /controller, and broker 1 finally runs its election multi with the version it
    read before: the CAS fails with BADVERSION and nothing is applied, not even /controller.
    KIP-866 §Controller Leadership (the monotonic epoch; fencing by /controller_epoch's version).
    """
    state = run(
        registered_cold("election"),
        ObserveControllerEpoch(0),
        ObserveControllerEpoch(1),
        ElectController(0),
    )
    assert state.brokers[1].observed_epoch == (0, 0)
    state = run(state, ExpireSession(1))  # zxid 9: /controller and /brokers/ids/0 go
    assert zkm.get(state.zk, CONTROLLER) is None
    before = state
    state = run(state, ElectController(1))
    assert state.ghost.last_multi == (ZkCode.OK, ZkCode.BAD_VERSION)
    assert state.zk.zxid == before.zk.zxid + 1 == 10
    assert tree(state) == tree(before)
    assert zkm.get(state.zk, CONTROLLER) is None
    assert znode(state, CONTROLLER_EPOCH).data == 1
    assert state.brokers[1].controller is None and state.brokers[1].observed_epoch is None
    assert state.budget.elections == before.budget.elections  # a lost election spends nothing

    # It reads again and wins the next epoch.
    state = run(state, ObserveControllerEpoch(1), ElectController(1))
    assert state.brokers[1].controller == ControllerRole(2, 2, (), False)
    epoch = znode(state, CONTROLLER_EPOCH)
    assert (epoch.data, epoch.version, epoch.mzxid) == (2, 2, 11)
    assert znode(state, CONTROLLER).ephemeral_owner == state.brokers[1].session == 2


def test_controller_znode_is_ephemeral_so_session_expiry_frees_it():
    """KIP-866 §Controller Leadership: the ZK controller's /controller is an ephemeral write."""
    state = initial_state(SCOPES["fencing"])
    assert znode(state, CONTROLLER).ephemeral_owner == state.brokers[0].session == 1
    state = run(state, ExpireSession(1))
    assert zkm.get(state.zk, CONTROLLER) is None
    assert znode(state, CONTROLLER_EPOCH).data == 1  # the epoch stays: it is persistent
    # The old controller still believes it is controller, but ZooKeeper does not agree.
    assert state.brokers[0].controller.epoch == 1
    assert not is_current_controller(state, state.brokers[0])


def test_current_controller_cannot_resign():
    """onControllerResignation runs only when ZooKeeper says the controller moved (KIP-866 §Controller Leadership)."""
    state = initial_state(SCOPES["fencing"])
    assert step(state, ResignController(0)) is None
    assert step(state, ResignController(1)) is None


def failover(state, variant=None):
    """Controller 0's session expires; broker 1 wins epoch 2 and initializes; broker 0 reconnects."""
    kwargs = {} if variant is None else {"variant": variant}
    return run(
        state,
        ExpireSession(1),  # zxid 10: /controller, /brokers/ids/0 go
        ObserveControllerEpoch(1),
        ElectController(1),  # zxid 11
        InitializeController(1),  # /features already Enabled: no write
        OpenSession(0),  # zxid 12: the zombie gets a new session (id 1 again)
        **kwargs,
    )


def test_controller_failover_with_a_zombie_write_is_fenced_by_controller_epoch():
    """Controller failover with a zombie write (KIP-866 §Controller Leadership; KIP-380 §Motivation).

    Controller 0 (epoch 1) loses its session; broker 1 wins epoch 2. Broker 0, still believing it
    is controller, reconnects and handles an UpdateFeatures: its multi starts with a check of
    /controller_epoch at version 1, which is now 2, so nothing applies and broker 0 resigns.
    Its requests still in flight (epoch 1) are then refused by broker 1, which accepted epoch 2.
    """
    start = initial_state(SCOPES["fencing"])
    state = failover(start)
    zombie = state.brokers[0]
    assert zombie.controller is not None and zombie.controller.epoch == 1
    assert zombie.controller.epoch_zk_version == 1
    assert zombie.session == 1  # the freed session id came back
    assert not is_current_controller(state, zombie)
    assert state.brokers[1].controller.epoch == 2 and is_current_controller(state, state.brokers[1])
    assert [b.id for b in state.brokers[1].controller.live] == [1]
    assert state.zk.zxid == 12

    before = state
    state = run(state, ZOMBIE_UPDATE)
    assert state.ghost.last_multi == (ZkCode.BAD_VERSION, ZkCode.RUNTIME_INCONSISTENCY)
    assert tree(state) == tree(before)
    assert state.zk.zxid == 13  # the failed multi still took a zxid
    features = znode(state, FEATURES)
    assert (features.version, features.data.finalized) == (0, ranges(group_coordinator=(1, 3)))
    assert state.ghost.applied_writes == ()
    assert state.brokers[0].controller is None  # it resigned
    assert state.network == before.network  # and sent nothing

    # The new controller's start-up requests to broker 1 carry epoch 2; the zombie's carry epoch 1.
    new_um = UpdateMetadata(controller_id=1, controller_epoch=2, broker_epoch=7, dest=1, partitions=((0, 0),))
    new_lisr = LeaderAndIsr(1, 2, 7, dest=1, partition=0, leader=0, leader_epoch=0, isr=(0, 1))
    old_um = UpdateMetadata(controller_id=0, controller_epoch=1, broker_epoch=7, dest=1, partitions=((0, 0),))
    old_lisr = LeaderAndIsr(0, 1, 7, dest=1, partition=0, leader=0, leader_epoch=0, isr=(0, 1))
    assert set(messages(state, dest=1)) == {new_um, new_lisr, old_um, old_lisr}
    state = run(state, Deliver(new_um))
    assert state.brokers[1].controller_epoch == 2
    for stale in (old_lisr, old_um):
        assert error_of(decide_control_request(state.brokers[1], stale, CORRECT)) is Errors.STALE_CONTROLLER_EPOCH
        assert Errors.STALE_CONTROLLER_EPOCH == 11
        after = run(state, Deliver(stale))
        assert after.brokers[1] == state.brokers[1]
        assert after.network == state.network - {stale}


def test_zombie_controller_handling_controlled_shutdown_is_fenced_by_controller_epoch():
    """A ControlledShutdown sent to controller 0 in epoch 1 reaches it only after broker 1 won epoch 2.

    The zombie decides to shrink the ISR, but the partition-state write carries the stale
    /controller_epoch check and fails: the partition znode is untouched, no request is sent, and
    the zombie resigns. KIP-866 §Controller Leadership.
    """
    state = initial_state(SCOPES["fencing"])
    # Deliver the start-up requests to broker 0 first, to leave room in flight.
    state = run(state, Deliver(only(state, UpdateMetadata, 0)), Deliver(only(state, LeaderAndIsr, 0)))
    state = run(state, SendControlledShutdown(1))
    shutdown = only(state, ControlledShutdown, 0)
    assert shutdown == ControlledShutdown(broker_id=1, broker_epoch=7, dest=0)
    state = failover(state)
    before = state
    state = run(state, Deliver(shutdown))
    assert state.ghost.last_multi == (ZkCode.BAD_VERSION, ZkCode.RUNTIME_INCONSISTENCY)
    assert tree(state) == tree(before)
    partition = znode(state, partition_state_path(0))
    assert (partition.version, partition.data.isr, partition.data.leader_epoch) == (0, (0, 1), 0)
    assert state.network == before.network - {shutdown}
    assert state.brokers[0].controller is None


def test_zombie_write_applies_when_the_controller_epoch_check_is_skipped():
    """Seeded bug SKIP_CONTROLLER_EPOCH_CHECK: without the /controller_epoch check the zombie's
    UpdateFeatures lands in epoch 2, and OnlyCurrentControllerWritesApply reports it.
    KIP-866 §Controller Leadership.
    """
    variant = buggy(Bug.SKIP_CONTROLLER_EPOCH_CHECK)
    state = failover(initial_state(SCOPES["fencing"]), variant)
    after = run(state, ZOMBIE_UPDATE, variant=variant)
    assert after.ghost.last_multi == (ZkCode.OK,)
    features = znode(after, FEATURES)
    assert (features.version, features.mzxid) == (1, 13)
    assert features.data == FeaturesZNode(FeatureStatus.ENABLED, ranges(group_coordinator=(1, 2)))
    assert after.ghost.applied_writes == (AppliedWrite(writer=0, writer_epoch=1, zk_epoch=2, path=FEATURES),)
    assert after.brokers[0].controller is not None  # nothing told it that it moved
    assert violations(state, ZOMBIE_UPDATE, after) == ["OnlyCurrentControllerWritesApply"]


def test_deposed_controller_resigns_once_it_sees_controller_znode_gone():
    """onControllerResignation: a controller whose /controller is gone steps down and forgets its watch."""
    state = run(initial_state(SCOPES["fencing"]), ExpireSession(1))
    state = run(state, ResignController(0))
    assert state.brokers[0].controller is None
    assert all(n[0] != 0 for n in state.zk.notifications)
