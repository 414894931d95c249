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
- With ``check=True`` every event is also checked against the model (``properties.differential``:
  the model takes the implementation's traces, the abstracted implementation must equal the
  model state, and the model's invariants must hold on it). The model's budgets are unbounded:
  the fault mix, not a scope, decides what happens.
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
from collections.abc import Callable
from dataclasses import dataclass, field

from impl.bugs import ImplBug
from impl.cluster import SESSION_TIMEOUT_MS, Cluster, InFlight
from impl.sim.faults import FaultMix
from model.actions import (
    PERTURBATIONS,
    Action,
    BecomeLeader,
    CrashBroker,
    CrashController,
    DeleteControllerZNodes,
    Deliver,
    Drop,
    ExpireSession,
    MigrateBrokerToKRaft,
    ReconfigureController,
    Redeliver,
    RestartBroker,
    RestartController,
    RollbackBrokerToZk,
    SessionTimeout,
    ShutdownController,
    StartElection,
    StopBroker,
    ZkOutage,
    ZkRecover,
)
from model.bugs import CORRECT
from model.kraft import BrokerState, ZkMigrationState
from model.migration import MigrationDriverState
from model.scopes import Scope

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


class Simulation:
    def __init__(self, scope: Scope, seed: int, faults: FaultMix, bugs: frozenset[ImplBug] = frozenset(),
                 port=None, check: bool = True, runbook: str = "finalize") -> None:
        if runbook not in RUNBOOKS:
            raise ValueError(f"unknown runbook {runbook!r}; expected one of {', '.join(RUNBOOKS)}")
        self.scope, self.seed, self.faults, self.runbook = scope, seed, faults, runbook
        self.rng = random.Random(seed)
        if check:
            from properties.differential import Differential

            self.diff = Differential(scope, bugs=bugs, variant=CORRECT, port=port, seed=seed, bounded=False,
                                     strict=False)
            self.cluster = self.diff.cluster
        else:
            self.diff = None
            self.cluster = Cluster.from_scope(scope, bugs=bugs, port=port, seed=seed)
        self.cluster.delay = self._delay
        self.cluster.reachable = self._reachable
        self.cuts: dict[frozenset[int], int] = {}  # a partitioned pair -> when it heals
        self.crashed_at: dict[int, int] = {}  # a dead broker's ZooKeeper session -> when its process died
        self.node_ids = sorted(self.cluster.brokers) + sorted(self.cluster.controllers)
        self._labels: dict[int, tuple] = {}  # an in-flight message's (sender, dest, Deliver, Drop, Redeliver)
        self._steps: dict[int, list[tuple[float, Action]]] = {}  # a node's offers of weight 1, in order
        self._spontaneous: dict[int, list[tuple[float, Action]]] = {}  # ... and its rarer ones
        # each node's crash, clean stop and restart, and the crash and stop the mix weighs while it runs
        self._lifecycle = {n: (CrashBroker(n), StopBroker(n), RestartBroker(n)) for n in self.cluster.brokers}
        self._lifecycle.update({n: (CrashController(n), ShutdownController(n), RestartController(n))
                                for n in self.cluster.controllers})
        self._node_faults = {
            n: [(weight, fault) for weight, fault in ((faults.crash, crash), (faults.stop, stop)) if weight]
            for n, (crash, stop, _) in self._lifecycle.items()
        }
        self.offered: dict[int, list[tuple[float, Action]]] = {}
        self.deadlines: dict[int, int | None] = {}  # when each node's offers change with the time alone
        self.changes: dict[int, int] = {}  # how often each node's memory changed (its offers were recomputed)
        # A message its destination deferred (it does not serve requests yet) waits until that node changes:
        # in-flight seq -> the destination's ``changes`` when it deferred it.
        self.deferred: dict[int, int] = {}
        self._deliveries: dict[Action, InFlight] = {}
        self._version = 0  # counts changes of any node's memory (``changes``)
        self._busy = False  # the last choices hold a protocol step, a delivery, a healing or the operator's
        self._runbook_key: tuple = ()
        self._runbook_steps: list[Action] = []
        self._ended: set[int] = set()  # ZooKeeper sessions known to be over (they never come back)
        self.maintenance: set[int] = set()  # nodes the operator stopped: only the operator starts them
        self.rolling_back = False
        self.rolled_back = False
        self.events = 0
        self.counts: dict[str, int] = {}
        self.lines: list[str] = []
        # Each event as a replay needs it, without the simulator: (time, partitioned pairs, action).
        self.record: list[SimStep] = []
        # Called after every event with the simulation and the traces of the action (campaigns gather
        # coverage through it); it must not draw from ``rng``.
        self.on_event: Callable[[Simulation, Action, list[Action]], None] | None = None
        self.progress = 0

    # ---- hooks the cluster calls --------------------------------------------------------------

    def _delay(self, message) -> int:
        return self.rng.randint(0, self.faults.delay_ms) if self.faults.delay_ms else 0

    def _reachable(self, source: int, dest: int) -> bool:
        healed = self.cuts.get(frozenset((source, dest)))
        return healed is None or healed <= self.cluster.now

    # ---- one event ----------------------------------------------------------------------------

    def choices(self) -> list[tuple[float, Action]]:
        c, f, now = self.cluster, self.faults, self.cluster.now
        out: list[tuple[float, Action]] = []
        breaking: list[tuple[float, Action]] = []  # faults that take something down, spontaneous steps
        for node_id in self.node_ids:
            node = c.node(node_id)
            if node.alive:
                offers = self._offers(node_id, node, now)
                if self.cuts:
                    for w, a in offers:
                        if self._whole(a):
                            (out if w >= 1.0 else breaking).append((w, a))
                else:  # the usual case: the split computed with the offers
                    out += self._steps[node_id]
                    breaking += self._spontaneous[node_id]
                breaking += self._node_faults[node_id]
            else:
                if node_id in c.touched:  # a dead process reconfigured, say: what the operator sees changed
                    c.touched.discard(node_id)
                    self.changes[node_id] = self.changes.get(node_id, 0) + 1
                    self._version += 1
                if not f.restart or node_id in self.maintenance:
                    continue
                out.append((f.restart, self._lifecycle[node_id][2]))
        self._deliveries = {}
        for entry in c.network:
            if entry.deliver_at > now:
                continue
            labels = self._labels.get(entry.seq)
            if labels is None:
                # The message as the model writes it (a broker epoch that is a czxid renamed), as
                # Cluster.perform looks it up; so the trace does not show the server's zxids either.
                message = c.view.message(entry.message)
                labels = self._labels[entry.seq] = (self._sender(entry.message), entry.message.dest, Deliver(message),
                                                    Drop(message), Redeliver(message))
            sender, dest, deliver, drop, redeliver = labels
            if self.cuts and not self._reachable(sender, dest):
                continue
            waiting = self.deferred.get(entry.seq) == self.changes.get(dest, 0)
            if not waiting:
                out.append((1.0, deliver))
                self._deliveries[deliver] = entry
            if f.drop:
                out.append((f.drop, drop))
            if f.duplicate and not waiting:
                out.append((f.duplicate, redeliver))
                self._deliveries[redeliver] = entry
        if self.runbook != "none":
            key = (self._version, self.progress, self.rolling_back, self.rolled_back, tuple(sorted(self.maintenance)))
            if key != self._runbook_key:  # what the operator sees changed
                self._runbook_key, self._runbook_steps = key, self._runbook()
            out += [(RUNBOOK, a) for a in self._runbook_steps]
        outages, healing = self._zookeeper_faults()
        breaking += outages
        # A mix's weights (and SPONTANEOUS) are per protocol step of a busy cluster: against a quiet
        # one (a few offers) they are weighed as against ACTIVITY, so that a fault comes at the same
        # rate per event however few steps are due.
        activity = sum(w for w, _ in out)
        scale = min(1.0, activity / ACTIVITY)
        options = out + healing
        self._busy = any(w >= RUNBOOK for w, _ in options)  # else: only perturbations are due
        return options + [(w * scale, a) for w, a in breaking]

    def _whole(self, action: Action) -> bool:
        """Whether a step whose outcome (not only whether it is taken) depends on reaching a peer can
        be taken now: the model has no partitions and takes it with every exchange inside it
        answered (a dead peer answers nothing, in both), so across a cut it waits for the heal.
        BecomeLeader's activation asks every voter whether it finalizes (KIP-866 §Finalizing the
        Migration); SessionTimeout tells the fenced broker."""
        match action:
            case BecomeLeader(controller=k):
                return all(self._reachable(k, o) for o in self.cluster.controllers if o != k)
            case SessionTimeout(broker=b, controller=k):
                return self._reachable(k, b)
        return True

    @staticmethod
    def _sender(message) -> int:
        return getattr(message, "controller_id", getattr(message, "broker_id", -1))

    def _offers(self, node_id: int, node, now: int) -> list[tuple[float, Action]]:
        """A node's weighted offers; recomputed only when it handled an event or was notified since, or
        when one of its timers ran out (``next_deadline``).

        Offers are a function of the node's memory (impl.protocol), which changes only then, and of
        the time, which opens the node's timers (impl.pacing).
        """
        deadline = self.deadlines.get(node_id)
        if node_id in self.cluster.touched or node_id not in self.offered or (deadline is not None and now >= deadline):
            if node_id in self.cluster.touched:
                self.changes[node_id] = self.changes.get(node_id, 0) + 1
                self._version += 1
            self.cluster.touched.discard(node_id)
            self.offered[node_id] = offered = [
                (SPONTANEOUS if type(a) in PERTURBATIONS and type(a) not in TIMED else 1.0, a)
                for a in node.offers(now)]
            self._steps[node_id] = [o for o in offered if o[0] >= 1.0]
            self._spontaneous[node_id] = [o for o in offered if o[0] < 1.0]
            self.deadlines[node_id] = node.next_deadline()
        return self.offered[node_id]

    def _next_wake(self) -> int | None:
        """The earliest time something becomes possible when nothing is now: a node's timer, a delayed
        message, a healed partition, a dead process's session timing out."""
        c, now = self.cluster, self.cluster.now
        times = [d for n in self.node_ids if c.node(n).alive and (d := self.deadlines.get(n)) is not None]
        times += [entry.deliver_at for entry in c.network]
        times += list(self.cuts.values())
        times += [died + SESSION_TIMEOUT_MS for died in self.crashed_at.values()]
        later = [t for t in times if t > now]
        return min(later) if later else None

    def _zookeeper_faults(self) -> tuple[list[tuple[float, Action]], list[tuple[float, Action]]]:
        """(breaking, healing): an outage and a live session's expiry; a recovery and a dead process's expiry."""
        c, f = self.cluster, self.faults
        if not c.zk_available:
            return [], [(f.recover, ZkRecover())] if f.recover else []
        out: list[tuple[float, Action]] = [(f.outage, ZkOutage())] if f.outage else []
        timed_out: list[tuple[float, Action]] = []
        if not (f.expire or f.expire_dead):
            return out, timed_out
        for session, owner in c.session_owner.items():
            if session in self._ended:
                continue
            node = c.brokers.get(owner)
            if node is None:
                continue
            if not c.port.session_alive(session):
                self._ended.add(session)
                continue
            model_id = c.view.session(session)
            if node.alive and node.session == session:
                if f.expire:
                    out.append((f.expire, ExpireSession(model_id)))
                continue
            # a dead process's session lives until the server times it out
            died = self.crashed_at.setdefault(session, c.now)
            if c.now - died >= SESSION_TIMEOUT_MS and f.expire_dead:
                timed_out.append((f.expire_dead, ExpireSession(model_id)))
        return out, timed_out

    def _partition(self) -> None:
        ids = sorted(self.cluster.brokers) + sorted(self.cluster.controllers)
        if len(ids) < 2:
            return
        a, b = self.rng.sample(ids, 2)
        self.cuts[frozenset((a, b))] = self.cluster.now + self.rng.randint(*PARTITION_MS)

    def step(self) -> Action | None:
        c = self.cluster
        if self.events % 25 == 0:
            self._note_progress()
        c.now += self.rng.randint(1, TICK_MS)
        if self.faults.partition and self.rng.random() < self.faults.partition:
            self._partition()
        options = self.choices()
        while not self._busy:
            # A quiet cluster: nothing due but rare perturbations. Time passes (weighed as one protocol
            # step against them) to the next timer of a node, a message's delay or a healed partition.
            wake = self._next_wake()
            if wake is None:
                break
            if options and self.rng.random() >= 1.0 / (1.0 + sum(w for w, _ in options)):
                break
            c.now = wake
            options = self.choices()
        if not options:
            return None
        action = self.rng.choices([a for _, a in options], weights=[w for w, _ in options])[0]
        self.record.append(SimStep(c.now, self._active_cuts(), action))  # before: a disagreement raises
        traces = self.diff.apply(action) if self.diff is not None else c.perform(action)
        entry = self._deliveries.get(action)
        if entry is not None and not traces and entry in c.network:
            # Deferred: the destination did nothing (it does not serve requests yet); its handling of
            # the message is no change of its memory, so the message waits for one.
            c.touched.discard(entry.message.dest)
            self.deferred[entry.seq] = self.changes.get(entry.message.dest, 0)
        if DeleteControllerZNodes() in traces:
            self.rolled_back = True
            self.maintenance |= set(c.controllers)  # the quorum's life ended with the rollback
        self.events += 1
        name = type(action).__name__
        self.counts[name] = self.counts.get(name, 0) + 1
        self.lines.append(f"{c.now} {action}" + ("" if traces == [action] else f" -> {traces}"))
        if self.on_event is not None:
            self.on_event(self, action, traces)
        return action

    def _active_cuts(self) -> tuple[tuple[int, int], ...]:
        """The node pairs a partition separates now, each as (lower id, higher id), in order."""
        if not self.cuts:
            return ()
        now = self.cluster.now
        return tuple(sorted(tuple(sorted(pair)) for pair, heals in self.cuts.items() if heals > now))

    def run(self, events: int) -> Outcome:
        from properties.differential import Disagreement

        start = time.perf_counter()
        disagreement = None
        try:
            for _ in range(events):
                if self.step() is None:
                    break
        except Disagreement as e:
            disagreement = str(e)
        self._note_progress()
        return Outcome(self.seed, self.events, time.perf_counter() - start, disagreement, PROGRESS[self.progress],
                       self.rolled_back, tuple(sorted(self.diff.findings_seen)) if self.diff else (),
                       dict(sorted(self.counts.items())))

    def trace_text(self) -> str:
        return "\n".join(self.lines) + "\n"

    # ---- the operator -------------------------------------------------------------------------

    def _runbook(self) -> list[Action]:
        """The next operator step of KIP-866's runbook, when what the operator can see allows it."""
        c = self.cluster
        if self.progress < PROGRESS.index("dual-write"):
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
        if MigrationDriverState.DUAL_WRITE in drivers:
            level = max(level, 4)
        if level >= 4 and brokers and all(b.kraft_mode and b.alive for b in brokers):
            level = max(level, 5)
        if any(_committed_state(k.raft) is ZkMigrationState.POST_MIGRATION for k in leaders):
            level = 6
        self.progress = max(self.progress, level)


@dataclass(frozen=True)
class _Seen:
    """What the operator sees of a broker process (its configuration, whether it runs, its state)."""

    kraft_mode: bool
    migration_enabled: bool
    alive: bool
    lifecycle: BrokerState
    meta_properties: int

    @classmethod
    def of(cls, node) -> _Seen:
        lifecycle = node.kraft.lifecycle if node.kraft is not None else BrokerState.OFFLINE
        return cls(node.kraft_mode, node.migration_enabled, node.alive, lifecycle, node.meta_properties)


def _committed_state(controller) -> ZkMigrationState:
    for entry in reversed(controller.log[:controller.high_watermark]):
        record = entry.record
        if type(record).__name__ == "ZkMigrationStateRecord":
            return record.state
    return ZkMigrationState.NONE
