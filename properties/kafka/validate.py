"""Trace validation: every change a real Kafka run showed, explained by a path of model actions.

How it works (in the manner of trace validation against a TLA+ spec: a search for a behaviour of
the model that agrees with the trace, hidden steps allowed):
- The run's operator log becomes the model's environment: each start, stop, kill, pause, outage,
  forced expiry or exit of its own is the model action that does the same (``environment``; a process
  that exited on its own stops when it began to shut down: ``_with_exits``). Nothing else may
  crash, stop or reconfigure a model process. A kill may cut off the killed controller's last log line: one step
  of its migration driver just before it may go unseen (``_after_unlogged_steps``).
- A few facts Kafka logs on every change become the visible part of a model state (``view``):
  each controller's migration driver state, each controller's Raft leadership, who holds
  /controller, the migration state committed to the metadata log, what an admin's request
  wrote to it: a partition created, a topic removed, a topic config set (``ADMIN_FACTS``), and
  the dual write's mirror of each into ZooKeeper (``MIRRORED``). Each visible change in the run is
  one ``Observation``.
- Between two observations the model may take any number of hidden protocol steps (message
  deliveries, registrations, fetches, heartbeats) that leave the view as it is; the observation is
  then explained by one step that changes the view exactly so. A step that changes two visible
  facts at once leaves the second as pending, to be matched by an observation that comes soon
  after (channels are interleaved by time, so their order across processes is approximate).
- The search keeps up to ``BEAM`` model states that explain the prefix so far, and bounds each
  change's search (``SEARCH_BOUND``): a failure means no path within those bounds explains the
  first unexplained observation, given the explanations kept of the ones before; a search that
  hits its bound says "undecided", never "explained". A failure names the longest explained
  prefix, the path of actions that explains it, what the model could have done instead, and the
  observation.

What is abstracted, and why:
- The model's cluster has the run's brokers and controllers, ids and all, and one topic with one
  partition, which stands for every topic the admin made in ZooKeeper mode, before the controllers
  started (the migration copies it; the admin may delete it). Its leader and ISR changes are hidden
  steps: the model has no action for the cause of most (a follower falling behind or catching up on
  the data it fetches, which it does not model), so no partition's leader or ISR is in the view.
  What is in it is how many records of each admin fact the committed log holds past the
  migration's copy; each is an observation. An admin's request in the operator log (sent once the
  runbook's step before it was done, or when it began, as runs since note) becomes the model's
  action (``OperatorAdminRequest``), taken when it was sent or later, up to when Kafka answered it (``Node.deferred``:
  Kafka's controller may first dual-write an earlier request, and a change seen in between precede its record;
  a record appended to a batch begun before the request was sent, which carries the batch's time, is placed after
  the request: ``_after_their_requests``),
  one per record: a topic created or grown, one CreatePartitions
  per partition on the brokers Kafka placed it (Kafka's placer is not the model's; the model checks
  each is registered and one active); a deletion, DeleteTopics; a topic config, AlterConfigs (the
  model's one dynamic config); a reassignment, AlterPartitionReassignments (``model_move``) of a partition of the
  model's (the first with the same brokers as the real one moved, else with as many), its broker ids relabelled so
  that the move adds and removes as many replicas as Kafka's and keeps the ISR's (``relabel``). Its first
  PartitionChangeRecord (adding or removing replicas) is one observation, and the one that completes it (replicas
  set, none adding or removing) another, explained by the leader's ISR join (``AlterPartition``, a hidden step:
  ``isr_joins``) and by nothing else. So what is compared of a move is that it started when the admin asked and
  completed after, once each; not which brokers it moved (the model's partition is not the real one) nor the ISR
  and leader it ended with (hidden, as every ISR change is). A reassignment the runbook saw stuck (its goal never
  reached) is still the request Kafka accepted: its start is explained, and its missing completion (a liveness
  matter) is left to the runbook's goal and ``ZkBrokerPartitionChangesBumpLeaderEpoch``. So is a deletion seen
  stuck (its topics still listed: a lost mirror under a stalled ZooKeeper, say) whose RemoveTopicRecord the log
  holds; one it does not hold was never accepted and is no model action. A move and each stuck request are placed
  when they were sent (``began``: runs since note it), not when they completed: a fault may heal in between.
  Kafka accepted each (the runbook notes only what took effect), so the model must accept it too and write its
  record, and a record no request asked for (no hidden step writes one but a move's completion) is unexplained.
  Differs: Kafka's CreateTopics writes a topic's TopicRecord, ConfigRecords and PartitionRecords in
  one batch (ReplicationControlManager.createTopics); the model writes one CreatePartitions each.
  Left out, each with its reason: the migration's copy (``MigrationCopiesZkExactly`` checks it
  partition by partition); internal topics (``__consumer_offsets``, which the group coordinator
  makes for the run's consumer, which the model has not); configs of anything but a topic; a move's
  PartitionChangeRecords in between (an ISR join that does not complete it), hidden as ISR changes are; and
  each partition's state in ZooKeeper (its leader and ISR, hidden as on the KRaft side). These are checked against
  the log instead (``properties.kafka.checks``):
  ``MigrationCopiesZkExactly``, ``ZkEqualsImageAtMigrationOffset`` (ZooKeeper equals the committed
  image at the end of dual write), ``ZkWritesFollowKRaftCommits`` (each dual write holds a committed
  state) and ``ZkBrokerPartitionChangesBumpLeaderEpoch`` (each change ZooKeeper-mode brokers act on
  moves the leader epoch). Rolling a ZooKeeper broker into migration mode is a stop,
  ``ConfigureMigration`` (an edit of the environment: the model's scopes fix each broker's settings
  at the start) and a restart. A broker's clean stop, a migrating ZooKeeper broker's or a KRaft
  broker's, also fences its KRaft registration, as its controlled shutdown to the KRaft controller does
  (``BrokerLeavesKRaft``), so the process it is restarted as may register.
- The mirror of the admin's facts into ZooKeeper (KIP-866 §Dual Metadata Writes) is counted as the
  log's facts are, while a KRaft controller holds /controller, one observation a unit: a partition
  state znode created (``zk-partitions``: Kafka's createTopic and createTopicPartitions create one
  for each new partition), a topic znode deleted (``zk-removed``: deleteTopic) and each key a topic
  config znode's write set, changed or removed (``zk-configs``: writeConfigs writes a topic's
  whole config, one key a ConfigRecord; the empty config znode a creation writes and the one a
  deletion deletes are none). The model's one topic is every topic: its dual write (or a new
  leadership's sync) creating a state znode, deleting /brokers/topics/t, or raising its one config
  znode's value (which counts the AlterConfigs since the start) by k is one unit each, k for the
  config (``mirror_units``); a step's second unit waits as pending for its own observation, so one
  multi of the model may explain several of Kafka's writes and one of Kafka's writes several of the
  model's steps. The counts are of changes, not of what ZooKeeper holds, since a deleted topic's
  partitions leave ZooKeeper while the counts must not fall. A unit no model log holds a record for
  (a topic gone from ZooKeeper with no RemoveTopicRecord, a partition or a config key no record
  made) is unexplained at once (``may_mirror``: no hidden step writes an admin's record). A record
  ZooKeeper's last /migration offset covers (Kafka moves it past a delta only once the delta is
  written) whose mirror the run never showed is named as never shown (``never_mirrored``). Kafka
  3.4.1 never moves /migration's offset in dual write (its MetadataChangeEvent writes none), so a
  3.4 run is held to no mirror by the offset: what 3.4.1 left out shows only when a mirror the run
  did show can be reached by the model's dual write (one multi for all that is committed) only by
  writing it too; else it is the checks' finding (``ZkEqualsImageAtMigrationOffset``). Internal
  topics are left out, as in the log; a recording that watches no topic znode hides the mirror,
  and one that left the config znodes' data out hides ``zk-configs``.
- A recording cut down to what the topic checks read keeps some channels only: the facts it lacks
  are hidden as protocol steps are (``hidden_facts``), and one that keeps neither process logs nor
  broker registrations is not validated (the whole migration would be one hidden search, past its
  bound). A run's own folder has every channel.
- A pause (SIGSTOP) is no model action: while one lasts, the model may expire sessions, time
  brokers out and hold elections that the paused process would have caused.
- Runbooks and releases the mapping does not cover yet are reported as not validated, with the
  reason, never as passed.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from model import zookeeper as zkm
from model.actions import (
    Action,
    AlterConfigs,
    AlterPartition,
    AlterPartitionReassignments,
    BecomeLeader,
    BecomeZkController,
    BeginControlledShutdown,
    BrokerHeartbeat,
    CompleteMigration,
    CrashBroker,
    CrashController,
    CreatePartitions,
    DeleteControllerZNodes,
    DeleteTopics,
    Deliver,
    DualWrite,
    ElectController,
    ElectPartitionLeader,
    ExpireSession,
    Fetch,
    FetchMetadata,
    InitializeController,
    KRaftAction,
    KRaftLeaderChange,
    MigrateBrokerToKRaft,
    MigrateMetadata,
    MigrationCommitted,
    ObserveControllerEpoch,
    OpenSession,
    ProcessBrokerChange,
    ReconfigureController,
    RecoverMigrationState,
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
    UpdateMetadataVersion,
    WaitForControllerQuorum,
    WaitForZkBrokers,
    ZkOutage,
    ZkRecover,
)
from model.bugs import Variant
from model.invariants import witnessed
from model.kraft import (
    METADATA_VERSION,
    ConfigRecord,
    ControllerConfig,
    FeatureLevelRecord,
    MetadataImage,
    PartitionChangeRecord,
    PartitionRecord,
    QuorumRole,
    RemoveTopicRecord,
    UpgradeType,
    ZkMigrationState,
    ZkMigrationStateRecord,
    image_of,
)
from model.kraft_quorum import bootstrap_records, fresh_kraft_process, is_active, own_image
from model.migration import CONFIG, MIGRATION, KRaftControllerZNode, MigrationDriverState
from model.scopes import SAME_RANGE, Scope, cold_state
from model.state import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    TOPIC,
    Budget,
    ClusterState,
    KRaftController,
    LeaderAndIsr,
    broker_path,
    kraft_claim,
    znode_data,
)
from model.step import candidate_actions, step
from model.transitions import put_broker
from model.types import BrokerId, Ibp, PartitionId
from properties.kafka.checks import TOPIC_CONFIG, Observed, _live_records, _migration, profile_of
from properties.kafka.configs import kraft_born_levels
from properties.kafka.observe import describe, line_time, merge

# The protocol's own steps: what the model may take unobserved between two observations.
HIDDEN = (
    Deliver, OpenSession, RegisterBroker, ObserveControllerEpoch, ElectController, ResignController,
    InitializeController, ProcessBrokerChange, RefreshFeatureCache, ElectPartitionLeader, SendControlledShutdown,
    StartElection, RequestVote, BecomeLeader, Fetch, RecoverMigrationState, KRaftLeaderChange,
    WaitForControllerQuorum, WaitForZkBrokers, BecomeZkController, MigrateMetadata, CompleteMigration,
    MigrationCommitted, SyncKRaftToZk, SendRPCsToBrokers, DualWrite, RegisterWithKRaft, RegisterController,
    BrokerHeartbeat, FetchMetadata, BeginControlledShutdown, AlterPartition,
)
ANY_NEW = "any new value"
# What a paused process or a ZooKeeper outage may cause besides: sessions lost, brokers timed out.
DURING_FAULTS = (ExpireSession, SessionTimeout)
KRAFT_SIDE = frozenset(KRaftAction.__args__)  # type: ignore[attr-defined]
# The steps tried first for an observation of each side. The KRaft side's also lets ZooKeeper
# brokers (re)register, messages arrive and a ZooKeeper controller resign on the claim, which the
# driver waits for, but no ZooKeeper election.
KRAFT_FOCUS = KRAFT_SIDE | {OpenSession, RegisterBroker, Deliver, ResignController, *DURING_FAULTS}
ZK_FOCUS = (frozenset(HIDDEN) - KRAFT_SIDE) | set(DURING_FAULTS)
# The steps tried first for a move's completion (its record written by the leader's hidden ISR join): the dual
# write and its RPCs, the LeaderAndIsr of the moving partition arriving, a heartbeat that unfences the joining
# replica, the ISR join, and a follower's fetch that commits it (``_moves_the_partition``). A path found so is a
# path of the model all the same; without it, the search of a quorum of 3, whose brokers have other RPCs in
# flight, passes its bound before it reaches one.
MOVE_STEPS = (DualWrite, SendRPCsToBrokers, Deliver, BrokerHeartbeat, AlterPartition, Fetch)
# Hidden steps explored between two observations, at most: past it the result is "not decided".
SEARCH_BOUND = 60_000
FOCUS_BOUND = 20_000
# Explanations of one change kept for the next, at most: the search's width.
BEAM = 64
# How many observations a pending visible change may wait for its own.
PENDING_WINDOW = 12
RUNBOOKS = (
    "dual-write", "kraft-brokers", "finalize",
    "rollback-before-brokers", "rollback-dual-write", "rollback-kraft-brokers", "kraft",
)
# The log lines read: each is logged on every change it stands for (checked against Kafka 3.9's code).
LOG_KINDS = ("driver-transition", "raft-leader", "zk-controller-elected", "driver-claimed", "zk-broker-registered")
# What a fault cost can show after it heals: a process paused past its session timeout hears of the
# expiry only when it resumes, and re-registers (1.7 s after the heal in kafka run --seed 3 --runbook
# rollback-kraft-brokers --faults all --fault-count 2); a killed broker restarted at once is refused
# until its old KRaft session times out (9 s after its last heartbeat: 6.4 s after the heal in
# kafka run --version 3.5.2 --seed 8 --runbook finalize --faults all --fault-count 2). Sessions may
# be lost until this long after a heal.
SESSION_LOSS_SEEN_WITHIN_MS = 10_000
# What a process wins while its stop is under way outlives it: the epoch it took is the next winner's
# base. Such a line is kept, and the stop placed after it.
WON_WHILE_STOPPING = ("raft-leader", "zk-controller-elected")
TRACE_VALIDATION = "TraceExplainedByModel"  # the violation's name: an observed change no model path explains


@dataclass(frozen=True)
class Observation:
    """One visible change in the run: ``key`` went to ``value``, or an operator step."""

    key: tuple
    value: object
    event: dict
    before: object = None  # the driver's state it left, when the log says so
    actions: tuple[Action | OperatorEdit, ...] = ()  # an operator step: the model actions that do the same

    def matches(self, old: object, new: object) -> bool:
        if self.key == ("zk-controller",) and self.value == "kraft-claim":
            return isinstance(new, tuple) and new[0] == "kraft" and new[1] == self.event_node
        if self.value == ANY_NEW:  # a new znode: its czxid is Kafka's, not the model's
            return new is not None
        if self.key == ("metadata.version",):  # Kafka's feature levels are not the model's: the direction is
            return new is not None and self.value == _direction(old, new)
        if self.before is not None and old != self.before:
            return False
        return new == self.value

    @property
    def event_node(self) -> int:
        return int(self.event.get("node", -1))

    @property
    def is_operator(self) -> bool:
        return self.key == ("operator",)

    def line(self) -> str:
        if self.is_operator:
            return f"operator: {self.event.get('fault') or self.event.get('action') or self.event['kind']} " + (
            ", ".join(repr(a) for a in self.actions) or f"{self.event.get('process', '')} (no model action)"
        )
        return describe(self.event)


@dataclass
class Validation:
    """The outcome: ``explained`` observations of ``total``; ``unexplained`` is the first no path explains."""

    total: int
    explained: int = 0
    path: tuple[Action, ...] = ()  # a model path that explains the prefix
    unexplained: Observation | None = None
    alternatives: tuple[str, ...] = ()  # what the model could have shown instead, at that point
    not_validated: str = ""  # why the run was not validated at all
    undecided: str = ""  # the search hit its bound: neither explained nor refuted
    states: int = 0  # model states explored
    witnesses: tuple[str, ...] = ()  # the model's sometimes-properties its explaining path reaches
    unshown: tuple[str, ...] = ()  # what every explaining path showed and the run never did
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.not_validated and not self.undecided and self.unexplained is None and not self.unshown

    @property
    def failed(self) -> bool:
        return self.unexplained is not None or bool(self.unshown)

    def headline(self) -> str:
        if self.unshown:
            return self.report()[0] + ": " + "; ".join(self.unshown)
        return self.report()[0] + (f": {self.unexplained.line()}" if self.unexplained is not None else "")

    def as_json(self) -> dict:
        return {
            "outcome": "not validated" if self.not_validated else "undecided" if self.undecided
            else "unexplained" if self.failed else "explained",
            "explained": self.explained,
            "total": self.total,
            "states": self.states,
            "report": self.report(),
            "path": [repr(a) for a in self.path],
            "witnesses": list(self.witnesses),
            "unexplained": None if self.unexplained is None else self.unexplained.event,
        }

    def report(self) -> list[str]:
        if self.not_validated:
            return [f"trace validation: not validated ({self.not_validated})"]
        if self.undecided:
            return [
                f"trace validation: undecided after {self.explained} of {self.total} observations ({self.undecided})"
            ]
        if self.unshown:
            return [
                f"trace validation: the model explains all {self.total} observed changes, but only by showing "
                "what the run never showed",
                "  the explaining path, as model steps:",
                *[f"    {i + 1:3d}. {a!r}" for i, a in enumerate(self.path)],
                "  never shown by the run: " + "; ".join(self.unshown),
            ]
        if self.unexplained is None:
            return [f"trace validation: all {self.total} observed changes explained by the model "
                    f"({len(self.path)} model steps, {self.states} states searched)"]
        lines = [
            f"trace validation: the model explains {self.explained} of {self.total} observed changes; "
            "no path of the model explains the next one",
            "  longest explained prefix, as model steps:",
        ]
        lines += [f"    {i + 1:3d}. {a!r}" for i, a in enumerate(self.path)]
        lines.append(f"  unexplained: {self.unexplained.line()}")
        if self.alternatives:
            lines.append("  the model could instead have shown: " + "; ".join(self.alternatives[:8]))
        return lines


# ---- the model's side: a scope shaped like the run, and the view ------------------------------


@dataclass(frozen=True)
class Shape:
    """The real run's cluster as the model builds it."""

    brokers: int
    controllers: int
    kraft_born: bool  # the kraft runbook: KRaft brokers and controllers without the migration flag
    ibp: Ibp  # the metadata.version the controllers bootstrap and the ZooKeeper brokers' IBP

    @classmethod
    def of(cls, plan: dict, version: tuple[int, int, int]) -> Shape:
        # The model's levels end at 3.7-IV0: every later release is at its newest level (what a rule
        # depends on is the levels from 3.4-IV0 to 3.7-IV0, reference §1.1). Differs: 3.5 migrates at
        # 3.5-IV2, without metadata transactions, which kafka-3.9 refuses below 3.6-IV1; the model
        # plays it at 3.6-IV1, whose transactions show only in a migration a failover cut short.
        ibp = Ibp.IBP_3_4_IV0 if version < (3, 5, 0) else Ibp.IBP_3_6_IV1 if version < (3, 7, 0) else Ibp.IBP_3_7_IV0
        kraft_born = plan.get("runbook") == "kraft"
        if kraft_born:
            ibp = kraft_born_levels_as_model(version)[0]
        return cls(int(plan.get("brokers", 3)), int(plan.get("controllers", 1)), kraft_born, ibp)

    def scope(self) -> Scope:
        return Scope(
            name="real-run",
            summary="the real run's cluster",
            ibps=(self.ibp,) * self.brokers,
            supported=(SAME_RANGE,) * self.brokers,
            # the model's one topic stands for the topics the admin made before the controllers started
            # (the migration copies it, the admin may delete it); ISR changes to it are hidden steps
            partitions=(tuple(BrokerId(b) for b in range(min(2, self.brokers))),),
            budget=Budget(),
            warm=False,
            broker_flags=((False, False),) * self.brokers,  # the runbook rolls them into migration mode
            controllers=(ControllerConfig(migration_enabled=not self.kraft_born, metadata_version=self.ibp),)
            * self.controllers,
        )

    def initial(self) -> ClusterState:
        """Brokers started, no sessions yet; the controllers not yet started (the runbook starts them)."""
        state = cold_state(self.scope())
        stopped = tuple(c.replace(alive=False, driver=None) for c in state.controllers)
        state = state.replace(controllers=stopped)
        if self.kraft_born:
            kraft = [fresh_kraft_process(b.replace(config=b.config.replace(kraft_mode=True))) for b in state.brokers]
            state = state.replace(brokers=tuple(kraft))
        return state


