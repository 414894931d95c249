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
  (KIP-866 §Misconfigurations), and under ``kip`` the active controller refuses metadata writes that
  would take ZooKeeper's write-behind lag past its bound (``writes_blocked``; ``kafka-3.9`` has none,
  as Kafka sets none): both are the
  controller's rules during a migration, so they live here, and ``model.kraft_migration`` builds
  on this module (never the other way round).
- Handlers return the next state, or a ``Refused`` (not enabled, or a request answered with an
  error: why, and Kafka's code) or an ``Unchanged`` (nothing to change), ``model.outcome``.
- A broker's request to the controller is one exchange: the broker's side builds the request
  (``BrokerRegistrationRequest``, ``BrokerHeartbeatRequest``), the controller's side decides and
  appends (``handle_registration``, ``handle_heartbeat``), and the broker's side takes the answer.
  A script's injected request (``model.harness``) meets the same controller's side. A response lost
  after its request took effect (``_response_lost``) is the controller's side alone; the broker,
  unchanged, sends the same request again later. A heartbeat the network holds (``_hold_heartbeat``)
  is the broker's side alone, its request put in ``ClusterState.held``; delivered later
  (``_deliver_heartbeat``), it meets the controller's side with the broker epoch it was built with,
  and its answer is dropped.

Seeds: KIP-500 §Controller Quorum, §Broker States; KIP-866 (sections cited at each rule).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import assert_never

from model.actions import (
    AlterConfigs,
    AlterPartition,
    AlterPartitionReassignments,
    BecomeLeader,
    BeginControlledShutdown,
    BrokerHeartbeat,
    CrashController,
    CreatePartitions,
    DeleteTopics,
    DeliverHeartbeat,
    Fetch,
    FetchMetadata,
    HeartbeatResponseLost,
    HoldHeartbeat,
    KRaftQuorumAction,
    RegisterController,
    RegisterWithKRaft,
    RegistrationResponseLost,
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
    TOPIC_NAME,
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    BrokerRegistrationImage,
    BrokerState,
    ConfigRecord,
    ControllerConfig,
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
    PartitionImage,
    PartitionRecord,
    QuorumRole,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveTopicRecord,
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
from model.outcome import BUDGET_SPENT, Refused, Result, Unchanged
from model.state import (
    TOPIC,
    Broker,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ClusterState,
    ControllerRegistrationRequest,
    HeartbeatAnswer,
    KRaftController,
    PendingAnswer,
    controller_index,
    seen_by,
    znode_data,
)
from model.transitions import process_dies, put_broker, spend, spend_checked
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
    ReplicaRole,
    metadata_changed_between,
)

# Refusals without arguments, built once (model.outcome).
_NOT_RUNNING = Refused(None, "the controller is not running")
_LEADS = Refused(None, "the controller leads")
_BROKER_NOT_RUNNING = Refused(None, "the broker is not running")
_NOT_ACTIVE = Refused(Errors.NOT_CONTROLLER, "the controller is not the active controller")
_LAG_BOUND = Refused(None, "the write would take ZooKeeper's write-behind lag past its bound (KIP-866 §Unavailable "
                           "ZooKeeper)")
_NOT_CANDIDATE = Refused(None, "the controller is not a candidate")
_ITSELF = Refused(None, "a controller does not send itself a request")
_VOTER_NOT_RUNNING = Refused(None, "the voter is not running")
_VOTE_COUNTED = Unchanged("the voter's vote is counted")
_LOG_BEHIND = Refused(None, "vote not granted: the candidate's log is behind the voter's")
_NO_MAJORITY = Refused(None, "the candidate has no majority of the votes")
_LEADER_NOT_RUNNING = Refused(None, "the leader is not running")
_NOTHING_TO_FETCH = Unchanged("nothing to fetch")
_RUNNING = Refused(None, "the controller is running")
_ROLLED_BACK = Refused(None, "the quorum was rolled back: its znodes are gone (KIP-866 §Rollback to ZK)")
_REGISTERED = Refused(None, "the broker is registered with KRaft")
_NOT_MIGRATING = Refused(None, "the ZK broker lacks the migration flag, the controller configs or IBP 3.4-IV0")
_NOT_IN_ZK = Refused(None, "the ZK broker has not registered in ZooKeeper")
_UNREGISTERED = Refused(None, "the broker has not registered with KRaft")
_AWAITING_ANSWER = Refused(None, "the broker's registration waits for its answer (the record to commit)")
_AWAITING_HEARTBEAT = Refused(None, "the broker's heartbeat waits for its answer (the log up to it to commit)")
_ZK_BROKER_REPLAYS_NOTHING = Refused(None, "a ZK broker does not replay the metadata log")
_NOTHING_NEW = Unchanged("nothing new is committed")
_INACTIVE = Refused(None, "the controller is not the active controller")
_NO_REGISTRATION = Refused(None, "the broker has no registration")
_FENCED = Refused(None, "the broker is fenced")
_NO_FENCING_IN_PRE_MIGRATION = Refused(None, "Kafka fences no stale broker in pre-migration (KAFKA-15441)")
_ZK_BROKER_SHUTDOWN = Refused(None, "a ZK broker shuts down by ControlledShutdown, not by heartbeats")
_SHUTTING_DOWN = Refused(None, "the broker is shutting down")
_NOT_ONLINE = Refused(None, "the broker is not Online")


def handle(state: ClusterState, action: KRaftQuorumAction, variant: Variant) -> Result:
    """The state after a KRaft quorum or broker action, or why it is refused or changes nothing (``model.outcome``)."""
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
        case RegisterController(controller=c, leader=leader):
            return _register_controller(state, c, leader, variant)
        case BrokerHeartbeat(broker=b, controller=c):
            return _heartbeat(state, b, c, variant)
        case RegistrationResponseLost(broker=b, controller=c):
            return _response_lost(state, b, c, variant, registration=True)
        case HeartbeatResponseLost(broker=b, controller=c):
            return _response_lost(state, b, c, variant, registration=False)
        case HoldHeartbeat(broker=b, controller=c):
            return _hold_heartbeat(state, b, c)
        case DeliverHeartbeat(request=request):
            return _deliver_heartbeat(state, request, variant)
        case FetchMetadata(broker=b, controller=c):
            return _fetch_metadata(state, b, c, variant)
        case SessionTimeout(broker=b, controller=c, fence=fence):
            return _session_timeout(state, b, c, variant) if fence else _session_lapses(state, b, c)
        case BeginControlledShutdown(broker=b):
            return _begin_controlled_shutdown(state, b)
        case AlterConfigs(controller=c):
            return _alter_configs(state, c, variant)
        case UpdateMetadataVersion(controller=c, level=level, upgrade_type=upgrade_type):
            return _update_metadata_version(state, c, level, upgrade_type, variant)
        case CreatePartitions(controller=c, replicas=replicas):
            return _create_partitions(state, c, replicas, variant)
        case AlterPartitionReassignments(controller=c, partition=p, replicas=replicas):
            return _alter_partition_reassignments(state, c, p, replicas, variant)
        case AlterPartition(broker=b, controller=c, partition=p, replica=r):
            return _alter_partition(state, b, c, p, r, variant)
        case DeleteTopics(controller=c):
            return _delete_topics(state, c, variant)
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
    if c.stale_fencing:  # replaying a broker's registration or its change registers it with the manager afresh
        c = c.replace(stale_fencing=c.stale_fencing - {r.broker for r in records if isinstance(
            r, (RegisterBrokerRecord, BrokerRegistrationChangeRecord))})
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
    if variant.profile is Profile.KAFKA_3_9:
        # Differs: Kafka 3.9 sets no bound: it only reports the lag (the ZkWriteBehindLag metric), and a stalled
        # ZooKeeper let a real 3.9.2 run's log pass ZooKeeper by 270 records (docs/guide/real-kafka.md).
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
        lapsed=frozenset(),
        stale_fencing=frozenset(),
    )


def election_heals(state: ClusterState, cid: ControllerId) -> bool:
    """Controller ``cid``'s election timeout repairs a quorum with no live leader and no live candidate that can
    still win; it costs no budget.

    Any other election (one that disrupts a leader, splits a vote, or follows a controller that
    resigned for its configuration) is a perturbation. One free candidate at a time keeps the
    epochs finite, as randomised timeouts do in practice. Where every live candidate has lost (too few voters may
    still grant it: their logs are ahead, or they voted for another in its epoch), a voter whose log every voter's
    vote rule accepts stands for free, as its own election timeout would have it in Raft: it wins the next epoch.
    Without that, a quorum whose one election was refused by a longer log would have no leader for good.
    """
    live = [o for o in state.controllers if o.alive]
    if any(o.role in (QuorumRole.LEADER, QuorumRole.RESIGNED) for o in live):
        return False
    candidates = [o for o in live if o.role is QuorumRole.CANDIDATE]
    if not candidates:
        return True
    me = ctrl(state, cid)
    return all(_lost_election(state, o) for o in candidates) and all(
        log_up_to_date(me.log, o.log) for o in state.controllers)


