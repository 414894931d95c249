"""z3 proofs of the migration's fencing: the KRaft claim, the /migration compare-and-set, driver order.

Rules: those of ``properties.proofs.engine``, whose machinery (``Core``) this module reuses: the z3
transition system is a projection of the Python model, each action formula mirrors a handler
of ``model.kraft_quorum`` or ``model.kraft_migration`` (named in its docstring), seeded bugs
switch the formulas where the model switches its code, one named obligation per (action,
invariant) pair, and every satisfiable BMC result is replayed through ``model.step`` and must
break the same registry invariants.

The migration fencing core (``project``), and what it leaves out:
- Shared: ZooKeeper available; /controller_epoch (exists, value, version) and the largest value
  ever written (``history.max_controller_epoch``); /controller (exists, whether a KRaft controller
  wrote it, that controller and its Raft epoch); /migration (exists, version, the Raft epoch it
  names); the budgets the core's perturbations spend (KRaft elections, controller crashes,
  operator migration steps, ZooKeeper outages, stale reads, dual writes whose session expired or whose
  reply was lost, MetadataChangeEvents queued). /migration's offset (``migration_offset``; the offsets it is
  compared with are the controllers', below); the log the offsets point into is not kept (ZkWritesFollowKRaftCommits
  and the lag bound, which need it, are outside the core). The migration state of the committed log (its last
  ZkMigrationStateRecord: ``committed_state``) and whether the quorum is a single controller.
- Per KRaft controller (the actors; an uninterpreted sort ``Controller`` in the unbounded proof):
  alive, its migration flag, its persisted Raft epoch, candidate, holding another controller's
  vote, leading (``is_active``), leading in Raft but not yet active (its LeaderChange has not
  committed), resigned, and its migration driver: the state as a code
  (``DRIVER_CODES``, -1 for no driver), the leadership it believes in (epoch, whether its own),
  the /migration version and offset and the /controller_epoch version of its claim that it believes (-2:
  unknown), and the MetadataChangeEvent in its queue, if any (the Raft epoch and whether the node led when it
  was raised, the offset of the image it carries; ``project`` refuses scopes where two may be queued); the
  migration state of its whole log,
  committed or not (``log_state``); and its
  ZooKeeper server's view (``model.zookeeper`` views, scope stale-reads): whether the server lags, and
  what it shows of /controller_epoch (exists, value, version), /controller (exists, a KRaft claim,
  its Raft epoch) and /migration (exists, version, offset), all False/0 while it does not lag. The driver's
  reads go through it (``_read``): the claim decides on what its server shows and its multi runs at
  ZooKeeper's leader, where a stale read fails it (the /controller_epoch version it read, /controller
  as it saw it); RecoverMigrationState reads /migration through it (a create a lagging read asked for
  fails, NodeExists, and the driver stays UNINITIALIZED); KRaftLeaderChange reads /migration's
  version through it; every write of the controller ends its view (its server has applied the
  multi). ``project`` refuses a /controller whose version is not 0 (the model only ever creates it).
- The step's ghost (``STEP_FIELDS``, reset by every step): the KRaft write ZooKeeper applied in
  this step, if any: its writer's epoch, whether it was a dual write, the writer's driver state.
- Offsets (``ORDERED``): the offset of an image a write carries comes from the log, outside the core, so it is a
  free integer of the step (``Choices.number``) bounded as the handler's guard bounds it: a sync's image is not
  behind the driver's offset, a dual write's, a queued event's and a lost-reply write's are past it, the
  migration's end is past it and past 0 (a driver in ZK_MIGRATION wrote back a /migration with no migration).
  Every formula compares offsets only by order, with each other and with 0, so the BMC's offsets are its own: the
  replay follows a trace whose offsets are in the model's order (``Core.order_key``), and a trace it cannot follow
  is blocked by that order, not by the values (``EncodedStep.orders``).
- Logs, high watermarks and images are abstracted away but for their migration states. Where a
  handler decides from them (is there committed metadata ZooKeeper lacks? did activation resign?
  how far does a Fetch commit?) its guard is over-approximated or its outcome is a choice
  (``engine.Choices``): "activates", "granted", "inactive"/"migrated", "synced", "lc_commits",
  "commits" (and "finalizes" over any number of controllers). Proofs stay
  sound; a BMC trace the model cannot follow is refuted by the replay, which may insert up to
  ``MAX_STUTTERS`` log-only model steps (``STUTTER_KINDS``: appends, Fetch rounds, broker
  registrations) that leave the core unchanged. How far this goes: the search finds the seeded
  bugs whose traces need no more than that; DUAL_WRITE_BEFORE_SYNC's needs a new leader whose
  committed log shows the migration done while /migration does not, and the search spends its
  refinements on the old leader's paths first (committed metadata is outside the core), so only
  its induction obligation catches it.
- Refused by ``project`` (``OutsideProjection``): states whose budget allows a ZooKeeper election.
  ZooKeeper elections are the fencing core's (``properties.proofs.fencing``); after the KIP's rollback
  deletes /controller_epoch the next one reuses an epoch, the finding the scopes "rollback" and
  "lifecycle" pin, which breaks ZkControllerEpochsIncreaseAcrossHandOver. Every other scope has
  no election budget.
- Raft premises: facts of every reachable state that rest on quorum intersection, which is not
  expressible over an uninterpreted sort, so the formulas take them as given instead of proving
  them: a Fetch moves the committed log only to a longer prefix of the serving leader's log (Raft's
  Leader Completeness and commit rule: that leader's log state has reached the committed one),
  and a driver reads a prefix of the committed log (WaitForControllerQuorum's branches need the
  committed state to have reached what it read). The explorer checks the Raft side
  (CommittedRecordsNeverChange, CommittedRecordsOnMajority), and the agreement test checks on
  reachable states that every model step satisfies the formulas. With them,
  MigrationStateOnlyMovesForward is proved: activation reads a committed log (the Fetch that
  commits a new leader's LeaderChange commits its whole log), so no log is ever more than one
  move ahead of the committed state (LogsAtMostOneStateAhead), and a commit moves the committed
  state to a log's, never past it. The seeded bug ACTIVATE_ON_UNCOMMITTED_LOG (activation at
  BecomeLeader, on a predecessor's uncommitted MIGRATION) breaks that lemma in BecomeLeader, and
  BMC finds the jump PRE_MIGRATION -> POST_MIGRATION its next Fetch commits.
- Also left out: NoZkWriteAfterPostMigration (whether a driver that speaks for an older
  leadership can hold a log with POST_MIGRATION and still write depends on which entries a
  candidate's log holds against its voters', Raft's vote rule, beyond the migration states this
  core keeps), and AtMostOneKRaftLeaderPerEpoch (a majority is not expressible over an
  uninterpreted sort; no property here needs it: the claim itself refuses an equal epoch).

Encoded actions: StartElection, RequestVote, Fetch, BecomeLeader (the quorum's epochs and
leadership, activation once the LeaderChange commits, the commits and the migration state
activation writes), CrashController, ShutdownController, RestartController, ReconfigureController,
RecoverMigrationState, KRaftLeaderChange, WaitForControllerQuorum, WaitForZkBrokers,
BecomeZkController (the claim, then the unconditional /migration write), CompleteMigration (the
MIGRATION record), MigrationCommitted,
SyncKRaftToZk, SendRPCsToBrokers, DualWrite (the last three through ``_kraft_zk_write``: the
/controller_epoch check and the /migration compare-and-set), DualWriteReplyLost (the same multi applied, its
reply lost and its resent copy failed on /migration's version: kip's driver finds its own write and goes on,
kafka-3.9's keeps the version it had, so its next write fails; spending lost_write_replies),
DualWriteSessionExpired (nothing written; spending write_failures), PublishMetadataChange (a driver in
DUAL_WRITE queues an event with Raft's epoch and leadership; spending queued_events) and RunMetadataChange (the
event runs: dropped when stale, KAFKA-16667, or when the driver is not leading in DUAL_WRITE, or, a choice, when
ZooKeeper has its image already; else DualWrite's multi), ZkOutage, ZkRecover,
DeleteControllerZNodes (rollback; KIP: /controller and /controller_epoch, Kafka 3.9: /controller
and /migration; after it no controller restarts), ZkServerLags and ZkServerCatchesUp (a controller's
server's view, spending stale_reads), ZkControllerSessionCloses (StopBroker or
ExpireSession of the session that owns a ZooKeeper controller's /controller),
MigrateBrokerToKRaft and RollbackBrokerToZk (they spend the migrations budget), and Stutter
(every other model step).

Properties (registry names): OnlyCurrentKRaftLeaderWritesApply, KRaftEpochInZkOnlyIncreases,
ZkControllerEpochsIncreaseAcrossHandOver, DriverTakesOnlyTableTransitions,
DualWritesOnlyInDualWriteStates, KRaftEpochNeverDecreases, MigrationStateOnlyMovesForward,
MigrationOffsetNeverGoesBack. The last fails for the design in one obligation, BecomeZkController's
(``MIGRATION_OFFSET_FINDING``, ``Core.findings``): its unconditional write of /migration (KAFKA-16171) takes the
offset a lagging server shows; BMC finds it from stale-reads in the 17 steps the explorer pins under both profiles,
and ``kraftcheck prove`` lists both as the finding. Every other write is the fenced compare-and-set, which writes
past /migration's offset because a driver that believes /migration's current version believes its offset
(BelievedMigrationOffsetIsCurrent, and ViewedMigrationOffsetIsCurrent for what a lagging server shows). Lemmas,
each proved inductive with them (``INVARIANTS``): /controller_epoch holds the largest epoch ever
written; a stopped controller holds nothing; driver codes are table states; Raft epochs are >= 0; a
driver's claimed /controller_epoch version is not ahead of the znode; every driver that has claimed
speaks for a leadership no newer than /controller's; the driver whose claim is /controller_epoch's
current version owns /controller in its own epoch (why the check fences everyone else); believed
/migration versions are not ahead of the znode (why the compare-and-set can only fail for the
stale); /migration names no leadership newer than /controller's, and none at all before a claim;
migration states are state codes; a log whose state has reached the committed one is at most one
move ahead of it; a quorum of one has its whole log committed; a driver on the migration's way has
a committed state that reached PRE_MIGRATION; once the rollback has deleted KRaft's znodes no
controller runs (HandedBackQuorumStaysDown); a lagging server shows no znode version the leader
has not had, /migration to a recovered driver, and at /controller_epoch's current version the
claim /controller holds (ViewsAreNotAhead: why a claim from a lagging read either fails or claims
what a fresh read would have; LoneVoterLogIsCommitted is proved without it, ``proved_without``,
since over any number of controllers two of its obligations were left unknown at the timeout with
it assumed and are proved in seconds without).

Seeded bugs switched (``ENCODED_BUGS``), among them CLAIM_TRUSTS_STALE_READ (the claim's multi
sets /controller_epoch at version -1, trusting a lagging read): BMC finds it from stale-reads in
11 encoded steps (a lag, a claim, a KRaft failover whose new driver claims from the lagging read,
reusing the epoch the first claim wrote), and six of BecomeZkController's obligations fail.
A dual write's lost reply and expired session are encoded (scopes dual-write-resend and dual-write-failure,
BMC'd by ``kraftcheck prove`` too): the fencing properties still hold with them, under both profiles; their
seeded bugs (RESEND_KEEPS_STALE_VERSION, FAILED_WRITE_DROPS_DELTA) break convergence and ZooKeeper-equals-image
properties, outside this core, so they are not switched. The driver's event queue is encoded (scope event-queue,
BMC'd by ``kraftcheck prove``): the fencing properties hold with queued events under both profiles, and still with
the seeded bug STALE_EVENT_RUNS (a stale event written as current), whose write is the fenced multi of a driver
that believes it leads; that bug breaks MigrationOffsetNeverGoesBack (RunMetadataChange's obligation fails, and BMC
finds it from event-queue in 5 encoded steps, 9 of the model's: two commits, one before the event is raised and one
after, are log-only steps the replay inserts). The formulas follow RESEND_KEEPS_STALE_VERSION (``followed_bugs``),
whose properties are outside the core, so the proofs can be asked under it; they do not switch it. The initial
migration in batches (scope batched-migration, BMC'd too, a KRaft failover or a ZooKeeper outage between the
batches) needs no encoding of its own: a batch (MigrateMetadata) writes records of the migration's transaction and
no migration state, so it is a Stutter of this core, and the walks of that scope agree with model.step.

BMC (``Core.bmc``) from a scope's real initial state, with Ints for the counters, assumes at every
step the lemmas that are inductive for the variant (``Core.inductive_lemmas``: those the
variant's actions keep and the initial state satisfies). Reachable states satisfy them, so no
trace is lost; without them the solver rediscovers them along every path (measured, scope
"migration" at depth 20: 80 s without, 27 s with; bench.z3_migration).

Init of the induction (``migration_start``): a ZooKeeper cluster whose quorum was just formatted:
/controller_epoch holds the largest epoch written so far (which the fencing core proves of the
ZooKeeper era), /controller is a broker's or absent, no /migration, every controller just started
in epoch 0 with a fresh driver if it has the flag. Why the unbounded proof is decided: as in
``properties.proofs.fencing``, the only ``Controller`` terms are constants (the acting controller and its
peer, /controller's owner, ``nobody``, Skolem constants); guards and invariants are universal.

How this fits with the rest: docs/design.md §9.
"""