# Each window's budget: generous for the operator's steps, bounded for the protocol's own retries.
def window_budget(controllers: int, faulty: bool) -> Budget:
    return Budget(
        crashes=99, restarts=99, operator=99, expiries=99 if faulty else 0, elections=99, outages=99, shutdowns=0,
        max_in_flight=64, kraft_elections=controllers, controller_crashes=99, timeouts=99 if faulty else 0,
        migrations=99, max_lag=1 << 20, partition_creations=99, topic_deletions=99, reassignments=99,
    )


def view(state: ClusterState, version: tuple[int, int, int] = (3, 9, 0),
         controller_registrations: bool = False, topics: bool = False) -> dict[tuple, object]:
    """The visible part of ``state``, as Kafka ``version`` shows it.

    Differs: Kafka 3.4's driver went from ZK_MIGRATION straight to KRAFT_CONTROLLER_TO_BROKER_COMM
    (3.5 added SYNC_KRAFT_TO_ZK between), its quorum wrote no PRE_MIGRATION record at bootstrap
    (3.5 added it), and a controller rolled without the migration flag activated with no record at all:
    3.4 finalizes by the roll alone, while the model's activating leader commits POST_MIGRATION (3.5
    added it, ActivationRecordsGenerator), so to 3.4 the model's log stays at MIGRATION. The model writes
    all three (reference §1.1). Whether a KRaft-born cluster's bootstrap
    holds a ZkMigrationStateRecord (NONE) depends on the release (``release_writes_none``); the model's
    profile follows 3.9 (``kafka-3.9``) or writes it always (``kip``, which 3.4 runs follow), and where
    the release's rule is another, its log is shown as the release writes it."""
    legacy_driver = version < (3, 5, 0)
    out: dict[tuple, object] = {}
    for c in state.controllers:
        driver = c.driver.state if c.alive and c.driver is not None else None
        if legacy_driver and driver is MigrationDriverState.SYNC_KRAFT_TO_ZK:
            driver = MigrationDriverState.ZK_MIGRATION
        out[("driver", c.id)] = driver
        out[("leader", c.id)] = c.epoch if c.alive and c.role is QuorumRole.LEADER else None
    for b in state.brokers:
        registration = zkm.get(state.zk, broker_path(b.id))
        out[("zk-registered", b.id)] = None if registration is None else registration.czxid
    holder = znode_data(state, CONTROLLER)
    epoch = znode_data(state, CONTROLLER_EPOCH)
    if holder is None:
        out[("zk-controller",)] = None
    elif isinstance(holder, KRaftControllerZNode):
        out[("zk-controller",)] = ("kraft", holder.controller, epoch)
    else:
        out[("zk-controller",)] = ("zk", int(holder), epoch)
    committed = max(state.controllers, key=lambda c: c.high_watermark, default=None)
    image = image_of(committed.log, committed.high_watermark) if committed is not None else MetadataImage()
    levels = [e.record.level for e in (committed.log[: committed.high_watermark] if committed else ())
              if isinstance(e.record, FeatureLevelRecord) and e.record.name == METADATA_VERSION]
    out[("migration",)] = image.migration  # None: no ZkMigrationStateRecord committed
    if legacy_driver and image.migration is ZkMigrationState.PRE_MIGRATION:
        out[("migration",)] = None
    if legacy_driver and image.migration is ZkMigrationState.POST_MIGRATION:
        # Differs: 3.4 finalizes by the controllers' roll alone and commits no POST_MIGRATION (reference §1.1)
        out[("migration",)] = ZkMigrationState.MIGRATION
    if levels and image.migration in (None, ZkMigrationState.NONE):  # KRaft-born: the bootstrap's record, if any
        out[("migration",)] = _as_release_writes(image.migration, levels[0], version)
    # how many times metadata.version was set, and to what: each setting shows once
    out[("metadata.version",)] = (len(levels), levels[-1]) if levels else None
    for b in state.brokers:
        registration = image.registration(b.id)
        out[("kraft-registered", b.id)] = None if registration is None else registration.epoch
    if controller_registrations:  # each controller's committed RegisterControllerRecord: its zkMigrationReady
        for c in state.controllers:
            reg = image.controller_registration(c.id)
            out[("controller-registered", c.id)] = None if reg is None else reg.zk_migration_ready
    if topics:
        out.update(_admin_counts(committed.log[: committed.high_watermark] if committed else ()))
    return out


def never_shown(version: tuple[int, int, int]) -> frozenset[tuple[tuple, object]]:
    """The migration states ``view`` never shows for Kafka ``version``: 3.4 writes neither PRE_MIGRATION nor
    POST_MIGRATION, so a run whose log holds one is unexplained at once, with no search of the hidden steps."""
    if version < (3, 5, 0):
        return frozenset((("migration",), s) for s in (ZkMigrationState.PRE_MIGRATION, ZkMigrationState.POST_MIGRATION))
    return frozenset()


