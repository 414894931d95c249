"""The KRaft quorum and what its active controller decides: Raft, brokers on KRaft, admin writes.

How it works (``model.step.step`` dispatches here a ``KRaftQuorumAction``; ``handle`` matches on it
and ends in ``assert_never``):
- Quorum handlers (``_start_election`` ... ``_fetch``) move Raft state; every append goes
  through ``append``, which advances the leader's high watermark and extends
  ``history.committed`` (what the checks compare every later log with).
- The active controller decides requests (``decide_*``: request -> error or records) and appends
  the records; what any node knows is ``image_of`` a log prefix (``model.kraft``). Deciding
  reads the controller's own log, committed or not, as QuorumController does with its
  timeline; the migration driver and brokers read committed prefixes only.
- Activation (``_activate``) bootstraps an empty log or checks the migration state it finds
  (KIP-866 §Misconfigurations), and the active controller refuses metadata writes that would
  take ZooKeeper's write-behind lag past its bound (``writes_blocked``): both are the
  controller's rules during a migration, so they live here, and ``model.kraft_migration`` builds
  on this module (never the other way round).
- Handlers return None when the action is not enabled or would change nothing.

Seeds: KIP-500 §Controller Quorum, §Broker States; KIP-866 (sections cited at each rule).
"""

from __future__ import annotations

from typing import assert_never

