"""z3 proofs of the ZooKeeper controller's epoch fencing: bounded model checking, induction, any N.

Rules:
- The z3 transition system is a *projection* of the Python model, never a second model: every
  variable is read off a ``ClusterState`` by ``project``, every action formula mirrors one
  handler of ``model.step`` (the function it mirrors is named in its docstring), and seeded bugs
  switch the formulas exactly where ``step`` switches its code.
- One named proof obligation per (action, invariant) pair, ``"ElectController/AtMostOneControllerPerEpoch"``,
  so a failed proof names the action that breaks the invariant. Invariants carry the registry's
  names (``model.invariants``); the auxiliary invariants that make them inductive are named lemmas,
  each proved inductive itself.
- Every satisfiable BMC result is decoded into real ``model.actions`` objects and replayed through
  ``model.step`` from the scope's initial state; the replay must break the same named invariants
  (``model.invariants.violations``), or the result is an error, not a finding.
- ``tests/test_proofs.py`` checks on Hypothesis-drawn reachable states that each model step,
  projected, satisfies the formula of the encoded action it is (or a stutter), and that an
  encoded action the model refuses has a false guard in the encoding.

How it works:
- The fencing core (``project``): /controller_epoch (exists, value, version), /controller (exists,
  owner), the zxid, the election / expiry / restart budgets, a sticky ghost "a controller write
  applied under a stale epoch", and per broker: alive, holds a live session, registered, its broker
  epoch, its /brokers/ids znode (exists, czxid), the epoch of its last registration (history), the
  /controller_epoch it observed before an election, and its controller belief (epoch,
  epoch_zk_version, initialized). Fields that mean nothing (no observation, no role, no znode)
  are 0, so a projection is canonical and two projections compare with ``==``.
- Encoded actions: ObserveControllerEpoch, ElectController, ExpireSession, OpenSession,
  RegisterBroker, ResignController, InitializeController, ControllerWrite, StopBroker,
  RestartBroker, Stutter. ``ControllerWrite`` is the model's ``_controller_write`` as the
  fencing core sees it: UpdateFeatures, ElectPartitionLeader, ProcessBrokerChange and a delivered
  ControlledShutdown each either write (a multi that first checks /controller_epoch's version;
  a failed check makes the writer resign) or leave the core unchanged (a stutter). Every other
  model action (Deliver, Drop, SendControlledShutdown, RefreshFeatureCache, ...) leaves the core
  unchanged. Whether InitializeController writes depends on /features, outside the core, so the
  encoding lets it choose (``writes``); likewise ControllerWrite may happen whenever an
  initialized controller is connected. Both are over-approximations: proofs stay sound, and a
  BMC trace that the model cannot follow is refuted by the replay and blocked (refinement).
- Outside the core, and refused by ``project``: ZooKeeper outages (every guard would need
  ``available``) and crashed brokers (a crashed process leaves its session, and its ephemerals,
  alive without an owner process). The scopes "fencing" and "election" have no budget for either.
- Per-step copies: a ``SymState`` holds one z3 constant per field per step (BMC) or per side of
  an obligation (induction). Brokers come from a domain: ``FiniteBrokers(n)`` (broker ids 0..n-1,
  per-broker fields as Python lists of z3 constants, quantifiers expanded) or ``AnyBrokers()``
  (an uninterpreted sort ``Broker``, per-broker fields as arrays over it, quantifiers as z3
  ``ForAll``). The action formulas, invariants and lemmas are written once against the domain.
- Why the unbounded proof is decided, not just attempted: the only terms of sort ``Broker`` are
  constants (the acting broker, the /controller owner, ``nobody``, and the Skolem constants of a
  negated invariant); no function returns a ``Broker``. Invariants are universal (``∀`` only), so
  the negated obligation is ``∀``-only after Skolemization over a finite Herbrand universe of
  ``Broker`` terms: instantiating the quantifiers with those constants is complete (the EPR
  argument mypyvy and Ivy use, with integers only in the values), and z3's model-based quantifier
  instantiation finds that instantiation.
- ``bmc`` unrolls ``depth`` steps from ``project(initial_state(scope))`` and asks, per property,
  whether it breaks at any step; where it can, an incremental search from depth 1 up finds a
  shortest trace, which is decoded and replayed (a trace the model cannot follow is blocked and
  the search goes on). ``prove`` discharges Init => I for every state invariant I (Init is the
  cold start of any cluster) and Inv /\\ T_a => I' for every action a and invariant I, where Inv
  is all state invariants and lemmas; ``prove_unbounded`` does the same over ``AnyBrokers``.
- The lemmas (``INVARIANTS`` with ``lemma=True``): /controller_epoch always exists and its value
  equals its version; an observation is a past (value, version) pair with value = version; a
  believed epoch equals the believed version, which is not ahead of the znode's; a stopped broker
  holds nothing; a registration lives exactly as long as its session and its czxid is the broker
  epoch; broker epochs and czxids are past zxids. Together with the six properties they are
  inductive for every encoded action, which is what makes each property hold forever.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import z3

from model import zookeeper as zkm
from model.actions import (
    Action,
    Deliver,
    ElectController,
    ElectPartitionLeader,
    ExpireSession,
    InitializeController,
    ObserveControllerEpoch,
    OpenSession,
    ProcessBrokerChange,
    RegisterBroker,
    ResignController,
    RestartBroker,
    StopBroker,
    UpdateFeatures,
)
from model.bugs import CORRECT, SEEDED_BUGS_BY_NAME, Bug, Variant
from model.invariants import violations
from model.scopes import SCOPES, Scope, initial_state
from model.state import BROKER_IDS, CONTROLLER, CONTROLLER_EPOCH, ClusterState, ControlledShutdown
from model.step import ABSENT, successors
from model.step import step as model_step
from model.types import UNKNOWN_BROKER_EPOCH, BrokerId

# The seeded bugs the encoding switches, with the encoded actions whose formulas they change
# (where model.step switches its code).
ENCODED_BUGS: dict[Bug, tuple[str, ...]] = {
    # SetData /controller_epoch with version -1 instead of the version read
    Bug.ELECTION_WITHOUT_EPOCH_CAS: ("ElectController",),
    # the new controller writes back the epoch it read
    Bug.ELECTION_REUSES_EPOCH: ("ElectController",),
    # _controller_write without the Check on /controller_epoch
    Bug.SKIP_CONTROLLER_EPOCH_CHECK: ("InitializeController", "ControllerWrite"),
    # a re-registering broker keeps its previous epoch
    Bug.BROKER_KEEPS_OLD_EPOCH: ("RegisterBroker",),
    # the current controller deletes /controller_epoch when it stops cleanly
    Bug.STOP_DELETES_CONTROLLER_EPOCH: ("StopBroker",),
}

NO_PREVIOUS_REGISTRATION = -1  # history.registered_epoch(b) is None
NO_EPOCH_ZNODE = int(ABSENT)  # the version ObserveControllerEpoch records when /controller_epoch is absent

# ---- the projection -----------------------------------------------------------------------------

# Field kinds. ZXID fields hold zxids (unbounded, compared by order); INT fields hold small counters
# (epochs, versions, budgets); the BMC gives them different z3 sorts (see FiniteBrokers).
ZXID, INT, BOOL, BROKER = "zxid", "int", "bool", "broker"

GLOBAL_FIELDS: dict[str, str] = {
    "zxid": ZXID,
    "epoch_exists": BOOL,  # /controller_epoch exists
    "epoch_value": INT,  # its data: the controller epoch
    "epoch_version": INT,  # its znode version
    "controller_exists": BOOL,  # /controller exists
    "controller_owner": BROKER,  # the broker whose session owns /controller (and whose id is its data)
    "elections_left": INT,
    "expiries_left": INT,
    "restarts_left": INT,
    "stale_write_applied": BOOL,  # ghost: some applied controller write had writer epoch != /controller_epoch
}

BROKER_FIELDS: dict[str, str] = {
    "alive": BOOL,
    "has_session": BOOL,  # its session is alive and its own (_holds_session)
    "registered": BOOL,
    "broker_epoch": ZXID,
    "registration_exists": BOOL,  # /brokers/ids/<id> exists
    "registration_czxid": ZXID,
    "last_registered_epoch": ZXID,  # history.registered_epoch, NO_PREVIOUS_REGISTRATION if none
    "observing": BOOL,  # observed_epoch is not None
    "observed_epoch": INT,
    "observed_version": INT,  # NO_EPOCH_ZNODE when it saw no /controller_epoch
    "is_controller": BOOL,  # controller is not None
    "controller_epoch": INT,  # its ControllerRole.epoch
    "controller_version": INT,  # its ControllerRole.epoch_zk_version
    "initialized": BOOL,
}

Projection = dict[str, Any]  # globals -> int | bool; per-broker fields -> tuple, one value per broker


class OutsideProjection(ValueError):
    """The state uses something the fencing core does not model (an outage, an orphaned session)."""


def project(state: ClusterState) -> Projection:
    """The fencing core of ``state``; raises OutsideProjection where the core's assumptions fail."""
    zk = state.zk
    if not zk.available:
        raise OutsideProjection("ZooKeeper is unavailable: outages are not encoded")
    clients = dict(zk.sessions)
    for session, client in zk.sessions:
        # Every live session is the one its broker holds: no crashed process left one behind.
        if state.brokers[client].session != session:
            raise OutsideProjection(f"session {session} of broker {client} outlived its process")

    def holds_session(b) -> bool:
        return clients.get(b.session) == b.id

    out: Projection = {"zxid": zk.zxid}
    epoch = zkm.get(zk, CONTROLLER_EPOCH)
    out["epoch_exists"] = epoch is not None
    out["epoch_value"] = 0 if epoch is None else int(epoch.data)
    out["epoch_version"] = 0 if epoch is None else epoch.version
    controller = zkm.get(zk, CONTROLLER)
    out["controller_exists"] = controller is not None
    if controller is None:
        out["controller_owner"] = 0
    else:
        owner = clients.get(controller.ephemeral_owner)
        if owner != controller.data:
            raise OutsideProjection("/controller is not owned by the session of the broker it names")
        out["controller_owner"] = owner
    out["elections_left"] = state.budget.elections
    out["expiries_left"] = state.budget.expiries
    out["restarts_left"] = state.budget.restarts
    out["stale_write_applied"] = any(w.writer_epoch != w.zk_epoch for w in state.ghost.applied_writes)

    rows: dict[str, list] = {name: [] for name in BROKER_FIELDS}
    for b in state.brokers:
        node = zkm.get(zk, f"{BROKER_IDS}/{b.id}")
        if node is not None and clients.get(node.ephemeral_owner) != b.id:
            raise OutsideProjection(f"{BROKER_IDS}/{b.id} is owned by another broker's session")
        previous = state.history.registered_epoch(b.id)
        role = b.controller
        values = {
            "alive": b.alive,
            "has_session": holds_session(b),
            "registered": b.registered,
            "broker_epoch": int(b.epoch),
            "registration_exists": node is not None,
            "registration_czxid": 0 if node is None else node.czxid,
            "last_registered_epoch": NO_PREVIOUS_REGISTRATION if previous is None else int(previous),
            "observing": b.observed_epoch is not None,
            "observed_epoch": 0 if b.observed_epoch is None else int(b.observed_epoch[0]),
            "observed_version": 0 if b.observed_epoch is None else int(b.observed_epoch[1]),
            "is_controller": role is not None,
            "controller_epoch": 0 if role is None else int(role.epoch),
            "controller_version": 0 if role is None else int(role.epoch_zk_version),
            "initialized": role is not None and role.initialized,
        }
        for name, value in values.items():
            rows[name].append(value)
    out.update({name: tuple(values) for name, values in rows.items()})
    return out