def _lost_election(state: ClusterState, cand: KRaftController) -> bool:
    """Candidate ``cand`` can no longer gather a majority in its epoch: too few voters have granted it or may still
    (``_request_vote``'s rule; a voter that is down counts as it will be when it restarts). One in a newer epoch
    has not lost: asking it, the candidate steps down."""
    may_grant = 0
    for v in state.controllers:
        if v.id in cand.votes:
            may_grant += 1
        elif v.epoch > cand.epoch:
            return False
        elif (v.epoch < cand.epoch or (v.voted_for in (None, cand.id)
                                       and v.role in (QuorumRole.UNATTACHED, QuorumRole.VOTED))) \
                and log_up_to_date(cand.log, v.log):
            may_grant += 1
    return may_grant < majority(voters(state))


def _start_election(state: ClusterState, cid: ControllerId) -> Result:
    c = ctrl(state, cid)
    if not c.alive:
        return _NOT_RUNNING
    if c.role is QuorumRole.LEADER:
        return _LEADS
    if not election_heals(state, cid):
        spent = spend(state, kraft_elections=1)
        if spent is None:
            return BUDGET_SPENT
        state = spent
    c = c.replace(
        epoch=KRaftEpoch(c.epoch + 1),
        voted_for=c.id,
        role=QuorumRole.CANDIDATE,
        leader=None,
        votes=frozenset({c.id}),
        active=False,
        lapsed=frozenset(),
        stale_fencing=frozenset(),
    )
    return put_ctrl(state, c)


def _request_vote(state: ClusterState, cid: ControllerId, vid: ControllerId, variant: Variant) -> Result:
    """One Vote round trip (KafkaRaftClient.handleVoteRequest / handleVoteResponse)."""
    cand, voter = ctrl(state, cid), ctrl(state, vid)
    if cid == vid:
        return _ITSELF
    if not cand.alive:
        return _NOT_RUNNING
    if not voter.alive:
        return _VOTER_NOT_RUNNING
    if cand.role is not QuorumRole.CANDIDATE:
        return _NOT_CANDIDATE
    if vid in cand.votes:
        return _VOTE_COUNTED
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
        # Refused, and nobody learned anything: the response's VoteGranted is false (no error code).
        if not may_vote:
            return Refused(None, "vote not granted: the voter voted for {} in epoch {}", (voter.voted_for, voter.epoch))
        if not fresh:
            return _LOG_BEHIND
        return Refused(None, "vote not granted: the voter is {} in epoch {}", (voter.role.name, voter.epoch))
    return put_ctrl(put_ctrl(state, voter), cand)


