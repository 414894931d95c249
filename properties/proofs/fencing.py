"""The fencing core of ``kraftcheck prove``: the ZooKeeper controller's epoch fencing, to depth 20 and for any N.

Rules: those of ``properties.proofs.engine``, whose machinery (``Core``, BMC with replay, induction,
choices, actor domains) this core is built on. ``tests/test_proofs.py`` checks on Hypothesis-drawn
reachable states that each model step, projected, satisfies the formula of the encoded action it
is (or a stutter), and that an encoded action the model refuses has a false guard in the encoding.

How it works (``FENCING``, below, is this module's core; the actors are brokers, ``Broker`` the
sort of ``AnyBrokers``):
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
  encoding lets it choose (the choice ``writes``); likewise ControllerWrite may happen whenever an
  initialized controller is connected. Both are over-approximations: proofs stay sound, and a
  BMC trace that the model cannot follow is refuted by the replay and blocked (refinement).
- Outside the core, and refused by ``project``: ZooKeeper outages (every guard would need
  ``available``) and crashed brokers (a crashed process leaves its session, and its ephemerals,
  alive without an owner process). The scopes "fencing" and "election" have no budget for either.
- Why the unbounded proof is decided, not just attempted: the only terms of sort ``Broker`` are
  constants (the acting broker, the /controller owner, ``nobody``, and the Skolem constants of a
  negated invariant); no function returns a ``Broker``. Invariants are universal (``∀`` only), so
  the negated obligation is ``∀``-only after Skolemization over a finite Herbrand universe of
  ``Broker`` terms: instantiating the quantifiers with those constants is complete (the EPR
  argument mypyvy and Ivy use, with integers only in the values), and z3's model-based quantifier
  instantiation finds that instantiation.
- The lemmas (``INVARIANTS`` with ``lemma=True``): /controller_epoch always exists and its value
  equals its version; an observation is a past (value, version) pair with value = version; a
  believed epoch equals the believed version, which is not ahead of the znode's; a stopped broker
  holds nothing; a registration lives exactly as long as its session and its czxid is the broker
  epoch; broker epochs and czxids are past zxids. Together with the six properties they are
  inductive for every encoded action, which is what makes each property hold forever.

How this fits with the rest: docs/design.md §9.
"""

from __future__ import annotations

from collections.abc import Iterable
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
from model.bugs import CORRECT, Bug, Variant
from model.scopes import SCOPES, Scope
from model.state import BROKER_IDS, CONTROLLER, CONTROLLER_EPOCH, ClusterState, ControlledShutdown
from model.step import successors
from model.types import UNKNOWN_BROKER_EPOCH, BrokerId
from model.zk_era import ABSENT
from properties.proofs.engine import (
    ACTOR,
    BOOL,
    INT,
    ZXID,
    AnyActors,
    BmcResult,
    Core,
    Domain,
    Effect,
    EncodedAction,
    EncodedStep,
    FiniteActors,
    Invariant,
    ObligationResult,
    OutsideProjection,
    Projection,
    SymState,
)

BROKER = ACTOR  # the fencing core's actors are brokers
FiniteBrokers, AnyBrokers, Brokers = FiniteActors, AnyActors, Domain  # the fencing core's names for them

# ---- the fencing core: the projection -----------------------------------------------------------

# The seeded bugs the encoding switches, with the encoded actions whose formulas they change
# (where model.zk_era switches its code).
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


# ---- the fencing core: the actions --------------------------------------------------------------------------------

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
    """model.zk_era.is_current_controller: it holds /controller and /controller_epoch's version."""
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


def observe_controller_epoch(s: SymState, b, variant: Variant, choose) -> Effect:
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


def elect_controller(s: SymState, b, variant: Variant, choose) -> Effect:
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
            "controller_owner": z3.If(won, s.dom.actor_term(b), s.controller_owner),
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


def expire_session(s: SymState, b, variant: Variant, choose) -> Effect:
    """_expire_session of the session broker b holds: its ephemerals go, the broker does not know yet."""
    me = s.of(b)
    guard = z3.And(me.has_session, s.expiries_left > 0)
    return Effect(
        guard,
        changes={**_closes_session(s, b), "expiries_left": s.expiries_left - 1},
        mine={"has_session": False, **NO_REGISTRATION_ZNODE},
    )


