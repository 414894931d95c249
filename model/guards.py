"""Cheap necessary conditions of the actions' handlers: which candidates are worth handing to ``step``.

Why: ``model.step.candidate_actions`` lists every action that might be enabled and the handler decides.
In the migration scope about 70 candidates a state reach a handler and about 65 are refused, most by
the first lines of the handler (a process that is not running, a spent budget, a driver in another
state). A refusal still costs a dispatch, the handler's lookups and a refusal record, several times
what the test below costs. The exploration and the simulator ask ``successors``, which skips a
candidate whose guard is false.

Rules:
- A guard is the conjunction of some of the checks its handler makes before any other, each of which
  refuses with no state (``Refused(..., after=None)``): a false guard means ``step`` returns None, so
  skipping the candidate changes no successor. Nothing else goes in a guard: a check that may answer
  "delivered, refused" (a state after all) or that depends on a seeded bug stays in the handler.
- An action without a guard is always handed over. A handler that changes its first checks changes
  its guard too; ``tests/test_guards.py`` explores every scope, with and without each seeded bug, and
  compares the successors with those of every candidate handed over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from model.actions import (
    BecomeLeader,
    BecomeZkController,
    BeginControlledShutdown,
    BrokerHeartbeat,
    ChangeIbp,
    CompleteMigration,
    CrashBroker,
    CrashController,
    DeleteControllerZNodes,
    Drop,
    DualWrite,
    DualWriteReplyLost,
    DualWriteSessionExpired,
    ElectController,
    ExpireSession,
    FetchMetadata,
    InitializeController,
    KRaftLeaderChange,
    MigrateBrokerToKRaft,
    MigrateMetadata,
    MigrationCommitted,
    ObserveControllerEpoch,
    OpenSession,
    ProcessBrokerChange,
    ReconfigureController,
    RecoverMigrationState,
    Redeliver,
    RefreshFeatureCache,
    RegisterBroker,
    RegisterController,
    RegisterWithKRaft,
    RequestVote,
    ResignController,
    RestartBroker,
    RestartController,
    RollbackBrokerToZk,
    SendControlledShutdown,
    SendRPCsToBrokers,
    SessionTimeout,
    ShutdownController,
    StartElection,
    StopBroker,
    SyncKRaftToZk,
    WaitForControllerQuorum,
    WaitForZkBrokers,
    ZkOutage,
    ZkRecover,
)
from model.bugs import Variant
from model.kraft import BrokerState, QuorumRole
from model.kraft_quorum import may_heartbeat, may_register
from model.migration import MigrationDriverState as D
from model.migration import Profile
from model.state import ClusterState, controller_index

Guard = Callable[[ClusterState, Any, Variant], bool]


# ---- ZooKeeper and ZooKeeper-mode brokers (model.zk_era) ----------------------------------------


def _zk_outage(s: ClusterState, a: ZkOutage, v: Variant) -> bool:
    return s.zk.available and s.budget.outages > 0


def _zk_recover(s: ClusterState, a: ZkRecover, v: Variant) -> bool:
    return not s.zk.available


def _expire_session(s: ClusterState, a: ExpireSession, v: Variant) -> bool:
    return s.zk.available and s.budget.expiries > 0


def _drop(s: ClusterState, a: Drop, v: Variant) -> bool:
    return s.budget.drops > 0


def _redeliver(s: ClusterState, a: Redeliver, v: Variant) -> bool:
    return s.budget.duplicates > 0


def _crash_broker(s: ClusterState, a: CrashBroker, v: Variant) -> bool:
    return s.budget.crashes > 0 and s.brokers[a.broker].alive


def _stop_broker(s: ClusterState, a: StopBroker, v: Variant) -> bool:
    return s.budget.restarts > 0 and s.brokers[a.broker].alive


def _restart_broker(s: ClusterState, a: RestartBroker, v: Variant) -> bool:
    return not s.brokers[a.broker].alive


def _change_ibp(s: ClusterState, a: ChangeIbp, v: Variant) -> bool:
    return s.budget.operator > 0 and not s.brokers[a.broker].alive


def _open_session(s: ClusterState, a: OpenSession, v: Variant) -> bool:
    b = s.brokers[a.broker]
    return b.alive and not b.config.kraft_mode and s.zk.available


def _register_broker(s: ClusterState, a: RegisterBroker, v: Variant) -> bool:
    b = s.brokers[a.broker]
    return b.alive and s.zk.available and not b.registered


def _send_controlled_shutdown(s: ClusterState, a: SendControlledShutdown, v: Variant) -> bool:
    b = s.brokers[a.broker]
    return s.budget.shutdowns > 0 and b.alive and s.zk.available and b.registered and not b.shutdown_sent


def _refresh_feature_cache(s: ClusterState, a: RefreshFeatureCache, v: Variant) -> bool:
    return s.zk.available and s.brokers[a.broker].alive


def _observe_controller_epoch(s: ClusterState, a: ObserveControllerEpoch, v: Variant) -> bool:
    b = s.brokers[a.broker]
    return b.alive and s.zk.available and b.registered and b.controller is None and b.observed_epoch is None


def _elect_controller(s: ClusterState, a: ElectController, v: Variant) -> bool:
    b = s.brokers[a.broker]
    return s.budget.elections > 0 and b.alive and s.zk.available and b.registered and b.observed_epoch is not None


def _resign_controller(s: ClusterState, a: ResignController, v: Variant) -> bool:
    return s.zk.available and s.brokers[a.broker].controller is not None


def _initialize_controller(s: ClusterState, a: InitializeController, v: Variant) -> bool:
    b = s.brokers[a.controller]
    return b.controller is not None and not b.controller.initialized and b.alive and s.zk.available


def _process_broker_change(s: ClusterState, a: ProcessBrokerChange, v: Variant) -> bool:
    b = s.brokers[a.controller]
    return b.controller is not None and b.controller.initialized and b.alive and s.zk.available


# ---- the KRaft quorum and KRaft-facing brokers (model.kraft_quorum) -----------------------------


def _start_election(s: ClusterState, a: StartElection, v: Variant) -> bool:
    c = s.controllers[controller_index(a.controller)]
    return c.alive and c.role is not QuorumRole.LEADER


def _request_vote(s: ClusterState, a: RequestVote, v: Variant) -> bool:
    candidate = s.controllers[controller_index(a.controller)]
    return (
        candidate.alive
        and candidate.role is QuorumRole.CANDIDATE
        and a.voter not in candidate.votes
        and s.controllers[controller_index(a.voter)].alive
    )


def _become_leader(s: ClusterState, a: BecomeLeader, v: Variant) -> bool:
    c = s.controllers[controller_index(a.controller)]
    return c.alive and c.role is QuorumRole.CANDIDATE


def _crash_controller(s: ClusterState, a: CrashController, v: Variant) -> bool:
    return s.budget.controller_crashes > 0 and s.controllers[controller_index(a.controller)].alive


def _shutdown_controller(s: ClusterState, a: ShutdownController, v: Variant) -> bool:
    return s.budget.migrations > 0 and s.controllers[controller_index(a.controller)].alive


def _restart_controller(s: ClusterState, a: RestartController, v: Variant) -> bool:
    return not s.controllers[controller_index(a.controller)].alive


def _reconfigure_controller(s: ClusterState, a: ReconfigureController, v: Variant) -> bool:
    c = s.controllers[controller_index(a.controller)]
    return s.budget.migrations > 0 and not c.alive and c.config.migration_enabled != a.migration_enabled


def _register_controller(s: ClusterState, a: RegisterController, v: Variant) -> bool:
    return v.profile is Profile.KAFKA_3_9


def _register_with_kraft(s: ClusterState, a: RegisterWithKRaft, v: Variant) -> bool:
    return may_register(s.brokers[a.broker]) is None  # the handler's own first checks


def _broker_heartbeat(s: ClusterState, a: BrokerHeartbeat, v: Variant) -> bool:
    return may_heartbeat(s.brokers[a.broker]) is None  # the handler's own first checks


def _fetch_metadata(s: ClusterState, a: FetchMetadata, v: Variant) -> bool:
    b = s.brokers[a.broker]
    c = s.controllers[controller_index(a.controller)]
    return b.alive and b.config.kraft_mode and c.alive and c.role is QuorumRole.LEADER


def _session_timeout(s: ClusterState, a: SessionTimeout, v: Variant) -> bool:
    c = s.controllers[controller_index(a.controller)]
    return c.alive and c.role is QuorumRole.LEADER and c.active


def _begin_controlled_shutdown(s: ClusterState, a: BeginControlledShutdown, v: Variant) -> bool:
    b = s.brokers[a.broker]
    return (
        s.budget.shutdowns > 0
        and b.alive
        and b.config.kraft_mode
        and not b.want_shutdown
        and b.lifecycle is BrokerState.ONLINE
    )


# ---- the migration (model.kraft_migration) ------------------------------------------------------


def _driver_in(*states: D) -> Guard:
    """A driver event's guard: its controller runs, has a driver, and the driver is in one of ``states``."""
    # A tuple, not a set: ``in`` on a tuple of one or two members tries identity first, in C, where a set
    # hashes the member through Enum.__hash__, a Python call (a tenth of the guards' time in the migration scope).
    allowed = tuple(states)

    def guard(s: ClusterState, a: Any, v: Variant) -> bool:
        c = s.controllers[controller_index(a.controller)]
        return c.alive and c.driver is not None and c.driver.state in allowed

    return guard


