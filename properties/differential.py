"""Differential testing: the implementation and the model, driven with the same steps, must agree.

Rules:
- ``Differential(scope)`` starts both from the scope's cold start and replays the scope's
  warm-up (``model.scopes.warm_up``) through both, checking agreement at every step, so the
  implementation is never put into a state by hand.
- ``apply(action)`` performs ``action`` on the implementation (``impl.cluster.Cluster.perform``),
  steps the model with the actions the implementation says it took (its traces), and then
  requires ``abstract(impl) == model`` on everything a cluster holds (``impl.refinement``).
  Three ways to disagree, each a ``Disagreement`` with a readable report:
  - the implementation took a step the model does not allow there;
  - the implementation refused a step (no trace) that the model takes, with a change (``strict``:
    when the model chose the step; the simulator's own choices may be refused by a partition);
  - after the step, the abstracted implementation differs from the model (field by field), or
    the KIP-866 metrics its processes report (``impl.metrics.cluster_metrics``) differ from the
    model's (``model.metrics.metrics``).
- The model's invariants are checked on the abstracted implementation state after every step
  (with the model's history), so a divergence also names the property it breaks; properties a
  scope reports as findings about the seeds (``Scope.findings``) are not counted.
- The model-independent properties (``model.end_to_end_invariants``) are evaluated on the
  implementation's own state, not the model's: its abstraction, which maps the values they read
  (znodes, Raft logs and high watermarks, broker caches, messages), with observations the
  implementation's run made (``model.observations.observe`` over its states and traces). Where the
  model has no clock, the implementation's run has one: in a simulation (``strict`` off), that a
  broker's heartbeats went unheard for a session timeout is read from the heartbeats its
  controllers answered (``Cluster.on_rpc``) and the time; in a walk, where the model's environment
  chose the timeout as a fault, from the model's record of it. So a mistake the model and the
  implementation share, which makes them agree, still breaks the property it breaks.
- ``checked_simulation`` hands a simulation (``impl.sim.simulator``) a Differential as its checker,
  its budgets unbounded and refusals allowed (a partition or a timer may refuse a step): the
  simulator's run, every event checked.
- ``walk(scope, seed, steps)`` picks each step among the model's ``enabled_actions`` with
  ``random.Random(seed)``; ``DifferentialMachine`` does the same under Hypothesis, which
  shrinks a disagreement to a short list of steps.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from impl.bugs import ImplBug
from impl.cluster import Cluster
from impl.kraft.rpc import ApiError, BrokerHeartbeatRequest, BrokerRegistrationRequest
from impl.metrics import cluster_metrics
from impl.pacing import BROKER_SESSION_TIMEOUT_MS
from impl.refinement import abstract, differences, same
from impl.sim.check import CheckFailed
from impl.sim.faults import FaultMix
from impl.sim.simulator import Aim, Simulation
from model.actions import Action, DeleteControllerZNodes, SessionTimeout
from model.bugs import CORRECT, Variant
from model.invariants import violations
from model.metrics import metrics
from model.migration import Profile
from model.observations import observe
from model.scopes import Scope, cold_state, rollback_findings, warm_up
from model.state import NOTHING_OBSERVED, Budget, ClusterState
from model.step import enabled_actions, step
from model.types import BrokerId

UNBOUNDED = 10**9


def unbounded(budget: Budget) -> Budget:
    """Every perturbation allowed: the implementation, not the scope, decides what happens."""
    return Budget(**{name: UNBOUNDED for name in Budget.__slots__}).replace(
        max_lag=budget.max_lag, answer_at_commit=budget.answer_at_commit,
        heartbeats_at_commit=budget.heartbeats_at_commit)


class Disagreement(CheckFailed):
    def __init__(self, summary: str, steps: list[Action], details: list[str], broken: list[str]) -> None:
        self.summary, self.steps, self.details, self.broken = summary, steps, details, broken
        lines = [summary]
        if broken:
            lines.append("properties broken on the implementation's state: " + ", ".join(broken))
        lines += ["  " + d for d in details]
        lines.append(f"after {len(steps)} steps (the last {min(len(steps), 12)}):")
        lines += [f"  {i}. {a}" for i, a in list(enumerate(steps, 1))[-12:]]
        super().__init__("\n".join(lines))


@dataclass
class Differential:
    scope: Scope
    bugs: frozenset[ImplBug] = frozenset()
    variant: Variant = CORRECT
    port: object | None = None
    seed: int = 0
    bounded: bool = True  # after the warm-up, the model keeps the scope's budgets (walks); else unbounded
    # A refusal the model would not make is a disagreement when the model chose the step (walks);
    # when the implementation runs on its own (the simulator), a partition or a timer may refuse it.
    strict: bool = True
    # the profile whose rules the scope's warm-up is taken under (a script's own, properties.script)
    warm_profile: Profile = Profile.KIP
    steps: list[Action] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._order_checked = True
        self._metrics_of: ClusterState | None = None
        self._expected_metrics: dict = {}
        self.findings_seen: set[str] = set()  # the scope's documented findings this run showed
        self.cluster = Cluster.from_scope(self.scope, bugs=self.bugs, port=self.port, seed=self.seed)
        self._impl: ClusterState | None = None  # the implementation's state after the last step, its observations in
        self._clock = None if self.strict else HeartbeatClock(self.cluster)
        cold = cold_state(self.scope)
        self.model: ClusterState = cold.replace(budget=unbounded(self.scope.budget))
        self.findings = self.scope.expected_findings(self.variant.profile)
        self._compare("the cold start", self.model)
        _, prefix = warm_up(self.scope, self.warm_profile)
        for action in prefix:
            self.apply(action)
        if self.bounded:
            self.model = self.model.replace(budget=self.scope.budget)

    def apply(self, action: Action) -> list[Action]:
        before = self.model
        self.steps.append(action)
        traces = self.cluster.perform(action)
        state = before
        model_steps: list[tuple[ClusterState, Action, ClusterState]] = []
        for taken in traces:
            if isinstance(taken, DeleteControllerZNodes):
                # The deletion of /controller_epoch in KIP-866 §Rollback to ZK: from here on, its documented
                # findings hold whatever the scope (a campaign's rollback runbook runs in any scope).
                self.findings |= set(rollback_findings(self.variant.profile))
            nxt = step(state, taken, self.variant)
            if nxt is None:
                self._disagree(f"the implementation took {taken}, which the model does not allow here", state)
            model_steps.append((state, taken, nxt))
            state = nxt
        if not traces and self.strict:
            nxt = step(before, action, self.variant)
            if nxt is not None and not same(nxt, before):
                self._disagree(f"the implementation refused {action}, which the model takes", nxt)
        # the model's ghost keeps what the last step sent; the implementation's list covers the whole perform
        self._order_checked = len(traces) == 1
        # a stutter (no traces): the states must still agree; no step was taken, so no property is re-judged
        self._compare(f"after {action}", state, before if traces else None, traces, model_steps)
        self.model = state
        return traces

    def _compare(self, when: str, model: ClusterState, before: ClusterState | None = None,
                 traces: list[Action] | None = None,
                 model_steps: Sequence[tuple[ClusterState, Action, ClusterState]] = ()) -> None:
        action = traces[-1] if traces else None
        impl = self._abstract(model)
        if not same(impl, model) or (self._order_checked and _order(impl) != _order(model)):
            self._disagree(f"{when}: the implementation's state is not the model's", model, impl, before, action)
        if model is not self._metrics_of:  # a stutter leaves the model state as it was
            self._metrics_of, self._expected_metrics = model, metrics(model)
        reported, expected = cluster_metrics(self.cluster), self._expected_metrics
        if reported != expected:
            names = [name for name in expected if reported.get(name) != expected[name]]
            raise Disagreement(f"{when}: the implementation's metrics are not the model's: {', '.join(names)}",
                               self.steps, [f"{n}: impl {reported.get(n)!r}, model {expected[n]!r}" for n in names], [])
        previous, impl = self._impl, self._observed(impl, traces, before, model)
        self._impl = impl
        if before is not None and action is not None and previous is not None:
            # The model's properties on the model, step by step as the explorer judges them (an event the
            # implementation handles in several model steps, such as a registration that finds the old session
            # lapsed, is not one step from its first state to its last); equal, as compared above, on all they
            # read. The model-independent ones on the implementation's own state and observations.
            found = {name for state, taken, after in model_steps
                     for name in violations(state, taken, after, independent=False)}
            found |= set(violations(previous, action, impl, independent=True))
            self.findings_seen |= found & self.findings
            broken = sorted(found - self.findings)
            if broken:
                raise Disagreement(f"{when}: the implementation broke {', '.join(broken)}", self.steps, [], broken)

    def _observed(self, impl: ClusterState, traces: list[Action] | None, before: ClusterState | None,
                  model: ClusterState) -> ClusterState:
        """``impl`` with the implementation's own observations, after the step of ``traces`` (none: as they were).

        Which brokers went unheard for a session timeout: in a simulation, its clock says; in a walk, the
        model's environment chose the step, and its record of a timeout fault (``observe`` on the model's
        two states) says."""
        previous = self._impl
        if previous is None or before is None or not traces:
            observed = NOTHING_OBSERVED if previous is None else previous.ghost.observed
        else:
            if self._clock is not None:
                silenced = self._clock.silenced(previous, traces, impl)
            else:
                silenced = observe(before, traces, model).silenced
            observed = observe(previous, traces, impl, silenced)
        return impl.replace(ghost=impl.ghost.replace(observed=observed))

    def _abstract(self, model: ClusterState) -> ClusterState:
        """The implementation as a model state; the ghost's ``sent`` is the order it sent messages in."""
        impl = abstract(self.cluster, model)
        sent = tuple(self.cluster.view.message(m) for m in self.cluster.sent)
        return impl.replace(ghost=impl.ghost.replace(sent=sent))

    def _disagree(self, summary: str, model: ClusterState, impl: ClusterState | None = None,
                  before: ClusterState | None = None, action: Action | None = None) -> None:
        impl = self._abstract(model) if impl is None else impl
        broken: list[str] = []
        if before is not None and action is not None:
            try:
                broken = sorted(set(violations(before, action, impl)) - self.findings)
            except Exception as e:  # noqa: BLE001 - a state the model never builds may trip a property
                broken = [f"(properties could not be evaluated: {type(e).__name__}: {e})"]
        details = differences(impl, model)
        if _order(impl) != _order(model):
            details.append(f"sent, in order: impl {list(impl.ghost.sent)}, model {list(model.ghost.sent)}")
        raise Disagreement(summary, self.steps, details, broken)


