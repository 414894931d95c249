"""Named scopes: the bounds under which the model is checked, and the states checks start from.

A scope fixes the cluster's shape (brokers, partition assignment, IBPs, supported feature
ranges, the /features znode at the start), the perturbation budgets, the cap on messages in
flight, and the parameters that operator actions may take. ``initial_state(scope)`` builds the
start state; a *warm* scope starts from a running cluster, reached by running a canonical
prefix of real ``step``s from the cold start (so a warm start is itself a reachable state):
every broker opens a session and registers, broker 0 wins the election and initializes; its
start-up requests are still in flight.

A warm start is taken under a profile's rules (``warm_up(scope, profile)``): the checks and their
pinned counts start from the ``kip`` one, whatever profile they explore; a script starts from its
own profile's, on the scope as that profile's Kafka would run it (``for_profile``: Kafka 3.9
migrates from metadata.version 3.6-IV1 only). The builders a script shapes a scope with are public:
``migration_scope``, ``small_migration_scope``, ``with_stage``, ``at_metadata_version``,
``for_profile``.
"""

from __future__ import annotations

from collections.abc import Hashable

from model import zookeeper as zkm
from model.actions import (
    Action,
    BecomeLeader,
    BecomeZkController,
    BrokerHeartbeat,
    CompleteMigration,
    Deliver,
    DualWrite,
    ElectController,
    Fetch,
    FetchMetadata,
    InitializeController,
    KRaftLeaderChange,
    MigrateBrokerToKRaft,
    MigrateMetadata,
    MigrationCommitted,
    ObserveControllerEpoch,
    OpenSession,
    RecoverMigrationState,
    RegisterBroker,
    RegisterController,
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
from model.bugs import Variant
from model.kraft import (
    FIRST_CONTROLLER_ID,
    ControllerConfig,
    ControllerId,
    KRaftEpoch,
    QuorumRole,
    UpgradeType,
    image_of,
)
from model.migration import (
    CONFIG,
    DELETED_TOPIC,
    Driver,
    MigrationDriverState,
    Profile,
    pending_deletion_path,
    topic_path,
)
from model.record import Record, record
from model.state import (
    CONTROLLER_EPOCH,
    FEATURES,
    TOPIC,
    Broker,
    BrokerConfig,
    Budget,
    ClusterState,
    FeatureRanges,
    FeaturesZNode,
    KRaftController,
    PartitionState,
    message_sort_key,
    nothing_in_memory,
    partition_state_path,
)
from model.step import step
from model.types import (
    INITIAL_CONTROLLER_EPOCH,
    BrokerId,
    FeatureLevel,
    FeatureStatus,
    Ibp,
    LeaderEpoch,
    PartitionId,
)

GROUP_COORDINATOR = "group_coordinator"  # a feature name from KIP-584's examples


def ranges(**features: tuple[int, int]) -> FeatureRanges:
    return tuple(sorted((name, (FeatureLevel(lo), FeatureLevel(hi))) for name, (lo, hi) in features.items()))


# Properties the correct model breaks under a profile in every scope where their situation arises, whatever its
# budget: findings about the seeds, like a scope's. Kafka 3.9 sets no bound on the write-behind lag (KIP-866
# §Unavailable ZooKeeper asks for one; ``model.kraft_quorum.writes_blocked``): wherever records commit faster than
# the driver writes them, or ZooKeeper is down, kafka-3.9 passes any bound (docs/model.md, the findings).
PROFILE_FINDINGS: tuple[tuple[str, str], ...] = (("kafka-3.9", "WriteBehindLagBounded"),)


def profile_findings(profile: Profile) -> set[str]:
    """The findings of ``profile`` in every scope (``PROFILE_FINDINGS``)."""
    return {prop for p, prop in PROFILE_FINDINGS if p == profile.value}


@record
class Scope(Record):
    name: str
    summary: str
    ibps: tuple[Ibp, ...]  # one per broker; the number of brokers
    supported: tuple[FeatureRanges, ...]  # one per broker
    partitions: tuple[tuple[BrokerId, ...], ...]  # replica assignment, preferred leader first
    budget: Budget
    features_znode: FeaturesZNode | None = None  # /features at the start; None: absent
    warm: bool = True
    ibp_choices: tuple[Ibp, ...] = ()  # values ChangeIbp may set
    feature_updates: tuple[tuple[str, int, bool], ...] = ()  # UpdateFeatures (feature, level, allow_downgrade)
    settled: bool = False  # a warm start delivers its start-up requests before checks begin
    max_depth: int = 12  # depth of the bounded search the seeded-bug tests run
    # ---- model part 2: the KRaft quorum and the migration (defaults: none of it)
    controllers: tuple[ControllerConfig, ...] = ()  # one per KRaft controller, ids from 3000
    broker_flags: tuple[tuple[bool, bool], ...] = ()  # per broker: (migration flag, controller configs)
    zk_config: int | None = None  # /config/cluster at the start
    pending_deletion: bool = False  # a topic whose deletion ZooKeeper has not finished
    stage: str | None = None  # how far a canonical prefix takes the KRaft side (see STAGES)
    controller_flag_choices: tuple[bool, ...] = ()  # values ReconfigureController may set
    metadata_version_choices: tuple[tuple[Ibp, UpgradeType], ...] = ()  # what UpdateMetadataVersion may ask for
    created_replicas: tuple[BrokerId, ...] = ()  # the assignment of a partition an admin's CreatePartitions adds
    # (partition, target replicas) of an admin's AlterPartitionReassignments; None: nothing is ever reassigned
    reassignment: tuple[PartitionId, tuple[BrokerId, ...]] | None = None
    # Properties the correct model breaks here under a profile: findings about the seeds, reported, not bugs.
    findings: tuple[tuple[str, str], ...] = ()  # (profile, property)

    def expected_findings(self, profile: Profile) -> set[str]:
        """This scope's findings under ``profile``, and the profile's own (``PROFILE_FINDINGS``)."""
        return {prop for p, prop in self.findings if p == profile.value} | profile_findings(profile)

    @property
    def brokers(self) -> int:
        return len(self.ibps)


def cold_state(scope: Scope) -> ClusterState:
    """Every broker process just started: no sessions, no controller, the topic already exists."""
    nodes: dict[str, Hashable] = {
        CONTROLLER_EPOCH: INITIAL_CONTROLLER_EPOCH,
        TOPIC: scope.partitions,
    }
    if scope.zk_config is not None:
        nodes[CONFIG] = scope.zk_config
    if scope.pending_deletion:
        nodes[topic_path(DELETED_TOPIC)] = ()
        nodes[pending_deletion_path(DELETED_TOPIC)] = ()
    for p, replicas in enumerate(scope.partitions):
        nodes[partition_state_path(PartitionId(p))] = PartitionState(
            replicas[0], LeaderEpoch(0), replicas, INITIAL_CONTROLLER_EPOCH
        )
    if scope.features_znode is not None:
        nodes[FEATURES] = scope.features_znode
    flags = scope.broker_flags or ((False, False),) * scope.brokers
    brokers = tuple(
        Broker(
            id=BrokerId(i),
            config=BrokerConfig(scope.ibps[i], scope.supported[i], False, *flags[i]),
            alive=True,
            **nothing_in_memory(len(scope.partitions)),
        )
        for i in range(scope.brokers)
    )
    controllers = tuple(
        KRaftController(
            id=ControllerId(FIRST_CONTROLLER_ID + i), config=config, alive=True, epoch=KRaftEpoch(0), voted_for=None,
            log=(), role=QuorumRole.UNATTACHED, leader=None, votes=frozenset(), high_watermark=0, fetched=(),
            active=False, driver=Driver() if config.migration_enabled else None,
        )
        for i, config in enumerate(scope.controllers)
    )
    return ClusterState(zkm.initial(nodes), brokers, frozenset(), scope.budget, controllers)


def initial_state(scope: Scope, profile: Profile = Profile.KIP) -> ClusterState:
    """The scope's start: its warm start under ``profile``'s rules (the checks' is ``kip``'s), or its cold one."""
    return warm_up(scope, profile)[0]


def warm_up(scope: Scope, profile: Profile = Profile.KIP) -> tuple[ClusterState, tuple[Action, ...]]:
    """The scope's initial state and the actions that lead to it from ``cold_state`` (empty when cold),
    each step taken under ``profile``'s rules (ValueError naming the step when the profile refuses one).

    The implementation's differential tests drive the same prefix through the implementation.
    """
    state = cold_state(scope)
    if not scope.warm:
        return state, ()
    taken: list[Action] = []
    variant = Variant(profile=profile)
    if scope.brokers:
        state = _zk_warm_up(state, scope, taken, variant)
    if scope.stage is not None:
        state = _kraft_warm_up(state, scope, taken, variant)
    # The history stays: the next registration of each broker must still beat the warm-up's; and so do
    # the observations of the model-independent properties (the warm-up's steps are real ones).
    return state.replace(budget=scope.budget, ghost=type(state.ghost)(observed=state.ghost.observed)), tuple(taken)


def _zk_warm_up(state: ClusterState, scope: Scope, taken: list[Action], variant: Variant) -> ClusterState:
    state = state.replace(budget=state.budget.replace(elections=1))
    prefix: list[Action] = [a(BrokerId(b)) for b in range(scope.brokers) for a in (OpenSession, RegisterBroker)]
    prefix += [ObserveControllerEpoch(BrokerId(0)), ElectController(BrokerId(0)), InitializeController(BrokerId(0))]
    for action in prefix:
        state = _must_step(state, scope, action, variant)
        taken.append(action)
    while (scope.settled or scope.stage is not None) and state.network:
        deliver = Deliver(min(state.network, key=message_sort_key))
        state = _must_step(state, scope, deliver, variant)
        taken.append(deliver)
    return state


# How far a warm start takes the KRaft side, each stage a goal reached by protocol steps only.
STAGES = ("quorum", "registered", "dual-write", "kraft-brokers")

# The happy path's step kinds, in the order a canonical warm-up prefers them.
_HAPPY_PATH: tuple[type, ...] = (
    Deliver, RecoverMigrationState, BecomeLeader, RequestVote, Fetch, RegisterController, KRaftLeaderChange,
    WaitForControllerQuorum,
    SessionTimeout, RegisterWithKRaft, BrokerHeartbeat, FetchMetadata, WaitForZkBrokers, BecomeZkController,
    MigrateMetadata, CompleteMigration, MigrationCommitted, SyncKRaftToZk, SendRPCsToBrokers, DualWrite,
    RestartBroker,
)


def _kraft_warm_up(state: ClusterState, scope: Scope, taken: list[Action], variant: Variant) -> ClusterState:
    """Run the happy path until the scope's stage holds: a reachable start for a focused scope."""
    stage = scope.stage
    if stage not in STAGES:
        raise ValueError(f"scope {scope.name}: unknown stage {stage!r}; expected one of {', '.join(STAGES)}")
    generous = Budget(kraft_elections=1, migrations=2 * scope.brokers, max_in_flight=64, max_lag=1 << 20,
                      answer_at_commit=scope.budget.answer_at_commit,
                      heartbeats_at_commit=scope.budget.heartbeats_at_commit)
    state = state.replace(budget=generous)
    first = StartElection(ControllerId(FIRST_CONTROLLER_ID))
    state = _must_step(state, scope, first, variant)
    taken.append(first)
    goals = STAGES[: STAGES.index(stage) + 1]
    for goal in goals:
        if goal == "kraft-brokers":
            for b in range(scope.brokers):
                for action in (StopBroker(BrokerId(b)), MigrateBrokerToKRaft(BrokerId(b))):
                    state = _must(state, scope, action, variant)
                    taken.append(action)
        state = _advance(state, scope, goal, taken, variant)
    return state


def _must_step(state: ClusterState, scope: Scope, action: Action, variant: Variant) -> ClusterState:
    nxt = step(state, action, variant)
    if nxt is None:
        raise ValueError(f"scope {scope.name}: the warm start under {variant.profile.value} cannot take {action}")
    return nxt


def _must(state: ClusterState, scope: Scope, action: Action, variant: Variant) -> ClusterState:
    budget = state.budget
    nxt = step(state.replace(budget=budget.replace(restarts=1, migrations=1)), action, variant)
    if nxt is None:
        raise ValueError(f"scope {scope.name}: the warm start under {variant.profile.value} cannot take {action}")
    return nxt.replace(budget=budget)


def _advance(state: ClusterState, scope: Scope, goal: str, taken: list[Action], variant: Variant) -> ClusterState:
    from model.step import candidate_actions

    for _ in range(500):
        if _stage_reached(state, goal):
            return state
        for kind in _HAPPY_PATH:
            moved = False
            for action in candidate_actions(state, scope):
                if type(action) is kind:
                    nxt = step(state, action, variant)
                    if nxt is not None and nxt != state:
                        state, moved = nxt, True
                        taken.append(action)
                        break
            if moved:
                break
        else:
            raise ValueError(f"scope {scope.name}: the warm start under {variant.profile.value} is stuck before "
                             f"stage {goal}")
    raise ValueError(f"scope {scope.name}: the warm start under {variant.profile.value} does not reach stage {goal}")


def _stage_reached(state: ClusterState, goal: str) -> bool:
    if state.network:
        return False
    leader = state.controllers[0]
    caught_up = all(c.log == leader.log and c.high_watermark == len(c.log) for c in state.controllers)
    drivers = [c.driver for c in state.controllers if c.driver is not None]
    settled = caught_up and all(d.state is not MigrationDriverState.UNINITIALIZED and d.kraft_epoch == leader.epoch
                                for d in drivers)
    if goal == "quorum":
        return leader.role is QuorumRole.LEADER and leader.active and settled
    ready = [b for b in state.brokers if b.config.migration_enabled and b.config.controller_configs]
    registered = all(
        (r := image_of(leader.log).registration(b.id)) is not None and not r.fenced and b.kraft_epoch == r.epoch
        for b in ready
    )
    if goal == "registered":
        return settled and registered
    dual = leader.driver is not None and leader.driver.state is MigrationDriverState.DUAL_WRITE
    synced = leader.driver is not None and leader.driver.migration_offset == leader.high_watermark
    if goal == "dual-write":
        return settled and registered and dual and synced
    online = all(b.alive and b.config.kraft_mode and b.image.offset == leader.high_watermark and
                 b.lifecycle.value == "Online" for b in state.brokers)
    return settled and dual and synced and online


SAME_RANGE = ranges(group_coordinator=(1, 3))

SCOPES: dict[str, Scope] = {
    s.name: s
    for s in (
        Scope(
            name="fencing",
            summary="2 brokers, 1 partition on both; the controller's session can expire and a new one win",
            ibps=(Ibp.IBP_2_7_IV0,) * 2,
            supported=(SAME_RANGE,) * 2,
            partitions=((BrokerId(0), BrokerId(1)),),
            budget=Budget(expiries=2, elections=2, drops=1, operator=1, shutdowns=1, max_in_flight=6),
            feature_updates=((GROUP_COORDINATOR, 2, True),),
            max_depth=9,
        ),
        Scope(
            name="election",
            summary="2 brokers racing for /controller across session expiries and clean stops",
            ibps=(Ibp.IBP_2_7_IV0,) * 2,
            supported=(SAME_RANGE,) * 2,
            partitions=((BrokerId(0), BrokerId(1)),),
            budget=Budget(expiries=2, elections=2, restarts=1, max_in_flight=6),
            settled=True,
            max_depth=10,
        ),
        Scope(
            name="bounce",
            summary="2 brokers, 1 partition; a broker bounces (fast) around a ControlledShutdown",
            ibps=(Ibp.IBP_2_7_IV0,) * 2,
            supported=(SAME_RANGE,) * 2,
            partitions=((BrokerId(0), BrokerId(1)),),
            budget=Budget(restarts=1, shutdowns=1, max_in_flight=8),
            max_depth=8,
        ),
        Scope(
            name="leader-bounce",
            summary="2 brokers; the partition's leader is not the controller, and it bounces",
            ibps=(Ibp.IBP_2_7_IV0,) * 2,
            supported=(SAME_RANGE,) * 2,
            partitions=((BrokerId(1), BrokerId(0)),),
            budget=Budget(restarts=1, shutdowns=1, max_in_flight=8),
            max_depth=8,
        ),
        Scope(
            name="features",
            summary="2 brokers with different supported ranges; UpdateFeatures and a broker restart",
            ibps=(Ibp.IBP_2_7_IV0,) * 2,
            supported=(ranges(group_coordinator=(1, 3)), ranges(group_coordinator=(1, 2))),
            partitions=((BrokerId(0), BrokerId(1)),),
            budget=Budget(restarts=1, operator=1, max_in_flight=6),
            features_znode=FeaturesZNode(FeatureStatus.ENABLED, ranges(group_coordinator=(1, 2))),
            feature_updates=(
                (GROUP_COORDINATOR, 3, False),
                (GROUP_COORDINATOR, 1, False),
                (GROUP_COORDINATOR, 1, True),
                (GROUP_COORDINATOR, 0, True),
            ),
            max_depth=8,
        ),
        Scope(
            name="features-upgrade",
            summary="KIP-584 upgrade case: /features Disabled, the next controller runs a newer IBP",
            ibps=(Ibp.IBP_2_6_IV0, Ibp.IBP_2_7_IV0),
            supported=(SAME_RANGE,) * 2,
            partitions=((BrokerId(0), BrokerId(1)),),
            budget=Budget(expiries=1, elections=1, max_in_flight=6),
            features_znode=FeaturesZNode(FeatureStatus.DISABLED, ()),
            max_depth=8,
        ),
        Scope(
            name="features-downgrade",
            summary="KIP-584 downgrade case: /features Enabled, the next controller runs an older IBP",
            ibps=(Ibp.IBP_2_7_IV0, Ibp.IBP_2_6_IV0),
            supported=(SAME_RANGE,) * 2,
            partitions=((BrokerId(0), BrokerId(1)),),
            budget=Budget(expiries=1, elections=1, max_in_flight=6),
            features_znode=FeaturesZNode(FeatureStatus.ENABLED, ranges(group_coordinator=(1, 3))),
            max_depth=8,
        ),
        Scope(
            name="cluster",
            summary="3 brokers, 2 partitions, every kind of perturbation several times: for long random walks",
            ibps=(Ibp.IBP_2_7_IV0,) * 3,
            supported=(SAME_RANGE, SAME_RANGE, ranges(group_coordinator=(1, 2))),
            partitions=((BrokerId(0), BrokerId(1)), (BrokerId(1), BrokerId(2))),
            budget=Budget(
                crashes=3,
                restarts=3,
                expiries=4,
                elections=6,
                outages=2,
                drops=3,
                duplicates=2,
                operator=4,
                shutdowns=3,
                max_in_flight=10,
            ),
            features_znode=FeaturesZNode(FeatureStatus.ENABLED, ranges(group_coordinator=(1, 2))),
            ibp_choices=(Ibp.IBP_2_6_IV0, Ibp.IBP_2_7_IV0),
            feature_updates=((GROUP_COORDINATOR, 3, False), (GROUP_COORDINATOR, 1, True)),
            max_depth=14,
        ),
    )
}


# ---- model part 2: the migration's scopes -------------------------------------------------------

MIGRATING = ControllerConfig(migration_enabled=True)
# Deleting /controller_epoch (KIP-866 §Rollback to ZK) lets the next ZK controller reuse epoch 1; the
# properties keyed by controller epoch report it (leader terms are kept per controller epoch too).
# The re-created znode's version starts at 0 again, so a broker that read (0, version 0) before the
# migration passes the election's compare-and-set long after (an ABA the simulator found):
# EveryElectionBumpsControllerEpoch.
ROLLBACK_REUSES_ZK_EPOCH = (
    ("kip", "ZkControllerEpochsIncreaseAcrossHandOver"),
    ("kip", "AtMostOneControllerPerEpoch"),
    ("kip", "OneLeaderPerLeaderEpoch"),
    ("kip", "EveryElectionBumpsControllerEpoch"),
)


# Differs: Kafka migrates without a metadata transaction below metadata.version 3.6-IV1 (model.kraft_migration,
# migrates_in_transaction): each batch commits and shows in the image while the state is still PRE_MIGRATION, and a
# failover leaves the partial copy in the log (the next leader copies ZooKeeper again over it). The warm starts
# the checks take are kip's, at 3.4-IV0: under kafka-3.9 such a quorum was formatted by Kafka 3.4 or 3.5.
MIGRATION_WITHOUT_TRANSACTION = (
    ("kafka-3.9", "InitialMigrationAllOrNothing"),
    ("kafka-3.9", "OnlyAllowedWritesInPreMigration"),
)


def rollback_findings(profile: Profile) -> tuple[str, ...]:
    """The properties the rollback's deletion of /controller_epoch breaks under ``profile``."""
    return tuple(prop for p, prop in ROLLBACK_REUSES_ZK_EPOCH if p == profile.value)


KRAFT_ONLY = ControllerConfig(migration_enabled=False)
READY = (True, True)  # a ZK broker with the migration flag and the controller configs


def migration_scope(name: str, summary: str, budget: Budget, **changes: object) -> Scope:
    """Two ZK brokers sharing one partition, with the migration configs, and two migrating controllers
    (settled at the start, stage to be given); ``changes`` replace any field."""
    base = Scope(
        name,
        summary,
        ibps=(Ibp.IBP_3_4_IV0,) * 2,
        supported=(SAME_RANGE,) * 2,
        partitions=((BrokerId(0), BrokerId(1)),),
        budget=budget,
        broker_flags=(READY, READY),
        controllers=(MIGRATING,) * 2,
        zk_config=1,
        settled=True,
    )
    return base.replace(**changes)


def small_migration_scope(name: str, summary: str, budget: Budget, **changes: object) -> Scope:
    """One ZK broker hosting one partition alone, with the migration configs: for scopes explored whole."""
    one_broker: dict[str, object] = dict(
        ibps=(Ibp.IBP_3_4_IV0,), supported=(SAME_RANGE,), partitions=((BrokerId(0),),), broker_flags=(READY,)
    )
    return migration_scope(name, summary, budget, **{**one_broker, **changes})


def with_stage(scope: Scope, stage: str | None) -> Scope:
    """``scope`` with its KRaft side's warm start taken to ``stage`` (one of ``STAGES``; None: left cold)."""
    if stage is not None and stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {', '.join(STAGES)}")
    if not scope.controllers:
        raise ValueError(f"scope {scope.name} has no KRaft side to stage")
    return scope.replace(stage=stage)


def at_metadata_version(scope: Scope, level: Ibp) -> Scope:
    """``scope`` with the cluster at ``level``: every broker's IBP and the quorum's bootstrap metadata.version
    (a ZK broker registers with KRaft only at the finalized level, reference §3.1)."""
    return scope.replace(ibps=(level,) * scope.brokers,
                         controllers=tuple(c.replace(metadata_version=level) for c in scope.controllers))


# Differs: Kafka 3.9 refuses to bootstrap a migration below metadata.version 3.6-IV1 (model.kraft_quorum).
KAFKA_3_9_LOWEST_MIGRATION_LEVEL = Ibp.IBP_3_6_IV1


def for_profile(scope: Scope, profile: Profile) -> Scope:
    """``scope`` as ``profile``'s Kafka would run it, so that its warm start under that profile is one the
    profile accepts. Under ``kafka-3.9`` a quorum that bootstraps with the migration flag needs
    metadata.version 3.6-IV1 or higher: its levels (the quorum's and the brokers' from 3.3-IV0 on) are
    raised in order, the lowest to 3.6-IV1, each other to at least one level above the one below it, so
    that which are equal and which lower stays as the scope has it (pre-migration's broker at another
    IBP stays at another). Every other scope, and every scope under ``kip``, is returned as it is."""
    levels = [c.metadata_version for c in scope.controllers if c.migration_enabled]
    if profile is not Profile.KAFKA_3_9 or not levels or min(levels) >= KAFKA_3_9_LOWEST_MIGRATION_LEVEL:
        return scope
    kraft_era = sorted({lvl for lvl in (*scope.ibps, *(c.metadata_version for c in scope.controllers))
                        if lvl >= Ibp.IBP_3_3_IV0})
    order = list(Ibp)
    raised: dict[Ibp, Ibp] = {}
    floor = KAFKA_3_9_LOWEST_MIGRATION_LEVEL
    for lvl in kraft_era:
        raised[lvl] = max(lvl, floor)
        if raised[lvl] is not order[-1]:
            floor = order[order.index(raised[lvl]) + 1]
    return scope.replace(
        ibps=tuple(raised.get(i, i) for i in scope.ibps),
        controllers=tuple(c.replace(metadata_version=raised.get(c.metadata_version, c.metadata_version))
                          for c in scope.controllers),
    )


MIGRATION_SCOPES = (
    Scope(
        name="kraft-quorum",
        summary="3 KRaft voters of a KRaft-born cluster: split votes, a deposed leader, truncation",
        ibps=(),
        supported=(),
        partitions=(),
        controllers=(KRAFT_ONLY,) * 3,
        budget=Budget(kraft_elections=3, controller_crashes=1, operator=2),
        max_depth=12,
    ),
    small_migration_scope(
        name="kraft-born",
        summary="a KRaft-born quorum of 1 is restarted with the migration flag: it must never migrate",
        controllers=(KRAFT_ONLY,),
        stage="quorum",
        budget=Budget(migrations=3, kraft_elections=1),
        controller_flag_choices=(True,),
        max_depth=18,
    ),
    migration_scope(
        name="pre-migration",
        summary="2 ZK brokers (one at another IBP), 2 migrating controllers: registration, refused writes, a failover",
        ibps=(Ibp.IBP_3_4_IV0, Ibp.IBP_3_6_IV1),
        stage="quorum",
        budget=Budget(kraft_elections=1, controller_crashes=1, operator=1, restarts=1, max_in_flight=8),
        max_depth=14,
    ),
    migration_scope(
        name="migration",
        summary="the claim and the initial migration with a pending topic deletion, and a failover in the middle",
        stage="registered",
        pending_deletion=True,
        findings=MIGRATION_WITHOUT_TRANSACTION,
        budget=Budget(kraft_elections=1, controller_crashes=1, max_in_flight=8),
        max_depth=14,
    ),
    migration_scope(
        name="dual-write",
        summary="dual writes under a ZooKeeper outage, admin writes against the lag bound, a KRaft failover",
        stage="dual-write",
        # The bound must admit the largest atomic batch (a fence and its partition change: 2 records).
        budget=Budget(kraft_elections=1, outages=1, operator=3, max_lag=2, max_in_flight=10),
        metadata_version_choices=((Ibp.IBP_3_6_IV1, UpgradeType.UPGRADE),),
        max_depth=12,
    ),
    migration_scope(
        name="broker-migration",
        summary="rolling restart of ZK brokers into KRaft mode during dual write, with a controlled shutdown",
        stage="dual-write",
        budget=Budget(restarts=1, migrations=2, shutdowns=1, timeouts=1, max_in_flight=10),
        max_depth=14,
    ),
    small_migration_scope(
        name="finalize",
        summary="every broker on KRaft; the controller restarted without the flag, then with it again",
        controllers=(MIGRATING,),
        stage="kraft-brokers",
        budget=Budget(migrations=5, kraft_elections=2, operator=1, max_in_flight=10),
        # With every ZK broker gone, only the migration rule keeps metadata.version from moving.
        metadata_version_choices=(
            (Ibp.IBP_3_6_IV1, UpgradeType.UPGRADE),
            (Ibp.IBP_3_4_IV0, UpgradeType.SAFE_DOWNGRADE),
        ),
        controller_flag_choices=(False, True),
        max_depth=14,
    ),
    small_migration_scope(
        name="finalize-failover",
        summary="1 ZK broker, 2 controllers: the leader stops with its MIGRATION record uncommitted and the"
                " quorum restarts without the flag",
        stage="registered",
        findings=MIGRATION_WITHOUT_TRANSACTION,
        budget=Budget(migrations=4),
        controller_flag_choices=(False,),
        max_depth=15,
    ),
    migration_scope(
        name="rollback",
        summary="a broker on KRaft goes back to ZK, the quorum stops cleanly, /controller is removed, ZK elects",
        stage="dual-write",
        # KIP-866 §Rollback to ZK has the operator delete /controller_epoch too: the next ZK election
        # starts again from epoch 1, an epoch already used (Kafka's documented procedure keeps it).
        findings=ROLLBACK_REUSES_ZK_EPOCH,
        budget=Budget(restarts=1, migrations=5, elections=1, operator=1, max_in_flight=10),
        max_depth=16,
    ),
)

SCOPES.update({s.name: s for s in MIGRATION_SCOPES})

# Small enough to explore completely, which liveness needs (properties.liveness).
LIVENESS_SCOPES = (
    small_migration_scope(
        name="handover",
        summary="1 ZK broker, 1 controller: the whole migration to DUAL_WRITE with a controller crash and a ZK outage",
        controllers=(MIGRATING,),
        stage="quorum",
        findings=MIGRATION_WITHOUT_TRANSACTION,
        budget=Budget(controller_crashes=1, outages=1, max_in_flight=6),
        max_depth=20,
    ),
)
SCOPES.update({s.name: s for s in LIVENESS_SCOPES})

# The whole life of a migration in one small cluster, for random walks and Hypothesis machines:
# each run may finalize it, roll it back, or neither.
LIFECYCLE = small_migration_scope(
    name="lifecycle",
    summary="1 ZK broker, 1 controller, from dual write to finalized or rolled back, for walks and machines",
    controllers=(MIGRATING,),
    stage="dual-write",
    budget=Budget(restarts=2, migrations=4, elections=1, controller_crashes=1, outages=1, operator=1,
                  max_in_flight=6),
    controller_flag_choices=(False,),
    max_depth=9,
    findings=ROLLBACK_REUSES_ZK_EPOCH,
)
SCOPES[LIFECYCLE.name] = LIFECYCLE

# A KRaft broker after the migration restarts once: small enough for liveness to see all of it.
KRAFT_BROKER_RESTART = small_migration_scope(
    name="kraft-broker-restart",
    summary="1 KRaft broker and 1 controller in dual write; the broker restarts, or misses heartbeats until"
            " fenced, and must come back Online",
    controllers=(MIGRATING,),
    stage="kraft-brokers",
    budget=Budget(restarts=1, timeouts=1, max_in_flight=6),
    max_depth=12,
)
SCOPES[KRAFT_BROKER_RESTART.name] = KRAFT_BROKER_RESTART

# Responses lost after their requests took effect (issue #17): the KRaft broker restarts and registers, is
# unfenced, shuts down in a controlled way, and any of those answers may be lost after the controller wrote its
# records; the broker, which learned nothing, sends the same request again.
LOST_RESPONSES = small_migration_scope(
    name="lost-responses",
    summary="1 KRaft broker and 1 controller in dual write; the broker restarts and shuts down, and registration"
            " and heartbeat responses are lost after the controller wrote their records",
    controllers=(MIGRATING,),
    stage="kraft-brokers",
    budget=Budget(restarts=1, shutdowns=1, lost_responses=2, max_in_flight=6),
    max_depth=14,
)
SCOPES[LOST_RESPONSES.name] = LOST_RESPONSES

# A heartbeat held in the network and delivered late (issue #17 §1): the KRaft broker begins a controlled
# shutdown, a heartbeat of it (WantShutDown, the old broker epoch) is held, the process exits, starts again and
# registers with a new epoch, and the held heartbeat reaches the controller, which must take it for stale.
HELD_HEARTBEATS = small_migration_scope(
    name="held-heartbeats",
    summary="1 KRaft broker and 1 controller in dual write; the broker shuts down and restarts, and one of its"
            " heartbeats is held in the network and reaches the controller later",
    controllers=(MIGRATING,),
    stage="kraft-brokers",
    budget=Budget(restarts=1, shutdowns=1, held_requests=1, max_in_flight=6),
    max_depth=16,
)
SCOPES[HELD_HEARTBEATS.name] = HELD_HEARTBEATS

# For the model-independent properties' seeded bugs (model.end_to_end_invariants), three situations no scope
# above has. A KRaft-born quorum of two whose metadata.version an operator moves up, then asks to move down
# (every downgrade between the modelled levels loses metadata), across an election.
KRAFT_METADATA_VERSION = small_migration_scope(
    name="kraft-metadata-version",
    summary="a KRaft-born quorum of 2: an operator upgrades metadata.version, then asks for a downgrade",
    controllers=(KRAFT_ONLY,) * 2,
    stage="quorum",
    budget=Budget(operator=2, kraft_elections=1),
    metadata_version_choices=(
        (Ibp.IBP_3_6_IV1, UpgradeType.UPGRADE),
        (Ibp.IBP_3_4_IV0, UpgradeType.SAFE_DOWNGRADE),
        (Ibp.IBP_3_4_IV0, UpgradeType.UNSAFE_DOWNGRADE),
    ),
    max_depth=10,
)
SCOPES[KRAFT_METADATA_VERSION.name] = KRAFT_METADATA_VERSION

# Two ZK brokers in dual write while ZooKeeper is down, one of them timed out: a partition moves to the other
# with nowhere to write it but KRaft.
DUAL_WRITE_OUTAGE = migration_scope(
    name="dual-write-outage",
    summary="2 ZK brokers in dual write; ZooKeeper goes down and a live broker times out, moving its leadership",
    stage="dual-write",
    budget=Budget(outages=1, timeouts=1, max_in_flight=10),
    max_depth=8,
)
SCOPES[DUAL_WRITE_OUTAGE.name] = DUAL_WRITE_OUTAGE

# A KRaft broker fetching from a leader of three that crashes with a record its followers lack: the two
# others elect a leader without it.
BROKER_FAILOVER = small_migration_scope(
    name="broker-failover",
    summary="1 KRaft broker, 3 controllers in dual write; an admin write, and the leader crashes before its"
            " followers have it",
    controllers=(MIGRATING,) * 3,
    stage="kraft-brokers",
    budget=Budget(controller_crashes=1, operator=1, max_in_flight=6),
    max_depth=8,
)
SCOPES[BROKER_FAILOVER.name] = BROKER_FAILOVER

# The initial migration in batches (zookeeper.metadata.migration.min.batch.size 1: the partition, then the config),
# its transaction open across the steps between them; a leadership change or a ZooKeeper outage may come between
# two batches, and the next leader must abort the transaction and copy ZooKeeper again (KIP-866 §Initial Data
# Migration). At metadata.version 3.6-IV1, so that Kafka 3.9 (kafka-3.9) migrates in a transaction too.
BATCHED = ControllerConfig(migration_enabled=True, migration_batch_size=1)
BATCHED_MIGRATION = at_metadata_version(migration_scope(
    name="batched-migration",
    summary="2 ZK brokers, 2 controllers; the initial migration in 2 batches, a KRaft failover or a ZooKeeper"
            " outage between them",
    controllers=(BATCHED,) * 2,
    stage="registered",
    budget=Budget(kraft_elections=1, outages=1, max_in_flight=8),
    max_depth=14,
), Ibp.IBP_3_6_IV1)  # metadata transactions under kafka-3.9 too (KIP-868)
SCOPES[BATCHED_MIGRATION.name] = BATCHED_MIGRATION

# Controller registrations (KIP-919) happen only under kafka-3.9 from metadata.version 3.7-IV0, which no scope
# above is at. The warm start (under kip) registers no controller, so the kafka-3.9 search registers them, and a
# voter may be restarted without the migration flag and with it again (its registration then lags its flag).
CONTROLLER_REGISTRATION = at_metadata_version(small_migration_scope(
    name="controller-registration",
    summary="1 ZK broker, 2 migrating controllers at metadata.version 3.7-IV0: under kafka-3.9 they register, and"
            " a voter is restarted without the migration flag and with it",
    stage="quorum",
    budget=Budget(migrations=4),
    controller_flag_choices=(False, True),
    max_depth=10,
), Ibp.IBP_3_7_IV0)
SCOPES[CONTROLLER_REGISTRATION.name] = CONTROLLER_REGISTRATION

# A KRaft controller whose ZooKeeper server lags (model.zookeeper views): its driver's reads of /migration,
# /controller_epoch, /controller and the metadata may be as old as the last time it looked, across a failover.
# Only the versions its writes carry, checked at ZooKeeper's leader, keep a stale read from doing harm.
STALE_READS = small_migration_scope(
    name="stale-reads",
    summary="1 ZK broker, 2 migrating controllers: a controller's ZooKeeper server lags through the claim and a"
            " KRaft failover",
    stage="registered",
    budget=Budget(stale_reads=1, kraft_elections=1, max_in_flight=6),
    max_depth=16,
    # kafka-3.9 migrates at 3.4-IV0 with no transaction. MigrationOffsetNeverGoesBack (17 steps): a deposed driver's
    # post-claim write of /migration (BecomeZkController, KAFKA-16171) is unconditional, with no /controller_epoch
    # check, as Kafka 3.9's KafkaZkClient.updateMigrationState is (a plain setData at version -1); from a lagging read
    # it undoes the new leader's MigrationCommitted (docs/model.md, Findings).
    findings=MIGRATION_WITHOUT_TRANSACTION + (("kip", "MigrationOffsetNeverGoesBack"),
                                              ("kafka-3.9", "MigrationOffsetNeverGoesBack")),
)
SCOPES[STALE_READS.name] = STALE_READS

# Partitions created during the migration (issue #17): an admin's CreatePartitions, served in ZooKeeper mode
# (AddPartitions, then the ZK controller's ProcessPartitionModifications) or, once KRaft has claimed ZooKeeper, by
# the active KRaft controller, whose dual write must create the new partition in ZooKeeper. The creation may come
# before the claim with its state znode not yet written (the migration copies it as Kafka does), during the copy
# (refused in pre-migration), or in dual write.
CREATE_PARTITIONS = small_migration_scope(
    name="create-partitions",
    summary="1 ZK broker, 1 controller: an admin adds a partition in ZooKeeper mode, during the migration or in"
            " dual write",
    controllers=(MIGRATING,),
    stage="registered",
    budget=Budget(partition_creations=1, max_in_flight=6),
    created_replicas=(BrokerId(0),),
    findings=MIGRATION_WITHOUT_TRANSACTION,
    max_depth=16,
)
SCOPES[CREATE_PARTITIONS.name] = CREATE_PARTITIONS
# The migration driver's event queue (KAFKA-16667): a MetadataChangeEvent queued in dual write runs later, perhaps
# after a KRaft failover has made it stale (raised under another leader and epoch). Kafka 3.8+ drops it; the seeded
# bug stale_event_runs runs it, and ZooKeeper goes back to its image.
EVENT_QUEUE = small_migration_scope(
    name="event-queue",
    summary="1 ZK broker, 2 migrating controllers in dual write: MetadataChangeEvents queued under one leadership run"
            " under the next",
    stage="dual-write",
    budget=Budget(queued_events=1, kraft_elections=1, operator=2, max_in_flight=6),
    max_depth=12,
)
SCOPES[EVENT_QUEUE.name] = EVENT_QUEUE

# Reassignments during the migration (issue #17, KAFKA-16120): an admin's AlterPartitionReassignments adds broker 1
# to partition 0's replicas, served by the ZK controller in ZooKeeper mode, refused in pre-migration, or by the
# active KRaft controller in dual write, whose LeaderAndIsr must reach the ZK broker leading the partition at a
# newer leader epoch for it to learn the new replica.
REASSIGNMENT = small_migration_scope(
    name="reassignment",
    summary="2 ZK brokers, 1 controller: an admin adds a replica to a partition in ZooKeeper mode, during the"
            " migration or in dual write",
    ibps=(Ibp.IBP_3_4_IV0,) * 2,
    supported=(SAME_RANGE,) * 2,
    broker_flags=(READY, READY),
    controllers=(MIGRATING,),
    stage="registered",
    budget=Budget(reassignments=1, max_in_flight=8),
    reassignment=(PartitionId(0), (BrokerId(0), BrokerId(1))),
    findings=MIGRATION_WITHOUT_TRANSACTION,
)
SCOPES[REASSIGNMENT.name] = REASSIGNMENT
# A reassignment that drops a replica (KIP-866 §ZK Broker RPCs: "following reassignments ... we will need to send
# StopReplicas to ZK brokers"): the admin moves partition 0 from broker 0 to broker 1. The ZK controller refuses it
# (its one-step move keeps the leader), the KRaft controller starts it in dual write, the leader asks for broker 1's
# ISR join, and the completion drops broker 0, whose dual write must send it StopReplica with deletePartition.
REASSIGNMENT_MOVE = REASSIGNMENT.replace(
    name="reassignment-move",
    summary="2 ZK brokers, 1 controller: an admin moves a partition off its only replica during the migration or in"
            " dual write; the completion drops the old replica",
    reassignment=(PartitionId(0), (BrokerId(1),)),
    max_depth=14,  # a completion without StopReplica shows at 14 steps: the migration, the move, the ISR join
)
SCOPES[REASSIGNMENT_MOVE.name] = REASSIGNMENT_MOVE

# A dual write that fails (issue #17, found on Kafka 3.9.2): ZooKeeper stalls past the KRaft controller's session
# timeout while a MetadataChangeEvent's write waits on it, and the write fails with the session expired. KIP-866
# §Failure Modes retries the change within the lag bound; Kafka 3.9's driver has already taken the event's image as
# its own, and the next MetadataChangeEvent writes only its own delta: a partition created on KRaft during the stall
# is left out of ZooKeeper, and its LeaderAndIsr never reaches the ZK brokers, until the next failover's sync.
# The three properties that see it (4 steps): ZooKeeper is not the image at /migration's offset, nor is it for the
# model-independent ServedMetadataSurvivesFailover, and the quiesced ZK broker never learns of the new partition.
FAILED_WRITE_LOSES_DELTA = (
    ("kafka-3.9", "ZkEqualsImageAtMigrationOffset"),
    ("kafka-3.9", "ServedMetadataSurvivesFailover"),
    ("kafka-3.9", "ZkBrokersConvergeToCommittedImage"),
)
DUAL_WRITE_FAILURE = small_migration_scope(
    name="dual-write-failure",
    summary="1 ZK broker, 1 controller in dual write: an admin adds a partition and alters a config, and one dual"
            " write fails (its ZooKeeper session expired while it waited)",
    controllers=(MIGRATING,),
    stage="dual-write",
    budget=Budget(write_failures=1, partition_creations=1, operator=1, max_in_flight=6),
    created_replicas=(BrokerId(0),),
    findings=FAILED_WRITE_LOSES_DELTA,
)
SCOPES[DUAL_WRITE_FAILURE.name] = DUAL_WRITE_FAILURE

# A ZooKeeper-mode broker whose ZooKeeper server lags (model.zookeeper views) while it is not the controller: it
# reads /controller and /controller_epoch for its election, its own /brokers/ids znode and /controller for a
# ControlledShutdown through that server, across the controller's session expiring and a new election. Only the
# election's multi (the create of /controller, the set of /controller_epoch at the version read) fences a stale read.
ZK_LAG = Scope(
    name="zk-lag",
    summary="2 brokers racing for /controller; a broker's ZooKeeper server lags through an expiry and an election",
    ibps=(Ibp.IBP_2_7_IV0,) * 2,
    supported=(SAME_RANGE,) * 2,
    partitions=(),
    budget=Budget(expiries=2, elections=2, broker_stale_reads=1, max_in_flight=4),
    settled=True,
    max_depth=12,
)
SCOPES[ZK_LAG.name] = ZK_LAG

# Registrations answered only once their records commit (issue #17; QuorumController's deferred event queue): the
# ZK broker registers with a quorum of 2 before the migration, and the leader may crash before the registration
# commits; its answer then fails (NOT_CONTROLLER) and the broker asks again once a leader is back. (With 2 voters
# the restarted leader wins again and commits the record; truncating it takes 3, too many states to explore whole:
# tests/test_purgatory.py shows that failover by a script.) The warm start registers no broker, so a seeded bug
# that answers before commit shows in the search, not in the warm-up.
PURGATORY = small_migration_scope(
    name="purgatory",
    summary="1 ZK broker, 2 migrating controllers: the broker registers with KRaft, answered once the record"
            " commits; the leader may crash first",
    stage="quorum",
    budget=Budget(controller_crashes=1, answer_at_commit=True, max_in_flight=6),
    findings=MIGRATION_WITHOUT_TRANSACTION,
    max_depth=16,
)
SCOPES[PURGATORY.name] = PURGATORY

# A dual write whose reply is lost (issue #17, found on Kafka 3.9.2 and 3.6.2): ZooKeeper applies a
# MetadataChangeEvent's multi, the controller's connection times out while ZooKeeper stalls, and its client resends
# the multi, whose copy fails on /migration's version. KIP-866 §Migration State ZNode fences only a newer election:
# the driver finds its own write and goes on. Kafka 3.9 keeps the stale version, so the new partition's LeaderAndIsr
# is never sent and every later dual write of the leadership fails until a failover. The property that sees it
# (2 steps: the partition added, the write whose reply is lost): the quiesced ZK broker never learns of the new
# partition. (The wedge itself is liveness's: ActiveDriverNeverStaysInactive, the model's driver parked in INACTIVE
# at its next dual write.)
RESEND_WEDGES_DUAL_WRITE = (("kafka-3.9", "ZkBrokersConvergeToCommittedImage"),)
DUAL_WRITE_RESEND = small_migration_scope(
    name="dual-write-resend",
    summary="1 ZK broker, 1 controller in dual write: an admin adds a partition and alters a config, and one dual"
            " write applies but loses its reply (the resent copy fails on /migration's version)",
    controllers=(MIGRATING,),
    stage="dual-write",
    budget=Budget(lost_write_replies=1, partition_creations=1, operator=1, max_in_flight=6),
    created_replicas=(BrokerId(0),),
    findings=RESEND_WEDGES_DUAL_WRITE,
)
SCOPES[DUAL_WRITE_RESEND.name] = DUAL_WRITE_RESEND
# Topic deletions during the migration (issue #17): an admin's DeleteTopics of the one topic, in ZooKeeper mode (the
# mark in /admin/delete_topics, then the ZK controller's deletion, which a migration may overtake: KIP-866 §Topic
# Deletions, KAFKA-15605), or on the active KRaft controller, refused in pre-migration, and in dual write a
# RemoveTopicRecord that the driver deletes from ZooKeeper and stops on the ZK brokers with StopReplica
# (deletePartitions); both brokers host the partition.
DELETE_TOPICS = small_migration_scope(
    name="delete-topics",
    summary="2 ZK brokers hosting one partition, 1 controller: an admin deletes the topic in ZooKeeper mode (pending"
            " when the migration starts, or not), during the migration or in dual write",
    ibps=(Ibp.IBP_3_4_IV0,) * 2,
    supported=(SAME_RANGE,) * 2,
    partitions=((BrokerId(0), BrokerId(1)),),
    broker_flags=(READY, READY),
    controllers=(MIGRATING,),
    stage="registered",
    budget=Budget(topic_deletions=1, max_in_flight=8),
    findings=MIGRATION_WITHOUT_TRANSACTION,
    max_depth=14,  # a StopReplica without deletePartitions shows at 14 steps: the migration, the deletion, quiescence
)
SCOPES[DELETE_TOPICS.name] = DELETE_TOPICS
# A topic deleted in dual write while a ZK broker is fenced (issue #17 §4; the Kafka bug the real runs' broker-metadata
# channel found on 3.7.2 to 3.9.2, docs/guide/real-kafka.md): a broker's heartbeats go unheard for a session timeout,
# KRaft fences it, the admin deletes the topic, and the broker heartbeats again and is unfenced. kafka-3.9 skips the
# fenced broker's StopReplica and tells it the change in an incremental UpdateMetadata, which leaves the deleted
# topic cached and hosted: the model-independent properties catch Kafka's behaviour, which its profile shares.
FENCED_BROKER_MISSES_DELETION = (
    ("kafka-3.9", "ZkBrokersConvergeToCommittedImage"),
    ("kafka-3.9", "ZkBrokersDropDeletedTopic"),
)
DELETION_WHILE_FENCED = migration_scope(
    name="deletion-while-fenced",
    summary="2 ZK brokers hosting one partition, 1 controller in dual write: a broker is fenced for a session"
            " timeout, an admin deletes the topic on KRaft, and the broker is unfenced again",
    controllers=(MIGRATING,),
    stage="dual-write",
    budget=Budget(topic_deletions=1, timeouts=1, max_in_flight=8),
    findings=FENCED_BROKER_MISSES_DELETION,
    max_depth=14,
)
SCOPES[DELETION_WHILE_FENCED.name] = DELETION_WHILE_FENCED
# Heartbeats answered only once the log up to them commits (issue #17; QuorumController.processBrokerHeartbeat's
# future in the deferred event queue): the ZK broker in dual write moves to KRaft, registers and is unfenced by a
# heartbeat with 2 controllers, each answer once the log up to it commits. The warm start unfences no KRaft broker,
# so a seeded bug that answers before commit shows in the search, not in the warm-up. (A leader crash on top,
# failing the waiting answers, takes the search past 15 minutes: heartbeat-transaction's KRaft election and
# tests/test_heartbeat_commit.py's scripts show that failure.)
HEARTBEAT_COMMIT = small_migration_scope(
    name="heartbeat-commit",
    summary="1 ZK broker, 2 controllers in dual write: the broker moves to KRaft, registers and is unfenced, each"
            " answer once the log up to it commits",
    stage="dual-write",
    budget=Budget(restarts=1, migrations=1, answer_at_commit=True, heartbeats_at_commit=True, max_in_flight=6),
    max_depth=16,
)
SCOPES[HEARTBEAT_COMMIT.name] = HEARTBEAT_COMMIT

# A heartbeat while the migration's transaction is open (issue #17; KAFKA-15441): the ZK broker registers with 2
# controllers migrating in batches of one record (the transaction open across the steps between them), and each
# heartbeat waits until the log up to it is stable. kip holds it until the transaction ends (the deferred event
# queue's lastStableOffset); kafka-3.9 answers it at the Raft commit (a RUNS_IN_PREMIGRATION event in pre-migration
# goes to the unstable queue). A failover between two batches fails the waiting heartbeat (NOT_CONTROLLER).
HEARTBEAT_TRANSACTION = at_metadata_version(small_migration_scope(
    name="heartbeat-transaction",
    summary="1 ZK broker, 2 controllers migrating in 2 batches: the broker's heartbeats answered once the log up to"
            " them is stable (kip: after the transaction; kafka-3.9: at commit); a KRaft failover between batches",
    controllers=(BATCHED,) * 2,
    stage="quorum",
    budget=Budget(kraft_elections=1, heartbeats_at_commit=True, max_in_flight=6),
    max_depth=16,
), Ibp.IBP_3_6_IV1)
SCOPES[HEARTBEAT_TRANSACTION.name] = HEARTBEAT_TRANSACTION

# A failover that takes back an unfencing (issue #17; docs/guide/real-kafka.md, Findings): the ZK broker registers
# with one controller migrating in batches of one record and heartbeats while the transaction is open, and the
# controller is killed and restarted once, as a real Kafka run met it. Activation aborts the transaction and with it
# the unfencing inside. kip unfences the broker again on its next heartbeat; kafka-3.9's BrokerHeartbeatManager,
# filled before the abort, still counts it unfenced and writes nothing, so it stays fenced in KRaft's image for good
# (MigratingZkBrokerEventuallyUnfenced violated on the complete graph; tests/test_aborted_unfencing.py). One
# controller, as in the run: with two, a failed election leaves the model's quorum without a leader for good, which
# breaks every goal in heartbeat-transaction.
ABORTED_UNFENCING = at_metadata_version(small_migration_scope(
    name="aborted-unfencing",
    summary="1 ZK broker, 1 controller migrating in 2 batches, killed and restarted once: the abort of the"
            " transaction takes back the broker's unfencing (kip unfences it again, kafka-3.9 never does)",
    controllers=(BATCHED,),
    stage="quorum",
    budget=Budget(controller_crashes=1, timeouts=1, heartbeats_at_commit=True, max_in_flight=6),
    max_depth=16,
), Ibp.IBP_3_6_IV1)
SCOPES[ABORTED_UNFENCING.name] = ABORTED_UNFENCING

# A LeaderAndIsr that fails inside a ZK broker (issue #17; docs/guide/real-kafka.md, Findings: met on Kafka 3.5.2,
# 3.7.2, 3.8.1 and 3.9.2): in dual write an admin adds broker 1 to partition 0, broker 1's ZooKeeper session expires,
# and the KRaft controller's LeaderAndIsr making it a follower reaches it while its client starts a new one; the
# request also names a partition new to it, whose log it cannot create, and it answers UNKNOWN_SERVER_ERROR: it took
# the new leader epoch and started no fetcher, so broker 1 never joins the ISR, the reassignment never completes, and
# nothing sends the partition again at a newer epoch (FailedLeaderAndIsrIsRepaired violated on kafka-3.9's complete
# graph; tests/test_failed_leader_and_isr.py). kip's broker takes the request whole: the failure is kafka-3.9's.
FAILED_LEADER_AND_ISR = REASSIGNMENT.replace(
    name="failed-leader-and-isr",
    summary="2 ZK brokers, 1 controller in dual write: an admin adds broker 1 to a partition as broker 1's ZooKeeper"
            " session expires; kafka-3.9's LeaderAndIsr making it a follower fails inside it: no fetcher, for good",
    stage="dual-write",
    budget=Budget(reassignments=1, expiries=1, failed_leader_and_isrs=1, max_in_flight=8),
    findings=(),
)
SCOPES[FAILED_LEADER_AND_ISR.name] = FAILED_LEADER_AND_ISR
