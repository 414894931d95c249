"""The z3 engine every core of ``kraftcheck prove`` is written against: BMC, induction, any N, replay.

Rules:
- The z3 transition system is a *projection* of the Python model, never a second model: every
  variable is read off a ``ClusterState`` by a core's ``project``, every action formula mirrors one
  handler of the model (``model.zk_era``, ``model.kraft_quorum``, ``model.kraft_migration``; the
  function it mirrors is named in its docstring), and seeded bugs switch the formulas exactly where
  the handler switches its code.
- One named proof obligation per (action, invariant) pair, ``"ElectController/AtMostOneControllerPerEpoch"``,
  so a failed proof names the action that breaks the invariant. Invariants carry the registry's
  names (``model.invariants``); the auxiliary invariants that make them inductive are named lemmas,
  each proved inductive itself.
- Every satisfiable BMC result is decoded into real ``model.actions`` objects and replayed through
  ``model.step`` from the scope's initial state; the replay must break the same named invariants
  (``model.invariants.violations``), or the result is an error, not a finding.

How it works:
- The machinery (actor domains, per-step copies, choices, obligations, BMC, replay) is written
  once against a ``Core``: the fields a projection has, its encoded actions, invariants and
  lemmas, ``project``, the induction's Init, and how an encoded step is decoded into model
  actions. The cores: ``properties.proofs.fencing`` (the ZooKeeper controller's epoch fencing),
  ``properties.proofs.migration`` (the migration's fencing) and ``properties.proofs.heartbeats``
  (KRaft brokers' registrations and heartbeats, held ones included).
- Choices: where the model decides from something outside a core, the formula reads a free z3
  Bool per step and name (``Choices``). The agreement test accepts a model step that satisfies
  the formula for some value of them; the replay treats a model that chose otherwise as a trace
  it cannot follow.
- Per-step copies: a ``SymState`` holds one z3 constant per field per step (BMC) or per side of
  an obligation (induction). Actors come from a domain: ``FiniteActors(n)`` (ids 0..n-1,
  per-actor fields as Python lists of z3 constants, quantifiers expanded) or ``AnyActors()`` (an
  uninterpreted sort, per-actor fields as arrays over it, quantifiers as z3 ``ForAll``). The
  action formulas, invariants and lemmas are written once against the domain.
- ``bmc`` unrolls ``depth`` steps from ``project(initial_state(scope))`` and asks, per property,
  whether it breaks at any step; where it can, an incremental search from depth 1 up finds a
  shortest trace, which is decoded and replayed (a trace the model cannot follow is blocked from
  the first step the model could not take, and the search goes on). A core may let the replay
  insert a few model steps that leave the core unchanged (``Core.stutters``), which the search
  never spends depth on. ``prove`` discharges Init => I for every state invariant I (Init is the
  cold start of any cluster) and Inv /\\ T_a => I' for every action a and invariant I, where Inv
  is all state invariants and lemmas; ``prove_unbounded`` does the same over ``AnyActors``. There, z3 may
  answer "unknown" where a counterexample exists (measured: the stale-reads migration core's lemmas over any
  number of controllers, at the 60 s timeout); ``AnyActors(at_most=n)`` is the same encoding with every actor one
  of n members, so its quantifiers are conjunctions, and a model found so is a counterexample over any number too
  (``refute_unbounded``, which ``prove_unbounded`` tries on each "unknown").

How this fits with the rest: docs/design.md §9.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import z3

from model.actions import (
    Action,
)
from model.bugs import CORRECT, SEEDED_BUGS_BY_NAME, Bug, Variant
from model.invariants import violations
from model.scopes import SCOPES, Scope, initial_state
from model.state import ClusterState
from model.step import step as model_step

# ---- the machinery every core shares ------------------------------------------------------------

# Field kinds. ZXID fields hold zxids (unbounded, compared by order); INT fields hold small counters
# (epochs, versions, budgets, state codes); ACTOR fields name an actor of the core's domain. The BMC
# gives them different z3 sorts (see FiniteActors).
ZXID, INT, BOOL, ACTOR = "zxid", "int", "bool", "actor"

Projection = dict[str, Any]  # globals -> int | bool; per-actor fields -> tuple, one value per actor


class OutsideProjection(ValueError):
    """The state uses something the core does not model (an outage, an orphaned session, ...)."""


class EncodingMismatch(AssertionError):
    """The model did something the encoding says it cannot: the encoding is wrong, not the model."""


class FiniteActors:
    """Actors 0..n-1: per-actor fields are lists of z3 terms, quantifiers expand to conjunctions.

    With ``bits``, the small counters (INT fields, and actor ids) are signed bit-vectors of that
    width instead of Ints; ZXID fields stay Ints. The BMC uses this, with a width no value
    reachable within its depth can overflow (``bmc_bits``).
    """

    def __init__(self, n: int, bits: int | None = None, noun: str = "broker") -> None:
        self.n = n
        self.bits = bits
        self.noun = noun
        self.label = f"{n} {noun}" + ("" if n == 1 else "s")

    def value_sort(self, kind: str) -> z3.SortRef:
        if kind == BOOL:
            return z3.BoolSort()
        if kind == ZXID or not self.bits:
            return z3.IntSort()
        return z3.BitVecSort(self.bits)

    def actors(self, tag: str, arity: int = 1) -> list[tuple[int, ...]]:
        """Every way of choosing the acting actors of an action with ``arity`` of them (distinct)."""
        return [t for t in itertools.product(range(self.n), repeat=arity) if len(set(t)) == arity]

    def actor_const(self, name: str) -> z3.ExprRef:
        return z3.Const(name, self.value_sort(INT))

    def actor_term(self, b: int) -> z3.ExprRef:
        return self.number(b)

    def nobody(self) -> z3.ExprRef:
        return self.actor_term(0)  # the canonical value of an actor field that names no one

    def number(self, v: int) -> z3.ExprRef:
        """A constant of the INT fields' sort (so an if-then-else of two constants has that sort)."""
        return z3.BitVecVal(v, self.bits) if self.bits else z3.IntVal(v)

    def alone(self, b: int) -> z3.BoolRef:
        """``b`` is the only actor there is."""
        return z3.BoolVal(self.n == 1)

    def well_formed(self, s: SymState) -> z3.BoolRef:
        return z3.And([z3.And(0 <= s.values[name], s.values[name] < self.n) for name in s.core.actor_globals])

    def field(self, name: str, sort: str) -> list[z3.ExprRef]:
        return [z3.Const(f"{name}[{i}]", self.value_sort(sort)) for i in range(self.n)]

    def at(self, values: list, b: int) -> z3.ExprRef:
        return values[b]

    def put(self, values: list, b: int, value) -> list:
        changed = list(values)
        changed[b] = value
        return changed

    def same(self, left: list, right: list) -> z3.BoolRef:
        return z3.And([x == y for x, y in zip(left, right)])

    def every(self, fn: Callable[[int], z3.BoolRef]) -> z3.BoolRef:
        return z3.And([fn(i) for i in range(self.n)])

    def every_pair(self, fn: Callable[[int, int], z3.BoolRef]) -> z3.BoolRef:
        return z3.And([fn(i, j) for i in range(self.n) for j in range(self.n) if i != j])