# ---- broker domains -----------------------------------------------------------------------------

class FiniteBrokers:
    """Brokers 0..n-1: per-broker fields are lists of z3 terms, quantifiers expand to conjunctions.

    With ``bits``, the small counters (INT fields, and broker ids) are signed bit-vectors of that
    width instead of Ints; ZXID fields stay Ints. The BMC uses this, with a width no value
    reachable within its depth can overflow (``bmc_bits``).
    """

    def __init__(self, n: int, bits: int | None = None) -> None:
        self.n = n
        self.bits = bits
        self.label = f"{n} brokers"

    def value_sort(self, kind: str) -> z3.SortRef:
        if kind == BOOL:
            return z3.BoolSort()
        if kind == ZXID or not self.bits:
            return z3.IntSort()
        return z3.BitVecSort(self.bits)

    def actors(self, tag: str) -> list[int]:
        return list(range(self.n))

    def broker_const(self, name: str) -> z3.ExprRef:
        return z3.Const(name, self.value_sort(INT))

    def broker_term(self, b: int) -> z3.ExprRef:
        return z3.BitVecVal(b, self.bits) if self.bits else z3.IntVal(b)

    def nobody(self) -> z3.ExprRef:
        return self.broker_term(0)  # the canonical owner when /controller is absent

    def well_formed(self, s: SymState) -> z3.BoolRef:
        return z3.And(0 <= s.controller_owner, s.controller_owner < self.n)

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


class AnyBrokers:
    """Any number of brokers: an uninterpreted sort, per-broker fields as arrays, ``ForAll`` quantifiers."""

    label = "any number of brokers"

    def __init__(self) -> None:
        self.broker_sort = z3.DeclareSort("Broker")

    def value_sort(self, kind: str) -> z3.SortRef:
        return z3.BoolSort() if kind == BOOL else z3.IntSort()

    def actors(self, tag: str) -> list[z3.ExprRef]:
        return [z3.Const(f"actor@{tag}", self.broker_sort)]

    def broker_const(self, name: str) -> z3.ExprRef:
        return z3.Const(name, self.broker_sort)

    def broker_term(self, b: z3.ExprRef) -> z3.ExprRef:
        return b

    def nobody(self) -> z3.ExprRef:
        return z3.Const("nobody", self.broker_sort)

    def well_formed(self, s: SymState) -> z3.BoolRef:
        return z3.BoolVal(True)

    def field(self, name: str, sort: str) -> z3.ArrayRef:
        return z3.Array(name, self.broker_sort, self.value_sort(sort))

    def at(self, values: z3.ArrayRef, b) -> z3.ExprRef:
        return values[b]

    def put(self, values: z3.ArrayRef, b, value) -> z3.ArrayRef:
        return z3.Store(values, b, value)

    def same(self, left: z3.ArrayRef, right: z3.ArrayRef) -> z3.BoolRef:
        return left == right

    def every(self, fn) -> z3.BoolRef:
        b = z3.Const("b", self.broker_sort)
        return z3.ForAll([b], fn(b))

    def every_pair(self, fn) -> z3.BoolRef:
        b, c = z3.Consts("b c", self.broker_sort)
        return z3.ForAll([b, c], z3.Implies(b != c, fn(b, c)))


Brokers = FiniteBrokers | AnyBrokers