def _kraft_leader_change(s: ClusterState, a: KRaftLeaderChange, v: Variant) -> bool:
    c = s.controllers[controller_index(a.controller)]
    return c.alive and c.driver is not None and c.driver.state is not D.UNINITIALIZED


def _migrate_broker(s: ClusterState, a: MigrateBrokerToKRaft, v: Variant) -> bool:
    b = s.brokers[a.broker]
    return s.budget.migrations > 0 and not b.alive and not b.config.kraft_mode and b.config.migration_enabled


def _rollback_broker(s: ClusterState, a: RollbackBrokerToZk, v: Variant) -> bool:
    b = s.brokers[a.broker]
    return s.budget.migrations > 0 and not b.alive and b.config.kraft_mode and b.meta_properties == 0


def _delete_controller_znodes(s: ClusterState, a: DeleteControllerZNodes, v: Variant) -> bool:
    return s.budget.migrations > 0 and s.zk.available and not any(c.alive for c in s.controllers)


GUARDS: dict[type, Guard] = {
    ZkOutage: _zk_outage,
    ZkRecover: _zk_recover,
    ExpireSession: _expire_session,
    Drop: _drop,
    Redeliver: _redeliver,
    CrashBroker: _crash_broker,
    StopBroker: _stop_broker,
    RestartBroker: _restart_broker,
    ChangeIbp: _change_ibp,
    OpenSession: _open_session,
    RegisterBroker: _register_broker,
    SendControlledShutdown: _send_controlled_shutdown,
    RefreshFeatureCache: _refresh_feature_cache,
    ObserveControllerEpoch: _observe_controller_epoch,
    ElectController: _elect_controller,
    ResignController: _resign_controller,
    InitializeController: _initialize_controller,
    ProcessBrokerChange: _process_broker_change,
    StartElection: _start_election,
    RequestVote: _request_vote,
    BecomeLeader: _become_leader,
    CrashController: _crash_controller,
    ShutdownController: _shutdown_controller,
    RestartController: _restart_controller,
    ReconfigureController: _reconfigure_controller,
    RegisterController: _register_controller,
    RegisterWithKRaft: _register_with_kraft,
    BrokerHeartbeat: _broker_heartbeat,
    FetchMetadata: _fetch_metadata,
    SessionTimeout: _session_timeout,
    BeginControlledShutdown: _begin_controlled_shutdown,
    RecoverMigrationState: _driver_in(D.UNINITIALIZED),
    KRaftLeaderChange: _kraft_leader_change,
    WaitForControllerQuorum: _driver_in(D.WAIT_FOR_CONTROLLER_QUORUM),
    WaitForZkBrokers: _driver_in(D.WAIT_FOR_BROKERS),
    BecomeZkController: _driver_in(D.BECOME_CONTROLLER),
    MigrateMetadata: _driver_in(D.ZK_MIGRATION),
    CompleteMigration: _driver_in(D.ZK_MIGRATION),
    MigrationCommitted: _driver_in(D.ZK_MIGRATION),
    SyncKRaftToZk: _driver_in(D.SYNC_KRAFT_TO_ZK),
    SendRPCsToBrokers: _driver_in(D.KRAFT_CONTROLLER_TO_BROKER_COMM),
    # a seeded bug (dual_write_before_sync) lets it run in SYNC_KRAFT_TO_ZK too
    DualWrite: _driver_in(D.DUAL_WRITE, D.SYNC_KRAFT_TO_ZK),
    DualWriteSessionExpired: _driver_in(D.DUAL_WRITE),
    DualWriteReplyLost: _driver_in(D.DUAL_WRITE),
    MigrateBrokerToKRaft: _migrate_broker,
    RollbackBrokerToZk: _rollback_broker,
    DeleteControllerZNodes: _delete_controller_znodes,
}
