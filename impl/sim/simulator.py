"""The deterministic simulator: a seeded clock, network, faults and operator around the implementation.

Rules:
- The simulator owns the only ``random.Random(seed)`` of a run. Every choice (what happens next,
  a message's delay, which fault, an incarnation id) is drawn from it in a fixed order over
  lists in a fixed order, so the same seed gives the same trace, byte for byte
  (``Simulation.trace_text``), with either ZooKeeper adapter.
- One simulated event is one ``Cluster.perform`` of a model action: a node's offered protocol
  step, a due message delivery, a fault of the mix, or a step of the operator's runbook. The
  clock advances by a random tick before each event; a message is deliverable once its delay
  has passed and while no partition cuts its path; an RPC across a partition is unreachable.
- A node's offers are what it would do next, and depend on its memory and the time (its timers,
  ``impl.pacing``): they are recomputed when it handled an event or got a notification, and
  when its ``next_deadline`` has passed. When nothing but rare perturbations is due, the clock
  jumps to the next deadline (a node's timer, a message's delay, a healed partition). A
  message its destination deferred is offered again once that node changed.
- Fault weights (and ``SPONTANEOUS`` steps) are per protocol step of a busy cluster: they are
  weighed against at least ``ACTIVITY`` of protocol weight, so a quiet cluster is not crashed
  in a loop. A step whose outcome depends on reaching a peer (``_whole``) waits for a partition
  to heal: the model has no partitions.
- A paused node (``FaultMix.pause``: a GC pause) offers nothing and its timers wait; it is cut
  from every other node until it resumes (so messages to it wait, an RPC to it is unreachable,
  and a replay sees the pause in ``SimStep.cuts``); the server expires its ZooKeeper session
  after the session timeout, as a dead process's. It resumes with the memory it had. The model
  needs no action for it: a pause is steps not taken, and the expiry is ``ExpireSession``.
- A controller whose driver hears of a leadership change late (``FaultMix.leader_event_lag``) offers
  no ``KRaftLeaderChange`` for a drawn time (``LEADER_EVENT_LAG_MS``) once it becomes due, and all
  its other steps as usual. The model needs no action for it either: ``KRaftLeaderChange`` is one
  of its own, and a lag only changes which actions are offered (a trace records those performed).
- A lost response (``FaultMix.lose_response``): a broker's drawn ``RegisterWithKRaft`` or ``BrokerHeartbeat`` is
  performed as ``RegistrationResponseLost`` or ``HeartbeatResponseLost`` (one more draw, only in a mix that has
  the fault): the controller handles the request and the broker gets no answer (``impl.cluster``).
- A held heartbeat (``FaultMix.hold_heartbeat``): a broker's drawn ``BrokerHeartbeat`` (not a lost response) is
  performed as ``HoldHeartbeat`` (one more draw, only in a mix that has the fault): the broker times out, and the
  cluster keeps the request for a drawn time (``HELD_HEARTBEAT_MS``), after which its ``DeliverHeartbeat`` is an
  option as a due message's delivery is (weight 1, not across a cut); the controller serves it with the broker
  epoch it was sent with.
- A queued driver event (``FaultMix.queue_event``): a drawn ``DualWrite`` is performed as ``PublishMetadataChange``
  (one more draw, only in a mix that has the fault): the MetadataChangeEvent waits in the driver's queue, and the
  controller's ``RunMetadataChange`` is held back for a drawn time (``QUEUED_EVENT_WAIT_MS``), then offered until
  the queue is empty; it may run after a leadership change, stale (KAFKA-16667).
- A failed dual write (``FaultMix.fail_write``): a drawn ``DualWrite`` is performed as ``DualWriteSessionExpired``
  (one more draw, only in a mix that has the fault): the write waited through a ZooKeeper stall past the session
  timeout and failed; the driver's next ``DualWrite`` writes the change again.
- A dual write whose reply is lost (``FaultMix.lose_reply``): a drawn ``DualWrite`` is performed as
  ``DualWriteReplyLost`` (one more draw, only in a mix that has the fault): ZooKeeper applied the multi, the client
  resent it and the copy failed on /migration's version; the driver finds its own write there and goes on.
- A simulation is handed its checker, or none (``impl.sim.check``): with one, every event is
  performed through it, and the run stops at the first ``CheckFailed``. The checks build it
  (``properties.differential.checked_simulation``: the model takes the implementation's traces,
  the abstracted implementation must equal the model state, and the model's invariants must
  hold on it, the model's budgets unbounded: the fault mix, not a scope, decides what happens).
  Without one the simulation builds its cluster from the scope.
- A run can end in a quiet continuation (``Simulation.quiet``): a fresh simulation of the same
  cluster, from the moment a run's fault window ends, with no fault and no spontaneous
  perturbation, only the protocol's own steps, healing (crashed nodes restarted, ZooKeeper
  recovered, dead processes' sessions expired) and the operator's runbook, whose memory
  (``Operator``) it takes over. It is a function of the cluster it starts from, the seed, the
  runbook and that memory alone, so a replay of the events before it starts it again the same
  (``properties.progress``): what was in flight at the hand-over is due at once, since a replay
  does not know the delays the run drew. ``healed`` says when nothing is left to heal.
- Aimed faults (``Aim``): a run can be given faults to strike as soon as the active controller's
  migration driver is in a given state (``driver_state``): the first event in that state at which
  the fault is among the options is that fault (drawn among its instances), once per aim. They
  are how a campaign steers runs toward the steps of the migration no run struck yet.
- The operator runs one of KIP-866's runbooks once the cluster shows it is ready (from each
  process's reported state): ``finalize`` rolls each ZK broker into KRaft mode (stop,
  reconfigure, start) once the migration reached dual writes, then restarts each controller
  without the migration flag (finalization); ``rollback`` (§Rollback to ZK) moves one broker to
  KRaft, then rolls every KRaft broker back to ZooKeeper, stops the quorum, and deletes
  /controller and /controller_epoch so that the ZooKeeper brokers elect a controller again;
  ``none`` leaves the cluster alone.
"""

from __future__ import annotations

import random
import time
from bisect import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate
from math import isfinite
from typing import NamedTuple

from impl.bugs import ImplBug
from impl.cluster import SESSION_TIMEOUT_MS, Cluster, InFlight
from impl.pacing import BROKER_HEARTBEAT_INTERVAL_MS, BROKER_SESSION_TIMEOUT_MS, FETCH_WAIT_MS, POLL_MS
from impl.sim.check import Checker, CheckFailed
from impl.sim.faults import FaultMix
from impl.sim.scenarios import is_drawn
from model.actions import (
    PERTURBATIONS,
    Action,
    AddPartitions,
    AlterPartitionReassignments,
    ApiPartitionReassignment,
    BrokerHeartbeat,
    BrokerZkServerCatchesUp,
    BrokerZkServerLags,
    ChangeIbp,
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
    ExpireSession,
    Fetch,
    HeartbeatResponseLost,
    HoldHeartbeat,
    KRaftLeaderChange,
    MarkTopicDeletion,
    MigrateBrokerToKRaft,
    PublishMetadataChange,
    ReconfigureController,
    Redeliver,
    RegisterWithKRaft,
    RegistrationResponseLost,
    RestartBroker,
    RestartController,
    RollbackBrokerToZk,
    RunMetadataChange,
    SessionTimeout,
    ShutdownController,
    StartElection,
    StopBroker,
    UpdateFeatures,
    UpdateMetadataVersion,
    ZkOutage,
    ZkRecover,
    ZkServerCatchesUp,
    ZkServerLags,
)
from model.kraft import BrokerState, ZkMigrationState
from model.migration import MigrationDriverState
from model.scopes import Scope
from model.types import BrokerId, Ibp, PartitionId