from __future__ import annotations

from typing import Any

import z3

from model import zookeeper as zkm
from model.actions import (
    Action,
    AlterConfigs,
    BecomeLeader,
    BecomeZkController,
    BrokerHeartbeat,
    CompleteMigration,
    CrashController,
    DeleteControllerZNodes,
    DualWrite,
    DualWriteReplyLost,
    DualWriteSessionExpired,
    ExpireSession,
    Fetch,
    KRaftLeaderChange,
    MigrateBrokerToKRaft,
    MigrateMetadata,
    MigrationCommitted,
    PublishMetadataChange,
    ReconfigureController,
    RecoverMigrationState,
    RegisterWithKRaft,
    RequestVote,
    RestartController,
    RollbackBrokerToZk,
    RunMetadataChange,
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
    ZkServerCatchesUp,
    ZkServerLags,
)
from model.bugs import Bug, Variant
from model.kraft import FIRST_CONTROLLER_ID, ControllerId, QuorumRole, ZkMigrationState, image_of
from model.kraft_quorum import is_active
from model.migration import (
    EMPTY_MIGRATION,
    MIGRATION,
    STATE_ORDER,
    VALID_TRANSITIONS,
    Driver,
    KRaftControllerZNode,
    MigrationDriverState,
    Profile,
)
from model.scopes import Scope
from model.state import CONTROLLER, CONTROLLER_EPOCH, ClusterState, controller_index
from model.step import candidate_actions
from model.types import ANY_VERSION
from properties.proofs.engine import (
    ACTOR,
    BOOL,
    INT,
    Core,
    Effect,
    EncodedAction,
    EncodedStep,
    FiniteActors,
    Invariant,
    OutsideProjection,
    Projection,
    SymState,
)

D = MigrationDriverState
DRIVER_CODES: dict[MigrationDriverState, int] = {state: code for code, state in enumerate(D)}
NO_DRIVER = -1
UNINITIALIZED, INACTIVE = DRIVER_CODES[D.UNINITIALIZED], DRIVER_CODES[D.INACTIVE]
_FRESH = Driver()  # what a (re)started controller with the flag begins with
UNKNOWN_VERSION = _FRESH.zk_epoch_version  # a driver's version of a znode it has not read (-2)

# The migration state a log holds (image_of(log).bootstrapped_migration), None before its bootstrap.
M = ZkMigrationState
STATE_CODES: dict[ZkMigrationState | None, int] = {None: 0, M.NONE: 1, M.PRE_MIGRATION: 2, M.MIGRATION: 3,
                                                   M.POST_MIGRATION: 4}
NO_STATE, NONE_STATE, PRE, MIG, POST = (STATE_CODES[k] for k in (None, M.NONE, M.PRE_MIGRATION, M.MIGRATION,
                                                                  M.POST_MIGRATION))



def _closure(order: dict) -> set[tuple]:
    """The pairs (a, b) of states such that a log may go from a to b: STATE_ORDER's moves, repeated."""
    pairs = {(a, a) for a in order}
    while True:
        more = {(a, c) for a, b in pairs for c in order[b]} - pairs
        if not more:
            return pairs
        pairs |= more


MOVES = {(STATE_CODES[a], STATE_CODES[b]) for a, targets in STATE_ORDER.items() for b in targets}
REACHES = {(STATE_CODES[a], STATE_CODES[b]) for a, b in _closure(STATE_ORDER)}

# The seeded bugs the encoding switches, with the encoded actions whose formulas they change.
ENCODED_BUGS: dict[Bug, tuple[str, ...]] = {
    # the dual-write multi without its Check on /controller_epoch
    Bug.DUAL_WRITE_SKIPS_EPOCH_CHECK: ("DualWrite",),
    # the claim writes /controller_epoch back unchanged
    Bug.CLAIM_REUSES_ZK_EPOCH: ("BecomeZkController",),
    # the claim overwrites a /controller holding a newer (or the same) Raft epoch
    Bug.CLAIM_IGNORES_NEWER_KRAFT_EPOCH: ("BecomeZkController",),
    # WAIT_FOR_CONTROLLER_QUORUM goes straight to DUAL_WRITE
    Bug.DRIVER_SKIPS_TO_DUAL_WRITE: ("WaitForControllerQuorum",),
    # DualWrite runs in SYNC_KRAFT_TO_ZK too
    Bug.DUAL_WRITE_BEFORE_SYNC: ("DualWrite",),
    # a restarted controller starts from epoch 0
    Bug.RESTART_FORGETS_EPOCH: ("RestartController",),
    # a new leader activates at once, on its whole log, not once its LeaderChange has committed
    Bug.ACTIVATE_ON_UNCOMMITTED_LOG: ("BecomeLeader",),
    # the claim's multi sets /controller_epoch and replaces /controller at version -1, trusting a lagging read
    Bug.CLAIM_TRUSTS_STALE_READ: ("BecomeZkController",),
    # a queued MetadataChangeEvent of another leadership runs, its image taken as the newest
    Bug.STALE_EVENT_RUNS: ("RunMetadataChange",),
}

# The one way the design lowers /migration's offset (scope stale-reads pins it under both profiles, 17 steps):
# BecomeZkController's second write (KAFKA-16171) sets /migration unconditionally to what the driver's server
# shows, and a server that lags shows an older offset, which undoes a newer leader's MigrationCommitted.
MIGRATION_OFFSET_FINDING = ("BecomeZkController writes /migration back unconditionally (KAFKA-16171), as a lagging"
                            " server shows it: an older offset (scope stale-reads)")

# ---- the projection -----------------------------------------------------------------------------

GLOBAL_FIELDS: dict[str, str] = {
    "zk_available": BOOL,
    "epoch_exists": BOOL,  # /controller_epoch exists
    "epoch_value": INT,
    "epoch_version": INT,
    "max_epoch": INT,  # history.max_controller_epoch: the largest /controller_epoch ever written
    "controller_exists": BOOL,  # /controller exists
    "controller_kraft": BOOL,  # ... and a KRaft controller's claim wrote it
    "controller_owner": ACTOR,  # that KRaft controller (nobody for a broker's /controller)
    "controller_kraft_epoch": INT,  # the Raft epoch it claimed in
    "migration_exists": BOOL,  # /migration exists
    "migration_version": INT,
    "migration_epoch": INT,  # its kraft_controller_epoch
    "migration_offset": INT,  # its kraft_metadata_offset (ordered: compared only by order, ``ORDERED``)
    "handed_back": BOOL,  # history.handed_back: the rollback deleted KRaft's znodes; the quorum is over
    "committed_state": INT,  # STATE_CODES of the committed log: image_of(history.committed).migration
    "single_voter": BOOL,  # the quorum is one controller: what it appends commits at once (constant)
    # the budgets the core's perturbations spend (model.state.Budget)
    "kraft_elections_left": INT,
    "crashes_left": INT,  # controller_crashes
    "migrations_left": INT,  # operator steps of the migration and its rollback
    "outages_left": INT,
    "stale_reads_left": INT,
    "write_failures_left": INT,  # dual writes whose session expired while they waited
    "lost_replies_left": INT,  # dual writes applied whose reply was lost
    "queued_events_left": INT,  # MetadataChangeEvents that may still be queued (Budget.queued_events)
    # the step's ghost: the KRaft write ZooKeeper applied in this step (ghost.kraft_writes)
    "wrote": BOOL,
    "write_epoch": INT,  # its writer's epoch (the leadership its driver speaks for)
    "write_dual": BOOL,  # it was a dual write
    "write_state": INT,  # its writer's driver state when it wrote
}
STEP_FIELDS: dict[str, Any] = {"wrote": False, "write_epoch": 0, "write_dual": False, "write_state": NO_DRIVER}

CONTROLLER_FIELDS: dict[str, str] = {
    "alive": BOOL,
    "flag": BOOL,  # zookeeper.metadata.migration.enable: a (re)start runs a driver
    "epoch": INT,  # the persisted Raft epoch
    "candidate": BOOL,
    "has_vote": BOOL,  # a candidate that another controller voted for
    "leads": BOOL,  # kraft_quorum.is_active
    "awaiting": BOOL,  # Raft leader not yet active: its LeaderChange has not committed
    "resigned": BOOL,  # activation refused to lead
    "log_state": INT,  # STATE_CODES of its whole log, committed or not (persisted: survives a stop)
    "driver": INT,  # DRIVER_CODES, NO_DRIVER
    "driver_epoch": INT,  # Driver.kraft_epoch: the leadership the driver last heard of
    "driver_leader": BOOL,  # Driver.leader: that leadership is its own
    "driver_migration_version": INT,  # Driver.migration_version
    "driver_migration_offset": INT,  # Driver.migration_offset: /migration's offset as it last read or wrote it
    "driver_zk_version": INT,  # Driver.zk_epoch_version: /controller_epoch's version after its claim
    # The MetadataChangeEvent in its driver's queue (Driver.queue; at most one, ``project``), if any: the Raft
    # epoch and whether the node led when it was raised (KAFKA-16667); the image it carries is outside the core.
    "queued": BOOL,
    "queued_epoch": INT,
    "queued_leader": BOOL,
    "queued_offset": INT,  # the offset of the committed image it carries
    # Its ZooKeeper server's view (model.zookeeper views): whether it lags, and what it shows of the znodes its
    # driver reads (/controller's version is always 0: it is only ever created), all False/0 while it does not lag.
    "lags": BOOL,
    "view_epoch_exists": BOOL,
    "view_epoch_value": INT,
    "view_epoch_version": INT,
    "view_controller_exists": BOOL,
    "view_controller_kraft": BOOL,
    "view_controller_kraft_epoch": INT,
    "view_migration_exists": BOOL,
    "view_migration_version": INT,
    "view_migration_offset": INT,
}
NO_VIEW: dict[str, Any] = {name: False if kind == BOOL else 0
                           for name, kind in CONTROLLER_FIELDS.items() if name == "lags" or name.startswith("view_")}