class SymState:
    """One copy of the projected state as z3 terms: ``s.zxid`` for globals, ``s.of(b).alive`` per broker."""

    def __init__(self, dom: Brokers, values: dict[str, Any]) -> None:
        self.dom = dom
        self.values = values

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def of(self, b) -> BrokerView:
        return BrokerView(self, b)

    @classmethod
    def fresh(cls, dom: Brokers, tag: str) -> SymState:
        values: dict[str, Any] = {}
        for name, sort in GLOBAL_FIELDS.items():
            if sort == BROKER:
                values[name] = dom.broker_const(f"{name}@{tag}")
            else:
                values[name] = z3.Const(f"{name}@{tag}", dom.value_sort(sort))
        for name, sort in BROKER_FIELDS.items():
            values[name] = dom.field(f"{name}@{tag}", sort)
        return cls(dom, values)

    @classmethod
    def concrete(cls, dom: FiniteBrokers, p: Projection) -> SymState:
        """A projection as z3 values, so a formula over it simplifies to true or false."""
        values: dict[str, Any] = {}
        for name, sort in GLOBAL_FIELDS.items():
            values[name] = z3.BoolVal(p[name]) if sort == BOOL else z3.IntVal(p[name])
        for name, sort in BROKER_FIELDS.items():
            values[name] = [z3.BoolVal(v) if sort == BOOL else z3.IntVal(v) for v in p[name]]
        return cls(dom, values)

    def equals(self, p: Projection) -> z3.BoolRef:
        """This copy holds the projection ``p`` (finite domain)."""
        parts = [self.values[name] == p[name] for name in GLOBAL_FIELDS]
        for name in BROKER_FIELDS:
            parts += [x == v for x, v in zip(self.values[name], p[name])]
        return z3.And(parts)

    def read(self, model: z3.ModelRef) -> Projection:
        """The projection a z3 model assigns to this copy (finite domain)."""

        def value(term):
            v = model.eval(term, model_completion=True)
            if z3.is_bool(v):
                return z3.is_true(v)
            return v.as_signed_long() if z3.is_bv(v) else v.as_long()

        out: Projection = {name: value(self.values[name]) for name in GLOBAL_FIELDS}
        out.update({name: tuple(value(t) for t in self.values[name]) for name in BROKER_FIELDS})
        return out


class BrokerView:
    def __init__(self, state: SymState, b) -> None:
        self._state = state
        self._b = b

    def __getattr__(self, name: str) -> z3.ExprRef:
        state = self.__dict__["_state"]
        return state.dom.at(state.values[name], self.__dict__["_b"])


# ---- the actions --------------------------------------------------------------------------------

@dataclass
class Effect:
    """An action of broker ``b``: when it is enabled, and the fields it changes (globals, and b's own)."""

    guard: z3.BoolRef
    changes: dict[str, Any] = field(default_factory=dict)
    mine: dict[str, Any] = field(default_factory=dict)


NO_OBSERVATION = {"observing": False, "observed_epoch": 0, "observed_version": 0}
NO_ROLE = {"is_controller": False, "controller_epoch": 0, "controller_version": 0, "initialized": False}
NO_REGISTRATION_ZNODE = {"registration_exists": False, "registration_czxid": 0}
# _fresh_process: what a stopped process forgets; history (last_registered_epoch) stays.
FRESH_PROCESS = {
    "has_session": False,
    "registered": False,
    "broker_epoch": int(UNKNOWN_BROKER_EPOCH),
    **NO_OBSERVATION,
    **NO_ROLE,
}


def _connected(s: SymState, b) -> z3.BoolRef:
    me = s.of(b)
    return z3.And(me.alive, me.has_session)  # ZooKeeper is always available in the core


def _owns_controller_znode(s: SymState, b) -> z3.BoolRef:
    return z3.And(s.controller_exists, s.controller_owner == b)


def _is_current_controller(s: SymState, b) -> z3.BoolRef:
    """model.step.is_current_controller: it holds /controller and /controller_epoch's version."""
    me = s.of(b)
    return z3.And(
        me.is_controller,
        _connected(s, b),
        _owns_controller_znode(s, b),
        s.epoch_exists,
        s.epoch_version == me.controller_version,
    )


def _closes_session(s: SymState, b) -> dict[str, Any]:
    """zookeeper.close_session of b's session: one zxid; /controller goes if b's session owned it."""
    mine_goes = _owns_controller_znode(s, b)
    return {
        "zxid": s.zxid + 1,
        "controller_exists": z3.And(s.controller_exists, z3.Not(mine_goes)),
        "controller_owner": z3.If(mine_goes, s.dom.nobody(), s.controller_owner),
    }


def observe_controller_epoch(s: SymState, b, variant: Variant, writes) -> Effect:
    """_observe_controller_epoch: a registered broker that sees no /controller reads /controller_epoch."""
    me = s.of(b)
    guard = z3.And(
        _connected(s, b), me.registered, z3.Not(me.is_controller), z3.Not(me.observing), z3.Not(s.controller_exists)
    )
    return Effect(
        guard,
        mine={
            "observing": True,
            "observed_epoch": z3.If(s.epoch_exists, s.epoch_value, 0),
            "observed_version": z3.If(s.epoch_exists, s.epoch_version, NO_EPOCH_ZNODE),
        },
    )


def elect_controller(s: SymState, b, variant: Variant, writes) -> Effect:
    """_elect_controller: one multi creating /controller and bumping /controller_epoch by CAS."""
    me = s.of(b)
    guard = z3.And(me.observing, _connected(s, b), me.registered, s.elections_left > 0, z3.Not(s.controller_exists))
    seen, version = me.observed_epoch, me.observed_version
    epoch = seen if variant.has(Bug.ELECTION_REUSES_EPOCH) else seen + 1
    saw_absent = version == NO_EPOCH_ZNODE
    if variant.has(Bug.ELECTION_WITHOUT_EPOCH_CAS):
        set_ok = s.epoch_exists  # SetData with version -1 only needs the znode
    else:
        set_ok = z3.And(s.epoch_exists, s.epoch_version == version)
    won = z3.If(saw_absent, z3.Not(s.epoch_exists), set_ok)  # Create /controller cannot fail: guarded
    new_version = z3.If(saw_absent, 0, s.epoch_version + 1)
    return Effect(
        guard,
        changes={
            "zxid": s.zxid + 1,  # a multi takes a zxid whether it succeeds or fails
            "controller_exists": z3.Or(won, s.controller_exists),
            "controller_owner": z3.If(won, s.dom.broker_term(b), s.controller_owner),
            "epoch_exists": z3.Or(won, s.epoch_exists),
            "epoch_value": z3.If(won, epoch, s.epoch_value),
            "epoch_version": z3.If(won, new_version, s.epoch_version),
            "elections_left": z3.If(won, s.elections_left - 1, s.elections_left),
        },
        mine={
            **NO_OBSERVATION,
            "is_controller": z3.Or(won, me.is_controller),
            "controller_epoch": z3.If(won, epoch, me.controller_epoch),
            "controller_version": z3.If(won, new_version, me.controller_version),
            "initialized": z3.And(z3.Not(won), me.initialized),
        },
    )


def expire_session(s: SymState, b, variant: Variant, writes) -> Effect:
    """_expire_session of the session broker b holds: its ephemerals go, the broker does not know yet."""
    me = s.of(b)
    guard = z3.And(me.has_session, s.expiries_left > 0)
    return Effect(
        guard,
        changes={**_closes_session(s, b), "expiries_left": s.expiries_left - 1},
        mine={"has_session": False, **NO_REGISTRATION_ZNODE},
    )


def open_session(s: SymState, b, variant: Variant, writes) -> Effect:
    """_open_session: a new session (one zxid); the broker must register again in it."""
    me = s.of(b)
    return Effect(
        z3.And(me.alive, z3.Not(me.has_session)),
        changes={"zxid": s.zxid + 1},
        mine={"has_session": True, "registered": False},
    )