# What an admin's request writes to the metadata log, as the view counts it: a partition created
# (CreatePartitions, or a topic's creation), a topic removed (DeleteTopics), a topic config set, a reassignment
# started (AlterPartitionReassignments' PartitionChangeRecord with adding or removing replicas) and one completed
# (the PartitionChangeRecord that sets the replicas with none adding or removing: the leader's ISR join, or the
# request itself when the ISR already held the target).
ADMIN_FACTS = ("partitions", "removed", "configs", "reassigning", "reassigned")


def _admin_counts(log: tuple) -> dict[tuple, object]:
    """How many records of each admin fact the committed ``log`` holds, past the migration's copy: the
    copy's partitions have no ``replicas`` (the model copies a state znode), and ZooKeeper's config is
    copied only before the MIGRATION record."""
    migrated = next((i for i, e in enumerate(log) if isinstance(e.record, ZkMigrationStateRecord)
                     and e.record.state is ZkMigrationState.MIGRATION), -1)
    counts = dict.fromkeys(ADMIN_FACTS, 0)
    for i, e in enumerate(log):
        r = e.record
        if isinstance(r, PartitionRecord) and r.replicas:
            counts["partitions"] += 1
        elif isinstance(r, RemoveTopicRecord):
            counts["removed"] += 1
        elif isinstance(r, ConfigRecord) and i > migrated:
            counts["configs"] += 1
        elif isinstance(r, PartitionChangeRecord) and (r.adding or r.removing):
            counts["reassigning"] += 1
        elif isinstance(r, PartitionChangeRecord) and r.replicas:
            counts["reassigned"] += 1
    return {("topics", fact): n or None for fact, n in counts.items()}


# A topic's znodes as Kafka's ZkData names them; the model's one topic's are the same (model.state.TOPIC).
TOPIC_ZNODE = re.compile(r"/brokers/topics/([^/]+)")
STATE_ZNODE = re.compile(r"/brokers/topics/([^/]+)/partitions/\d+/state")
TOPIC_CONFIG_ZNODE = re.compile(r"/config/topics/([^/]+)")


def mirror_units(before: ClusterState, after: ClusterState) -> dict[str, int]:
    """What one model step mirrored of the admin's facts into ZooKeeper while a KRaft controller holds /controller
    (the dual write, or a new leadership's sync): partition state znodes created (``partitions``), topic znodes
    deleted (``removed``) and the ConfigRecords the one config znode took on (``configs``: its value counts the
    AlterConfigs since the start, so a write that catches up on two takes on two)."""
    if before.zk is after.zk or kraft_claim(before) is None:
        return {}
    units = {}
    if before.zk.paths != after.zk.paths:
        old, new = set(before.zk.paths), set(after.zk.paths)
        units["partitions"] = sum(1 for path in new - old if STATE_ZNODE.fullmatch(path))
        units["removed"] = sum(1 for path in old - new if TOPIC_ZNODE.fullmatch(path))
        if units["removed"]:
            # Differs: Kafka's topics are many and the model's one: a step that deletes the model's topic mirrors no
            # partition created since ZooKeeper's /migration offset (it deletes the topic instead), where Kafka,
            # deleting another topic, mirrors the new one's partitions too (its delta holds both, or a failover's
            # sync finds both). Those partitions are counted as mirrored by this step.
            log = max((c.log for c in after.controllers), key=len)
            created = sum(1 for e in log[max(0, _migrated(before)):_migrated(after)]
                          if isinstance(e.record, PartitionRecord) and e.record.replicas)
            units["partitions"] = max(units["partitions"], created)
    # Differs: Kafka writes a config map per topic (deleted with it); the model's one znode counts AlterConfigs
    was, now = znode_data(before, CONFIG), znode_data(after, CONFIG)
    if now is not None and now != was:
        units["configs"] = max(0, now - (was or 0))
    return {fact: n for fact, n in units.items() if n}


def _migrated(state: ClusterState) -> int:
    """/migration's kraft_metadata_offset in ``state``'s ZooKeeper: the log's entries ZooKeeper holds (-1: none)."""
    node = zkm.get(state.zk, MIGRATION)
    return -1 if node is None else node.data.kraft_metadata_offset


def _count(shown: frozenset[tuple[tuple, object]], key: tuple) -> int:
    """How many units of a mirror fact were shown: each one's count is in ``shown``, 1 to n."""
    return sum(1 for k, _ in shown if k == key)


def may_mirror(state: ClusterState, fact: str, count: int) -> bool:
    """Whether the model's dual write could mirror ``count`` of ``fact`` into ZooKeeper from ``state``: no more than
    the controllers' logs hold of it past the migration's copy, since no hidden step writes an admin's record (the
    model's ZooKeeper takes a partition, a deletion or a config only from the image: ``zk_delta_ops``)."""
    held = [_admin_counts(c.log)[("topics", fact)] for c in state.controllers]
    return sum(n for n in held if isinstance(n, int)) >= count


def mirror_changes(before: ClusterState, after: ClusterState, shown: frozenset[tuple[tuple, object]],
                   facts: frozenset[str]) -> list[tuple[tuple, object, object]]:
    """A step's mirror units of ``facts`` as visible changes, one a unit: a write that mirrors two partitions shows
    two, each matched by an observation of its own (a step's second change waits as pending)."""
    out: list[tuple[tuple, object, object]] = []
    for fact, n in mirror_units(before, after).items():
        if fact not in facts:
            continue
        key = (MIRRORED[fact],)
        done = _count(shown, key)
        out += [(key, done + i, done + i + 1) for i in range(n)]
    return out


def release_writes_none(version: tuple[int, int, int], level: Ibp) -> bool:
    """Whether Kafka ``version`` bootstraps a KRaft-born log at ``level`` with a ZkMigrationStateRecord
    (NONE), in ActivationRecordsGenerator.recordsForEmptyLog (QuorumController in 3.5, 3.6): 3.4 wrote
    none (NONE was the default), 3.5 to 3.8 one from 3.4-IV0 (isMigrationSupported), 3.9 one from
    3.6-IV1 (isMetadataTransactionSupported, KAFKA-17457), and 4.x, without ZooKeeper, none."""
    if version < (3, 5, 0) or version >= (4, 0, 0):
        return False
    return level >= (Ibp.IBP_3_6_IV1 if version >= (3, 9, 0) else Ibp.IBP_3_4_IV0)


def _as_release_writes(
    written: ZkMigrationState | None, level: Ibp, version: tuple[int, int, int]
) -> ZkMigrationState | None:
    """A KRaft-born log's migration record as the model's profile wrote it, or as the release writes it
    where the two rules part (3.4 and 4.x write none; 3.5 to 3.8 one from 3.4-IV0, which ``kafka-3.9``
    writes from 3.6-IV1)."""
    model_writes = any(isinstance(r, ZkMigrationStateRecord)
                       for r in bootstrap_records(level, False, Variant(profile=profile_of(version))))
    if model_writes == release_writes_none(version, level):
        return written
    return ZkMigrationState.NONE if release_writes_none(version, level) else None


# Facts read from the committed metadata log: the real log is read once, at the end, so each
# value shows once, however often a controller that restarts commits the same prefix again.
FROM_THE_LOG = ("migration", "kraft-registered", "metadata.version", "controller-registered", "topics")
# The dual write's mirror of the admin's facts into ZooKeeper, counted as the facts in the log are (each value shows
# once): each step's changes to ZooKeeper, not a view of one state (``mirror_units``), since ZooKeeper forgets a
# deleted topic's partitions while the counts must not.
MIRRORED = {"partitions": "zk-partitions", "removed": "zk-removed", "configs": "zk-configs"}
SHOWN_ONCE = (*FROM_THE_LOG, *MIRRORED.values())


def _direction(old: object, new: object) -> str:
    """How metadata.version moved: the first setting, up or down (levels compared in each's own numbering)."""
    if old is None:
        return "first"
    return "up" if new[1] > old[1] else "down" if new[1] < old[1] else "same"  # type: ignore[index]


def visible(key: tuple, old: object, new: object, shown: frozenset) -> bool:
    """Whether a change of ``key`` is one Kafka always shows (a process stopping is not logged as such)."""
    if old == new or new is None:
        return False
    if key[0] == "driver":
        return new is not MigrationDriverState.UNINITIALIZED
    if key[0] in SHOWN_ONCE:
        return (key, new) not in shown
    return True


def visible_changes(before: dict[tuple, object], after: dict[tuple, object], shown: frozenset
                    ) -> list[tuple[tuple, object, object]]:
    """The visible changes between two views, an admin's fact one record at a time: a commit that takes in two
    partitions' records (a quorum of 3 commits what a follower fetched, all at once) shows two changes, each
    matched by the log's observation of its own record, as ``mirror_changes`` splits a write's units."""
    out: list[tuple[tuple, object, object]] = []
    for k, new in after.items():
        old = before[k]
        if not visible(k, old, new, shown):
            continue
        if k[0] == "topics" and isinstance(new, int):
            out += [(k, n or None, n + 1) for n in range(old if isinstance(old, int) else 0, new)]
        else:
            out.append((k, old, new))
    return out


def hidden_facts(obs: Observed) -> frozenset[str]:
    """The view's facts a recording does not show, hidden as protocol steps are. A recording cut down to what
    the topic checks read keeps no process logs (so no driver states, Raft leadership, ZooKeeper controllers
    or registrations), and may keep no broker registrations or feature levels from the log; one that watches no
    topic znode shows no mirror into ZooKeeper, and one that left the config znodes' data out no config's mirror.
    A run's own folder has every channel: nothing is hidden."""
    final = max(obs.metadata.values(), key=len, default=[])
    types = {e["type"] for e in final}
    hidden = set() if obs.logs else {"driver", "leader", "zk-registered", "zk-controller"}
    if not any(TOPIC_ZNODE.fullmatch(path) for path in obs.zk):
        hidden.update(MIRRORED.values())  # its topics' znodes not watched
    if any(e["exists"] and not e.get("data") for path, events in obs.zk.items() if TOPIC_CONFIG_ZNODE.fullmatch(path)
           for e in events):
        hidden.add(MIRRORED["configs"])  # the recording left the config znodes' data out
    if final and "REGISTER_BROKER_RECORD" not in types:
        hidden.add("kraft-registered")
    if final and "FEATURE_LEVEL_RECORD" not in types:
        hidden.add("metadata.version")
    return frozenset(hidden)


def _shown(see: Callable[[ClusterState], dict[tuple, object]], hidden: frozenset[str],
           state: ClusterState) -> dict[tuple, object]:
    return {k: v for k, v in see(state).items() if k[0] not in hidden}


def shows_controller_registrations(obs: Observed) -> bool:
    """Whether the run's controller registrations are compared: when its log holds RegisterControllerRecords
    and the release is a 3.x one. A recorded run cut down to what validation read before they were compared
    holds none, and its registrations stay hidden steps. Differs: a 4.x run's levels are played as 3.6-IV1 to
    3.7-IV0 (``kraft_born_levels_as_model``), so its controllers register at 3.9-IV0 and the model's only
    after the upgrade: its registrations stay hidden too."""
    final = max(obs.metadata.values(), key=len, default=[])
    return obs.version < (4, 0, 0) and any(e["type"] == "REGISTER_CONTROLLER_RECORD" for e in _live_records(final))


def admin_records(obs: Observed) -> list[dict] | None:
    """The records the run's admin requests wrote to the final metadata log, each with its ``fact`` (as
    ``ADMIN_FACTS``), ``count`` (how many of that fact so far) and ``topic``; None when the run's topics are
    not compared: its log holds no TopicRecord (a recording cut down before they were compared), or it
    migrated and the migration's end is not found.

    Left out: the migration's copy (what the admin made in ZooKeeper mode: ``MigrationCopiesZkExactly``
    checks it), internal topics (``__consumer_offsets``: the group coordinator creates it for a consumer,
    which the model has not), configs of other resources than topics, and the PartitionChangeRecords that neither
    start a reassignment (``reassigning``: adding or removing replicas) nor complete one (``reassigned``: replicas
    set, none adding or removing): ISR and leader changes, hidden (why: the module's docstring)."""
    final = max(obs.metadata.values(), key=len, default=[])
    if not any(e["type"] == "TOPIC_RECORD" for e in final):
        return None
    migration = _migration(obs, final)
    if migration is None and any(e["type"] == "ZK_MIGRATION_STATE_RECORD" and obs.migration_states.get(
            e["data"].get("zkMigrationState")) is ZkMigrationState.MIGRATION for e in final):
        return None
    start = -1 if migration is None else migration.end
    names: dict[str, str] = {}
    counts = dict.fromkeys(ADMIN_FACTS, 0)
    out = []
    for e in _live_records(final):
        data = e["data"]
        if e["type"] == "TOPIC_RECORD":
            names[data["topicId"]] = data["name"]
        if e["offset"] <= start:
            continue
        if e["type"] in ("PARTITION_RECORD", "REMOVE_TOPIC_RECORD"):
            fact, topic = "partitions" if e["type"] == "PARTITION_RECORD" else "removed", names.get(data["topicId"], "")
        elif e["type"] == "CONFIG_RECORD" and data.get("resourceType") == TOPIC_CONFIG:
            fact, topic = "configs", data["resourceName"]
        elif e["type"] == "PARTITION_CHANGE_RECORD" and (reassignment := _reassignment_fact(data)):
            fact, topic = reassignment, names.get(data["topicId"], "")
        else:
            continue
        if topic.startswith("__") or not topic:  # internal, or its TopicRecord cut from a recording
            continue
        counts[fact] += 1
        out.append(e | {"fact": fact, "count": counts[fact], "topic": topic})
    return out