# Steps a node takes on its own that the model counts as perturbations (an admin request, an
# operator's controlled shutdown) are rare next to the protocol's own steps (weighed, as faults
# are, against at least ACTIVITY).
SPONTANEOUS = 0.02
# ... except those a node's own timer paces (impl.pacing): once its timeout has run out it acts.
TIMED = frozenset({StartElection, SessionTimeout})
RUNBOOK = 0.3  # the operator's next step, when there is one
RUNBOOKS = ("finalize", "rollback", "none")
TICK_MS = 20  # the clock advances by 1..TICK_MS between events
# The protocol weight a fault mix's weights are relative to: a crash weight of 0.01 is one crash of a
# node in about ACTIVITY / 0.01 events (with 10 ms an event, some 100 s of simulated time).
ACTIVITY = 100.0
PARTITION_MS = (200, 2_000)  # how long a partition lasts
# How long a pause lasts: from half the session timeout (the session survives it) to four times it
# (the server expires the session and a successor has time to take over before the node resumes).
PAUSE_MS = (SESSION_TIMEOUT_MS // 2, 4 * SESSION_TIMEOUT_MS)
# How long a driver's KRaftLeaderEvent waits behind the events queued before it: from a follower's fetch
# wait (the deposed leader hears of the new epoch in a Fetch) to three driver polls, time enough, at the
# upper end, for the new leader to be elected, activate and claim ZooKeeper (BecomeZkController) first.
LEADER_EVENT_LAG_MS = (FETCH_WAIT_MS, 3 * POLL_MS)
def reassignment_target(scope: Scope) -> tuple[PartitionId, tuple[BrokerId, ...]] | None:
    """The scope's own move, if it has one; else partition 0 with the lowest broker it lacks added to its replicas,
    or, on every broker already, its replicas in reverse order (a move of the preferred leader, which keeps the
    leader: either is a change of replicas that keeps every old one, where Kafka 3.5 bumped no leader epoch)."""
    if scope.reassignment is not None:
        return scope.reassignment
    replicas = tuple(BrokerId(r) for r in scope.partitions[0]) if scope.partitions else ()
    spare = [BrokerId(b) for b in range(scope.brokers) if b not in replicas]
    if spare and replicas:
        return PartitionId(0), replicas + (spare[0],)
    return (PartitionId(0), replicas[::-1]) if len(replicas) > 1 else None


# How long a queued MetadataChangeEvent (``FaultMix.queue_event``) waits behind the driver's other events: up to
# the long events of a rapid failover (a full sync to ZooKeeper, full UpdateMetadata to every broker: KAFKA-16667's
# commit message), time enough at the upper end for the node to lose its leadership while it waits.
QUEUED_EVENT_WAIT_MS = (POLL_MS, 10 * POLL_MS)

# How long a held heartbeat (``FaultMix.hold_heartbeat``) waits in the network: from a broker's heartbeat interval
# (its next heartbeat goes out first) to four broker session timeouts, time enough, at the upper end, for its process
# to stop or crash, start again and register with a new broker epoch.
HELD_HEARTBEAT_MS = (BROKER_HEARTBEAT_INTERVAL_MS, 4 * BROKER_SESSION_TIMEOUT_MS)

# A broker's request whose response ``FaultMix.lose_response`` may lose, and the step that names the loss.
LOST_RESPONSE: dict[type, type] = {RegisterWithKRaft: RegistrationResponseLost, BrokerHeartbeat: HeartbeatResponseLost}
# The faults an aim strikes by turning a request among the options into them: a lost response (``LOST_RESPONSE``)
# and a held heartbeat, by name, with the request's type.
_AIMED_REQUESTS = {loss.__name__: (request, loss) for request, loss in LOST_RESPONSE.items()} | {
    "HoldHeartbeat": (BrokerHeartbeat, HoldHeartbeat)}

RARE = PERTURBATIONS - TIMED  # the offered steps weighed SPONTANEOUS, the others 1
# ... but an admin's requests come as often as the operator's steps, each kind at most once a poll
# (impl.pacing), so that a run sends some in every phase it goes through. Only a drawn configuration has an
# admin (``impl.sim.scenarios.is_drawn``: the nodes offer its ``Scope.metadata_version_choices`` and
# ``Scope.feature_updates``); in a model scope run as named nobody sends them, as before configurations were
# drawn: its simulations, and the runs pinned for them, stay as they were.
ADMIN = 0.3
ADMIN_KINDS = frozenset({UpdateMetadataVersion, UpdateFeatures})
# A world's admin requests (``impl.sim.scenarios.WORLDS``: a partition created, through a ZK broker or the KRaft
# controller, reassigned, the topic deleted), each sent once a run: weighed SPONTANEOUS they were sent in few of their
# world's runs (at about one event in 5,000 a node, most runs ended first). In a drawn configuration they come at
# ``ONCE`` (about one event in 300 a node, the weights being scaled by the activity), so that most of their world's
# runs send them, at a point spread over the fault window, before the migration, during it or in dual write (or, a ZK
# broker's, after a rollback's hand-back). A model scope run as named weighs them as before.
ONCE = 0.3
ONCE_KINDS = frozenset({AddPartitions, CreatePartitions, ApiPartitionReassignment, AlterPartitionReassignments,
                        DeleteTopics, MarkTopicDeletion})


def _weight(kind: type, drawn: bool = False) -> float:
    if kind not in RARE:
        return 1.0
    return ADMIN if kind in ADMIN_KINDS else ONCE if drawn and kind in ONCE_KINDS else SPONTANEOUS


_NEVER = float("inf")  # the due time of offers no timer changes


def _held_back(holds: dict[int, int], node_id: int, kind: type, offered: list[Action], deadline: int | None,
               now: int) -> tuple[list[Action], int | None]:
    """A node's offers without ``kind`` and its deadline brought forward while ``holds[node_id]`` has not come;
    once it has, the hold ends and the offers are as they were."""
    until = holds.get(node_id)
    if until is None:
        return offered, deadline
    if now >= until:
        del holds[node_id]
        return offered, deadline
    held = [a for a in offered if type(a) is not kind]
    return held, until if deadline is None else min(deadline, until)


def _joiner(count: int) -> Callable[[list[list]], list]:
    """``lambda parts: [*parts[0], ..., *parts[count - 1]]``: the nodes' parts joined in one list display
    (several times faster than ``itertools.chain`` for a few short lists)."""
    return eval("lambda parts: [" + ", ".join(f"*parts[{i}]" for i in range(count)) + "]")  # noqa: S307


@dataclass(frozen=True)
class SimStep:
    """One simulated event, enough to perform it again without the simulator: the clock, the pairs a
    partition separated, and the model action (``properties.campaign`` shrinks and replays these)."""

    now: int
    cuts: tuple[tuple[int, int], ...]
    action: Action


@dataclass
class Outcome:
    seed: int
    events: int
    seconds: float
    disagreement: str | None = None  # the first disagreement with the model or broken property, if any
    progress: str = "none"  # how far the migration got (``PROGRESS``)
    rolled_back: bool = False  # the rollback runbook deleted the quorum's znodes
    findings: tuple[str, ...] = ()  # documented findings about the seeds the run showed (``Scope.findings``)
    actions: dict[str, int] = field(default_factory=dict)  # events per action kind

    @property
    def ok(self) -> bool:
        return self.disagreement is None


PROGRESS = ("none", "zk-controller", "kraft-leader", "migration", "dual-write", "brokers-on-kraft", "finalized")
_DUAL_WRITE = PROGRESS.index("dual-write")
# The operator's preparation begins once a quorum has bootstrapped the migration and it has not gone on for a
# while: what keeps it from going on (a broker the quorum refuses, a voter that is not ready) shows then, not
# before, and the cluster runs misconfigured meanwhile. A quiet continuation prepares at once.
_MIGRATION = PROGRESS.index("migration")
NOTICE_MS = 10_000
# The quiet continuation's mix: healing only (a crashed node restarts, ZooKeeper recovers, a dead process's
# session times out), no fault.
QUIET = FaultMix(restart=0.5, recover=1.0)


@dataclass(frozen=True)
class Operator:
    """The operator's own memory, handed over to a quiet continuation: the nodes it keeps down (its roll
    stopped them), whether its rollback is under way or done, and how far it saw the migration get."""

    held: tuple[int, ...] = ()
    rolling_back: bool = False
    rolled_back: bool = False
    progress: int = 0  # an index of PROGRESS


@dataclass(frozen=True)
class Aim:
    """A fault to strike when the active controller's migration driver is in ``driver`` (None: no active
    controller with a driver), named by its model action's type (``CrashController``, ``Drop``, ...)."""

    driver: MigrationDriverState | None
    fault: str


# The faults an aim can name, and how to tell them among the options: a session's expiry breaks something
# only while its process is alive (``_breaking_expiries``).
# A lost response is aimed at the request it answers: the next such request among the options, its response lost;
# a held heartbeat, at the next BrokerHeartbeat among the options, held.
AIMABLE = ("Drop", "Redeliver", "CrashBroker", "CrashController", "StopBroker", "ShutdownController",
           "ExpireSession", "ZkOutage", "RegistrationResponseLost", "HeartbeatResponseLost", "ZkServerLags",
           "HoldHeartbeat")


class Simulation:
    def __init__(self, scope: Scope, seed: int, faults: FaultMix, bugs: frozenset[ImplBug] = frozenset(),
                 port=None, checker: Checker | None = None, runbook: str = "finalize",
                 aims: tuple[Aim, ...] = (), spontaneous: bool = True) -> None:
        """``checker``: what checks every event, owning the cluster it built (with its own bugs and port);
        None: no check, and a cluster of the scope with ``bugs`` on ``port``. ``aims``: faults to strike in
        given states of the migration driver. ``spontaneous``: whether nodes take their rare steps of their
        own (admin requests, controlled shutdowns), which the model counts as perturbations."""
        if runbook not in RUNBOOKS:
            raise ValueError(f"unknown runbook {runbook!r}; expected one of {', '.join(RUNBOOKS)}")
        unknown = [a.fault for a in aims if a.fault not in AIMABLE]
        if unknown:
            raise ValueError(f"cannot aim {unknown[0]!r}; expected one of {', '.join(AIMABLE)}")
        self.scope, self.seed, self.runbook = scope, seed, runbook
        self.aims = list(aims)  # those not struck yet
        self.spontaneous = spontaneous
        self._breaking_expiries: set[Action] = set()  # the expiries among the options that end a live session
        # an aimed lost response or held heartbeat, kept until its request took effect (else the fault broke nothing)
        self._aim_to_renew: tuple[int, Aim] | None = None
        self.rng = random.Random(seed)
        # Under swarm testing the run's own mix is the first thing drawn (``FaultMix.drawn``).
        self.faults = faults.drawn(self.rng) if faults.swarm else faults
        self.checker = checker
        self.cluster = checker.cluster if checker is not None else Cluster.from_scope(scope, bugs=bugs, port=port,
                                                                                        seed=seed)
        self.cluster.delay = self._delay
        self.cluster.hold_delay = lambda: self.rng.randint(*HELD_HEARTBEAT_MS)
        self.cluster.reachable = self._reachable
        self._drawn = is_drawn(scope)  # an admin sends its requests (``ADMIN``, ``ONCE``)
        if not self._drawn:  # no admin: the nodes offer none of its requests (``ADMIN``)
            for broker in self.cluster.brokers.values():
                broker.feature_updates = ()
            for controller in self.cluster.controllers.values():
                controller.metadata_version_updates = ()
        target = reassignment_target(scope) if self.faults.reassign else None
        if target is not None:  # mix ``reassign``: every node's admin asks for partition 0's move once
            for node in (*self.cluster.brokers.values(), *self.cluster.controllers.values()):
                node.reassignment = target
            for broker in self.cluster.brokers.values():
                broker.joins_isr = True  # leading the partition, it asks for the new replicas' ISR joins
        if self.faults.delete_topic:  # mix ``delete-topics``: every KRaft controller's admin deletes the topic once
            for controller in self.cluster.controllers.values():
                controller.deletes_topic = True
        if self.faults.stalled_deletion:  # mix ``stalled-deletion``: every ZK broker's admin marks it once; the ZK
            for broker in self.cluster.brokers.values():  # controller's deletion (``topic_deletions``) stays stalled
                broker.deletes_topic = True
        self.cuts: dict[frozenset[int], int] = {}  # a partitioned pair -> when it heals
        self.crashed_at: dict[int, int] = {}  # a dead (or paused) broker's ZooKeeper session -> when it went silent
        self.paused: dict[int, int] = {}  # a paused node -> when it resumes
        # a controller whose driver hears of its leadership change late -> when its KRaftLeaderChange is offered
        self.lagging: dict[int, int] = {}
        self.queued_until: dict[int, int] = {}  # controller -> until when its queued MetadataChangeEvent waits
        self._leader_event_due: set[int] = set()  # controllers whose last offers held their KRaftLeaderChange
        self._outage, self._recover = ZkOutage(), ZkRecover()
        self.changes: dict[int, int] = {}  # how often each node's memory changed (its offers were recomputed)
        # A message its destination deferred (it does not serve requests yet) waits until that node changes:
        # in-flight seq -> the destination's ``changes`` when it deferred it.
        self.deferred: dict[int, int] = {}
        self._deliveries: dict[Action, InFlight] = {}
        self._busy = False  # the last choices hold a protocol step, a delivery, a healing or the operator's
        self._runbook_key: tuple = ()
        self._runbook_maintenance: set[int] = set()  # ``maintenance`` as the runbook's steps were made
        self._runbook_steps: list[Action] = []
        self._sight_version = 0  # counts changes of what the operator sees (``_sights``)
        self._ended: set[int] = set()  # ZooKeeper sessions known to be over (they never come back)
        self.maintenance: set[int] = set()  # nodes the operator stopped: only the operator starts them
        self.rolling_back = False
        self.rolled_back = False
        self.events = 0
        self.counts: dict[str, int] = {}
        self._lines: list[str] = []  # ``lines`` as far as written
        self._traces: list[list[Action]] = []  # what the implementation said it did, event by event
        # Each event as a replay needs it, without the simulator: (time, partitioned pairs, action).
        self.record: list[SimStep] = []
        # Called after every event with the simulation and the traces of the action (campaigns gather
        # coverage through it); it must not draw from ``rng``.
        self.on_event: Callable[[Simulation, Action, list[Action]], None] | None = None
        self.progress = 0
        c = self.cluster
        self.node_ids = sorted(c.brokers) + sorted(c.controllers)
        self._nodes = [(n, c.node(n)) for n in self.node_ids]
        self._slot = {n: i for i, n in enumerate(self.node_ids)}
        # Each node's part of the options, by its place in ``node_ids``, kept until the node changes
        # (it handles an event, a timer runs out, the operator takes or leaves it): running, its
        # protocol steps, and its spontaneous steps and faults; dead, its restart. With their weights.
        count = len(self.node_ids)
        self._join = _joiner(count)
        self._steps: list[list[Action]] = [[] for _ in range(count)]
        self._step_weights: list[list[float]] = [[] for _ in range(count)]
        self._rare: list[list[Action]] = [[] for _ in range(count)]
        self._rare_weights: list[list[float]] = [[] for _ in range(count)]
        # when a running node's offers change with the time alone (its ``next_deadline``)
        self._due: list[float] = [-1] * count
        self._soonest: float = -1  # the earliest of ``_due`` (-1: nothing computed yet)
        self._dead: set[int] = set()  # the places of dead nodes
        self._kept_out: set[int] = set()  # ``maintenance`` as the dead nodes' parts were last made
        self.offered: dict[int, list[Action]] = {}  # each node's last offers
        # each node's crash, clean stop and restart, and the crash and stop the mix weighs while it runs
        self._lifecycle = {n: (CrashBroker(n), StopBroker(n), RestartBroker(n)) for n in c.brokers}
        self._lifecycle.update({n: (CrashController(n), ShutdownController(n), RestartController(n))
                                for n in c.controllers})
        self._node_faults: dict[int, tuple[list[Action], list[float]]] = {}
        for n, (crash, stop, _) in self._lifecycle.items():
            pairs = [(weight, fault) for weight, fault in ((self.faults.crash, crash), (self.faults.stop, stop))
                     if weight]
            self._node_faults[n] = ([fault for _, fault in pairs], [weight for weight, _ in pairs])
        self._labels: dict[int, tuple] = {}  # an in-flight message's (sender, dest, Deliver, Drop, Redeliver)
        # What the operator sees of each process (``_seen``), refreshed when the process changed; the
        # runbook is a function of these, the progress and its own state.
        self._sight: dict[int, object] = {}
        self._unseen = set(self.node_ids)  # processes that changed since their ``_sight`` was taken
        self._open_sessions: list[int] = []  # the brokers' other sessions, in the order they were opened
        self._sessions_seen = 0  # how many of ``session_owner``'s sessions ``_open_sessions`` took in
        self._expiries: dict[int, ExpireSession] = {}  # a session's expiry, as the model names it
        # The operator's preparation (``_prepare``): the level every ZK broker's IBP must have, the quorum's
        # metadata.version; whether some broker or controller is configured otherwise than the migration needs.
        # Only a drawn configuration is prepared: a model scope misconfigured on purpose (pre-migration's broker
        # at another IBP) runs as its scope says, as it did before configurations were drawn.
        self.target_ibp = c.controllers[min(c.controllers)].bootstrap_metadata_version if c.controllers else None
        self.preparing = is_drawn(scope) and self.target_ibp is not None and (
            any(not b.kraft_mode and b.ibp != self.target_ibp for b in c.brokers.values())
            or any(not k.migration_enabled for k in c.controllers.values()))
        self.migration_at: int | None = None  # when the operator first saw a quorum bootstrap the migration

    # ---- hooks the cluster calls --------------------------------------------------------------

    def _delay(self, message) -> int:
        return self.rng.randint(0, self.faults.delay_ms) if self.faults.delay_ms else 0

    def _reachable(self, source: int, dest: int) -> bool:
        if not self.cuts:
            return True
        healed = self.cuts.get(frozenset((source, dest)))
        return healed is None or healed <= self.cluster.now

    # ---- one event ----------------------------------------------------------------------------

    def choices(self) -> list[tuple[float, Action]]:
        """The next event's weighted options, in the order they are drawn from."""
        actions, weights = self._options()
        return list(zip(weights, actions))

    def _options(self) -> tuple[list[Action], list[float]]:
        """The next event's options as ``random.choices`` takes them: a population and its weights.

        The order is fixed, since it decides both the draw and the float cumulative sums
        ``random.choices`` bisects: each node's protocol steps (or, dead, its restart), node by node;
        due deliveries, drops and duplicates in network order; the operator's step; healing faults;
        then faults that break something and spontaneous steps, scaled by the activity. The pieces
        are kept between events (a node's offers split by weight, its faults, a message's labels,
        the runbook's steps, a session's expiry) and joined in one list each time.
        """
        c, now = self.cluster, self.cluster.now
        cuts = self.cuts
        if cuts:
            # A healed cut separates nothing any more (``_reachable``), and ``_whole`` holds a step
            # only across a cut: forgetting it lets the common case below skip ``_whole``.
            for pair in [pair for pair, heals in cuts.items() if heals <= now]:
                del cuts[pair]
        touched = c.touched
        if touched or now >= self._soonest:  # a node handled an event, was notified, or its timer ran out
            # (in any order: a node's part depends on its own memory, the time and the operator only)
            if now >= self._soonest:
                for i, due in enumerate(self._due):
                    if now >= due:
                        self._refresh(i, self.node_ids[i], self._nodes[i][1], now)
            for node_id in list(touched):  # (the refreshed ones are no longer touched)
                i = self._slot[node_id]
                self._refresh(i, node_id, self._nodes[i][1], now)
            self._soonest = min(self._due)
        if self._dead and self.maintenance != self._kept_out:  # the operator took a node or left it
            self._kept_out = set(self.maintenance)
            for i in self._dead:
                self._restart(i)
        if cuts:
            actions, weights, broken, broken_weights = self._whole_parts()
        else:
            join = self._join
            actions, weights = join(self._steps), join(self._step_weights)
            broken, broken_weights = join(self._rare), join(self._rare_weights)  # faults, spontaneous steps
        if c.network:
            self._deliveries = {}
            self._messages(actions, weights, now)
        elif self._deliveries:
            self._deliveries = {}
        if c.held:
            self._held_heartbeats(actions, weights, now)
        # (before dual writes the runbook waits, but for its preparation of a misconfigured cluster)
        preparing = self.preparing and self.migration_at is not None and now >= self.migration_at + NOTICE_MS
        if preparing or (self.runbook != "none" and self.progress >= _DUAL_WRITE):
            if self._unseen:
                self._sights()
            key = (self._sight_version, self.progress, self.rolling_back, self.rolled_back, preparing)
            if key != self._runbook_key or self.maintenance != self._runbook_maintenance:  # what the operator sees
                self._runbook_key, self._runbook_maintenance = key, set(self.maintenance)
                self._runbook_steps = self._runbook()
            steps = self._runbook_steps
            if steps and self.paused:  # the operator's signal to a paused process is handled when it resumes
                steps = [a for a in steps if getattr(a, "broker", getattr(a, "controller", None)) not in self.paused]
            if steps:
                actions += steps
                weights += [RUNBOOK] * len(steps)
        # A mix's weights (and SPONTANEOUS) are per protocol step of a busy cluster: against a quiet
        # one (a few offers) they are weighed as against ACTIVITY, so that a fault comes at the same
        # rate per event however few steps are due.
        scale = min(1.0, sum(weights) / ACTIVITY)
        self._zookeeper_faults(broken, broken_weights, actions, weights)
        self._busy = bool(weights) and max(weights) >= RUNBOOK  # else: only perturbations are due
        actions += broken
        weights += [w * scale for w in broken_weights]
        return actions, weights

    def _refresh(self, i: int, node_id: int, node, now: int) -> None:
        """A node's part of the options, made again (``_options`` asks when it handled an event or was
        notified since, or when one of its timers ran out: ``next_deadline``).

        A running node's offers are a function of its memory (impl.protocol), which changes only
        then, and of the time, which opens its timers (impl.pacing).
        """
        touched = self.cluster.touched
        if node_id in touched:  # (a dead process reconfigured, say: what the operator sees changed)
            touched.discard(node_id)
            self.changes[node_id] = self.changes.get(node_id, 0) + 1
            self._unseen.add(node_id)
        if self.paused and node_id in self.paused:
            resume = self.paused[node_id]
            if now < resume:  # it offers nothing, and its timers wait, until it resumes
                self.offered[node_id] = []
                self._steps[i] = self._step_weights[i] = self._rare[i] = self._rare_weights[i] = []
                self._due[i] = resume
                return
            del self.paused[node_id]
            if node_id in self.cluster.brokers and node.alive and node.session is not None:
                self.crashed_at.pop(node.session, None)  # its client pings again (if the session is still there)
        if not node.alive:
            self._leader_event_due.discard(node_id)
            self.lagging.pop(node_id, None)
            self._dead.add(i)
            self._due[i] = _NEVER
            self._rare[i] = self._rare_weights[i] = []
            self._restart(i)
            return
        if self._dead:
            self._dead.discard(i)
        offered, deadline = node.offers(now), node.next_deadline()
        if self.faults.leader_event_lag and node_id in self.cluster.controllers:
            offered, deadline = self._lag_leader_event(node_id, offered, deadline, now)
        if self.queued_until:  # a queued MetadataChangeEvent waits its drawn time (QUEUED_EVENT_WAIT_MS)
            offered, deadline = _held_back(self.queued_until, node_id, RunMetadataChange, offered, deadline, now)
        self.offered[node_id] = offered
        if RARE.isdisjoint(map(type, offered)):  # the usual case
            self._steps[i] = list(offered)
            self._step_weights[i] = [1.0] * len(offered)
            self._rare[i], self._rare_weights[i] = self._node_faults[node_id]
        else:
            rare = [a for a in offered if type(a) in RARE] if self.spontaneous else []
            fault_actions, fault_weights = self._node_faults[node_id]
            self._steps[i] = steps = [a for a in offered if type(a) not in RARE]
            self._step_weights[i] = [1.0] * len(steps)
            self._rare[i] = rare + fault_actions
            self._rare_weights[i] = [_weight(type(a), self._drawn) for a in rare] + fault_weights
        self._due[i] = _NEVER if deadline is None else deadline

    def _lag_leader_event(self, node_id: int, offered: list[Action], deadline: int | None,
                          now: int) -> tuple[list[Action], int | None]:
        """A controller's offers and deadline with its KRaftLeaderChange held back while its lag lasts; when
        the step first becomes due after a leadership change, a lag is drawn (``FaultMix.leader_event_lag``)."""
        if not any(type(a) is KRaftLeaderChange for a in offered):
            self._leader_event_due.discard(node_id)
            self.lagging.pop(node_id, None)
            return offered, deadline
        if node_id not in self._leader_event_due:
            self._leader_event_due.add(node_id)
            if self.rng.random() < self.faults.leader_event_lag:
                self.lagging[node_id] = now + self.rng.randint(*LEADER_EVENT_LAG_MS)
        return _held_back(self.lagging, node_id, KRaftLeaderChange, offered, deadline, now)

    def _restart(self, i: int) -> None:
        """A dead node's part: its restart, unless the operator keeps it down."""
        node_id, restart = self.node_ids[i], self.faults.restart
        if restart and node_id not in self.maintenance:
            self._steps[i], self._step_weights[i] = [self._lifecycle[node_id][2]], [restart]
        else:
            self._steps[i] = self._step_weights[i] = []

    def _whole_parts(self) -> tuple[list[Action], list[float], list[Action], list[float]]:
        """The nodes' parts while a partition cuts some pair: without the steps ``_whole`` holds back."""
        actions: list[Action] = []
        weights: list[float] = []
        broken: list[Action] = []
        broken_weights: list[float] = []
        for i, (node_id, node) in enumerate(self._nodes):
            if i in self._dead:
                actions += self._steps[i]
                weights += self._step_weights[i]
                continue
            for a in self.offered[node_id]:
                if self._whole(a):
                    w = _weight(type(a), self._drawn)
                    if w >= 1.0:
                        actions.append(a)
                        weights.append(w)
                    elif self.spontaneous:
                        broken.append(a)
                        broken_weights.append(w)
            if node_id not in self.paused:
                fault_actions, fault_weights = self._node_faults[node_id]
                broken += fault_actions
                broken_weights += fault_weights
        return actions, weights, broken, broken_weights

    def _messages(self, actions: list[Action], weights: list[float], now: int) -> None:
        """Each due message's delivery, drop and duplicate, in network order."""
        f, deliveries = self.faults, self._deliveries
        for entry in self.cluster.network:
            if entry.deliver_at > now:
                continue
            labels = self._labels.get(entry.seq)
            if labels is None:
                # The message as the model writes it (a broker epoch that is a czxid renamed), as
                # Cluster.perform looks it up; so the trace does not show the server's zxids either.
                message = self.cluster.view.message(entry.message)
                labels = self._labels[entry.seq] = (self._sender(entry.message), entry.message.dest, Deliver(message),
                                                    Drop(message), Redeliver(message))
            sender, dest, deliver, drop, redeliver = labels
            if self.cuts and (not self._reachable(sender, dest) or dest in self.paused):
                continue
            waiting = self.deferred.get(entry.seq) == self.changes.get(dest, 0)
            if not waiting:
                actions.append(deliver)
                weights.append(1.0)
                deliveries[deliver] = entry
            if f.drop:
                actions.append(drop)
                weights.append(f.drop)
            if f.duplicate and not waiting:
                actions.append(redeliver)
                weights.append(f.duplicate)
                deliveries[redeliver] = entry

    def _held_heartbeats(self, actions: list[Action], weights: list[float], now: int) -> None:
        """Each held heartbeat whose time has come, delivered late, in the order they were held."""
        c = self.cluster
        for entry in c.held:
            if entry.deliver_at > now or (self.cuts and not self._reachable(entry.request.source, entry.dest)):
                continue
            actions.append(DeliverHeartbeat(c.held_request(entry)))
            weights.append(1.0)

    def _whole(self, action: Action) -> bool:
        """Whether a step whose outcome (not only whether it is taken) depends on reaching a peer can
        be taken now: the model has no partitions and takes it with every exchange inside it
        answered (a dead peer answers nothing, in both), so across a cut it waits for the heal.
        A Fetch from a leader not yet active may commit its LeaderChange, and so activate it (Raft
        tells QuorumController it leads only then), and activation asks every voter whether it
        finalizes (KIP-866 §Finalizing the Migration); SessionTimeout tells the fenced broker."""
        match action:
            case Fetch(leader=k):
                leader = self.cluster.controllers.get(k)
                if leader is not None and leader.awaiting_activation():
                    return all(self._reachable(k, o) for o in self.cluster.controllers if o != k)
            case SessionTimeout(broker=b, controller=k):
                return self._reachable(k, b)
        return True

    @staticmethod
    def _sender(message) -> int:
        return getattr(message, "controller_id", getattr(message, "broker_id", -1))

    def _next_wake(self) -> int | None:
        """The earliest time something becomes possible when nothing is now: a node's timer, a delayed
        message, a healed partition, a dead process's session timing out."""
        now = self.cluster.now
        wake = _NEVER
        for t in self._due:  # running nodes' timers (a dead node's is _NEVER)
            if now < t < wake:
                wake = t
        for entry in [*self.cluster.network, *self.cluster.held]:
            if now < entry.deliver_at < wake:
                wake = entry.deliver_at
        for t in self.cuts.values():
            if now < t < wake:
                wake = t
        for died in self.crashed_at.values():
            if now < died + SESSION_TIMEOUT_MS < wake:
                wake = died + SESSION_TIMEOUT_MS
        return None if wake is _NEVER else wake

    def _zookeeper_faults(self, broken: list[Action], broken_weights: list[float], actions: list[Action],
                          weights: list[float]) -> None:
        """Breaking (an outage, a live session's expiry) onto ``broken``; healing (a recovery, a dead
        process's expiry) onto ``actions``."""
        c, f = self.cluster, self.faults
        if self._breaking_expiries:
            self._breaking_expiries = set()
        if not c.zk_available:
            if f.recover:
                actions.append(self._recover)
                weights.append(f.recover)
            return
        if f.outage:
            broken.append(self._outage)
            broken_weights.append(f.outage)
        if f.stale_read or f.catch_up:
            self._lagging_servers(broken, broken_weights, actions, weights)
        if f.broker_stale_read or f.broker_catch_up:
            self._lagging_broker_servers(broken, broken_weights, actions, weights)
        if not (f.expire or f.expire_dead):
            return
        owners = c.session_owner
        if len(owners) != self._sessions_seen:  # sessions opened since (ids are never reused): the brokers'
            for session, owner in list(owners.items())[self._sessions_seen:]:
                if owner in c.brokers and session not in self._ended:
                    self._open_sessions.append(session)
            self._sessions_seen = len(owners)
        ended = []
        for session in self._open_sessions:
            node = c.brokers[owners[session]]
            if not c.port.session_alive(session):
                ended.append(session)
                continue
            expiry = self._expiries.get(session)
            if expiry is None:
                expiry = self._expiries[session] = ExpireSession(c.view.session(session))
            if node.alive and node.session == session and owners[session] not in self.paused:
                if f.expire:
                    broken.append(expiry)
                    broken_weights.append(f.expire)
                    if self.aims:
                        self._breaking_expiries.add(expiry)
                continue
            # a dead (or paused) process's session lives until the server times it out
            died = self.crashed_at.setdefault(session, c.now)
            if c.now - died >= SESSION_TIMEOUT_MS and f.expire_dead:
                actions.append(expiry)
                weights.append(f.expire_dead)
        if ended:
            self._ended.update(ended)
            self._open_sessions = [s for s in self._open_sessions if s not in self._ended]

    def _lagging_servers(self, broken: list[Action], broken_weights: list[float], actions: list[Action],
                         weights: list[float]) -> None:
        """A KRaft controller's ZooKeeper server falling behind (breaking), or one behind catching up (healing)."""
        c, f = self.cluster, self.faults
        lagging = getattr(c.port, "lagging", None)
        if lagging is None:  # a real server: its lag is its own
            return
        for cid in sorted(c.controllers):
            if lagging(c.controllers[cid].zk_session):
                if f.catch_up:
                    actions.append(ZkServerCatchesUp(cid))
                    weights.append(f.catch_up)
            elif f.stale_read:
                broken.append(ZkServerLags(cid))
                broken_weights.append(f.stale_read)

    def _lagging_broker_servers(self, broken: list[Action], broken_weights: list[float], actions: list[Action],
                                weights: list[float]) -> None:
        """A ZooKeeper-mode broker's server falling behind while it is not the controller (breaking), or one
        behind catching up (healing)."""
        c, f = self.cluster, self.faults
        lagging = getattr(c.port, "lagging", None)
        if lagging is None:  # a real server: its lag is its own
            return
        for b in sorted(c.brokers):
            node = c.brokers[b]
            if not node.alive or node.session is None or not c.port.session_alive(node.session):
                continue
            if lagging(node.session):
                if f.broker_catch_up:
                    actions.append(BrokerZkServerCatchesUp(b))
                    weights.append(f.broker_catch_up)
            elif f.broker_stale_read and node.controller is None:
                broken.append(BrokerZkServerLags(b))
                broken_weights.append(f.broker_stale_read)

    def _partition(self) -> None:
        ids = sorted(self.cluster.brokers) + sorted(self.cluster.controllers)
        if len(ids) < 2:
            return
        a, b = self.rng.sample(ids, 2)
        self.cuts[frozenset((a, b))] = self.cluster.now + self.rng.randint(*PARTITION_MS)

    def _pause(self) -> None:
        """A running node, not paused already, stops taking steps until a drawn time (``PAUSE_MS``)."""
        c = self.cluster
        running = [n for n in self.node_ids if c.node(n).alive and n not in self.paused]
        if not running:
            return
        node_id = self.rng.choice(running)
        resume = c.now + self.rng.randint(*PAUSE_MS)
        self.pause_node(node_id, resume)

    def pause_node(self, node_id: int, resume: int) -> None:
        """``node_id`` takes no step until ``resume`` and is cut from every other node until then."""
        c = self.cluster
        node = c.node(node_id)
        self.paused[node_id] = resume
        for other in self.node_ids:
            if other != node_id:
                pair = frozenset((node_id, other))
                self.cuts[pair] = max(self.cuts.get(pair, 0), resume)
        if node_id in c.brokers and node.session is not None:
            self.crashed_at.setdefault(node.session, c.now)  # the server hears nothing from it from now
        i = self._slot[node_id]
        self._due[i] = self._soonest = c.now  # its part is made again (empty) at the next ``_options``

    def step(self) -> Action | None:
        c = self.cluster
        if self.events % 25 == 0:
            self._note_progress()
        c.now += self.rng.randint(1, TICK_MS)
        if self.faults.partition and self.rng.random() < self.faults.partition:
            self._partition()
        if self.faults.pause and self.rng.random() < self.faults.pause:
            self._pause()
        actions, weights = self._options()
        while not self._busy:
            # A quiet cluster: nothing due but rare perturbations. Time passes (weighed as one protocol
            # step against them) to the next timer of a node, a message's delay or a healed partition.
            wake = self._next_wake()
            if wake is None:
                break
            if actions and self.rng.random() >= 1.0 / (1.0 + sum(weights)):
                break
            c.now = wake
            actions, weights = self._options()
        if not actions:
            return None
        action = (self.aims and self._aimed(actions)) or self._draw(actions, weights)
        lost = LOST_RESPONSE.get(type(action))
        if lost is not None and self.faults.lose_response and self.rng.random() < self.faults.lose_response:
            action = lost(action.broker, action.controller)  # type: ignore[attr-defined]
        elif isinstance(action, BrokerHeartbeat) and self.faults.hold_heartbeat \
                and self.rng.random() < self.faults.hold_heartbeat:
            action = HoldHeartbeat(action.broker, action.controller)  # it waits in the network, the broker times out
        if isinstance(action, DualWrite) and self.faults.queue_event and action.controller not in self.queued_until \
                and self.rng.random() < self.faults.queue_event:
            action = PublishMetadataChange(action.controller)  # the event waits in the driver's queue
        elif isinstance(action, DualWrite) and self.faults.fail_write and self.rng.random() < self.faults.fail_write:
            action = DualWriteSessionExpired(action.controller)  # its session expired while it waited
        elif isinstance(action, DualWrite) and self.faults.lose_reply and self.rng.random() < self.faults.lose_reply:
            action = DualWriteReplyLost(action.controller)  # applied, its reply lost, the resent copy refused
        self.record.append(SimStep(c.now, self._active_cuts() if self.cuts else (), action))  # (before: a
        # disagreement raises)
        traces = self.checker.apply(action) if self.checker is not None else c.perform(action)
        if traces and isinstance(action, PublishMetadataChange) and action.controller not in self.queued_until:
            self.queued_until[action.controller] = c.now + self.rng.randint(*QUEUED_EVENT_WAIT_MS)
        entry = self._deliveries.get(action) if self._deliveries else None
        if entry is not None and not traces and entry in c.network:
            # Deferred: the destination did nothing (it does not serve requests yet); its handling of
            # the message is no change of its memory, so the message waits for one.
            c.touched.discard(entry.message.dest)
            self.deferred[entry.seq] = self.changes.get(entry.message.dest, 0)
        if self._aim_to_renew is not None:
            index, aim = self._aim_to_renew
            if type(action) not in map(type, traces):  # the controller's side changed nothing: aim again
                self.aims.insert(index, aim)
            self._aim_to_renew = None
        if DeleteControllerZNodes in map(type, traces):
            self.rolled_back = True
            self.maintenance |= set(c.controllers)  # the quorum's life ended with the rollback
        self.events += 1
        name = type(action).__name__
        self.counts[name] = self.counts.get(name, 0) + 1
        self._traces.append(list(traces))
        if self.on_event is not None:
            self.on_event(self, action, traces)
        return action

    def _aimed(self, actions: list[Action]) -> Action | None:
        """The first aim whose driver state is the active driver's now and whose fault is among the options,
        struck (one of its instances, drawn); None when no aim applies."""
        state = self.driver_state()
        for index, aim in enumerate(self.aims):
            if aim.driver is not state:
                continue
            turned = _AIMED_REQUESTS.get(aim.fault)
            candidates = [a for a in actions if type(a).__name__ == aim.fault
                          and (aim.fault != "ExpireSession" or a in self._breaking_expiries)
                          or turned is not None and type(a) is turned[0]]
            if candidates:
                del self.aims[index]
                struck = candidates[self.rng.randrange(len(candidates))]
                if turned is None:
                    return struck
                self._aim_to_renew = (index, aim)
                return turned[1](struck.broker, struck.controller)  # type: ignore[attr-defined]
        return None

    def driver_state(self) -> MigrationDriverState | None:
        """The state of the active controller's migration driver (the newest epoch's, should two believe they
        are active); None when no controller is active or the active one has no driver."""
        active = [k for k in self.cluster.controllers.values() if k.is_active()]
        if not active:
            return None
        leader = max(active, key=lambda k: k.raft.epoch)
        return leader.driver.state if leader.driver is not None else None

    def _draw(self, actions: list[Action], weights: list[float]) -> Action:
        """``rng.choices(actions, weights=weights)[0]``, as CPython computes it (cumulative float sums,
        one ``random()``, a bisection), without its per-call overhead: the same draw."""
        cumulative = list(accumulate(weights))
        total = cumulative[-1] + 0.0
        if total <= 0.0 or not isfinite(total):
            return self.rng.choices(actions, weights=weights)[0]  # its error
        return actions[bisect(cumulative, self.rng.random() * total, 0, len(cumulative) - 1)]

    def _active_cuts(self) -> tuple[tuple[int, int], ...]:
        """The node pairs a partition separates now, each as (lower id, higher id), in order."""
        if not self.cuts:
            return ()
        now = self.cluster.now
        return tuple(sorted(tuple(sorted(pair)) for pair, heals in self.cuts.items() if heals > now))

    def run(self, events: int) -> Outcome:
        start = time.perf_counter()
        disagreement = None
        try:
            for _ in range(events):
                if self.step() is None:
                    break
        except CheckFailed as e:
            disagreement = str(e)
        self._note_progress()
        return Outcome(self.seed, self.events, time.perf_counter() - start, disagreement, PROGRESS[self.progress],
                       self.rolled_back, tuple(sorted(self.checker.findings_seen)) if self.checker else (),
                       dict(sorted(self.counts.items())))

    # ---- the quiet continuation ---------------------------------------------------------------

    def operator(self) -> Operator:
        """The operator's memory now, for a quiet continuation to take over."""
        self._note_progress()
        return Operator(tuple(sorted(self.maintenance)), self.rolling_back, self.rolled_back, self.progress)

    @classmethod
    def quiet(cls, scope: Scope, seed: int, checker: Checker, runbook: str, operator: Operator) -> Simulation:
        """A continuation of the cluster ``checker`` holds, with no fault: healing, the protocol's steps and the
        runbook (with the operator's memory). What was in flight is due now: a replay of the run so far sets no
        delays, and the continuation must start the same from the run and from its replay."""
        sim = cls(scope, seed, QUIET, checker=checker, runbook=runbook, spontaneous=False)
        sim.maintenance = set(operator.held)
        sim.rolling_back, sim.rolled_back, sim.progress = operator.rolling_back, operator.rolled_back, operator.progress
        c = sim.cluster
        if sim.progress >= _MIGRATION:  # the operator has noticed already: it prepares at once
            sim.migration_at = c.now - NOTICE_MS
        for entry in [*c.network, *c.held]:
            entry.deliver_at = c.now
        c.touched.clear()
        return sim

    def healed(self) -> bool:
        """Nothing is left to heal: ZooKeeper is up, no partition, pause or late leader event, every dead node is
        one the operator keeps down, and no ZooKeeper session of a dead process (or of an earlier life of a
        broker) is still open."""
        c = self.cluster
        if not c.zk_available or self.paused or self.lagging or self._active_cuts():
            return False
        if any(not node.alive and node_id not in self.maintenance for node_id, node in self._nodes):
            return False
        for session, owner in c.session_owner.items():
            node = c.brokers.get(owner)
            if node is not None and not (node.alive and node.session == session) and c.port.session_alive(session):
                return False
        return True

    @property
    def lines(self) -> list[str]:
        """The trace, a line per event: its time and action, and what the implementation did instead when
        that differs (written when asked: most runs are never read)."""
        lines, record = self._lines, self.record
        for n in range(len(lines), len(self._traces)):
            action, traces = record[n].action, self._traces[n]
            lines.append(f"{record[n].now} {action}" + ("" if traces == [action] else f" -> {traces}"))
        return lines

    def trace_text(self) -> str:
        return "\n".join(self.lines) + "\n"

    # ---- the operator -------------------------------------------------------------------------

    def _sights(self) -> None:
        """What the operator sees of the processes that changed since it last looked (``changes``: a
        process's memory changes only in an event it handled, or a notification); ``_sight_version``
        counts the changes it sees."""
        c = self.cluster
        for node_id in self._unseen:
            node = c.node(node_id)
            seen = _Seen.of(node) if node_id in c.brokers else (node.migration_enabled, node.alive)
            if self._sight.get(node_id) != seen:
                self._sight[node_id] = seen
                self._sight_version += 1
        self._unseen.clear()

    def _runbook(self) -> list[Action]:
        """The next operator step of KIP-866's runbook, when what the operator can see allows it."""
        c = self.cluster
        if self.progress < _DUAL_WRITE:
            return self._prepare()
        if self.runbook == "none":
            return []
        if self.runbook == "rollback":
            brokers = {b: _Seen.of(c.brokers[b]) for b in sorted(c.brokers)}
            if self.rolling_back or any(s.kraft_mode and s.alive and s.lifecycle is BrokerState.ONLINE
                                        for s in brokers.values()):
                self.rolling_back = True
                return self._rollback(brokers)
        for b in sorted(c.brokers):
            state = _Seen.of(c.brokers[b])
            if state.kraft_mode:
                if not state.alive:
                    return [self._operator(RestartBroker(b), done=b)]
                if state.lifecycle is not BrokerState.ONLINE:
                    return []  # one broker at a time: wait until it is back
                continue
            if state.alive:
                return [self._operator(StopBroker(b), start=b)]
            if state.migration_enabled:
                return [MigrateBrokerToKRaft(b)]
            return []
        for k in sorted(c.controllers):
            state = c.controllers[k]
            if state.migration_enabled:
                if state.alive:
                    return [self._operator(ShutdownController(k), start=k)]
                return [ReconfigureController(k, False)]
            if not state.alive:
                return [self._operator(RestartController(k), done=k)]
        return []

    def _prepare(self) -> list[Action]:
        """Once a quorum has bootstrapped the migration and before its dual writes, under every runbook: KIP-866's
        prerequisites set right, one node at a time, as an operator does who finds a ZK broker at another IBP than
        the quorum's metadata.version (it could never register with the quorum: stopped, its IBP set, started) or
        a controller without the migration flag
        (stopped, the flag set, started). Nothing left to set right ends the preparation."""
        c, target = self.cluster, self.target_ibp
        for b in sorted(c.brokers):
            state = _Seen.of(c.brokers[b])
            if state.kraft_mode:
                continue
            if state.ibp != target:
                return [self._operator(StopBroker(b), start=b)] if state.alive else [ChangeIbp(b, target)]
            if not state.alive and b in self.maintenance:
                return [self._operator(RestartBroker(b), done=b)]
        for k in sorted(c.controllers):
            node = c.controllers[k]
            if not node.migration_enabled:
                return [self._operator(ShutdownController(k), start=k)] if node.alive else \
                    [ReconfigureController(k, True)]
            if not node.alive and k in self.maintenance:
                return [self._operator(RestartController(k), done=k)]
        self.preparing = False
        return []

    def _rollback(self, brokers: dict) -> list[Action]:
        """KIP-866 §Rollback to ZK: every KRaft broker back to ZooKeeper, the quorum down, its znodes gone."""
        c = self.cluster
        for b, state in brokers.items():
            if state.kraft_mode:
                if state.alive:
                    return [self._operator(StopBroker(b), start=b)]
                return [RollbackBrokerToZk(b)] if state.meta_properties == 0 else []
            if not state.alive and b in self.maintenance:
                return [self._operator(RestartBroker(b), done=b)]
        for k in sorted(c.controllers):
            if c.controllers[k].alive:
                return [self._operator(ShutdownController(k), start=k)]
        return [] if self.rolled_back else [DeleteControllerZNodes()]

    def _operator(self, action: Action, start: int | None = None, done: int | None = None) -> Action:
        """Note which nodes are the operator's to start again (the fault mix's restarts leave them alone)."""
        if start is not None:
            self.maintenance.add(start)
        if done is not None:
            self.maintenance.discard(done)
        return action

    def _note_progress(self) -> None:
        """How far the migration got, from what the processes report (a ZooKeeper controller role, an
        activated KRaft leader, its driver's state and committed log, each broker's mode)."""
        c = self.cluster
        brokers = [c.brokers[b] for b in sorted(c.brokers)]
        controllers = [c.controllers[k] for k in sorted(c.controllers)]
        level = 1 if any(b.controller is not None for b in brokers) else 0
        leaders = [k for k in controllers if k.raft.active]
        if leaders:
            level = max(level, 2)
        drivers = [k.driver.state for k in leaders if k.driver is not None]
        if any(_committed_state(k.raft) is not ZkMigrationState.NONE for k in leaders):
            level = max(level, 3)
            if self.migration_at is None:
                self.migration_at = c.now
        if MigrationDriverState.DUAL_WRITE in drivers:
            level = max(level, 4)
        if level >= 4 and brokers and all(b.kraft_mode and b.alive for b in brokers):
            level = max(level, 5)
        if any(_committed_state(k.raft) is ZkMigrationState.POST_MIGRATION for k in leaders):
            level = 6
        self.progress = max(self.progress, level)


class _Seen(NamedTuple):
    """What the operator sees of a broker process (its configuration, whether it runs, its state)."""

    kraft_mode: bool
    migration_enabled: bool
    alive: bool
    lifecycle: BrokerState
    meta_properties: int
    ibp: Ibp

    @classmethod
    def of(cls, node) -> _Seen:
        lifecycle = node.kraft.lifecycle if node.kraft is not None else BrokerState.OFFLINE
        return cls(node.kraft_mode, node.migration_enabled, node.alive, lifecycle, node.meta_properties, node.ibp)


def _committed_state(controller) -> ZkMigrationState:
    for entry in reversed(controller.log[:controller.high_watermark]):
        record = entry.record
        if type(record).__name__ == "ZkMigrationStateRecord":
            return record.state
    return ZkMigrationState.NONE
