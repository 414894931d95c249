"""The KRaft side of ``step``: the quorum, brokers on KRaft, and the ZooKeeper-to-KRaft migration.

How it works (``model.step.step`` dispatches here for the KRaft side's actions, ``KRaftAction``):
- Quorum handlers (``_start_election`` ... ``_fetch``) move Raft state; every append goes
  through ``_append``, which advances the leader's high watermark and extends
  ``history.committed`` (what the checks compare every later log with).
- The active controller decides requests (``decide_*``: request -> error or records) and appends
  the records; what any node knows is ``image_of`` a log prefix (``model.kraft``). Deciding
  reads the controller's own log, committed or not, as QuorumController does with its
  timeline; the migration driver and brokers read committed prefixes only.
- The driver moves only through ``_drive``, which refuses a transition outside
  ``model.migration.VALID_TRANSITIONS`` (unless a seeded bug skips states). Each driver action
  is one event of KRaftMigrationDriver, enabled in the one driver state that runs it.
- Every ZooKeeper write of a KRaft controller after its claim goes through ``_kraft_zk_write``:
  one multi with the /controller_epoch check, the metadata ops and the compare-and-set of
  /migration (KIP-866 §Dual Metadata Writes). A write that fails its fencing sends the driver
  to INACTIVE until the next leadership event (``# Differs:`` below).
- Handlers return None when the action is not enabled or would change nothing.

Seeds: KIP-500 §Controller Quorum, §Broker States; KIP-866 (all sections cited at each rule).
"""

from __future__ import annotations

from typing import assert_never

from model import zookeeper as zkm
from model.actions import (
    AlterConfigs,
    BecomeLeader,
    BecomeZkController,
    BeginControlledShutdown,
    BrokerHeartbeat,
    CompleteMigration,
    CrashController,
    DeleteControllerZNodes,
    DualWrite,
    Fetch,
    FetchMetadata,
    KRaftAction,
    KRaftLeaderChange,
    MigrateBrokerToKRaft,
    MigrateMetadata,
    MigrationCommitted,
    ReconfigureController,
    RecoverMigrationState,
    RegisterWithKRaft,
    RequestVote,
    RestartController,
    RollbackBrokerToZk,
    SendRPCsToBrokers,
    SessionTimeout,
    ShutdownController,
    StartElection,
    SyncKRaftToZk,
    UpdateMetadataVersion,
    WaitForControllerQuorum,
    WaitForZkBrokers,
)
from model.bugs import Bug, Variant
from model.kraft import (
    METADATA_VERSION,
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    BrokerState,
    ConfigRecord,
    ControllerId,
    EndTransactionRecord,
    FeatureLevelRecord,
    Incarnation,
    KRaftEpoch,
    LeaderChangeMessage,
    LogEntry,
    MetadataImage,
    MetadataRecord,
    Offset,
    PartitionChangeRecord,
    PartitionRecord,
    QuorumRole,
    RegisterBrokerRecord,
    UpgradeType,
    ZkMigrationState,
    ZkMigrationStateRecord,
    advance_high_watermark,
    common_prefix,
    decided_view,
    image_of,
    is_metadata,
    log_up_to_date,
    majority,
)
from model.migration import (
    CONFIG,
    DELETED_TOPIC,
    MIGRATION,
    Driver,
    KRaftControllerZNode,
    MigrationDriverState,
    MigrationZNode,
    Profile,
    is_valid_transition,
    pending_deletion_path,
    topic_path,
)
from model.state import (
    BROKER_IDS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    TOPIC,
    Broker,
    ClusterState,
    KRaftController,
    KRaftWrite,
    LeaderAndIsr,
    Message,
    PartitionState,
    UpdateMetadata,
    controller_index,
    partition_state_path,
    znode_data,
)
from model.transitions import process_dies, put_broker, send, spend
from model.types import (
    NO_LEADER,
    NO_SESSION,
    UNKNOWN_BROKER_EPOCH,
    BrokerEpoch,
    BrokerId,
    ControllerEpoch,
    Errors,
    Ibp,
    LeaderEpoch,
    PartitionId,
    ZkVersion,
)
from model.zookeeper import Check, Create, Delete, Op, SetData

D = MigrationDriverState


def handle(state: ClusterState, action: KRaftAction, variant: Variant) -> ClusterState | None:
    """The state after a KRaft-side action, or None when it is not enabled (``model.step.step``)."""
    match action:
        case StartElection(controller=c):
            return _start_election(state, c)
        case RequestVote(controller=c, voter=v):
            return _request_vote(state, c, v, variant)
        case BecomeLeader(controller=c):
            return _become_leader(state, c, variant)
        case Fetch(controller=f, leader=leader):
            return _fetch(state, f, leader, variant)
        case CrashController(controller=c):
            return _crash_controller(state, c)
        case ShutdownController(controller=c):
            return _shutdown_controller(state, c, variant)
        case RestartController(controller=c):
            return _restart_controller(state, c, variant)
        case ReconfigureController(controller=c, migration_enabled=enabled):
            return _reconfigure_controller(state, c, enabled)
        case RecoverMigrationState(controller=c):
            return _recover_migration_state(state, c)
        case KRaftLeaderChange(controller=c):
            return _kraft_leader_change(state, c, variant)
        case WaitForControllerQuorum(controller=c):
            return _wait_for_controller_quorum(state, c, variant)
        case WaitForZkBrokers(controller=c):
            return _wait_for_zk_brokers(state, c, variant)
        case BecomeZkController(controller=c):
            return _become_zk_controller(state, c, variant)
        case MigrateMetadata(controller=c):
            return _migrate_metadata(state, c, variant)
        case CompleteMigration(controller=c):
            return _complete_migration(state, c, variant)
        case MigrationCommitted(controller=c):
            return _migration_committed(state, c, variant)
        case SyncKRaftToZk(controller=c):
            return _sync_kraft_to_zk(state, c, variant)
        case SendRPCsToBrokers(controller=c):
            return _send_rpcs_to_brokers(state, c, variant)
        case DualWrite(controller=c):
            return _dual_write(state, c, variant)
        case RegisterWithKRaft(broker=b, controller=c):
            return _register_with_kraft(state, b, c, variant)
        case BrokerHeartbeat(broker=b, controller=c):
            return _heartbeat(state, b, c, variant)
        case FetchMetadata(broker=b, controller=c):
            return _fetch_metadata(state, b, c, variant)
        case SessionTimeout(broker=b, controller=c):
            return _session_timeout(state, b, c, variant)
        case BeginControlledShutdown(broker=b):
            return _begin_controlled_shutdown(state, b)
        case MigrateBrokerToKRaft(broker=b):
            return _migrate_broker(state, b)
        case RollbackBrokerToZk(broker=b):
            return _rollback_broker(state, b)
        case AlterConfigs(controller=c):
            return _alter_configs(state, c, variant)
        case UpdateMetadataVersion(controller=c, level=level, upgrade_type=upgrade_type):
            return _update_metadata_version(state, c, level, upgrade_type, variant)
        case DeleteControllerZNodes():
            return _delete_controller_znodes(state, variant)
        case _:
            assert_never(action)


# ---- helpers -------------------------------------------------------------------------------------

def ctrl(state: ClusterState, c: ControllerId) -> KRaftController:
    return state.controllers[controller_index(c)]


def _put_ctrl(state: ClusterState, c: KRaftController) -> ClusterState:
    controllers = list(state.controllers)
    controllers[controller_index(c.id)] = c
    return state.replace(controllers=tuple(controllers))


def is_active(c: KRaftController) -> bool:
    """It believes it is the active controller (a deposed leader still does until it learns)."""
    return c.alive and c.role is QuorumRole.LEADER and c.active


def own_image(c: KRaftController) -> MetadataImage:
    """What the active controller decides from: its whole log, committed or not, open transaction included."""
    return decided_view(image_of(c.log))


