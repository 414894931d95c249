"""Brokers on KRaft: registration, broker epochs, fencing, controlled shutdown (KIP-500, KIP-866).

KIP-500 §Broker States: a broker registers with the active controller, is Fenced until it has
caught up with the metadata, then Online; a controlled shutdown is Stopping (leaderships moved
away) and ends with the controller telling it to shut down. KIP-866 §Broker Registration adds
ZK brokers that register with IsMigratingZkBroker and their IBP as metadata.version. The
registration's broker epoch is the offset of its RegisterBrokerRecord (Kafka's
ClusterControlManager). Every step goes through ``run``, which checks every invariant.
"""

from __future__ import annotations

from model.actions import (
    BecomeLeader,
    BecomeZkController,
    BeginControlledShutdown,
    BrokerHeartbeat,
    CompleteMigration,
    DualWrite,
    Fetch,
    FetchMetadata,
    MigrateBrokerToKRaft,
    MigrateMetadata,
    MigrationCommitted,
    RegisterWithKRaft,
    RequestVote,
    RestartBroker,
    SendRPCsToBrokers,
    SessionTimeout,
    StartElection,
    StopBroker,
    SyncKRaftToZk,
    WaitForControllerQuorum,
    WaitForZkBrokers,
)
from model.bugs import CORRECT
from model.kraft import (
    BrokerRegistrationChangeRecord,
    BrokerState,
    ControllerId,
    Incarnation,
    KRaftEpoch,
    LeaderChangeMessage,
    LogEntry,
    PartitionChangeRecord,
    PartitionImage,
    RegisterBrokerRecord,
    image_of,
)
from model.kraft_quorum import ctrl, decide_broker_registration, own_image, registration_request
from model.outcome import error_of
from model.scopes import MIGRATING, SCOPES, initial_state
from model.step import step
from model.types import UNKNOWN_BROKER_EPOCH, BrokerEpoch, BrokerId, Errors, Ibp, LeaderEpoch
from tests.conftest import appended, run, with_budget

C0, C1, C2 = ControllerId(3000), ControllerId(3001), ControllerId(3002)


def refusal(state, broker: int, cid=C0) -> Errors:
    """What the active controller answers a broker's registration (it is not enabled when refused)."""
    c = ctrl(state, cid)
    refused, _ = decide_broker_registration(own_image(c), c, registration_request(state.brokers[broker], cid), CORRECT)
    return error_of(refused)


def test_registration_broker_epoch_is_the_offset_of_its_register_broker_record():
    """A ZK broker registering with the pre-migration quorum gets the record's offset as its epoch.

    KIP-866 §Broker Registration (IsMigratingZkBroker, metadata.version = its IBP); KIP-500
    §The Broker State Machine; reference §3.1 (newBrokerEpoch = the next write offset).
    """
    state = initial_state(SCOPES["pre-migration"])
    assert len(ctrl(state, C0).log) == 3
    state = run(state, RegisterWithKRaft(BrokerId(0), C0))
    assert ctrl(state, C0).log[3] == LogEntry(
        KRaftEpoch(1), RegisterBrokerRecord(BrokerId(0), Incarnation(0), BrokerEpoch(3), True, Ibp.IBP_3_4_IV0)
    )
    assert state.brokers[0].kraft_epoch == 3

    before = run(state, Fetch(C1, C0))
    state = run(before, BrokerHeartbeat(BrokerId(0), C0), Fetch(C1, C0))
    assert appended(before, state, C0) == [BrokerRegistrationChangeRecord(BrokerId(0), BrokerEpoch(3), False)]
    reg = image_of(state.history.committed).registration(BrokerId(0))
    assert (reg.epoch, reg.incarnation, reg.is_migrating_zk_broker, reg.fenced) == (3, 0, True, False)


def three_voters_before_failover():
    """pre-migration with a third voter: broker 0 registers with 3000, which then loses epoch 2 to 3001."""
    scope = SCOPES["pre-migration"].replace(name="pre-migration-3", controllers=(MIGRATING,) * 3)
    return run(
        initial_state(scope),
        RegisterWithKRaft(BrokerId(0), C0),  # offset 3 in 3000's log only
        StartElection(C1),
        RequestVote(C1, C2),
        BecomeLeader(C1),  # epoch 2; its log has no registration
        Fetch(C2, C1),  # its LeaderChange commits: it activates
    )


