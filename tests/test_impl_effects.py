"""A node's exact effects for one event, as dask's worker-state-machine tests assert a worker's instructions.

Each test builds one node in a given state by hand (its memory, and the znodes it will read in an
in-memory ZooKeeper), hands it one event, and asserts the exact list of typed effects it yields
(``impl.protocol.Effect``: ZooKeeper requests, ``Send``, ``Rpc``, ``Trace``), what the handler
returns, and what it changed. ZooKeeper requests run on ``EmbeddedZk`` through the runner's own
``impl.zk.port.execute``; an ``Rpc`` gets the scripted answer of the test. Nothing else runs:
no other node, no model, no simulator.

Seeds: KIP-380 (broker generations, the controller epoch), KIP-500 §Broker States, KIP-866
(§Controller Leadership, §Dual Metadata Writes, §Broker Registration); each test names its section.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from impl.broker import BrokerNode, decide_control_request
from impl.codec import IBP_NAMES, PERSISTENT_PATHS, encode
from impl.kraft.rpc import (
    ApiError,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokerSessionTimedOut,
    BrokerSessionTimedOutResponse,
)
from impl.kraft_controller import ControllerNode
from impl.protocol import Effect, Event, Perform, Receive, Rpc, RpcRequest, Send, Trace
from impl.zk.embedded import EmbeddedZk
from impl.zk.port import (
    ANY_VERSION,
    CheckOp,
    CreateOp,
    DeleteOp,
    Exists,
    GetData,
    Multi,
    SetDataOp,
    ZkError,
    execute,
    parent_of,
)
from impl.zk_controller import CachedBroker, KafkaController
from model.actions import (
    BecomeZkController,
    BrokerHeartbeat,
    DualWrite,
    ElectPartitionLeader,
    RegisterBroker,
    RegisterWithKRaft,
    SessionTimeout,
)
from model.kraft import (
    METADATA_VERSION,
    BrokerRegistrationChangeRecord,
    ControllerId,
    FeatureLevelRecord,
    KRaftEpoch,
    Offset,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    ZkMigrationState,
    ZkMigrationStateRecord,
)
from model.migration import (
    MIGRATION,
    KRaftControllerZNode,
    MigrationDriverState,
    MigrationZNode,
)
from model.state import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    TOPIC,
    BrokerRegistration,
    ControlledShutdown,
    LeaderAndIsr,
    PartitionState,
    UpdateMetadata,
    broker_path,
    partition_state_path,
)
from model.types import BrokerEpoch, BrokerId, ControllerEpoch, Errors, Ibp, LeaderEpoch, PartitionId, ReplicaRole

NOW = 1_000
IBP = Ibp.IBP_3_4_IV0
C = 3000  # the one KRaft controller
VOTERS = f"{C}@controller-{C}:9093"
STATE_0 = partition_state_path(PartitionId(0))
ZK_BROKER = {
    "broker.id": "0",
    "inter.broker.protocol.version": IBP_NAMES[IBP],
    "zookeeper.connect": "zookeeper:2181",
    "zookeeper.metadata.migration.enable": "true",
    "controller.quorum.voters": VOTERS,
    "controller.listener.names": "CONTROLLER",
}
KRAFT_CONTROLLER = {
    "node.id": str(C),
    "process.roles": "controller",
    "controller.quorum.voters": VOTERS,
    "controller.listener.names": "CONTROLLER",
    "zookeeper.metadata.migration.enable": "true",
    "zookeeper.connect": "zookeeper:2181",
}


# ---- the harness ---------------------------------------------------------------------------------

def handle(node: Any, event: Event, zk: EmbeddedZk | None = None,
           answer: Callable[[Rpc], Any] | None = None) -> tuple[list[Effect], Any]:
    """Run ``node.handle(event)`` to its end: (every effect it yielded, in order; what the handler returned).

    ZooKeeper requests run on ``zk`` (a ZkError is thrown back in, as the runner does); an ``Rpc``
    gets ``answer(rpc)``; ``Send`` and ``Trace`` are only recorded.
    """
    effects: list[Effect] = []
    handler = node.handle(event)
    value: Any = None
    error: ZkError | None = None
    while True:
        try:
            effect = handler.throw(error) if error is not None else handler.send(value)
        except StopIteration as stop:
            return effects, stop.value
        effects.append(effect)
        value, error = None, None
        match effect:
            case Rpc():
                assert answer is not None, f"unexpected {effect}"
                value = answer(effect)
            case Send() | Trace():
                pass
            case _:
                assert zk is not None, f"unexpected {effect}"
                try:
                    value = execute(zk, effect)
                except ZkError as e:
                    error = e


def perform(action: Any) -> Perform:
    return Perform(now=NOW, stimulus_id=1, action=action)


def zookeeper(znodes: dict[str, Any]) -> tuple[EmbeddedZk, int]:
    """An in-memory ZooKeeper holding ``znodes`` (values as the model writes them, stored as Kafka's JSON
    under real parents), and an open session for the node under test."""
    zk = EmbeddedZk()
    admin = zk.open_session(6_000)

    def ensure(path: str) -> None:
        if path != "/" and zk.exists(admin, path) is None:
            ensure(parent_of(path))
            zk.create(admin, path, b"")

    for path in PERSISTENT_PATHS:
        ensure(path)
    for path, value in znodes.items():
        ensure(parent_of(path))
        zk.create(admin, path, encode(path, value))
    return zk, zk.open_session(6_000)


def version(zk: EmbeddedZk, session: int, path: str) -> int:
    return zk.get_data(session, path)[1].version


def zk_broker(session: int | None = None, epoch: int = -1) -> BrokerNode:
    """Broker 0, a ZooKeeper-mode broker at the bridge release with the migration's configs."""
    node = BrokerNode(0, ZK_BROKER, ())
    node.session, node._probe_session = session, session
    if epoch >= 0:
        node.registered, node.epoch = True, epoch
    return node


