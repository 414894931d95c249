"""``step(state, action) -> state | None``: the model's one transition function, and what is enabled.

How it works:
- ``step`` clears the per-step ghosts, then hands the action to the module of its part, each of
  which matches on its own closed union and ends in ``assert_never`` (``model.actions``):
  ``model.zk_era`` (``ZkEraAction``: ZooKeeper, the network, ZooKeeper-mode brokers and their
  controller), ``model.kraft_quorum`` (``KRaftQuorumAction``: the KRaft quorum, brokers on KRaft,
  admin writes) and ``model.kraft_migration`` (``MigrationAction``: the migration driver and the
  operator's runbook steps). A handler returns None when its action is not enabled. Then
  ``model.observations`` records what the step showed (``ghost.observed``), for the
  model-independent properties.
- ``enabled_actions(state, scope)`` (and ``successors``, each with its next state) lists every
  action ``step`` accepts, in a fixed order: the candidates of ``candidate_actions``, in the
  order the scope and the state give, that ``step`` takes. That order is what the explorer's
  and the simulator's pinned results rest on.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from model import harness, kraft_migration, kraft_quorum, zk_era
from model import zookeeper as zkm
from model.actions import (
    Action,
    AddPartitions,
    AlterConfigs,
    AlterPartition,
    AlterPartitionReassignments,
    ApiPartitionReassignment,
    BecomeLeader,
    BecomeZkController,
    BeginControlledShutdown,
    BrokerHeartbeat,
    BrokerZkServerCatchesUp,
    BrokerZkServerLags,
    ChangeIbp,
    CompleteMigration,
    CrashBroker,
    CrashController,
    CreatePartitions,
    DeleteControllerZNodes,
    DeleteTopics,
    Deliver,
    DeliverHeartbeat,
    Drop,
    DualWrite,
    DualWriteReplyLost,
    DualWriteSessionExpired,
    ElectController,
    ElectPartitionLeader,
    ExpireSession,
    Fetch,
    FetchMetadata,
    HeartbeatResponseLost,
    HoldHeartbeat,
    InitializeController,
    KRaftLeaderChange,
    LeaderAndIsrFailsInBroker,
    MarkTopicDeletion,
    MigrateBrokerToKRaft,
    MigrateMetadata,
    MigrationCommitted,
    ObserveControllerEpoch,
    OpenSession,
    ProcessBrokerChange,
    ProcessPartitionModifications,
    PublishMetadataChange,
    ReconfigureController,
    RecoverMigrationState,
    Redeliver,
    RefreshFeatureCache,
    RegisterBroker,
    RegisterController,
    RegisterWithKRaft,
    RegistrationResponseLost,
    RequestVote,
    ResignController,
    RestartBroker,
    RestartController,
    RollbackBrokerToZk,
    RunMetadataChange,
    SendControlledShutdown,
    SendRPCsToBrokers,
    SessionTimeout,
    ShutdownController,
    StartElection,
    StopBroker,
    SyncKRaftToZk,
    TopicDeletion,
    UpdateFeatures,
    UpdateMetadataVersion,
    WaitForControllerQuorum,
    WaitForZkBrokers,
    ZkOutage,
    ZkRecover,
    ZkServerCatchesUp,
    ZkServerLags,
    is_kraft_quorum_action,
    is_migration_action,
    is_zk_era_action,
)
from model.bugs import CORRECT, Variant
from model.guards import GUARDS
from model.harness import HarnessAction, Inject, is_harness_action
from model.kraft import ControllerId, QuorumRole
from model.observations import observe
from model.outcome import Outcome, Result, Unchanged, Verdict
from model.state import TOPIC, ClusterState, LeaderAndIsr, heartbeat_sort_key, message_sort_key, znode_data
from model.types import BrokerId, FeatureLevel, PartitionId

if TYPE_CHECKING:
    from model.scopes import Scope



def step(state: ClusterState, action: Action | HarnessAction, variant: Variant = CORRECT) -> ClusterState | None:
    """The state after ``action``, or None when ``action`` is not enabled in ``state`` (refused, or
    accepted with nothing to change: ``outcome`` tells them apart)."""
    result = _handle(state, action, variant)
    # A refusal or an unchanged answer carries the state its effects leave (a delivered request), or None.
    return result if isinstance(result, ClusterState) else result.after


def outcome(state: ClusterState, action: Action | HarnessAction, variant: Variant = CORRECT) -> Outcome:
    """What ``step`` decides, with its verdict: accepted (changed or unchanged) or refused, with the
    reason and Kafka's error code, from the same handler ``step`` runs (``model.outcome``)."""
    result = _handle(state, action, variant)
    if isinstance(result, ClusterState):
        if result == state:
            return Outcome(Verdict.UNCHANGED, result)
        return Outcome(Verdict.ACCEPTED, result)
    if isinstance(result, Unchanged):
        return Outcome(Verdict.UNCHANGED, result.after, None, result.reason)
    verdict = Verdict.REFUSED if result.after is None else Verdict.DELIVERED_REFUSED
    return Outcome(verdict, result.after, result.error, result.reason)