def _become_leader(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    c = ctrl(state, cid)
    if not c.alive:
        return _NOT_RUNNING
    if c.role is not QuorumRole.CANDIDATE:
        return _NOT_CANDIDATE
    if len(c.votes) < majority(voters(state)):
        return _NO_MAJORITY
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
    """QuorumController's activation (reference §1.1): the records ``decide_activation`` gives are appended,
    or the controller resigns when it refuses.

    The log is the committed one (its last entry is the leader's committed LeaderChange), unless a
    seeded bug activates earlier.
    """
    decided = decide_activation(image_of(c.log), c.config, variant, lambda: _may_finalize(state, variant))
    if isinstance(decided, Refused):
        return put_ctrl(state, _resign(c))
    c = c.replace(active=True)
    if not decided:
        return put_ctrl(state, c)
    replayed = own_image(c)  # what activate() filled BrokerHeartbeatManager from
    state = append(state, c, decided, variant)
    if any(isinstance(r, AbortTransactionRecord) for r in decided) and (
            variant.profile is Profile.KAFKA_3_9 or variant.has(Bug.HEARTBEAT_MANAGER_SURVIVES_ABORT)):
        # Differs: a failover's abort undoes all the transaction did (KIP-866 §Initial Data Migration); Kafka 3.6 to
        # 3.9's BrokerHeartbeatManager keeps the fencing it read before the abort, so a broker whose unfencing was
        # aborted counts as unfenced and no heartbeat unfences it again (docs/guide/real-kafka.md, Findings).
        c = ctrl(state, c.id)
        reverted = own_image(c)
        stale = frozenset(was.broker for was in replayed.brokers
                          if (now := reverted.registration(was.broker)) is not None and now.fenced != was.fenced)
        state = put_ctrl(state, c.replace(stale_fencing=stale))
    return state


def decide_activation(
    image: MetadataImage, config: ControllerConfig, variant: Variant, may_finalize: Callable[[], bool]
) -> Refused | list[MetadataRecord]:
    """ActivationRecordsGenerator.generate: what a new active controller appends to the log it found (the
    bootstrap records of an empty log; an abort of an unfinished transaction; POST_MIGRATION when a migration
    is finalized), or why it cannot activate on it (it resigns). ``may_finalize``: whether a controller
    without the flag may finalize now (asked only then)."""
    flag = config.migration_enabled
    records: list[MetadataRecord] = []
    if image.open_transaction is not None and not variant.has(Bug.NO_ABORT_ON_FAILOVER):
        # KIP-866 §Initial Data Migration: the next active controller aborts the unfinished migration.
        records.append(AbortTransactionRecord())
    mv = config.metadata_version
    if image.metadata_version is None:  # an empty log: bootstrap
        if flag and variant.profile is Profile.KAFKA_3_9 and mv < Ibp.IBP_3_6_IV1:
            # Differs: Kafka 3.9 refuses to start a migration below 3.6-IV1 (metadata transactions).
            return Refused(None, "The bootstrap metadata.version {} does not support ZK migrations. Cannot continue "
                                 "with ZK migrations enabled.", (mv.name,))
        return records + bootstrap_records(mv, flag, variant)
    current = image.migration_state
    if current in (ZkMigrationState.PRE_MIGRATION, ZkMigrationState.MIGRATION) and not flag:
        if current is ZkMigrationState.MIGRATION and may_finalize():
            return records + [ZkMigrationStateRecord(ZkMigrationState.POST_MIGRATION)]
        # KIP-866 §Misconfigurations: a migration is in progress and this controller lacks the flag.
        return Refused(None, "the migration is in {} and zookeeper.metadata.migration.enable is false "
                             "(KIP-866 §Misconfigurations)", (current.name,))
    if current is ZkMigrationState.NONE and flag and variant.profile is Profile.KAFKA_3_9:
        # A log with no ZkMigrationStateRecord is NONE to Kafka too (recordsForNonEmptyLog).
        # Differs: Kafka 3.9 throws at activation; the KIP only says such a cluster never migrates.
        if image.metadata_version is not None and image.metadata_version < Ibp.IBP_3_4_IV0:
            return Refused(None, "Should not have ZK migrations enabled on a cluster running metadata.version {}",
                           (image.metadata_version.name,))
        return Refused(None, "Should not have ZK migrations enabled on a cluster that was created in KRaft mode.")
    return records


BOOTSTRAP_TRANSACTION = "Bootstrap records"


def bootstrap_records(mv: Ibp, flag: bool, variant: Variant) -> list[MetadataRecord]:
    """What activation appends to an empty log (ActivationRecordsGenerator.recordsForEmptyLog): the
    bootstrap metadata.version and the migration state, PRE_MIGRATION with the migration flag."""
    records: list[MetadataRecord] = [FeatureLevelRecord(METADATA_VERSION, mv)]
    if variant.profile is Profile.KAFKA_3_9 and mv < Ibp.IBP_3_6_IV1 and not flag:
        # Differs: below 3.6-IV1 Kafka 3.9 writes no ZkMigrationStateRecord for a KRaft-born log (NONE is
        # implied; 3.5 to 3.8 wrote one from 3.4-IV0, 3.4 none at all); kip's bootstrap writes NONE.
        return records
    records.append(ZkMigrationStateRecord(ZkMigrationState.PRE_MIGRATION if flag else ZkMigrationState.NONE))
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
    return c.replace(role=QuorumRole.RESIGNED, active=False, fetched=(), lapsed=frozenset(), stale_fencing=frozenset())


def _fetch(state: ClusterState, fid: ControllerId, lid: ControllerId, variant: Variant) -> Result:
    """One Fetch round trip: the epoch check, truncation on divergence, replication, the HW."""
    f, leader = ctrl(state, fid), ctrl(state, lid)
    if fid == lid:
        return _ITSELF
    if not f.alive:
        return _NOT_RUNNING
    if not leader.alive:
        return _LEADER_NOT_RUNNING
    if leader.role is not QuorumRole.LEADER:
        return Refused(Errors.NOT_LEADER_OR_FOLLOWER, "controller {} does not lead", (lid,))
    if f.epoch > leader.epoch:  # the deposed leader learns of the newer epoch from the response
        return put_ctrl(state, _step_down(leader, f.epoch, f.leader))
    if f.role is QuorumRole.LEADER and f.epoch == leader.epoch:
        return Refused(None, "both controllers lead epoch {}", (f.epoch,))
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
        return _NOTHING_TO_FETCH
    state = _note_commits(put_ctrl(put_ctrl(state, f), leader))
    return _activate_once_committed(state, lid, variant)


def _crash_controller(state: ClusterState, cid: ControllerId) -> Result:
    c = ctrl(state, cid)
    if not c.alive:
        return _NOT_RUNNING
    spent = spend(state, controller_crashes=1)
    if spent is None:
        return BUDGET_SPENT
    state = spent
    crashed = state.history.crashed_controllers | {cid}
    state = state.replace(history=state.history.replace(crashed_controllers=crashed))
    return put_ctrl(state, _process_stops(c))


def _process_stops(c: KRaftController) -> KRaftController:
    """Only the persisted epoch, vote and log survive the process."""
    return c.replace(
        alive=False, role=QuorumRole.UNATTACHED, leader=None, votes=frozenset(), high_watermark=0,
        fetched=(), active=False, driver=None, lapsed=frozenset(), stale_fencing=frozenset(),
    )


def _shutdown_controller(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    """A clean stop. KIP-866 §Rollback to ZK: the leader stops only once ZooKeeper has every committed record."""
    c = ctrl(state, cid)
    if not c.alive:
        return _NOT_RUNNING
    if is_active(c) and c.driver is not None and not variant.has(Bug.SHUTDOWN_WITHOUT_ZK_CATCH_UP):
        image = committed_image(c)
        if image.migration_state is ZkMigrationState.MIGRATION:
            node = znode_data(seen_by(state, cid), MIGRATION)  # a lagging read only makes it wait longer
            if node is None or node.kraft_metadata_offset < c.high_watermark:
                return Refused(None, "the leader waits until ZooKeeper has every committed record (KIP-866 §Rollback "
                                     "to ZK)")
    spent = spend(state, migrations=1)
    return BUDGET_SPENT if spent is None else put_ctrl(spent, _process_stops(c))


def _restart_controller(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    c = ctrl(state, cid)
    if c.alive:
        return _RUNNING
    if state.history.handed_back is not None:
        # KIP-866 §Rollback to ZK ends the quorum's life: after the operator deleted its znodes,
        # a restarted quorum would reclaim ZooKeeper from a stale log (a new migration needs a
        # freshly formatted quorum, which the model does not cover).
        return _ROLLED_BACK
    epoch = KRaftEpoch(0) if variant.has(Bug.RESTART_FORGETS_EPOCH) else c.epoch
    role = QuorumRole.VOTED if c.voted_for is not None and c.voted_for != c.id else QuorumRole.UNATTACHED
    driver = Driver() if c.config.migration_enabled else None
    return put_ctrl(state, c.replace(alive=True, epoch=epoch, role=role, driver=driver))


# ---- brokers on KRaft ---------------------------------------------------------------------------

def registration_request(b: Broker, c: ControllerId) -> BrokerRegistrationRequest:
    """What broker ``b``'s process sends: its incarnation, whether it is a ZK broker, its metadata.version."""
    return BrokerRegistrationRequest(b.id, c, b.incarnation, not b.config.kraft_mode, b.config.ibp)


def decide_broker_registration(
    image: MetadataImage, c: KRaftController, request: BrokerRegistrationRequest, variant: Variant
) -> tuple[Refused | None, RegisterBrokerRecord | None]:
    """ClusterControlManager.registerBroker's checks in Kafka's order (reference §3.1; KIP-866 §Broker Registration):
    the refusal, or None with the record to append (None: the same incarnation's registration stands).

    Another incarnation's registration refuses a new one only while its session is valid (hasValidSession: not
    fenced, heard from within the session timeout): once its session lapsed it is taken over, fencing record or
    not (``SessionTimeout`` with ``fence=False``)."""
    is_zk = request.is_migrating_zk_broker
    existing = image.registration(request.broker)
    valid = existing is not None and not existing.fenced and request.broker not in c.lapsed
    if existing is not None and existing.incarnation != request.incarnation and valid:
        # A live registration of another incarnation: KIP-866 "a KRaft broker with the id of an existing ZK broker".
        if not (variant.has(Bug.KRAFT_BROKER_TAKES_LIVE_ZK_ID) and not is_zk and existing.is_migrating_zk_broker):
            return Refused(Errors.DUPLICATE_BROKER_REGISTRATION, "incarnation {} holds a live registration, epoch {}",
                           (existing.incarnation, existing.epoch)), None
    if is_zk and not c.config.migration_enabled:
        return Refused(Errors.BROKER_ID_NOT_REGISTERED, "the controller does not take ZK brokers: no migration "
                                                        "flag"), None
    if is_zk and (image.metadata_version or 0) < Ibp.IBP_3_4_IV0:
        return Refused(Errors.BROKER_ID_NOT_REGISTERED, "the controller does not take ZK brokers below "
                                                        "metadata.version 3.4-IV0"), None
    if not is_zk and image.migration_state is ZkMigrationState.PRE_MIGRATION:
        return Refused(Errors.BROKER_ID_NOT_REGISTERED, "pre-migration: KRaft brokers register once the metadata "
                                                        "is migrated"), None
    if is_zk and request.ibp != image.metadata_version and not variant.has(Bug.ADMIT_ZK_BROKER_WITH_OTHER_IBP):
        # ZK brokers advertise metadata.version as [IBP, IBP].
        level = image.metadata_version.name if image.metadata_version is not None else None
        return Refused(Errors.UNSUPPORTED_VERSION, "the broker supports metadata.version {} only, not the finalized {}",
                       (request.ibp.name, level)), None
    if existing is not None and existing.incarnation == request.incarnation \
            and not variant.has(Bug.RETRIED_REGISTRATION_NEW_EPOCH):
        # A retry (its response was lost): the same incarnation keeps its epoch and state.
        # Differs: Kafka 3.9 appends an amending RegisterBrokerRecord with the same epoch, fenced and shutdown
        # state (registerBroker, "Amending registration"); the model appends none: the image is the same.
        return None, None
    epoch = BrokerEpoch(request.incarnation if variant.has(Bug.BROKER_EPOCH_FROM_INCARNATION) else len(c.log))
    return None, RegisterBrokerRecord(request.broker, request.incarnation, epoch, is_zk, request.ibp)


def handle_registration(
    state: ClusterState, request: BrokerRegistrationRequest, variant: Variant
) -> Refused | tuple[ClusterState, BrokerEpoch]:
    """The active controller's side of a BrokerRegistration: its refusal, or the state with the record
    appended and the epoch it answers (the broker's own request, or a script's, ``model.harness``)."""
    c = ctrl(state, request.controller)
    if not is_active(c):
        return _NOT_ACTIVE
    image = own_image(c)
    refused, rec = decide_broker_registration(image, c, request, variant)
    if refused is not None:
        return refused
    if rec is None:  # accepted without a record: this incarnation's registration stands, epoch and all
        reg = image.registration(request.broker)
        assert reg is not None
        return _renew_session(state, c, request.broker), reg.epoch
    if writes_blocked(state, c, variant):
        return _LAG_BOUND
    state = append(state, c, [rec], variant)
    return _renew_session(state, ctrl(state, c.id), request.broker), rec.epoch


def _renew_session(state: ClusterState, c: KRaftController, bid: BrokerId) -> ClusterState:
    """BrokerHeartbeatManager.touch (an accepted registration or heartbeat) or remove (a fenced registration):
    broker ``bid``'s session is no longer a lapsed one."""
    return state if bid not in c.lapsed else put_ctrl(state, c.replace(lapsed=c.lapsed - {bid}))


def may_register(b: Broker) -> Refused | None:
    """Why broker ``b``'s process sends no BrokerRegistration now, or None when it sends one."""
    if not b.alive:
        return _BROKER_NOT_RUNNING
    if b.kraft_epoch != UNKNOWN_BROKER_EPOCH:
        return _REGISTERED
    if not b.config.kraft_mode:
        cfg = b.config
        # KIP-866 §Migration Trigger 1-3: only a ZK broker with the flag, the controller configs and the bridge IBP.
        if not (cfg.migration_enabled and cfg.controller_configs and cfg.ibp >= Ibp.IBP_3_4_IV0):
            return _NOT_MIGRATING
        if not b.registered:
            return _NOT_IN_ZK
    return None


def _register_with_kraft(state: ClusterState, bid: BrokerId, cid: ControllerId, variant: Variant) -> Result:
    b = state.brokers[bid]
    refused = may_register(b)
    if refused is not None:
        return refused
    if awaits_answer(state, b):
        return _AWAITING_ANSWER
    answer = handle_registration(state, registration_request(b, cid), variant)
    if isinstance(answer, Refused):
        # Differs: KIP-866 §Broker Registration says a refused broker terminates; the model lets it retry
        # (it is refused the same way), so that restarting it again does not mint incarnations without bound.
        return answer
    state, epoch = answer
    if state.budget.answer_at_commit and not variant.has(Bug.REGISTRATION_ANSWERED_BEFORE_COMMIT):
        # QuorumController completes the write's future once the log up to it commits (its deferred event
        # queue): the broker learns its epoch then (``settle_answers``), and sends nothing meanwhile.
        c = ctrl(state, cid)
        waiting = PendingAnswer(bid, b.incarnation, epoch, len(c.log), unstable=answered_at_raft_commit(c, variant))
        return settle_answers(put_ctrl(state, c.replace(pending=c.pending + (waiting,))))
    # Differs: Kafka answers once the record commits (Budget.answer_at_commit, scope purgatory); elsewhere the
    # model answers at once (a truncated registration shows up as STALE_BROKER_EPOCH on the next heartbeat and
    # the broker registers again).
    return _take_epoch(state, b, epoch)


def _take_epoch(state: ClusterState, b: Broker, epoch: BrokerEpoch) -> ClusterState:
    """Broker ``b`` takes the epoch its registration was answered with: registered, fenced until caught up."""
    return put_broker(state, b.replace(kraft_epoch=epoch, lifecycle=_fenced_state(b)))


def awaits_answer(state: ClusterState, b: Broker) -> bool:
    """Whether broker ``b``'s process has a request in flight, waiting in an active controller's purgatory (it sends
    one request at a time: BrokerLifecycleManager schedules the next once the answer came)."""
    return any(p.broker == b.id and p.incarnation == b.incarnation for c in state.controllers for p in c.pending)


def settle_answers(state: ClusterState) -> ClusterState:
    """Complete the registrations whose records committed; fail every one of a controller no longer active.

    Kafka's deferredEventQueue.completeUpTo(highWatermark) after a commit, failAll(NOT_CONTROLLER) on
    resignation (QuorumController). Run after every step (``model.step``): a step that advances a high
    watermark or deposes a leader settles its answers at once, so no separate action (and no interleaving
    of one) grows the state space. A failed registration leaves the broker as it was: it sends it again (its
    BrokerLifecycleManager retries on NOT_CONTROLLER). An answer reaches only the process that asked."""
    if not any(c.pending for c in state.controllers):
        return state
    for c in state.controllers:
        if not c.pending:
            continue
        done = c.pending if not is_active(c) else tuple(p for p in c.pending if _completes(c, p))
        if not done:
            continue
        state = put_ctrl(state, c.replace(pending=tuple(p for p in c.pending if p not in done)))
        if not is_active(c):
            continue
        for p in done:
            b = state.brokers[p.broker]
            if not b.alive or b.incarnation != p.incarnation:
                continue
            if p.heartbeat is not None:
                if b.kraft_epoch == p.epoch:
                    state = _take_heartbeat_answer(state, b, p.heartbeat)
            elif b.kraft_epoch == UNKNOWN_BROKER_EPOCH:
                state = _take_epoch(state, b, p.epoch)
    return state


def stable_end(c: KRaftController) -> int:
    """OffsetControlManager's lastStableOffset (as a count of entries): the high watermark, but not past the start
    of a transaction its committed log leaves open (its records are published, and answered, only at its end).
    Kafka computes it at each commit (handleCommitBatch), so a transaction's end counts once it commits."""
    for i in range(c.high_watermark - 1, -1, -1):
        rec = c.log[i].record
        if isinstance(rec, (EndTransactionRecord, AbortTransactionRecord)):
            break
        if isinstance(rec, BeginTransactionRecord):
            return i
    return c.high_watermark


def _completes(c: KRaftController, p: PendingAnswer) -> bool:
    """deferredEventQueue.completeUpTo(lastStableOffset), deferredUnstableEventQueue.completeUpTo(lastCommitted)."""
    return p.offset <= (c.high_watermark if p.unstable else stable_end(c))


def answered_at_raft_commit(c: KRaftController, variant: Variant) -> bool:
    """Whether a broker's request the active controller decides now is answered at the Raft commit, an open
    transaction or not: a RUNS_IN_PREMIGRATION event (registrations, heartbeats) run in pre-migration goes to the
    deferredUnstableEventQueue (KAFKA-15441, Kafka 3.6+: a migration's long transaction held heartbeats until
    their sessions expired)."""
    # Differs: the seeds do not say when a request is answered; kip answers every request at the stable offset,
    # the rule of Kafka's deferred event queue, so a heartbeat waits while the migration's transaction is open.
    return variant.profile is Profile.KAFKA_3_9 and own_image(c).migration_state is ZkMigrationState.PRE_MIGRATION


# ---- controllers' registrations (KIP-919; reference §1.4) ----------------------------------------

_KIP_REGISTERS_NO_CONTROLLER = Refused(None, "the kip profile has no controller registrations: readiness reads the "
                                             "members (KIP-866 §Migration Trigger 5)")
_REGISTRATION_STANDS = Unchanged("the controller's registration stands")
_REGISTRATION_PENDING = Unchanged("the active controller has this registration in its log already")


def controller_registration(c: KRaftController) -> RegisterControllerRecord:
    """What controller ``c``'s ControllerRegistrationManager sends: zkMigrationReady is its migration flag
    (ControllerServer passes config.migrationEnabled; the model's flag without the ZooKeeper configs is not
    ready, as kip's readiness reads it)."""
    return RegisterControllerRecord(c.id, c.config.migration_enabled and c.config.zk_configured)


def decide_controller_registration(image: MetadataImage, request: RegisterControllerRecord) -> Refused | None:
    """ClusterControlManager.registerController: refused below metadata.version 3.7-IV0, else the record."""
    if image.metadata_version is None or image.metadata_version < Ibp.IBP_3_7_IV0:
        return Refused(Errors.UNSUPPORTED_VERSION, "The current MetadataVersion is too old to support controller "
                                                   "registrations.")
    return None


def _register_controller(state: ClusterState, cid: ControllerId, lid: ControllerId, variant: Variant) -> Result:
    """One ControllerRegistration exchange: controller ``cid`` sends, the active controller ``lid`` appends.

    The manager's side (ControllerRegistrationManager): it sends once its published image's
    metadata.version supports registrations and that image holds no registration of it, or one it
    would not send now (Kafka: of another incarnation; here: another flag, since a restart is the only
    way the flag changes). It is one atomic exchange, as a broker's registration is: the request and
    its answer are not separate messages in the model. An accepted answer changes nothing on the
    sender: like Kafka's manager, it learns it is registered only from the committed record.
    """
    # Differs: kip has no controller registrations (KIP-866 §Migration Trigger reads the members); kafka-3.9
    # registers as Kafka's manager does, but a controller has no incarnations: it registers again only when its
    # flag changed, where Kafka registers every start (the flag is all the model's readiness reads).
    if variant.profile is not Profile.KAFKA_3_9:
        return _KIP_REGISTERS_NO_CONTROLLER
    c = ctrl(state, cid)
    if not c.alive:
        return _NOT_RUNNING
    published = committed_image(c)
    if published.metadata_version is None or published.metadata_version < Ibp.IBP_3_7_IV0:
        # Kafka's manager waits for a level that supports registration (isControllerRegistrationSupported).
        return Refused(None, "the controller's metadata.version {} does not support KIP-919 controller registration",
                       (None if published.metadata_version is None else published.metadata_version.name,))
    request = controller_registration(c)
    if published.controller_registration(cid) == request:
        return _REGISTRATION_STANDS
    return handle_controller_registration(
        state, ControllerRegistrationRequest(cid, lid, request.zk_migration_ready), variant)


def handle_controller_registration(state: ClusterState, request: ControllerRegistrationRequest,
                                   variant: Variant) -> Result:
    """The active controller's side of a ControllerRegistration (a controller's own, or a script's,
    ``model.harness``): its refusal, or the state with the RegisterControllerRecord appended."""
    leader = ctrl(state, request.controller)
    if not is_active(leader):
        return _NOT_ACTIVE
    decided = own_image(leader)
    rec = RegisterControllerRecord(request.controller_id, request.zk_migration_ready)
    refused = decide_controller_registration(decided, rec)
    if refused is not None:
        return refused
    if decided.controller_registration(request.controller_id) == rec:
        # Kafka's manager sends once and waits for the record (pendingRpc, then registeredInLog); the model
        # does not append the same registration twice, so a log cannot grow with copies while it commits.
        return _REGISTRATION_PENDING
    if writes_blocked(state, leader, variant):
        return _LAG_BOUND
    return append(state, leader, [rec], variant)


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


def heartbeat_request(b: Broker, c: ControllerId) -> BrokerHeartbeatRequest:
    """What broker ``b``'s process sends: its epoch, whether it wants to shut down, how far it has replayed."""
    # Differs: ZK brokers do not replay the log; the model takes them as caught up (None).
    offset = b.image.offset if b.config.kraft_mode else None
    return BrokerHeartbeatRequest(b.id, c, b.kraft_epoch, b.want_shutdown, offset)


def caught_up(request: BrokerHeartbeatRequest, reg_epoch: BrokerEpoch, variant: Variant) -> bool:
    """KIP-500 §Fenced: a broker leaves Fenced once it has the metadata up to its own registration."""
    if request.metadata_offset is None:  # a ZK broker (heartbeat_request): it takes UpdateMetadata instead
        return True
    if variant.has(Bug.CAUGHT_UP_OFF_BY_ONE):
        return request.metadata_offset > reg_epoch + 1
    return request.metadata_offset > reg_epoch


def handle_heartbeat(
    state: ClusterState, request: BrokerHeartbeatRequest, variant: Variant
) -> Refused | tuple[ClusterState, HeartbeatAnswer, bool]:
    """The active controller's side of a BrokerHeartbeat (BrokerHeartbeatManager.calculateNextBrokerState and its
    records; reference §3.2, KIP-500 §Broker States): its refusal, or the state, the answer and whether it wrote."""
    c = ctrl(state, request.controller)
    if not is_active(c):
        return _NOT_ACTIVE
    bid = request.broker
    image = own_image(c)
    reg = image.registration(bid)
    if reg is None:
        return Refused(Errors.STALE_BROKER_EPOCH, "no registration of broker {}", (bid,))
    if reg.epoch != request.broker_epoch and not (
            variant.has(Bug.HEARTBEAT_ACCEPTS_OLDER_BROKER_EPOCH) and request.broker_epoch < reg.epoch):
        return Refused(Errors.STALE_BROKER_EPOCH, "broker epoch {} is not the registration's {}",
                       (request.broker_epoch, reg.epoch))
    leads = bool(_leaderships(image, bid))
    records: list[MetadataRecord] = []
    fenced = heartbeat_fenced(c, reg)
    answer = HeartbeatAnswer(fenced, reg.in_controlled_shutdown, False)
    if fenced:
        if request.want_shutdown:
            answer = answer.replace(shutdown_now=True)
        elif caught_up(request, reg.epoch, variant) or variant.has(Bug.UNFENCE_BEFORE_CAUGHT_UP):
            records = [BrokerRegistrationChangeRecord(bid, reg.epoch, False)] + _elect_leaderless(image, bid)
            answer = HeartbeatAnswer(False, False, False)
    elif reg.in_controlled_shutdown or request.want_shutdown:
        if not leads:
            answer = HeartbeatAnswer(True, True, True)
            records = [BrokerRegistrationChangeRecord(bid, reg.epoch, True)] + _move_leaders_off(image, bid, True)
        elif not reg.in_controlled_shutdown:
            answer = answer.replace(in_controlled_shutdown=True)
            records = [BrokerRegistrationChangeRecord(bid, reg.epoch, None, True)]
            records += _move_leaders_off(image, bid, False)
    if records:
        if writes_blocked(state, c, variant, len(records)):
            return _LAG_BOUND
        state = append(state, c, records, variant)
    if not (variant.has(Bug.TIMEOUT_IGNORES_ZK_BROKER_HEARTBEATS) and reg.is_migrating_zk_broker):
        state = _renew_session(state, ctrl(state, c.id), bid)
    return state, answer, bool(records)


def heartbeat_fenced(c: KRaftController, reg: BrokerRegistrationImage) -> bool:
    """Whether controller ``c``'s BrokerHeartbeatManager holds registration ``reg`` fenced, which decides heartbeats
    and session timeouts: as its image, but the other way for the brokers whose fencing it has stale."""
    return reg.fenced != (reg.broker in c.stale_fencing)


def may_heartbeat(b: Broker) -> Refused | None:
    """Why broker ``b``'s process sends no BrokerHeartbeat now, or None when it sends one."""
    if not b.alive:
        return _BROKER_NOT_RUNNING
    if b.kraft_epoch == UNKNOWN_BROKER_EPOCH:
        return _UNREGISTERED
    return None


def sends_no_heartbeat(state: ClusterState, b: Broker) -> Refused | None:
    """Why broker ``b``'s process sends no BrokerHeartbeat now (``may_heartbeat``, or its last one still waits for
    its answer), or None when it sends one."""
    refused = may_heartbeat(b)
    if refused is None and awaits_answer(state, b):
        return _AWAITING_HEARTBEAT
    return refused


def _heartbeat(state: ClusterState, bid: BrokerId, cid: ControllerId, variant: Variant) -> Result:
    """A broker's heartbeat: the controller's side (``handle_heartbeat``), then the broker takes the answer."""
    b = state.brokers[bid]
    refused = sends_no_heartbeat(state, b)
    if refused is not None:
        return refused
    answer = handle_heartbeat(state, heartbeat_request(b, cid), variant)
    if isinstance(answer, Refused):
        if answer.error is Errors.STALE_BROKER_EPOCH:  # the broker registers again
            return answer.delivered(put_broker(state, b.replace(kraft_epoch=UNKNOWN_BROKER_EPOCH,
                                                                lifecycle=_fenced_state(b))))
        return answer
    state, response, wrote = answer
    c = ctrl(state, cid)
    waiting = PendingAnswer(bid, b.incarnation, b.kraft_epoch, len(c.log), response,
                            answered_at_raft_commit(c, variant))
    if (state.budget.heartbeats_at_commit and not variant.has(Bug.HEARTBEAT_ANSWERED_BEFORE_COMMIT)
            and not _completes(c, waiting)):
        # processBrokerHeartbeat's future completes once the log up to its last record, or (no record) up to the
        # purgatory's highest pending offset, is stable: the model takes the log's end, the bound of both.
        return put_ctrl(state, c.replace(pending=c.pending + (waiting,)))
    # Differs: Kafka answers once the log up to the heartbeat commits (Budget.heartbeats_at_commit, scope
    # heartbeat-commit); elsewhere the model answers at once.
    after = _take_heartbeat_answer(state, state.brokers[bid], response)
    if not wrote and after is state:
        return heartbeat_unchanged(response)
    return after


def _take_heartbeat_answer(state: ClusterState, b: Broker, response: HeartbeatAnswer) -> ClusterState:
    """What a heartbeat's answer does to broker ``b`` (BrokerLifecycleManager: RECOVERY -> RUNNING once not fenced;
    ShouldShutDown: the process exits)."""
    if response.shutdown_now:
        return process_dies(state, b)  # SHUTDOWN_NOW: the broker exits, Offline
    if b.config.kraft_mode and not (response.fenced or response.in_controlled_shutdown or b.want_shutdown):
        if b.lifecycle is not BrokerState.ONLINE:
            return put_broker(state, b.replace(lifecycle=BrokerState.ONLINE))
    return state


# ---- responses lost after their requests took effect ---------------------------------------------

_NO_EFFECT = Refused(None, "the request took no effect on the controller: a lost answer is one never sent")


def _response_lost(state: ClusterState, bid: BrokerId, cid: ControllerId, variant: Variant,
                   registration: bool) -> Result:
    """The controller's side of broker ``bid``'s registration (``registration``) or heartbeat, whose response is
    lost: enabled only when it appended records. The broker learned nothing and sends the same request again
    (BrokerLifecycleManager's retry after a timeout): a registration with the same incarnation, which the
    controller must answer with the epoch it gave (KIP-500 §Broker Metadata Management; registerBroker,
    reference §3.1); a heartbeat that must find what the first one did (an unfencing, a controlled shutdown's
    step: KIP-500 §Broker States)."""
    if state.budget.lost_responses <= 0:
        return BUDGET_SPENT
    b = state.brokers[bid]
    refused = may_register(b) if registration else may_heartbeat(b)
    if refused is not None:
        return refused
    if awaits_answer(state, b):
        return _AWAITING_ANSWER if registration else _AWAITING_HEARTBEAT
    answer = (handle_registration(state, registration_request(b, cid), variant) if registration
              else handle_heartbeat(state, heartbeat_request(b, cid), variant))
    if isinstance(answer, Refused):
        return answer
    if answer[0] is state:  # nothing appended
        return _NO_EFFECT
    after = spend_checked(answer[0], lost_responses=1)
    if registration and variant.has(Bug.LOST_REGISTRATION_GUESSES_EPOCH):
        # the mistake: with no answer, the broker takes the offset it has replayed to as the epoch it was given
        after = put_broker(after, b.replace(kraft_epoch=BrokerEpoch(b.image.offset), lifecycle=_fenced_state(b)))
    return after


# ---- heartbeats held in the network -------------------------------------------------------------

_NOT_HELD = Refused(None, "the network holds no such heartbeat")
_HELD_ALREADY = Refused(None, "the network holds this very heartbeat already")


def _hold_heartbeat(state: ClusterState, bid: BrokerId, cid: ControllerId) -> Result:
    """Broker ``bid``'s heartbeat to ``cid`` is held in the network (``ClusterState.held``). The broker's side is
    a request that timed out: BrokerLifecycleManager learned nothing and sends the next heartbeat, so the broker
    is unchanged; a restart, a new registration or an epoch given back may follow before the held one arrives."""
    if state.budget.held_requests <= 0:
        return BUDGET_SPENT
    b = state.brokers[bid]
    refused = sends_no_heartbeat(state, b)
    if refused is not None:
        return refused
    request = heartbeat_request(b, cid)
    if request in state.held:
        return _HELD_ALREADY
    return spend_checked(state, held_requests=1).replace(held=state.held | {request})


def _deliver_heartbeat(state: ClusterState, request: BrokerHeartbeatRequest, variant: Variant) -> Result:
    """A held heartbeat reaches the controller it was sent to, which decides it as any heartbeat
    (``handle_heartbeat``) on the broker epoch it carries: one older than the broker's registration is
    STALE_BROKER_EPOCH (reference §3.2, checkBrokerEpoch; KIP-380's generations), as is any to a controller no
    longer active (NOT_CONTROLLER). The answer goes nowhere: BrokerLifecycleManager takes only the answer to its
    current request, and the sender's timed out long ago, or its process is gone. Only the records it wrote stay."""
    if request not in state.held:
        return _NOT_HELD
    state = state.replace(held=state.held - {request})
    answer = handle_heartbeat(state, request, variant)
    if isinstance(answer, Refused):
        return answer.delivered(state)
    return answer[0]


def heartbeat_unchanged(answer: HeartbeatAnswer) -> Unchanged:
    """A heartbeat's outcome when it wrote nothing: where its answer leaves the broker."""
    if answer.shutdown_now:
        return _SHUTDOWN_NOW
    if answer.in_controlled_shutdown:
        return _IN_CONTROLLED_SHUTDOWN
    return _STAYS_FENCED if answer.fenced else _STAYS_UNFENCED


_SHUTDOWN_NOW = Unchanged("shutdown now")
_IN_CONTROLLED_SHUTDOWN = Unchanged("in controlled shutdown")
_STAYS_FENCED = Unchanged("fenced")
_STAYS_UNFENCED = Unchanged("unfenced")


def _fenced_state(b: Broker) -> BrokerState:
    return BrokerState.FENCED if b.config.kraft_mode else b.lifecycle


def _fetch_metadata(state: ClusterState, bid: BrokerId, cid: ControllerId, variant: Variant) -> Result:
    b, c = state.brokers[bid], ctrl(state, cid)
    if not b.alive:
        return _BROKER_NOT_RUNNING
    if not b.config.kraft_mode:
        return _ZK_BROKER_REPLAYS_NOTHING
    if not c.alive:
        return _NOT_RUNNING
    if c.role is not QuorumRole.LEADER:
        return Refused(Errors.NOT_LEADER_OR_FOLLOWER, "controller {} does not lead", (cid,))
    upto = len(c.log) if variant.has(Bug.METADATA_FETCH_PAST_HIGH_WATERMARK) else c.high_watermark
    if upto <= b.image.offset:
        return _NOTHING_NEW
    image = image_of(c.log, upto)
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


def _session_lapses(state: ClusterState, bid: BrokerId, cid: ControllerId) -> Result:
    """BrokerHeartbeatManager: broker.session.timeout.ms passes without a heartbeat of an unfenced registration, so
    hasValidSession turns false; no record (maybeFenceOneStaleBroker writes the fencing one later)."""
    c = ctrl(state, cid)
    refused = _fencing_refused(c, bid)
    if refused is not None:
        return refused
    if bid in c.lapsed:
        return _LAPSED
    if not timeout_heals(state, bid, cid):
        # Differs: a running registration's session lapses only in the step that fences it (``_session_timeout``):
        # alone, its lapse would change only a new incarnation's registration, and no new incarnation runs.
        return _LIVE_SESSION
    return put_ctrl(state, c.replace(lapsed=c.lapsed | {bid}))


_LAPSED = Unchanged("the session has lapsed already")
_LIVE_SESSION = Refused(None, "the registration's process is running: its session lapses as it is fenced")


def _fencing_refused(c: KRaftController, bid: BrokerId) -> Refused | None:
    """Why no session of broker ``bid`` may lapse or be fenced at controller ``c``: not active, nothing to fence."""
    if not is_active(c):
        return _INACTIVE
    reg = own_image(c).registration(bid)
    if reg is None:
        return _NO_REGISTRATION
    if heartbeat_fenced(c, reg):
        return _FENCED
    return None


def _session_timeout(state: ClusterState, bid: BrokerId, cid: ControllerId, variant: Variant) -> Result:
    """maybeFenceOneStaleBroker: fence a registration whose heartbeats stopped (its session lapses in this step
    unless it lapsed before, ``_session_lapses``)."""
    b, c = state.brokers[bid], ctrl(state, cid)
    refused = _fencing_refused(c, bid)
    if refused is not None:
        return refused
    image = own_image(c)
    reg = image.registration(bid)
    assert reg is not None
    if image.migration_state is ZkMigrationState.PRE_MIGRATION and variant.profile is Profile.KAFKA_3_9:
        # Differs: since KAFKA-15441 Kafka does not fence stale brokers in pre-migration.
        return _NO_FENCING_IN_PRE_MIGRATION
    alive_same = b.alive and b.incarnation == reg.incarnation and b.kraft_epoch == reg.epoch
    if variant.has(Bug.TIMEOUT_IGNORES_ZK_BROKER_HEARTBEATS) and not b.config.kraft_mode:
        alive_same = False  # the mistake: a migrating ZK broker's heartbeats do not keep its session
    if alive_same and bid not in c.lapsed:
        spent = spend(state, timeouts=1)
        if spent is None:
            return BUDGET_SPENT
        state = spent
    records: list[MetadataRecord] = [BrokerRegistrationChangeRecord(bid, reg.epoch, True)]
    if image.migration_state is not ZkMigrationState.PRE_MIGRATION:
        records += _move_leaders_off(image, bid, True)
    if writes_blocked(state, c, variant, len(records)):
        return _LAG_BOUND
    state = append(state, c, records, variant)
    state = _renew_session(state, ctrl(state, cid), bid)  # a fenced broker's session is not valid: none to lapse
    if alive_same and b.config.kraft_mode:
        state = put_broker(state, state.brokers[bid].replace(lifecycle=BrokerState.FENCED))
    return state


def _begin_controlled_shutdown(state: ClusterState, bid: BrokerId) -> Result:
    b = state.brokers[bid]
    if not b.alive:
        return _BROKER_NOT_RUNNING
    if not b.config.kraft_mode:
        return _ZK_BROKER_SHUTDOWN
    if b.want_shutdown:
        return _SHUTTING_DOWN
    if b.lifecycle is not BrokerState.ONLINE:
        return _NOT_ONLINE
    spent = spend(state, shutdowns=1)
    if spent is None:
        return BUDGET_SPENT
    return put_broker(spent, b.replace(want_shutdown=True, lifecycle=BrokerState.STOPPING))


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

def decide_write(image: MetadataImage, variant: Variant) -> Refused | None:
    """QuorumController's pre-migration gate, before any other decision of a write: in pre-migration every
    write but registration and heartbeats is NOT_CONTROLLER (KIP-866 §KRaft Controller Pre-Migration State)."""
    if image.migration_state is ZkMigrationState.PRE_MIGRATION and not variant.has(Bug.PRE_MIGRATION_ACCEPTS_WRITES):
        return _PRE_MIGRATION
    return None


_PRE_MIGRATION = Refused(Errors.NOT_CONTROLLER, "pre-migration: no write but registrations and heartbeats")


def _admin_request(
    state: ClusterState, cid: ControllerId, variant: Variant, budget: str = "operator"
) -> Refused | tuple[ClusterState, KRaftController, MetadataImage]:
    """An operator's admin request reaching the active controller: the state with the request spent (from
    ``budget``), the controller and the image it decides from; why not, when no active controller may write now."""
    c = ctrl(state, cid)
    if not is_active(c):
        return _NOT_ACTIVE
    if writes_blocked(state, c, variant):
        return _LAG_BOUND
    spent = spend(state, **{budget: 1})
    if spent is None:
        return BUDGET_SPENT
    return spent, c, own_image(c)


def _alter_configs(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    request = _admin_request(state, cid, variant)
    if isinstance(request, Refused):
        return request
    state, c, image = request
    refused = decide_write(image, variant)
    if refused is not None:
        return refused.delivered(state)
    return append(state, c, [ConfigRecord((image.config or 0) + 1)], variant)


def decide_create_partitions(image: MetadataImage, replicas: tuple[BrokerId, ...]) -> Refused | PartitionRecord:
    """ReplicationControlManager.createPartitions with a manual assignment, after the pre-migration gate: every
    replica registered (validateManualPartitionAssignment), the ISR its active replicas (unfenced, not shutting
    down), the first its leader at leader epoch 0; the next partition id. Each refusal INVALID_REPLICA_ASSIGNMENT."""
    for r in replicas:
        if image.registration(r) is None:
            return Refused(Errors.INVALID_REPLICA_ASSIGNMENT, "the assignment includes broker {}, but no such broker is"
                           " registered", (r,))
    isr = tuple(r for r in replicas if (reg := image.registration(r)) is not None and not reg.fenced
                and not reg.in_controlled_shutdown)
    if not isr:
        return Refused(Errors.INVALID_REPLICA_ASSIGNMENT, "every broker of the assignment is fenced or in controlled"
                       " shutdown")
    return PartitionRecord(len(image.partitions), isr[0], isr, LeaderEpoch(0), replicas)


def _create_partitions(
    state: ClusterState, cid: ControllerId, replicas: tuple[BrokerId, ...], variant: Variant
) -> Result:
    request = _admin_request(state, cid, variant, "partition_creations")
    if isinstance(request, Refused):
        return request
    state, c, image = request
    decided = decide_write(image, variant) or decide_create_partitions(image, replicas)
    if isinstance(decided, Refused):
        return decided.delivered(state)
    return append(state, c, [decided], variant)


def reassignment_replicas(
    current: tuple[BrokerId, ...], target: tuple[BrokerId, ...]
) -> tuple[tuple[BrokerId, ...], tuple[BrokerId, ...], tuple[BrokerId, ...]]:
    """PartitionReassignmentReplicas: (replicas, adding, removing) of a move from ``current`` to ``target``: the
    target followed by the replicas it drops, and each difference in id order (Kafka's TreeSet)."""
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    return target + removing, adding, removing


def completed_reassignment(
    part: PartitionImage, isr: tuple[BrokerId, ...], variant: Variant
) -> tuple[tuple[BrokerId, ...], tuple[BrokerId, ...]] | None:
    """PartitionReassignmentReplicas.maybeCompleteReassignment: the (replicas, ISR) that complete ``part``'s
    reassignment in progress at ``isr``, both without the removing replicas, once that ISR holds every replica
    kept (so every adding one); None while it does not, or when nothing is in progress."""
    if not part.reassigning:
        return None
    new_isr = tuple(r for r in isr if r not in part.removing)
    replicas = tuple(r for r in part.replicas if r not in part.removing)
    if not new_isr or not replicas:
        return None
    if not set(replicas) <= set(new_isr) and not variant.has(Bug.REASSIGNMENT_COMPLETES_EARLY):
        return None
    return replicas, new_isr


def build_partition_change(
    image: MetadataImage, p: PartitionId, before: PartitionImage, part: PartitionImage, isr: tuple[BrokerId, ...],
    migrating: bool, variant: Variant,
) -> PartitionChangeRecord:
    """PartitionChangeBuilder.build for a reassignment's records: ``part`` (the partition with the reassignment's
    replicas, adding and removing, as the record would leave it) at ``isr``, completed when the ISR allows it
    (``completed_reassignment``): the removing replicas dropped from the replicas and ISR, adding and removing
    cleared, and a leader among the removed replaced by the first replica kept in the ISR that is registered,
    unfenced and not shutting down (tryElection; none: no leader). The leader epoch moves with a new leader, when
    replicas leave (triggerLeaderEpochBumpForReplicaReassignmentIfNeeded), and at any change of the replicas while
    the migration is enabled (``decide_alter_partition_reassignments`` says why). ``before`` is the partition as
    the image has it, its replicas known."""
    replicas, adding, removing, leader = part.replicas, part.adding, part.removing, before.leader
    completed = completed_reassignment(part, isr, variant)
    if completed is not None:
        (replicas, isr), adding, removing = completed, (), ()
    if leader not in isr:
        leader = next((r for r in replicas if r in isr and _acceptable_leader(image, r)), NO_LEADER)
    # Differs: Kafka's PartitionChangeBuilder bumps the leader epoch of a move only when replicas leave it (never at
    # a reassignment's start: its replicas keep the removing ones), and since KAFKA-16120's fix (3.7.0, 3.6.2) a ZK
    # broker takes an equal leader epoch from a KRaft controller instead; the model bumps it at every change of the
    # replicas in both profiles while the migration is enabled, so that a ZK broker learns the new replicas.
    moves = replicas != before.replicas and migrating and not variant.has(Bug.REASSIGNMENT_KEEPS_LEADER_EPOCH)
    bump = leader != before.leader or not set(before.replicas) <= set(replicas) or moves
    return PartitionChangeRecord(
        p, leader, isr, LeaderEpoch(before.leader_epoch + bump), replicas if replicas != before.replicas else (),
        adding if adding != before.adding else None, removing if removing != before.removing else None)


def _acceptable_leader(image: MetadataImage, b: BrokerId) -> bool:
    """LeaderAcceptor: a broker registered, unfenced and not in controlled shutdown may lead."""
    reg = image.registration(b)
    return reg is not None and not reg.fenced and not reg.in_controlled_shutdown


def decide_alter_partition_reassignments(
    image: MetadataImage, p: PartitionId, current: tuple[BrokerId, ...], replicas: tuple[BrokerId, ...],
    migrating: bool, variant: Variant,
) -> Refused | PartitionChangeRecord | None:
    """ReplicationControlManager.changePartitionReassignment for one partition, after the pre-migration gate: every
    target replica registered (INVALID_REPLICA_ASSIGNMENT), then the reassignment's first PartitionChangeRecord
    (its replicas the target and the removing ones, its adding and removing replicas, the leader and ISR kept),
    completed at once when the ISR already holds the target (``build_partition_change``); None when nothing moves.
    ``current`` is the partition's replicas before the move.

    KIP-866 §ZK Broker RPCs has the KRaft controller stand for a ZK controller toward ZK brokers, which bumps the
    leader epoch of every reassignment, so that a ZK broker (which takes a LeaderAndIsr only at a newer leader
    epoch) learns the new replicas."""
    if p >= len(image.partitions):
        return Refused(Errors.UNKNOWN_TOPIC_OR_PARTITION, "no partition {}", (p,))
    for r in replicas:
        if image.registration(r) is None:
            return Refused(Errors.INVALID_REPLICA_ASSIGNMENT, "the assignment includes broker {}, but no such broker is"
                           " registered", (r,))
    before = image.partitions[p].replace(replicas=current)
    moved, adding, removing = reassignment_replicas(current, replicas)
    part = before.replace(replicas=moved, adding=adding, removing=removing)
    rec = build_partition_change(image, p, before, part, before.isr, migrating, variant)
    if rec.replace(leader_epoch=before.leader_epoch) == PartitionChangeRecord(p, before.leader, before.isr,
                                                                               before.leader_epoch):
        return None  # changeRecordIsNoOp
    return rec


def _alter_partition_reassignments(
    state: ClusterState, cid: ControllerId, p: PartitionId, replicas: tuple[BrokerId, ...], variant: Variant
) -> Result:
    request = _admin_request(state, cid, variant, "reassignments")
    if isinstance(request, Refused):
        return request
    state, c, image = request
    assignment = znode_data(state, TOPIC) or ()
    # Differs: Kafka's image holds every partition's replicas from the migration's copy on; the model's holds them
    # only for a partition created or moved on KRaft, so a move of one copied from ZooKeeper starts from the
    # assignment ZooKeeper holds (the dual write keeps it equal to the image's).
    current = image.partitions[p].replicas if p < len(image.partitions) else ()
    if not current and p < len(assignment):
        current = assignment[p]
    decided = decide_write(image, variant) or decide_alter_partition_reassignments(
        image, p, current, replicas, c.config.migration_enabled, variant)
    if isinstance(decided, Refused):
        return decided.delivered(state)
    if decided is None:
        return Unchanged("partition {} has the replicas {} already", (p, replicas), state)
    return append(state, c, [decided], variant)


def alter_partition_refused(
    state: ClusterState, image: MetadataImage, b: BrokerId, p: PartitionId, r: BrokerId
) -> Refused | None:
    """Why broker ``b`` may not ask for ``r``'s ISR join of partition ``p`` now (None: it may). ``b``'s process is
    alive and leads ``p`` at the image's leader epoch (it learned the reassignment from a LeaderAndIsr: the
    leader's side, which Kafka's controller checks as the request's leader epoch); ``r`` is an adding replica of a
    reassignment in progress, not in the ISR yet, registered, unfenced and not shutting down (the controller's
    side, which also stands for "its process is alive and fetches"), and, a ZK broker, not a follower whose failed
    LeaderAndIsr left it without a fetcher (``LocalReplica.no_fetcher``: it never catches up).

    The model replicates no data, so a replica that may fetch may have caught up: the step is free while the guard
    holds, as catching up takes no bounded time. Only a ZK broker's process keeps the replicas it hosts
    (``Broker.replicas``, set by LeaderAndIsr), so only a ZK broker leads here."""
    # Differs: Kafka's KRaft brokers take their replicas from the image and send AlterPartition as ZK brokers do; the
    # model's KRaft brokers host no replicas, so a reassignment whose leader is one never ends.
    if p >= len(image.partitions) or b >= len(state.brokers):
        return _NOT_CAUGHT_UP
    part, leader = image.partitions[p], state.brokers[b]
    led = leader.replicas[p] if p < len(leader.replicas) else None
    if (not leader.alive or part.leader != b or led is None or led.role is not ReplicaRole.LEADER
            or led.leader_epoch != part.leader_epoch):
        return _NOT_LEADING
    if r not in part.adding or r in part.isr or not _acceptable_leader(image, r):
        return _NOT_CAUGHT_UP
    follower = state.brokers[r].replicas[p] if r < len(state.brokers) and p < len(state.brokers[r].replicas) else None
    if follower is not None and follower.no_fetcher:
        return _NOT_CAUGHT_UP
    return None


def _alter_partition(
    state: ClusterState, b: BrokerId, cid: ControllerId, p: PartitionId, r: BrokerId, variant: Variant
) -> Result:
    """ReplicationControlManager.alterPartition for the ISR join of an adding replica: a PartitionChangeRecord with
    ``r`` added to the ISR, completing the reassignment once every adding replica is in (``build_partition_change``).
    """
    c = ctrl(state, cid)
    if not is_active(c):
        return _NOT_ACTIVE
    if writes_blocked(state, c, variant):
        return _LAG_BOUND
    image = own_image(c)
    refused = alter_partition_refused(state, image, b, p, r)
    if refused is not None:
        return refused
    part = image.partitions[p]
    # Differs: Kafka's leader sends AlterPartition and takes the new ISR from the answer; the model's one step is the
    # request and its record, the leader's side (which the guard reads) unchanged.
    rec = build_partition_change(image, p, part, part, part.isr + (r,), c.config.migration_enabled, variant)
    return append(state, c, [rec], variant)


_NOT_LEADING = Refused(None, "the broker does not lead the partition at the image's leader epoch")
_NOT_CAUGHT_UP = Refused(None, "the replica is no unfenced adding replica of a reassignment outside the ISR")


def decide_delete_topics(image: MetadataImage) -> Refused | RemoveTopicRecord:
    """ReplicationControlManager.deleteTopics for the one topic, after the pre-migration gate: a RemoveTopicRecord,
    or UNKNOWN_TOPIC_OR_PARTITION when the image has no such topic (deleted already, or not migrated yet)."""
    if not image.partitions:
        return Refused(Errors.UNKNOWN_TOPIC_OR_PARTITION, "no topic {}", (TOPIC_NAME,))
    return RemoveTopicRecord(TOPIC_NAME)


def _delete_topics(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    request = _admin_request(state, cid, variant, "topic_deletions")
    if isinstance(request, Refused):
        return request
    state, c, image = request
    decided = decide_write(image, variant) or decide_delete_topics(image)
    if isinstance(decided, Refused):
        return decided.delivered(state)
    return append(state, c, [decided], variant)


def decide_metadata_version(
    image: MetadataImage, level: Ibp, upgrade_type: UpgradeType, variant: Variant
) -> Refused | None:
    """FeatureControlManager.updateFeature for metadata.version, in Kafka's order (reference §5.1): the
    refusal, or None. QuorumController's pre-migration gate (``decide_write``) comes before it.

    Every refusal is INVALID_UPDATE_VERSION (95), with Kafka's message. A migrating ZK broker
    advertises metadata.version as [IBP, IBP], so while one is registered the level cannot move.
    A downgrade across a level that changed metadata is refused, safe or unsafe ("Unsafe metadata
    downgrade is not supported in this version"); one that crosses none (3.9-IV0 to 3.8-IV0) is
    done, whichever type it asks for.
    """
    for r in image.brokers:
        if r.is_migrating_zk_broker and r.ibp != level:
            return Refused(Errors.INVALID_UPDATE_VERSION, "broker {} supports {} only", (r.broker, r.ibp.name))
    current = image.metadata_version
    if current is not None and level < current and upgrade_type is UpgradeType.UPGRADE:
        return _DOWNGRADE_NEEDS_TYPE
    if current is not None and level > current and upgrade_type is not UpgradeType.UPGRADE:
        return _NEWER_DOWNGRADE
    if image.migration_state.in_progress and not variant.has(Bug.MV_CHANGE_DURING_MIGRATION):
        return _DURING_MIGRATION
    if level < Ibp.IBP_3_3_IV0:
        return _BELOW_BOOTSTRAP  # the first level with FeatureLevelRecord
    if current is not None and level < current and metadata_changed_between(level, current) and not (
        variant.has(Bug.SAFE_DOWNGRADE_LOSES_METADATA) and upgrade_type is UpgradeType.SAFE_DOWNGRADE
    ):
        if upgrade_type is UpgradeType.UNSAFE_DOWNGRADE:
            return _UNSAFE_DOWNGRADE
        return _MIGHT_DELETE_METADATA
    return None


_DOWNGRADE_NEEDS_TYPE = Refused(Errors.INVALID_UPDATE_VERSION, "Can't downgrade the version of this feature without "
                                                                "setting the upgrade type to either safe or unsafe "
                                                                "downgrade.")
_NEWER_DOWNGRADE = Refused(Errors.INVALID_UPDATE_VERSION, "Can't downgrade to a newer version.")
_DURING_MIGRATION = Refused(Errors.INVALID_UPDATE_VERSION, "Unable to modify metadata.version while a ZK migration "
                                                           "is in progress.")
_BELOW_BOOTSTRAP = Refused(Errors.INVALID_UPDATE_VERSION, "Unable to set a metadata.version less than 3.3-IV0")
_UNSAFE_DOWNGRADE = Refused(Errors.INVALID_UPDATE_VERSION, "Unsafe metadata downgrade is not supported in this "
                                                           "version.")
_MIGHT_DELETE_METADATA = Refused(Errors.INVALID_UPDATE_VERSION, "Refusing to perform the requested downgrade because "
                                                                "it might delete metadata information.")


def _update_metadata_version(
    state: ClusterState, cid: ControllerId, level: Ibp, upgrade_type: UpgradeType, variant: Variant
) -> Result:
    request = _admin_request(state, cid, variant)
    if isinstance(request, Refused):
        return request
    state, c, image = request
    refused = decide_write(image, variant) or decide_metadata_version(image, level, upgrade_type, variant)
    if refused is not None:
        return refused.delivered(state)
    if level == image.metadata_version:
        return Unchanged("metadata.version is {}", (level.name,), state)  # nothing to write
    return append(state, c, [FeatureLevelRecord(METADATA_VERSION, level)], variant)