def register_broker(s: SymState, b, variant: Variant, writes) -> Effect:
    """_register: create the ephemeral /brokers/ids/<id>; its czxid (the new zxid) is the broker epoch."""
    me = s.of(b)
    guard = z3.And(_connected(s, b), z3.Not(me.registered), z3.Not(me.registration_exists))
    czxid = s.zxid + 1
    if variant.has(Bug.BROKER_KEEPS_OLD_EPOCH):
        epoch = z3.If(me.broker_epoch != int(UNKNOWN_BROKER_EPOCH), me.broker_epoch, czxid)
    else:
        epoch = czxid
    return Effect(
        guard,
        changes={"zxid": czxid},
        mine={
            "registration_exists": True,
            "registration_czxid": czxid,
            "broker_epoch": epoch,
            "last_registered_epoch": epoch,
            "registered": True,
        },
    )


def resign_controller(s: SymState, b, variant: Variant, writes) -> Effect:
    """_resign: a controller that ZooKeeper no longer agrees is current steps down."""
    me = s.of(b)
    return Effect(z3.And(me.is_controller, z3.Not(_is_current_controller(s, b))), mine=dict(NO_ROLE))


def _fenced_write(s: SymState, b, variant: Variant) -> tuple[z3.BoolRef, dict[str, Any], dict[str, Any]]:
    """_controller_write as the core sees it: (applied, global changes, the writer's changes).

    Fenced, the multi's first op checks /controller_epoch's version against the writer's
    epoch_zk_version: NoNode or BadVersion fails the whole multi and the writer resigns. The
    write's own ops read their versions in the same step, so only that check can fail them.
    """
    me = s.of(b)
    if variant.has(Bug.SKIP_CONTROLLER_EPOCH_CHECK):
        applied: z3.BoolRef = z3.BoolVal(True)
    else:
        applied = z3.And(s.epoch_exists, s.epoch_version == me.controller_version)
    stale = z3.Or(z3.Not(s.epoch_exists), me.controller_epoch != s.epoch_value)
    changes = {
        "zxid": s.zxid + 1,
        "stale_write_applied": z3.Or(s.stale_write_applied, z3.And(applied, stale)),
    }
    resigned = {name: z3.If(applied, getattr(me, name), value) for name, value in NO_ROLE.items()}
    return applied, changes, resigned


def initialize_controller(s: SymState, b, variant: Variant, writes) -> Effect:
    """_initialize_controller: the /features bootstrap write (if ``writes``), then initialized."""
    me = s.of(b)
    guard = z3.And(me.is_controller, z3.Not(me.initialized), _connected(s, b))
    applied, changes, mine = _fenced_write(s, b, variant)
    mine = {**mine, "initialized": applied}
    no_write = {"initialized": True}
    return Effect(
        guard,
        changes={name: z3.If(writes, value, getattr(s, name)) for name, value in changes.items()},
        mine={
            name: z3.If(writes, mine.get(name, getattr(me, name)), no_write.get(name, getattr(me, name)))
            for name in set(mine) | set(no_write)
        },
    )


def controller_write(s: SymState, b, variant: Variant, writes) -> Effect:
    """A write through _controller_write by an initialized, connected controller (possibly a zombie)."""
    me = s.of(b)
    guard = z3.And(me.is_controller, me.initialized, _connected(s, b))
    _, changes, mine = _fenced_write(s, b, variant)
    return Effect(guard, changes=changes, mine=mine)


def stop_broker(s: SymState, b, variant: Variant, writes) -> Effect:
    """_stop: the session closes at once (the current controller may first delete the epoch: seeded bug)."""
    me = s.of(b)
    guard = z3.And(me.alive, s.restarts_left > 0)
    closes = _closes_session(s, b)
    changes: dict[str, Any] = {"restarts_left": s.restarts_left - 1}
    zxid = s.zxid
    if variant.has(Bug.STOP_DELETES_CONTROLLER_EPOCH):
        deletes = z3.And(me.has_session, _is_current_controller(s, b))
        zxid = z3.If(deletes, zxid + 1, zxid)
        changes.update(
            epoch_exists=z3.And(s.epoch_exists, z3.Not(deletes)),
            epoch_value=z3.If(deletes, 0, s.epoch_value),
            epoch_version=z3.If(deletes, 0, s.epoch_version),
        )
    changes.update(
        zxid=z3.If(me.has_session, zxid + 1, zxid),
        controller_exists=z3.If(me.has_session, closes["controller_exists"], s.controller_exists),
        controller_owner=z3.If(me.has_session, closes["controller_owner"], s.controller_owner),
    )
    # Its registration goes with its session; without a session there is none to remove.
    znode = {name: z3.If(me.has_session, value, getattr(me, name)) for name, value in NO_REGISTRATION_ZNODE.items()}
    return Effect(guard, changes=changes, mine={**FRESH_PROCESS, **znode, "alive": False})


def restart_broker(s: SymState, b, variant: Variant, writes) -> Effect:
    """_restart: a stopped process starts again with an empty memory (which _stop already emptied)."""
    return Effect(z3.Not(s.of(b).alive), mine={"alive": True})


def stutter(s: SymState, b, variant: Variant, writes) -> Effect:
    """Every model step that leaves the fencing core as it was (Deliver, Drop, a refused request...)."""
    return Effect(z3.BoolVal(True))


@dataclass(frozen=True)
class EncodedAction:
    name: str  # the model action's class name (ControllerWrite and Stutter stand for several)
    effect: Callable[..., Effect]
    chooses_write: bool = False  # the encoding chooses whether a write happens (``writes``)
    exact_guard: bool = True  # the model is enabled exactly when the guard holds


ACTIONS: tuple[EncodedAction, ...] = (
    EncodedAction("ObserveControllerEpoch", observe_controller_epoch),
    EncodedAction("ElectController", elect_controller),
    EncodedAction("ExpireSession", expire_session),
    EncodedAction("OpenSession", open_session),
    EncodedAction("RegisterBroker", register_broker),
    EncodedAction("ResignController", resign_controller),
    # The model may also refuse these when its in-flight cap is full: the guard is necessary, not sufficient.
    EncodedAction("InitializeController", initialize_controller, chooses_write=True, exact_guard=False),
    EncodedAction("ControllerWrite", controller_write, exact_guard=False),
    EncodedAction("StopBroker", stop_broker),
    EncodedAction("RestartBroker", restart_broker),
    EncodedAction("Stutter", stutter, exact_guard=False),
)
ACTIONS_BY_NAME = {a.name: a for a in ACTIONS}

# Model actions whose step may go through _controller_write (then it is a ControllerWrite, else a Stutter).
WRITING_ACTIONS = (UpdateFeatures, ElectPartitionLeader, ProcessBrokerChange)


def check_variant(variant: Variant) -> None:
    unknown = variant.bugs - ENCODED_BUGS.keys()
    if unknown:
        names = ", ".join(sorted(b.value for b in unknown))
        raise ValueError(f"the z3 encoding does not switch these seeded bugs: {names}")


def transition(action: EncodedAction, pre: SymState, post: SymState, b, variant: Variant, writes) -> z3.BoolRef:
    """``post`` is ``pre`` after ``action`` by broker ``b``: the guard, the changes, and the frame."""
    dom = pre.dom
    effect = action.effect(pre, b, variant, writes)
    parts = [effect.guard]
    for name in GLOBAL_FIELDS:
        parts.append(post.values[name] == effect.changes.get(name, pre.values[name]))
    for name in BROKER_FIELDS:
        new = dom.put(pre.values[name], b, effect.mine[name]) if name in effect.mine else pre.values[name]
        parts.append(dom.same(post.values[name], new))
    return z3.And(parts)