class AnyActors:
    """Any number of actors: an uninterpreted sort, per-actor fields as arrays, ``ForAll`` quantifiers."""

    def __init__(self, noun: str = "broker", at_most: int | None = None) -> None:
        self.noun = noun
        self.label = f"any number of {noun}s" if at_most is None else f"any number of {noun}s, found among {at_most}"
        self.actor_sort = z3.DeclareSort(noun.capitalize())
        # Finite model finding in this same encoding: every actor is one of these. A model found so is a model of
        # the unbounded formulas too (a counterexample of theirs); an obligation that holds so holds for no more.
        self.members = [z3.Const(f"member#{i}", self.actor_sort) for i in range(at_most or 0)]

    def value_sort(self, kind: str) -> z3.SortRef:
        return z3.BoolSort() if kind == BOOL else z3.IntSort()

    def actors(self, tag: str, arity: int = 1) -> list[tuple[z3.ExprRef, ...]]:
        names = ("actor", "peer")[:arity]
        return [tuple(z3.Const(f"{name}@{tag}", self.actor_sort) for name in names)]

    def actor_const(self, name: str) -> z3.ExprRef:
        return z3.Const(name, self.actor_sort)

    def actor_term(self, b: z3.ExprRef) -> z3.ExprRef:
        return b

    def nobody(self) -> z3.ExprRef:
        return z3.Const("nobody", self.actor_sort)

    def number(self, v: int) -> z3.ExprRef:
        return z3.IntVal(v)

    def alone(self, b: z3.ExprRef) -> z3.BoolRef:
        if self.members:  # every actor is a member: the quantifier is the members' conjunction
            return z3.And([m == b for m in self.members])
        x = z3.Const("x", self.actor_sort)
        return z3.ForAll([x], x == b)

    def well_formed(self, s: SymState) -> z3.BoolRef:
        if not self.members:
            return z3.BoolVal(True)
        x = z3.Const("x", self.actor_sort)
        return z3.ForAll([x], z3.Or([x == m for m in self.members]))

    def field(self, name: str, sort: str) -> z3.ArrayRef:
        return z3.Array(name, self.actor_sort, self.value_sort(sort))

    def at(self, values: z3.ArrayRef, b) -> z3.ExprRef:
        return values[b]

    def put(self, values: z3.ArrayRef, b, value) -> z3.ArrayRef:
        return z3.Store(values, b, value)

    def same(self, left: z3.ArrayRef, right: z3.ArrayRef) -> z3.BoolRef:
        return left == right

    def every(self, fn) -> z3.BoolRef:
        if self.members:
            return z3.And([fn(m) for m in self.members])
        b = z3.Const("b", self.actor_sort)
        return z3.ForAll([b], fn(b))

    def every_pair(self, fn) -> z3.BoolRef:
        if self.members:
            return z3.And([z3.Implies(b != c, fn(b, c)) for b in self.members for c in self.members])
        b, c = z3.Consts("b c", self.actor_sort)
        return z3.ForAll([b, c], z3.Implies(b != c, fn(b, c)))


Domain = FiniteActors | AnyActors


class SymState:
    """One copy of a core's projected state as z3 terms: ``s.zxid`` for globals, ``s.of(b).alive`` per actor."""

    def __init__(self, core: Core, dom: Domain, values: dict[str, Any]) -> None:
        self.core = core
        self.dom = dom
        self.values = values

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def of(self, b) -> ActorView:
        return ActorView(self, b)

    @classmethod
    def fresh(cls, dom: Domain, tag: str, core: Core) -> SymState:
        """Fresh constants for every field of ``core``."""
        values: dict[str, Any] = {}
        for name, sort in core.global_fields.items():
            if sort == ACTOR:
                values[name] = dom.actor_const(f"{name}@{tag}")
            else:
                values[name] = z3.Const(f"{name}@{tag}", dom.value_sort(sort))
        for name, sort in core.actor_fields.items():
            values[name] = dom.field(f"{name}@{tag}", sort)
        return cls(core, dom, values)

    @classmethod
    def concrete(cls, dom: FiniteActors, p: Projection, core: Core) -> SymState:
        """A projection of ``core`` as z3 values, so a formula over it simplifies to true or false."""

        def term(sort: str, v):
            return z3.BoolVal(v) if sort == BOOL else z3.IntVal(v)

        values: dict[str, Any] = {name: term(sort, p[name]) for name, sort in core.global_fields.items()}
        for name, sort in core.actor_fields.items():
            values[name] = [term(sort, v) for v in p[name]]
        return cls(core, dom, values)

    def equals(self, p: Projection) -> z3.BoolRef:
        """This copy holds the projection ``p`` (finite domain)."""
        parts = [self.values[name] == p[name] for name in self.core.global_fields]
        for name in self.core.actor_fields:
            parts += [x == v for x, v in zip(self.values[name], p[name])]
        return z3.And(parts)

    def read(self, model: z3.ModelRef) -> Projection:
        """The projection a z3 model assigns to this copy (finite domain)."""

        def value(term):
            v = model.eval(term, model_completion=True)
            if z3.is_bool(v):
                return z3.is_true(v)
            return v.as_signed_long() if z3.is_bv(v) else v.as_long()

        out: Projection = {name: value(self.values[name]) for name in self.core.global_fields}
        out.update({name: tuple(value(t) for t in self.values[name]) for name in self.core.actor_fields})
        return out


class ActorView:
    def __init__(self, state: SymState, b) -> None:
        self._state = state
        self._b = b

    def __getattr__(self, name: str) -> z3.ExprRef:
        state = self.__dict__["_state"]
        return state.dom.at(state.values[name], self.__dict__["_b"])


BrokerView = ActorView


class Choices:
    """The free choices of one step: one z3 Bool per name, shared by the actions of that step.

    An action's formula calls ``choose(name)`` where the model decides from something outside
    the core; ``asked`` records the names it called, so a decoded step keeps only its own
    choices. With ``fixed`` (concrete evaluation), each name is that value (False if not given).
    ``choose.number(name)`` is a free integer instead: a value the core takes from outside it (the offset
    of an image a write carries), which the formulas compare only by order with the core's ``ordered_fields``.
    """

    def __init__(self, tag: str, fixed: dict[str, bool | int] | None = None) -> None:
        self.tag = tag
        self.fixed = fixed
        self.terms: dict[str, z3.ExprRef] = {}
        self.numbers: set[str] = set()
        self.asked: list[str] = []

    def __call__(self, name: str) -> z3.BoolRef:
        if name not in self.asked:
            self.asked.append(name)
        if self.fixed is not None:
            return z3.BoolVal(bool(self.fixed.get(name, False)))
        return self.terms.setdefault(name, z3.Bool(f"{name}@{self.tag}"))

    def number(self, name: str) -> z3.ArithRef:
        if name not in self.asked:
            self.asked.append(name)
        self.numbers.add(name)
        if self.fixed is not None:
            return z3.IntVal(int(self.fixed.get(name, 0)))
        return self.terms.setdefault(name, z3.Int(f"{name}@{self.tag}"))

    def fork(self) -> Choices:
        """The same terms, with a record of its own of the names asked."""
        other = Choices(self.tag, self.fixed)
        other.terms = self.terms
        other.numbers = self.numbers
        return other