def active_controller(*records: Any) -> ControllerNode:
    """KRaft controller 3000, the only voter, active in Raft epoch 1: its LeaderChange at offset 0, then
    ``records``, all committed (a quorum of one)."""
    node = ControllerNode(C, KRAFT_CONTROLLER, IBP, max_lag=100)
    node.raft.start_election()
    node.raft.become_leader()
    node.raft.append(list(records))
    node.raft.active = True
    return node


# The log of a cluster in the migration: metadata.version, MIGRATION, ZK broker 0 registered at offset 3
# and unfenced, partition 0 led by it.
MIGRATED = (
    FeatureLevelRecord(METADATA_VERSION, IBP),
    ZkMigrationStateRecord(ZkMigrationState.MIGRATION),
    RegisterBrokerRecord(BrokerId(0), 7, BrokerEpoch(3), True, IBP),
    BrokerRegistrationChangeRecord(BrokerId(0), BrokerEpoch(3), False),
    PartitionRecord(0, BrokerId(0), (BrokerId(0),), LeaderEpoch(0)),
)


# ---- a ZooKeeper broker's control requests (KIP-380 §Broker Rejects Control Requests) ---------------

def lisr(broker_epoch: int, controller_epoch: int = 2) -> LeaderAndIsr:
    return LeaderAndIsr(BrokerId(1), ControllerEpoch(controller_epoch), BrokerEpoch(broker_epoch), BrokerId(0),
                        PartitionId(0), BrokerId(0), LeaderEpoch(5), (BrokerId(0),))


