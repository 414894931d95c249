"""Hypothesis's stateful testing over the model: a ``RuleBasedStateMachine`` whose steps are model actions.

``machine_class(scope, variant)`` builds the machine for one scope and one model variant.
Hypothesis then drives it: each example starts from ``initial_state(scope)``, takes up to
``stateful_step_count`` steps, and shrinks any failure to a short program.

Rules:
- One rule per action type (``deliver``, ``crash_broker``, ...). A rule's precondition is that
  some action of its type is enabled (``model.successors``, computed once per state) and that
  this example lets that type run; the rule draws which enabled action to take with
  ``st.sampled_from``. ``wait`` is the one rule that is not a model action: a stuttering step,
  valid only when nothing the example lets run is enabled (budgets spent, network empty), since
  Hypothesis must always have some rule to run. Waits are not part of the trace.
- Every step is checked: ``violations(before, action, after)`` covers every ALWAYS property on
  the new state and every TRANSITION property on the step (the initial state is checked too).
  A violation raises ``InvariantViolation``, one subclass per property, so Hypothesis keeps
  distinct broken properties apart as distinct bugs and shrinks each one on its own. Its
  message names the property and shows the actions so far as a table.
- On the final (shrunk) failing run, the actions are also saved as a replayable trace file
  (``properties.traces``) under ``$KRAFTCHECK_TRACE_DIR``, else ``.hypothesis/kraftcheck-traces/``,
  and the message gives its path.

Swarm testing. Each example first runs ``choose_swarm``, which draws:
- ``switched_off``: a subset of the perturbation kinds (``model.actions.PERTURBATIONS``: crashes,
  stops, expiries, outages, drops, IBP changes, UpdateFeatures, ControlledShutdown) that this
  example never takes. Protocol and healing kinds are never switched off by the machine, so
  the cluster can always recover and reach the deep states the witnesses are about.
- ``calm_steps``: how many protocol or healing steps must follow a perturbation before the
  next one may happen. Hypothesis picks uniformly among the rules that are valid, so this is
  the weight that lets a cluster settle between failures (fail over, re-register, deliver)
  instead of being knocked over again at once.
Both shrink towards the least restrictive choice (nothing switched off, no calm), as
Hypothesis's own swarm flags do. Hypothesis also switches random rules off per example by
itself (its built-in swarm testing over rules); the two compose.

Statistics: at the end of each example, ``event()`` records each SOMETIMES witness it reached
(``witnessed(before, action, after)``) and how many model steps it took (bucketed), shown by
``--hypothesis-show-statistics``; the class's ``coverage`` keeps the same counts for tests and
the benchmark.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test

from model import CORRECT, SCOPES, Scope, Variant, initial_state, successors
from model.actions import ACTION_TYPES, PERTURBATIONS, Action
from model.invariants import BY_NAME, violations, witnessed
from model.state import ClusterState
from properties import traces

TRACE_DIR_ENV = "KRAFTCHECK_TRACE_DIR"
DEFAULT_TRACE_DIR = Path(".hypothesis") / "kraftcheck-traces"

SWITCHABLE_KINDS: tuple[type, ...] = tuple(k for k in ACTION_TYPES if k in PERTURBATIONS)
CALM_CHOICES = (0, 1, 2, 4, 8)  # shrinks towards 0: perturb whenever enabled
_OPTIONS_CACHE_SIZE = 50_000  # states per machine class; cleared when full


def rule_name(kind: type) -> str:
    """``ElectPartitionLeader`` -> ``elect_partition_leader``: the rule Hypothesis prints."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind.__name__).lower()


# ---- failures --------------------------------------------------------------------------------


class InvariantViolation(AssertionError):
    """A step broke a property; subclassed per property (see ``violation_type``)."""

    invariants: tuple[str, ...] = ()
    trace: traces.Trace | None = None
    trace_path: Path | None = None


_VIOLATION_TYPES: dict[str, type[InvariantViolation]] = {}


def violation_type(invariant: str) -> type[InvariantViolation]:
    """The exception class for ``invariant``, named after it (Hypothesis tells bugs apart by type)."""
    if invariant not in _VIOLATION_TYPES:
        _VIOLATION_TYPES[invariant] = type(invariant, (InvariantViolation,), {"__module__": __name__})
    return _VIOLATION_TYPES[invariant]


def default_trace_dir() -> Path:
    """Where failing runs save their traces unless the machine class names a directory."""
    return Path(os.environ.get(TRACE_DIR_ENV) or DEFAULT_TRACE_DIR)


def _is_final_run() -> bool:
    """Hypothesis is replaying the minimal failing example it will report (not shrinking)."""
    try:
        return current_build_context().is_final
    except InvalidArgument:  # driven by hand, outside Hypothesis: every run is the one reported
        return True


# ---- statistics ------------------------------------------------------------------------------


_DEPTH_BUCKETS = ((0, 0), (1, 4), (5, 9), (10, 19), (20, 29), (30, 49), (50, 99))