@dataclass
class Effect:
    """An action: when it is enabled, and the fields it changes (globals, its actor's, its peer's)."""

    guard: z3.BoolRef
    changes: dict[str, Any] = field(default_factory=dict)
    mine: dict[str, Any] = field(default_factory=dict)
    peer: dict[str, Any] = field(default_factory=dict)  # the second actor's, for an action of two


@dataclass(frozen=True)
class EncodedAction:
    name: str  # the model action's class name (a few stand for several, see the core's docstring)
    effect: Callable[..., Effect]  # (state, *actors, variant, choose) -> Effect
    exact_guard: bool = True  # the model is enabled exactly when the guard holds
    arity: int = 1  # how many actors act in it (0: the environment or an operator)


@dataclass(frozen=True)
class Invariant:
    name: str
    meaning: str
    holds: Callable[..., z3.BoolRef]  # (s) for a state invariant, (pre, post) for a step invariant
    on_step: bool = False
    lemma: bool = False  # a strengthening lemma, not a registry property
    # Lemmas its induction obligations do not assume, though every other obligation does: fewer premises make
    # an obligation harder to prove, never unsound, and keep the solver off a lemma it does not need (one that
    # speaks of fields this invariant never reads can leave its quantified obligations unknown at the timeout).
    proved_without: tuple[str, ...] = ()


def holds(inv: Invariant, pre: SymState, post: SymState) -> z3.BoolRef:
    """``inv`` after a step from ``pre`` to ``post``."""
    return inv.holds(pre, post) if inv.on_step else inv.holds(post)


@dataclass(frozen=True)
class EncodedStep:
    action: str
    actors: tuple[int, ...]
    choices: tuple[tuple[str, bool | int], ...] = ()  # the values of the choices this action asked for
    # For each integer choice, how it compares with each ordered field of the state it was taken in (-1, 0, 1, in
    # the order of ``Core.ordered_terms``): what a trace the model cannot follow is blocked by (``_matches``).
    orders: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @property
    def broker(self) -> int:
        return self.actors[0]

    @property
    def writes(self) -> bool:
        return dict(self.choices).get("writes", False)

    def __str__(self) -> str:
        chosen = [name if value is True else f"{name}={value}" for name, value in self.choices
                  if value is not False]
        suffix = f" ({', '.join(chosen)})" if chosen else ""
        return f"{self.action}({', '.join(map(str, self.actors))}){suffix}"


@dataclass
class Counterexample:
    """A trace that breaks ``invariant``, found by z3 and confirmed by replaying it through model.step."""

    invariant: str
    encoded_trace: list[EncodedStep]
    actions: list[Action]  # the model actions the replay took: one per encoded step, and any stutters
    violated: tuple[str, ...]  # every encoded property the last step breaks (the model agrees)

    def as_json(self) -> dict:
        return {
            "invariant": self.invariant,
            "steps": len(self.actions),
            "violated": list(self.violated),
            "actions": [repr(a) for a in self.actions],
        }


@dataclass
class PropertyBmc:
    name: str
    holds: bool  # no confirmed counterexample within the depth
    seconds: float
    counterexample: Counterexample | None = None
    refinements: int = 0  # abstract traces the model could not follow, blocked and solved again
    complete: bool = True  # False when the solver gave up or the refinement limit stopped the search
    finding: str = ""  # why the correct model's violation is a finding the scope names (Scope.findings), if it is


@dataclass
class BmcResult:
    scope: str
    bugs: tuple[str, ...]
    size: int  # actors in the scope
    noun: str  # what the actors are
    depth: int
    seconds: float
    properties: list[PropertyBmc]

    @property
    def n_brokers(self) -> int:
        return self.size

    @property
    def label(self) -> str:
        return f"{self.size} {self.noun}" + ("" if self.size == 1 else "s")

    @property
    def holds(self) -> bool:
        return all(p.holds for p in self.properties)

    @property
    def complete(self) -> bool:
        return all(p.complete for p in self.properties)

    @property
    def counterexamples(self) -> dict[str, Counterexample]:
        return {p.name: p.counterexample for p in self.properties if p.counterexample is not None}

    def as_json(self) -> dict:
        return {
            "scope": self.scope,
            "bugs": list(self.bugs),
            f"n_{self.noun}s": self.size,
            "depth": self.depth,
            "holds": self.holds,
            "complete": self.complete,
            "seconds": round(self.seconds, 3),
            "properties": [
                {
                    "name": p.name,
                    "holds": p.holds,
                    "complete": p.complete,
                    "seconds": round(p.seconds, 3),
                    "refinements": p.refinements,
                    **({"counterexample": p.counterexample.as_json()} if p.counterexample else {}),
                }
                for p in self.properties
            ],
        }

    def rows(self) -> list[dict]:
        """One row per property, as ``kraftcheck prove`` lists them."""
        rows = []
        for p in self.properties:
            row = {
                "name": f"BMC/{self.scope}/depth-{self.depth}/{p.name}",
                "brokers": self.label,
                "result": "holds" if p.holds and p.complete else (
                    "unknown" if p.holds else ("finding" if p.finding else "violated")),
                "seconds": round(p.seconds, 3),
            }
            if p.finding and not p.holds:
                row["why"] = p.finding
            if p.counterexample is not None:
                row["counterexample"] = p.counterexample.as_json()
            rows.append(row)
        return rows


@dataclass
class ObligationResult:
    name: str  # "<action>/<invariant>", or "Init/<invariant>"
    brokers: str  # the domain: "2 brokers", "any number of controllers", ...
    result: str  # "proved", "counterexample-to-induction" or "unknown"
    seconds: float
    counterexample: dict | None = None  # pre- and post-state projections (finite domain only)
    why: str = ""  # a finding's reason (``Core.findings``)

    @property
    def proved(self) -> bool:
        return self.result == "proved"

    def as_json(self) -> dict:
        out = {"name": self.name, "brokers": self.brokers, "result": self.result, "seconds": round(self.seconds, 4)}
        if self.counterexample is not None:
            out["cti"] = self.counterexample  # pre- and post-state projections
        if self.why:
            out["why"] = self.why
        return out


Replayed = list[tuple[ClusterState, Action, ClusterState]]
ModelActions = Callable[[EncodedStep, ClusterState, Scope, Variant], list[Action]]


def _value(term: z3.ExprRef) -> Any:
    v = z3.simplify(term)
    if z3.is_true(v) or z3.is_false(v):
        return z3.is_true(v)
    if z3.is_int_value(v):
        return v.as_long()
    raise ValueError(f"not a concrete value: {v}")


def _concrete(v: Any) -> Any:
    return v if isinstance(v, (bool, int)) else _value(v)