def test_broker_refuses_a_leader_and_isr_of_an_older_generation():
    """KIP-380 §Broker Rejects Control Requests: a bounced broker (epoch 20 now) gets a LeaderAndIsr the
    controller addressed to its previous generation (epoch 10). It does nothing with it: no effect, and
    its replicas and controller epoch stay as they were (STALE_BROKER_EPOCH)."""
    node = zk_broker(session=5, epoch=20)
    node.controller_epoch = 2
    effects, result = handle(node, Receive(now=NOW, stimulus_id=1, message=lisr(broker_epoch=10, controller_epoch=3)))
    assert (effects, result) == ([], None)
    assert node.replicas == {} and node.controller_epoch == 2
    assert decide_control_request(20, 2, lisr(10, 3)) is Errors.STALE_BROKER_EPOCH


def test_broker_applies_a_leader_and_isr_of_its_own_generation():
    """The same request addressed to the broker's current epoch is applied: it leads partition 0 in leader
    epoch 5 and takes the request's controller epoch (KIP-380; KAFKA-6082's controller epoch)."""
    node = zk_broker(session=5, epoch=20)
    node.controller_epoch = 2
    effects, result = handle(node, Receive(now=NOW, stimulus_id=1, message=lisr(broker_epoch=20, controller_epoch=3)))
    assert (effects, result) == ([], None)
    # (leader epoch, role, replica set): a ZK controller's LeaderAndIsr carries no replica set
    assert node.replicas == {0: (5, ReplicaRole.LEADER, ())} and node.controller_epoch == 3


def test_broker_checks_the_broker_epoch_before_the_controller_epoch():
    """KafkaApis checks the broker epoch first: a request both stale in broker epoch and from an older
    controller is STALE_BROKER_EPOCH; -1 (UNKNOWN_BROKER_EPOCH) and newer epochs pass that check."""
    assert decide_control_request(20, 3, lisr(10, 2)) is Errors.STALE_BROKER_EPOCH
    assert decide_control_request(20, 3, lisr(20, 2)) is Errors.STALE_CONTROLLER_EPOCH
    assert decide_control_request(20, 3, lisr(-1, 3)) is Errors.NONE
    assert decide_control_request(20, 3, lisr(21, 3)) is Errors.NONE


# ---- a ZooKeeper broker's registration (KIP-380 §Broker Registration) --------------------------------

def test_broker_registers_its_ephemeral_znode_and_takes_its_czxid_as_epoch():
    """KIP-380 §Broker Registration: the broker creates /brokers/ids/0 (ephemeral) in one multi with a
    setData at version 0, whose Stat carries the znode's czxid: that czxid is its broker epoch."""
    zk, session = zookeeper({})
    node = zk_broker(session=session)
    path = broker_path(BrokerId(0))
    data = encode(path, BrokerRegistration(IBP, ()), NOW)
    effects, _ = handle(node, perform(RegisterBroker(BrokerId(0))), zk)
    assert effects == [
        Exists(session, path),
        Multi(session, (CreateOp(path, data, ephemeral=True), SetDataOp(path, data, 0))),
        Trace(RegisterBroker(BrokerId(0))),
    ]
    czxid = zk.get_data(session, path)[1].czxid
    assert node.registered and node.epoch == czxid


# ---- the ZooKeeper controller's writes, fenced by /controller_epoch (KIP-380 / KAFKA-6082) ----------

def zk_controller(live_epoch: int) -> tuple[BrokerNode, EmbeddedZk, int, int]:
    """Broker 0 as the initialized controller of epoch 2; partition 0 (replicas 1, 0) is led by broker 1,
    which is dead (not in the controller's live cache): an offline partition."""
    zk, session = zookeeper({
        CONTROLLER_EPOCH: ControllerEpoch(2),
        TOPIC: ((BrokerId(1), BrokerId(0)),),
        STATE_0: PartitionState(BrokerId(1), LeaderEpoch(2), (BrokerId(1), BrokerId(0)), ControllerEpoch(1)),
    })
    node = zk_broker(session=session, epoch=live_epoch)
    epoch_version = version(zk, session, CONTROLLER_EPOCH)
    node.controller = KafkaController(0, ControllerEpoch(2), epoch_version, live={0: CachedBroker(live_epoch, ())},
                                      initialized=True, partitions=1)
    return node, zk, session, epoch_version