def test_registration_stale_epoch_heartbeat_makes_the_broker_register_again():
    """A registration the new leader never got: the heartbeat is refused and the broker registers again.

    KIP-500 §Broker States (heartbeats carry the broker epoch; STALE_BROKER_EPOCH); the model
    answers a registration before it commits (docs/model.md), so a failover can lose it.
    """
    state = three_voters_before_failover()
    assert state.brokers[0].kraft_epoch == 3
    assert ctrl(state, C1).log[3:] == (LogEntry(KRaftEpoch(2), LeaderChangeMessage(C1)),)  # no registration

    state = run(state, BrokerHeartbeat(BrokerId(0), C1))
    assert state.brokers[0].kraft_epoch == UNKNOWN_BROKER_EPOCH
    assert state.brokers[0].incarnation == 0

    before = state
    state = run(state, RegisterWithKRaft(BrokerId(0), C1))
    assert appended(before, state, C1) == [
        RegisterBrokerRecord(BrokerId(0), Incarnation(0), BrokerEpoch(4), True, Ibp.IBP_3_4_IV0)
    ]
    assert state.brokers[0].kraft_epoch == 4


def test_registration_same_incarnation_registering_again_keeps_its_epoch():
    """The same process registering again gets its existing registration back: no new record.

    KIP-500 §The Broker State Machine (the incarnation id tells a re-registration from a new
    process); ClusterControlManager.registerBroker. The broker bounces between the deposed
    leader 3000 (which has it at epoch 3) and the new leader 3001 (epoch 4).
    """
    state = run(three_voters_before_failover(), BrokerHeartbeat(BrokerId(0), C1), RegisterWithKRaft(BrokerId(0), C1))
    assert state.brokers[0].kraft_epoch == 4

    state = run(state, BrokerHeartbeat(BrokerId(0), C0))  # 3000 still believes it leads: epoch 4 is stale there
    assert state.brokers[0].kraft_epoch == UNKNOWN_BROKER_EPOCH
    before = state
    state = run(state, RegisterWithKRaft(BrokerId(0), C0))
    assert state.brokers[0].kraft_epoch == 3
    assert appended(before, state, C0) == []

    # 3000 learns of epoch 2 and drops its copy; back at 3001, the broker again keeps epoch 4.
    state = run(state, Fetch(C0, C1), Fetch(C2, C1), BrokerHeartbeat(BrokerId(0), C1))
    assert state.brokers[0].kraft_epoch == UNKNOWN_BROKER_EPOCH
    before = state
    state = run(state, RegisterWithKRaft(BrokerId(0), C1))
    assert state.brokers[0].kraft_epoch == 4
    assert appended(before, state, C1) == []
    assert [e.record for e in ctrl(state, C1).log if isinstance(e.record, RegisterBrokerRecord)] == [
        RegisterBrokerRecord(BrokerId(0), Incarnation(0), BrokerEpoch(4), True, Ibp.IBP_3_4_IV0)
    ]


def zk_broker_1_stopped_and_fenced(state):
    """Broker 1's ZK process stops and its registration is fenced; ZooKeeper catches up."""
    state = run(state, StopBroker(BrokerId(1)), SessionTimeout(BrokerId(1), C0), Fetch(C1, C0), DualWrite(C0))
    assert image_of(state.history.committed).registration(BrokerId(1)).fenced
    return state


def test_registration_kraft_broker_refused_while_the_zk_broker_with_its_id_is_live():
    """A KRaft broker cannot take the id of a ZK broker whose registration is still live.

    KIP-866 §Broker Registration ("If a KRaft broker attempts to register itself with the node
    ID of an existing ZK broker, the controller will reject the registration").
    """
    state = run(
        initial_state(SCOPES["broker-migration"]),
        StopBroker(BrokerId(1)),
        MigrateBrokerToKRaft(BrokerId(1)),
        RestartBroker(BrokerId(1)),
    )
    assert state.brokers[1].config.kraft_mode and state.brokers[1].incarnation == 1
    assert refusal(state, 1) is Errors.DUPLICATE_BROKER_REGISTRATION
    assert step(state, RegisterWithKRaft(BrokerId(1), C0)) is None

    # Once the dead ZK incarnation's session times out (free: the process is gone), it is admitted.
    state = run(state, SessionTimeout(BrokerId(1), C0), Fetch(C1, C0), DualWrite(C0))
    assert refusal(state, 1) is Errors.NONE
    before = state
    state = run(state, RegisterWithKRaft(BrokerId(1), C0))
    assert appended(before, state, C0) == [
        RegisterBrokerRecord(BrokerId(1), Incarnation(1), BrokerEpoch(14), False, Ibp.IBP_3_4_IV0)
    ]