def _reassignment_fact(data: dict) -> str | None:
    """What a PartitionChangeRecord is of a reassignment: ``reassigning`` (it has adding or removing replicas),
    ``reassigned`` (it sets the replicas, with none adding or removing), or None (an ISR or leader change)."""
    if data.get("addingReplicas") or data.get("removingReplicas"):
        return "reassigning"
    return "reassigned" if data.get("replicas") else None


def _kraft_claimed(obs: Observed) -> list[tuple[int, float]]:
    """The zxids over which /controller held a KRaft controller's claim, as [from, to) intervals."""
    out: list[tuple[int, float]] = []
    start = None
    for e in obs.zk.get("/controller", ()):
        claimed = e["exists"] and json.loads(e.get("data") or "{}").get("kraftControllerEpoch", -1) >= 0
        if claimed and start is None:
            start = e["mzxid"]
        elif not claimed and start is not None:
            out.append((start, e["mzxid"] if e["exists"] else e["zxid"]))
            start = None
    return out + ([(start, float("inf"))] if start is not None else [])


def _topic_config(e: dict | None) -> dict:
    if e is None or not e["exists"]:
        return {}
    return dict(json.loads(e.get("data") or "{}").get("config", {}))


def mirror_records(obs: Observed) -> list[dict]:
    """The mirror into ZooKeeper of the admin's facts, as the zk channel shows it while a KRaft controller holds
    /controller: each unit one event with its ``mirror`` fact (as ``ADMIN_FACTS``) and ``count``, in zxid order.

    ``partitions``: a partition state znode created (createTopic and createTopicPartitions create one for each new
    partition, as the model's dual write does); ``removed``: a topic znode deleted (deleteTopic); ``configs``: each
    key a topic config znode's write set, changed or removed (writeConfigs writes a topic's whole config: one key
    changed is one ConfigRecord; a topic's creation writes its config znode empty, and its deletion deletes it,
    neither a ConfigRecord). Internal topics are left out, as in ``admin_records``. Not counted: a topic's last
    config key removed, which deleteConfigs does by deleting the znode, as a deletion of the topic does too (no
    runbook removes a key, and the model's AlterConfigs only sets its one config)."""
    intervals = _kraft_claimed(obs)

    def claimed(zxid: int) -> bool:
        return any(a <= zxid < b for a, b in intervals)

    units: list[tuple[int, str, dict]] = []
    for path, events in obs.zk.items():
        kind = next((fact for fact, pattern in (("partitions", STATE_ZNODE), ("removed", TOPIC_ZNODE),
                                                ("configs", TOPIC_CONFIG_ZNODE)) if pattern.fullmatch(path)), None)
        if kind is None or path.split("/")[3].startswith("__"):
            continue
        previous = None
        for e in events:
            if kind == "partitions" and e["exists"] and claimed(e["czxid"]) and (
                    previous is None or not previous["exists"] or previous["czxid"] != e["czxid"]):
                units.append((e["czxid"], kind, e))
            elif kind == "removed" and not e["exists"] and previous is not None and previous["exists"] and claimed(
                    e["zxid"]):
                units.append((e["zxid"], kind, e))
            elif kind == "configs" and e["exists"] and claimed(e["mzxid"]):
                old, new = _topic_config(previous), _topic_config(e)
                units += [(e["mzxid"], kind, e)] * sum(1 for k in old.keys() | new.keys() if old.get(k) != new.get(k))
            previous = e
    counts = dict.fromkeys(ADMIN_FACTS, 0)
    out = []
    for _, fact, e in sorted(units, key=lambda u: u[0]):
        counts[fact] += 1
        out.append(e | {"mirror": fact, "count": counts[fact]})
    return out


def never_mirrored(obs: Observed, facts: frozenset[str]) -> tuple[str, ...]:
    """The admin's facts of ``facts`` ZooKeeper says it holds and never showed: each record at or below the offset
    of the last /migration write (ZooKeeper holds the log that far: Kafka writes a delta's changes before it moves
    /migration past them, the model's dual write both in one multi, ``model.kraft_migration._kraft_zk_write``) whose
    mirror the zk channel never showed. A path of the model that brings ZooKeeper as far shows each, and the run
    did not. A run that ends before its dual write caught up with a record is held to nothing for it."""
    admin = admin_records(obs) or []
    written = [json.loads(e["data"]).get("kraft_metadata_offset", -1)
               for e in obs.existing("/migration") if e.get("data")]
    if not written:
        return ()
    held = written[-1]
    shown = dict.fromkeys(ADMIN_FACTS, 0)
    for e in mirror_records(obs):
        shown[e["mirror"]] = e["count"]
    out = []
    for fact in ADMIN_FACTS:
        covered = [e for e in admin if e["fact"] == fact and e["offset"] <= held]
        if fact in facts and len(covered) > shown[fact]:
            first = covered[shown[fact]]
            out.append(f"{MIRRORED[fact]} {shown[fact]} -> {len(covered)} (ZooKeeper's /migration holds offset "
                       f"{held}, past the {first['type']} of {first['topic']} at offset {first['offset']}, and never "
                       "showed it)")
    return tuple(out)


# ---- the run's side: observations and the environment ----------------------------------------


def observations(obs: Observed, brokers: int) -> list[Observation]:
    """The run's visible changes and operator steps, one timeline, each channel's order kept."""
    by_byte = obs.migration_states
    final = max(obs.metadata.values(), key=len, default=[])
    migration = [
        e for e in _live_records(final)
        if e["type"] == "ZK_MIGRATION_STATE_RECORD" and e["data"].get("zkMigrationState") in by_byte
    ]
    seen: set[ZkMigrationState] = set()
    records = []
    previous_level = None
    ready: dict[int, bool] = {}  # each controller's last registered zkMigrationReady
    registrations = shows_controller_registrations(obs)
    for e in _live_records(final):
        if e["type"] == "REGISTER_BROKER_RECORD":
            records.append(e)
        elif e["type"] == "REGISTER_CONTROLLER_RECORD" and registrations:
            cid, flag = int(e["data"]["controllerId"]), bool(e["data"].get("zkMigrationReady", False))
            if ready.get(cid) == flag:
                # Differs: Kafka registers every new incarnation of a controller; the model has no controller
                # incarnations and registers again only when the flag changed (model.kraft.RegisterControllerRecord)
                continue
            ready[cid] = flag
            records.append(e)
        elif e["type"] == "FEATURE_LEVEL_RECORD" and e["data"].get("name") == "metadata.version":
            level = e["data"]["featureLevel"]
            if level == previous_level:
                # Differs: Kafka writes a record for an update to the level it has; the model writes
                # none (a log growing with no change would leave its exploration unbounded)
                continue
            old = None if previous_level is None else (0, previous_level)
            records.append(e | {"direction": _direction(old, (0, level))})
            previous_level = level
    for e in migration:  # each state shows once, as the model's view of the committed log does
        state = by_byte[e["data"]["zkMigrationState"]]
        if state not in seen:
            records.append(e)
            seen.add(state)
    records.sort(key=lambda e: e["offset"])
    operator = _with_exits(obs.operator)
    stopping = [  # (process, from, to): a clean stop takes seconds, and the model's is one step
        (e["process"], e["began"], e["time"]) for e in operator
        if e["kind"] == "step" and e.get("action") == "stop" and "began" in e
    ] + [  # a process that exits on its own shuts down until the operator starts it again
        (e["process"], e["began"], e["restarted"]) for e in operator if e["kind"] == "exit"
    ]

    def shutting_down(e: dict) -> bool:
        return any(p == e["process"] and began <= e["time"] <= ended for p, began, ended in stopping)

    logs = [
        [e for e in events if e["kind"] in LOG_KINDS and (e["kind"] in WON_WHILE_STOPPING or not shutting_down(e))]
        for events in obs.logs.values()
    ]
    def left_while_stopping(process: str, began: int, ended: int) -> list[int]:
        """When a process stopping took what outlives it: an election (its epoch is the next winner's base), a
        controller's own registration (a controller stopped as it starts registers before it exits, and the
        record is in the log), and another controller's election it may have voted in."""
        times = [e["time"] for e in obs.logs.get(process, ())
                 if e["kind"] in WON_WHILE_STOPPING and began <= e["time"] <= ended]
        times += [e["time"] for e in records if e["type"] == "REGISTER_CONTROLLER_RECORD"
                  and process == f"controller-{e['data']['controllerId']}" and began <= e["time"] <= ended]
        if process.startswith("controller-"):
            # a controller stopping votes until its Raft client closes (a leader that stops resigns and hands over,
            # KIP-595's EndQuorumEpoch): another controller's election meanwhile may have needed its vote
            times += [e["time"] for other, events in obs.logs.items() if other != process
                      and other.startswith("controller-") for e in events
                      if e["kind"] == "raft-leader" and began <= e["time"] <= ended]
        return times

    won = {  # (process, began) -> the last thing it took while stopping, which the stop is placed after
        (p, began): max(taken) for p, began, ended in stopping if (taken := left_while_stopping(p, began, ended))
    }
    steps = [
        e | {"time": max(e["time"], won[(e["process"], e["began"])])} if (e.get("process"), e.get("began")) in won
        else e
        for e in _steps_when_they_began(operator)
    ]
    steps.sort(key=lambda e: e["time"])  # stable: a stop moved after its election comes after it in the merge
    out: list[Observation] = []
    admin = admin_records(obs)
    env = Environment(obs.version, None if admin is None else placements(admin), moves(admin or []),
                      frozenset(e["topic"] for e in admin or [] if e["fact"] == "removed"))
    if admin:
        records = sorted(records + admin, key=lambda e: e["offset"])
    claims = _claims_in_zookeeper(obs) if obs.version < (3, 5, 0) else []
    mirror = mirror_records(obs) if admin is not None else []
    for e in _after_their_requests(merge([records, claims, mirror, *logs, steps]), final):
        if "mirror" in e:
            out.append(Observation((MIRRORED[e["mirror"]],), e["count"], e))
        elif e["channel"] == "metadata" and "fact" in e:
            out.append(Observation(("topics", e["fact"]), e["count"], e))
        elif e["channel"] == "metadata" and e["type"] == "FEATURE_LEVEL_RECORD":
            out.append(Observation(("metadata.version",), e["direction"], e))
        elif e["channel"] == "zk":  # a claim, read from ZooKeeper
            out.append(Observation(("zk-controller",), "kraft-claim", e))
        elif e["channel"] == "metadata" and e["type"] == "REGISTER_BROKER_RECORD":
            out.append(Observation(("kraft-registered", int(e["data"]["brokerId"])), ANY_NEW, e))
        elif e["channel"] == "metadata" and e["type"] == "REGISTER_CONTROLLER_RECORD":
            out.append(Observation(("controller-registered", int(e["data"]["controllerId"])),
                                   bool(e["data"].get("zkMigrationReady", False)), e))
        elif e["channel"] == "metadata":
            out.append(Observation(("migration",), by_byte[e["data"]["zkMigrationState"]], e))
        elif e["channel"] == "operator":
            out.extend(env.observe(e))
        elif e["kind"] == "driver-transition" and e["old"] == e["new"]:
            continue  # logged at TRACE when a driver re-enters its state: no change
        elif e["kind"] == "driver-transition":
            out.append(Observation(("driver", int(e["node"])), MigrationDriverState[e["new"]], e,
                                   before=MigrationDriverState[e["old"]]))
        elif e["kind"] == "raft-leader":
            out.append(Observation(("leader", int(e["node"])), int(e["epoch"]), e))
        elif e["kind"] == "zk-controller-elected":
            out.append(Observation(("zk-controller",), ("zk", int(e["node"]), int(e["epoch"])), e))
        elif e["kind"] == "zk-broker-registered":
            out.append(Observation(("zk-registered", int(e["broker"])), ANY_NEW, e))
        elif e["kind"] == "driver-claimed":
            out.append(Observation(("zk-controller",), "kraft-claim", e))
    hidden = hidden_facts(obs)
    return [o for o in out if o.key[0] not in hidden]