def test_zk_controller_elects_an_offline_partitions_leader_in_a_multi_checking_its_epoch():
    """KIP-380 / KAFKA-6082: every write of the controller is one multi whose first op checks
    /controller_epoch's version, so a controller that was replaced cannot write. Here it is still the
    controller: the new state (broker 0 leads in leader epoch 3) is written, and broker 0 is told."""
    node, zk, session, epoch_version = zk_controller(live_epoch=40)
    state_version = version(zk, session, STATE_0)
    new = PartitionState(BrokerId(0), LeaderEpoch(3), (BrokerId(0),), ControllerEpoch(2))
    effects, _ = handle(node, perform(ElectPartitionLeader(BrokerId(0), PartitionId(0))), zk)
    assert effects == [
        Exists(session, "/"),  # the session still answers
        GetData(session, TOPIC),
        GetData(session, STATE_0),
        Multi(session, (CheckOp(CONTROLLER_EPOCH, epoch_version), SetDataOp(STATE_0, encode(STATE_0, new),
                                                                            state_version))),
        Send(LeaderAndIsr(BrokerId(0), ControllerEpoch(2), BrokerEpoch(40), BrokerId(0), PartitionId(0), BrokerId(0),
                          LeaderEpoch(3), (BrokerId(0),))),
        Trace(ElectPartitionLeader(BrokerId(0), PartitionId(0))),
    ]
    assert node.controller is not None and not node.controller.resigned


def test_zk_controller_whose_epoch_moved_writes_nothing_and_resigns():
    """KIP-380 / KAFKA-6082, the zombie controller: another controller was elected meanwhile
    (/controller_epoch was written since). The same election's multi fails on its epoch check, so the
    partition state is untouched, no request is sent, and the controller resigns (ControllerMovedException)."""
    node, zk, session, epoch_version = zk_controller(live_epoch=40)
    zk.set_data(session, CONTROLLER_EPOCH, encode(CONTROLLER_EPOCH, ControllerEpoch(3)))  # the new controller
    before = zk.get_data(session, STATE_0)
    effects, _ = handle(node, perform(ElectPartitionLeader(BrokerId(0), PartitionId(0))), zk)
    assert [type(e) for e in effects] == [Exists, GetData, GetData, Multi, Trace]
    assert effects[3].ops[0] == CheckOp(CONTROLLER_EPOCH, epoch_version)
    assert zk.get_data(session, STATE_0) == before
    assert node.controller is None  # resigned


def test_zk_controller_refuses_a_controlled_shutdown_from_an_older_generation():
    """KIP-380 §Controller Rejects ControlledShutdownRequest Sent from Former Generations: broker 0 (cached at
    epoch 40) asks to shut down with the epoch of its previous process (30). The controller reads the
    partitions and then does nothing: no write, no request (STALE_BROKER_EPOCH)."""
    node, zk, session, _ = zk_controller(live_epoch=40)
    stale = ControlledShutdown(BrokerId(0), BrokerEpoch(30), BrokerId(0))
    effects, result = handle(node, Receive(now=NOW, stimulus_id=1, message=stale), zk)
    assert (effects, result) == ([GetData(session, TOPIC), GetData(session, STATE_0)], None)
    assert node.controller.decide_controlled_shutdown(0, 30) is Errors.STALE_BROKER_EPOCH


# ---- a broker registering with KRaft and heartbeating (KIP-866 §Broker Registration, KIP-500) ---------