def depth_bucket(steps: int) -> str:
    """``steps`` as a coarse range, so the statistics show a distribution rather than every count."""
    for low, high in _DEPTH_BUCKETS:
        if low <= steps <= high:
            return str(low) if low == high else f"{low}-{high}"
    return "100+"


@dataclass
class Coverage:
    """What the examples a machine class ran reached (shrinking runs included)."""

    examples: int = 0
    steps: int = 0
    deepest: int = 0
    quiesced: int = 0  # examples that went quiet: nothing they let run was enabled any more
    witnesses: Counter = field(default_factory=Counter)  # witness -> examples that reached it
    cache_hits: int = 0
    cache_misses: int = 0

    def record(self, steps: int, reached: set[str], quiesced: bool) -> None:
        self.examples += 1
        self.steps += steps
        self.deepest = max(self.deepest, steps)
        self.quiesced += quiesced
        self.witnesses.update(reached)


# ---- the machine -----------------------------------------------------------------------------


class Choices:
    """The enabled actions of one type in one state, each with its next state."""

    __slots__ = ("next_state", "_strategy")

    def __init__(self) -> None:
        self.next_state: dict[Action, ClusterState] = {}
        self._strategy = None

    @property
    def strategy(self):
        # Built once per cached state: a new sampled_from per step cost more than the model step.
        if self._strategy is None:
            self._strategy = st.sampled_from(tuple(self.next_state))
        return self._strategy


Options = dict[type, Choices]  # action type -> its enabled actions; types with none are absent


def _options(state: ClusterState, scope: Scope, variant: Variant) -> Options:
    """Enabled actions grouped by type, in the model's fixed order."""
    grouped: Options = {}
    for action, after in successors(state, scope, variant):
        kind = type(action)
        if kind not in grouped:
            grouped[kind] = Choices()
        grouped[kind].next_state[action] = after
    return grouped


class _EveryRuleOn:
    """Stands in for Hypothesis's per-example rule flags: every rule stays switched on."""

    def is_enabled(self, name: str) -> bool:
        return True


_EVERY_RULE_ON = _EveryRuleOn()


class ModelMachine(RuleBasedStateMachine):
    """The model under Hypothesis; ``machine_class`` makes one subclass per scope and variant."""

    scope: Scope
    variant: Variant = CORRECT
    trace_dir: Path | None = None  # None: $KRAFTCHECK_TRACE_DIR or .hypothesis/kraftcheck-traces
    coverage: Coverage
    _start: ClusterState
    _start_violations: tuple[str, ...]
    _options_cache: dict

    def __init__(self) -> None:
        super().__init__()
        # Hypothesis's own swarm switches random rules off for a whole example. Here a rule is
        # valid only while its kind is enabled, often for one or two kinds at a time, so that
        # swarm left no rule to run in most examples and Hypothesis aborted them (measured on
        # `bounce`: 452 aborted test cases for 200 run, and a third of those run shorter than
        # 5 steps). ``choose_swarm`` does the switching instead, knowing which kinds may go.
        # This reaches into RuleStrategy (Hypothesis 6.170); tests/test_machines.py fails if
        # examples start being aborted again.
        rules = getattr(self, "_rules_strategy", None)
        if rules is not None and hasattr(rules, "enabled_rules_strategy"):
            rules.enabled_rules_strategy = st.just(_EVERY_RULE_ON)
        self.state = self._start
        self.options = self._options_of(self._start)
        self.actions: list[Action] = []
        self.switched_off: frozenset[type] = frozenset()
        self.calm_steps = 0
        self.calm = 0  # protocol or healing steps since the last perturbation
        self.waited = False
        self.reached: set[str] = set()
        # Findings the scope documents for this profile (flaws of a seed's text) are reported by
        # the explorer and pinned by the tests; here they would only hide everything else.
        self.expected = self.scope.expected_findings(self.variant.profile)
        self.tainted = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(after {len(self.actions)} actions)"

    @initialize(
        switched_off=st.frozensets(st.sampled_from([k.__name__ for k in SWITCHABLE_KINDS])),
        calm_steps=st.sampled_from(CALM_CHOICES),
    )
    def choose_swarm(self, switched_off: frozenset[str], calm_steps: int) -> None:
        self.switched_off = frozenset(k for k in SWITCHABLE_KINDS if k.__name__ in switched_off)
        self.calm_steps = calm_steps
        if self._start_violations:
            self._fail(list(self._start_violations))

    def allows(self, kind: type) -> bool:
        """An action of ``kind`` is enabled now and this example lets ``kind`` run now."""
        if kind not in self.options:
            return False
        return kind not in PERTURBATIONS or (kind not in self.switched_off and self.calm >= self.calm_steps)

    def is_quiet(self) -> bool:
        return not any(self.allows(kind) for kind in self.options)

    @precondition(is_quiet)
    @rule()
    def wait(self) -> None:
        """Nothing this example lets run is enabled: time passes, the state stays (a stutter)."""
        self.waited = True
        self.calm += 1

    def take(self, action: Action, after: ClusterState) -> None:
        before = self.state
        self.actions.append(action)
        self.reached.update(witnessed(before, action, after))
        broken = violations(before, action, after)
        if any(name in self.expected for name in broken):
            self.tainted = True  # what follows a documented finding is that finding's consequence
        if broken and not self.tainted:
            self._fail(broken)
        self.state = after
        self.options = self._options_of(after)
        self.calm = 0 if type(action) in PERTURBATIONS else self.calm + 1

    def _fail(self, broken: list[str]) -> None:
        trace = traces.Trace(
            self.scope.name, tuple(self.actions), self.variant.bugs, broken[0], profile=self.variant.profile
        )
        rows = [(n, a, "") for n, a in enumerate(self.actions[:-1], 1)]
        if self.actions:
            rows.append((len(self.actions), self.actions[-1], ", ".join(broken)))
        where = f"at step {len(self.actions)}" if self.actions else "in the initial state"
        bugs = ", ".join(sorted(b.value for b in self.variant.bugs)) or "none"
        lines = [
            f"{broken[0]} broken {where} (scope {self.scope.name}, seeded bugs: {bugs})",
            f"  {BY_NAME[broken[0]].meaning}",
        ]
        if len(broken) > 1:
            lines.append(f"  also broken: {', '.join(broken[1:])}")
        lines.append(traces.format_table(rows))
        path = None
        if _is_final_run():
            directory = self.trace_dir or default_trace_dir()
            label = "+".join(sorted(b.value for b in self.variant.bugs)) or "correct"
            if self.variant.profile is not CORRECT.profile:
                label += f"@{self.variant.profile.value}"
            path = traces.save_trace(directory / f"{self.scope.name}--{label}--{broken[0]}.json", trace)
            lines.append(f"replayable trace: {path}")
        error = violation_type(broken[0])("\n".join(lines))
        error.invariants, error.trace, error.trace_path = tuple(broken), trace, path
        raise error

    @classmethod
    def _options_of(cls, state: ClusterState) -> Options:
        # Examples share prefixes (Hypothesis mutates and shrinks earlier examples), so the
        # same states come back often; ``successors`` is most of a step's cost. The ghost is
        # part of the key: it is left out of state equality, yet the next states carry it on.
        key = (state, state.ghost)
        cache = cls._options_cache
        found = cache.get(key)
        if found is None:
            if len(cache) >= _OPTIONS_CACHE_SIZE:
                cache.clear()
            found = cache[key] = _options(state, cls.scope, cls.variant)
            cls.coverage.cache_misses += 1
        else:
            cls.coverage.cache_hits += 1
        return found

    def teardown(self) -> None:
        steps = len(self.actions)
        event(f"depth {depth_bucket(steps)}")
        for name in sorted(self.reached):
            event(f"witness {name}")
        self.coverage.record(steps, self.reached, self.waited)