def _after_their_requests(timeline: list[dict], log: list[dict]) -> list[dict]:
    """The merged ``timeline`` with each admin record that is not its batch's first, and the rest of its batch, moved
    just after an admin request on its topic sent while that batch was open (before ``log``'s next batch began).

    Kafka stamps every record of a batch with the time the batch began (BatchAccumulator.startNewBatch takes
    time.milliseconds(); BatchBuilder.writeRecord writes each record's timestamp delta as 0), and a batch stays open
    for the records appended until it is drained (controller.quorum.append.linger.ms, 25 ms by default). A request's
    record appended to a batch an earlier record began (the controller's NoOpRecord, say) thus shows a time before
    the request was sent; it was written at its batch's time or later, before the next batch began, and after the
    request that asked for it."""
    def appended_later(e: dict) -> bool:
        return e["channel"] == "metadata" and "fact" in e and e["offset"] > e.get("batch", e["offset"])

    if not any(appended_later(e) for e in timeline):
        return timeline
    began: dict[int, int] = {}  # batch -> when it began: the batch before had been drained by then
    for e in log:
        if "batch" in e:
            began.setdefault(e["batch"], e["time"])
    starts = sorted(began)
    closed = {b: began[n] for b, n in zip(starts, starts[1:])}
    out = list(timeline)
    i = 0
    while i < len(out):
        e = out[i]
        until = closed.get(e["batch"], float("inf")) if appended_later(e) else None
        request = None if until is None else next(
            (j for j in range(i + 1, len(out)) if out[j]["time"] < until and _asks_about(out[j], e["topic"])), None)
        if request is None:
            i += 1
            continue
        span = out[i:request + 1]  # the record, what came between (of its batch and not), the request
        batched = [x["channel"] == "metadata" and x.get("batch") == e["batch"] for x in span]
        out[i:request + 1] = [x for x, b in zip(span, batched) if not b] + [x for x, b in zip(span, batched) if b]
        i = request + 1
    return out


def _asks_about(e: dict, topic: str) -> bool:
    """Whether ``e`` is an operator's admin request about ``topic``."""
    return e["channel"] == "operator" and e["kind"] == "step" and e.get("action") in ADMIN_STEPS and topic in (
        e.get("topics") or [e.get("topic")])


def _claims_in_zookeeper(obs: Observed) -> list[dict]:
    """KRaft's claims of /controller as the watch saw them: Kafka 3.4 logs none (3.5 added the line)."""
    out, last = [], None
    for e in obs.existing("/controller"):
        try:
            body = json.loads(e["data"] or "{}")
        except ValueError:
            continue
        if body.get("kraftControllerEpoch", -1) >= 0 and e["mzxid"] != last:
            out.append(e | {"node": body.get("brokerid"), "kind": "driver-claimed"})
            last = e["mzxid"]
    return out


# The runbook's goals (run.py) for a deletion, "topics payments deleted", and a reassignment, "orders-0 reassigned
# to [0, 1]".
STUCK_DELETION = re.compile(r"topics (?P<topics>[^ ,]+(?:, [^ ,]+)*) deleted")
STUCK_MOVE = re.compile(r"(?P<topic>\S+)-(?P<partition>\d+) reassigned to \[(?P<replicas>[\d, ]+)\]")


def _with_exits(operator: list[dict]) -> list[dict]:
    """The operator log with each process it started again (``restart``: it had exited on its own) also noted as an
    ``exit`` when it began to shut down, the time of the fatal line its log gave as why (``run.wait``), else when the
    operator saw it gone. Its shutdown closes its ZooKeeper session, and what that frees (/controller, say) may be
    taken before the operator notices (broker 1 elected ZooKeeper-mode controller 1.7 s before broker 2's restart was
    noted, 12 ms after broker 2's shutdown closed its session: kafka campaign --runbook dual-write --controllers 1
    --faults all --fault-count 2 --aimed, seed 7)."""
    out = []
    for e in operator:
        if e["kind"] == "restart":
            fatal = line_time(e.get("why", ""))
            began = fatal if fatal is not None and fatal <= e["time"] else e["time"]
            out.append({"channel": "operator", "kind": "exit", "process": e["process"], "time": began, "began": began,
                        "restarted": e["time"]})
        out.append(e)
    return out


def _steps_when_they_began(operator: list[dict]) -> list[dict]:
    """The operator log with each step that takes a while (a clean stop, a feature update) at the time
    it began: what it causes comes before its note.

    Runs recorded before such steps carried ``began`` take the start of the runbook step they open. A ZooKeeper-mode
    broker's clean stop begun while ZooKeeper was down (an outage, a pause) that healed before the stop ended is
    placed at the heal: KafkaServer.shutdown closes the broker's session only once ZooKeeper answers, and what the
    close frees (/controller) is taken from then on (broker 2 elected ZooKeeper-mode controller 9 ms after stopping
    broker 0's session closed, 1.6 s after an outage healed that had struck 0.2 s before the stop began: kafka
    campaign --runbook rollback-dual-write --controllers 1 --faults all --fault-count 2 --aimed, seed 7)."""
    out, step_began, previous = [], None, None
    zk_down: int | None = None  # when the fault that has ZooKeeper down (an outage, a pause) struck, while it lasts
    zk_outages: list[tuple[int, int]] = []  # (struck, healed) of each such fault healed
    for e in operator:
        noted = e["time"]
        if e.get("process") == "zookeeper" and e["kind"] == "fault":
            zk_down = e["time"]
        elif e.get("process") == "zookeeper" and e["kind"] in ("heal", "heal-skipped") and zk_down is not None:
            zk_outages.append((zk_down, e["time"]))
            zk_down = None
        if e["kind"] == "step-begins":
            step_began = e["time"]
        elif e["kind"] == "step" and e.get("action") in ("stop", "update-features"):
            began = e.get("began", step_began if step_began is not None else e["time"])
            healed = next((healed for struck, healed in zk_outages if struck <= began < healed <= noted), None) \
                if e.get("action") == "stop" and e.get("role") == "zk-broker" and e.get("clean", True) else None
            e = e | {"time": began if healed is None else healed}
        elif e["kind"] == "stuck" and (deletion := STUCK_DELETION.fullmatch(e["goal"])):
            # a deletion Kafka may have accepted, whose topics the brokers still listed (its mirror lost, say)
            e = {"channel": "operator", "kind": "step", "action": "delete-topics", "stuck": True,
                 "topics": deletion["topics"].split(", "), "time": e["time"],
                 **({"began": e["began"]} if "began" in e else {})}
        elif e["kind"] == "stuck" and (move := STUCK_MOVE.fullmatch(e["goal"])):
            # a reassignment Kafka accepted that never completed: the runbook sent it, and notes only its goal
            replicas = [int(b) for b in move["replicas"].split(",")]
            e = {"channel": "operator", "kind": "step", "action": "reassign", "topic": move["topic"],
                 "partition": int(move["partition"]), "replicas": replicas, "time": e["time"],
                 **({"began": e["began"]} if "began" in e else {})}
        if e["kind"] == "step" and e.get("action") in ADMIN_STEPS:
            # an admin request is sent once the runbook's step before it is done (a note, a fault, a heal), and
            # answered (its records committed) when the operator noted it
            e = e | {"time": e.get("began", previous if previous is not None else e["time"]), "answered": noted}
        if e["kind"] in ("step-begins", "step", "fault", "heal", "heal-skipped", "restart"):
            previous = noted
        out.append(e)
    out.sort(key=lambda e: e["time"])  # stable: the log's own order where times tie
    return out


class Environment:
    """The operator log, read as model actions: what started, stopped, died or was cut off."""

    def __init__(self, version: tuple[int, int, int] = (3, 9, 2),
                 placed: dict[str, list[tuple[tuple[BrokerId, ...], ...]]] | None = None,
                 moved: dict[tuple[str, int], list[tuple[BrokerId, ...]]] | None = None,
                 removed: frozenset[str] = frozenset()) -> None:
        self.version = version  # the release: which levels an UpdateFeatures names
        # topic -> the replicas of the partitions each admin request made, in order: None, admin steps unmapped
        self.placed = placed
        # (topic, partition) -> the replicas each reassignment the log started moved from, in order
        self.moved = moved or {}
        self.removed = removed  # the topics the log holds a RemoveTopicRecord of
        self.started: set[str] = set()
        self.roles: dict[str, str] = {}
        self.faults: dict[str, str] = {}  # process -> the fault striking it now
        self.step = ""  # the runbook step under way
        self.deleted = False  # the rollback removed the KRaft controller's znodes
        self.skipped_heals: set[str] = set()  # processes whose last heal found them running again

    def observe(self, e: dict) -> list[Observation]:
        actions = self.actions(e)
        if actions is None:
            return []
        if actions and all(isinstance(a, OperatorAdminRequest) for a in actions):
            # one record each: the view counts them one by one, as the log shows them
            return [Observation(("operator",), None, e, actions=(a,)) for a in actions]
        return [Observation(("operator",), None, e, actions=actions)]

    def admin(self, e: dict) -> tuple[OperatorAdminRequest, ...] | None:
        """An admin's request, once a KRaft controller runs (before, ZooKeeper serves it, and the migration's
        copy is what KRaft shows of it): a creation is one CreatePartitions per partition, on the brokers
        Kafka placed it (its placer is not the model's), and one AlterConfigs per config it set."""
        if self.placed is None or not any(p.startswith("controller-") for p in self.started):
            return None
        action = e["action"]
        if action == "delete-topics":
            # a deletion the runbook saw stuck was accepted only if its record is in the log
            topics = [t for t in e["topics"] if not e.get("stuck") or t in self.removed]
            return tuple(OperatorAdminRequest("delete", t) for t in topics) or None
        if action == "reassign":
            started = self.moved.get((e["topic"], int(e["partition"])), [])
            if not started:
                return (OperatorAdminRequest("unrecorded", e["topic"]),)
            target = tuple(BrokerId(int(b)) for b in e["replicas"])
            return (OperatorAdminRequest("reassign", e["topic"], target, started.pop(0)),)
        out = []
        for topic in e["topics"] if action == "admin" else [e["topic"]]:
            batches = self.placed.get(topic, [])
            if not batches:
                out.append(OperatorAdminRequest("unrecorded", topic))
                continue
            # Differs: Kafka's CreateTopics writes a topic's records in one batch; the model, a CreatePartitions each
            out += [OperatorAdminRequest("create", topic, replicas) for replicas in batches.pop(0)]
        if action == "admin":
            out += [OperatorAdminRequest("config", e["topics"][0]) for _ in e.get("config", {})]
        return tuple(out)

    def actions(self, e: dict) -> tuple[Action | OperatorEdit, ...] | None:
        kind, process = e["kind"], e.get("process", "")
        node = _node(process)
        if kind == "step-begins":
            self.step = e["step"]
            return None
        if kind == "step" and e.get("action") == "start":
            first = process not in self.started
            self.started.add(process)
            role, was = e["role"], self.roles.get(process)
            self.roles[process] = role
            if role == "controller" and self.step.startswith("finalize-controller"):
                return (ReconfigureController(node, False), RestartController(node))  # without the migration flag
            if role == "controller":
                return (RestartController(node),)
            if role == "zookeeper" or first:
                return None
            if role == "zk-broker" and self.step == f"roll-broker-{node}-migrating":
                return (ConfigureMigration(BrokerId(node), True), RestartBroker(BrokerId(node)))
            if role == "zk-broker" and self.step == f"roll-broker-{node}-back-migrating":  # KIP-866 §Rollback to ZK
                return (RollbackBrokerToZk(BrokerId(node)), RestartBroker(BrokerId(node)))
            if role == "zk-broker" and self.step == f"roll-broker-{node}-zk":  # the rollback's last roll
                return (ConfigureMigration(BrokerId(node), False), RestartBroker(BrokerId(node)))
            if role == "kraft-broker" and was == "zk-broker":
                return (MigrateBrokerToKRaft(BrokerId(node)), RestartBroker(BrokerId(node)))
            return (RestartBroker(BrokerId(node)),)
        if kind == "step" and e.get("action") == "stop":
            if self.faults.get(process, "").startswith("kill"):
                return None  # a roll of a process a fault had killed: nothing to stop
            if e["role"] == "controller":
                return (ShutdownController(node),)
            if e["role"] == "zookeeper":
                return None
            if not e.get("clean", True):
                return (CrashBroker(BrokerId(node)),)
            return (StopBroker(BrokerId(node)), BrokerLeavesKRaft(BrokerId(node)))
        if kind == "step" and e.get("action") in ADMIN_STEPS:
            return self.admin(e)
        if kind == "step" and e.get("action") == "update-features":
            command = e["command"]
            oldest, newest = kraft_born_levels_as_model(self.version)
            level = newest if command[0] == "upgrade" else oldest
            return (OperatorUpdatesMetadataVersion(command[0], "--unsafe" in command, e["refused"], level),)
        if kind == "step" and e.get("action") == "delete-znode":
            # the rollback's removal of /controller (and /migration): one model step for the lot
            first, self.deleted = not self.deleted, True
            return (DeleteControllerZNodes(),) if first else None
        if kind == "exit":  # it exited on its own (a ZooKeeper outage, its session expired as it started)
            if process.startswith("controller-"):
                return (CrashController(node),)
            # KafkaServer.shutdown closes its ZooKeeper session, if ZooKeeper answers; it sends no controlled
            # shutdown (startup never completed), so its KRaft registration stays as it was
            return (StopBroker(BrokerId(node)),)
        if kind == "restart":  # the runbook started it again
            if process.startswith("controller-"):
                return (RestartController(node),)
            return (RestartBroker(BrokerId(node)),)
        if kind == "fault":
            fault = e["fault"]
            self.faults[process] = fault
            if fault == "kill-controller":
                return (CrashController(node),)
            if fault == "kill-broker":
                return (CrashBroker(BrokerId(node)),)
            if fault == "zk-outage":
                return (ZkOutage(),)
            if fault == "expire-broker":
                return (ExpireSession(-1),)  # the session is the broker's own: resolved on the state
            return ()  # a pause (ZooKeeper's too): no model action; the window opens
        if kind == "heal-skipped":  # the runbook had started it again itself (a roll), or deprovisioned it
            self.faults.pop(process, None)
            self.skipped_heals.add(process)
            return ()
        if kind == "heal" and process in self.skipped_heals:
            # runs made before a skipped heal stopped being noted twice: the "heal" after it did nothing
            self.skipped_heals.discard(process)
            return None
        if kind == "heal":
            fault = self.faults.pop(process, e["fault"])
            if fault == "kill-controller":
                return (RestartController(node),)
            if fault == "kill-broker":
                return (RestartBroker(BrokerId(node)),)
            if fault == "zk-outage":
                return (ZkRecover(),)
            return ()
        return None