def test_registration_zk_broker_whose_ibp_differs_from_metadata_version_is_refused():
    """Broker 1 runs IBP 3.6-IV1 against a quorum at metadata.version 3.4-IV0: refused, and the migration waits.

    KIP-866 §Broker Registration ("only accept the registration if the given metadata.version
    is equal to the IBP/MetadataVersion of the quorum"), §ZK Broker Presence.
    """
    state = initial_state(SCOPES["pre-migration"])
    assert state.brokers[1].config.ibp == Ibp.IBP_3_6_IV1
    assert image_of(ctrl(state, C0).log).metadata_version == Ibp.IBP_3_4_IV0
    assert refusal(state, 1) is Errors.UNSUPPORTED_VERSION
    assert step(state, RegisterWithKRaft(BrokerId(1), C0)) is None

    state = run(
        state, RegisterWithKRaft(BrokerId(0), C0), Fetch(C1, C0), BrokerHeartbeat(BrokerId(0), C0), Fetch(C1, C0),
        WaitForControllerQuorum(C0),
    )
    assert [r.broker for r in image_of(state.history.committed).brokers] == [0]
    assert step(state, WaitForZkBrokers(C0)) is None  # broker 1 is live in ZooKeeper but not admitted


def test_registration_kraft_broker_refused_in_pre_migration():
    """Before the metadata is migrated, a KRaft broker is refused with BROKER_ID_NOT_REGISTERED.

    KIP-866 §KRaft Controller Pre-Migration State (only registrations and heartbeats of ZK
    brokers are handled until the initial migration completes).
    """
    state = run(
        initial_state(with_budget("pre-migration", migrations=1)),
        StopBroker(BrokerId(0)),
        MigrateBrokerToKRaft(BrokerId(0)),
        RestartBroker(BrokerId(0)),
    )
    assert state.brokers[0].config.kraft_mode
    assert image_of(ctrl(state, C0).log).registration(BrokerId(0)) is None
    assert refusal(state, 0) is Errors.BROKER_ID_NOT_REGISTERED
    assert step(state, RegisterWithKRaft(BrokerId(0), C0)) is None


def test_kraft_broker_is_fenced_until_caught_up_then_online():
    """A KRaft broker stays Fenced until it has replayed its own registration; then a heartbeat unfences it.

    KIP-500 §Broker States (Fenced: "the broker ... is fetching the newest metadata"; Online
    once it has caught up); reference §3.2 (BrokerHeartbeatManager).
    """
    state = zk_broker_1_stopped_and_fenced(initial_state(SCOPES["broker-migration"]))
    state = run(
        state, MigrateBrokerToKRaft(BrokerId(1)), RestartBroker(BrokerId(1)), RegisterWithKRaft(BrokerId(1), C0)
    )
    broker = state.brokers[1]
    assert (broker.kraft_epoch, broker.lifecycle, broker.image.offset) == (14, BrokerState.FENCED, 0)
    assert step(state, BrokerHeartbeat(BrokerId(1), C0)) is None  # not caught up: nothing to do yet

    state = run(state, FetchMetadata(BrokerId(1), C0))  # the registration is not committed yet
    assert state.brokers[1].image.offset == 14
    assert step(state, BrokerHeartbeat(BrokerId(1), C0)) is None

    state = run(state, Fetch(C1, C0), FetchMetadata(BrokerId(1), C0))
    assert state.brokers[1].image.offset == 15  # its RegisterBrokerRecord (offset 14) replayed
    before = state
    state = run(state, BrokerHeartbeat(BrokerId(1), C0))
    assert appended(before, state, C0) == [BrokerRegistrationChangeRecord(BrokerId(1), BrokerEpoch(14), False)]
    assert state.brokers[1].lifecycle is BrokerState.ONLINE


def test_kraft_broker_metadata_omits_fenced_brokers():
    """The brokers a KRaft broker serves to clients are the unfenced ones of its image.

    KIP-500 §Broker States (a Fenced broker is omitted from the metadata sent to clients).
    """
    state = zk_broker_1_stopped_and_fenced(initial_state(SCOPES["broker-migration"]))
    state = run(
        state, MigrateBrokerToKRaft(BrokerId(1)), RestartBroker(BrokerId(1)), RegisterWithKRaft(BrokerId(1), C0),
        Fetch(C1, C0), FetchMetadata(BrokerId(1), C0),
    )
    assert state.brokers[1].metadata_live == (0,)  # itself still fenced

    state = run(state, BrokerHeartbeat(BrokerId(1), C0), Fetch(C1, C0), FetchMetadata(BrokerId(1), C0))
    assert state.brokers[1].metadata_live == (0, 1)

    # ZK broker 0's heartbeats are lost (a live broker: costs the timeout budget) and it is fenced.
    state = run(state, DualWrite(C0), SessionTimeout(BrokerId(0), C0), Fetch(C1, C0), FetchMetadata(BrokerId(1), C0))
    assert state.budget.timeouts == 0
    assert image_of(state.history.committed).registration(BrokerId(0)).fenced
    assert state.brokers[1].metadata_live == (1,)