def test_zk_broker_registers_with_the_kraft_controller_and_takes_the_epoch_it_answers():
    """KIP-866 §Broker Registration: a ZK broker with the flag, the controller configs and the bridge IBP,
    registered in ZooKeeper, sends BrokerRegistration (IsMigratingZkBroker) and keeps the epoch answered."""
    node = zk_broker(session=5, epoch=20)
    node.incarnation = node.kraft.incarnation = 9
    request = BrokerRegistrationRequest(0, 9, True, int(IBP))
    effects, _ = handle(node, perform(RegisterWithKRaft(BrokerId(0), ControllerId(C))),
                        answer=lambda rpc: BrokerRegistrationResponse(ApiError.NONE, 42))
    assert effects == [Rpc(C, request), Trace(RegisterWithKRaft(BrokerId(0), ControllerId(C)))]
    assert node.kraft.kraft_epoch == 42


def test_kraft_controller_registers_a_zk_broker_with_its_records_offset_as_epoch():
    """KIP-866 §Broker Registration (ClusterControlManager.registerBroker): in the migration, a ZK broker's
    registration is a RegisterBrokerRecord at the log end, whose offset is the broker epoch answered. The
    controller yields no effect: the record is its answer."""
    node = active_controller(*MIGRATED[:2])
    end = len(node.raft.log)
    request = BrokerRegistrationRequest(0, 9, True, int(IBP))
    effects, response = handle(node, RpcRequest(now=NOW, stimulus_id=1, source=0, request=request))
    assert (effects, response) == ([], BrokerRegistrationResponse(ApiError.NONE, end))
    assert [e.record for e in node.raft.log[end:]] == [RegisterBrokerRecord(BrokerId(0), 9, BrokerEpoch(end), True,
                                                                            IBP)]


def test_kraft_controller_refuses_a_heartbeat_of_an_older_registration():
    """A heartbeat carrying the epoch of an earlier registration (2; broker 0 registered at 3) is
    STALE_BROKER_EPOCH (ClusterControlManager.checkBrokerEpoch; KIP-380's generations under KRaft), and
    nothing is appended."""
    node = active_controller(*MIGRATED)
    end = len(node.raft.log)
    request = BrokerHeartbeatRequest(0, 2, 0, False, True)
    effects, response = handle(node, RpcRequest(now=NOW, stimulus_id=1, source=0, request=request))
    assert (effects, response) == ([], BrokerHeartbeatResponse(ApiError.STALE_BROKER_EPOCH))
    assert len(node.raft.log) == end


def test_kraft_controller_unfences_a_caught_up_broker_on_its_heartbeat():
    """KIP-500 §Broker States: a fenced registration whose broker heartbeats caught up is unfenced with a
    BrokerRegistrationChangeRecord; a migrating ZK broker counts as caught up."""
    node = active_controller(*MIGRATED[:3])
    request = BrokerHeartbeatRequest(0, 3, 0, False, True)
    effects, response = handle(node, RpcRequest(now=NOW, stimulus_id=1, source=0, request=request))
    assert (effects, response) == ([], BrokerHeartbeatResponse(ApiError.NONE, is_caught_up=True, is_fenced=False,
                                                                appended=True, unfenced=True))
    assert node.raft.log[-1].record == BrokerRegistrationChangeRecord(BrokerId(0), BrokerEpoch(3), False)


def test_broker_answered_stale_broker_epoch_registers_again():
    """The broker's side of the refusal above: it forgets the epoch KRaft gave it, so its next step is a
    new registration (BrokerLifecycleManager)."""
    node = zk_broker(session=5, epoch=20)
    node.kraft.kraft_epoch = 2
    effects, _ = handle(node, perform(BrokerHeartbeat(BrokerId(0), ControllerId(C))),
                        answer=lambda rpc: BrokerHeartbeatResponse(ApiError.STALE_BROKER_EPOCH))
    assert effects == [Rpc(C, BrokerHeartbeatRequest(0, 2, 0, False, True)),
                       Trace(BrokerHeartbeat(BrokerId(0), ControllerId(C)))]
    assert node.kraft.kraft_epoch == -1