def _diff(want: Projection, got: Projection) -> str:
    return ", ".join(f"{k}: encoding {want[k]} model {got[k]}" for k in want if want[k] != got[k])


# z3's timeout for an obligation the design is known to fail (``Core.findings``): over any number of actors z3 has
# left such a one unknown at 60 s as at 5 s, and its counterexample is then found among a few actors in seconds.
FINDING_TIMEOUT_MS = 5_000


class Core:
    """A projection of the model onto z3, with everything the machinery needs to check it.

    ``model_actions(step, state, scope, variant)`` lists the model actions an encoded step may
    stand for at ``state`` (the replay takes those whose successor projects as the solver says).
    ``stutters(state, scope)`` lists model actions the replay may insert between encoded steps
    when they leave the projection unchanged (at most ``max_stutters`` per trace); ``step_fields``
    are per-step ghosts, reset by every step that does not set them. ``bmc_lemmas``: the BMC
    assumes at every step the lemmas that are inductive for the variant (``inductive_lemmas``);
    ``bmc_bits``: small counters are bit-vectors in the BMC (else Ints). ``bmc_may_stop``: the core's runs
    may end before the BMC's depth (every action disabled, no Stutter in the unrolling), so the one
    query over the whole depth asks for a violation on a path of any length up to it, not on a path of
    exactly that length, which a run that ends would make vacuously unsatisfiable. ``bmc_refinements``: how many
    traces the model cannot follow ``bmc_in_scope`` blocks before it gives up. ``followed_bugs``: seeded bugs
    the formulas follow whose properties lie outside the core, so no obligation of the core's can fail for them: a
    variant may hold them, to prove that the core's properties survive them; they are not ``encoded_bugs``,
    which the core must catch.

    ``ordered_fields``: fields that hold values the core takes from outside it (offsets into a log it does not
    keep), which every formula compares only by order, with each other, with ``Choices.number`` values and with
    the ``ordered_constants``. Where ``meaningful(projection, field, actor)`` says such a field means something,
    the replay compares a BMC trace's steps with the model's by the order of these values, not the values
    themselves (``order_key``), and blocks a trace the model cannot follow by the order of its integer choices
    (``EncodedStep.orders``). ``findings``: the
    (action, property) obligations that fail for the design itself, with why (a finding the explorer pins in a
    scope); ``kraftcheck prove`` lists them as "finding", as it does a BMC counterexample of a property the scope
    names among its findings for the profile.

    What ``kraftcheck prove`` runs of a core (``report``) is built here from these: ``bmc_in_scope``,
    ``prove_finite``, ``prove_unbounded``, so a core module writes only its encoding.
    """

    def __init__(
        self,
        name: str,
        noun: str,
        global_fields: dict[str, str],
        actor_fields: dict[str, str],
        actions: tuple[EncodedAction, ...],
        invariants: tuple[Invariant, ...],
        project: Callable[[ClusterState], Projection],
        initial: Callable[[SymState], z3.BoolRef],
        encoded_bugs: dict[Bug, tuple[str, ...]],
        model_actions: ModelActions,
        scopes: tuple[str, ...],
        step_fields: dict[str, Any] | None = None,
        stutters: Callable[[ClusterState, Scope], list[Action]] | None = None,
        max_stutters: int = 0,
        bmc_lemmas: bool = False,
        bmc_bits: bool = True,
        bmc_may_stop: bool = False,
        bmc_refinements: int = 25,
        followed_bugs: frozenset[Bug] = frozenset(),
        ordered_fields: tuple[str, ...] = (),
        ordered_constants: tuple[int, ...] = (),
        meaningful: Callable[[Projection, str, int | None], bool] | None = None,
        findings: dict[tuple[str, str], str] | None = None,
    ) -> None:
        self.name = name
        self.noun = noun
        self.global_fields = global_fields
        self.actor_fields = actor_fields
        self.actions = actions
        self.invariants = invariants
        self.project = project
        self.initial = initial
        self.encoded_bugs = encoded_bugs
        self.model_actions = model_actions
        self.scopes = scopes
        self.step_fields = step_fields or {}
        self.stutters = stutters
        self.max_stutters = max_stutters
        self.bmc_lemmas = bmc_lemmas
        self.bmc_bits = bmc_bits
        self.bmc_may_stop = bmc_may_stop
        self.bmc_refinements = bmc_refinements
        self.followed_bugs = followed_bugs
        self.ordered_fields = ordered_fields
        self.ordered_constants = ordered_constants
        self.meaningful = meaningful
        self.findings = findings or {}
        self.actions_by_name = {a.name: a for a in actions}
        self.invariants_by_name = {i.name: i for i in invariants}
        for inv in invariants:  # a misspelt name would only assume more, silently: refuse it
            strangers = [n for n in inv.proved_without if not getattr(self.invariants_by_name.get(n), "lemma", False)]
            if strangers:
                raise ValueError(f"{name} core: {inv.name} is proved without {strangers[0]!r}, which is not a lemma of"
                                 " the core")
        self.property_names = tuple(i.name for i in invariants if not i.lemma)  # the registry properties encoded
        self.state_invariants = tuple(i for i in invariants if not i.on_step)
        self.bmc_actions = tuple(a for a in actions if a.name != "Stutter")  # BMC checks every depth
        self.actor_globals = tuple(n for n, kind in global_fields.items() if kind == ACTOR)
        self._inductive: dict[tuple, list[Invariant]] = {}  # inductive_lemmas, by what decides them

    # ---- states and domains

    def fresh(self, dom: Domain, tag: str) -> SymState:
        return SymState.fresh(dom, tag, self)

    def concrete(self, dom: FiniteActors, p: Projection) -> SymState:
        return SymState.concrete(dom, p, self)

    def finite(self, n: int, bits: int | None = None) -> FiniteActors:
        return FiniteActors(n, bits, self.noun)

    def unbounded(self, at_most: int | None = None) -> AnyActors:
        return AnyActors(self.noun, at_most)

    def size_of(self, p: Projection) -> int:
        return len(p[next(iter(self.actor_fields))])

    def without_step_ghosts(self, p: Projection) -> Projection:
        return {**p, **self.step_fields}

    def ordered_cells(self, p: Projection) -> list[tuple[str, int | None]]:
        """The cells of ``p``'s ordered fields that mean something: (field, actor, or None for a global field)."""
        if self.meaningful is None:
            return []
        cells: list[tuple[str, int | None]] = []
        for name in self.ordered_fields:
            actors: list[int | None] = [None] if name in self.global_fields else list(range(self.size_of(p)))
            cells += [(name, i) for i in actors if self.meaningful(p, name, i)]
        return cells

    def order_key(self, before: Projection, after: Projection) -> Any:
        """The step from ``before`` to ``after`` with the meaningful values of the ordered fields replaced by their
        ranks among those of both states. Every formula compares these values only by order, so two steps with
        the same key are the same step to the core: what the replay compares a BMC trace's steps with the model's
        by (the solver's offsets are not the model's, only their order is)."""
        if not self.ordered_fields:
            return after

        def value(p: Projection, name: str, i: int | None) -> int:
            return p[name] if i is None else p[name][i]

        values = {value(p, name, i) for p in (before, after) for name, i in self.ordered_cells(p)}
        rank = {v: r for r, v in enumerate(sorted(values | set(self.ordered_constants)))}

        def ranked(p: Projection) -> Projection:
            out = dict(p)
            for name, i in self.ordered_cells(p):
                if i is None:
                    out[name] = ("rank", rank[p[name]])
                else:
                    row = list(out[name])
                    row[i] = ("rank", rank[p[name][i]])
                    out[name] = tuple(row)
            return out

        return ranked(before), ranked(after)

    def ordered_terms(self, s: SymState) -> list[z3.ExprRef]:
        """The ordered constants, then every ordered field's term of ``s`` (finite domain), globals first: what an
        integer choice is compared with when a trace is blocked."""
        terms: list[z3.ExprRef] = [z3.IntVal(v) for v in self.ordered_constants]
        for name in self.ordered_fields:
            terms += [s.values[name]] if name in self.global_fields else list(s.values[name])
        return terms

    def check_variant(self, variant: Variant) -> None:
        unknown = variant.bugs - self.encoded_bugs.keys() - self.followed_bugs
        if unknown:
            names = ", ".join(sorted(b.value for b in unknown))
            raise ValueError(f"the z3 encoding does not switch these seeded bugs: {names}")

    def default_scope(self, variant: Variant) -> str:
        """The scope a seeded bug names (model.bugs.SEEDED_BUGS), else the core's first scope."""
        scopes = {SEEDED_BUGS_BY_NAME[b.value].scope for b in variant.bugs}
        return scopes.pop() if len(scopes) == 1 else self.scopes[0]

    # ---- the transition relation

    def transition(
        self, action: EncodedAction, pre: SymState, post: SymState, actors: tuple, variant: Variant, choose
    ) -> z3.BoolRef:
        """``post`` is ``pre`` after ``action`` by ``actors``: the guard, the changes, and the frame."""
        dom = pre.dom
        effect = action.effect(pre, *actors, variant, choose)
        parts = [effect.guard]
        for name in self.global_fields:
            unchanged = self.step_fields[name] if name in self.step_fields else pre.values[name]
            parts.append(post.values[name] == effect.changes.get(name, unchanged))
        for name in self.actor_fields:
            new = pre.values[name]
            for b, changed in zip(actors, (effect.mine, effect.peer)):
                if name in changed:
                    new = dom.put(new, b, changed[name])
            parts.append(dom.same(post.values[name], new))
        return z3.And(parts)

    def any_transition(self, action: EncodedAction, pre: SymState, post: SymState, variant: Variant, tag: str):
        """``action`` by any actors, with its choices left free."""
        choose = Choices(tag)
        return z3.Or(
            [self.transition(action, pre, post, a, variant, choose) for a in pre.dom.actors(tag, action.arity)]
        )

    def _concrete_effect(self, p: Projection, action: str, actors: tuple, variant: Variant, fixed: dict):
        s = self.concrete(self.finite(self.size_of(p)), p)
        choose = Choices("concrete", fixed)
        return self.actions_by_name[action].effect(s, *actors, variant, choose), choose

    def encoded_guard(self, p: Projection, action: str, actors: tuple, variant: Variant = CORRECT) -> bool:
        return _value(self._concrete_effect(p, action, actors, variant, {})[0].guard)

    def encoded_successor(
        self, p: Projection, action: str, actors: tuple, variant: Variant = CORRECT, choices: dict | None = None
    ) -> Projection | None:
        """The projection after ``action`` by ``actors`` according to the encoding, None if its guard is false."""
        effect, _ = self._concrete_effect(p, action, actors, variant, choices or {})
        if not _value(effect.guard):
            return None
        out = self.without_step_ghosts(p)
        out.update({name: _concrete(v) for name, v in effect.changes.items()})
        for b, changed in zip(actors, (effect.mine, effect.peer)):
            for name, v in changed.items():
                row = list(out[name])
                row[b] = _concrete(v)
                out[name] = tuple(row)
        return out

    def satisfies_transition(
        self, before: Projection, after: Projection, action: str, actors: tuple, variant: Variant = CORRECT
    ) -> bool:
        """The concrete pair satisfies the action's z3 formula for some value of its choices."""
        dom = self.finite(self.size_of(before))
        pre, post = self.concrete(dom, before), self.concrete(dom, after)
        asked = self._concrete_effect(before, action, actors, variant, {})[1]
        encoded = self.actions_by_name[action]
        if asked.numbers:  # an integer choice: ask the solver for values of them all
            solver = z3.Solver()
            solver.add(self.transition(encoded, pre, post, actors, variant, Choices("c")))
            return solver.check() == z3.sat
        asked = asked.asked
        return any(
            _value(self.transition(encoded, pre, post, actors, variant, Choices("c", dict(zip(asked, values)))))
            for values in itertools.product((False, True), repeat=len(asked))
        )

    # ---- invariants

    def broken_properties(self, pre: Projection, post: Projection) -> list[str]:
        """The registry properties the encoding says the concrete step from ``pre`` to ``post`` breaks."""
        dom = self.finite(self.size_of(pre))
        a, b = self.concrete(dom, pre), self.concrete(dom, post)
        return [i.name for i in self.invariants if not i.lemma and not _value(holds(i, a, b))]

    def broken_state_invariants(self, p: Projection) -> list[str]:
        """The state invariants and lemmas a concrete projection breaks (none, for a reachable state)."""
        s = self.concrete(self.finite(self.size_of(p)), p)
        return [i.name for i in self.state_invariants if not _value(i.holds(s))]

    # ---- induction

    def induction_obligations(
        self,
        dom: Domain,
        variant: Variant = CORRECT,
        invariants: Iterable[Invariant] | None = None,
        actions: Iterable[str] | None = None,
        goals: Iterable[str] | None = None,
    ) -> list[tuple[str, list[z3.BoolRef], SymState, SymState | None]]:
        """Each obligation as (name, formulas that must be unsatisfiable together, pre, post).

        Init/I:  initial(s) /\\ not I(s)
        A/I:     Inv(s) /\\ T_A(s, s') /\\ not I(s, s'), where Inv is every state invariant among
                 ``invariants`` (so nothing is assumed that is not also proved), but for the lemmas I is
                 ``proved_without``.

        ``goals``: only the obligations of the invariants so named, every one of ``invariants`` still assumed
        (the same formulas as in the whole proof, fewer of them: one property's step, checked alone)."""
        self.check_variant(variant)
        wanted = list(self.invariants if invariants is None else invariants)
        chosen = None if actions is None else set(actions)
        proved = wanted if goals is None else [i for i in wanted if i.name in set(goals)]
        out = []
        s = self.fresh(dom, "init")
        for inv in proved:
            if not inv.on_step and (chosen is None or "Init" in chosen):
                out.append((f"Init/{inv.name}", [dom.well_formed(s), self.initial(s), z3.Not(inv.holds(s))], s, None))
        pre, post = self.fresh(dom, "pre"), self.fresh(dom, "post")
        assumed = [(i.name, i.holds(pre)) for i in wanted if not i.on_step]
        hypotheses = {inv.name: [dom.well_formed(pre), dom.well_formed(post)]
                      + [formula for name, formula in assumed if name not in inv.proved_without] for inv in proved}
        for action in self.actions:
            if chosen is not None and action.name not in chosen:
                continue
            step_ = self.any_transition(action, pre, post, variant, "step")
            for inv in proved:
                out.append((f"{action.name}/{inv.name}", hypotheses[inv.name] + [step_, z3.Not(holds(inv, pre, post))],
                            pre, post))
        return out

    def prove(
        self,
        variant: Variant = CORRECT,
        dom: Domain | None = None,
        invariants: Iterable[Invariant] | None = None,
        actions: Iterable[str] | None = None,
        timeout_ms: int = 60_000,
        goals: Iterable[str] | None = None,
    ) -> list[ObligationResult]:
        """Discharge the induction obligations (all, or those of ``actions``: action names and "Init"; of
        ``goals``' invariants only, when named, see ``induction_obligations``); a satisfiable one is a
        counterexample to induction. An obligation the design is known to fail (``findings``) gets at most
        ``FINDING_TIMEOUT_MS``: over any number of actors z3 leaves it unknown, and ``prove_unbounded`` then finds
        its counterexample among a few."""
        dom = dom or self.finite(2)
        results = []
        for name, formulas, pre, post in self.induction_obligations(dom, variant, invariants, actions, goals):
            solver = z3.Solver()
            known = tuple(name.split("/", 1)) in self.findings
            solver.set("timeout", min(timeout_ms, FINDING_TIMEOUT_MS) if known else timeout_ms)
            solver.add(formulas)
            start = time.perf_counter()
            verdict = solver.check()
            seconds = time.perf_counter() - start
            if verdict == z3.unsat:
                results.append(ObligationResult(name, dom.label, "proved", seconds))
            elif verdict == z3.sat:
                cti = None
                if isinstance(dom, FiniteActors):
                    model = solver.model()
                    cti = {"pre": pre.read(model)}
                    if post is not None:
                        cti["post"] = post.read(model)
                results.append(ObligationResult(name, dom.label, "counterexample-to-induction", seconds, cti))
            else:
                results.append(ObligationResult(name, dom.label, "unknown", seconds))
        return results

    def prove_finite(self, variant: Variant = CORRECT, n: int = 2, actions: Iterable[str] | None = None,
                     goals: Iterable[str] | None = None) -> list[ObligationResult]:
        """Every induction obligation for ``n`` actors (of ``goals``' invariants only, when named)."""
        return self.prove(variant, self.finite(n), actions=actions, goals=goals)

    def prove_unbounded(self, variant: Variant = CORRECT, actions: Iterable[str] | None = None,
                        goals: Iterable[str] | None = None, timeout_ms: int = 60_000) -> list[ObligationResult]:
        """Every induction obligation over an uninterpreted sort of actors: any number of them (of ``goals``'
        invariants only, when named, every invariant still assumed). An obligation z3 leaves "unknown" is searched
        again for a counterexample among 2, then 3 actors (``refute_unbounded``), which is one over any number too."""
        results = self.prove(variant, self.unbounded(), actions=actions, goals=goals, timeout_ms=timeout_ms)
        return [self._refuted(variant, r) if r.result == "unknown" else r for r in results]

    def _refuted(self, variant: Variant, unknown: ObligationResult) -> ObligationResult:
        action, invariant = unknown.name.split("/", 1)
        spent = unknown.seconds
        for actors in (2, 3):
            for found in self.refute_unbounded(variant, actors, actions=[action], goals=[invariant]):
                spent += found.seconds
                if found.name == unknown.name and found.result == "counterexample-to-induction":
                    return replace(found, seconds=spent)
        return replace(unknown, seconds=spent)

    def refute_unbounded(self, variant: Variant = CORRECT, actors: int = 2, actions: Iterable[str] | None = None,
                         goals: Iterable[str] | None = None) -> list[ObligationResult]:
        """The unbounded obligations searched for a counterexample to induction among states of at most ``actors``
        actors, in the unbounded encoding (quantifiers, arrays): z3 finds such a model far sooner than one over any
        number, and it is a counterexample of the unbounded obligation all the same, which shows that obligation is
        not vacuous. Nothing here is a proof: "proved" means only that none has at most ``actors`` actors."""
        return self.prove(variant, self.unbounded(at_most=actors), actions=actions, goals=goals)

    def inductive_lemmas(self, variant: Variant, dom: Domain, start: Projection | None = None) -> list[Invariant]:
        """The largest set of lemmas that is inductive for ``variant`` (and holds at ``start``): drop every
        lemma an action breaks, or ``start`` breaks, and try again with the rest (Houdini)."""
        kept = [i for i in self.invariants if i.lemma and not i.on_step]
        if start is not None:
            kept = [i for i in kept if i.name not in self.broken_state_invariants(start)]
        key = (variant, dom.label, tuple(i.name for i in kept))
        if key not in self._inductive:
            while True:
                results = self.prove(variant, dom, kept, actions=[a.name for a in self.actions])
                broken = {r.name.split("/")[1] for r in results if not r.proved}
                if not broken:
                    break
                kept = [i for i in kept if i.name not in broken]
            self._inductive[key] = kept
        return self._inductive[key]

    def enabled_under_invariants(self, dom: Domain | None = None, variant: Variant = CORRECT) -> dict[str, bool]:
        """For each action: can it be taken from a state satisfying every invariant and lemma? An
        action that cannot would make its obligations hold vacuously."""
        dom = dom or self.finite(2)
        pre, post = self.fresh(dom, "pre"), self.fresh(dom, "post")
        out = {}
        for action in self.actions:
            solver = z3.Solver()
            solver.add(dom.well_formed(pre), *[i.holds(pre) for i in self.state_invariants])
            solver.add(self.any_transition(action, pre, post, variant, "step"))
            out[action.name] = solver.check() == z3.sat
        return out

    # ---- bounded model checking

    def bmc(
        self,
        scope: Scope,
        depth: int = 20,
        variant: Variant = CORRECT,
        properties: Iterable[str] | None = None,
        max_refinements: int = 25,
        name: str | None = None,
    ) -> BmcResult:
        """Bounded model checking of each encoded property to ``depth`` steps from ``scope``'s initial state.

        Per property: one query over the whole unrolling asks whether it breaks at any step. If it
        can, an incremental search from depth 1 up finds a shortest trace, which is decoded into
        model actions and replayed through model.step; a trace the model cannot follow is blocked
        from its first step the model could not take, and the search continues (at most
        ``max_refinements`` times).

        Small counters are bit-vectors of a width no reachable value overflows (``bmc_bits``);
        zxid-valued fields stay Ints (measured: as bit-vectors, the order facts the broker-epoch
        properties need cost the solver 10-50x more).
        """
        self.check_variant(variant)
        start = time.perf_counter()
        init_projection = self.project(initial_state(scope))
        n = self.size_of(init_projection)
        dom = self.finite(n, bits=bmc_bits(init_projection, depth, self) if self.bmc_bits else None)
        states = [self.fresh(dom, "0")]
        steps: list[_Unrolled] = []
        for k in range(1, depth + 1):
            states.append(self.fresh(dom, str(k)))
            steps.append(_bmc_step(self, states[k - 1], states[k], variant, str(k)))
        init = states[0].equals(init_projection)
        if self.bmc_lemmas:
            lemmas = self.inductive_lemmas(variant, self.finite(n), init_projection)
            init = z3.And(init, *[lemma.holds(s) for s in states[1:] for lemma in lemmas])
        results = []
        for prop in self.property_names if properties is None else properties:
            inv = self.invariants_by_name[prop]
            bad = [z3.Not(holds(inv, states[k - 1], states[k])) for k in range(1, depth + 1)]
            began = time.perf_counter()
            whole = _whole_depth_solver()
            if self.bmc_may_stop:
                # step k is taken only on a path that goes on to step k (active), a violation only on such a path
                active = [z3.Bool(f"active@{k}") for k in range(1, depth + 1)]
                whole.add(init, *[z3.Implies(active[k], c) for k, u in enumerate(steps) for c in u.constraints],
                          *[z3.Implies(active[k], active[k - 1]) for k in range(1, depth)],
                          z3.Or([z3.And(on, b) for on, b in zip(active, bad)]))
            else:
                whole.add(init, *[c for u in steps for c in u.constraints], z3.Or(bad))
            if whole.check() == z3.unsat:
                results.append(PropertyBmc(prop, True, time.perf_counter() - began))
                continue
            found = self._shortest_counterexample(scope, variant, states, steps, init, bad, prop, max_refinements)
            found.seconds = time.perf_counter() - began
            results.append(found)
        if not variant.bugs:
            known = scope.expected_findings(variant.profile)
            for r in results:
                if r.name in known:
                    r.finding = (f"the correct model breaks it in scope {scope.name} under {variant.profile.value}:"
                                 " a finding about the seeds (docs/model.md, Findings)")
        bugs = tuple(sorted(b.value for b in variant.bugs))
        return BmcResult(name or scope.name, bugs, n, self.noun, depth, time.perf_counter() - start, results)

    def _shortest_counterexample(
        self,
        scope: Scope,
        variant: Variant,
        states: list[SymState],
        steps: list[_Unrolled],
        init: z3.BoolRef,
        bad: list[z3.BoolRef],
        name: str,
        max_refinements: int,
    ) -> PropertyBmc:
        result = PropertyBmc(name, True, 0.0)
        solver = z3.Solver()
        solver.add(init)
        for k in range(1, len(steps) + 1):
            solver.add(steps[k - 1].constraints)
            while True:
                solver.push()
                solver.add(bad[k - 1])
                verdict = solver.check()
                if verdict != z3.sat:
                    solver.pop()
                    result.complete = result.complete and verdict == z3.unsat
                    break
                model = solver.model()
                trace = [_decode_step(model, u) for u in steps[:k]]
                expected = [s.read(model) for s in states[: k + 1]]
                solver.pop()
                replay, reached = self.replay(scope, variant, trace, expected)
                if replay is not None:
                    result.holds = False
                    result.counterexample = Counterexample(
                        name, trace, [a for _, a, _ in replay],
                        tuple(self.broken_properties(expected[-2], expected[-1])),
                    )
                    return result
                # The model cannot take step ``reached`` of this abstract trace after its prefix: block the prefix.
                result.refinements += 1
                if result.refinements > max_refinements:
                    result.complete = False
                    return result
                solver.add(z3.Not(z3.And([_matches(u, s) for u, s in zip(steps, trace[: reached + 1])])))
        return result

    def bmc_in_scope(
        self,
        depth: int = 20,
        variant: Variant = CORRECT,
        scope: str | None = None,
        properties: Iterable[str] | None = None,
        max_refinements: int | None = None,
    ) -> BmcResult:
        """``bmc`` from the named scope's initial state, with as many actors as it has: by default the scope a
        seeded bug of ``variant`` names, else the core's first."""
        self.check_variant(variant)
        refinements = self.bmc_refinements if max_refinements is None else max_refinements
        return self.bmc(SCOPES[scope or self.default_scope(variant)], depth, variant, properties, refinements)

    def report(self, variant: Variant = CORRECT, depth: int = 20, goals: Iterable[str] | None = None) -> list[dict]:
        """What ``kraftcheck prove`` reports for the core: BMC of each property in each of its scopes, then the
        induction obligations for 2 actors and for any number of them. Each row has name, brokers (the domain),
        result, seconds.

        ``goals``: only these properties of the core (``kraftcheck prove --property``): their BMC, and their
        induction obligations with every invariant and lemma assumed as in the whole report. What they are proved
        from is then assumed, not proved: the whole report proves the lemmas too."""
        wanted = set(self.property_names if goals is None else goals)
        properties = [p for p in self.property_names if p in wanted]
        rows = [row for scope in self.scopes
                for row in self.bmc_in_scope(depth, variant, scope=scope, properties=properties).rows()]
        obligations = self.prove_finite(variant, goals=goals) + self.prove_unbounded(variant, goals=goals)
        rows += [self.as_finding(r, variant).as_json() for r in obligations]
        return rows

    def as_finding(self, result: ObligationResult, variant: Variant) -> ObligationResult:
        """A counterexample to an obligation the design itself fails (``findings``) is that finding, for the
        correct model; under a seeded bug every counterexample is reported as it is."""
        action, _, invariant = result.name.partition("/")
        if variant.bugs or result.result != "counterexample-to-induction" or (action, invariant) not in self.findings:
            return result
        return replace(result, result="finding", why=self.findings[(action, invariant)])

    def replay(
        self, scope: Scope, variant: Variant, trace: list[EncodedStep], expected: list[Projection]
    ) -> tuple[Replayed | None, int]:
        """Follow the encoded trace through model.step from the scope's initial state.

        At every step the model's projected state must be the solver's, and the registry properties
        the model says the step breaks must be those the encoding says it breaks. Between encoded
        steps, up to ``max_stutters`` model steps from ``stutters`` may be inserted if they leave
        the projection as it was. Returns the (before, action, after) steps, or None with the index
        of the first encoded step no attempt could take (a guard outside the core, or a model that
        chose otherwise). Any other difference raises EncodingMismatch: the encoding is wrong.
        """
        start = initial_state(scope)
        if self.project(start) != expected[0]:
            raise EncodingMismatch("the initial projection differs from the solver's initial state")
        reached = 0
        tried: dict[tuple[ClusterState, int], int] = {}
        mine = set(self.property_names)

        def check(before: ClusterState, action: Action, after: ClusterState, encoded: list[str], j: int) -> None:
            shown = set(violations(before, action, after)) & mine
            if shown != set(encoded):
                raise EncodingMismatch(
                    f"step {j + 1} ({action!r}): the encoding breaks {sorted(encoded)}, the model {sorted(shown)}"
                )

        def follow(state: ClusterState, j: int, stutters: int, done: Replayed) -> Replayed | None:
            nonlocal reached
            reached = max(reached, j)
            if j == len(trace):
                return done
            if tried.get((state, j), self.max_stutters + 1) <= stutters:
                return None
            tried[(state, j)] = stutters
            step_ = trace[j]
            encoded = self.actions_by_name[step_.action]
            here, want = self.project(state), expected[j + 1]
            wanted = self.order_key(expected[j], want)
            enabled = False
            for action in self.model_actions(step_, state, scope, variant):
                nxt = model_step(state, action, variant)
                if nxt is None:
                    continue
                enabled = True
                got = self.project(nxt)
                if self.order_key(here, got) != wanted:
                    if self.satisfies_transition(here, got, step_.action, step_.actors, variant):
                        continue  # the model chose otherwise, from what the core does not see
                    raise EncodingMismatch(f"step {j + 1}: {action!r} projects to {_diff(want, got)}")
                check(state, action, nxt, self.broken_properties(here, got), j)
                found = follow(nxt, j + 1, stutters, done + [(state, action, nxt)])
                if found is not None:
                    return found
            if not enabled and encoded.exact_guard and self.encoded_guard(here, step_.action, step_.actors, variant):
                raise EncodingMismatch(f"step {j + 1}: {step_} is enabled in the encoding, not in the model")
            if stutters < self.max_stutters and self.stutters is not None:
                same = self.without_step_ghosts(here)
                for action in self.stutters(state, scope):
                    nxt = model_step(state, action, variant)
                    if nxt is None or nxt == state or self.project(nxt) != same:
                        continue
                    check(state, action, nxt, [], j)
                    found = follow(nxt, j, stutters + 1, done + [(state, action, nxt)])
                    if found is not None:
                        return found
            return None

        return follow(start, 0, 0, []), reached