VIEWED = [name[len("view_"):] for name in NO_VIEW if name != "lags"]  # the global fields a view shows
NO_QUEUE = {"queued": False, "queued_epoch": 0, "queued_leader": False, "queued_offset": 0}
NO_DRIVER_FIELDS = {
    "driver": NO_DRIVER, "driver_epoch": 0, "driver_leader": False, "driver_migration_version": 0,
    "driver_migration_offset": 0, "driver_zk_version": 0, **NO_QUEUE,
}
FRESH_DRIVER = {
    "driver": DRIVER_CODES[_FRESH.state], "driver_epoch": _FRESH.kraft_epoch, "driver_leader": _FRESH.leader,
    "driver_migration_version": _FRESH.migration_version, "driver_migration_offset": int(_FRESH.migration_offset),
    "driver_zk_version": _FRESH.zk_epoch_version, **NO_QUEUE,
}
# The fields holding offsets into the metadata log, which the core does not keep: the formulas compare them only
# with each other and with the offset a write carries (a free integer, ``Choices.number``), by order.
ORDERED = ("migration_offset", "driver_migration_offset", "queued_offset", "view_migration_offset")


def offset_means_something(p: Projection, name: str, i: int | None) -> bool:
    """Whether an ordered field of ``p`` holds an offset (else it holds its constant for "none")."""
    if name == "migration_offset":
        return bool(p["migration_exists"])
    assert i is not None
    if name == "driver_migration_offset":
        return p["driver"][i] not in (NO_DRIVER, UNINITIALIZED)
    if name == "queued_offset":
        return bool(p["queued"][i])
    return bool(p["lags"][i] and p["view_migration_exists"][i])


def project(state: ClusterState) -> Projection:
    """The migration fencing core of ``state``; raises OutsideProjection where its assumptions fail."""
    if state.budget.elections > 0:
        raise OutsideProjection("a ZooKeeper election may run: elections are the fencing core's")
    zk = state.zk
    out: Projection = {"zk_available": zk.available}
    epoch = zkm.get(zk, CONTROLLER_EPOCH)
    out["epoch_exists"] = epoch is not None
    out["epoch_value"] = 0 if epoch is None else int(epoch.data)
    out["epoch_version"] = 0 if epoch is None else epoch.version
    out["max_epoch"] = int(state.history.max_controller_epoch)
    controller = zkm.get(zk, CONTROLLER)
    claim = None if controller is None else controller.data
    if claim is not None and not isinstance(claim, (int, KRaftControllerZNode)):
        raise OutsideProjection(f"/controller holds {claim!r}")
    if controller is not None and controller.version != 0:
        raise OutsideProjection(f"/controller is at version {controller.version}")
    kraft = isinstance(claim, KRaftControllerZNode)
    out["controller_exists"] = controller is not None
    out["controller_kraft"] = kraft
    out["controller_owner"] = controller_index(claim.controller) if kraft else 0
    out["controller_kraft_epoch"] = int(claim.kraft_epoch) if kraft else 0
    migration = zkm.get(zk, MIGRATION)
    out["migration_exists"] = migration is not None
    out["migration_version"] = 0 if migration is None else migration.version
    out["migration_epoch"] = 0 if migration is None else int(migration.data.kraft_controller_epoch)
    out["migration_offset"] = 0 if migration is None else int(migration.data.kraft_metadata_offset)
    out["handed_back"] = state.history.handed_back is not None
    out["committed_state"] = STATE_CODES[image_of(state.history.committed).bootstrapped_migration]
    out["single_voter"] = len(state.controllers) == 1
    budget = state.budget
    out.update(
        kraft_elections_left=budget.kraft_elections, crashes_left=budget.controller_crashes,
        migrations_left=budget.migrations, outages_left=budget.outages, stale_reads_left=budget.stale_reads,
        write_failures_left=budget.write_failures, lost_replies_left=budget.lost_write_replies,
        queued_events_left=budget.queued_events,
    )
    if budget.queued_events + sum(len(c.driver.queue) for c in state.controllers if c.driver is not None) > 1:
        raise OutsideProjection("two MetadataChangeEvents may be queued: the core keeps one")
    writes = state.ghost.kraft_writes
    if len(writes) > 1:
        raise OutsideProjection("one step applied two KRaft writes")
    out.update(STEP_FIELDS)
    if writes:
        w = writes[0]
        out.update(
            wrote=True, write_epoch=int(w.writer_epoch), write_dual=w.kind == "dual-write",
            write_state=NO_DRIVER if w.driver_state is None else DRIVER_CODES[w.driver_state],
        )
    rows: dict[str, list] = {name: [] for name in CONTROLLER_FIELDS}
    for c in state.controllers:
        d = c.driver
        view = _project_view(zkm.seen_by(zk, c.id)) if zkm.lagging(zk, c.id) else NO_VIEW
        values = {
            "alive": c.alive,
            "flag": c.config.migration_enabled,
            "epoch": int(c.epoch),
            "candidate": c.alive and c.role is QuorumRole.CANDIDATE,
            "has_vote": c.alive and c.role is QuorumRole.CANDIDATE and any(v != c.id for v in c.votes),
            "leads": is_active(c),
            "awaiting": c.alive and c.role is QuorumRole.LEADER and not c.active,
            "resigned": c.alive and c.role is QuorumRole.RESIGNED,
            "log_state": STATE_CODES[image_of(c.log).bootstrapped_migration],
            **(
                NO_DRIVER_FIELDS if d is None else {
                    "driver": DRIVER_CODES[d.state], "driver_epoch": int(d.kraft_epoch), "driver_leader": d.leader,
                    "driver_migration_version": d.migration_version,
                    "driver_migration_offset": int(d.migration_offset), "driver_zk_version": d.zk_epoch_version,
                    **_project_queue(d),
                }
            ),
            **view,
        }
        for name, value in values.items():
            rows[name].append(value)
    out.update({name: tuple(values) for name, values in rows.items()})
    return out


def _project_queue(d: Driver) -> dict[str, Any]:
    """The MetadataChangeEvent in the driver's queue (``project`` refuses more than one)."""
    if not d.queue:
        return NO_QUEUE
    event = d.queue[0]
    return {"queued": True, "queued_epoch": int(event.kraft_epoch), "queued_leader": event.leader,
            "queued_offset": int(event.offset)}


def _project_view(seen: zkm.ZkState) -> dict[str, Any]:
    """What a lagging server shows of the znodes the driver reads."""
    epoch, controller, migration = (zkm.get(seen, path) for path in (CONTROLLER_EPOCH, CONTROLLER, MIGRATION))
    claim = None if controller is None else controller.data
    if controller is not None and controller.version != 0:
        raise OutsideProjection(f"a view's /controller is at version {controller.version}")
    return {
        "lags": True,
        "view_epoch_exists": epoch is not None,
        "view_epoch_value": 0 if epoch is None else int(epoch.data),
        "view_epoch_version": 0 if epoch is None else epoch.version,
        "view_controller_exists": controller is not None,
        "view_controller_kraft": isinstance(claim, KRaftControllerZNode),
        "view_controller_kraft_epoch": int(claim.kraft_epoch) if isinstance(claim, KRaftControllerZNode) else 0,
        "view_migration_exists": migration is not None,
        "view_migration_version": 0 if migration is None else migration.version,
        "view_migration_offset": 0 if migration is None else int(migration.data.kraft_metadata_offset),
    }


# ---- the actions --------------------------------------------------------------------------------

STOPPED = {
    "alive": False, "candidate": False, "has_vote": False, "leads": False, "awaiting": False, "resigned": False,
    **NO_DRIVER_FIELDS,
}


def _code(state: MigrationDriverState) -> int:
    return DRIVER_CODES[state]


def _pick(s: SymState, cond, then, otherwise) -> z3.ExprRef:
    """``z3.If`` of two small counters, constants included, in the INT fields' sort."""
    def term(v):
        return s.dom.number(v) if isinstance(v, int) and not isinstance(v, bool) else v

    return z3.If(cond, term(then), term(otherwise))


def _distinct(b, c) -> z3.BoolRef:
    return z3.BoolVal(b != c) if isinstance(b, int) else b != c


def _cas(expected, actual) -> z3.BoolRef:
    """ZooKeeper's version check: -1 matches any version."""
    return z3.Or(expected == ANY_VERSION, expected == actual)


def _unchanged(s: SymState, name: str):
    return STEP_FIELDS[name] if name in STEP_FIELDS else s.values[name]


def _either(s: SymState, cond, when: dict[str, Any], otherwise: dict[str, Any]) -> dict[str, Any]:
    """Global changes: ``when`` if ``cond`` holds, else ``otherwise`` (a field either leaves alone stays)."""
    return {
        name: _pick(s, cond, when.get(name, _unchanged(s, name)), otherwise.get(name, _unchanged(s, name)))
        for name in set(when) | set(otherwise)
    }


def _driving(s: SymState, c, state: MigrationDriverState) -> z3.BoolRef:
    """kraft_migration._driver(c, state) and _leading(c): the driver runs in ``state`` and believes it leads."""
    me = s.of(c)
    return z3.And(me.alive, me.driver == _code(state), me.driver_leader)


def _read(s: SymState, c, name: str) -> z3.ExprRef:
    """The global field ``name`` as controller ``c``'s driver reads it: from its server's view while it lags."""
    me = s.of(c)
    return z3.If(me.lags, getattr(me, "view_" + name), s.values[name])


def _view_unless(s: SymState, c, ends) -> dict[str, Any]:
    """``c``'s view fields: dropped (its server has applied its write, ``zookeeper.multi``'s reader) if ``ends``."""
    me = s.of(c)
    return {
        name: z3.If(ends, False, getattr(me, name)) if isinstance(value, bool) else _pick(s, ends, 0, getattr(me, name))
        for name, value in NO_VIEW.items()
    }


def _reaches(a, b) -> z3.BoolRef:
    """A log in state ``a`` may go on to state ``b`` (STATE_ORDER's moves, none or several: ``a`` ⪯ ``b``)."""
    return z3.Or([z3.And(a == x, b == y) for x, y in sorted(REACHES)])


def _legal_move(a, b) -> z3.BoolRef:
    """``b`` is ``a`` or one of STATE_ORDER's moves from it."""
    return z3.Or(a == b, *[z3.And(a == x, b == y) for x, y in sorted(MOVES)])