def any_transition(action: EncodedAction, pre: SymState, post: SymState, variant: Variant, tag: str) -> z3.BoolRef:
    """``action`` by some broker, with the write choice left free."""
    writes = z3.Bool(f"writes@{tag}")
    return z3.Or([transition(action, pre, post, b, variant, writes) for b in pre.dom.actors(tag)])


def _value(term: z3.ExprRef) -> Any:
    v = z3.simplify(term)
    if z3.is_true(v) or z3.is_false(v):
        return z3.is_true(v)
    if z3.is_int_value(v):
        return v.as_long()
    raise ValueError(f"not a concrete value: {v}")


def _concrete(v: Any) -> Any:
    return v if isinstance(v, (bool, int)) else _value(v)


def encoded_guard(p: Projection, action: str, b: int, variant: Variant = CORRECT) -> bool:
    dom = FiniteBrokers(len(p["alive"]))
    return _value(ACTIONS_BY_NAME[action].effect(SymState.concrete(dom, p), b, variant, z3.BoolVal(False)).guard)


def encoded_successor(
    p: Projection, action: str, b: int, variant: Variant = CORRECT, writes: bool = False
) -> Projection | None:
    """The projection after ``action`` by broker ``b`` according to the encoding, None if its guard is false."""
    dom = FiniteBrokers(len(p["alive"]))
    s = SymState.concrete(dom, p)
    effect = ACTIONS_BY_NAME[action].effect(s, b, variant, z3.BoolVal(writes))
    if not _value(effect.guard):
        return None
    out = dict(p)
    out.update({name: _concrete(v) for name, v in effect.changes.items()})
    for name, v in effect.mine.items():
        row = list(out[name])
        row[b] = _concrete(v)
        out[name] = tuple(row)
    return out


def satisfies_transition(
    before: Projection, after: Projection, action: str, b: int, variant: Variant = CORRECT
) -> bool:
    """The concrete pair satisfies the action's z3 formula (for some choice of ``writes``)."""
    dom = FiniteBrokers(len(before["alive"]))
    pre, post = SymState.concrete(dom, before), SymState.concrete(dom, after)
    formula = z3.Or(
        [transition(ACTIONS_BY_NAME[action], pre, post, b, variant, z3.BoolVal(w)) for w in (False, True)]
    )
    return _value(formula)


# ---- invariants and lemmas ----------------------------------------------------------------------

@dataclass(frozen=True)
class Invariant:
    name: str
    meaning: str
    holds: Callable[..., z3.BoolRef]  # (s) for a state invariant, (pre, post) for a step invariant
    on_step: bool = False
    lemma: bool = False  # a strengthening lemma, not a registry property


def _at_most_one_controller_per_epoch(s: SymState) -> z3.BoolRef:
    def distinct(a, c):
        x, y = s.of(a), s.of(c)
        return z3.Not(z3.And(x.is_controller, y.is_controller, x.controller_epoch == y.controller_epoch))

    return s.dom.every_pair(distinct)


def _controller_epoch_never_decreases(pre: SymState, post: SymState) -> z3.BoolRef:
    return z3.Implies(pre.epoch_exists, z3.And(post.epoch_exists, post.epoch_value >= pre.epoch_value))


def _every_election_bumps_controller_epoch(pre: SymState, post: SymState) -> z3.BoolRef:
    prior = z3.If(pre.epoch_exists, pre.epoch_value, 0)

    def bumps(b):
        old, new = pre.of(b), post.of(b)
        return z3.Implies(
            z3.And(z3.Not(old.is_controller), new.is_controller),
            z3.And(new.controller_epoch == prior + 1, post.epoch_exists, post.epoch_value == new.controller_epoch),
        )

    return pre.dom.every(bumps)


def _only_current_controller_writes_apply(s: SymState) -> z3.BoolRef:
    return z3.Not(s.stale_write_applied)


def _broker_epoch_is_registration_czxid(s: SymState) -> z3.BoolRef:
    def matches(b):
        me = s.of(b)
        return z3.Implies(
            z3.And(me.alive, me.registered, me.has_session, me.registration_exists),
            me.broker_epoch == me.registration_czxid,
        )

    return s.dom.every(matches)


def _broker_epoch_grows_with_each_registration(pre: SymState, post: SymState) -> z3.BoolRef:
    def grows(b):
        old, new = pre.of(b), post.of(b)
        previous = old.last_registered_epoch
        return z3.Implies(
            z3.And(new.registered, z3.Not(old.registered), previous != NO_PREVIOUS_REGISTRATION),
            new.broker_epoch > previous,
        )

    return pre.dom.every(grows)


# Lemmas: what the proofs of the properties above need to know about every reachable state.

def _epoch_znode_exists(s: SymState) -> z3.BoolRef:
    return s.epoch_exists


def _epoch_value_is_version(s: SymState) -> z3.BoolRef:
    return z3.And(s.epoch_value == s.epoch_version, 0 <= s.epoch_version)


def _observations_are_past_epochs(s: SymState) -> z3.BoolRef:
    def past(b):
        me = s.of(b)
        return z3.Implies(
            me.observing,
            z3.And(
                me.observed_epoch == me.observed_version,
                0 <= me.observed_version,
                me.observed_version <= s.epoch_version,
            ),
        )

    return s.dom.every(past)


def _believed_epochs_are_not_ahead(s: SymState) -> z3.BoolRef:
    def behind(b):
        me = s.of(b)
        return z3.Implies(
            me.is_controller,
            z3.And(me.controller_epoch == me.controller_version, me.controller_version <= s.epoch_version),
        )

    return s.dom.every(behind)


def _stopped_broker_holds_nothing(s: SymState) -> z3.BoolRef:
    def fresh(b):
        me = s.of(b)
        return z3.Implies(
            z3.Not(me.alive), z3.Not(z3.Or(me.has_session, me.registered, me.is_controller, me.observing))
        )

    return s.dom.every(fresh)


def _registration_lives_with_its_session(s: SymState) -> z3.BoolRef:
    def lives(b):
        me = s.of(b)
        return z3.And(
            z3.Implies(me.registration_exists, me.has_session),
            z3.Implies(
                z3.And(me.registered, me.has_session),
                z3.And(me.registration_exists, me.broker_epoch == me.registration_czxid),
            ),
        )

    return s.dom.every(lives)


def _epochs_are_past_zxids(s: SymState) -> z3.BoolRef:
    def past(b):
        me = s.of(b)
        return z3.And(me.broker_epoch <= s.zxid, me.last_registered_epoch <= s.zxid, me.registration_czxid <= s.zxid)

    return z3.And(0 <= s.zxid, s.dom.every(past))