def open_session(s: SymState, b, variant: Variant, choose) -> Effect:
    """_open_session: a new session (one zxid); the broker must register again in it."""
    me = s.of(b)
    return Effect(
        z3.And(me.alive, z3.Not(me.has_session)),
        changes={"zxid": s.zxid + 1},
        mine={"has_session": True, "registered": False},
    )


def register_broker(s: SymState, b, variant: Variant, choose) -> Effect:
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


def resign_controller(s: SymState, b, variant: Variant, choose) -> Effect:
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


def initialize_controller(s: SymState, b, variant: Variant, choose) -> Effect:
    """_initialize_controller: the /features bootstrap write (if ``writes``), then initialized."""
    me = s.of(b)
    writes = choose("writes")  # the bootstrap ops depend on /features, outside the core
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


def controller_write(s: SymState, b, variant: Variant, choose) -> Effect:
    """A write through _controller_write by an initialized, connected controller (possibly a zombie)."""
    me = s.of(b)
    guard = z3.And(me.is_controller, me.initialized, _connected(s, b))
    _, changes, mine = _fenced_write(s, b, variant)
    return Effect(guard, changes=changes, mine=mine)


def stop_broker(s: SymState, b, variant: Variant, choose) -> Effect:
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


def restart_broker(s: SymState, b, variant: Variant, choose) -> Effect:
    """_restart: a stopped process starts again with an empty memory (which _stop already emptied)."""
    return Effect(z3.Not(s.of(b).alive), mine={"alive": True})


def stutter(s: SymState, b, variant: Variant, choose) -> Effect:
    """Every model step that leaves the fencing core as it was (Deliver, Drop, a refused request...)."""
    return Effect(z3.BoolVal(True))


# ---- the fencing core: invariants and lemmas ----------------------------------------------------------------------

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



ACTIONS: tuple[EncodedAction, ...] = (
    EncodedAction("ObserveControllerEpoch", observe_controller_epoch),
    EncodedAction("ElectController", elect_controller),
    EncodedAction("ExpireSession", expire_session),
    EncodedAction("OpenSession", open_session),
    EncodedAction("RegisterBroker", register_broker),
    EncodedAction("ResignController", resign_controller),
    # The model may also refuse these when its in-flight cap is full: the guard is necessary, not sufficient.
    EncodedAction("InitializeController", initialize_controller, exact_guard=False),
    EncodedAction("ControllerWrite", controller_write, exact_guard=False),
    EncodedAction("StopBroker", stop_broker),
    EncodedAction("RestartBroker", restart_broker),
    EncodedAction("Stutter", stutter, exact_guard=False),
)

# Model actions whose step may go through _controller_write (then it is a ControllerWrite, else a Stutter).
WRITING_ACTIONS = (UpdateFeatures, ElectPartitionLeader, ProcessBrokerChange)


# ---- the fencing core: decoding a step into model actions ---------------------------------------

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


def _writes_by(state: ClusterState, scope: Scope, variant: Variant, b: int) -> list[Action]:
    """Enabled model steps by controller ``b`` that went through _controller_write (they take a zxid)."""
    return [
        action
        for action, nxt in successors(state, scope, variant)
        if writer(action) == b and nxt.zk.zxid != state.zk.zxid
    ]


def _model_actions(step: EncodedStep, state: ClusterState, scope: Scope, variant: Variant) -> list[Action]:
    if step.action == "ControllerWrite":
        return _writes_by(state, scope, variant, step.broker)
    return [model_action(step, state)]


FENCING = Core(
    name="fencing",
    noun="broker",
    global_fields=GLOBAL_FIELDS,
    actor_fields=BROKER_FIELDS,
    actions=ACTIONS,
    invariants=INVARIANTS,
    project=project,
    initial=cold_start,
    encoded_bugs=ENCODED_BUGS,
    model_actions=_model_actions,
    scopes=("fencing", "election"),
)