@dataclass(frozen=True)
class ConfigureMigration:
    """The operator gives a stopped ZooKeeper broker the migration settings (KIP-866 §Migration Trigger 2, 3),
    or takes them away (§Rollback to ZK).

    An edit of the environment, not a model action: the model's scopes fix each broker's settings
    at the start, while a real runbook starts the brokers without them and rolls them in."""

    broker: BrokerId
    enabled: bool

    def apply(self, state: ClusterState, variant: Variant) -> ClusterState | None:
        b = state.brokers[self.broker]
        if b.alive or b.config.kraft_mode:
            return None
        config = b.config.replace(migration_enabled=self.enabled, controller_configs=self.enabled)
        return put_broker(state, b.replace(config=config))


@dataclass(frozen=True)
class BrokerLeavesKRaft:
    """A broker's clean stop, as far as KRaft sees it: a migrating ZooKeeper broker's KafkaServer.shutdown (3.4.0 on)
    and a KRaft broker's BrokerServer.shutdown both send a controlled shutdown to the KRaft controller
    (BrokerLifecycleManager.beginControlledShutdown), which ends with the registration fenced before the process
    exits (a 3.4.1 finalize run: inControlledShutdown, then fenced, 2 s later). The model's StopBroker only ends the
    process; this fences the stopped broker's live registration on the active controller as its session's end does
    (SessionTimeout), and does nothing when the model's hidden steps fenced it already or there is none: so the
    registration of its next incarnation is not refused as a duplicate (a 3.9.2 ``kraft`` run rolled a KRaft broker
    that had been unfenced, and its new registration was unexplained while this was a ZK broker's alone).
    Differs: Kafka moves the broker's leaders off first and fences it once it leads none; the model, in one step."""

    broker: BrokerId

    def apply(self, state: ClusterState, variant: Variant) -> ClusterState:
        b = state.brokers[self.broker]
        for c in state.controllers:
            reg = own_image(c).registration(self.broker) if is_active(c) else None
            if b.alive or reg is None or reg.fenced:
                continue
            return step(state, SessionTimeout(self.broker, c.id), variant) or state
        return state


# The kraft runbook formats a KRaft-born cluster at an older release and upgrades it to its own:
# in the model's levels, from 3.6-IV1 to 3.7-IV0 (the last two it has).
# A release named as FeatureCommand names it ("3.8") is its newest level; the model's level for it.
RELEASE_LEVELS = {
    "3.3": Ibp.IBP_3_3_IV0, "3.4": Ibp.IBP_3_4_IV0, "3.5": Ibp.IBP_3_5_IV2, "3.6": Ibp.IBP_3_6_IV1,
    "3.7": Ibp.IBP_3_7_IV0, "3.8": Ibp.IBP_3_8_IV0, "3.9": Ibp.IBP_3_9_IV0,
}


def kraft_born_levels_as_model(version: tuple[int, int, int]) -> tuple[Ibp, Ibp]:
    """The ``kraft`` runbook's levels (formatted at, upgraded to) as the model's.

    Differs: the model has no 4.x level; a 4.x run's 3.9 to 4.x is played as 3.6-IV1 to 3.7-IV0, a
    pair a downgrade between loses metadata, as between 3.9 and 4.x (4.0-IV0 changed metadata)."""
    if version >= (4, 0, 0):
        return Ibp.IBP_3_6_IV1, Ibp.IBP_3_7_IV0
    oldest, newest = kraft_born_levels(version)
    return RELEASE_LEVELS[oldest], RELEASE_LEVELS[newest]


@dataclass(frozen=True)
class OperatorUpdatesMetadataVersion:
    """KIP-584's UpdateFeatures for metadata.version, as the operator's FeatureCommand sent it to the
    active controller; Kafka's answer (accepted or refused) must be the model's decision too."""

    kind: str  # "upgrade" or "downgrade"
    unsafe: bool
    refused: bool
    level: Ibp  # the level asked for, as the model's

    def apply(self, state: ClusterState, variant: Variant) -> ClusterState | None:
        c = _active_controller(state)
        if c is None:
            return None
        level = self.level
        if self.kind == "upgrade":
            how = UpgradeType.UPGRADE
        else:
            how = UpgradeType.UNSAFE_DOWNGRADE if self.unsafe else UpgradeType.SAFE_DOWNGRADE
        nxt = step(state, UpdateMetadataVersion(c.id, level, how), variant)
        if nxt is None:
            return None
        wrote = len(next(o for o in nxt.controllers if o.id == c.id).log) > len(c.log)
        already = image_of(c.log).metadata_version == level
        # the model refused, or had nothing to write; Kafka must have answered alike
        return nxt if wrote != self.refused or (already and not wrote) else None


def _active_controller(state: ClusterState) -> KRaftController | None:
    return next((c for c in state.controllers if c.alive and c.role is QuorumRole.LEADER and c.active), None)


ADMIN_STEPS = ("admin", "delete-topics", "add-partitions", "reassign")  # the operator log's admin requests


def moves(admin: list[dict]) -> dict[tuple[str, int], list[tuple[BrokerId, ...]]]:
    """(topic, partition) -> the replicas each reassignment the log started moved from: its first record's
    replicas less the adding ones (Kafka's record holds the target, then the removing replicas)."""
    out: dict[tuple[str, int], list[tuple[BrokerId, ...]]] = {}
    for e in admin:
        if e["fact"] == "reassigning":
            data = e["data"]
            adding = set(data.get("addingReplicas", ()))
            current = tuple(BrokerId(int(b)) for b in data["replicas"] if b not in adding)
            out.setdefault((e["topic"], int(data["partitionId"])), []).append(current)
    return out


def relabel(real: tuple[BrokerId, ...], kept: tuple[BrokerId, ...], model: tuple[BrokerId, ...],
            isr: tuple[BrokerId, ...], brokers: int) -> dict[BrokerId, BrokerId]:
    """The bijection of the cluster's broker ids that takes the real partition's replicas ``real`` to the model
    partition's ``model``, the ones the move keeps (``kept``) first onto the model's ISR (the move completes only
    once the ISR holds every replica kept, and the model has no step that brings one back), each group in id order,
    and the other brokers to the others, in id order."""
    rest = [BrokerId(b) for b in range(brokers)]
    ours = sorted(real, key=lambda b: (b not in kept, b)) + sorted(b for b in rest if b not in real)
    theirs = sorted(model, key=lambda b: (b not in isr, b)) + sorted(b for b in rest if b not in model)
    return dict(zip(ours, theirs, strict=True))


def placements(admin: list[dict]) -> dict[str, list[tuple[tuple[BrokerId, ...], ...]]]:
    """topic -> the replicas of the partitions each admin request created (one batch of the log each)."""
    batches: dict[str, dict[object, list[tuple[BrokerId, ...]]]] = {}
    for e in admin:
        if e["fact"] == "partitions":
            batch = batches.setdefault(e["topic"], {}).setdefault(e.get("batch", e["time"]), [])
            batch.append(tuple(BrokerId(int(b)) for b in e["data"]["replicas"]))
    return {topic: [tuple(b) for b in by_batch.values()] for topic, by_batch in batches.items()}


@dataclass(frozen=True)
class OperatorAdminRequest:
    """An admin's request as the operator's client sent it to the active controller, which Kafka accepted (the
    runbook notes only what took effect): the model's decision must accept it too and write its record.

    ``create``: CreatePartitions with the replicas Kafka placed the partition on; ``delete``: DeleteTopics
    (the model's one topic stands for every topic the admin made in ZooKeeper mode); ``config``: AlterConfigs
    (a topic's config, as the model's one dynamic config); ``reassign``: AlterPartitionReassignments of the model's
    partition that stands for the real one moved from ``current`` to ``replicas`` (``model_move``);
    ``unrecorded``: a creation or a reassignment whose records the log does not hold, which no model step explains."""

    kind: str
    topic: str
    replicas: tuple[BrokerId, ...] = ()
    current: tuple[BrokerId, ...] = ()  # a reassignment's: the real partition's replicas before the move

    def never(self, state: ClusterState) -> bool:
        """No hidden step can make it possible: a creation the log lacks, or one on a broker the cluster lacks."""
        return self.kind == "unrecorded" or any(r >= len(state.brokers) for r in self.replicas + self.current)

    def model_move(self, state: ClusterState, c: KRaftController) -> Action | None:
        """The model's AlterPartitionReassignments for a real move from ``current`` to ``replicas``: of the first
        partition of ``c``'s image, in no reassignment, whose replicas are the same brokers, else the first with as
        many, its brokers relabelled (``relabel``) so that the move adds and removes as many as Kafka's did.
        Differs: the model's one topic has no partition for each real one; a move is played on one of its own."""
        image = own_image(c)
        assignment = znode_data(state, TOPIC) or ()
        held = [(p, part.replicas or (assignment[p] if p < len(assignment) else ()))
                for p, part in enumerate(image.partitions) if part.leader >= 0 and not part.reassigning]
        fits = [(p, r) for p, r in held if set(r) == set(self.current)] or [
            (p, r) for p, r in held if len(set(r)) == len(set(self.current))]
        if not fits:
            return None
        p, replicas = fits[0]
        kept = tuple(b for b in self.current if b in self.replicas)
        to = relabel(self.current, kept, replicas, image.partitions[p].isr, len(state.brokers))
        return AlterPartitionReassignments(c.id, PartitionId(p), tuple(to[b] for b in self.replicas))

    def action(self, state: ClusterState) -> Action | None:
        """The model's admin action for it, on the active controller (None: there is none)."""
        c = _active_controller(state)
        if c is None or self.kind == "unrecorded":
            return None
        if self.kind == "reassign":
            return self.model_move(state, c)
        return {"create": CreatePartitions(c.id, self.replicas), "delete": DeleteTopics(c.id),
                "config": AlterConfigs(c.id)}[self.kind]

    def apply(self, state: ClusterState, variant: Variant) -> ClusterState | None:
        action = self.action(state)
        if action is None:
            return None
        c = _active_controller(state)
        assert c is not None
        nxt = step(state, action, variant)
        if nxt is None:
            return None
        wrote = len(next(o for o in nxt.controllers if o.id == c.id).log) > len(c.log)
        return nxt if wrote else None