INVARIANTS: tuple[Invariant, ...] = (
    Invariant("AtMostOneControllerPerEpoch", "no two brokers believe they are controller in one epoch",
              _at_most_one_controller_per_epoch),
    Invariant("ControllerEpochNeverDecreases", "/controller_epoch is never removed and never decreases",
              _controller_epoch_never_decreases, on_step=True),
    Invariant("EveryElectionBumpsControllerEpoch", "a new controller takes /controller_epoch + 1 and writes it",
              _every_election_bumps_controller_epoch, on_step=True),
    Invariant("OnlyCurrentControllerWritesApply", "an applied write's writer epoch is /controller_epoch's value",
              _only_current_controller_writes_apply),
    Invariant("BrokerEpochIsRegistrationCzxid", "a registered broker's epoch is its znode's czxid",
              _broker_epoch_is_registration_czxid),
    Invariant("BrokerEpochGrowsWithEachRegistration", "each registration's epoch beats the previous one",
              _broker_epoch_grows_with_each_registration, on_step=True),
    # Strengthening lemmas.
    Invariant("EpochZnodeExists", "/controller_epoch exists (it is created at cluster birth, never deleted)",
              _epoch_znode_exists, lemma=True),
    Invariant("EpochValueIsVersion", "/controller_epoch's value equals its version, >= 0: both start at 0 and"
              " every election's compare-and-set bumps both by one", _epoch_value_is_version, lemma=True),
    Invariant("ObservationsArePastEpochs", "an observed /controller_epoch is a (value, version) pair it held:"
              " value = version <= the current version", _observations_are_past_epochs, lemma=True),
    Invariant("BelievedEpochsAreNotAhead", "a believed controller epoch equals its epoch_zk_version, which is"
              " at most /controller_epoch's version", _believed_epochs_are_not_ahead, lemma=True),
    Invariant("StoppedBrokerHoldsNothing", "a stopped broker has no session, registration, observation or role",
              _stopped_broker_holds_nothing, lemma=True),
    Invariant("RegistrationLivesWithItsSession", "a registration znode lives only with its broker's session, and"
              " a registered broker with its session has the znode and its czxid as epoch",
              _registration_lives_with_its_session, lemma=True),
    Invariant("EpochsArePastZxids", "the zxid is >= 0, and broker epochs, registration czxids and registered"
              " epochs are zxids already handed out",
              _epochs_are_past_zxids, lemma=True),
)
INVARIANTS_BY_NAME = {i.name: i for i in INVARIANTS}
PROPERTY_NAMES = tuple(i.name for i in INVARIANTS if not i.lemma)  # the registry properties encoded here
STATE_INVARIANTS = tuple(i for i in INVARIANTS if not i.on_step)


def holds(inv: Invariant, pre: SymState, post: SymState) -> z3.BoolRef:
    """``inv`` after a step from ``pre`` to ``post``."""
    return inv.holds(pre, post) if inv.on_step else inv.holds(post)


def broken_properties(pre: Projection, post: Projection) -> list[str]:
    """The registry properties the encoding says the concrete step from ``pre`` to ``post`` breaks."""
    dom = FiniteBrokers(len(pre["alive"]))
    a, b = SymState.concrete(dom, pre), SymState.concrete(dom, post)
    return [i.name for i in INVARIANTS if not i.lemma and not _value(holds(i, a, b))]


def broken_state_invariants(p: Projection) -> list[str]:
    """The state invariants and lemmas a concrete projection breaks (none, for a reachable state)."""
    s = SymState.concrete(FiniteBrokers(len(p["alive"])), p)
    return [i.name for i in STATE_INVARIANTS if not _value(i.holds(s))]


def cold_start(s: SymState) -> z3.BoolRef:
    """scopes.cold_state, for any zxid and budgets: /controller_epoch = 0 (version 0), brokers just started."""

    def fresh(b):
        me = s.of(b)
        return z3.And(
            me.alive, z3.Not(me.has_session), z3.Not(me.registered), me.broker_epoch == int(UNKNOWN_BROKER_EPOCH),
            z3.Not(me.registration_exists), me.registration_czxid == 0,
            me.last_registered_epoch == NO_PREVIOUS_REGISTRATION,
            z3.Not(me.observing), me.observed_epoch == 0, me.observed_version == 0,
            z3.Not(me.is_controller), me.controller_epoch == 0, me.controller_version == 0, z3.Not(me.initialized),
        )

    return z3.And(
        s.zxid >= 0, s.epoch_exists, s.epoch_value == 0, s.epoch_version == 0,
        z3.Not(s.controller_exists), z3.Not(s.stale_write_applied),
        s.elections_left >= 0, s.expiries_left >= 0, s.restarts_left >= 0,
        s.dom.every(fresh),
    )


# ---- bounded model checking ---------------------------------------------------------------------

class EncodingMismatch(AssertionError):
    """The model did something the encoding says it cannot: the encoding is wrong, not the model."""


@dataclass(frozen=True)
class EncodedStep:
    action: str
    broker: int
    writes: bool = False

    def __str__(self) -> str:
        suffix = " (writes)" if self.action == "InitializeController" and self.writes else ""
        return f"{self.action}({self.broker}){suffix}"


@dataclass
class Counterexample:
    """A trace that breaks ``invariant``, found by z3 and confirmed by replaying it through model.step."""

    invariant: str
    encoded_trace: list[EncodedStep]
    actions: list[Action]  # the model actions the replay took, one per encoded step
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


@dataclass
class BmcResult:
    scope: str
    bugs: tuple[str, ...]
    n_brokers: int
    depth: int
    seconds: float
    properties: list[PropertyBmc]

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
            "n_brokers": self.n_brokers,
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


def scope_with_brokers(name: str, n_brokers: int) -> Scope:
    """The named scope with ``n_brokers`` brokers, all configured like its broker 0."""
    scope = SCOPES[name]
    if n_brokers == scope.brokers:
        return scope
    if n_brokers < 2:
        raise ValueError("the scopes' partition is assigned to brokers 0 and 1: use at least 2 brokers")
    return scope.replace(
        name=f"{name}-{n_brokers}", ibps=(scope.ibps[0],) * n_brokers, supported=(scope.supported[0],) * n_brokers
    )


def default_scope(variant: Variant) -> str:
    """The scope a seeded bug names (model.bugs.SEEDED_BUGS), else "fencing"."""
    scopes = {SEEDED_BUGS_BY_NAME[b.value].scope for b in variant.bugs}
    return scopes.pop() if len(scopes) == 1 else "fencing"


BMC_ACTIONS = tuple(a for a in ACTIONS if a.name != "Stutter")  # the search checks every depth: no stutter needed


@dataclass
class _Unrolled:
    """One BMC step: a selector per (action, broker), exactly one true, and the write choice."""

    constraints: list[z3.BoolRef]
    selectors: list[tuple[z3.BoolRef, EncodedStep]]
    writes: z3.BoolRef


def _bmc_step(pre: SymState, post: SymState, variant: Variant, tag: str) -> _Unrolled:
    """The step relation as next-state functions: each field of ``post`` is an if-then-else over the
    selectors of the actions that change it, else its value in ``pre``. Equivalent to the
    disjunction of ``transition`` over actions and brokers (exactly one selector holds), but each
    field mentions only the actions that write it, which keeps the unrolling small."""
    dom = pre.dom
    writes = z3.Bool(f"writes@{tag}")
    options = []
    for action in BMC_ACTIONS:
        for b in dom.actors(tag):
            selector = z3.Bool(f"{action.name}({b})@{tag}")
            options.append((selector, b, action.effect(pre, b, variant, writes), EncodedStep(action.name, b)))
    constraints = [z3.PbEq([(o[0], 1) for o in options], 1), dom.well_formed(post)]
    constraints += [z3.Implies(selector, effect.guard) for selector, _, effect, _ in options]
    for name in GLOBAL_FIELDS:
        value = pre.values[name]
        for selector, _, effect, _ in options:
            if name in effect.changes:
                value = z3.If(selector, effect.changes[name], value)
        constraints.append(post.values[name] == value)
    for name in BROKER_FIELDS:
        for i in range(dom.n):
            value = pre.values[name][i]
            for selector, b, effect, _ in options:
                if b == i and name in effect.mine:
                    value = z3.If(selector, effect.mine[name], value)
            constraints.append(post.values[name][i] == value)
    return _Unrolled(constraints, [(o[0], o[3]) for o in options], writes)