def committed_image(c: KRaftController) -> MetadataImage:
    """What the controller has published: its committed prefix (the driver and brokers read this)."""
    return image_of(c.log, c.high_watermark)


def driver_image(c: KRaftController) -> MetadataImage:
    """The committed image as the migration driver has it: no record of a leadership newer than the one
    it has heard of. Raft tells its listeners of a leader change before it hands them that leader's
    records, so a deposed driver learns of the change before it sees what the new leader committed."""
    d = c.driver
    upto = c.high_watermark
    if d is not None:
        while upto > 0 and c.log[upto - 1].epoch > d.kraft_epoch:
            upto -= 1
    return image_of(c.log, upto)


def voters(state: ClusterState) -> int:
    return len(state.controllers)


def _note_commits(state: ClusterState) -> ClusterState:
    """Extend ``history.committed`` with anything a high watermark now covers.

    A high watermark that covers a different record at an offset already committed (only a broken
    quorum does that) replaces the history there, so CommittedRecordsNeverChange sees it at once,
    not only once some high watermark passes the old end.
    """
    committed = state.history.committed
    for c in state.controllers:
        hw = c.high_watermark
        if hw > len(committed):
            committed = c.log[:hw]
        elif 0 < hw <= len(c.log) and c.log[hw - 1] is not committed[hw - 1] and c.log[hw - 1] != committed[hw - 1]:
            committed = c.log[:hw]
    if committed is state.history.committed:
        return state
    return state.replace(history=state.history.replace(committed=committed))


def _append(state: ClusterState, c: KRaftController, records: list[MetadataRecord], variant: Variant) -> ClusterState:
    """The leader appends ``records`` in its epoch; with a quorum of one they commit at once."""
    log = c.log + tuple(LogEntry(c.epoch, r) for r in records)
    fetched = list(c.fetched)
    fetched[controller_index(c.id)] = len(log)
    c = c.replace(log=log, fetched=tuple(fetched))
    c = c.replace(high_watermark=_leader_hw(c, variant))
    return _note_commits(_put_ctrl(state, c))


def _leader_hw(c: KRaftController, variant: Variant) -> int:
    if variant.has(Bug.COMMIT_WITHOUT_MAJORITY):
        return len(c.log)
    return advance_high_watermark(c.log, c.epoch, c.fetched, c.high_watermark)


def _metadata_lag(c: KRaftController) -> int:
    """Metadata records in the controller's log that ZooKeeper may not have.

    ZooKeeper has at least what its driver last read or wrote in /migration, and at least the
    initial migration (ZooKeeper was its source), whichever is further.
    """
    known = _migration_end(c) or 0
    if c.driver is not None:
        known = max(known, c.driver.migration_offset)
    return sum(1 for e in c.log[known:] if is_metadata(e))


def writes_blocked(state: ClusterState, c: KRaftController, variant: Variant, adding: int = 1) -> bool:
    """KIP-866 §Unavailable ZooKeeper: refuse metadata writes that would take the write-behind lag past its bound."""
    if variant.has(Bug.IGNORE_LAG_BOUND):
        return False
    if own_image(c).migration_state is not ZkMigrationState.MIGRATION:
        return False
    return _metadata_lag(c) + adding > state.budget.max_lag


def _kraft_controller_znode(state: ClusterState) -> KRaftControllerZNode | None:
    data = znode_data(state, CONTROLLER)
    return data if isinstance(data, KRaftControllerZNode) else None


# ---- the quorum ----------------------------------------------------------------------------------

def _step_down(c: KRaftController, epoch: KRaftEpoch, leader: ControllerId | None = None) -> KRaftController:
    """Learn a newer epoch (or a leader in this one): Unattached, or Follower of a known leader."""
    bumped = epoch > c.epoch
    return c.replace(
        epoch=epoch,
        voted_for=None if bumped else c.voted_for,
        role=QuorumRole.UNATTACHED if leader is None else QuorumRole.FOLLOWER,
        leader=leader,
        votes=frozenset(),
        active=False,
        fetched=(),
    )


def election_heals(state: ClusterState) -> bool:
    """An election timeout repairs a quorum with no live leader and no live candidate; it costs no budget.

    Any other election (one that disrupts a leader, splits a vote, or follows a controller that
    resigned for its configuration) is a perturbation. One free candidate at a time keeps the
    epochs finite, as randomised timeouts do in practice.
    """
    busy = (QuorumRole.LEADER, QuorumRole.CANDIDATE, QuorumRole.RESIGNED)
    return not any(o.alive and o.role in busy for o in state.controllers)


def _start_election(state: ClusterState, cid: ControllerId) -> ClusterState | None:
    c = ctrl(state, cid)
    if not c.alive or c.role is QuorumRole.LEADER:
        return None
    if not election_heals(state):
        state = spend(state, kraft_elections=1)
        if state is None:
            return None
    c = c.replace(
        epoch=KRaftEpoch(c.epoch + 1),
        voted_for=c.id,
        role=QuorumRole.CANDIDATE,
        leader=None,
        votes=frozenset({c.id}),
        active=False,
    )
    return _put_ctrl(state, c)


def _request_vote(state: ClusterState, cid: ControllerId, vid: ControllerId, variant: Variant) -> ClusterState | None:
    """One Vote round trip (KafkaRaftClient.handleVoteRequest / handleVoteResponse)."""
    cand, voter = ctrl(state, cid), ctrl(state, vid)
    if cid == vid or not cand.alive or not voter.alive or cand.role is not QuorumRole.CANDIDATE:
        return None
    if vid in cand.votes:
        return None
    if voter.epoch > cand.epoch:  # the response tells the candidate of a newer epoch
        return _put_ctrl(state, _step_down(cand, voter.epoch, voter.leader))
    if voter.epoch < cand.epoch:
        voter = _step_down(voter, cand.epoch)
    may_vote = voter.voted_for in (None, cid) or variant.has(Bug.VOTE_TWICE_IN_EPOCH)
    fresh = log_up_to_date(cand.log, voter.log) or variant.has(Bug.VOTE_IGNORES_LOG)
    if may_vote and fresh and voter.role in (QuorumRole.UNATTACHED, QuorumRole.VOTED):
        voter = voter.replace(voted_for=cid, role=QuorumRole.VOTED)
        cand = cand.replace(votes=cand.votes | {vid})
    if voter == ctrl(state, vid) and cand == ctrl(state, cid):
        return None  # refused, and nobody learned anything
    return _put_ctrl(_put_ctrl(state, voter), cand)


