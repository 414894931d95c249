"""One seeded run of a plan, checked against the model: its record, its disagreement, its coverage.

Rules:
- ``run_seed(plan, seed, aims)`` is the one way a plan's seed is run: a simulation of the
  implementation (``impl.sim.simulator``) handed a ``Differential`` of the plan's model variant as
  its checker (``properties.differential.checked_simulation``), so a model mutant's run is checked
  against that mutant from its first event and its warm-up runs once. Campaigns, shrinking and
  ``kraftcheck pin`` all run seeds through it; it stops at the first disagreement and returns the
  run's record (what a shrink replays), not the simulation.
- A run is its fault window (``Plan.fault_window``, with the run's aimed faults), then its
  quiet continuation (``properties.progress.quiet_continuation``), in which every progress goal must
  be met within its bound: a goal that is not is a ``Stall``, a violation like a disagreement.
- Coverage is gathered through ``Simulation.on_event`` from the model's side: the model action
  kinds taken, the migration drivers' transitions ("FROM->TO"), and a readable coarse
  projection of the model state (``state_key``); and from the implementation's side, the
  outcome of each of its named decisions (``impl.decisions``: "broker.decide_control_request=
  STALE_BROKER_EPOCH"); each fault with the driver state it struck in ("fault_at":
  "ZK_MIGRATION|crash controller"); and each progress goal met after the faults stopped
  ("progress": "LiveFencedBrokerEventuallyUnfenced").
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field

from impl import decisions
from impl.sim.scenarios import scenario
from impl.sim.simulator import SimStep
from model.actions import ExpireSession
from model.kraft_quorum import committed_image, is_active
from model.migration import KRaftControllerZNode, MigrationDriverState
from model.state import CONTROLLER, ClusterState, znode_data
from properties.differential import Differential, Disagreement, checked_simulation
from properties.plan import Plan
from properties.progress import Handover, ProgressMonitor, quiet_continuation, run_quietly

# ---- coverage --------------------------------------------------------------------------------

def action_key(action) -> str:
    """A model action's kind; a message's delivery, loss or resend also names the message's kind."""
    name = type(action).__name__
    message = getattr(action, "message", None)
    return name if message is None else f"{name}({type(message).__name__})"


def _active_controller(state: ClusterState):
    active = [c for c in state.controllers if is_active(c)]
    return max(active, key=lambda c: c.epoch) if active else None


def state_key(state: ClusterState) -> str:
    """A readable coarse projection of a model state: who holds /controller (a ZooKeeper broker, a
    KRaft controller, nobody) and whether ZooKeeper is up; the active KRaft controller's committed
    migration state and its driver's state; and the brokers as a multiset of mode, KRaft lifecycle
    and liveness (the brokers are interchangeable here, so ids are left out)."""
    holder = znode_data(state, CONTROLLER)
    owner = "none" if holder is None else "kraft" if isinstance(holder, KRaftControllerZNode) else "zk-broker"
    zk = owner if state.zk.available else f"{owner}(unavailable)"
    leader = _active_controller(state)
    if leader is None:
        migration = driver = "-"
    else:
        migration = committed_image(leader).migration_state.name
        driver = leader.driver.state.name if leader.driver is not None else "-"
    brokers = Counter(
        ("kraft/" + b.lifecycle.value if b.config.kraft_mode else "zk") + ("" if b.alive else "(down)")
        for b in state.brokers
    )
    mix = ",".join(f"{kind}x{n}" for kind, n in sorted(brokers.items()))
    return f"zk:{zk} migration:{migration} driver:{driver} brokers:{mix}"


# The faults a run injects, as the model actions they are, by the name the report's grid gives them.
FAULTS = {
    "Drop": "drop", "Redeliver": "duplicate", "CrashBroker": "crash broker", "CrashController": "crash controller",
    # a clean stop is the runbook's roll as often as the fault mix's stop: the grid cannot tell them apart
    "StopBroker": "stop broker (roll or fault)", "ShutdownController": "stop controller (roll or fault)",
    "ExpireSession": "expire session",
    "ZkOutage": "ZooKeeper outage", "SessionTimeout": "broker timed out",
    "RegistrationResponseLost": "registration response lost", "HeartbeatResponseLost": "heartbeat response lost",
    "ZkServerLags": "ZooKeeper server lags", "HoldHeartbeat": "heartbeat held",
}
NO_DRIVER = "no active driver"  # the ZooKeeper era, or no KRaft controller active
# The fault grid's rows (the driver's states, in the migration's order) and columns (the faults by their names).
GRID_STATES = (NO_DRIVER, *(s.name for s in MigrationDriverState))
GRID_FAULTS = tuple(dict.fromkeys(FAULTS.values()))


def _owner_alive(state: ClusterState, session) -> bool:
    return any(b.alive and b.session == session for b in state.brokers)


def driver_step(state: ClusterState) -> str:
    """Where the migration is when a fault strikes: the active controller's driver state."""
    leader = _active_controller(state)
    return leader.driver.state.name if leader is not None and leader.driver is not None else NO_DRIVER


def _drivers(state: ClusterState) -> tuple:
    return tuple(c.driver.state.name if c.driver is not None else None for c in state.controllers)