OperatorEdit = ConfigureMigration | OperatorUpdatesMetadataVersion | OperatorAdminRequest | BrokerLeavesKRaft


def _losing(processes: set[str]) -> frozenset[int] | None:
    """The brokers whose sessions a window may lose once the faults have healed: those a fault struck
    or a stop killed lately; anyone's (None) while a controller a stop killed is down."""
    if any(not p.startswith("broker-") for p in processes):
        return None
    return frozenset(_node(p) for p in processes)


def _node(process: str) -> int:
    tail = process.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


# ---- the search --------------------------------------------------------------------------------


def _may_lose(state: ClusterState, action: Action, losing: frozenset[int]) -> bool:
    if isinstance(action, ExpireSession):
        return dict(state.zk.sessions).get(action.session) in losing
    if isinstance(action, SessionTimeout):
        return action.broker in losing
    return True


@dataclass(frozen=True)
class Node:
    state: ClusterState
    pending: tuple[tuple[tuple, object, object], ...] = ()  # (key, old, new) shown by the model, not yet seen
    shown: frozenset[tuple[tuple, object]] = frozenset()  # facts of the committed log shown so far
    # admin requests sent and not yet taken by the model's controller, each with the time Kafka answered it
    deferred: tuple[tuple[tuple[OperatorEdit, ...], int], ...] = ()

    def but(self, state: ClusterState, pending: tuple[tuple[tuple, object, object], ...] | None = None,
            shown: frozenset[tuple[tuple, object]] | None = None) -> Node:
        """This node with ``state`` (and ``pending``, ``shown`` when given), its deferred requests kept."""
        return Node(state, self.pending if pending is None else pending, self.shown if shown is None else shown,
                    self.deferred)


def _expire_target(state: ClusterState, action: Action, event: dict) -> Action:
    if isinstance(action, ExpireSession) and action.session == -1:
        return ExpireSession(state.brokers[_node(event["process"])].session)
    return action


def validate(obs: Observed, plan: dict, bound: int = SEARCH_BOUND) -> Validation:
    """Searches the model for a behaviour that shows the run's observations, in their order.

    Each change is first explained by its shortest hidden paths, on the side of the cluster it is
    about (hidden work not needed yet stays possible later, so this almost always suffices, and
    it keeps the search small). When that explains nothing, the same change is searched again
    from the same states with every hidden step of the whole model and every path length, up to
    ``bound`` states: a change reported unexplained has no explanation within that bound from
    the explanations kept of the changes before it.
    """
    runbook = plan.get("runbook")
    shape = Shape.of(plan, obs.version)
    brokers, controllers = shape.brokers, shape.controllers
    items = observations(obs, brokers)
    result = Validation(total=sum(1 for o in items if not o.is_operator))
    if not result.total:
        result.not_validated = "the run showed no change to explain"
        return result
    if runbook not in RUNBOOKS:
        result.not_validated = f"runbook {runbook}: its operator steps have no model mapping yet"
        return result
    if {"driver", "kraft-registered"} <= hidden_facts(obs):
        # the whole migration would be one hidden search: past the search's bound (60 s, undecided, on each
        # of the 3.4 and 3.5 recordings so cut down)
        result.not_validated = "the recording keeps neither process logs nor broker registrations"
        return result
    start = Node(shape.initial())
    trail: Trail = {start: (None, ())}
    see = partial(view, version=obs.version, controller_registrations=shows_controller_registrations(obs),
                  topics=admin_records(obs) is not None)
    hidden = hidden_facts(obs)
    if hidden:
        see = partial(_shown, see, hidden)
    search = Search(shape.scope(), Variant(profile=obs.profile), trail, see,
                    mirrored=frozenset(f for f, key in MIRRORED.items() if key not in hidden)
                    if admin_records(obs) is not None else frozenset(), never=never_shown(obs.version))
    frontier = [start]
    witnesses = partial(witnesses_on_path, trail, variant=search.variant, budget=window_budget(controllers, True))
    faulty = 0  # faults striking now: they open the window for session losses
    killed: set[str] = set()  # processes a stop had to kill (no clean shutdown), until they start again
    healed: dict[str, int] = {}  # process -> when a fault on it last healed: its cost may show only later
    for index, ob in enumerate(items):
        recent = {p for p, at in healed.items() if ob.event["time"] - at <= SESSION_LOSS_SEEN_WITHIN_MS}
        budget = window_budget(controllers, faulty > 0 or bool(killed | recent))
        losing = None if faulty else _losing(killed | recent)
        # a request Kafka answered before this change was taken before it: the operator sends one at a time
        taken = _take_deferred(frontier, search, budget, ob, faulty > 0)
        if not taken:
            result.unexplained = ob
            result.path, result.witnesses = _path(trail, frontier[0]), witnesses(frontier[0])
            return result
        frontier = taken
        if ob.is_operator:
            answered = _answered_later(ob)
            # a node that left an earlier part of this request (a topic's other partitions, its config) waiting
            # takes this part after it, so this part waits too
            waiting = [node for node in frontier
                       if faulty and answered is not None and node.deferred and node.deferred[-1][1] == answered]
            ready = [node for node in frontier if node not in waiting]
            nxt, explored = _apply(ready, ob, window_budget(controllers, faulty=True), search, FOCUS_BOUND) \
                if ready else ([], 0)
            if answered is not None and (nxt or faulty):
                # Kafka's controller takes the request some time after it was sent: the changes seen until it
                # answered may precede the request's record (a dual write of the request before), and a request
                # sent while a fault left no controller to take it (the quorum's one controller killed) waits for
                # one; one the model refuses outright is named as it is, unexplained
                later = [Node(node.state, node.pending, node.shown, (*node.deferred, (ob.actions, answered)))
                         for node in frontier]
                for node, deferring in zip(frontier, later):
                    trail.setdefault(deferring, (node, ()))
                nxt += later
            result.states += explored
            e = ob.event
            if e["kind"] in ("fault", "heal", "heal-skipped"):
                faulty = max(0, faulty + (1 if e["kind"] == "fault" else -1))
                if e["kind"] != "fault" and (e["process"].startswith("broker-") or e["fault"] == "pause-zookeeper"):
                    # a broker paused or killed: its sessions lost late; ZooKeeper stalled: anyone's, on resuming
                    healed[e["process"]] = e["time"]
            elif e["kind"] == "step" and e.get("action") == "stop" and not e.get("clean", True):
                killed.add(e["process"])  # its ZooKeeper session expires later, as a killed process's does
            elif e["kind"] == "step" and e.get("action") == "start" and e["process"] in killed:
                # its old session may have expired just before this start (the runbook waits for that, and
                # nothing visible marks it): the model may place the loss just after, as after a heal
                killed.discard(e["process"])
                healed[e["process"]] = e["time"]
            if not nxt:
                result.unexplained = ob
                result.path, result.witnesses = _path(trail, frontier[0]), witnesses(frontier[0])
                return result
            frontier = nxt
            continue
        nxt, alternatives, explored = [], set(), 0
        frontier = _with_deferred_taken(frontier, search, budget)
        if ob.key == ("topics", "reassigned"):
            nxt, alternatives, explored = _explain(
                frontier, ob, budget, search, FOCUS_BOUND, shortest=True, losing=losing, move=True
            )
        if not nxt:
            nxt, alternatives, more = _explain(
                frontier, ob, budget, search, FOCUS_BOUND, shortest=True, focus=True, losing=losing
            )
            explored += more
        if not nxt:
            nxt, alternatives, more = _explain(frontier, ob, budget, search, bound, shortest=False, losing=losing)
            explored += more
            if not nxt and more >= bound:
                result.states += explored
                result.undecided = f"more than {bound} hidden states before observation {index + 1}: {ob.line()}"
                return result
        result.states += explored
        if not nxt:
            result.unexplained = ob
            result.path, result.witnesses = _path(trail, frontier[0]), witnesses(frontier[0])
            result.alternatives = tuple(sorted(alternatives))
            return result
        frontier = nxt[:BEAM]
        result.explained += 1
    frontier = _take_deferred(frontier, search, window_budget(controllers, faulty=True), None) or frontier
    settled = [node for node in frontier if not node.pending and not node.deferred]
    if not settled:  # every explanation showed something the run never did
        result.unshown = tuple(f"{_key(k)} {_value(old)} -> {_value(new)}" for k, old, new in frontier[0].pending)
    result.unshown += never_mirrored(obs, search.mirrored)
    result.path, result.witnesses = _path(trail, (settled or frontier)[0]), witnesses((settled or frontier)[0])
    return result


def _answered_later(ob: Observation) -> int | None:
    """When Kafka answered an admin request sent at ``ob``'s time (None: not an admin request, or not later)."""
    answered = ob.event.get("answered")
    if not ob.actions or not all(isinstance(a, OperatorAdminRequest) for a in ob.actions):
        return None
    return answered if answered is not None and answered > ob.event["time"] else None


def _take(node: Node, deferred: int, search: Search, budget: Budget) -> Node | None:
    """``node`` after its controller takes its first ``deferred`` requests, in the order they were sent; one no
    controller can take yet (the quorum's one controller restarted, not yet leading) after the fewest hidden steps
    that let it, none of them visible (``_apply``)."""
    for _ in range(deferred):
        request = Observation(("operator",), None, {}, actions=node.deferred[0][0])
        rest = Node(node.state, node.pending, node.shown, node.deferred[1:])
        search.trail.setdefault(rest, (node, ()))
        taken = _operate(rest, node, (), request, budget, search)
        if taken is None:
            found, _ = _apply([rest], request, budget, search, FOCUS_BOUND)
            if not found:
                return None
            taken = found[0]
        node = taken
    return node


def _take_deferred(frontier: list[Node], search: Search, budget: Budget, before: Observation | None,
                   faulty: bool = False) -> list[Node]:
    """The frontier with every deferred request taken that must precede ``before`` (None: the run's end, all of
    them); a node that cannot take one is no explanation (Kafka accepted it). Before the operator's next runbook step,
    every request: the operator sends one at a time; while a fault strikes (``faulty``), but the earlier parts of
    that step's own (they share its answer), which a request sent while the fault left no controller to take it
    leaves waiting in order. Before anything else (a change, a fault's strike or heal, which the injector makes
    without waiting for the operator), those Kafka had answered by then."""
    out: dict[Node, None] = {}
    for node in frontier:
        due = sum(1 for _, answered in node.deferred if _due_before(answered, before, faulty))
        taken = _take(node, due, search, budget) if due else node
        if taken is not None:
            out.setdefault(taken)
    return list(out)


def _due_before(answered: int, before: Observation | None, faulty: bool) -> bool:
    """Whether a deferred request Kafka answered at ``answered`` is taken before ``before`` (``_take_deferred``)."""
    if before is None:
        return True
    e = before.event
    if before.is_operator and e.get("kind") == "step":
        return not faulty or answered != e.get("answered")
    return answered <= e["time"]


def _with_deferred_taken(frontier: list[Node], search: Search, budget: Budget) -> list[Node]:
    """The frontier and, after it, each node with deferred requests once it has taken the first of them, or more:
    the next change may follow the request's record."""
    out: dict[Node, None] = dict.fromkeys(frontier)
    for node in frontier:
        for n in range(1, len(node.deferred) + 1):
            taken = _take(node, n, search, budget)
            if taken is not None:
                out.setdefault(taken)
    return list(out)


# node -> (the frontier node it was reached from, the actions between): kept only for frontier nodes
Trail = dict[Node, tuple[Node | None, tuple[Action, ...]]]


@dataclass(frozen=True)
class Search:
    """What every step of one validation shares: the model's cluster and rules, the trail, the view."""

    scope: Scope
    variant: Variant
    trail: Trail
    see: Callable[[ClusterState], dict[tuple, object]]
    mirrored: frozenset[str] = frozenset()  # the admin's facts whose mirror into ZooKeeper is observed
    never: frozenset[tuple[tuple, object]] = frozenset()  # (key, value) the view never shows: ``never_shown``

    def mirror(self, before: ClusterState, after: ClusterState, shown: frozenset[tuple[tuple, object]]
               ) -> list[tuple[tuple, object, object]]:
        return mirror_changes(before, after, shown, self.mirrored) if self.mirrored else []