def _activation_state(s: SymState, c, variant: Variant, log_state, choose) -> z3.ExprRef:
    """_activate's ZkMigrationStateRecord, as the state of the log it activates on after it: the bootstrap of
    an empty log (PRE_MIGRATION with the flag, else NONE), POST_MIGRATION where it finalizes (_may_finalize:
    kip, once every voter runs without the flag; kafka-3.9, at once), else the state it found. Over any
    number of controllers kip's rule is a choice (``finalizes``): no property here depends on it, and a
    quantifier under an if-then-else slows the unbounded proof several times over."""
    me = s.of(c)
    if variant.profile is Profile.KAFKA_3_9:
        finalizing: z3.BoolRef = z3.BoolVal(True)
    elif isinstance(s.dom, FiniteActors):
        finalizing = s.dom.every(lambda x: z3.And(s.of(x).alive, z3.Not(s.of(x).flag)))
    else:
        finalizing = choose("finalizes")
    finalize = z3.And(log_state == MIG, z3.Not(me.flag), finalizing)
    return _pick(s, log_state == NO_STATE, _pick(s, me.flag, PRE, NONE_STATE), _pick(s, finalize, POST, log_state))


def _spends(s: SymState, budget: str) -> tuple[z3.BoolRef, dict[str, Any]]:
    """model.transitions.spend of one unit: (there is one left, the change)."""
    return s.values[budget] > 0, {budget: s.values[budget] - 1}


def start_election(s: SymState, c, variant: Variant, choose) -> Effect:
    """_start_election: a live controller that does not lead stands in the next epoch. It costs an
    election from the budget unless it heals a quorum where no live controller leads or resigned, and none stands
    or every one that stands has lost with this one's log ahead (votes and logs are outside the core: the choice
    ``others_lost``)."""
    me = s.of(c)

    def idle(x):
        other = s.of(x)
        return z3.Not(z3.And(other.alive, z3.Or(other.leads, other.awaiting, other.candidate, other.resigned)))

    def not_in_charge(x):
        other = s.of(x)
        return z3.Not(z3.And(other.alive, z3.Or(other.leads, other.awaiting, other.resigned)))

    heals = z3.Or(s.dom.every(idle), z3.And(s.dom.every(not_in_charge), choose("others_lost")))
    left = s.kraft_elections_left
    return Effect(
        z3.And(me.alive, z3.Not(me.leads), z3.Not(me.awaiting), z3.Or(heals, left > 0)),
        changes={"kraft_elections_left": z3.If(heals, left, left - 1)},
        mine={"epoch": me.epoch + 1, "candidate": True, "has_vote": False, "resigned": False},
    )


def request_vote(s: SymState, c, v, variant: Variant, choose) -> Effect:
    """_request_vote: one Vote round trip. The side with the older epoch steps down to the newer; the
    voter may grant its vote (its vote and log checks are outside the core: the choice ``granted``)."""
    cand, voter = s.of(c), s.of(v)
    newer, older = voter.epoch > cand.epoch, voter.epoch < cand.epoch
    top = z3.If(newer, voter.epoch, cand.epoch)
    may_vote = z3.Or(older, z3.And(z3.Not(voter.candidate), z3.Not(voter.leads), z3.Not(voter.awaiting)))
    granted = z3.And(z3.Not(newer), may_vote, choose("granted"))
    return Effect(
        z3.And(_distinct(c, v), cand.alive, voter.alive, cand.candidate),
        mine={
            "epoch": top,
            "candidate": z3.Not(newer),
            "has_vote": z3.And(z3.Not(newer), z3.Or(cand.has_vote, granted)),
        },
        peer={
            "epoch": top,
            "candidate": z3.And(z3.Not(older), voter.candidate),
            "has_vote": z3.And(z3.Not(older), voter.has_vote),
            "leads": z3.And(z3.Not(older), voter.leads),
            "awaiting": z3.And(z3.Not(older), voter.awaiting),
            "resigned": z3.And(z3.Not(older), voter.resigned),
        },
    )


def fetch(s: SymState, f, leader, variant: Variant, choose) -> Effect:
    """_fetch: one Fetch round trip to a leader. A follower with a newer epoch deposes the leader;
    otherwise the follower takes the leader's epoch and follows it. Logs are outside the core: the
    Fetch that commits a leader's LeaderChange activates it (``_activate_once_committed``, choice
    ``lc_commits``), and activation may resign instead (choice ``activates``)."""
    fol, lead = s.of(f), s.of(leader)
    newer = fol.epoch > lead.epoch
    top = z3.If(newer, fol.epoch, lead.epoch)
    guard = z3.And(
        _distinct(f, leader), fol.alive, lead.alive, z3.Or(lead.leads, lead.awaiting),
        z3.Not(z3.And(z3.Or(fol.leads, fol.awaiting), fol.epoch == lead.epoch)),
    )
    # Raft premise: a Fetch moves the committed log only to a longer prefix of the serving leader's log.
    extends = _reaches(s.committed_state, lead.log_state)
    activation = z3.And(z3.Not(newer), lead.awaiting, choose("lc_commits"), extends)
    commits = z3.And(z3.Not(newer), z3.Or(activation, z3.And(choose("commits"), extends)))
    activates = choose("activates")
    activated = _activation_state(s, leader, variant, lead.log_state, choose)
    return Effect(
        guard,
        # What commits: the state at the leader's log end (all of it when its LeaderChange commits), or as before.
        changes={"committed_state": _pick(s, commits, lead.log_state, s.committed_state)},
        mine={
            "epoch": top,
            "candidate": z3.And(newer, fol.candidate),
            "has_vote": z3.And(newer, fol.has_vote),
            "leads": z3.And(newer, fol.leads),
            "awaiting": z3.And(newer, fol.awaiting),
            "resigned": z3.And(newer, fol.resigned),
            "log_state": _pick(s, newer, fol.log_state, lead.log_state),  # it copies the log as it was
        },
        peer={
            "epoch": top,
            "leads": z3.And(z3.Not(newer), z3.If(activation, activates, lead.leads)),
            "awaiting": z3.And(z3.Not(newer), z3.Not(activation), lead.awaiting),
            "resigned": z3.And(z3.Not(newer), z3.Or(lead.resigned, z3.And(activation, z3.Not(activates)))),
            "log_state": _pick(s, z3.And(activation, activates), activated, lead.log_state),
        },
    )


def become_leader(s: SymState, c, variant: Variant, choose) -> Effect:
    """_become_leader: a candidate with a majority (alone, or with another's vote: necessary, and enough
    for up to 3 voters) leads. It activates once its LeaderChange commits: at once when it alone is a
    majority, else in a later Fetch (it awaits activation); activation may resign instead (choice
    ``activates``)."""
    me = s.of(c)
    activates = choose("activates")
    alone = s.single_voter  # (a field, not a quantifier over controllers: see LoneVoterLogIsCommitted)
    # The seeded bug activates at once, on the whole log: a predecessor's uncommitted records included.
    at_once = z3.BoolVal(True) if variant.has(Bug.ACTIVATE_ON_UNCOMMITTED_LOG) else alone
    activated = _activation_state(s, c, variant, me.log_state, choose)
    log_state = _pick(s, z3.And(at_once, activates), activated, me.log_state)
    return Effect(
        z3.And(me.alive, me.candidate, z3.Or(me.has_vote, s.dom.alone(c))),
        # Alone, everything it appends commits at once.
        changes={"committed_state": _pick(s, alone, log_state, s.committed_state)},
        mine={
            "candidate": False, "has_vote": False, "leads": z3.And(at_once, activates),
            "awaiting": z3.Not(at_once), "resigned": z3.And(at_once, z3.Not(activates)),
            "log_state": log_state,
        },
    )


def crash_controller(s: SymState, c, variant: Variant, choose) -> Effect:
    """_crash_controller (_process_stops): only the persisted epoch survives."""
    left, spent = _spends(s, "crashes_left")
    return Effect(z3.And(s.of(c).alive, left), changes=spent, mine=dict(STOPPED))


def shutdown_controller(s: SymState, c, variant: Variant, choose) -> Effect:
    """_shutdown_controller: as a crash, an operator step; the leader waits for ZooKeeper to catch up
    with what it committed (outside the core)."""
    left, spent = _spends(s, "migrations_left")
    return Effect(z3.And(s.of(c).alive, left), changes=spent, mine=dict(STOPPED))


def _fresh_or_none(s: SymState, flag, name: str) -> z3.ExprRef:
    fresh, none = FRESH_DRIVER[name], NO_DRIVER_FIELDS[name]
    return z3.If(flag, fresh, none) if isinstance(fresh, bool) else _pick(s, flag, fresh, none)


def restart_controller(s: SymState, c, variant: Variant, choose) -> Effect:
    """_restart_controller: back with its persisted epoch, and a fresh driver if it has the flag; never
    once the rollback has handed ZooKeeper back."""
    me = s.of(c)
    epoch = 0 if variant.has(Bug.RESTART_FORGETS_EPOCH) else me.epoch
    driver = {name: _fresh_or_none(s, me.flag, name) for name in FRESH_DRIVER}
    return Effect(z3.And(z3.Not(me.alive), z3.Not(s.handed_back)), mine={"alive": True, "epoch": epoch, **driver})


def reconfigure_controller(s: SymState, c, variant: Variant, choose) -> Effect:
    """_reconfigure_controller: the operator flips the migration flag of a stopped controller."""
    me = s.of(c)
    left, spent = _spends(s, "migrations_left")
    return Effect(z3.And(z3.Not(me.alive), left), changes=spent, mine={"flag": z3.Not(me.flag)})


def recover_migration_state(s: SymState, c, variant: Variant, choose) -> Effect:
    """_recover_migration_state: read /migration (through the view) and go INACTIVE, or create it empty
    (version 0, offset -1), a write that ends the view; a create a lagging read asked for fails (NodeExists) and
    the driver stays UNINITIALIZED. The driver takes the version and offset it read or created."""
    me = s.of(c)
    seen = _read(s, c, "migration_exists")
    created = z3.And(z3.Not(seen), z3.Not(s.migration_exists))
    view = _view_unless(s, c, z3.Not(seen))
    return Effect(
        z3.And(me.alive, me.driver == UNINITIALIZED, s.zk_available),
        changes=_either(s, created, {
            "migration_exists": True, "migration_version": 0,
            "migration_epoch": EMPTY_MIGRATION.kraft_controller_epoch,
            "migration_offset": EMPTY_MIGRATION.kraft_metadata_offset,
        }, {}),
        mine={
            "driver": _pick(s, z3.Or(seen, created), INACTIVE, UNINITIALIZED),
            "driver_migration_version": _pick(s, seen, _read(s, c, "migration_version"),
                                              _pick(s, created, 0, me.driver_migration_version)),
            "driver_migration_offset": _pick(s, seen, _read(s, c, "migration_offset"),
                                             _pick(s, created, EMPTY_MIGRATION.kraft_metadata_offset,
                                                   me.driver_migration_offset)),
            **view,
        },
    )