@dataclass
class _Unrolled:
    """One BMC step: a selector per (action, actors), exactly one true, and the step's choices."""

    constraints: list[z3.BoolRef]
    selectors: list[tuple[z3.BoolRef, EncodedStep, tuple[str, ...]]]  # (selector, step, choices it asks)
    choices: Choices
    ordered: list[z3.ExprRef]  # the ordered fields of the step's pre-state (``Core.ordered_terms``)


def _bmc_step(core: Core, pre: SymState, post: SymState, variant: Variant, tag: str) -> _Unrolled:
    """The step relation as next-state functions: each field of ``post`` is an if-then-else over the
    selectors of the actions that change it, else its value in ``pre``. Equivalent to the
    disjunction of ``transition`` over actions and actors (exactly one selector holds), but each
    field mentions only the actions that write it, which keeps the unrolling small."""
    dom = pre.dom
    choices = Choices(tag)
    options = []
    for action in core.bmc_actions:
        for actors in dom.actors(tag, action.arity):
            selector = z3.Bool(f"{action.name}({','.join(map(str, actors))})@{tag}")
            choose = choices.fork()
            effect = action.effect(pre, *actors, variant, choose)
            options.append((selector, actors, effect, EncodedStep(action.name, actors), tuple(choose.asked)))
    constraints = [z3.PbEq([(o[0], 1) for o in options], 1), dom.well_formed(post)]
    constraints += [z3.Implies(selector, effect.guard) for selector, _, effect, _, _ in options]
    for name in core.global_fields:
        value = core.step_fields[name] if name in core.step_fields else pre.values[name]
        for selector, _, effect, _, _ in options:
            if name in effect.changes:
                value = z3.If(selector, effect.changes[name], value)
        constraints.append(post.values[name] == value)
    for name in core.actor_fields:
        for i in range(dom.n):
            value = pre.values[name][i]
            for selector, actors, effect, _, _ in options:
                for b, changed in zip(actors, (effect.mine, effect.peer)):
                    if b == i and name in changed:
                        value = z3.If(selector, changed[name], value)
            constraints.append(post.values[name][i] == value)
    return _Unrolled(constraints, [(o[0], o[3], o[4]) for o in options], choices, core.ordered_terms(pre))


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