def test_kraft_controller_fences_a_broker_whose_heartbeats_stopped_and_tells_it():
    """KIP-500 §Broker States: once broker.session.timeout.ms passed without a heartbeat the active
    controller fences the registration; its leadership of partition 0 goes (no other ISR member: offline)."""
    node = active_controller(*MIGRATED)
    end = len(node.raft.log)
    effects, _ = handle(node, perform(SessionTimeout(BrokerId(0), ControllerId(C))),
                        answer=lambda rpc: BrokerSessionTimedOutResponse(True))
    assert effects == [Rpc(0, BrokerSessionTimedOut(0, 7, 3)), Trace(SessionTimeout(BrokerId(0), ControllerId(C)))]
    assert [e.record for e in node.raft.log[end:]] == [
        BrokerRegistrationChangeRecord(BrokerId(0), BrokerEpoch(3), True),
        PartitionChangeRecord(0, BrokerId(-1), (BrokerId(0),), LeaderEpoch(1)),
    ]


# ---- the migration driver (KIP-866 §Controller Leadership, §Dual Metadata Writes) --------------------

def test_driver_claims_zookeeper_in_one_multi_casing_the_controller_epoch():
    """KIP-866 §Controller Leadership (tryRegisterKRaftControllerAsActiveController): the KRaft controller
    becomes ZooKeeper's controller in one multi: /controller_epoch + 1 at the version it read, the old
    ZK controller's /controller deleted at its version, its own /controller (v2, with its Raft epoch)."""
    zk, session = zookeeper({CONTROLLER_EPOCH: ControllerEpoch(5), CONTROLLER: BrokerId(0),
                             MIGRATION: MigrationZNode(ControllerId(-1), KRaftEpoch(-1), Offset(-1))})
    node = active_controller(*MIGRATED[:2])
    node.zk_session = session
    d = node.driver
    d.state, d.kraft_epoch, d.leader = MigrationDriverState.BECOME_CONTROLLER, 1, True
    epoch_version, controller_version = version(zk, session, CONTROLLER_EPOCH), version(zk, session, CONTROLLER)
    effects, _ = handle(node, perform(BecomeZkController(ControllerId(C))), zk)
    assert effects == [
        GetData(session, CONTROLLER_EPOCH),
        GetData(session, CONTROLLER),
        Multi(session, (
            SetDataOp(CONTROLLER_EPOCH, encode(CONTROLLER_EPOCH, ControllerEpoch(6), NOW), epoch_version),
            DeleteOp(CONTROLLER, controller_version),
            CreateOp(CONTROLLER, encode(CONTROLLER, KRaftControllerZNode(ControllerId(C), KRaftEpoch(1)), NOW)),
        )),
        Trace(BecomeZkController(ControllerId(C))),
    ]
    assert (d.zk_epoch, d.zk_epoch_version) == (6, version(zk, session, CONTROLLER_EPOCH))


def dual_writing(zk_epoch_moved: bool = False) -> tuple[ControllerNode, EmbeddedZk, int]:
    """Controller 3000 in DUAL_WRITE, ZooKeeper's controller of epoch 5; ZooKeeper has the log up to offset
    6 (/migration says so), and the log has one newer committed record: broker 0 leads partition 0 in
    leader epoch 1. ``zk_epoch_moved``: a ZK controller was elected since the claim."""
    zk, session = zookeeper({
        CONTROLLER_EPOCH: ControllerEpoch(5),
        MIGRATION: MigrationZNode(ControllerId(C), KRaftEpoch(1), Offset(6)),
        TOPIC: ((BrokerId(0),),),
        STATE_0: PartitionState(BrokerId(0), LeaderEpoch(0), (BrokerId(0),), ControllerEpoch(5)),
    })
    node = active_controller(*MIGRATED, PartitionChangeRecord(0, BrokerId(0), (BrokerId(0),), LeaderEpoch(1)))
    node.zk_session = session
    d = node.driver
    d.state, d.kraft_epoch, d.leader = MigrationDriverState.DUAL_WRITE, 1, True
    d.migration_offset, d.migration_version = 6, version(zk, session, MIGRATION)
    d.zk_epoch, d.zk_epoch_version = 5, version(zk, session, CONTROLLER_EPOCH)
    if zk_epoch_moved:
        zk.set_data(session, CONTROLLER_EPOCH, encode(CONTROLLER_EPOCH, ControllerEpoch(6)))
    return node, zk, session