def _add_kind_rule(kind: type) -> None:
    def allowed(self: ModelMachine) -> bool:
        return self.allows(kind)

    allowed.__name__ = f"{kind.__name__}_is_enabled"

    def take_one(self: ModelMachine, data) -> None:
        choices = self.options[kind]
        action = data.draw(choices.strategy, label=kind.__name__)
        self.take(action, choices.next_state[action])

    take_one.__name__ = take_one.__qualname__ = rule_name(kind)
    take_one.__doc__ = f"Take one enabled {kind.__name__}: {kind.__doc__.splitlines()[0] if kind.__doc__ else ''}"
    setattr(ModelMachine, take_one.__name__, precondition(allowed)(rule(data=st.data())(take_one)))


for _kind in ACTION_TYPES:
    _add_kind_rule(_kind)


def machine_class(
    scope: str | Scope, variant: Variant = CORRECT, *, trace_dir: str | os.PathLike | None = None
) -> type[ModelMachine]:
    """A fresh machine class for ``scope`` and ``variant`` (with its own ``coverage``).

    Its name is stable (``ModelMachine_bounce__correct``) because Hypothesis keys its example
    database on it: a failure saved by one run is replayed first by the next.
    """
    if isinstance(scope, str):
        scope = SCOPES[scope]
    label = "__".join(sorted(b.value for b in variant.bugs)) or "correct"
    if variant.profile is not CORRECT.profile:
        label += f"__{variant.profile.value}"
    name = re.sub(r"\W", "_", f"ModelMachine_{scope.name}__{label}")
    start = initial_state(scope)
    return type(
        name,
        (ModelMachine,),
        {
            "scope": scope,
            "variant": variant,
            "trace_dir": None if trace_dir is None else Path(trace_dir),
            "coverage": Coverage(),
            "_start": start,
            "_start_violations": tuple(violations(None, None, start)),
            "_options_cache": {},
            "__module__": __name__,
        },
    )


def run_machine(machine: type[ModelMachine], **overrides) -> None:
    """Run ``machine`` under the current settings profile, with ``overrides`` on top."""
    run_state_machine_as_test(machine, settings=settings(settings.default, **overrides))
