"""Hypothesis's stateful testing over the model: a ``RuleBasedStateMachine`` whose steps are model actions.

``machine_class(scope, variant)`` builds the machine for one scope and one model variant.
Hypothesis then drives it: each example starts from ``initial_state(scope)``, takes up to
``stateful_step_count`` steps, and shrinks any failure to a short program.

Rules:
- One rule per action type (``deliver``, ``crash_broker``, ...), whose argument is the action
  to take. A rule's precondition is that some action of its type is enabled and that this
  example lets that type run; the argument is one of the type's enabled actions, uniformly.
  ``wait`` is the one rule that is not a model action: a stuttering step, valid only when
  nothing the example lets run is enabled (budgets spent, network empty), since Hypothesis must
  always have some rule to run. Waits are not part of the trace.
- What is enabled is found lazily and kept per state (``Options``): the model's candidate
  actions grouped by type, ``step`` asked about a type's candidates only as far as the question
  needs (is one enabled? which are?), giving the enabled actions of ``model.successors`` in its
  order. States come back often (Hypothesis mutates and shrinks earlier examples), so options
  are cached per state, and each step taken keeps a link to its next state's options.
- How a step is drawn (``StepStrategy``, in place of Hypothesis's own rule selection, which
  called every rule's precondition on every step and cost more than the model): the same
  choices as Hypothesis's (a filtered ``sampled_from`` over the rules: each valid rule equally
  likely; then the action, uniformly), with the valid rules read from the state's options.
- Every step is checked: ``violations(before, action, after)`` covers every ALWAYS property on
  the new state and every TRANSITION property on the step (the initial state is checked too).
  The verdict and the witnesses of a step are kept with the state's cached options, so a step
  taken again (examples share prefixes) is not checked again: it is the same step, from the
  same state (ghost included) to the same next state.
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
Hypothesis's own swarm flags do. Hypothesis's own switching of rules per example is left out
(see ``StepStrategy``): with rules valid only while their kind is enabled, it left most
examples with no rule to run.

Statistics: at the end of each example, ``event()`` records each SOMETIMES witness it reached
(``witnessed(before, action, after)``) and how many model steps it took (bucketed), shown by
``--hypothesis-show-statistics``; the class's ``coverage`` keeps the same counts for tests and
the benchmark.

How this fits with the rest: docs/design.md §8.
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
from hypothesis.internal.conjecture.utils import calc_label_from_name
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)
from hypothesis.strategies import SearchStrategy

from model import CORRECT, SCOPES, Scope, Variant, initial_state, step
from model.actions import (
    ACTION_TYPES,
    PERTURBATIONS,
    Action,
    AddPartitions,
    AlterPartition,
    AlterPartitionReassignments,
    ApiPartitionReassignment,
    BrokerZkServerCatchesUp,
    BrokerZkServerLags,
    CreatePartitions,
    DeleteTopics,
    DeliverHeartbeat,
    DualWriteReplyLost,
    DualWriteSessionExpired,
    HeartbeatResponseLost,
    HoldHeartbeat,
    LeaderAndIsrFailsInBroker,
    MarkTopicDeletion,
    ProcessPartitionModifications,
    PublishMetadataChange,
    RegistrationResponseLost,
    TopicDeletion,
    ZkServerLags,
)
from model.invariants import BY_NAME, violations, witnessed
from model.state import ClusterState
from model.step import candidate_actions
from properties import traces

TRACE_DIR_ENV = "KRAFTCHECK_TRACE_DIR"
# The scopes the test suite runs the correct model's machine in (``run_clean`` in tests/test_machines.py;
# tests/test_catalogue.py checks the two agree), which the invariant catalogue lists under "Hypothesis".
CLEAN_RUN_SCOPES = ("fencing", "bounce", "leader-bounce", "features", "cluster", "migration", "lifecycle")
DEFAULT_TRACE_DIR = Path(".hypothesis") / "kraftcheck-traces"

# Lost responses (``RegistrationResponseLost``, ``HeartbeatResponseLost``), partition creations (``AddPartitions``,
# ``ProcessPartitionModifications``, ``CreatePartitions``), reassignments (``ApiPartitionReassignment``,
# ``AlterPartitionReassignments``, ``AlterPartition``), topic deletions (``MarkTopicDeletion``, ``TopicDeletion``,
# ``DeleteTopics``),
# brokers' lagging servers (``BrokerZkServerLags``, ``BrokerZkServerCatchesUp``), lost dual-write replies
# (``DualWriteReplyLost``), held heartbeats (``HoldHeartbeat``, ``DeliverHeartbeat``) and LeaderAndIsrs failing
# inside a broker (``LeaderAndIsrFailsInBroker``) get no rule: only scopes ``lost-responses``, ``create-partitions``,
# ``reassignment`` and ``reassignment-move``, ``delete-topics``, ``zk-lag``, ``dual-write-resend``,
# ``held-heartbeats`` and ``failed-leader-and-isr`` budget them, which exploration covers whole, and leaving them out
# keeps every other scope's examples as they were.
NO_RULE_KINDS: frozenset[type] = frozenset({RegistrationResponseLost, HeartbeatResponseLost, AddPartitions,
                                            ProcessPartitionModifications, CreatePartitions,
                                            ApiPartitionReassignment, AlterPartitionReassignments, AlterPartition,
                                            DeleteTopics,
                                            MarkTopicDeletion, TopicDeletion, BrokerZkServerLags,
                                            BrokerZkServerCatchesUp, DualWriteReplyLost, HoldHeartbeat,
                                            DeliverHeartbeat, LeaderAndIsrFailsInBroker})
MACHINE_KINDS: tuple[type, ...] = tuple(k for k in ACTION_TYPES if k not in NO_RULE_KINDS)
# (Not ZkServerLags, PublishMetadataChange nor DualWriteSessionExpired: their own budgets, 0 outside scopes stale-reads,
# event-queue and dual-write-failure, switch them off, and the machines draw as before.)
SWITCHABLE_KINDS: tuple[type, ...] = tuple(k for k in MACHINE_KINDS if k in PERTURBATIONS
                                           and k not in (ZkServerLags, PublishMetadataChange, DualWriteSessionExpired))
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


Verdict = tuple[tuple[str, ...], tuple[str, ...]]  # (properties broken, witnesses reached) by one step


_NONE_LEFT: list[Action] = []  # shared by every Choices with no candidate left to ask about; never mutated


class Taken:
    """A step the machine has taken: its next state, its verdict, and the next state's options."""

    __slots__ = ("after", "verdict", "options")

    def __init__(self, after: ClusterState, verdict: Verdict) -> None:
        self.after = after
        self.verdict = verdict
        self.options: Options | None = None  # looked up when the step is taken


