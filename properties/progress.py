"""Progress in campaigns: once a run's faults stop, the cluster must make the progress its runbook allows.

The goals are the registry's EVENTUALLY properties (``when ~> goal``), the very ones
``properties.liveness`` checks on the explorer's state graph (``eventually_properties``): the
same predicates, read on the model state the differential check keeps in step with the
implementation. The explorer says "eventually" under weak fairness; a run is finite, so here each
goal has a bound (``BOUNDS_MS``, simulated time): an obligation still open that long after the
faults stopped is a violation, a ``Stall``, shrunk and replayed like any other counterexample.

How a run is checked (``properties.runs.run_seed``):
- A run has a fault window (``Plan.fault_window``); after it the run goes on as a quiet
  continuation (``impl.sim.simulator.Simulation.quiet``): no fault, no spontaneous perturbation,
  only healing, the protocol's own steps and the operator's runbook. The continuation is a fresh
  simulation of the cluster, the seed, the runbook and the operator's memory at the hand-over
  (``Handover``), so a replay of the events before it starts it again the same: a stall's
  counterexample is the events of its fault window, then the continuation, regenerated.
- ``ProgressMonitor`` follows every goal over the whole run, on each new model state: an
  obligation opens where ``when`` holds and the goal does not, and closes where the goal holds.
  Its clock starts once the continuation has healed everything (``Simulation.healed``): every
  obligation open then, or opened later, must close within its goal's bound, measured from then
  or from when it opened. A continuation with nothing left to do while an obligation is open
  stutters there forever: a stall too.
- A continuation that runs out of events before a bound has passed says nothing about that goal.

Why continuations and not the run's own last events: a shrunk counterexample must still be a run
that ends its faults and then stalls. A replay of recorded events shows a stall on any
implementation once the step that would have made progress is left out; a continuation offers
what the implementation (with its bug, or without it) does next, so the correct implementation
replays the same counterexample clean (``tests/test_pinned_regressions.py``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from impl.sim.simulator import Operator, Simulation
from model.registry import Property
from model.scopes import Scope
from model.state import ClusterState
from properties.differential import Differential, Disagreement
from properties.liveness import eventually_properties

# How long (simulated ms) each goal may stay open after the faults stopped: about five times the longest the
# correct implementation took in a quiet continuation, and several of the protocol's own timeouts (a session of
# a dead process times out after 6 s, broker.session.timeout.ms is 9 s).
DEFAULT_BOUND_MS = 30_000
# Measured on the correct implementation, 60 seeds of the default campaign: the longest wait was 12.3 s for
# MigrationReachesDualWriteWithoutFaults (an election, the driver's waits, the initial migration's transaction),
# 3.9 s for DriverLeavesWaitForBrokersWhenReady, 1.8 s for LiveFencedBrokerEventuallyUnfenced, under 0.2 s for
# the others.
BOUNDS_MS: dict[str, int] = {"MigrationReachesDualWriteWithoutFaults": 60_000}


@dataclass(frozen=True)
class Goal:
    """A progress goal: an EVENTUALLY property of the registry, and how long it may stay open."""

    prop: Property
    bound_ms: int

    @property
    def name(self) -> str:
        return self.prop.name

    @property
    def signature(self) -> str:
        """How a stall of this goal is grouped and named (``properties.shrink.signature_of``)."""
        return f"{self.name}{STALLED}{self.bound_ms / 1000:g}s"

    def opens(self, state: ClusterState) -> bool:
        when = self.prop.when
        return (when is None or when(state)) and not self.prop.predicate(state)

    def met(self, state: ClusterState) -> bool:
        return self.prop.predicate(state)


STALLED = ":stalled>"  # in a stall's signature, between the goal's name and its bound


# Goals that only kafka-3.9's rules open: a freedom of that profile alone (LeaderAndIsrFailsInBroker), with no twin in
# the implementation, which follows kip. A run of the implementation never opens them; liveness on the explorer's
# graph checks them (kafka-3.9 violates FailedLeaderAndIsrIsRepaired in scope failed-leader-and-isr).
KAFKA_3_9_ONLY_GOALS = frozenset({"FailedLeaderAndIsrIsRepaired"})


def progress_goals() -> tuple[Goal, ...]:
    """Every EVENTUALLY property of the registry that a run of the implementation may open, with its bound."""
    return tuple(Goal(p, BOUNDS_MS.get(p.name, DEFAULT_BOUND_MS)) for p in eventually_properties()
                 if p.name not in KAFKA_3_9_ONLY_GOALS)


def goal_of(signature: str) -> str | None:
    """The goal a stall's signature names, or None when the signature is not a stall's."""
    name, sep, _ = signature.partition(STALLED)
    return name if sep else None


class Stall(Disagreement):
    """A goal still open ``bound_ms`` after the faults stopped (or when the cluster had nothing left to do)."""

    def __init__(self, goal: Goal, since: int, now: int, steps: list, details: list[str], stuck: bool = False) -> None:
        self.goal, self.since, self.now, self.stuck = goal, since, now, stuck
        how = "the cluster has nothing left to do" if stuck else f"{(now - since) / 1000:g} s later"
        summary = (f"no progress: {goal.name} open since {since} ms and still at {now} ms ({how}; bound "
                   f"{goal.bound_ms / 1000:g} s after the faults stopped): {goal.prop.meaning}")
        super().__init__(summary, steps, details, [])

    @property
    def signature(self) -> str:
        return self.goal.signature


class ProgressMonitor:
    """Each goal's open obligation over a run's model states; its clock runs once the faults are healed."""

    def __init__(self, goals: tuple[Goal, ...] | None = None) -> None:
        self.goals = progress_goals() if goals is None else goals
        self.open: dict[str, int | None] = {g.name: None for g in self.goals}  # goal -> since (ms), or None
        self.started: int | None = None  # when the faults were over and healed (ms)
        self.met: Counter[str] = Counter()  # obligations met once the clock ran, by goal (a run's coverage)
        self._state: ClusterState | None = None

    def observe(self, state: ClusterState, now: int) -> Goal | None:
        """After an event: opens and closes obligations on a new state; once started, the first goal open
        longer than its bound."""
        if state is not self._state:  # a stutter changes no obligation
            self._state = state
            for g in self.goals:
                if self.open[g.name] is None:
                    if g.opens(state):
                        self.open[g.name] = now
                elif g.met(state):
                    self.open[g.name] = None
                    if self.started is not None:
                        self.met[g.name] += 1
        if self.started is None:
            return None
        for g in self.goals:
            since = self.open[g.name]
            if since is not None and now - max(since, self.started) >= g.bound_ms:
                return g
        return None

    def start(self, now: int) -> None:
        """The faults are over and healed: from now on, bounds count."""
        self.started = now

    def stuck(self) -> Goal | None:
        """The first open goal, when the cluster has nothing left to do (so it stays open forever)."""
        if self.started is None:
            return None
        return next((g for g in self.goals if self.open[g.name] is not None), None)

    def stall(self, goal: Goal, diff: Differential, now: int, stuck: bool = False) -> Stall:
        from properties.runs import state_key

        since = max(self.open[goal.name] or 0, self.started or 0)
        return Stall(goal, since, now, diff.steps, [f"the cluster at {now} ms: {state_key(diff.model)}"], stuck)


@dataclass(frozen=True)
class Handover:
    """Where a run's fault window ended: the index of its first quiet event, the operator's memory the quiet
    continuation takes over, and how many events the continuation may take."""

    at: int
    operator: Operator
    events: int


def quiet_continuation(scope: Scope, seed: int, diff: Differential, runbook: str, handover: Handover,
                       monitor: ProgressMonitor, on_event=None) -> Simulation:
    """The run's quiet continuation on ``diff``'s cluster, ``monitor`` told after every event (and ``on_event``
    called first); ``run_quietly`` runs it."""
    sim = Simulation.quiet(scope, seed, diff, runbook, handover.operator)
    cluster = diff.cluster
    if sim.healed():
        monitor.start(cluster.now)

    def after(s: Simulation, action, traces) -> None:
        if on_event is not None:
            on_event(s, action, traces)
        if monitor.started is None and s.healed():
            monitor.start(cluster.now)
        goal = monitor.observe(diff.model, cluster.now)
        if goal is not None:
            raise monitor.stall(goal, diff, cluster.now)

    sim.on_event = after
    return sim


def run_quietly(sim: Simulation, diff: Differential, events: int, monitor: ProgressMonitor) -> None:
    """Up to ``events`` events of a quiet continuation; raises the first Disagreement, or a ``Stall``."""
    for _ in range(events):
        if sim.step() is None:
            goal = monitor.stuck()
            if goal is not None:
                raise monitor.stall(goal, diff, diff.cluster.now, stuck=True)
            return