def kraft_leader_change(s: SymState, c, variant: Variant, choose) -> Effect:
    """_kraft_leader_change: a leadership the driver has not heard of. Not its own: INACTIVE in that
    epoch. Its own: INACTIVE first if it is anywhere else, then WAIT_FOR_CONTROLLER_QUORUM with
    /migration's version and offset read again. Either way it forgets its claim."""
    me = s.of(c)
    running = z3.And(me.alive, me.driver != NO_DRIVER, me.driver != UNINITIALIZED)
    news = z3.Not(z3.And(me.driver_epoch == me.epoch, me.driver_leader == me.leads))
    resume = z3.And(me.leads, me.driver == INACTIVE)
    return Effect(
        z3.And(running, news, z3.Or(z3.Not(me.leads), s.zk_available)),
        mine={
            "driver": _pick(s, resume, _code(D.WAIT_FOR_CONTROLLER_QUORUM), INACTIVE),
            "driver_epoch": z3.If(z3.And(me.leads, z3.Not(resume)), me.driver_epoch, me.epoch),
            "driver_leader": resume,
            "driver_zk_version": UNKNOWN_VERSION,
            "driver_migration_version": z3.If(resume, _read(s, c, "migration_version"), me.driver_migration_version),
            "driver_migration_offset": z3.If(resume, _read(s, c, "migration_offset"), me.driver_migration_offset),
        },
    )


def wait_for_controller_quorum(s: SymState, c, variant: Variant, choose) -> Effect:
    """_wait_for_controller_quorum: by the committed migration state (outside the core): NONE or
    POST_MIGRATION -> INACTIVE (choice ``inactive``), MIGRATION -> BECOME_CONTROLLER (``migrated``),
    else WAIT_FOR_BROKERS once the quorum is ready (the seeded bug: straight to DUAL_WRITE)."""
    onward = D.DUAL_WRITE if variant.has(Bug.DRIVER_SKIPS_TO_DUAL_WRITE) else D.WAIT_FOR_BROKERS
    inactive, migrated = choose("inactive"), choose("migrated")
    driver = _pick(s, inactive, INACTIVE, _pick(s, migrated, _code(D.BECOME_CONTROLLER), _code(onward)))
    # Raft premise: the driver reads a prefix of the committed log, so the committed state has reached what
    # it read: MIGRATION on the way to BECOME_CONTROLLER, PRE_MIGRATION on the way onward.
    read = z3.Or(inactive, z3.And(migrated, _reaches(MIG, s.committed_state)),
                 z3.And(z3.Not(migrated), _reaches(PRE, s.committed_state)))
    return Effect(z3.And(_driving(s, c, D.WAIT_FOR_CONTROLLER_QUORUM), read), mine={"driver": driver})


def wait_for_zk_brokers(s: SymState, c, variant: Variant, choose) -> Effect:
    """_wait_for_zk_brokers: once every known ZK broker has registered (outside the core)."""
    return Effect(
        z3.And(_driving(s, c, D.WAIT_FOR_BROKERS), s.zk_available), mine={"driver": _code(D.BECOME_CONTROLLER)}
    )


def become_zk_controller(s: SymState, c, variant: Variant, choose) -> Effect:
    """_become_zk_controller in its two round trips. Without a claim yet (_claim): one multi bumps
    /controller_epoch by compare-and-set and writes /controller with the driver's Raft epoch, unless
    /controller already holds that epoch or a newer one. Then an unconditional write of /migration, its data as
    the driver's server shows it (the offset a lagging server shows may be older than /migration's: the finding
    ``MIGRATION_OFFSET_FINDING``), learns its version, and the driver goes on to SYNC_KRAFT_TO_ZK if the offset
    it wrote holds a migration (> 0) or, under kip, its committed image is in MIGRATION (the choice ``synced``,
    outside the core; the committed log has reached MIGRATION), else to ZK_MIGRATION."""
    me = s.of(c)
    claiming = me.driver_zk_version < 0
    # The claim decides on what its server shows (the view while it lags); the multi runs at the leader.
    seen_controller = _read(s, c, "controller_exists")
    newer = z3.And(seen_controller, _read(s, c, "controller_kraft"),
                   _read(s, c, "controller_kraft_epoch") >= me.driver_epoch)
    if variant.has(Bug.CLAIM_IGNORES_NEWER_KRAFT_EPOCH):
        claim_ok = _read(s, c, "epoch_exists")
    else:
        claim_ok = z3.And(_read(s, c, "epoch_exists"), z3.Not(newer))
    # The multi: SetData of /controller_epoch at the version read (-1 under the seeded bug), Delete of the
    # /controller read (at its version, always 0), Create of /controller. A stale read fails it, and the driver
    # stays in BECOME_CONTROLLER; either way its server has applied the multi.
    trusts = variant.has(Bug.CLAIM_TRUSTS_STALE_READ)
    epoch_set = z3.And(s.epoch_exists, z3.BoolVal(True) if trusts else s.epoch_version == _read(s, c, "epoch_version"))
    applied = z3.And(epoch_set, seen_controller == s.controller_exists)
    bumped = _read(s, c, "epoch_value") + (0 if variant.has(Bug.CLAIM_REUSES_ZK_EPOCH) else 1)
    version = s.epoch_version + 1
    claim = {
        "epoch_value": bumped,
        "epoch_version": version,
        "max_epoch": z3.If(bumped > s.max_epoch, bumped, s.max_epoch),
        "controller_exists": True,
        "controller_kraft": True,
        "controller_owner": s.dom.actor_term(c),
        "controller_kraft_epoch": me.driver_epoch,
        "wrote": True,
        "write_epoch": me.driver_epoch,
        "write_state": _code(D.BECOME_CONTROLLER),
    }
    learn = {"migration_version": s.migration_version + 1, "migration_epoch": me.driver_epoch,
             "migration_offset": _read(s, c, "migration_offset")}
    # Done: /migration as read holds a migration's offset (> 0); kip also goes on when the controller's committed
    # image is in MIGRATION (outside the core, the choice "synced": the committed log has reached it).
    done = _read(s, c, "migration_offset") > 0
    if variant.profile is Profile.KIP:
        done = z3.Or(done, z3.And(choose("synced"), _reaches(MIG, s.committed_state)))
    onward = _pick(s, done, _code(D.SYNC_KRAFT_TO_ZK), _code(D.ZK_MIGRATION))
    return Effect(
        z3.And(_driving(s, c, D.BECOME_CONTROLLER), s.zk_available, z3.Or(z3.Not(claiming), claim_ok)),
        changes=_either(s, claiming, _either(s, applied, claim, {}), learn),
        mine={
            "driver": z3.If(claiming, me.driver, onward),
            "driver_zk_version": z3.If(claiming, z3.If(applied, version, me.driver_zk_version), me.driver_zk_version),
            "driver_migration_version": z3.If(claiming, me.driver_migration_version, s.migration_version + 1),
            "driver_migration_offset": z3.If(claiming, me.driver_migration_offset, _read(s, c, "migration_offset")),
            **NO_VIEW,
        },
    )


def _kraft_zk_write(s: SymState, c, variant: Variant, dual: bool, onward, offset, reply_lost: bool = False
                    ) -> tuple[dict, dict]:
    """_kraft_zk_write: one multi, the Check of /controller_epoch at the claim's version (left out by a
    seeded bug, for dual writes), the metadata ops (they cannot fail), and the compare-and-set of
    /migration at the version the driver believes, to ``offset``. Applied, the driver moves ``onward`` and holds
    the new version and offset; failed, it
    goes INACTIVE and forgets its claim. With ``reply_lost`` (_resent_write) the applied multi's reply is lost
    and its resent copy fails on /migration's version: kip's driver reads /migration back, finds its own write
    (its controller id, Raft epoch and offset, just written) and goes on at the new version; kafka-3.9's keeps the
    version it had, so its next write fails. Returns (global changes, the writer's changes)."""
    me = s.of(c)
    fenced = not (dual and variant.has(Bug.DUAL_WRITE_SKIPS_EPOCH_CHECK))
    checked = z3.And(s.epoch_exists, _cas(me.driver_zk_version, s.epoch_version)) if fenced else z3.BoolVal(True)
    applied = z3.And(checked, s.migration_exists, _cas(me.driver_migration_version, s.migration_version))
    version = s.migration_version + 1
    wrote = {
        "migration_version": version,
        "migration_epoch": me.driver_epoch,
        "migration_offset": offset,
        "wrote": True,
        "write_epoch": me.driver_epoch,
        "write_dual": dual,
        "write_state": me.driver,
    }
    learns = not reply_lost or variant.profile is Profile.KIP and not variant.has(Bug.RESEND_KEEPS_STALE_VERSION)
    mine = {
        "driver": _pick(s, applied, onward, INACTIVE),
        "driver_migration_version": z3.If(applied, version, me.driver_migration_version) if learns
        else me.driver_migration_version,
        "driver_migration_offset": z3.If(applied, offset, me.driver_migration_offset) if learns
        else me.driver_migration_offset,
        "driver_zk_version": z3.If(applied, me.driver_zk_version, UNKNOWN_VERSION),
        **NO_VIEW,  # its server has applied the multi (its reader)
    }
    return _either(s, applied, wrote, {}), mine


def complete_migration(s: SymState, c, variant: Variant, choose) -> Effect:
    """_complete_migration: the active leader whose driver is in ZK_MIGRATION appends
    ZkMigrationStateRecord(MIGRATION) (and ends the migration transaction), unless its log holds one
    already; whether the copy has begun is outside the core. Alone, it commits at once."""
    me = s.of(c)
    guard = z3.And(_driving(s, c, D.ZK_MIGRATION), me.leads, me.log_state != MIG, me.log_state != POST)
    return Effect(
        guard,
        changes={"committed_state": _pick(s, s.single_voter, MIG, s.committed_state)},
        mine={"log_state": MIG},
    )


def migration_committed(s: SymState, c, variant: Variant, choose) -> Effect:
    """_migration_committed: once the migration's records are committed (outside the core), write
    /migration's offset, the migration's end; then SYNC_KRAFT_TO_ZK. The end is past the driver's offset: a
    driver is in ZK_MIGRATION only if the /migration it wrote back held no migration (an offset <= 0), and the
    migration's records take offsets from 1 (the offset itself is outside the core: ``choose.number``)."""
    end = choose.number("offset")
    changes, mine = _kraft_zk_write(s, c, variant, False, _code(D.SYNC_KRAFT_TO_ZK), end)
    # The migration's records are committed: the committed log has reached MIGRATION.
    guard = z3.And(_driving(s, c, D.ZK_MIGRATION), s.zk_available, end > 0, end > s.of(c).driver_migration_offset,
                   _reaches(MIG, s.committed_state))
    return Effect(guard, changes=changes, mine=mine)


def sync_kraft_to_zk(s: SymState, c, variant: Variant, choose) -> Effect:
    """_sync_kraft_to_zk: the whole committed image to ZooKeeper, at the image's offset, which is not behind the
    driver's (``_behind``); then KRAFT_CONTROLLER_TO_BROKER_COMM."""
    image = choose.number("offset")
    changes, mine = _kraft_zk_write(s, c, variant, False, _code(D.KRAFT_CONTROLLER_TO_BROKER_COMM), image)
    guard = z3.And(_driving(s, c, D.SYNC_KRAFT_TO_ZK), s.zk_available, image >= s.of(c).driver_migration_offset)
    return Effect(guard, changes=changes, mine=mine)


def send_rpcs_to_brokers(s: SymState, c, variant: Variant, choose) -> Effect:
    """_send_rpcs_to_brokers: full UpdateMetadata and LeaderAndIsr to the ZK brokers; then DUAL_WRITE."""
    return Effect(_driving(s, c, D.KRAFT_CONTROLLER_TO_BROKER_COMM), mine={"driver": _code(D.DUAL_WRITE)})