def _handle(state: ClusterState, action: Action | HarnessAction, variant: Variant) -> Result:
    return _handle_from(_without_step_ghosts(state), action, variant)


def _without_step_ghosts(state: ClusterState) -> ClusterState:
    """``state`` with the ghosts that describe only the step that made it cleared."""
    ghost = state.ghost
    if ghost.last_multi or ghost.kraft_writes or ghost.sent or ghost.attempted_kraft_write:
        return state.replace(ghost=ghost.replace(last_multi=(), kraft_writes=(), sent=(), attempted_kraft_write=()))
    return state


def _handle_from(state: ClusterState, action: Action | HarnessAction, variant: Variant) -> Result:
    """``_handle`` on a state whose per-step ghosts are already cleared."""
    if is_zk_era_action(action):
        result = zk_era.handle(state, action, variant)
    elif is_kraft_quorum_action(action):
        result = kraft_quorum.handle(state, action, variant)
    elif is_migration_action(action):
        result = kraft_migration.handle(state, action, variant)
    elif is_harness_action(action):
        result = harness.handle(state, action, variant)
    else:
        raise TypeError(f"not an action: {action!r}")
    # Registrations waiting for their records to commit are settled by the step that commits them or deposes
    # their controller (model.kraft_quorum.settle_answers; only with Budget.answer_at_commit).
    if isinstance(result, ClusterState):
        return _observed(state, action, kraft_quorum.settle_answers(result))
    if result.after is not None:  # a delivered request answered with an error, or spent unchanged
        return result.replace(after=_observed(state, action, kraft_quorum.settle_answers(result.after)))
    return result


def _observed(state: ClusterState, action: Action | HarnessAction, nxt: ClusterState) -> ClusterState:
    """``nxt`` with what the step let a user see (``model.observations``); an injected request is the
    harness's, not the cluster's, so it is observed only through what it leaves in flight."""
    observed = observe(state, () if isinstance(action, Inject) else (action,), nxt)
    if observed is nxt.ghost.observed:
        return nxt
    return nxt.replace(ghost=nxt.ghost.replace(observed=observed))


# ---- what can happen next -----------------------------------------------------------------------

def successors(state: ClusterState, scope: Scope, variant: Variant = CORRECT) -> list[tuple[Action, ClusterState]]:
    """Every enabled action with its successor, in a fixed order that does not depend on hashing."""
    out = []
    cleared = _without_step_ghosts(state)  # once, not once per candidate (most candidates are refused)
    for action in candidate_actions(state, scope):
        guard = GUARDS.get(type(action))
        if guard is not None and not guard(state, action, variant):
            continue  # its handler's first checks refuse it (model.guards)
        result = _handle_from(cleared, action, variant)
        nxt = result if isinstance(result, ClusterState) else result.after
        if nxt is not None:
            out.append((action, nxt))
    return out


def enabled_actions(state: ClusterState, scope: Scope, variant: Variant = CORRECT) -> list[Action]:
    """Every action ``step`` accepts in ``state``, in the same fixed order as ``successors``."""
    return [action for action, _ in successors(state, scope, variant)]


def candidate_actions(state: ClusterState, scope: Scope) -> list[Action]:
    """Actions that might be enabled; ``step`` decides. The order is fixed by the scope and the state."""
    actions: list[Action] = [ZkOutage(), ZkRecover()]
    actions += [ExpireSession(s) for s, _ in state.zk.sessions]
    creating = state.budget.partition_creations > 0
    # The topic's partitions: the scope's, and those an admin added since.
    partitions = len(znode_data(state, TOPIC) or ()) if scope.created_replicas else len(scope.partitions)
    for b in state.brokers:
        i = b.id
        actions += _broker_candidates(scope, i)
        if state.budget.broker_stale_reads:  # never in a scope without brokers' stale reads
            actions.append(BrokerZkServerLags(i))
        if zkm.lagging(state.zk, i):
            actions.append(BrokerZkServerCatchesUp(i))
        if creating:  # never in a scope without partition creations
            actions.append(AddPartitions(i, scope.created_replicas))
        if state.budget.topic_deletions:  # never in a scope without topic deletions
            actions.append(MarkTopicDeletion(i))
        if b.controller is not None:
            actions += [ElectPartitionLeader(i, PartitionId(p)) for p in range(partitions)]
            actions += [UpdateFeatures(i, f, FeatureLevel(lvl), allow) for f, lvl, allow in scope.feature_updates]
            if creating or partitions > len(scope.partitions):
                actions.append(ProcessPartitionModifications(i))
            if state.budget.reassignments and scope.reassignment is not None:  # never in a scope without them
                actions.append(ApiPartitionReassignment(i, *scope.reassignment))
            if scope.budget.topic_deletions:  # never in a scope without topic deletions
                actions.append(TopicDeletion(i))
    failing = state.budget.failed_leader_and_isrs > 0  # never in a scope without failed LeaderAndIsrs
    for m in sorted(state.network, key=message_sort_key):
        actions += [Deliver(m), Drop(m), Redeliver(m)]
        if failing and isinstance(m, LeaderAndIsr) and m.kraft:
            actions.append(LeaderAndIsrFailsInBroker(m))
    if state.controllers:
        actions += kraft_candidate_actions(state, scope)
    return actions