def bmc_bits(init: Projection, depth: int) -> int:
    """A bit-width no small counter reachable in ``depth`` steps overflows: an epoch or version
    grows by at most one per step, budgets only shrink, the rest are small constants."""
    largest = max(abs(v) for v in _small_integers(init)) + depth + 1
    return largest.bit_length() + 2  # a sign bit, and one to spare


def _small_integers(p: Projection) -> Iterable[int]:
    for name, kind in {**GLOBAL_FIELDS, **BROKER_FIELDS}.items():
        if kind in (INT, BROKER):
            yield from (p[name] if name in BROKER_FIELDS else (p[name],))


def _whole_depth_solver() -> z3.Solver:
    """For one query over the whole unrolling: preprocessing first. ``elim-uncnstr`` drops what the
    property does not depend on (a cone of influence, for free), ``solve-eqs`` inlines the
    next-state functions. Measured here, fencing scope at depth 20: 110-150 s as one incremental
    search over all properties, 5-6 s as one such query per property."""
    return z3.Then("simplify", "propagate-values", "solve-eqs", "elim-uncnstr", "simplify", "smt").solver()


def bmc(
    depth: int = 20,
    variant: Variant = CORRECT,
    n_brokers: int = 2,
    scope: str | None = None,
    properties: Iterable[str] = PROPERTY_NAMES,
    max_refinements: int = 25,
) -> BmcResult:
    """Bounded model checking of each encoded property to ``depth`` steps from the scope's initial state.

    Per property: one query over the whole unrolling asks whether it breaks at any step. If it
    can, an incremental search from depth 1 up finds a shortest trace that breaks it, which is
    decoded into model actions and replayed through model.step; a trace the model cannot follow
    is blocked and the search continues (at most ``max_refinements`` times).

    Small counters are bit-vectors of a width no reachable value overflows (``bmc_bits``);
    zxid-valued fields stay Ints (measured: as bit-vectors, the order facts the broker-epoch
    properties need cost the solver 10-50x more).
    """
    check_variant(variant)
    scope_name = scope or default_scope(variant)
    the_scope = scope_with_brokers(scope_name, n_brokers)
    start = time.perf_counter()
    init_projection = project(initial_state(the_scope))
    dom = FiniteBrokers(n_brokers, bits=bmc_bits(init_projection, depth))
    states = [SymState.fresh(dom, "0")]
    steps: list[_Unrolled] = []
    for k in range(1, depth + 1):
        states.append(SymState.fresh(dom, str(k)))
        steps.append(_bmc_step(states[k - 1], states[k], variant, str(k)))
    init = states[0].equals(init_projection)
    results = []
    for name in properties:
        inv = INVARIANTS_BY_NAME[name]
        bad = [z3.Not(holds(inv, states[k - 1], states[k])) for k in range(1, depth + 1)]
        began = time.perf_counter()
        whole = _whole_depth_solver()
        whole.add(init, *[c for u in steps for c in u.constraints], z3.Or(bad))
        verdict = whole.check()
        if verdict == z3.unsat:
            results.append(PropertyBmc(name, True, time.perf_counter() - began))
            continue
        found = _shortest_counterexample(the_scope, variant, states, steps, init, bad, name, max_refinements)
        found.seconds = time.perf_counter() - began
        results.append(found)
    bugs = tuple(sorted(b.value for b in variant.bugs))
    return BmcResult(scope_name, bugs, n_brokers, depth, time.perf_counter() - start, results)