def dual_write(s: SymState, c, variant: Variant, choose) -> Effect:
    """_dual_write: committed metadata ZooKeeper lacks (outside the core) goes to ZooKeeper in DUAL_WRITE
    (and, with the seeded bug, in SYNC_KRAFT_TO_ZK), at the image's offset, past the driver's; the driver stays
    where it is."""
    me = s.of(c)
    allowed = (D.DUAL_WRITE, D.SYNC_KRAFT_TO_ZK) if variant.has(Bug.DUAL_WRITE_BEFORE_SYNC) else (D.DUAL_WRITE,)
    image = choose.number("offset")
    changes, mine = _kraft_zk_write(s, c, variant, True, me.driver, image)
    guard = z3.And(me.alive, z3.Or([me.driver == _code(a) for a in allowed]), me.driver_leader, s.zk_available,
                   image > me.driver_migration_offset)
    return Effect(guard, changes=changes, mine=mine)


def dual_write_session_expired(s: SymState, c, variant: Variant, choose) -> Effect:
    """_dual_write_session_expired: a MetadataChangeEvent in DUAL_WRITE whose write fails, its session expired while
    ZooKeeper stalled (enabled whether ZooKeeper answers now or not); nothing is written, and what the driver is
    handed (kafka-3.9's image past /migration's offset) is outside the core. It spends write_failures."""
    me = s.of(c)
    left, spent = _spends(s, "write_failures_left")
    return Effect(z3.And(left, me.alive, _driving(s, c, D.DUAL_WRITE), me.driver_leader), changes=spent)


def dual_write_reply_lost(s: SymState, c, variant: Variant, choose) -> Effect:
    """_dual_write_reply_lost: a MetadataChangeEvent in DUAL_WRITE whose multi ZooKeeper applies and whose reply is
    lost (``_kraft_zk_write`` with ``reply_lost``), at the offset of an image past the driver's. It spends
    lost_write_replies."""
    me = s.of(c)
    left, spent = _spends(s, "lost_replies_left")
    image = choose.number("offset")
    changes, mine = _kraft_zk_write(s, c, variant, True, me.driver, image, reply_lost=True)
    guard = z3.And(left, me.alive, _driving(s, c, D.DUAL_WRITE), me.driver_leader, s.zk_available,
                   image > me.driver_migration_offset)
    return Effect(guard, changes={**changes, **spent}, mine=mine)


def publish_metadata_change(s: SymState, c, variant: Variant, choose) -> Effect:
    """_publish_metadata_change: a driver in DUAL_WRITE (leading or not: the publisher does not ask) queues a
    MetadataChangeEvent with Raft's current epoch, whether its node leads, and the offset of the committed image,
    past the driver's offset (the image itself is outside the core). It spends a queued event."""
    me = s.of(c)
    left, spent = _spends(s, "queued_events_left")
    image = choose.number("offset")
    guard = z3.And(me.alive, me.driver == _code(D.DUAL_WRITE), left, z3.Not(me.queued),
                   image > me.driver_migration_offset)
    mine = {"queued": True, "queued_epoch": me.epoch, "queued_leader": me.leads, "queued_offset": image}
    return Effect(guard, changes=spent, mine=mine)


def run_metadata_change(s: SymState, c, variant: Variant, choose) -> Effect:
    """_run_metadata_change: the queued event runs. Raised under another epoch or leadership than Raft's now, it
    is dropped (KAFKA-16667; the seeded bug STALE_EVENT_RUNS runs it as current, its image taken as the newest,
    which /migration's offset may be past); run by a driver not in DUAL_WRITE or that believes it does not lead,
    dropped too; and with an image no newer than the driver's offset ("already written to ZK"). Otherwise it is
    DualWrite's fenced multi (``_kraft_zk_write``) at the event's offset, and waits while ZooKeeper is away."""
    me = s.of(c)
    stale = z3.Or(me.queued_epoch != me.epoch, me.queued_leader != me.leads)
    as_current = z3.And(stale, z3.BoolVal(variant.has(Bug.STALE_EVENT_RUNS)))
    proceeds = z3.And(z3.Or(z3.Not(stale), as_current), me.driver == _code(D.DUAL_WRITE), me.driver_leader)
    goes = z3.And(proceeds, z3.Or(as_current, me.queued_offset > me.driver_migration_offset))
    writes = z3.And(goes, s.zk_available)
    changes, wrote = _kraft_zk_write(s, c, variant, True, me.driver, me.queued_offset)
    mine = {name: z3.If(writes, value, getattr(me, name)) if isinstance(value, (z3.BoolRef, bool))
            else _pick(s, writes, value, getattr(me, name)) for name, value in wrote.items()}
    guard = z3.And(me.alive, me.driver != NO_DRIVER, me.queued, z3.Not(z3.And(goes, z3.Not(s.zk_available))))
    return Effect(guard, changes=_either(s, writes, changes, {}), mine={**mine, **NO_QUEUE})


def zk_server_lags(s: SymState, c, variant: Variant, choose) -> Effect:
    """_zk_server_lags: a controller's server (alive or not) stops applying transactions while ZooKeeper is
    available; from now on its driver reads the tree as it is now. It spends a stale read."""
    me = s.of(c)
    left, spent = _spends(s, "stale_reads_left")
    frozen = {"view_" + name: s.values[name] for name in VIEWED}
    frozen["view_controller_kraft"] = _claimed(s)
    return Effect(z3.And(s.zk_available, left, z3.Not(me.lags)), changes=spent, mine={"lags": True, **frozen})


def zk_server_catches_up(s: SymState, c, variant: Variant, choose) -> Effect:
    """_zk_server_catches_up: the server has applied every transaction; reads are the leader's again."""
    return Effect(s.of(c).lags, mine=dict(NO_VIEW))


def zk_outage(s: SymState, variant: Variant, choose) -> Effect:
    """_zk_outage."""
    left, spent = _spends(s, "outages_left")
    return Effect(z3.And(s.zk_available, left), changes={"zk_available": False, **spent})


def zk_recover(s: SymState, variant: Variant, choose) -> Effect:
    """_zk_recover."""
    return Effect(z3.Not(s.zk_available), changes={"zk_available": True})


def delete_controller_znodes(s: SymState, variant: Variant, choose) -> Effect:
    """_delete_controller_znodes: once the quorum is down, the operator deletes KRaft's /controller and,
    per the KIP, /controller_epoch (one multi: it fails if that is gone already); Kafka 3.9 deletes
    /migration instead."""
    left, spent = _spends(s, "migrations_left")
    guard = z3.And(
        s.controller_exists, s.controller_kraft, s.zk_available, left, s.dom.every(lambda c: z3.Not(s.of(c).alive))
    )
    spent["handed_back"] = True
    gone = {
        "controller_exists": False, "controller_kraft": False, "controller_owner": s.dom.nobody(),
        "controller_kraft_epoch": 0,
    }
    if variant.profile is Profile.KIP:
        gone.update(epoch_exists=False, epoch_value=0, epoch_version=0)
        return Effect(guard, changes={**_either(s, s.epoch_exists, gone, {}), **spent})
    gone.update(migration_exists=False, migration_version=0, migration_epoch=0, migration_offset=0)
    return Effect(guard, changes={**gone, **spent})


def change_broker_mode(s: SymState, variant: Variant, choose) -> Effect:
    """_migrate_broker and _rollback_broker: an operator step on a stopped broker (outside the core)."""
    left, spent = _spends(s, "migrations_left")
    return Effect(left, changes=spent)


def zk_controller_session_closes(s: SymState, variant: Variant, choose) -> Effect:
    """zookeeper.close_session (StopBroker or ExpireSession) of the session that owns a ZK controller's
    ephemeral /controller."""
    return Effect(
        z3.And(s.controller_exists, z3.Not(s.controller_kraft), s.zk_available), changes={"controller_exists": False}
    )


def stutter(s: SymState, variant: Variant, choose) -> Effect:
    """Every other model step: logs, brokers, messages, the ZooKeeper controller's own writes."""
    return Effect(z3.BoolVal(True))


ACTIONS: tuple[EncodedAction, ...] = (
    # Budgets, votes, logs and the in-flight cap are outside the core: most guards are necessary only.
    EncodedAction("StartElection", start_election),
    EncodedAction("RequestVote", request_vote, exact_guard=False, arity=2),
    EncodedAction("Fetch", fetch, exact_guard=False, arity=2),
    EncodedAction("BecomeLeader", become_leader, exact_guard=False),
    EncodedAction("CrashController", crash_controller),
    EncodedAction("ShutdownController", shutdown_controller, exact_guard=False),
    EncodedAction("RestartController", restart_controller),
    EncodedAction("ReconfigureController", reconfigure_controller, exact_guard=False),
    EncodedAction("RecoverMigrationState", recover_migration_state),
    EncodedAction("KRaftLeaderChange", kraft_leader_change),
    EncodedAction("WaitForControllerQuorum", wait_for_controller_quorum, exact_guard=False),
    EncodedAction("WaitForZkBrokers", wait_for_zk_brokers, exact_guard=False),
    EncodedAction("BecomeZkController", become_zk_controller),
    EncodedAction("CompleteMigration", complete_migration, exact_guard=False),
    EncodedAction("MigrationCommitted", migration_committed, exact_guard=False),
    EncodedAction("SyncKRaftToZk", sync_kraft_to_zk, exact_guard=False),
    EncodedAction("SendRPCsToBrokers", send_rpcs_to_brokers, exact_guard=False),
    EncodedAction("DualWrite", dual_write, exact_guard=False),
    EncodedAction("DualWriteSessionExpired", dual_write_session_expired, exact_guard=False),
    EncodedAction("DualWriteReplyLost", dual_write_reply_lost, exact_guard=False),
    EncodedAction("PublishMetadataChange", publish_metadata_change, exact_guard=False),
    EncodedAction("RunMetadataChange", run_metadata_change, exact_guard=False),
    EncodedAction("ZkServerLags", zk_server_lags),
    EncodedAction("ZkServerCatchesUp", zk_server_catches_up),
    EncodedAction("ZkOutage", zk_outage, arity=0),
    EncodedAction("ZkRecover", zk_recover, arity=0),
    EncodedAction("DeleteControllerZNodes", delete_controller_znodes, exact_guard=False, arity=0),
    EncodedAction("ZkControllerSessionCloses", zk_controller_session_closes, exact_guard=False, arity=0),
    EncodedAction("MigrateBrokerToKRaft", change_broker_mode, exact_guard=False, arity=0),
    EncodedAction("RollbackBrokerToZk", change_broker_mode, exact_guard=False, arity=0),
    EncodedAction("Stutter", stutter, exact_guard=False, arity=0),
)

# Model actions that are the encoded action of the same name, by the controller they name.
BY_CONTROLLER: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        StartElection, BecomeLeader, CrashController, ShutdownController, RestartController, RecoverMigrationState,
        KRaftLeaderChange, WaitForControllerQuorum, WaitForZkBrokers, BecomeZkController, CompleteMigration,
        MigrationCommitted, SyncKRaftToZk, SendRPCsToBrokers, DualWrite, DualWriteSessionExpired, DualWriteReplyLost,
        PublishMetadataChange, RunMetadataChange, ZkServerLags, ZkServerCatchesUp,
    )
}
ENVIRONMENT: dict[str, type] = {cls.__name__: cls for cls in (ZkOutage, ZkRecover, DeleteControllerZNodes)}
BY_BROKER: dict[str, type] = {cls.__name__: cls for cls in (MigrateBrokerToKRaft, RollbackBrokerToZk)}