def kraft_candidate_actions(state: ClusterState, scope: Scope) -> list[Action]:
    """The KRaft side's candidates: quorum exchanges, driver events, brokers' requests, operator steps."""
    actions: list[Action] = []
    ids = [c.id for c in state.controllers]
    leaders = [c.id for c in state.controllers if c.alive and c.role is QuorumRole.LEADER]
    for c in state.controllers:
        i = c.id
        if state.budget.stale_reads or state.zk.views:  # never in a scope without stale reads
            actions += [ZkServerLags(i), ZkServerCatchesUp(i)]
        actions += [StartElection(i), BecomeLeader(i)]
        actions += [RequestVote(i, v) for v in ids if v != i]
        actions += [Fetch(i, leader) for leader in leaders if leader != i]
        if c.driver is not None:
            actions += _driver_candidates(i)
            if state.budget.queued_events or c.driver.queue:  # never in a scope without queued events
                actions += [PublishMetadataChange(i), RunMetadataChange(i)]
            if state.budget.write_failures:  # never in a scope without write failures
                actions += [DualWriteSessionExpired(i)]
            if state.budget.lost_write_replies:  # never in a scope without lost replies
                actions += [DualWriteReplyLost(i)]
        actions += _process_candidates(scope, i)
        actions += [RegisterController(i, leader) for leader in leaders]
        if c.id in leaders:
            actions += [AlterConfigs(i)]
            actions += [UpdateMetadataVersion(i, level, kind) for level, kind in scope.metadata_version_choices]
            if state.budget.partition_creations:  # never in a scope without partition creations
                actions.append(CreatePartitions(i, scope.created_replicas))
            if state.budget.reassignments and scope.reassignment is not None:  # never in a scope without them
                actions.append(AlterPartitionReassignments(i, *scope.reassignment))
            if scope.reassignment is not None:  # the ISR joins of its adding replicas, asked by any leader
                p, target = scope.reassignment
                actions += [AlterPartition(b.id, i, p, r) for b in state.brokers for r in target]
            if state.budget.topic_deletions:  # never in a scope without topic deletions
                actions.append(DeleteTopics(i))
    for b in state.brokers:
        for leader in leaders:
            actions += [RegisterWithKRaft(b.id, leader), BrokerHeartbeat(b.id, leader), FetchMetadata(b.id, leader),
                        SessionTimeout(b.id, leader), SessionTimeout(b.id, leader, fence=False)]
            if state.budget.lost_responses:
                actions += [RegistrationResponseLost(b.id, leader), HeartbeatResponseLost(b.id, leader)]
            if state.budget.held_requests:  # never in a scope without held requests
                actions.append(HoldHeartbeat(b.id, leader))
        actions += [BeginControlledShutdown(b.id), MigrateBrokerToKRaft(b.id), RollbackBrokerToZk(b.id)]
    actions += [DeliverHeartbeat(r) for r in sorted(state.held, key=heartbeat_sort_key)]
    actions.append(DeleteControllerZNodes())
    return actions


# The candidates below are the same in every state: built once per scope and node, not once per state (it halved
# ``candidate_actions``' time in the migration scope, 51 to 27 us of CPU a state). Actions are immutable records,
# so one instance serves every state, and the tuples keep the order ``candidate_actions`` lists them in.
@lru_cache(maxsize=1024)
def _broker_candidates(scope: Scope, i: BrokerId) -> tuple[Action, ...]:
    """A broker's own candidates, whatever the state: its ZooKeeper-mode life and its IBP changes."""
    return (
        OpenSession(i),
        RegisterBroker(i),
        ObserveControllerEpoch(i),
        ElectController(i),
        ResignController(i),
        InitializeController(i),
        ProcessBrokerChange(i),
        RefreshFeatureCache(i),
        SendControlledShutdown(i),
        RestartBroker(i),
        CrashBroker(i),
        StopBroker(i),
        *(ChangeIbp(i, ibp) for ibp in scope.ibp_choices),
    )


@lru_cache(maxsize=1024)
def _driver_candidates(i: ControllerId) -> tuple[Action, ...]:
    """The migration driver's events of controller ``i``, in the driver's order."""
    return (
        RecoverMigrationState(i), KRaftLeaderChange(i), WaitForControllerQuorum(i), WaitForZkBrokers(i),
        BecomeZkController(i), MigrateMetadata(i), CompleteMigration(i), MigrationCommitted(i),
        SyncKRaftToZk(i), SendRPCsToBrokers(i), DualWrite(i),
    )


@lru_cache(maxsize=1024)
def _process_candidates(scope: Scope, i: ControllerId) -> tuple[Action, ...]:
    """Controller ``i``'s process events: crash, shutdown, restart and the scope's reconfigurations."""
    return (CrashController(i), ShutdownController(i), RestartController(i),
            *(ReconfigureController(i, enabled) for enabled in scope.controller_flag_choices))