class Choices:
    """The enabled actions of one type in one state, in the model's fixed order, with what follows.

    ``rest`` holds the type's candidates ``step`` has not been asked about yet (see ``Options``);
    ``taken[i]`` is filled when the i-th enabled action is first taken. Only the steps taken keep
    their next state: most types of most states are asked about and never taken, and keeping
    every next state kept half as many objects again for the garbage collector to walk (430,000
    against 294,000 after the cluster scope's 200 examples, when measured; its full collections
    were a quarter of the run). A step taken for the first time is computed once more instead.
    """

    __slots__ = ("rest", "actions", "taken")

    def __init__(self, action: Action, rest: list[Action]) -> None:
        self.rest = rest
        self.actions = [action]
        self.taken: list[Taken | None] | None = None  # made when the type's rule is first drawn


class Options:
    """What the machine needs of one state, worked out lazily and kept (``ModelMachine._options_of``).

    The candidate actions (``model.step.candidate_actions``) are grouped by type, and ``step`` is
    asked about a type's candidates in order, only as far as needed: up to the first enabled one
    to know whether the type's rule is valid, all of them once the rule is drawn. So the enabled
    actions are those of ``model.successors``, in its order (tests/test_machines.py checks this),
    without stepping every candidate of every state the machine passes through. A type is in
    ``pending`` until asked about, then in ``by_kind`` if some action of it is enabled, else in
    neither.
    """

    __slots__ = ("state", "variant", "pending", "by_kind", "valid", "generation")

    def __init__(self, state: ClusterState, scope: Scope, variant: Variant, generation: int) -> None:
        self.state = state
        self.variant = variant
        self.generation = generation  # the cache generation it belongs to (see ``_options_of``)
        pending: dict[type, list[Action]] = {}
        for action in candidate_actions(state, scope):
            found = pending.get(type(action))
            if found is None:
                pending[type(action)] = [action]
            else:
                found.append(action)
        self.pending = pending
        self.by_kind: dict[type, Choices] = {}
        # (switched-off kinds, perturbations allowed now) -> the valid rules' indices, in order
        self.valid: dict[tuple[frozenset, bool], tuple[int, ...]] = {}

    def kinds(self) -> list[type]:
        """The types that may have an enabled action here."""
        return [*self.by_kind, *self.pending]

    def enabled(self, kind: type) -> bool:
        """Some action of ``kind`` is enabled (``step`` asked at most up to the first that is)."""
        if kind in self.by_kind:
            return True
        candidates = self.pending.pop(kind, None)
        if candidates is None:
            return False
        for n, action in enumerate(candidates):
            if step(self.state, action, self.variant) is not None:
                self.by_kind[kind] = Choices(action, candidates[n + 1 :] or _NONE_LEFT)
                return True
        return False

    def choices(self, kind: type) -> Choices:
        """``kind``'s choices with every enabled action found (and room for the steps taken)."""
        found = self.enabled(kind)
        assert found, f"no {kind.__name__} is enabled here"
        choices = self.by_kind[kind]
        if choices.rest:
            choices.actions += [a for a in choices.rest if step(self.state, a, self.variant) is not None]
            choices.rest = _NONE_LEFT
        if choices.taken is None:
            choices.taken = [None] * len(choices.actions)
        return choices