from model.actions import (
    AlterConfigs,
    BecomeLeader,
    BeginControlledShutdown,
    BrokerHeartbeat,
    CrashController,
    Fetch,
    FetchMetadata,
    KRaftQuorumAction,
    RegisterWithKRaft,
    RequestVote,
    RestartController,
    SessionTimeout,
    ShutdownController,
    StartElection,
    UpdateMetadataVersion,
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
    PartitionChangeRecord,
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
from model.migration import MIGRATION, Driver, Profile
from model.state import Broker, ClusterState, KRaftController, controller_index, znode_data
from model.transitions import process_dies, put_broker, spend
from model.types import (
    NO_LEADER,
    UNKNOWN_BROKER_EPOCH,
    BrokerEpoch,
    BrokerId,
    ControllerEpoch,
    Errors,
    Ibp,
    LeaderEpoch,
    PartitionId,
    metadata_changed_between,
)


def handle(state: ClusterState, action: KRaftQuorumAction, variant: Variant) -> ClusterState | None:
    """The state after a KRaft quorum or broker action, or None when it is not enabled."""
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
        case AlterConfigs(controller=c):
            return _alter_configs(state, c, variant)
        case UpdateMetadataVersion(controller=c, level=level, upgrade_type=upgrade_type):
            return _update_metadata_version(state, c, level, upgrade_type, variant)
        case _:
            assert_never(action)


# ---- helpers ------------------------------------------------------------------------------------

def ctrl(state: ClusterState, c: ControllerId) -> KRaftController:
    return state.controllers[controller_index(c)]


def put_ctrl(state: ClusterState, c: KRaftController) -> ClusterState:
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


def append(state: ClusterState, c: KRaftController, records: list[MetadataRecord], variant: Variant) -> ClusterState:
    """The leader appends ``records`` in its epoch; with a quorum of one they commit at once."""
    log = c.log + tuple(LogEntry(c.epoch, r) for r in records)
    fetched = list(c.fetched)
    fetched[controller_index(c.id)] = len(log)
    c = c.replace(log=log, fetched=tuple(fetched))
    c = c.replace(high_watermark=_leader_hw(c, variant))
    return _note_commits(put_ctrl(state, c))


def _leader_hw(c: KRaftController, variant: Variant) -> int:
    if variant.has(Bug.COMMIT_WITHOUT_MAJORITY):
        return len(c.log)
    return advance_high_watermark(c.log, c.epoch, c.fetched, c.high_watermark)


# ---- the write-behind bound (KIP-866 §Unavailable ZooKeeper) ------------------------------------

def migration_end(c: KRaftController) -> int | None:
    """The log end just after this leadership's migration records, if they were appended."""
    for i, e in enumerate(c.log):
        if isinstance(e.record, ZkMigrationStateRecord) and e.record.state is ZkMigrationState.MIGRATION:
            following = c.log[i + 1] if i + 1 < len(c.log) else None
            return i + 2 if following is not None and isinstance(following.record, EndTransactionRecord) else i + 1
    return None


def _metadata_lag(c: KRaftController) -> int:
    """Metadata records in the controller's log that ZooKeeper may not have.

    ZooKeeper has at least what its driver last read or wrote in /migration, and at least the
    initial migration (ZooKeeper was its source), whichever is further.
    """
    known = migration_end(c) or 0
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


# ---- the quorum ---------------------------------------------------------------------------------

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
        spent = spend(state, kraft_elections=1)
        if spent is None:
            return None
        state = spent
    c = c.replace(
        epoch=KRaftEpoch(c.epoch + 1),
        voted_for=c.id,
        role=QuorumRole.CANDIDATE,
        leader=None,
        votes=frozenset({c.id}),
        active=False,
    )
    return put_ctrl(state, c)


def _request_vote(state: ClusterState, cid: ControllerId, vid: ControllerId, variant: Variant) -> ClusterState | None:
    """One Vote round trip (KafkaRaftClient.handleVoteRequest / handleVoteResponse)."""
    cand, voter = ctrl(state, cid), ctrl(state, vid)
    if cid == vid or not cand.alive or not voter.alive or cand.role is not QuorumRole.CANDIDATE:
        return None
    if vid in cand.votes:
        return None
    if voter.epoch > cand.epoch:  # the response tells the candidate of a newer epoch
        return put_ctrl(state, _step_down(cand, voter.epoch, voter.leader))
    if voter.epoch < cand.epoch:
        voter = _step_down(voter, cand.epoch)
    may_vote = voter.voted_for in (None, cid) or variant.has(Bug.VOTE_TWICE_IN_EPOCH)
    fresh = log_up_to_date(cand.log, voter.log) or variant.has(Bug.VOTE_IGNORES_LOG)
    if may_vote and fresh and voter.role in (QuorumRole.UNATTACHED, QuorumRole.VOTED):
        voter = voter.replace(voted_for=cid, role=QuorumRole.VOTED)
        cand = cand.replace(votes=cand.votes | {vid})
    if voter == ctrl(state, vid) and cand == ctrl(state, cid):
        return None  # refused, and nobody learned anything
    return put_ctrl(put_ctrl(state, voter), cand)


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
    state = append(state, c, [LeaderChangeMessage(c.id)], variant)
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
            return put_ctrl(state, _resign(c))
        records += bootstrap_records(mv, flag, variant)
    else:
        current = image.migration_state
        if current in (ZkMigrationState.PRE_MIGRATION, ZkMigrationState.MIGRATION) and not flag:
            if current is ZkMigrationState.MIGRATION and _may_finalize(state, variant):
                records.append(ZkMigrationStateRecord(ZkMigrationState.POST_MIGRATION))
            else:
                # KIP-866 §Misconfigurations: a migration is in progress and this controller lacks the flag.
                return put_ctrl(state, _resign(c))
        elif current is ZkMigrationState.NONE and flag and image.migration is not None:
            if variant.profile is Profile.KAFKA_3_9:
                # Differs: Kafka 3.9 throws at activation; the KIP only says such a cluster never migrates.
                return put_ctrl(state, _resign(c))
    c = c.replace(active=True)
    if records:
        return append(state, c, records, variant)
    return put_ctrl(state, c)


BOOTSTRAP_TRANSACTION = "Bootstrap records"


def bootstrap_records(mv: Ibp, flag: bool, variant: Variant) -> list[MetadataRecord]:
    """What activation appends to an empty log (ActivationRecordsGenerator.recordsForEmptyLog): the
    bootstrap metadata.version and the migration state, PRE_MIGRATION with the migration flag."""
    records: list[MetadataRecord] = [
        FeatureLevelRecord(METADATA_VERSION, mv),
        ZkMigrationStateRecord(ZkMigrationState.PRE_MIGRATION if flag else ZkMigrationState.NONE),
    ]
    if variant.profile is Profile.KAFKA_3_9 and mv >= Ibp.IBP_3_6_IV1:
        # Differs: from 3.6-IV1 Kafka 3.9 writes the bootstrap records in a metadata transaction (KIP-868).
        return [BeginTransactionRecord(BOOTSTRAP_TRANSACTION), *records, EndTransactionRecord()]
    return records


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
        return put_ctrl(state, _step_down(leader, f.epoch, f.leader))
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
    state = _note_commits(put_ctrl(put_ctrl(state, f), leader))
    return _activate_once_committed(state, lid, variant)


def _crash_controller(state: ClusterState, cid: ControllerId) -> ClusterState | None:
    c = ctrl(state, cid)
    if not c.alive:
        return None
    spent = spend(state, controller_crashes=1)
    if spent is None:
        return None
    state = spent
    crashed = state.history.crashed_controllers | {cid}
    state = state.replace(history=state.history.replace(crashed_controllers=crashed))
    return put_ctrl(state, _process_stops(c))


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
    spent = spend(state, migrations=1)
    return None if spent is None else put_ctrl(spent, _process_stops(c))


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
    return put_ctrl(state, c.replace(alive=True, epoch=epoch, role=role, driver=driver))


# ---- brokers on KRaft ---------------------------------------------------------------------------

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
    if rec is None:  # NONE without a record: this incarnation's registration stands, epoch and all
        reg = image.registration(bid)
        assert reg is not None
        return put_broker(state, b.replace(kraft_epoch=reg.epoch, lifecycle=_fenced_state(b)))
    if writes_blocked(state, c, variant):
        return None
    state = append(state, c, [rec], variant)
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
        state = append(state, c, records, variant)
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


def served_brokers(image: MetadataImage, variant: Variant) -> tuple[BrokerId, ...]:
    """The brokers metadata responses list: the unfenced ones (KIP-500 §Fenced)."""
    if variant.has(Bug.SERVE_FENCED_BROKERS):
        return tuple(r.broker for r in image.brokers)
    return image.unfenced()


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
        spent = spend(state, timeouts=1)
        if spent is None:
            return None
        state = spent
    records: list[MetadataRecord] = [BrokerRegistrationChangeRecord(bid, reg.epoch, True)]
    if image.migration_state is not ZkMigrationState.PRE_MIGRATION:
        records += _move_leaders_off(image, bid, True)
    if writes_blocked(state, c, variant, len(records)):
        return None
    state = append(state, c, records, variant)
    if alive_same and b.config.kraft_mode:
        state = put_broker(state, state.brokers[bid].replace(lifecycle=BrokerState.FENCED))
    return state


def _begin_controlled_shutdown(state: ClusterState, bid: BrokerId) -> ClusterState | None:
    b = state.brokers[bid]
    if not b.alive or not b.config.kraft_mode or b.want_shutdown or b.lifecycle is not BrokerState.ONLINE:
        return None
    spent = spend(state, shutdowns=1)
    return None if spent is None else put_broker(spent, b.replace(want_shutdown=True, lifecycle=BrokerState.STOPPING))


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


# ---- admin requests -----------------------------------------------------------------------------

def decide_write(image: MetadataImage, variant: Variant) -> Errors:
    """QuorumController: in pre-migration every write but registration and heartbeats is NOT_CONTROLLER (§6)."""
    if image.migration_state is ZkMigrationState.PRE_MIGRATION and not variant.has(Bug.PRE_MIGRATION_ACCEPTS_WRITES):
        return Errors.NOT_CONTROLLER
    return Errors.NONE


def _admin_request(
    state: ClusterState, cid: ControllerId, variant: Variant
) -> tuple[ClusterState, KRaftController, MetadataImage] | None:
    """An operator's admin request reaching the active controller: the state with the request spent,
    the controller and the image it decides from; None when no active controller may write now."""
    c = ctrl(state, cid)
    if not is_active(c) or writes_blocked(state, c, variant):
        return None
    spent = spend(state, operator=1)
    if spent is None:
        return None
    return spent, c, own_image(c)


def _alter_configs(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    request = _admin_request(state, cid, variant)
    if request is None:
        return None
    state, c, image = request
    if decide_write(image, variant) is not Errors.NONE:
        return state
    return append(state, c, [ConfigRecord((image.config or 0) + 1)], variant)


def decide_metadata_version(
    image: MetadataImage, level: Ibp, upgrade_type: UpgradeType, variant: Variant
) -> Errors:
    """FeatureControlManager.updateFeature for metadata.version, in Kafka's order (reference §5.1).

    Every refusal but pre-migration's is INVALID_UPDATE_VERSION (95). A migrating ZK broker
    advertises metadata.version as [IBP, IBP], so while one is registered the level cannot move.
    A downgrade across a level that changed metadata is refused, safe or unsafe ("Unsafe metadata
    downgrade is not supported in this version"); one that crosses none (3.9-IV0 to 3.8-IV0) is
    done, whichever type it asks for.
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
    if current is not None and level < current and metadata_changed_between(level, current):
        return Errors.INVALID_UPDATE_VERSION  # the downgrade might delete metadata
    return Errors.NONE


def _update_metadata_version(
    state: ClusterState, cid: ControllerId, level: Ibp, upgrade_type: UpgradeType, variant: Variant
) -> ClusterState | None:
    request = _admin_request(state, cid, variant)
    if request is None:
        return None
    state, c, image = request
    refused = decide_metadata_version(image, level, upgrade_type, variant) is not Errors.NONE
    if refused or level == image.metadata_version:
        return state  # refused, or already at that level (nothing to write)
    return append(state, c, [FeatureLevelRecord(METADATA_VERSION, level)], variant)