def test_driver_dual_writes_a_committed_change_in_one_fenced_multi_then_tells_the_zk_broker():
    """KIP-866 §Dual Metadata Writes: a committed change is written to ZooKeeper in one multi that checks
    /controller_epoch's version (the fence), writes the partition's new state as a ZK controller of the
    claimed epoch would, and moves /migration's offset by CAS; then the ZK broker gets UpdateMetadata and
    LeaderAndIsr marked IsKRaftController (§ZK Broker RPCs: UpdateMetadata first). It reads nothing first: the
    change is the delta since /migration's offset (KRaftMigrationZkWriter.handleDelta)."""
    node, zk, session = dual_writing()
    d = node.driver
    epoch_version, migration_version = d.zk_epoch_version, d.migration_version
    new = PartitionState(BrokerId(0), LeaderEpoch(1), (BrokerId(0),), ControllerEpoch(5))
    migration = MigrationZNode(ControllerId(C), KRaftEpoch(1), Offset(7))
    effects, _ = handle(node, perform(DualWrite(ControllerId(C))), zk)
    assert effects == [
        Multi(session, (
            CheckOp(CONTROLLER_EPOCH, epoch_version),
            SetDataOp(STATE_0, encode(STATE_0, new, NOW), ANY_VERSION),
            SetDataOp(MIGRATION, encode(MIGRATION, migration, NOW), migration_version),
        )),
        Send(UpdateMetadata(BrokerId(C), ControllerEpoch(5), BrokerEpoch(3), BrokerId(0),
                            ((BrokerId(0), LeaderEpoch(1)),), kraft=True, live=(BrokerId(0),))),
        Send(LeaderAndIsr(BrokerId(C), ControllerEpoch(5), BrokerEpoch(3), BrokerId(0), PartitionId(0), BrokerId(0),
                          LeaderEpoch(1), (BrokerId(0),), kraft=True)),
        Trace(DualWrite(ControllerId(C))),
    ]
    assert (d.state, d.migration_offset) == (MigrationDriverState.DUAL_WRITE, 7)


def test_driver_dual_write_fenced_by_a_newer_controller_epoch_writes_nothing():
    """KIP-866 §Dual Metadata Writes, the fence: a ZK controller was elected since the claim, so the multi
    fails on its /controller_epoch check; nothing is written, no request goes to the brokers, and the
    driver parks in INACTIVE until its next leadership event (the model's rule)."""
    node, zk, session = dual_writing(zk_epoch_moved=True)
    claimed = node.driver.zk_epoch_version
    before = zk.snapshot()
    effects, _ = handle(node, perform(DualWrite(ControllerId(C))), zk)
    assert [type(e) for e in effects] == [Multi, Trace]
    assert effects[0].ops[0] == CheckOp(CONTROLLER_EPOCH, claimed)
    assert zk.snapshot() == before
    assert node.driver.state is MigrationDriverState.INACTIVE


def test_every_effect_is_a_frozen_value():
    """Effects are values (dask's instructions are too): each kind a frozen dataclass, so a test can compare
    them whole and a node cannot change one after yielding it."""
    import dataclasses
    import typing

    kinds = typing.get_args(Effect)
    assert {k.__name__ for k in kinds} == {"CreateSession", "CloseSession", "Exists", "GetData", "GetChildren",
                                          "Multi", "Send", "Rpc", "Trace"}
    assert all(dataclasses.is_dataclass(k) and k.__dataclass_params__.frozen for k in kinds)