class StepStrategy(SearchStrategy):
    """Draws the machine's next step: a valid rule and its argument (see the module's rules).

    It stands in for Hypothesis's ``RuleStrategy`` as the machine's ``_rules_strategy``, the one
    strategy ``run_state_machine`` draws each step from (Hypothesis 6.170; tests/test_machines.py
    fails if it stops being used). It draws what ``RuleStrategy`` draws, a rule whose
    preconditions hold and its argument, making the same choices, but reads validity from the
    state's cached ``Options`` instead of calling every rule's precondition (each call also
    formats a description of the precondition for Hypothesis's observability counts), and picks
    the action by index in the cached list.

    The choices are kept as Hypothesis makes them, not merely as likely: a leaner scheme (a fixed
    three integers per step: a rule, a valid rule to fall back on, an action) shrank failures to
    traces two to three times as long (broker_epoch_from_session_id: 14 steps against 4), since
    the shrinker drove steps to the fallback, and a rule picked by its place among the valid ones
    changes meaning when an earlier step is deleted.

    It also leaves out Hypothesis's per-example switching of rules: a rule is valid here only
    while its kind is enabled, often one or two kinds at a time, so that switching left no rule
    to run in most examples and Hypothesis aborted them (measured on `bounce`: 452 aborted test
    cases for 200 run, a third of those run shorter than 5 steps); ``choose_swarm`` does the
    switching instead, knowing which kinds may go.
    """

    def __init__(self, machine: ModelMachine) -> None:
        super().__init__()
        self.machine = machine

    def do_draw(self, data):
        machine = self.machine
        rules, kinds = machine._rule_table()
        valid = machine.valid_rules()
        # The choices of Hypothesis's filtered sampled_from over the rules
        # (SampledFromStrategy.do_filtered_draw): up to three tries at a rule index, kept if
        # valid; else an index among the valid rules not tried, and that rule's index again
        # as a forced choice. The shrinker relies on this shape: once the tries before it are
        # deleted, the forced index is a first try that names its rule wherever it is valid.
        tried: set[int] = set()
        for _ in range(3):
            index = data.draw_integer(0, len(rules) - 1)
            if index in valid:
                break
            tried.add(index)
        else:
            allowed = [i for i in valid if i not in tried]
            guess = data.draw_integer(0, len(rules) - len(tried) - 1)
            index = allowed[guess] if guess < len(allowed) else allowed[data.draw_integer(0, len(allowed) - 1)]
            data.draw_integer(0, len(rules) - 1, forced=index)
        kind = kinds[index]
        if kind is None:
            return rules[index], {}
        actions = machine.options.choices(kind).actions
        # As ``data.draw(st.sampled_from(actions))`` would: no choice when there is one action.
        machine.drawn = 0
        if len(actions) > 1:
            data.start_span(_ACTION_LABEL)
            machine.drawn = data.draw_integer(0, len(actions) - 1)
            data.stop_span()
        return rules[index], {"action": actions[machine.drawn]}


_ACTION_LABEL = calc_label_from_name("kraftcheck action among the enabled ones")


def _enabled_action(kind: type) -> SearchStrategy:
    """One of ``kind``'s enabled actions, uniformly: what ``StepStrategy`` draws for the rule's
    argument, written as a strategy Hypothesis could draw by itself."""
    return st.runner().flatmap(lambda machine: st.sampled_from(machine.options.choices(kind).actions))