def _shortest_counterexample(
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
            replay = _replay(scope, variant, trace, expected)
            if replay is not None:
                result.holds = False
                result.counterexample = Counterexample(
                    name, trace, [a for _, a, _ in replay], tuple(broken_properties(expected[-2], expected[-1]))
                )
                return result
            # The model cannot follow this abstract trace (a write it has no way to make): block it.
            result.refinements += 1
            if result.refinements > max_refinements:
                result.complete = False
                return result
            solver.add(z3.Not(z3.And([_matches(u, s) for u, s in zip(steps, trace)])))
    return result


def _decode_step(model: z3.ModelRef, unrolled: _Unrolled) -> EncodedStep:
    for selector, step_ in unrolled.selectors:
        if z3.is_true(model.eval(selector, model_completion=True)):
            chooses = ACTIONS_BY_NAME[step_.action].chooses_write
            writes = chooses and z3.is_true(model.eval(unrolled.writes, model_completion=True))
            return EncodedStep(step_.action, step_.broker, writes)
    raise AssertionError("no action selected")


def _matches(unrolled: _Unrolled, step_: EncodedStep) -> z3.BoolRef:
    selector = next(sel for sel, s in unrolled.selectors if (s.action, s.broker) == (step_.action, step_.broker))
    if ACTIONS_BY_NAME[step_.action].chooses_write:
        return z3.And(selector, unrolled.writes == step_.writes)
    return selector


def model_action(step: EncodedStep, state: ClusterState) -> Action:
    """The model action an encoded step stands for (ControllerWrite is looked up by ``_writes_by``)."""
    b = BrokerId(step.broker)
    match step.action:
        case "ObserveControllerEpoch":
            return ObserveControllerEpoch(b)
        case "ElectController":
            return ElectController(b)
        case "ExpireSession":
            return ExpireSession(state.brokers[b].session)  # the session broker b holds now
        case "OpenSession":
            return OpenSession(b)
        case "RegisterBroker":
            return RegisterBroker(b)
        case "ResignController":
            return ResignController(b)
        case "InitializeController":
            return InitializeController(b)
        case "StopBroker":
            return StopBroker(b)
        case "RestartBroker":
            return RestartBroker(b)
    raise ValueError(f"no single model action for {step}")


def writer(action: Action) -> int | None:
    """The broker whose _controller_write this action may run, if it may run one."""
    if isinstance(action, WRITING_ACTIONS):
        return action.controller
    if isinstance(action, Deliver) and isinstance(action.message, ControlledShutdown):
        return action.message.dest
    return None


def _writes_by(state: ClusterState, scope: Scope, variant: Variant, b: int) -> list[tuple[Action, ClusterState]]:
    """Enabled model steps by controller ``b`` that went through _controller_write (they take a zxid)."""
    return [
        (action, nxt)
        for action, nxt in successors(state, scope, variant)
        if writer(action) == b and nxt.zk.zxid != state.zk.zxid
    ]


Replayed = list[tuple[ClusterState, Action, ClusterState]]


def _replay(scope: Scope, variant: Variant, trace: list[EncodedStep], expected: list[Projection]) -> Replayed | None:
    """Follow the encoded trace through model.step from the scope's initial state.

    At every step the model's projected state must be the solver's, and the registry properties
    the model says the step breaks must be those the encoding says it breaks. Returns the
    (before, action, after) steps, or None when the model cannot follow the trace (a write it has
    no way to make, or an InitializeController that decides otherwise). Any other difference
    raises EncodingMismatch: the encoding is wrong.
    """
    start = initial_state(scope)
    if project(start) != expected[0]:
        raise EncodingMismatch("the initial projection differs from the solver's initial state")

    def check(j: int, before: ClusterState, action: Action, after: ClusterState) -> None:
        shown = set(violations(before, action, after)) & set(PROPERTY_NAMES)
        encoded = set(broken_properties(expected[j], expected[j + 1]))
        if shown != encoded:
            raise EncodingMismatch(
                f"step {j + 1} ({action!r}): the encoding breaks {sorted(encoded)}, the model {sorted(shown)}"
            )

    def follow(state: ClusterState, j: int, done: Replayed) -> Replayed | None:
        if j == len(trace):
            return done
        step_ = trace[j]
        want = expected[j + 1]
        if step_.action == "ControllerWrite":
            options = _writes_by(state, scope, variant, step_.broker)
            for action, nxt in options:
                if project(nxt) != want:
                    raise EncodingMismatch(f"step {j + 1}: {action!r} projects to {_diff(want, project(nxt))}")
        else:
            action = model_action(step_, state)
            nxt = model_step(state, action, variant)
            if nxt is None:
                if ACTIONS_BY_NAME[step_.action].exact_guard:
                    raise EncodingMismatch(f"step {j + 1}: {action!r} is enabled in the encoding, not in the model")
                return None
            got = project(nxt)
            if got != want:
                if ACTIONS_BY_NAME[step_.action].chooses_write and got == encoded_successor(
                    expected[j], step_.action, step_.broker, variant, not step_.writes
                ):
                    return None  # the model made the other choice (it decides from /features)
                raise EncodingMismatch(f"step {j + 1}: {action!r} projects to {_diff(want, got)}")
            options = [(action, nxt)]
        for action, nxt in options:
            check(j, state, action, nxt)
            found = follow(nxt, j + 1, done + [(state, action, nxt)])
            if found is not None:
                return found
        return None

    return follow(start, 0, [])


def _diff(want: Projection, got: Projection) -> str:
    return ", ".join(f"{k}: encoding {want[k]} model {got[k]}" for k in want if want[k] != got[k])


# ---- induction ----------------------------------------------------------------------------------

@dataclass
class ObligationResult:
    name: str  # "<action>/<invariant>", or "Init/<invariant>"
    brokers: str  # "2 brokers" or "any number of brokers"
    result: str  # "proved", "counterexample-to-induction" or "unknown"
    seconds: float
    counterexample: dict | None = None  # pre- and post-state projections (finite domain only)

    @property
    def proved(self) -> bool:
        return self.result == "proved"

    def as_json(self) -> dict:
        out = {"name": self.name, "brokers": self.brokers, "result": self.result, "seconds": round(self.seconds, 4)}
        if self.counterexample is not None:
            out["cti"] = self.counterexample  # pre- and post-state projections
        return out


def induction_obligations(
    dom: Brokers,
    variant: Variant = CORRECT,
    invariants: Iterable[Invariant] = INVARIANTS,
    actions: Iterable[str] | None = None,
) -> list[tuple[str, list[z3.BoolRef], SymState, SymState | None]]:
    """Each obligation as (name, formulas that must be unsatisfiable together, pre, post).

    Init/I:  cold_start(s) /\\ not I(s)
    A/I:     Inv(s) /\\ T_A(s, s') /\\ not I(s, s'), where Inv is every state invariant among
             ``invariants`` (so nothing is assumed that is not also proved).
    """
    check_variant(variant)
    wanted = list(invariants)
    chosen = None if actions is None else set(actions)
    out = []
    s = SymState.fresh(dom, "init")
    for inv in wanted:
        if not inv.on_step and (chosen is None or "Init" in chosen):
            out.append((f"Init/{inv.name}", [dom.well_formed(s), cold_start(s), z3.Not(inv.holds(s))], s, None))
    pre, post = SymState.fresh(dom, "pre"), SymState.fresh(dom, "post")
    hypotheses = [dom.well_formed(pre), dom.well_formed(post)] + [i.holds(pre) for i in wanted if not i.on_step]
    for action in ACTIONS:
        if chosen is not None and action.name not in chosen:
            continue
        step_ = any_transition(action, pre, post, variant, "step")
        for inv in wanted:
            out.append((f"{action.name}/{inv.name}", hypotheses + [step_, z3.Not(holds(inv, pre, post))], pre, post))
    return out


def prove(
    variant: Variant = CORRECT,
    dom: Brokers | None = None,
    invariants: Iterable[Invariant] = INVARIANTS,
    actions: Iterable[str] | None = None,
    timeout_ms: int = 60_000,
) -> list[ObligationResult]:
    """Discharge the induction obligations (all, or those of ``actions``: action names and "Init");
    a satisfiable one is a counterexample to induction."""
    dom = dom or FiniteBrokers(2)
    results = []
    for name, formulas, pre, post in induction_obligations(dom, variant, invariants, actions):
        solver = z3.Solver()
        solver.set("timeout", timeout_ms)
        solver.add(formulas)
        start = time.perf_counter()
        verdict = solver.check()
        seconds = time.perf_counter() - start
        if verdict == z3.unsat:
            results.append(ObligationResult(name, dom.label, "proved", seconds))
        elif verdict == z3.sat:
            cti = None
            if isinstance(dom, FiniteBrokers):
                model = solver.model()
                cti = {"pre": pre.read(model)} if post is None else {"pre": pre.read(model), "post": post.read(model)}
            results.append(ObligationResult(name, dom.label, "counterexample-to-induction", seconds, cti))
        else:
            results.append(ObligationResult(name, dom.label, "unknown", seconds))
    return results


def enabled_under_invariants(dom: Brokers | None = None, variant: Variant = CORRECT) -> dict[str, bool]:
    """For each action: can it be taken from a state satisfying every invariant and lemma? An
    action that cannot would make its obligations hold vacuously."""
    dom = dom or FiniteBrokers(2)
    pre, post = SymState.fresh(dom, "pre"), SymState.fresh(dom, "post")
    out = {}
    for action in ACTIONS:
        solver = z3.Solver()
        solver.add(dom.well_formed(pre), *[i.holds(pre) for i in STATE_INVARIANTS])
        solver.add(any_transition(action, pre, post, variant, "step"))
        out[action.name] = solver.check() == z3.sat
    return out


# The epoch-fencing properties proved for any number of brokers, with the lemmas their proof uses.
UNBOUNDED_PROPERTIES = ("AtMostOneControllerPerEpoch", "OnlyCurrentControllerWritesApply",
                        "ControllerEpochNeverDecreases", "EveryElectionBumpsControllerEpoch")


def prove_unbounded(
    variant: Variant = CORRECT, every_invariant: bool = True, actions: Iterable[str] | None = None
) -> list[ObligationResult]:
    """The induction obligations over an uninterpreted sort of brokers: they hold for any number of them.

    All invariants by default; ``every_invariant=False`` keeps the epoch-fencing properties
    (UNBOUNDED_PROPERTIES) and the lemmas, which are what their proof needs."""
    wanted = INVARIANTS if every_invariant else [
        i for i in INVARIANTS if i.lemma or i.name in UNBOUNDED_PROPERTIES
    ]
    return prove(variant, AnyBrokers(), wanted, actions)


def check_all(variant: Variant = CORRECT, depth: int = 20) -> list[dict]:
    """What ``kraftcheck prove`` reports: BMC of each property in both scopes, then the induction
    obligations for 2 brokers and for any number of brokers. Each row has name, result, seconds."""
    rows = []
    for scope in ("fencing", "election"):
        r = bmc(depth, variant, scope=scope)
        for p in r.properties:
            row = {
                "name": f"BMC/{scope}/depth-{depth}/{p.name}",
                "brokers": f"{r.n_brokers} brokers",
                "result": "holds" if p.holds and p.complete else ("unknown" if p.holds else "violated"),
                "seconds": round(p.seconds, 3),
            }
            if p.counterexample is not None:
                row["counterexample"] = p.counterexample.as_json()
            rows.append(row)
    rows += [r.as_json() for r in prove(variant)]
    rows += [r.as_json() for r in prove_unbounded(variant)]
    return rows


def all_hold(rows: list[dict]) -> bool:
    return all(r["result"] in ("holds", "proved") for r in rows)