# The fencing core's tables and checks under the names they have always had.
ACTIONS_BY_NAME = FENCING.actions_by_name
INVARIANTS_BY_NAME = FENCING.invariants_by_name
PROPERTY_NAMES = FENCING.property_names  # the registry properties encoded here
STATE_INVARIANTS = FENCING.state_invariants
BMC_ACTIONS = FENCING.bmc_actions
check_variant = FENCING.check_variant
default_scope = FENCING.default_scope
broken_properties = FENCING.broken_properties
broken_state_invariants = FENCING.broken_state_invariants
induction_obligations = FENCING.induction_obligations
any_transition = FENCING.any_transition


def transition(action: EncodedAction, pre: SymState, post: SymState, b, variant: Variant, writes) -> z3.BoolRef:
    """``post`` is ``pre`` after ``action`` by broker ``b`` (``writes``: InitializeController's choice)."""
    return FENCING.transition(action, pre, post, (b,), variant, lambda name: writes)


def encoded_guard(p: Projection, action: str, b: int, variant: Variant = CORRECT) -> bool:
    return FENCING.encoded_guard(p, action, (b,), variant)


def encoded_successor(
    p: Projection, action: str, b: int, variant: Variant = CORRECT, writes: bool = False
) -> Projection | None:
    """The projection after ``action`` by broker ``b`` according to the encoding, None if its guard is false."""
    return FENCING.encoded_successor(p, action, (b,), variant, {"writes": writes})


def satisfies_transition(
    before: Projection, after: Projection, action: str, b: int, variant: Variant = CORRECT
) -> bool:
    """The concrete pair satisfies the action's z3 formula (for some choice of ``writes``)."""
    return FENCING.satisfies_transition(before, after, action, (b,), variant)


def prove(
    variant: Variant = CORRECT,
    dom: Brokers | None = None,
    invariants: Iterable[Invariant] = INVARIANTS,
    actions: Iterable[str] | None = None,
    timeout_ms: int = 60_000,
    goals: Iterable[str] | None = None,
) -> list[ObligationResult]:
    """The fencing core's induction obligations for ``dom`` (2 brokers unless told); of ``goals``' invariants only,
    when named, every invariant still assumed."""
    return FENCING.prove(variant, dom, invariants, actions, timeout_ms, goals)


def enabled_under_invariants(dom: Brokers | None = None, variant: Variant = CORRECT) -> dict[str, bool]:
    return FENCING.enabled_under_invariants(dom, variant)


# The epoch-fencing properties proved for any number of brokers, with the lemmas their proof uses.
UNBOUNDED_PROPERTIES = ("AtMostOneControllerPerEpoch", "OnlyCurrentControllerWritesApply",
                        "ControllerEpochNeverDecreases", "EveryElectionBumpsControllerEpoch")


def prove_unbounded(
    variant: Variant = CORRECT, every_invariant: bool = True, actions: Iterable[str] | None = None,
    goals: Iterable[str] | None = None,
) -> list[ObligationResult]:
    """The induction obligations over an uninterpreted sort of brokers: they hold for any number of them.

    All invariants by default; ``every_invariant=False`` keeps the epoch-fencing properties
    (UNBOUNDED_PROPERTIES) and the lemmas, which are what their proof needs. ``goals``: the obligations of the
    invariants so named only, the others still assumed."""
    wanted = INVARIANTS if every_invariant else [
        i for i in INVARIANTS if i.lemma or i.name in UNBOUNDED_PROPERTIES
    ]
    return FENCING.prove(variant, FENCING.unbounded(), wanted, actions, goals=goals)


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


def bmc(
    depth: int = 20,
    variant: Variant = CORRECT,
    n_brokers: int = 2,
    scope: str | None = None,
    properties: Iterable[str] = PROPERTY_NAMES,
    max_refinements: int = 25,
) -> BmcResult:
    """Bounded model checking of the fencing core (``Core.bmc``) in the named scope, resized to
    ``n_brokers`` brokers; the scope a seeded bug names by default."""
    check_variant(variant)
    scope_name = scope or default_scope(variant)
    the_scope = scope_with_brokers(scope_name, n_brokers)
    return FENCING.bmc(the_scope, depth, variant, properties, max_refinements, name=scope_name)