def _cid(i: int) -> ControllerId:
    return ControllerId(FIRST_CONTROLLER_ID + i)


def _closes_controller_session(action: Action, state: ClusterState) -> bool:
    """The step closes the session that owns a ZooKeeper controller's /controller."""
    node = zkm.get(state.zk, CONTROLLER)
    if node is None or not isinstance(node.data, int):
        return False
    if isinstance(action, ExpireSession):
        return action.session == node.ephemeral_owner
    if isinstance(action, StopBroker):
        b = state.brokers[action.broker]
        return b.session == node.ephemeral_owner and zkm.session_client(state.zk, b.session) == b.id
    return False


def encoded_as(action: Action, state: ClusterState) -> tuple[str, tuple[int, ...]]:
    """The encoded action a model action at ``state`` is, with its actors."""
    match action:
        case RequestVote(controller=c, voter=v):
            return "RequestVote", (controller_index(c), controller_index(v))
        case Fetch(controller=f, leader=leader):
            return "Fetch", (controller_index(f), controller_index(leader))
        case ReconfigureController(controller=c):
            return "ReconfigureController", (controller_index(c),)
    name = type(action).__name__
    if name in BY_CONTROLLER:
        return name, (controller_index(action.controller),)
    if name in ENVIRONMENT or name in BY_BROKER:
        return name, ()
    if _closes_controller_session(action, state):
        return "ZkControllerSessionCloses", ()
    return "Stutter", ()


def model_actions(step: EncodedStep, state: ClusterState, scope: Scope, variant: Variant) -> list[Action]:
    """The model actions an encoded step stands for at ``state``."""
    if step.action in BY_CONTROLLER:
        return [BY_CONTROLLER[step.action](_cid(step.actors[0]))]
    if step.action in ENVIRONMENT:
        return [ENVIRONMENT[step.action]()]
    if step.action in BY_BROKER:
        return [BY_BROKER[step.action](b.id) for b in state.brokers]
    match step.action:
        case "RequestVote":
            return [RequestVote(_cid(step.actors[0]), _cid(step.actors[1]))]
        case "Fetch":
            return [Fetch(_cid(step.actors[0]), _cid(step.actors[1]))]
        case "ReconfigureController":
            c = state.controllers[step.actors[0]]
            return [ReconfigureController(c.id, not c.config.migration_enabled)]
        case "ZkControllerSessionCloses":
            node = zkm.get(state.zk, CONTROLLER)
            if node is None or not isinstance(node.data, int):
                return []
            candidates = [StopBroker(node.data), ExpireSession(node.ephemeral_owner)]
            return [a for a in candidates if _closes_controller_session(a, state)]
    return []


# Log-only model steps the replay may insert between encoded steps (they leave the core unchanged and
# are what enables many driver steps: committed metadata, registered brokers, a replicated migration).
STUTTER_KINDS = (
    AlterConfigs, UpdateMetadataVersion, RegisterWithKRaft, BrokerHeartbeat, SessionTimeout, MigrateMetadata, Fetch,
)
# Four: STALE_EVENT_RUNS's trace needs two commits (an append and the Fetch that commits it, twice), one before the
# event is raised and one after, so that a later write passes the event's offset.
MAX_STUTTERS = 4


def stutters(state: ClusterState, scope: Scope) -> list[Action]:
    return [a for a in candidate_actions(state, scope) if isinstance(a, STUTTER_KINDS)]


# ---- invariants and lemmas ----------------------------------------------------------------------

def _claimed(s: SymState) -> z3.BoolRef:
    """A KRaft controller's claim holds /controller."""
    return z3.And(s.controller_exists, s.controller_kraft)


def _only_current_kraft_leader_writes_apply(pre: SymState, post: SymState) -> z3.BoolRef:
    return z3.Implies(z3.And(post.wrote, _claimed(pre)), post.write_epoch >= pre.controller_kraft_epoch)


def _kraft_epoch_in_zk_only_increases(pre: SymState, post: SymState) -> z3.BoolRef:
    same = z3.And(
        post.controller_owner == pre.controller_owner, post.controller_kraft_epoch == pre.controller_kraft_epoch
    )
    return z3.Implies(
        z3.And(_claimed(pre), _claimed(post)), z3.Or(same, post.controller_kraft_epoch > pre.controller_kraft_epoch)
    )


def _zk_controller_epochs_increase(pre: SymState, post: SymState) -> z3.BoolRef:
    # Written by this step: a new version, or a new znode (the core never re-creates one at its version).
    written = z3.And(post.epoch_exists, z3.Or(z3.Not(pre.epoch_exists), post.epoch_version != pre.epoch_version))
    return z3.Implies(written, post.epoch_value > pre.max_epoch)


def _valid_transition(old, new) -> z3.BoolRef:
    """model.migration.is_valid_transition over driver codes."""
    moves = [
        z3.And(old == _code(a), new == _code(b)) for a, targets in VALID_TRANSITIONS.items() for b in targets
    ]
    return z3.Or(old == new, *moves)


def _driver_takes_only_table_transitions(pre: SymState, post: SymState) -> z3.BoolRef:
    def valid(c):
        old, new = pre.of(c).driver, post.of(c).driver
        return z3.Implies(new != NO_DRIVER, _valid_transition(z3.If(old == NO_DRIVER, UNINITIALIZED, old), new))

    return pre.dom.every(valid)


def _dual_writes_only_in_dual_write_states(pre: SymState, post: SymState) -> z3.BoolRef:
    return z3.Implies(post.write_dual, z3.Or([post.write_state == _code(d) for d in D if d.allows_dual_write]))


def _kraft_epoch_never_decreases(pre: SymState, post: SymState) -> z3.BoolRef:
    return pre.dom.every(lambda c: post.of(c).epoch >= pre.of(c).epoch)


def _migration_state_only_moves_forward(pre: SymState, post: SymState) -> z3.BoolRef:
    return _legal_move(pre.committed_state, post.committed_state)


def _migration_offset_never_goes_back(pre: SymState, post: SymState) -> z3.BoolRef:
    both = z3.And(pre.migration_exists, post.migration_exists)
    return z3.Implies(both, post.migration_offset >= pre.migration_offset)


# Lemmas: what the proofs of the properties above need to know about every reachable state.

def _epoch_znode_holds_the_largest_epoch(s: SymState) -> z3.BoolRef:
    return z3.Implies(s.epoch_exists, z3.And(s.epoch_value == s.max_epoch, s.epoch_version >= 0))


def _stopped_controller_holds_nothing(s: SymState) -> z3.BoolRef:
    def nothing(c):
        me = s.of(c)
        holds = z3.And(
            z3.Not(me.candidate), z3.Not(me.has_vote), z3.Not(me.leads), z3.Not(me.awaiting), z3.Not(me.resigned),
            me.driver == NO_DRIVER,
        )
        return z3.Implies(z3.Not(me.alive), holds)

    return s.dom.every(nothing)


def _driver_states_are_table_states(s: SymState) -> z3.BoolRef:
    return s.dom.every(lambda c: z3.And(NO_DRIVER <= s.of(c).driver, s.of(c).driver <= max(DRIVER_CODES.values())))


def _kraft_epochs_are_not_negative(s: SymState) -> z3.BoolRef:
    def not_negative(c):
        me = s.of(c)
        past_inactive = z3.And(me.driver != NO_DRIVER, me.driver != UNINITIALIZED, me.driver != INACTIVE)
        return z3.And(me.epoch >= 0, z3.Implies(past_inactive, me.driver_epoch >= 0))

    return z3.And(z3.Implies(_claimed(s), s.controller_kraft_epoch >= 0), s.dom.every(not_negative))


def _claimed_versions_are_not_ahead(s: SymState) -> z3.BoolRef:
    def behind(c):
        me = s.of(c)
        known = z3.And(0 <= me.driver_zk_version, s.epoch_exists, me.driver_zk_version <= s.epoch_version)
        return z3.Implies(me.driver != NO_DRIVER, z3.Or(me.driver_zk_version == UNKNOWN_VERSION, known))

    return s.dom.every(behind)


def _has_claimed(s: SymState, c) -> z3.BoolRef:
    me = s.of(c)
    return z3.And(me.driver != NO_DRIVER, me.driver_zk_version >= 0)


def _claimants_are_not_newer_than_the_claim(s: SymState) -> z3.BoolRef:
    return s.dom.every(
        lambda c: z3.Implies(
            _has_claimed(s, c), z3.And(_claimed(s), s.of(c).driver_epoch <= s.controller_kraft_epoch)
        )
    )


def _current_claimant_owns_the_controller_znode(s: SymState) -> z3.BoolRef:
    def owns(c):
        me = s.of(c)
        current = z3.And(_has_claimed(s, c), s.epoch_exists, me.driver_zk_version == s.epoch_version)
        return z3.Implies(
            current,
            z3.And(s.controller_owner == s.dom.actor_term(c), s.controller_kraft_epoch == me.driver_epoch),
        )

    return s.dom.every(owns)


def _migration_versions_are_not_ahead(s: SymState) -> z3.BoolRef:
    def behind(c):
        me = s.of(c)
        read = z3.And(me.driver != NO_DRIVER, me.driver != UNINITIALIZED)
        return z3.Implies(
            read,
            z3.And(
                s.migration_exists, 0 <= me.driver_migration_version,
                me.driver_migration_version <= s.migration_version,
            ),
        )

    return z3.And(z3.Implies(s.migration_exists, s.migration_version >= 0), s.dom.every(behind))


def _migration_znode_names_no_newer_leadership(s: SymState) -> z3.BoolRef:
    return z3.Implies(z3.And(s.migration_exists, _claimed(s)), s.migration_epoch <= s.controller_kraft_epoch)


def _migration_states_are_states(s: SymState) -> z3.BoolRef:
    def state(x) -> z3.BoolRef:
        return z3.Or([x == code for code in STATE_CODES.values()])

    return z3.And(state(s.committed_state), s.dom.every(lambda c: state(s.of(c).log_state)))


def _logs_at_most_one_state_ahead(s: SymState) -> z3.BoolRef:
    def near(c):
        ls = s.of(c).log_state
        return z3.Implies(_reaches(s.committed_state, ls), _legal_move(s.committed_state, ls))

    return s.dom.every(near)


def _one_controller(s: SymState) -> z3.BoolRef:
    """There is one controller: no two are distinct."""
    return s.dom.every_pair(lambda b, c: z3.BoolVal(False) if isinstance(b, int) else b == c)


def _lone_voter_log_is_committed(s: SymState) -> z3.BoolRef:
    # "single_voter" rather than "c is the only controller": a quantifier under the one over controllers
    # would make the unbounded obligations leave the decidable fragment (a Skolem function of controllers).
    every_log = s.dom.every(lambda c: s.of(c).log_state == s.committed_state)
    return z3.Implies(s.single_voter, z3.And(_one_controller(s), every_log))


MIGRATING_DRIVER_STATES = (D.WAIT_FOR_BROKERS, D.BECOME_CONTROLLER, D.ZK_MIGRATION, D.SYNC_KRAFT_TO_ZK,
                           D.KRAFT_CONTROLLER_TO_BROKER_COMM, D.DUAL_WRITE)