class HeartbeatClock:
    """When each broker was last heard by each KRaft controller, from the round trips of a simulated run.

    A controller hears a broker when it answers its heartbeat or registration without an error; one that
    has just become active has heard from nobody yet and gives every broker a whole session from then
    (BrokerHeartbeatManager). A broker a controller times out is ``silenced`` when that controller had
    not heard it for broker.session.timeout.ms: what KIP-500 §Broker Metadata Management allows."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.heard: dict[tuple[int, int], int] = {}  # (controller, broker) -> when it last answered the broker
        cluster.on_rpc = self._round_trip

    def _round_trip(self, now: int, source: int, dest: int, request: object, response: object) -> None:
        if isinstance(request, BrokerHeartbeatRequest | BrokerRegistrationRequest) and getattr(
            response, "error", None
        ) is ApiError.NONE:
            self.heard[dest, request.broker_id] = now

    def silenced(self, before: ClusterState, traces: list[Action], after: ClusterState) -> frozenset[BrokerId]:
        now = self.cluster.now
        for was, c in zip(before.controllers, after.controllers):
            if c.active and not was.active:
                for b in after.brokers:
                    self.heard[c.id, b.id] = now
        never = -BROKER_SESSION_TIMEOUT_MS
        return frozenset(
            t.broker for t in traces
            if isinstance(t, SessionTimeout)
            and now - self.heard.get((t.controller, t.broker), never) >= BROKER_SESSION_TIMEOUT_MS
        )


def _order(state: ClusterState) -> tuple:
    """The messages a step sent, in order, each once (a set network holds one copy of identical messages)."""
    return tuple(dict.fromkeys(state.ghost.sent))


def checked_simulation(scope: Scope, seed: int, faults: FaultMix, bugs: frozenset[ImplBug] = frozenset(),
                       variant: Variant = CORRECT, port: object | None = None, runbook: str = "finalize",
                       aims: tuple[Aim, ...] = ()) -> Simulation:
    """A simulation of ``scope`` whose every event is checked against the model (``variant``)."""
    checker = Differential(scope, bugs=bugs, variant=variant, port=port, seed=seed, bounded=False, strict=False)
    return Simulation(scope, seed, faults, checker=checker, runbook=runbook, aims=aims)


def walk(scope: Scope, seed: int, steps: int, bugs: frozenset[ImplBug] = frozenset(),
         variant: Variant = CORRECT, swarm: bool = False) -> Differential:
    """A seeded random walk over the model's enabled actions, each applied to both; raises Disagreement.

    ``swarm`` (swarm testing): the walk keeps each kind of action with probability 1/2 and takes
    the others only when none of its kinds is enabled, so long runs of a few kinds (a zombie
    controller's race, a lost election) become likely.
    """
    rng = random.Random(seed)
    diff = Differential(scope, bugs=bugs, variant=variant, seed=seed)
    kept: set[type] | None = None
    if swarm:
        from model.actions import ACTION_TYPES

        kept = {kind for kind in sorted(ACTION_TYPES, key=lambda k: k.__name__) if rng.random() < 0.5}
    for _ in range(steps):
        actions = enabled_actions(diff.model, scope, variant)
        if not actions:
            break
        if kept is not None:
            actions = [a for a in actions if type(a) in kept] or actions
        diff.apply(rng.choice(actions))
    return diff


# ---- the Hypothesis machine -------------------------------------------------------------------


def differential_machine(scope: Scope, bugs: frozenset[ImplBug] = frozenset()):
    """A RuleBasedStateMachine that drives the implementation and the model with the same steps.

    Each rule draws one of the model's enabled actions by index, so Hypothesis shrinks a
    disagreement to the shortest list of steps it can find (printed by the Disagreement).
    """
    from hypothesis import strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, rule

    class DifferentialMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.diff = Differential(scope, bugs=bugs)
            self.enabled = enabled_actions(self.diff.model, scope)

        @rule(data=st.data())
        def take_a_step(self, data) -> None:
            if not self.enabled:  # a dead end of the scope's bounds: nothing left to compare
                return
            index = data.draw(st.integers(0, len(self.enabled) - 1), label="action index")
            action = self.enabled[index]
            self.diff.apply(action)
            self.enabled = enabled_actions(self.diff.model, scope)

    DifferentialMachine.__name__ = f"DifferentialMachine[{scope.name}]"
    return DifferentialMachine