def _become_leader(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    c = ctrl(state, cid)
    if not c.alive or c.role is not QuorumRole.CANDIDATE or len(c.votes) < majority(voters(state)):
        return None
    fetched = tuple(0 for _ in state.controllers)
    c = c.replace(role=QuorumRole.LEADER, leader=c.id, votes=frozenset(), fetched=fetched, active=False)
    if variant.has(Bug.LEADER_RESETS_HIGH_WATERMARK):
        c = c.replace(high_watermark=0)  # the new leader forgets the commits it learned as a follower
    terms = state.history.kraft_terms | {(c.epoch, c.id)}
    state = state.replace(history=state.history.replace(kraft_terms=terms))
    state = _append(state, c, [LeaderChangeMessage(c.id)], variant)
    if variant.has(Bug.ACTIVATE_ON_UNCOMMITTED_LOG):
        return _activate(state, ctrl(state, cid), variant)  # on a log that may hold a predecessor's uncommitted tail
    return _activate_once_committed(state, cid, variant)  # a quorum of one commits its LeaderChange at once


def epoch_start_offset(c: KRaftController) -> int:
    """The offset of the leader's LeaderChange entry: the first entry of its epoch."""
    return next(i for i, e in enumerate(c.log) if e.epoch == c.epoch)


def _activate_once_committed(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState:
    """Activate the leader in the step where its high watermark first covers its LeaderChange entry.

    The seeds say only that the log's leader is the active controller; this follows Kafka:
    KafkaRaftClient fires handleLeaderChange to a new leader's listeners only once they have
    read past the epoch start offset (ListenerContext.maybeFireLeaderChange), so QuorumController
    activates on a log whose every entry is committed and replayed. Activating earlier would read
    a predecessor's uncommitted tail: a MIGRATION record there, then POST_MIGRATION appended after
    it, commit in one Fetch and the committed state skips MIGRATION.
    """
    c = ctrl(state, cid)
    if not c.alive or c.role is not QuorumRole.LEADER or c.active or c.high_watermark <= epoch_start_offset(c):
        return state
    return _activate(state, c, variant)


def _activate(state: ClusterState, c: KRaftController, variant: Variant) -> ClusterState:
    """QuorumController's activation (ActivationRecordsGenerator; reference §1.1): bootstrap or check the log.

    The log is the committed one (its last entry is the leader's committed LeaderChange), unless a
    seeded bug activates earlier.
    """
    image = image_of(c.log)
    flag = c.config.migration_enabled
    records: list[MetadataRecord] = []
    if image.open_transaction is not None and not variant.has(Bug.NO_ABORT_ON_FAILOVER):
        # KIP-866 §Initial Data Migration: the next active controller aborts the unfinished migration.
        records.append(AbortTransactionRecord())
    mv = c.config.metadata_version
    if image.metadata_version is None:  # an empty log: bootstrap
        if flag and variant.profile is Profile.KAFKA_3_9 and mv < Ibp.IBP_3_6_IV1:
            # Differs: Kafka 3.9 refuses to start a migration below 3.6-IV1 (metadata transactions).
            return _put_ctrl(state, _resign(c))
        records.append(FeatureLevelRecord(METADATA_VERSION, mv))
        records.append(ZkMigrationStateRecord(ZkMigrationState.PRE_MIGRATION if flag else ZkMigrationState.NONE))
    else:
        current = image.migration_state
        if current in (ZkMigrationState.PRE_MIGRATION, ZkMigrationState.MIGRATION) and not flag:
            if current is ZkMigrationState.MIGRATION and _may_finalize(state, variant):
                records.append(ZkMigrationStateRecord(ZkMigrationState.POST_MIGRATION))
            else:
                # KIP-866 §Misconfigurations: a migration is in progress and this controller lacks the flag.
                return _put_ctrl(state, _resign(c))
        elif current is ZkMigrationState.NONE and flag and image.migration is not None:
            if variant.profile is Profile.KAFKA_3_9:
                # Differs: Kafka 3.9 throws at activation; the KIP only says such a cluster never migrates.
                return _put_ctrl(state, _resign(c))
    c = c.replace(active=True)
    if records:
        return _append(state, c, records, variant)
    return _put_ctrl(state, c)


def _may_finalize(state: ClusterState, variant: Variant) -> bool:
    if variant.profile is Profile.KAFKA_3_9:
        # Differs: Kafka writes POST_MIGRATION as soon as one controller without the flag activates.
        return True
    # KIP-866 §Finalizing the Migration: only once every quorum member signals it is finalizing.
    return all(o.alive and not o.config.migration_enabled for o in state.controllers)


def _resign(c: KRaftController) -> KRaftController:
    return c.replace(role=QuorumRole.RESIGNED, active=False, fetched=())


def _fetch(state: ClusterState, fid: ControllerId, lid: ControllerId, variant: Variant) -> ClusterState | None:
    """One Fetch round trip: the epoch check, truncation on divergence, replication, the HW."""
    f, leader = ctrl(state, fid), ctrl(state, lid)
    if fid == lid or not f.alive or not leader.alive or leader.role is not QuorumRole.LEADER:
        return None
    if f.epoch > leader.epoch:  # the deposed leader learns of the newer epoch from the response
        return _put_ctrl(state, _step_down(leader, f.epoch, f.leader))
    if f.role is QuorumRole.LEADER and f.epoch == leader.epoch:
        return None
    if f.epoch < leader.epoch or f.role is not QuorumRole.FOLLOWER or f.leader != lid:
        f = _step_down(f, leader.epoch, lid)
    keep = common_prefix(f.log, leader.log)
    log = leader.log if keep < len(leader.log) or len(f.log) != keep else f.log
    hw_before = leader.high_watermark
    fetched = list(leader.fetched)
    fetched[controller_index(fid)] = len(log)
    leader = leader.replace(fetched=tuple(fetched))
    leader = leader.replace(high_watermark=_leader_hw(leader, variant))
    f = f.replace(log=log, high_watermark=max(f.high_watermark, min(leader.high_watermark, len(log))))
    before = (ctrl(state, fid), ctrl(state, lid))
    if (f, leader) == before and leader.high_watermark == hw_before:
        return None
    state = _note_commits(_put_ctrl(_put_ctrl(state, f), leader))
    return _activate_once_committed(state, lid, variant)


def _crash_controller(state: ClusterState, cid: ControllerId) -> ClusterState | None:
    c = ctrl(state, cid)
    if not c.alive:
        return None
    state = spend(state, controller_crashes=1)
    if state is None:
        return None
    crashed = state.history.crashed_controllers | {cid}
    state = state.replace(history=state.history.replace(crashed_controllers=crashed))
    return _put_ctrl(state, _process_stops(c))


def _process_stops(c: KRaftController) -> KRaftController:
    """Only the persisted epoch, vote and log survive the process."""
    return c.replace(
        alive=False, role=QuorumRole.UNATTACHED, leader=None, votes=frozenset(), high_watermark=0,
        fetched=(), active=False, driver=None,
    )


def _shutdown_controller(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """A clean stop. KIP-866 §Rollback to ZK: the leader stops only once ZooKeeper has every committed record."""
    c = ctrl(state, cid)
    if not c.alive:
        return None
    if is_active(c) and c.driver is not None and not variant.has(Bug.SHUTDOWN_WITHOUT_ZK_CATCH_UP):
        image = committed_image(c)
        if image.migration_state is ZkMigrationState.MIGRATION:
            node = znode_data(state, MIGRATION)
            if node is None or node.kraft_metadata_offset < c.high_watermark:
                return None
    state = spend(state, migrations=1)
    if state is None:
        return None
    return _put_ctrl(state, _process_stops(c))


def _restart_controller(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    c = ctrl(state, cid)
    if c.alive or state.history.handed_back is not None:
        # KIP-866 §Rollback to ZK ends the quorum's life: after the operator deleted its znodes,
        # a restarted quorum would reclaim ZooKeeper from a stale log (a new migration needs a
        # freshly formatted quorum, which the model does not cover).
        return None
    epoch = KRaftEpoch(0) if variant.has(Bug.RESTART_FORGETS_EPOCH) else c.epoch
    role = QuorumRole.VOTED if c.voted_for is not None and c.voted_for != c.id else QuorumRole.UNATTACHED
    driver = Driver() if c.config.migration_enabled else None
    return _put_ctrl(state, c.replace(alive=True, epoch=epoch, role=role, driver=driver))


def _reconfigure_controller(state: ClusterState, cid: ControllerId, enabled: bool) -> ClusterState | None:
    c = ctrl(state, cid)
    if c.alive or c.config.migration_enabled == enabled:
        return None
    state = spend(state, migrations=1)
    if state is None:
        return None
    return _put_ctrl(state, c.replace(config=c.config.replace(migration_enabled=enabled)))


# ---- the migration driver ------------------------------------------------------------------------

def _driver(c: KRaftController, expected: MigrationDriverState | None = None) -> Driver | None:
    """The driver if the controller runs and has one (in ``expected``, when given)."""
    if not c.alive or c.driver is None:
        return None
    if expected is not None and c.driver.state is not expected:
        return None
    return c.driver


def _leading(c: KRaftController) -> bool:
    """The driver believes its node leads (KAFKA-16667: an event runs only for the leadership it was raised in).

    It is the driver's belief, updated only by ``KRaftLeaderChange``: a deposed leader's driver
    goes on with its events until it handles the leadership change, as Kafka's event queue does.
    """
    d = c.driver
    return c.alive and d is not None and d.leader


def _drive(c: KRaftController, new: MigrationDriverState, variant: Variant, **changes) -> KRaftController:
    """Move the driver; a transition outside the table is an IllegalStateException in Kafka 3.9."""
    d = c.driver
    assert d is not None
    if not is_valid_transition(d.state, new):
        raise AssertionError(f"driver of {c.id}: {d.state.value} -> {new.value} is not in the table")
    return c.replace(driver=d.replace(state=new, **changes))


def _recover_migration_state(state: ClusterState, cid: ControllerId) -> ClusterState | None:
    """RecoverMigrationStateFromZKEvent: read /migration, or create it empty."""
    c = ctrl(state, cid)
    d = _driver(c, D.UNINITIALIZED)
    if d is None or not state.zk.available:
        return None
    node = zkm.get(state.zk, MIGRATION)
    if node is None:
        empty = MigrationZNode(ControllerId(-1), KRaftEpoch(-1), Offset(-1))
        zk, results = zkm.multi(state.zk, NO_SESSION, (Create(MIGRATION, empty),))
        state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
        node = zkm.get(zk, MIGRATION)
    c = c.replace(driver=d.replace(state=D.INACTIVE, migration_offset=node.data.kraft_metadata_offset,
                                   migration_version=node.version))
    return _put_ctrl(state, c)


def _kraft_leader_change(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """KRaftLeaderEvent: leading -> WAIT_FOR_CONTROLLER_QUORUM (re-reading /migration); else INACTIVE."""
    c = ctrl(state, cid)
    d = _driver(c)
    if d is None or d.state is D.UNINITIALIZED:
        return None
    leads = is_active(c)
    if (d.kraft_epoch, d.leader) == (c.epoch, leads):
        return None
    if not leads:
        c = _drive(c, D.INACTIVE, variant, kraft_epoch=c.epoch, leader=False, zk_epoch=-1, zk_epoch_version=-2,
                   umr_sent=frozenset())
        return _put_ctrl(state, c)
    if variant.has(Bug.INACTIVE_IGNORES_LEADERSHIP) and d.state is D.INACTIVE and d.kraft_epoch >= 0:
        return None
    if not state.zk.available:
        return None
    node = zkm.get(state.zk, MIGRATION)
    if d.state is not D.INACTIVE:
        # The event of losing the leadership in between comes first: INACTIVE, then this one.
        return _put_ctrl(state, _drive(c, D.INACTIVE, variant, leader=False, zk_epoch=-1, zk_epoch_version=-2,
                                       umr_sent=frozenset()))
    c = _drive(c, D.WAIT_FOR_CONTROLLER_QUORUM, variant, kraft_epoch=c.epoch, leader=True, zk_epoch=-1,
               zk_epoch_version=-2, umr_sent=frozenset(), migration_offset=node.data.kraft_metadata_offset,
               migration_version=node.version)
    return _put_ctrl(state, c)


def quorum_ready(state: ClusterState, c: KRaftController, variant: Variant) -> bool:
    """KIP-866 §Migration Trigger 5: the quorum is online and every member has the flag and ZK configs."""
    if variant.profile is Profile.KAFKA_3_9:
        image = committed_image(c)
        if image.metadata_version is not None and image.metadata_version < Ibp.IBP_3_7_IV0:
            # Differs: below 3.7-IV0 Kafka has no controller registrations and skips the check (reference §1.4).
            return True
        # Differs: Kafka reads zkMigrationReady from RegisterControllerRecords, whether or not the voter is up.
        return all(o.config.migration_enabled and o.config.zk_configured for o in state.controllers)
    return all(o.alive and o.config.migration_enabled and o.config.zk_configured for o in state.controllers)


def _wait_for_controller_quorum(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    c = ctrl(state, cid)
    d = _driver(c, D.WAIT_FOR_CONTROLLER_QUORUM)
    if d is None or not _leading(c):
        return None
    image = driver_image(c)
    if image.is_empty:
        # No image published yet (firstPublish): KAFKA-15389, an empty image (a committed LeaderChange whose
        # bootstrap records have not committed yet) is not taken as the first; it would read as NONE.
        return None
    match image.migration_state:
        case ZkMigrationState.NONE if not variant.has(Bug.KRAFT_BORN_MIGRATES):
            c = _drive(c, D.INACTIVE, variant)  # a cluster born in KRaft never migrates
        case ZkMigrationState.POST_MIGRATION:
            if variant.has(Bug.REENTER_MIGRATION_AFTER_FINALIZE):
                c = _drive(c, D.BECOME_CONTROLLER, variant)
            else:
                c = _drive(c, D.INACTIVE, variant)  # KIP-866 §Misconfigurations: never re-enter migration
        case ZkMigrationState.MIGRATION:
            if d.migration_offset <= 0 and variant.profile is Profile.KAFKA_3_9:
                # Differs: Kafka 3.9 needs /migration to show the initial migration as done, else INACTIVE
                # (a leader that died between committing the migration and writing /migration strands it).
                c = _drive(c, D.INACTIVE, variant)
            else:
                c = _drive(c, D.BECOME_CONTROLLER, variant)
        case _:
            if not quorum_ready(state, c, variant):
                return None
            if variant.has(Bug.DRIVER_SKIPS_TO_DUAL_WRITE):
                return _put_ctrl(state, c.replace(driver=d.replace(state=D.DUAL_WRITE)))
            c = _drive(c, D.WAIT_FOR_BROKERS, variant)
    return _put_ctrl(state, c)


def known_zk_brokers(state: ClusterState, variant: Variant) -> set[BrokerId]:
    """KIP-866 §ZK Broker Presence: live registrations plus every broker named in an assignment."""
    known = {BrokerId(int(name)) for name, _ in zkm.children(state.zk, BROKER_IDS)}
    if not variant.has(Bug.WAIT_ONLY_FOR_LIVE_BROKERS):
        assignment = znode_data(state, TOPIC) or ()
        known |= {r for replicas in assignment for r in replicas}
    return known


def zk_brokers_ready(state: ClusterState, c: KRaftController, variant: Variant) -> bool:
    image = driver_image(c)
    if not image.brokers or not zkm.children(state.zk, BROKER_IDS):
        return False
    for b in known_zk_brokers(state, variant):
        reg = image.registration(b)
        if reg is None or not reg.is_migrating_zk_broker:
            return False
        if variant.has(Bug.READY_COMPARES_ZK_EPOCH):
            node = zkm.get(state.zk, f"{BROKER_IDS}/{b}")
            if node is None or node.czxid != reg.epoch:
                return False
        # Differs: the KIP asks for registered brokers "in a valid state" (unfenced); Kafka does not check.
        if reg.fenced and variant.profile is Profile.KIP:
            return False
    return True


def _wait_for_zk_brokers(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    c = ctrl(state, cid)
    if _driver(c, D.WAIT_FOR_BROKERS) is None or not _leading(c) or not state.zk.available:
        return None
    if not zk_brokers_ready(state, c, variant):
        return None
    return _put_ctrl(state, _drive(c, D.BECOME_CONTROLLER, variant))


def _become_zk_controller(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """BecomeZkControllerEvent (reference §1.4, §2.3; KIP-866 §Controller Leadership), in its two ZooKeeper writes.

    First the claim (KafkaZkClient.tryRegisterKRaftControllerAsActiveController): one multi that
    bumps /controller_epoch by compare-and-set and replaces /controller with a persistent one
    carrying the Raft epoch. Then (KAFKA-16171) an unconditional write of /migration to learn its
    version. They are two round trips, so another controller's write may land between them.
    """
    c = ctrl(state, cid)
    d = _driver(c, D.BECOME_CONTROLLER)
    if d is None or not _leading(c) or not state.zk.available:
        return None
    if d.zk_epoch_version < 0:
        return _claim(state, c, d, variant)
    node = zkm.get(state.zk, MIGRATION)
    data = node.data.replace(kraft_controller_id=c.id, kraft_controller_epoch=d.kraft_epoch)
    zk, results = zkm.multi(state.zk, NO_SESSION, (SetData(MIGRATION, data, ZkVersion(-1)),))
    state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
    version = zkm.get(zk, MIGRATION).version
    done = data.kraft_metadata_offset > 0
    if variant.profile is Profile.KIP:
        done = done or committed_image(c).migration_state is ZkMigrationState.MIGRATION
    c = _drive(c, D.SYNC_KRAFT_TO_ZK if done else D.ZK_MIGRATION, variant, migration_version=version,
               migration_offset=data.kraft_metadata_offset)
    return _put_ctrl(state, c)


def _claim(state: ClusterState, c: KRaftController, d: Driver, variant: Variant) -> ClusterState | None:
    epoch_node = zkm.get(state.zk, CONTROLLER_EPOCH)
    current = zkm.get(state.zk, CONTROLLER)
    claimed = _kraft_controller_znode(state)
    newer = claimed is not None and claimed.kraft_epoch >= d.kraft_epoch
    if epoch_node is None or (newer and not variant.has(Bug.CLAIM_IGNORES_NEWER_KRAFT_EPOCH)):
        return None  # IllegalStateException / ControllerMovedException: wait for a newer leadership
    new_epoch = ControllerEpoch(epoch_node.data + (0 if variant.has(Bug.CLAIM_REUSES_ZK_EPOCH) else 1))
    ops: list[Op] = [SetData(CONTROLLER_EPOCH, new_epoch, epoch_node.version)]
    if current is not None:
        ops.append(Delete(CONTROLLER, current.version))
    ops.append(Create(CONTROLLER, KRaftControllerZNode(c.id, d.kraft_epoch)))
    state = _record_attempt(state, c)
    zk, results = zkm.multi(state.zk, NO_SESSION, tuple(ops))
    state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
    if not zkm.succeeded(results):
        return None
    history = state.history.replace(max_controller_epoch=max(state.history.max_controller_epoch, new_epoch))
    state = _note_kraft_write(state.replace(history=history), c, "claim", -1)
    c = c.replace(driver=d.replace(zk_epoch=new_epoch, zk_epoch_version=zkm.get(zk, CONTROLLER_EPOCH).version))
    return _put_ctrl(state, c)


def zk_metadata(state: ClusterState) -> list[MetadataRecord]:
    """What the migration copies from ZooKeeper: partitions of live topics and the dynamic config."""
    records: list[MetadataRecord] = []
    assignment = znode_data(state, TOPIC)
    if assignment is not None:
        for p in range(len(assignment)):
            s: PartitionState = znode_data(state, partition_state_path(PartitionId(p)))
            records.append(PartitionRecord(p, s.leader, s.isr, s.leader_epoch))
    config = znode_data(state, CONFIG)
    if config is not None:
        records.append(ConfigRecord(config))
    # A topic pending deletion is not copied (KIP-866 §Topic Deletions); the sync removes it from ZooKeeper.
    return records


def _migrate_metadata(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """MigrateMetadataEvent: beginMigration, then the batches of ZooKeeper data."""
    c = ctrl(state, cid)
    # Appending needs the Raft leadership, not just the driver's belief (NotControllerException otherwise).
    if _driver(c, D.ZK_MIGRATION) is None or not _leading(c) or not is_active(c) or not state.zk.available:
        return None
    if _migration_begun(c) or _migration_appended(c):
        return None
    records = zk_metadata(state)
    if not variant.has(Bug.MIGRATION_OUTSIDE_TRANSACTION):
        records = [BeginTransactionRecord("ZK Migration")] + records
    return _append(state, c, records, variant)


def _migration_begun(c: KRaftController) -> bool:
    """This leadership has begun copying ZooKeeper's data into the log."""
    return any(
        e.epoch == c.epoch and isinstance(e.record, (BeginTransactionRecord, PartitionRecord, ConfigRecord))
        for e in c.log
    )


def _migration_appended(c: KRaftController) -> bool:
    return any(isinstance(e.record, ZkMigrationStateRecord) and e.record.state is ZkMigrationState.MIGRATION
               for e in c.log)


def _complete_migration(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    c = ctrl(state, cid)
    if _driver(c, D.ZK_MIGRATION) is None or not _leading(c) or not is_active(c):
        return None
    if not _migration_begun(c) or _migration_appended(c):
        return None
    records: list[MetadataRecord] = [ZkMigrationStateRecord(ZkMigrationState.MIGRATION)]
    if image_of(c.log).open_transaction is not None:
        records.append(EndTransactionRecord())
    return _append(state, c, records, variant)


def _migration_committed(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """completeMigration's future resolved: write /migration with the migration's offset."""
    c = ctrl(state, cid)
    d = _driver(c, D.ZK_MIGRATION)
    if d is None or not _leading(c) or not state.zk.available:
        return None
    end = _migration_end(c)
    if end is None or c.high_watermark < end:
        return None
    state, ok = _kraft_zk_write(state, c, "migration", [], Offset(end), variant)
    c = ctrl(state, cid)
    if not ok:
        return state
    return _put_ctrl(state, _drive(c, D.SYNC_KRAFT_TO_ZK, variant))


def _migration_end(c: KRaftController) -> int | None:
    """The log end just after this leadership's migration records, if they were appended."""
    for i, e in enumerate(c.log):
        if isinstance(e.record, ZkMigrationStateRecord) and e.record.state is ZkMigrationState.MIGRATION:
            following = c.log[i + 1] if i + 1 < len(c.log) else None
            return i + 2 if following is not None and isinstance(following.record, EndTransactionRecord) else i + 1
    return None


def zk_reconcile_ops(state: ClusterState, image: MetadataImage, c: KRaftController, variant: Variant) -> list[Op]:
    """The writes that make ZooKeeper's projection equal the image's (KRaftMigrationZkWriter)."""
    ops: list[Op] = []
    d = c.driver
    for p, part in enumerate(image.partitions):
        path = partition_state_path(PartitionId(p))
        s: PartitionState | None = znode_data(state, path)
        if s is None or (s.leader, s.isr, s.leader_epoch) != (part.leader, part.isr, part.leader_epoch):
            # Differs: Kafka writes the Raft epoch as the partition's controller_epoch (reference §2.4); the
            # KIP treats the KRaft controller as a ZK controller, so the model writes the claimed ZK epoch.
            epoch = ControllerEpoch(c.epoch if variant.profile is Profile.KAFKA_3_9 else d.zk_epoch)
            ops.append(SetData(path, PartitionState(part.leader, part.leader_epoch, part.isr, epoch), ZkVersion(-1)))
    if image.config is not None and znode_data(state, CONFIG) != image.config and not variant.has(
        Bug.DUAL_WRITE_DROPS_CONFIG
    ):
        if zkm.get(state.zk, CONFIG) is None:
            ops.append(Create(CONFIG, image.config))
        else:
            ops.append(SetData(CONFIG, image.config, ZkVersion(-1)))
    if zkm.get(state.zk, pending_deletion_path(DELETED_TOPIC)) is not None and not variant.has(
        Bug.SYNC_SKIPS_TOPIC_DELETION
    ):
        ops.append(Delete(topic_path(DELETED_TOPIC)))
        ops.append(Delete(pending_deletion_path(DELETED_TOPIC)))
    return ops


def _kraft_zk_write(
    state: ClusterState, c: KRaftController, kind: str, ops: list[Op], offset: Offset, variant: Variant
) -> tuple[ClusterState, bool]:
    """One fenced multi: check /controller_epoch, the ops, CAS /migration to ``offset`` (reference §2.4).

    On success the driver learns /migration's new version and offset. A fencing failure means
    another controller claimed ZooKeeper: the driver goes INACTIVE until a leadership event.
    """
    d = c.driver
    assert d is not None
    fenced = not (variant.has(Bug.DUAL_WRITE_SKIPS_EPOCH_CHECK) and kind == "dual-write")
    head: list[Op] = [Check(CONTROLLER_EPOCH, ZkVersion(d.zk_epoch_version))] if fenced else []
    update = SetData(MIGRATION, MigrationZNode(c.id, d.kraft_epoch, offset), ZkVersion(d.migration_version))
    state = _record_attempt(state, c)
    zk, results = zkm.multi(state.zk, NO_SESSION, tuple(head + ops + [update]))
    state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
    if not zkm.succeeded(results):
        # Differs: Kafka's driver retries the event on its next poll; every retry fails the same way until a
        # KRaftLeaderEvent, so the model parks the driver in INACTIVE (a valid move from every state).
        c = _drive(c, D.INACTIVE, variant, zk_epoch=-1, zk_epoch_version=-2)
        return _put_ctrl(state, c), False
    state = _note_kraft_write(state, c, kind, offset)
    if state.history.crashed_controllers and offset >= len(state.history.committed):
        # ZooKeeper has caught up with everything committed: a crash before now has lost nothing.
        state = state.replace(history=state.history.replace(crashed_controllers=frozenset()))
    c = c.replace(driver=d.replace(migration_offset=offset, migration_version=zkm.get(zk, MIGRATION).version))
    return _put_ctrl(state, c), True


def _acting_epoch(c: KRaftController) -> KRaftEpoch:
    """The Raft epoch a controller's ZooKeeper writes speak for: the leadership its driver believes in."""
    return c.driver.kraft_epoch if c.driver is not None else c.epoch


def _record_attempt(state: ClusterState, c: KRaftController) -> ClusterState:
    return state.replace(ghost=state.ghost.replace(attempted_kraft_write=(c.id, _acting_epoch(c))))


def _note_kraft_write(state: ClusterState, c: KRaftController, kind: str, offset: int) -> ClusterState:
    d = c.driver
    write = KRaftWrite(
        c.id, _acting_epoch(c), kind, d.state if d is not None else None, offset, len(c.log),
        own_image(c).migration_state is ZkMigrationState.POST_MIGRATION,
    )
    return state.replace(ghost=state.ghost.replace(kraft_writes=state.ghost.kraft_writes + (write,)))


def _sync_kraft_to_zk(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """SyncKRaftMetadataEvent: write the whole committed image to ZooKeeper before any RPC."""
    c = ctrl(state, cid)
    d = _driver(c, D.SYNC_KRAFT_TO_ZK)
    if d is None or not _leading(c) or not state.zk.available:
        return None
    image = driver_image(c)
    if image.offset < d.migration_offset:
        return None
    state, ok = _kraft_zk_write(state, c, "sync", zk_reconcile_ops(state, image, c, variant), image.offset, variant)
    if not ok:
        return state
    return _put_ctrl(state, _drive(ctrl(state, cid), D.KRAFT_CONTROLLER_TO_BROKER_COMM, variant))


def zk_broker_targets(image: MetadataImage) -> list[tuple[BrokerId, BrokerEpoch]]:
    """ZK brokers the KRaft controller sends RPCs to: registered as migrating and not fenced (§Incompatible Brokers)."""
    return [(r.broker, r.epoch) for r in image.brokers if r.is_migrating_zk_broker and not r.fenced]


def served_brokers(image: MetadataImage, variant: Variant) -> tuple[BrokerId, ...]:
    """The brokers metadata responses list: the unfenced ones (KIP-500 §Fenced)."""
    if variant.has(Bug.SERVE_FENCED_BROKERS):
        return tuple(r.broker for r in image.brokers)
    return image.unfenced()


def _controller_rpcs(
    c: KRaftController, image: MetadataImage, partitions: list[int], full: bool, variant: Variant
) -> list[Message]:
    """UpdateMetadata, then LeaderAndIsr, to each target ZK broker, marked IsKRaftController."""
    d = c.driver
    leaders = tuple((p.leader, p.leader_epoch) for p in image.partitions)
    live = served_brokers(image, variant)
    out: list[Message] = []
    cid = BrokerId(c.id)
    epoch = ControllerEpoch(d.zk_epoch)
    for b, broker_epoch in zk_broker_targets(image):
        update = [UpdateMetadata(cid, epoch, broker_epoch, b, leaders, kraft=True, live=live)]
        if not (full or partitions):
            update = []
        leaderships = [
            LeaderAndIsr(cid, epoch, broker_epoch, b, PartitionId(p), image.partitions[p].leader,
                         image.partitions[p].leader_epoch, image.partitions[p].isr, kraft=True)
            for p in partitions
            if full or b in image.partitions[p].isr or b == image.partitions[p].leader
        ]
        # KIP-866 §ZK Broker RPCs: a broker learns of the KRaft controller (and of live brokers) from the
        # UpdateMetadata, so it must be queued first.
        out += leaderships + update if variant.has(Bug.LEADER_AND_ISR_BEFORE_UPDATE_METADATA) else update + leaderships
    return out


def _send_rpcs_to_brokers(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    c = ctrl(state, cid)
    d = _driver(c, D.KRAFT_CONTROLLER_TO_BROKER_COMM)
    if d is None or not _leading(c):
        return None
    image = driver_image(c)
    if image.offset < d.migration_offset or (
        variant.has(Bug.RPCS_WAIT_FOR_NEWER_OFFSET) and image.offset <= d.migration_offset
    ):
        return None
    rpcs = _controller_rpcs(c, image, list(range(len(image.partitions))), True, variant)
    state = send(state, rpcs)
    if state is None:
        return None
    sent = frozenset(b for b, _ in zk_broker_targets(image))
    return _put_ctrl(state, _drive(c, D.DUAL_WRITE, variant, umr_sent=sent))


def _dual_write(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """MetadataChangeEvent in DUAL_WRITE: the committed delta to ZooKeeper, then RPCs to ZK brokers."""
    c = ctrl(state, cid)
    d = _driver(c)
    allowed = (D.DUAL_WRITE, D.SYNC_KRAFT_TO_ZK) if variant.has(Bug.DUAL_WRITE_BEFORE_SYNC) else (D.DUAL_WRITE,)
    if d is None or d.state not in allowed or not _leading(c) or not state.zk.available:
        return None
    image = image_of(c.log) if variant.has(Bug.DUAL_WRITE_UNCOMMITTED) else driver_image(c)
    if image.offset <= d.migration_offset:
        return None
    before = image_of(c.log, d.migration_offset) if d.migration_offset > 0 else None
    ops = zk_reconcile_ops(state, image, c, variant)
    state, ok = _kraft_zk_write(state, c, "dual-write", ops, image.offset, variant)
    if not ok:
        return state
    c = ctrl(state, cid)
    changed = [
        p for p, part in enumerate(image.partitions)
        if before is None or p >= len(before.partitions) or before.partitions[p] != part
    ]
    if changed:
        rpcs = _controller_rpcs(c, image, changed, False, variant)
    elif before is None or before.brokers != image.brokers:
        rpcs = [m for m in _controller_rpcs(c, image, [], True, variant) if isinstance(m, UpdateMetadata)]
    else:
        rpcs = []
    return send(state, rpcs) if rpcs else state


# ---- brokers on KRaft ----------------------------------------------------------------------------

def decide_broker_registration(
    image: MetadataImage, c: KRaftController, b: Broker, variant: Variant
) -> tuple[Errors, RegisterBrokerRecord | None]:
    """ClusterControlManager.registerBroker's checks in Kafka's order (reference §3.1; KIP-866 §Broker Registration)."""
    is_zk = not b.config.kraft_mode
    existing = image.registration(b.id)
    if existing is not None and existing.incarnation != b.incarnation and not existing.fenced:
        # A live registration of another incarnation: KIP-866 "a KRaft broker with the id of an existing ZK broker".
        if not (variant.has(Bug.KRAFT_BROKER_TAKES_LIVE_ZK_ID) and not is_zk and existing.is_migrating_zk_broker):
            return Errors.DUPLICATE_BROKER_REGISTRATION, None
    if is_zk and not (c.config.migration_enabled and (image.metadata_version or 0) >= Ibp.IBP_3_4_IV0):
        return Errors.BROKER_ID_NOT_REGISTERED, None
    if not is_zk and image.migration_state is ZkMigrationState.PRE_MIGRATION:
        return Errors.BROKER_ID_NOT_REGISTERED, None
    if is_zk and b.config.ibp != image.metadata_version and not variant.has(Bug.ADMIT_ZK_BROKER_WITH_OTHER_IBP):
        # ZK brokers advertise metadata.version as [IBP, IBP].
        return Errors.UNSUPPORTED_VERSION, None
    if existing is not None and existing.incarnation == b.incarnation:
        return Errors.NONE, None  # the same incarnation keeps its epoch and state
    epoch = BrokerEpoch(b.incarnation if variant.has(Bug.BROKER_EPOCH_FROM_INCARNATION) else len(c.log))
    return Errors.NONE, RegisterBrokerRecord(b.id, b.incarnation, epoch, is_zk, b.config.ibp)


def _register_with_kraft(
    state: ClusterState, bid: BrokerId, cid: ControllerId, variant: Variant
) -> ClusterState | None:
    b, c = state.brokers[bid], ctrl(state, cid)
    if not b.alive or b.kraft_epoch != UNKNOWN_BROKER_EPOCH or not is_active(c):
        return None
    if not b.config.kraft_mode:
        cfg = b.config
        # KIP-866 §Migration Trigger 1-3: only a ZK broker with the flag, the controller configs and the bridge IBP.
        if not (cfg.migration_enabled and cfg.controller_configs and cfg.ibp >= Ibp.IBP_3_4_IV0) or not b.registered:
            return None
    image = own_image(c)
    error, rec = decide_broker_registration(image, c, b, variant)
    if error is not Errors.NONE:
        # Differs: KIP-866 §Broker Registration says a refused broker terminates; the model lets it retry
        # (it is refused the same way), so that restarting it again does not mint incarnations without bound.
        return None
    if rec is None:
        reg = image.registration(bid)
        return put_broker(state, b.replace(kraft_epoch=reg.epoch, lifecycle=_fenced_state(b)))
    if writes_blocked(state, c, variant):
        return None
    state = _append(state, c, [rec], variant)
    # Differs: Kafka answers once the record commits; the model answers at once (a truncated registration
    # shows up as STALE_BROKER_EPOCH on the next heartbeat and the broker registers again).
    return put_broker(state, b.replace(kraft_epoch=rec.epoch, lifecycle=_fenced_state(b)))


def _leaderships(image: MetadataImage, b: BrokerId) -> list[int]:
    return [p for p, part in enumerate(image.partitions) if part.leader == b]


def _move_leaders_off(image: MetadataImage, b: BrokerId, drop_from_isr: bool) -> list[MetadataRecord]:
    """Partition changes taking ``b`` out of leadership (and the ISR when it is fenced)."""
    unfenced = set(image.unfenced()) - {b}
    records: list[MetadataRecord] = []
    for p, part in enumerate(image.partitions):
        if part.leader != b and not (drop_from_isr and b in part.isr):
            continue
        isr = tuple(r for r in part.isr if r != b) if drop_from_isr or part.leader == b else part.isr
        if part.leader == b:
            candidates = [r for r in isr if r in unfenced]
            leader = candidates[0] if candidates else NO_LEADER
            if leader == NO_LEADER:
                isr = part.isr  # Kafka never empties the ISR: the last member is kept for a clean election
        else:
            leader = part.leader
        if (leader, isr) != (part.leader, part.isr):
            records.append(PartitionChangeRecord(p, leader, isr, LeaderEpoch(part.leader_epoch + 1)))
    return records


def _elect_leaderless(image: MetadataImage, b: BrokerId) -> list[MetadataRecord]:
    """On unfencing: leaderless partitions whose ISR holds ``b`` get it as leader."""
    return [
        PartitionChangeRecord(p, b, part.isr, LeaderEpoch(part.leader_epoch + 1))
        for p, part in enumerate(image.partitions)
        if part.leader == NO_LEADER and b in part.isr
    ]


def caught_up(b: Broker, reg_epoch: BrokerEpoch, variant: Variant) -> bool:
    """KIP-500 §Fenced: a broker leaves Fenced once it has the metadata up to its own registration."""
    if not b.config.kraft_mode:
        # Differs: ZK brokers do not replay the log; the model treats them as caught up (they take
        # UpdateMetadata from the controller instead).
        return True
    if variant.has(Bug.CAUGHT_UP_OFF_BY_ONE):
        return b.image.offset > reg_epoch + 1
    return b.image.offset > reg_epoch


def _heartbeat(state: ClusterState, bid: BrokerId, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """BrokerHeartbeatManager.calculateNextBrokerState and its records (reference §3.2, KIP-500 §Broker States)."""
    b, c = state.brokers[bid], ctrl(state, cid)
    if not b.alive or b.kraft_epoch == UNKNOWN_BROKER_EPOCH or not is_active(c):
        return None
    image = own_image(c)
    reg = image.registration(bid)
    if reg is None or reg.epoch != b.kraft_epoch:
        # STALE_BROKER_EPOCH: the broker registers again.
        return put_broker(state, b.replace(kraft_epoch=UNKNOWN_BROKER_EPOCH, lifecycle=_fenced_state(b)))
    leads = bool(_leaderships(image, bid))
    records: list[MetadataRecord] = []
    shutdown_now = False
    lifecycle = b.lifecycle
    if reg.fenced:
        if b.want_shutdown:
            shutdown_now = True
        elif caught_up(b, reg.epoch, variant) or variant.has(Bug.UNFENCE_BEFORE_CAUGHT_UP):
            records = [BrokerRegistrationChangeRecord(bid, reg.epoch, False)] + _elect_leaderless(image, bid)
            lifecycle = BrokerState.ONLINE if b.config.kraft_mode else b.lifecycle
    elif reg.in_controlled_shutdown or b.want_shutdown:
        if not leads:
            shutdown_now = True
            records = [BrokerRegistrationChangeRecord(bid, reg.epoch, True)] + _move_leaders_off(image, bid, True)
        elif not reg.in_controlled_shutdown:
            records = [BrokerRegistrationChangeRecord(bid, reg.epoch, None, True)]
            records += _move_leaders_off(image, bid, False)
    elif b.config.kraft_mode and not b.want_shutdown:
        lifecycle = BrokerState.ONLINE
    if records:
        if writes_blocked(state, c, variant, len(records)):
            return None
        state = _append(state, c, records, variant)
    if shutdown_now:
        return process_dies(state, state.brokers[bid])  # SHUTDOWN_NOW: the broker exits, Offline
    if not records and lifecycle == b.lifecycle:
        return None
    return put_broker(state, state.brokers[bid].replace(lifecycle=lifecycle))


def _fenced_state(b: Broker) -> BrokerState:
    return BrokerState.FENCED if b.config.kraft_mode else b.lifecycle


def _fetch_metadata(
    state: ClusterState, bid: BrokerId, cid: ControllerId, variant: Variant
) -> ClusterState | None:
    b, c = state.brokers[bid], ctrl(state, cid)
    if not b.alive or not b.config.kraft_mode or not c.alive or c.role is not QuorumRole.LEADER:
        return None
    if c.high_watermark <= b.image.offset:
        return None
    image = image_of(c.log, c.high_watermark)
    meta = 1 if image.migration_state is ZkMigrationState.POST_MIGRATION else b.meta_properties
    terms = state.history.leader_terms
    for p, part in enumerate(image.partitions):
        if part.leader == bid:
            # A KRaft broker's leadership belongs to its id (KIP-380's generations are a ZK-mode rule), so
            # the term is recorded without a broker or controller epoch: only one broker per leader epoch.
            terms = terms | {(PartitionId(p), part.leader_epoch, bid, UNKNOWN_BROKER_EPOCH, ControllerEpoch(-1))}
    if terms is not state.history.leader_terms:
        state = state.replace(history=state.history.replace(leader_terms=terms))
    served = served_brokers(image, variant)
    return put_broker(state, b.replace(image=image, meta_properties=meta, metadata_live=served))


def timeout_heals(state: ClusterState, bid: BrokerId, cid: ControllerId) -> bool:
    """Timing out the session of a broker process that is gone (or was replaced) is healing, not a fault."""
    b = state.brokers[bid]
    reg = own_image(ctrl(state, cid)).registration(bid)
    return reg is None or not (b.alive and b.incarnation == reg.incarnation and b.kraft_epoch == reg.epoch)


def _session_timeout(state: ClusterState, bid: BrokerId, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """maybeFenceOneStaleBroker: fence a registration whose heartbeats stopped."""
    b, c = state.brokers[bid], ctrl(state, cid)
    if not is_active(c):
        return None
    image = own_image(c)
    reg = image.registration(bid)
    if reg is None or reg.fenced:
        return None
    if image.migration_state is ZkMigrationState.PRE_MIGRATION and variant.profile is Profile.KAFKA_3_9:
        # Differs: since KAFKA-15441 Kafka does not fence stale brokers in pre-migration.
        return None
    alive_same = b.alive and b.incarnation == reg.incarnation and b.kraft_epoch == reg.epoch
    if alive_same:
        state = spend(state, timeouts=1)
        if state is None:
            return None
    records = [BrokerRegistrationChangeRecord(bid, reg.epoch, True)]
    if image.migration_state is not ZkMigrationState.PRE_MIGRATION:
        records += _move_leaders_off(image, bid, True)
    if writes_blocked(state, c, variant, len(records)):
        return None
    state = _append(state, c, records, variant)
    if alive_same and b.config.kraft_mode:
        state = put_broker(state, state.brokers[bid].replace(lifecycle=BrokerState.FENCED))
    return state


def _begin_controlled_shutdown(state: ClusterState, bid: BrokerId) -> ClusterState | None:
    b = state.brokers[bid]
    if not b.alive or not b.config.kraft_mode or b.want_shutdown or b.lifecycle is not BrokerState.ONLINE:
        return None
    state = spend(state, shutdowns=1)
    if state is None:
        return None
    return put_broker(state, b.replace(want_shutdown=True, lifecycle=BrokerState.STOPPING))


def _migrate_broker(state: ClusterState, bid: BrokerId) -> ClusterState | None:
    """KIP-866 §Broker Migration: a stopped ZK broker is configured as a KRaft broker; meta.properties stays v0."""
    b = state.brokers[bid]
    if b.alive or b.config.kraft_mode or not b.config.migration_enabled:
        return None
    state = spend(state, migrations=1)
    if state is None:
        return None
    return put_broker(state, b.replace(config=b.config.replace(kraft_mode=True)))


def _rollback_broker(state: ClusterState, bid: BrokerId) -> ClusterState | None:
    """KIP-866 §Rollback to ZK: back to ZK mode, possible only while meta.properties is still v0."""
    b = state.brokers[bid]
    if b.alive or not b.config.kraft_mode or b.meta_properties != 0:
        return None
    state = spend(state, migrations=1)
    if state is None:
        return None
    return put_broker(state, b.replace(config=b.config.replace(kraft_mode=False)))


def fresh_kraft_process(b: Broker) -> Broker:
    """What a (re)started process of a broker taking part in the migration begins with."""
    return b.replace(
        incarnation=Incarnation(b.incarnation + 1),
        kraft_epoch=UNKNOWN_BROKER_EPOCH,
        lifecycle=BrokerState.FENCED if b.config.kraft_mode else BrokerState.OFFLINE,
        image=MetadataImage(),
        metadata_live=(),
        want_shutdown=False,
    )


# ---- admin requests ------------------------------------------------------------------------------

def decide_write(image: MetadataImage, variant: Variant) -> Errors:
    """QuorumController: in pre-migration every write but registration and heartbeats is NOT_CONTROLLER (§6)."""
    if image.migration_state is ZkMigrationState.PRE_MIGRATION and not variant.has(Bug.PRE_MIGRATION_ACCEPTS_WRITES):
        return Errors.NOT_CONTROLLER
    return Errors.NONE


def _alter_configs(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    c = ctrl(state, cid)
    if not is_active(c) or writes_blocked(state, c, variant):
        return None
    state = spend(state, operator=1)
    if state is None:
        return None
    image = own_image(c)
    if decide_write(image, variant) is not Errors.NONE:
        return state
    return _append(state, c, [ConfigRecord((image.config or 0) + 1)], variant)


def decide_metadata_version(
    image: MetadataImage, level: Ibp, upgrade_type: UpgradeType, variant: Variant
) -> Errors:
    """FeatureControlManager.updateFeature for metadata.version, in Kafka's order (reference §5.1).

    Every refusal but pre-migration's is INVALID_UPDATE_VERSION (95). A migrating ZK broker
    advertises metadata.version as [IBP, IBP], so while one is registered the level cannot move.
    Every downgrade between the modelled levels changes metadata (transactions at 3.6-IV1,
    controller registrations at 3.7-IV0): unsafe ones are never done, safe ones are refused.
    """
    if decide_write(image, variant) is not Errors.NONE:
        return Errors.NOT_CONTROLLER
    if any(r.is_migrating_zk_broker and r.ibp != level for r in image.brokers):
        return Errors.INVALID_UPDATE_VERSION  # a registered broker does not support the level
    current = image.metadata_version
    if current is not None and level < current and upgrade_type is UpgradeType.UPGRADE:
        return Errors.INVALID_UPDATE_VERSION  # a downgrade needs a downgrade type
    if current is not None and level > current and upgrade_type is not UpgradeType.UPGRADE:
        return Errors.INVALID_UPDATE_VERSION  # "Can't downgrade to a newer version."
    if image.migration_state.in_progress and not variant.has(Bug.MV_CHANGE_DURING_MIGRATION):
        return Errors.INVALID_UPDATE_VERSION  # "Unable to modify metadata.version while a ZK migration is in progress."
    if current is not None and level < current:
        return Errors.INVALID_UPDATE_VERSION  # the downgrade would change metadata
    return Errors.NONE


def _update_metadata_version(
    state: ClusterState, cid: ControllerId, level: Ibp, upgrade_type: UpgradeType, variant: Variant
) -> ClusterState | None:
    c = ctrl(state, cid)
    if not is_active(c) or writes_blocked(state, c, variant):
        return None
    state = spend(state, operator=1)
    if state is None:
        return None
    image = own_image(c)
    refused = decide_metadata_version(image, level, upgrade_type, variant) is not Errors.NONE
    if refused or level == image.metadata_version:
        return state  # refused, or already at that level (nothing to write)
    return _append(state, c, [FeatureLevelRecord(METADATA_VERSION, level)], variant)


def _delete_controller_znodes(state: ClusterState, variant: Variant) -> ClusterState | None:
    """KIP-866 §Rollback to ZK, last step, once the quorum is down."""
    if _kraft_controller_znode(state) is None or any(c.alive for c in state.controllers) or not state.zk.available:
        return None
    state = spend(state, migrations=1)
    if state is None:
        return None
    ops: list[Op] = [Delete(CONTROLLER)]
    if variant.profile is Profile.KIP:
        ops.append(Delete(CONTROLLER_EPOCH))
    elif zkm.get(state.zk, MIGRATION) is not None:
        # Differs: Kafka's documented rollback removes /controller and /migration and keeps /controller_epoch.
        ops.append(Delete(MIGRATION))
    zk, results = zkm.multi(state.zk, NO_SESSION, tuple(ops))
    # What KRaft had committed when it handed ZooKeeper back: what the next ZK controller must find.
    history = state.history.replace(handed_back=len(state.history.committed))
    return state.replace(zk=zk, history=history, ghost=state.ghost.replace(last_multi=results))