def test_kraft_broker_controlled_shutdown_moves_its_leadership_then_exits():
    """SIGINT on a KRaft broker that leads: Stopping, its leadership moves, then SHUTDOWN_NOW.

    KIP-500 §Broker States (Stopping: "the broker ... waits for its leaderships to be moved";
    then the controller tells it to shut down). Broker 0 stops after the driver chose to claim
    ZooKeeper, so the migration copies a partition it still leads, and it comes back on KRaft.
    """
    scope = with_budget("migration", restarts=1, migrations=1, shutdowns=1)
    state = run(
        initial_state(scope),
        WaitForZkBrokers(C0), StopBroker(BrokerId(0)), SessionTimeout(BrokerId(0), C0), Fetch(C1, C0),
        BecomeZkController(C0), BecomeZkController(C0), MigrateMetadata(C0), CompleteMigration(C0), Fetch(C1, C0),
        MigrationCommitted(C0), SyncKRaftToZk(C0), SendRPCsToBrokers(C0),
        MigrateBrokerToKRaft(BrokerId(0)), RestartBroker(BrokerId(0)), RegisterWithKRaft(BrokerId(0), C0),
        Fetch(C1, C0), FetchMetadata(BrokerId(0), C0), BrokerHeartbeat(BrokerId(0), C0), Fetch(C1, C0), DualWrite(C0),
    )
    assert state.brokers[0].lifecycle is BrokerState.ONLINE
    assert image_of(state.history.committed).partitions == (PartitionImage(BrokerId(0), (0, 1), LeaderEpoch(0)),)

    state = run(state, BeginControlledShutdown(BrokerId(0)))
    assert (state.brokers[0].lifecycle, state.brokers[0].want_shutdown) == (BrokerState.STOPPING, True)

    before = state
    state = run(state, BrokerHeartbeat(BrokerId(0), C0), Fetch(C1, C0))
    assert appended(before, state, C0) == [
        BrokerRegistrationChangeRecord(BrokerId(0), BrokerEpoch(13), None, True),
        PartitionChangeRecord(0, BrokerId(1), (1,), LeaderEpoch(1)),
    ]
    assert state.brokers[0].alive  # it leads nothing now; the next heartbeat is answered SHUTDOWN_NOW

    before = run(state, DualWrite(C0))
    state = run(before, BrokerHeartbeat(BrokerId(0), C0))
    assert appended(before, state, C0) == [BrokerRegistrationChangeRecord(BrokerId(0), BrokerEpoch(13), True)]
    assert (state.brokers[0].alive, state.brokers[0].lifecycle) == (False, BrokerState.OFFLINE)


def test_fencing_the_last_isr_member_keeps_it_for_reelection_when_it_returns():
    """The only replica's broker migrates to KRaft: the partition is offline meanwhile, then led by it again.

    KIP-500 §Broker States (a fenced broker loses its leaderships). Kafka's ReplicationControlManager
    never shrinks an ISR to empty (PartitionChangeBuilder.build: "If ELR is enabled, the ISR is
    allowed to be empty"), and on unfencing elects the broker for leaderless partitions whose ISR
    holds it (what ``_elect_leaderless`` is for). Found while writing the full-migration scenario.
    """
    state = run(
        initial_state(with_budget("handover", restarts=1, migrations=1)),
        RegisterWithKRaft(BrokerId(0), C0), BrokerHeartbeat(BrokerId(0), C0), WaitForControllerQuorum(C0),
        WaitForZkBrokers(C0), BecomeZkController(C0), BecomeZkController(C0), MigrateMetadata(C0),
        CompleteMigration(C0), MigrationCommitted(C0), SyncKRaftToZk(C0), SendRPCsToBrokers(C0),
        StopBroker(BrokerId(0)),
    )
    before = state
    state = run(state, SessionTimeout(BrokerId(0), C0))
    assert appended(before, state, C0) == [
        BrokerRegistrationChangeRecord(BrokerId(0), BrokerEpoch(3), True),
        PartitionChangeRecord(0, BrokerId(-1), (0,), LeaderEpoch(1)),
    ]
    state = run(
        state, DualWrite(C0), MigrateBrokerToKRaft(BrokerId(0)), RestartBroker(BrokerId(0)),
        RegisterWithKRaft(BrokerId(0), C0), FetchMetadata(BrokerId(0), C0),
    )
    before = state
    state = run(state, BrokerHeartbeat(BrokerId(0), C0))
    assert appended(before, state, C0) == [
        BrokerRegistrationChangeRecord(BrokerId(0), BrokerEpoch(12), False),
        PartitionChangeRecord(0, BrokerId(0), (0,), LeaderEpoch(2)),
    ]