class ModelMachine(RuleBasedStateMachine):
    """The model under Hypothesis; ``machine_class`` makes one subclass per scope and variant."""

    scope: Scope
    variant: Variant = CORRECT
    trace_dir: Path | None = None  # None: $KRAFTCHECK_TRACE_DIR or .hypothesis/kraftcheck-traces
    coverage: Coverage
    _start: ClusterState
    _start_violations: tuple[str, ...]
    _options_cache: dict
    _generation = 0

    def __init__(self) -> None:
        super().__init__()
        self._rules_strategy = StepStrategy(self)  # see StepStrategy: how a step is drawn
        self.state = self._start
        self.options = self._options_of(self._start)
        self.drawn = 0  # the index of the action StepStrategy drew last
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
        if kind in PERTURBATIONS and (kind in self.switched_off or self.calm < self.calm_steps):
            return False
        return self.options.enabled(kind)

    def is_quiet(self) -> bool:
        return not any(self.allows(kind) for kind in self.options.kinds())

    def valid_rules(self) -> tuple[int, ...]:
        """The indices (in ``_rule_table`` order) of the rules whose preconditions hold now."""
        key = (self.switched_off, self.calm >= self.calm_steps)
        found = self.options.valid.get(key)
        if found is None:
            index_of = self._rule_index()
            valid = sorted(index_of[kind] for kind in self.options.kinds() if self.allows(kind))
            if not valid:  # quiet: only ``wait`` is valid
                valid = [index_of[None]]
            found = self.options.valid[key] = tuple(valid)
        return found

    @classmethod
    def _rule_table(cls) -> tuple[tuple, tuple[type | None, ...]]:
        """The rules, ``wait`` first and then by name (Hypothesis's order), and each one's action
        type (None for ``wait``)."""
        table = cls.__dict__.get("_rules")
        if table is None:
            rules = sorted(cls.setup_state().rules, key=lambda r: (len(r.arguments), r.function.__name__))
            kinds = tuple(getattr(r.function, "action_type", None) for r in rules)
            table = (tuple(rules), kinds)
            cls._rules = table
            cls._rules_by_kind = {kind: i for i, kind in enumerate(kinds)}
        return table

    @classmethod
    def _rule_index(cls) -> dict[type | None, int]:
        """Each action type's rule index in ``_rule_table``, and ``wait``'s under None."""
        cls._rule_table()
        return cls._rules_by_kind

    @precondition(is_quiet)
    @rule()
    def wait(self) -> None:
        """Nothing this example lets run is enabled: time passes, the state stays (a stutter)."""
        self.waited = True
        self.calm += 1

    def take(self, choices: Choices, index: int) -> None:
        """Take ``choices``' ``index``-th action, check the step, and move to the next state."""
        before, action = self.state, choices.actions[index]
        taken = choices.taken[index]
        if taken is None:
            after = step(before, action, self.variant)
            verdict = tuple(violations(before, action, after)), tuple(witnessed(before, action, after))
            taken = choices.taken[index] = Taken(after, verdict)
        broken, reached = taken.verdict
        self.actions.append(action)
        self.reached.update(reached)
        if any(name in self.expected for name in broken):
            self.tainted = True  # what follows a documented finding is that finding's consequence
        if broken and not self.tainted:
            self._fail(list(broken))
        self.state = taken.after
        # Most steps are taken again from a cached state: follow the link rather than hash the
        # next state (a deep hash, then a deep comparison) to find its options in the cache.
        options = taken.options
        if options is None or options.generation != self._generation:
            options = taken.options = self._options_of(taken.after)
        else:
            self.coverage.cache_hits += 1
        self.options = options
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
        # same states come back often; ``step`` is most of a step's cost. The ghost is part of
        # the key: it is left out of state equality, yet the next states carry it on. When the
        # cache is full it starts again as a new generation, and links between options of the
        # old one are no longer followed, so the old ones can be collected.
        key = (state, state.ghost)
        cache = cls._options_cache
        found = cache.get(key)
        if found is None:
            if len(cache) >= _OPTIONS_CACHE_SIZE:
                cache.clear()
                cls._generation += 1
            found = cache[key] = Options(state, cls.scope, cls.variant, cls._generation)
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

    def take_one(self: ModelMachine, action: Action) -> None:
        choices = self.options.choices(kind)
        drawn = self.drawn  # the index StepStrategy drew, unless the action came some other way
        index = drawn if drawn < len(choices.actions) and choices.actions[drawn] is action else None
        self.take(choices, choices.actions.index(action) if index is None else index)

    take_one.__name__ = take_one.__qualname__ = rule_name(kind)
    take_one.__doc__ = f"Take one enabled {kind.__name__}: {kind.__doc__.splitlines()[0] if kind.__doc__ else ''}"
    take_one.action_type = kind  # type: ignore[attr-defined]  # read by ModelMachine._rule_table
    setattr(ModelMachine, take_one.__name__, precondition(allowed)(rule(action=_enabled_action(kind))(take_one)))


for _kind in MACHINE_KINDS:
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