def _decode_step(model: z3.ModelRef, unrolled: _Unrolled) -> EncodedStep:
    def value(term: z3.ExprRef) -> bool | int:
        v = model.eval(term, model_completion=True)
        return z3.is_true(v) if z3.is_bool(v) else v.as_long()

    for selector, step_, asked in unrolled.selectors:
        if z3.is_true(model.eval(selector, model_completion=True)):
            values = tuple((name, value(unrolled.choices.terms[name])) for name in asked)
            ordered = [value(t) for t in unrolled.ordered]
            orders = tuple(
                (name, tuple(_sign(int(v) - int(o)) for o in ordered))
                for name, v in values if name in unrolled.choices.numbers
            )
            return EncodedStep(step_.action, step_.actors, values, orders)
    raise AssertionError("no action selected")


def _matches(unrolled: _Unrolled, step_: EncodedStep) -> z3.BoolRef:
    """The step as taken: its action and actors, its Bool choices, and how its integer choices compare with the
    ordered fields (their values themselves mean nothing to the formulas, so blocking one value would block
    nothing)."""
    selector = next(sel for sel, s, _ in unrolled.selectors if (s.action, s.actors) == (step_.action, step_.actors))
    terms = unrolled.choices.terms
    same = [terms[name] == value for name, value in step_.choices if name not in unrolled.choices.numbers]
    for name, signs in step_.orders:
        x = terms[name]
        same += [x < o if sign < 0 else (x == o if sign == 0 else x > o) for sign, o in zip(signs, unrolled.ordered)]
    return z3.And(selector, *same)