def _migrating_drivers_saw_pre_migration(s: SymState) -> z3.BoolRef:
    def saw(c):
        migrating = z3.Or([s.of(c).driver == _code(d) for d in MIGRATING_DRIVER_STATES])
        return z3.Implies(migrating, _reaches(PRE, s.committed_state))

    return s.dom.every(saw)


def _unclaimed_migration_znode_is_empty(s: SymState) -> z3.BoolRef:
    unclaimed = z3.And(s.migration_exists, s.epoch_exists, z3.Not(_claimed(s)))
    return z3.Implies(unclaimed, s.migration_epoch == EMPTY_MIGRATION.kraft_controller_epoch)


def _views_are_not_ahead(s: SymState) -> z3.BoolRef:
    """A lagging server shows a tree the leader has had: no newer versions, /migration once its driver has
    recovered, and at /controller_epoch's current version the claim /controller holds (a claim bumps
    /controller_epoch; a ZooKeeper controller's /controller may have gone since). Until the rollback, which
    deletes znodes whose views a stopped controller keeps."""
    def behind(c):
        me = s.of(c)
        current = z3.And(me.view_epoch_exists, s.epoch_exists, me.view_epoch_version == s.epoch_version)
        same_claim = z3.And(
            me.view_controller_kraft == _claimed(s),
            z3.Implies(s.controller_exists, me.view_controller_exists),
            z3.Implies(_claimed(s), z3.And(me.view_controller_exists,
                                                  me.view_controller_kraft_epoch == s.controller_kraft_epoch)),
        )
        migration = z3.Implies(me.view_migration_exists, z3.And(
            s.migration_exists, 0 <= me.view_migration_version, me.view_migration_version <= s.migration_version))
        # a driver past UNINITIALIZED read /migration through the view, or created it, a write that ended the view
        recovered = z3.Implies(z3.And(me.driver != NO_DRIVER, me.driver != UNINITIALIZED), me.view_migration_exists)
        epoch = z3.Implies(me.view_epoch_exists, z3.And(s.epoch_exists, me.view_epoch_version <= s.epoch_version))
        view = z3.And(migration, epoch, recovered,
                      z3.Implies(current, z3.And(me.view_epoch_value == s.epoch_value, same_claim)))
        return z3.Implies(z3.And(me.lags, z3.Not(s.handed_back)), view)

    return s.dom.every(behind)


def _believed_migration_offset_is_current(s: SymState) -> z3.BoolRef:
    def current(c):
        me = s.of(c)
        same_version = z3.And(me.driver != NO_DRIVER, me.driver != UNINITIALIZED, s.migration_exists,
                              me.driver_migration_version == s.migration_version)
        return z3.Implies(same_version, me.driver_migration_offset == s.migration_offset)

    return s.dom.every(current)


def _viewed_migration_offset_is_current(s: SymState) -> z3.BoolRef:
    def current(c):
        me = s.of(c)
        same_version = z3.And(me.lags, me.view_migration_exists, s.migration_exists,
                              me.view_migration_version == s.migration_version)
        return z3.Implies(same_version, me.view_migration_offset == s.migration_offset)

    return s.dom.every(current)


def _handed_back_quorum_stays_down(s: SymState) -> z3.BoolRef:
    return z3.Implies(s.handed_back, s.dom.every(lambda c: z3.Not(s.of(c).alive)))


INVARIANTS: tuple[Invariant, ...] = (
    Invariant("OnlyCurrentKRaftLeaderWritesApply", "no KRaft write applies from a Raft epoch older than the claim"
              " in /controller", _only_current_kraft_leader_writes_apply, on_step=True),
    Invariant("KRaftEpochInZkOnlyIncreases", "a claim replaces /controller only with a newer Raft epoch",
              _kraft_epoch_in_zk_only_increases, on_step=True),
    Invariant("ZkControllerEpochsIncreaseAcrossHandOver", "every /controller_epoch written beats every earlier one",
              _zk_controller_epochs_increase, on_step=True),
    Invariant("DriverTakesOnlyTableTransitions", "drivers move only along VALID_TRANSITIONS",
              _driver_takes_only_table_transitions, on_step=True),
    Invariant("DualWritesOnlyInDualWriteStates", "a dual write applies only from KRAFT_CONTROLLER_TO_BROKER_COMM"
              " or DUAL_WRITE", _dual_writes_only_in_dual_write_states, on_step=True),
    Invariant("KRaftEpochNeverDecreases", "no controller's persisted Raft epoch goes down",
              _kraft_epoch_never_decreases, on_step=True),
    Invariant("MigrationStateOnlyMovesForward", "the committed migration state moves only along STATE_ORDER",
              _migration_state_only_moves_forward, on_step=True),
    Invariant("MigrationOffsetNeverGoesBack", "no write of /migration lowers its KRaft offset",
              _migration_offset_never_goes_back, on_step=True),
    # Strengthening lemmas.
    Invariant("EpochZnodeHoldsTheLargestEpoch", "/controller_epoch, while it exists, holds the largest epoch ever"
              " written, at a version >= 0", _epoch_znode_holds_the_largest_epoch, lemma=True),
    Invariant("StoppedControllerHoldsNothing", "a stopped controller is no candidate, holds no vote or leadership"
              " (active or awaiting activation), and runs no driver", _stopped_controller_holds_nothing, lemma=True),
    Invariant("DriverStatesAreTableStates", "driver codes are MigrationDriverState codes or none",
              _driver_states_are_table_states, lemma=True),
    Invariant("KRaftEpochsAreNotNegative", "Raft epochs are >= 0: every controller's, /controller's claim's, and"
              " the leadership a driver past INACTIVE speaks for", _kraft_epochs_are_not_negative, lemma=True),
    Invariant("ClaimedVersionsAreNotAhead", "a driver's claimed /controller_epoch version is unknown or a version"
              " the znode has had", _claimed_versions_are_not_ahead, lemma=True),
    Invariant("ClaimantsAreNotNewerThanTheClaim", "a driver that has claimed ZooKeeper speaks for a leadership no"
              " newer than /controller's", _claimants_are_not_newer_than_the_claim, lemma=True),
    Invariant("CurrentClaimantOwnsTheControllerZnode", "the driver whose claim is /controller_epoch's current"
              " version owns /controller, in its own epoch", _current_claimant_owns_the_controller_znode,
              lemma=True),
    Invariant("MigrationVersionsAreNotAhead", "/migration's version is >= 0, and a driver past UNINITIALIZED"
              " believes a version the znode has had", _migration_versions_are_not_ahead, lemma=True),
    Invariant("MigrationZnodeNamesNoNewerLeadership", "/migration names no Raft epoch newer than /controller's"
              " claim", _migration_znode_names_no_newer_leadership, lemma=True),
    Invariant("UnclaimedMigrationZnodeIsEmpty", "before any claim (while /controller_epoch exists), /migration"
              " names no leadership", _unclaimed_migration_znode_is_empty, lemma=True),
    Invariant("MigrationStatesAreStates", "the committed log's and every log's migration state is a state code",
              _migration_states_are_states, lemma=True),
    Invariant("LogsAtMostOneStateAhead", "a log whose migration state has reached the committed one is at most"
              " one STATE_ORDER move ahead of it", _logs_at_most_one_state_ahead, lemma=True),
    Invariant("LoneVoterLogIsCommitted", "a quorum of one controller is one controller, whose whole log is"
              " committed",
              _lone_voter_log_is_committed, lemma=True,
              # Over any number of controllers, Fetch's and CompleteMigration's obligations are left unknown at
              # the timeout with the views' lemma assumed (proved in 3-9 s without it); it reads no view.
              proved_without=("ViewsAreNotAhead",)),
    Invariant("HandedBackQuorumStaysDown", "once the rollback has deleted KRaft's znodes no controller runs",
              _handed_back_quorum_stays_down, lemma=True),
    Invariant("BelievedMigrationOffsetIsCurrent", "a driver that believes /migration's current version believes its"
              " offset (why a compare-and-set that succeeds writes past /migration's offset)",
              _believed_migration_offset_is_current, lemma=True),
    Invariant("ViewedMigrationOffsetIsCurrent", "a lagging server that shows /migration at its current version shows"
              " its offset", _viewed_migration_offset_is_current, lemma=True),
    Invariant("ViewsAreNotAhead", "a lagging server shows no znode version the leader has not had, /migration to a"
              " recovered driver, and at /controller_epoch's current version the same claim as /controller",
              _views_are_not_ahead, lemma=True),
    Invariant("MigratingDriversSawPreMigration", "a driver past WAIT_FOR_CONTROLLER_QUORUM on the migration's way"
              " has a committed state that reached PRE_MIGRATION", _migrating_drivers_saw_pre_migration,
              lemma=True),
)


def migration_start(s: SymState) -> z3.BoolRef:
    """Init: a ZooKeeper-era cluster whose KRaft quorum was just formatted (see the module docstring)."""

    def fresh(c):
        me = s.of(c)
        driver = z3.And([getattr(me, name) == _fresh_or_none(s, me.flag, name) for name in FRESH_DRIVER])
        return z3.And(
            me.alive, me.epoch == 0, z3.Not(me.candidate), z3.Not(me.has_vote), z3.Not(me.leads),
            z3.Not(me.awaiting), z3.Not(me.resigned), me.log_state == NO_STATE, driver,
            *[getattr(me, name) == value for name, value in NO_VIEW.items()],
        )

    return z3.And(
        s.epoch_exists, s.epoch_value == s.max_epoch, s.max_epoch >= 0, s.epoch_version >= 0,
        z3.Not(s.controller_kraft), s.controller_owner == s.dom.nobody(), s.controller_kraft_epoch == 0,
        z3.Not(s.migration_exists), s.migration_version == 0, s.migration_epoch == 0, s.migration_offset == 0,
        z3.Not(s.handed_back),
        s.committed_state == NO_STATE, z3.Implies(s.single_voter, _one_controller(s)),
        *[s.values[name] == value for name, value in STEP_FIELDS.items()],
        s.dom.every(fresh),
    )


MIGRATION_CORE = Core(
    name="migration",
    noun="controller",
    global_fields=GLOBAL_FIELDS,
    actor_fields=CONTROLLER_FIELDS,
    actions=ACTIONS,
    invariants=INVARIANTS,
    project=project,
    initial=migration_start,
    encoded_bugs=ENCODED_BUGS,
    model_actions=model_actions,
    scopes=("dual-write", "migration", "stale-reads", "dual-write-resend", "dual-write-failure", "event-queue",
            "batched-migration"),
    step_fields=STEP_FIELDS,
    stutters=stutters,
    max_stutters=MAX_STUTTERS,
    bmc_lemmas=True,
    bmc_bits=False,
    bmc_refinements=60,
    # Its properties (the dual write's convergence) lie outside the core.
    followed_bugs=frozenset({Bug.RESEND_KEEPS_STALE_VERSION}),
    ordered_fields=ORDERED,
    ordered_constants=(0,),  # a /migration offset > 0 holds a migration (BecomeZkController)
    meaningful=offset_means_something,
    findings={("BecomeZkController", "MigrationOffsetNeverGoesBack"): MIGRATION_OFFSET_FINDING},
)