class CoverageCollector:
    """Counts (kind, key) over a run's events, from the model's side: called after each event with the
    model state and the actions the implementation took (a simulation's, or a Hypothesis machine's)."""

    def __init__(self, model: ClusterState) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self._model = model
        self._drivers = _drivers(model)
        self._state = state_key(model)

    def __call__(self, model: ClusterState, traces) -> None:
        counts = self.counts
        for taken in traces:
            counts["action", action_key(taken)] += 1
            fault = FAULTS.get(type(taken).__name__)
            if isinstance(taken, ExpireSession) and not _owner_alive(self._model, taken.session):
                fault = None  # a dead process's session timing out heals; it breaks nothing
            if fault is not None:  # where the driver was when it struck: the state before the step
                counts["fault_at", f"{driver_step(self._model)}|{fault}"] += 1
        if model is not self._model:  # a stutter leaves the model state as it was
            drivers = _drivers(model)
            for before, after in zip(self._drivers, drivers):
                if before is not None and after is not None and before != after:
                    counts["driver_transition", f"{before}->{after}"] += 1
            self._model, self._drivers, self._state = model, drivers, state_key(model)
        counts["state", self._state] += 1


def coverage_signature(keys) -> str:
    """A short hex digest of the sorted (kind, key) pairs a run reached."""
    text = "\n".join(f"{kind}:{key}" for kind, key in sorted(keys))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


# ---- one seed --------------------------------------------------------------------------------

@dataclass
class SeedRun:
    seed: int
    runbook: str
    record: list[SimStep]
    seconds: float
    ended_at: float  # the wall clock
    progress: str
    findings: tuple[str, ...]
    disagreement: Disagreement | None  # a ``properties.progress.Stall`` too
    coverage: Counter = field(default_factory=Counter)
    faults: str = ""  # the run's own mix (under swarm testing each run draws one)
    rolled_back: bool = False  # the rollback runbook's last step (the quorum's znodes deleted) was taken
    aims: tuple[str, ...] = ()  # the faults it aimed at driver states (``properties.steering``)
    handover: Handover | None = None  # where its fault window ended (None: it ended before)
    config: str = ""  # the configuration drawn for it (``impl.sim.scenarios``), or "" (the scope as named)


def run_seed(plan: Plan, seed: int, coverage: bool = True, aims: tuple[str, ...] = ()) -> SeedRun:
    """One seeded simulation of the plan, checked against the plan's model variant: its fault window (with
    ``aims``), then its quiet continuation; stops at the first disagreement or stall."""
    from properties.steering import parse_aims

    bugs, variant = plan.seeded_bugs
    runbook = plan.runbook_of(seed)
    faults = plan.faults_of(seed)
    scope = scenario(plan.scope_of(seed))
    start = time.perf_counter()
    try:
        sim = checked_simulation(scope, seed, faults, bugs=bugs, variant=variant, runbook=runbook,
                                 aims=parse_aims(aims))
    except Disagreement as d:  # a warm scope's warm-up already disagreed: no simulated event yet
        return SeedRun(seed, runbook, [], time.perf_counter() - start, time.time(), "none", (), d,
                       faults=faults.describe(), aims=aims, config=_config(scope))
    diff = sim.checker
    assert isinstance(diff, Differential)
    decisions.TAKEN.clear()  # the warm-up's decisions are every run's: count this run's own
    collector = CoverageCollector(diff.model) if coverage else None
    monitor = ProgressMonitor() if plan.quiet_steps else None
    cluster = diff.cluster

    def cover(_sim, _action, traces) -> None:
        collector(diff.model, traces)

    def observe(_sim, _action, traces) -> None:
        if collector is not None:
            collector(diff.model, traces)
        monitor.observe(diff.model, cluster.now)

    sim.on_event = observe if monitor is not None else cover if collector is not None else None
    disagreement = None
    handover = None
    last = sim  # the simulation that ran the last event: the fault window's, or the quiet continuation
    try:
        for _ in range(plan.fault_window(seed) if monitor is not None else plan.steps):
            if sim.step() is None:
                break
        if monitor is not None and len(sim.record) < plan.steps:
            handover = Handover(len(sim.record), sim.operator(), plan.steps - len(sim.record))
            last = quiet_continuation(scope, seed, diff, runbook, handover, monitor,
                                      cover if collector is not None else None)
            run_quietly(last, diff, handover.events, monitor)
    except Disagreement as d:  # caught here, not in Simulation.run, to keep its structured fields
        disagreement = d
    outcome = last.run(0)  # no further event: the outcome (progress, findings) as far as the run got
    record = sim.record if last is sim else sim.record + last.record
    counts = collector.counts if collector else Counter()
    if collector is not None:
        for (name, taken), n in decisions.TAKEN.items():
            counts["decision", f"{name}={taken}"] += n
        for goal, n in (monitor.met if monitor is not None else {}).items():
            counts["progress", goal] += n
    return SeedRun(seed, runbook, record, time.perf_counter() - start, time.time(), outcome.progress,
                   outcome.findings, disagreement, counts, sim.faults.describe(), outcome.rolled_back, aims, handover,
                   _config(scope))


def _config(scope) -> str:
    """A drawn scope's configuration (its name after ``@``); "" for a scope run as named."""
    return scope.name.partition("@")[2]