def _apply(frontier: list[Node], ob: Observation, budget: Budget, search: Search, bound: int
           ) -> tuple[list[Node], int]:
    """The operator's step, from every node that can take it; when none can yet, after the fewest
    hidden steps that make it possible (a clean stop of the active controller waits for ZooKeeper
    to have every committed record, KIP-866 §Rollback to ZK), searched as ``_explain`` does."""
    out = [child for node in frontier if (child := _operate(node, node, (), ob, budget, search))]
    out += _after_unlogged_steps(frontier, ob, budget, search)
    if out or any(isinstance(a, OperatorAdminRequest) and a.never(frontier[0].state) for a in ob.actions):
        return out, 0
    window = _Window(frontier, budget, bound, shortest=True)
    found: dict[Node, None] = {}
    for node, depth, action, nxt, changes in window.steps(search, HIDDEN):
        child = node.but(nxt)
        if changes or not window.add(node, action, child, depth):
            continue
        origin, hidden = window.path_to(child)
        done = _operate(child, origin, hidden, ob, budget, search)
        if done is not None:
            found.setdefault(done)
            window.found_at(depth + 1)
    return list(found), window.explored


def _after_unlogged_steps(frontier: list[Node], ob: Observation, budget: Budget, search: Search) -> list[Node]:
    """The operator's kill of a controller, each just after one step of its migration driver whose log line the kill
    cut off: a step that changes nothing else of the view (a 3.6.2 driver wrote /migration's offset and was killed
    40 ms later, before it logged its move to SYNC_KRAFT_TO_ZK)."""
    unlogged = {("driver", a.controller) for a in ob.actions if isinstance(a, CrashController)}
    out = []
    for node in frontier if unlogged else ():
        before = search.see(node.state)
        for action in candidate_actions(node.state, search.scope):
            if not isinstance(action, HIDDEN):
                continue
            nxt = step(node.state, action, search.variant)
            if nxt is None or nxt.controllers is node.state.controllers:
                continue
            changes = visible_changes(before, search.see(nxt), node.shown) + search.mirror(node.state, nxt, node.shown)
            if changes and all(key in unlogged for key, _, _ in changes):
                if (done := _operate(node.but(nxt), node, (action,), ob, budget, search)) is not None:
                    out.append(done)
    return out


def _unlogged_before(ob: Observation) -> frozenset[tuple]:
    """The view's keys a step just before the operator's ``ob`` may change unseen: the migration driver of a
    controller ``ob`` kills, whose last log line a kill may cut off (a 3.6.2 driver wrote /migration's offset and
    was killed 40 ms later, before it logged its move to SYNC_KRAFT_TO_ZK)."""
    return frozenset(("driver", a.controller) for a in ob.actions if isinstance(a, CrashController))


def _operate(node: Node, origin: Node, hidden: tuple[Action, ...], ob: Observation, budget: Budget,
             search: Search) -> Node | None:
    """``node`` after the operator's actions, recorded as reached from ``origin`` by ``hidden`` then them."""
    state = node.state.replace(budget=budget)
    taken: list[Action | OperatorEdit] = []
    before = search.see(state)
    for action in ob.actions:
        action = _expire_target(state, action, ob.event)
        if isinstance(action, OperatorEdit):
            nxt = action.apply(state, search.variant)
        else:
            nxt = step(state, action, search.variant)
        if nxt is None:
            return None
        if isinstance(action, OperatorAdminRequest):  # the path names the model's action it took
            action = action.action(state) or action
        state = nxt
        taken.append(action)
    after = search.see(state)
    # what the operator's step made visible must be seen too, as a two-fact step's second fact is
    changes = tuple(visible_changes(before, after, node.shown))
    changes += tuple(search.mirror(node.state, state, node.shown))
    shown = node.shown | {(k, new) for k, _, new in changes if k[0] in SHOWN_ONCE}
    child = node.but(state, node.pending + changes, shown)
    search.trail.setdefault(child, (origin, (*hidden, *taken)))
    return child


def _explain(frontier: list[Node], ob: Observation, budget: Budget, search: Search, bound: int, shortest: bool,
             focus: bool = False, losing: frozenset[int] | None = None, move: bool = False
             ) -> tuple[list[Node], set[str], int]:
    """The nodes that show ``ob`` after hidden steps from ``frontier``; else what could be shown instead.

    With ``focus``, only the steps of the side ``ob`` is about (the KRaft side's, or the ZooKeeper
    era's) are tried: a path found so is a path of the model all the same, and the other side's
    independent steps no longer multiply the states searched. With ``move``, only ``MOVE_STEPS``, as
    ``_moves_the_partition`` narrows them."""
    allowed = HIDDEN + (DURING_FAULTS if budget.expiries else ())
    keep = _moves_the_partition if move else None
    if move:
        allowed = MOVE_STEPS
    if focus:
        kraft_side = ob.key[0] not in ("zk-controller", "zk-registered") or ob.value == "kraft-claim"
        side = KRAFT_FOCUS if kraft_side else ZK_FOCUS
        allowed = tuple(t for t in allowed if t in side)
    found: dict[Node, None] = {}
    alternatives: set[str] = set()
    for node in frontier:  # a change the model showed earlier, seen now
        for i, (key, old, new) in enumerate(node.pending):
            if key == ob.key and ob.matches(old, new):
                child = node.but(node.state, node.pending[:i] + node.pending[i + 1:])
                search.trail.setdefault(child, (node, ()))
                found.setdefault(child)
    if found or ob.key[0] == "topics" and ob.key[1] != "reassigned" and not any(
            _uncommitted(node.state) for node in frontier) or (ob.key, ob.value) in search.never:
        # no hidden step writes an admin's record but the leader's ISR join that completes a reassignment (hidden
        # steps may commit one the request wrote: a quorum of 3 commits it once a follower fetches it), and no
        # path shows what the release's view never does
        return list(found), alternatives, 0
    if ob.key == ("topics", "reassigned"):  # only an ISR join completes a move, of one the request started
        frontier = [node for node in frontier if any(p.reassigning for c in node.state.controllers if is_active(c)
                                                     for p in own_image(c).partitions)]
        if not frontier:
            return [], alternatives, 0
    fact = next((f for f, key in MIRRORED.items() if key == ob.key[0]), None)
    if fact is not None:  # nor can a dual write mirror more than the logs hold
        count = ob.value if isinstance(ob.value, int) else 0
        frontier = [node for node in frontier if may_mirror(node.state, fact, count)]
        if not frontier:
            return [], alternatives, 0
    window = _Window(frontier, budget, bound, shortest)
    for node, depth, action, nxt, changes in window.steps(search, allowed, losing, keep):
        shown = node.shown | {(k, new) for k, _, new in changes if k[0] in SHOWN_ONCE}
        if not changes:
            window.add(node, action, node.but(nxt, shown=shown), depth)
            continue
        mine = [c for c in changes if c[0] == ob.key and ob.matches(c[1], c[2])]
        if mine and len(node.pending) + len(changes) - 1 <= PENDING_WINDOW:
            shown_node = node.but(nxt, node.pending + tuple(c for c in changes if c is not mine[0]), shown)
            if shown_node not in found:
                origin, hidden = window.path_to(node)
                search.trail.setdefault(shown_node, (origin, (*hidden, action)))
                found.setdefault(shown_node)
                window.found_at(depth)
        else:
            alternatives.update(f"{_key(k)} {_value(old)} -> {_value(new)}" for k, old, new in changes)
    return list(found), alternatives, window.explored


def _moves_the_partition(state: ClusterState, action: Action) -> bool:
    """Of the deliveries, only a LeaderAndIsr of a partition in a reassignment on the active controller's image."""
    if not isinstance(action, Deliver):
        return True
    c = _active_controller(state)
    message = action.message
    return c is not None and isinstance(message, LeaderAndIsr) and any(
        p == message.partition and part.reassigning for p, part in enumerate(own_image(c).partitions))


def _uncommitted(state: ClusterState) -> bool:
    """Whether an active controller's log holds records past its high watermark (the view shows committed ones)."""
    return any(is_active(c) and c.high_watermark < len(c.log) for c in state.controllers)


class _Window:
    """The search between two observations: hidden steps from the frontier, breadth first, each
    node's way back to the frontier node it came from kept (``path_to``)."""

    def __init__(self, frontier: list[Node], budget: Budget, bound: int, shortest: bool) -> None:
        self.bound, self.shortest = bound, shortest
        self.up: dict[Node, tuple[Node | None, Action | None]] = {}
        self.roots: dict[Node, Node] = {}
        self.queue: deque[tuple[Node, int]] = deque()
        self.first_found = 1 << 30
        for node in frontier:
            start = node.but(node.state.replace(budget=budget))
            if start not in self.up:
                self.up[start], self.roots[start] = (None, None), node
                self.queue.append((start, 0))

    @property
    def explored(self) -> int:
        return len(self.up)

    def found_at(self, depth: int) -> None:
        """Something was found at ``depth``: a shortest search ends once that depth is done."""
        self.first_found = min(self.first_found, depth)

    def steps(self, search: Search, allowed: tuple[type, ...], losing: frozenset[int] | None = None,
              keep: Callable[[ClusterState, Action], bool] | None = None):
        """Each step an allowed action takes from a node of the tree: (node, its depth, the action,
        the next state, the visible changes it makes), until the bound or, if shortest, past the
        depth of the first thing found. With ``losing``, only those brokers lose sessions; with ``keep``, only
        the actions it keeps."""
        while self.queue and len(self.up) < self.bound:
            node, depth = self.queue.popleft()
            if self.shortest and depth > self.first_found:
                return
            before = search.see(node.state)
            for action in (*candidate_actions(node.state, search.scope), *isr_joins(node.state)):
                if not isinstance(action, allowed):
                    continue
                if losing is not None and not _may_lose(node.state, action, losing):
                    continue
                if keep is not None and not keep(node.state, action):
                    continue
                nxt = step(node.state, action, search.variant)
                if nxt is None or nxt == node.state:
                    continue
                if nxt.controllers is node.state.controllers and nxt.zk is node.state.zk:
                    # The view reads only the controllers, ZooKeeper and the brokers' ids (``view``), and the
                    # mirror only ZooKeeper: a step that kept both objects (a delivery to a broker, a broker's own
                    # step) shows nothing. Most hidden steps are such.
                    yield node, depth, action, nxt, []
                    continue
                after = search.see(nxt)
                yield node, depth, action, nxt, visible_changes(before, after, node.shown) + search.mirror(
                    node.state, nxt, node.shown)

    def add(self, parent: Node, action: Action, child: Node, depth: int) -> bool:
        """``child`` as a hidden step from ``parent``, to be searched from; False when already in the tree."""
        if child in self.up:
            return False
        self.up[child] = (parent, action)
        self.queue.append((child, depth + 1))
        return True

    def path_to(self, node: Node) -> tuple[Node, tuple[Action, ...]]:
        """The frontier node ``node`` was reached from, and the hidden actions between."""
        actions: list[Action] = []
        while True:
            previous, action = self.up[node]
            if previous is None:
                return self.roots[node], tuple(reversed(actions))
            assert action is not None
            actions.append(action)
            node = previous


def isr_joins(state: ClusterState) -> list[AlterPartition]:
    """The leaders' ISR joins of the adding replicas of each reassignment in progress on an active controller: the
    model proposes them for its scope's one move only (``candidate_actions``), validation for the moves it played."""
    return [AlterPartition(part.leader, c.id, PartitionId(p), r) for c in state.controllers if is_active(c)
            for p, part in enumerate(own_image(c).partitions) for r in part.adding if r not in part.isr]


def _key(key: tuple) -> str:
    return " ".join(str(k) for k in key)


def _value(v: object) -> str:
    return v.name if hasattr(v, "name") else str(v)


def witnesses_on_path(trail: Trail, node: Node | None, variant: Variant, budget: Budget) -> tuple[str, ...]:
    """The model's sometimes-properties (witnesses) that the path reaching ``node`` takes a step of, in the order
    first reached: what the run exercised, as the model's explanation of it tells. Each segment of the path is
    played again from the state it began at, given ``budget`` (as generous as any window's), so the hidden steps
    the search chose count too: a witness reached only by them is the model's guess of what the run did unseen."""
    reached: dict[str, None] = {}
    for origin, actions in _segments(trail, node):
        state = origin.state.replace(budget=budget)
        for action in actions:
            nxt = action.apply(state, variant) if isinstance(action, OperatorEdit) else step(state, action, variant)
            if nxt is None:  # the step needed what the search's window had and this one lacks: stop this segment
                break
            if not isinstance(action, OperatorEdit):
                reached.update(dict.fromkeys(witnessed(state, action, nxt)))
            state = nxt
    return tuple(reached)


def _segments(trail: Trail, node: Node | None) -> list[tuple[Node, tuple[Action, ...]]]:
    """The path reaching ``node``, from the start: each node it went through and the actions taken from it."""
    segments: list[tuple[Node, tuple[Action, ...]]] = []
    while node is not None:
        previous, actions = trail.get(node, (None, ()))
        if previous is not None:
            segments.append((previous, actions))
        node = previous
    return segments[::-1]


def _path(trail: Trail, node: Node | None) -> tuple[Action, ...]:
    return tuple(a for _, actions in _segments(trail, node) for a in actions)