def bmc_bits(init: Projection, depth: int, core: Core) -> int:
    """A bit-width no small counter reachable in ``depth`` steps overflows: an epoch or version
    grows by at most one per step, budgets only shrink, the rest are small constants."""
    largest = max(abs(v) for v in _small_integers(init, core)) + depth + 1
    return largest.bit_length() + 2  # a sign bit, and one to spare


def _small_integers(p: Projection, core: Core) -> Iterable[int]:
    for name, kind in core.global_fields.items():
        if kind in (INT, ACTOR):
            yield p[name]
    for name, kind in core.actor_fields.items():
        if kind in (INT, ACTOR):
            yield from p[name]


def _whole_depth_solver() -> z3.Solver:
    """For one query over the whole unrolling: preprocessing first. ``elim-uncnstr`` drops what the
    property does not depend on (a cone of influence, for free), ``solve-eqs`` inlines the
    next-state functions. Measured here, fencing scope at depth 20: 110-150 s as one incremental
    search over all properties, 5-6 s as one such query per property."""
    return z3.Then("simplify", "propagate-values", "solve-eqs", "elim-uncnstr", "simplify", "smt").solver()


def all_hold(rows: list[dict]) -> bool:
    """Every row holds, is proved, or is a finding the design is known to have (a scope's, a core's)."""
    return all(r["result"] in ("holds", "proved", "finding") for r in rows)
