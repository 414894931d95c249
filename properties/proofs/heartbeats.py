"""The heartbeat core of ``kraftcheck prove``: KRaft broker registrations, broker epochs, fencing, held heartbeats,
lost responses.

Rules: those of ``properties.proofs.engine``, whose machinery (``Core``, BMC with replay, induction,
choices, actor domains) this core is built on: every variable is read off a ``ClusterState`` by
``project``, every action formula mirrors one handler of ``model.kraft_quorum`` or ``model.zk_era``
(named in its docstring), and the seeded bug switches the formula where the handler switches its
code. ``tests/test_proofs_heartbeats.py`` checks on Hypothesis-drawn reachable states of the
projected scopes that each model step, projected, satisfies the formula of the encoded action it
is (or a stutter), that an encoded action the model refuses has a false guard where the guard
is exact, and that the encoded properties a step breaks are the registry's.

How it works (``HEARTBEAT_CORE``, below; the actors are KRaft brokers, ``Broker`` the sort of the
unbounded proof):
- The core (``project``): the one KRaft controller's log length (``log_end``, the offset its next
  record takes, which is the broker epoch a registration gets: KIP-500 §Broker Metadata Management,
  reference §3.1), the budgets the core's actions spend, whether the log holds two broker epochs of
  one incarnation (``split_epochs``, below), and per broker: its process (alive, its
  incarnation, the broker epoch it holds, -1 for none; whether it wants to shut down; Online or
  not; the offset it has replayed to), its registration in the controller's image (exists, epoch,
  incarnation, fenced, in controlled shutdown), whether its session lapsed at the controller
  (``KRaftController.lapsed``: BrokerHeartbeatManager.hasValidSession is false), and the heartbeat of
  it the network holds, if any (its broker epoch, WantShutDown and metadata offset:
  ``ClusterState.held``). Fields that mean nothing (no registration, nothing held) are 0, so a
  projection is canonical.
- Encoded actions: RegisterWithKRaft, BrokerHeartbeat (answered at once), RegistrationResponseLost
  and HeartbeatResponseLost (``_response_lost``: the controller's side of the broker's registration
  or own heartbeat happens, the broker learns nothing; enabled only where that side changed
  something, a record or a lapsed session renewed, and spending lost_responses), HoldHeartbeat,
  DeliverHeartbeat (the held heartbeat of the acting broker), SessionTimeout (``fence=True``: the
  fencing record), SessionLapses (``SessionTimeout`` with ``fence=False``: the session of a
  registration whose process is not running lapses, no record), BeginControlledShutdown,
  StopBroker, RestartBroker (a new incarnation), FetchMetadata, and Stutter (every other model
  step: DualWrite, SyncKRaftToZk, ... leave the core as it was). The controller decides a
  heartbeat in one function (``_decide_heartbeat``, ``handle_heartbeat``) for the broker's own and
  for a held one, as the model does, and a registration in one (``_decide_registration``) for the
  broker that takes its answer and for one whose answer is lost.
- The session (``_renew_session``): a registration of another incarnation refuses a broker's
  registration (DUPLICATE_BROKER_REGISTRATION) only while it is unfenced and its session has not
  lapsed; an accepted registration, a heartbeat that is not stale (and not refused by the lag
  bound), answered or lost, and the fencing SessionTimeout renew the session; the fencing
  SessionTimeout of a running registration spends the timeouts budget only if its session had not
  lapsed. What else empties ``lapsed`` (failover, step-down, resignation, a controller crash) is
  outside the core.
- Choices (``engine.Choices``), where the model decides from something outside the core: whether
  the broker leads a partition ("leads": a controlled shutdown waits while it does), whether a
  fencing, unfencing or shutdown step writes a partition record besides the registration change
  ("more": ``_elect_leaderless``, ``_move_leaders_off``; ``project`` refuses images with more than
  one partition), and whether the write-behind lag bound refuses the write ("blocked":
  ``writes_blocked``, kip only). Where a refused write makes the model refuse the action, the
  guard is necessary, not exact (``exact_guard=False``); a delivered held heartbeat is consumed
  either way.
- Outside the core, and refused by ``project`` with the reason: more than one KRaft controller or
  one not active (no failover: no elections, no controller crash); a log not all committed, or
  answers waiting in a purgatory (scopes purgatory, heartbeat-commit); a ZooKeeper-mode broker
  (migrating ZK brokers' registrations and rollbacks); pre-migration (no KRaft registration,
  kafka-3.9 fences no one); budgets for what the core does not encode (crashes, migrations,
  partition creations, reassignments, topic deletions, operator writes); two
  heartbeats of one broker held at once (HoldHeartbeat's guard asks for an empty slot: the
  scopes' budget holds one heartbeat).
- Properties (registry names, ``model.kraft_invariants``; the one the session lapse decides,
  NoKRaftBrokerTakesALiveZkBrokersId, is about ZooKeeper-mode brokers, which the core refuses):
  StaleHeartbeatWritesNothing (KIP-380 generations on KRaft), UnfencedOnlyWhenCaughtUp (KIP-500
  §Broker States), BrokerEpochGivenByController (KIP-866 §Broker Registration; KIP-500 §Broker
  Metadata Management), OneBrokerEpochPerIncarnation (KIP-500 §Broker Metadata Management). The
  first three are step properties, written over (pre, post): a delivered held heartbeat is the step
  that empties a broker's slot (no other action does); UnfencedOnlyWhenCaughtUp is, as in the
  registry, every heartbeat's that unfences (BrokerHeartbeat, HeartbeatResponseLost, DeliverHeartbeat:
  no other action unfences), judged by the offset the heartbeat carried, the broker's or the held
  one's; BrokerEpochGivenByController asks the current registration for the epoch a broker takes,
  where the registry asks the log for any registration of its incarnation: the same on the core's
  states, where a broker's registrations in the log carry incarnations that never go down (a
  process registers with the newest), so one of its own incarnation is the current one.
- OneBrokerEpochPerIncarnation is the registry's ALWAYS property over the whole committed log, and
  the core keeps the latest registration per broker, not the log: ``project`` reads it off the log
  with the registry's own predicate into one Boolean, ``split_epochs`` (the log breaks it), and the
  encoded property is ``not split_epochs``, so it is the registry's on every projected state. The
  actions keep ``split_epochs`` by a step form: a registration's record of the incarnation the
  current registration has, with another epoch, sets it, and nothing clears it. That is exact on the
  core's states: one log, all committed, that only grows (no failover, no truncation, no record
  removes a registration), whose registrations of a broker carry incarnations that never go down, so
  a new record of an incarnation with an older record of it finds that one in the current
  registration (if the log held one epoch per incarnation before). The agreement tests check the
  step form against the registry on every reachable state of lost-responses. Init: a log with no
  registration of any broker, so ``split_epochs`` is false. No lemma is needed: each obligation
  follows from the guards and effects of the one action that can break it, with every other field
  of the broker (and every other broker) framed.
- Seeded bugs switched (``ENCODED_BUGS``): heartbeat_accepts_older_broker_epoch (its held heartbeat of a former
  incarnation writes: DeliverHeartbeat's obligation fails, BMC finds it from held-heartbeats),
  unfence_before_caught_up (BrokerHeartbeat's; its own scope, broker-migration, has ZK brokers and two
  controllers, so BMC, and ``kraftcheck mutants --check z3``, find it from this core's scopes),
  lost_registration_guesses_epoch (RegistrationResponseLost's broker takes its replayed offset as its
  epoch: RegistrationResponseLost/BrokerEpochGivenByController fails, BMC finds it from lost-responses)
  and retried_registration_new_epoch (decide_broker_registration gives a retry a new record: the
  obligations of OneBrokerEpochPerIncarnation of RegisterWithKRaft and RegistrationResponseLost fail,
  the two actions that decide a registration; BMC finds it from lost-responses).
- BMC: the scopes' budgets run out, so their encoded runs end, some before depth 20; the core sets
  ``bmc_may_stop`` so that a violation on a path that ends is found. Without it the whole-depth query
  asks for a path of exactly the depth: in kraft-broker-restart, unfence_before_caught_up's 6-step
  trace was found at depths 6 to 10 and the query said "holds" at 14 and 20.
- Why the unbounded proof is decided: as in ``properties.proofs.fencing``, the only ``Broker``
  terms are constants (the acting broker and the Skolem constants of a negated invariant);
  properties are universal.

What it leaves out: controller failover (a second controller, a new leader's log, truncation of
registrations: the migration core has the quorum; ``split_epochs``' step form needs a log that only
grows), the purgatory's deferred answers (they need a second voter, whose Fetch commits, since a lone voter
commits at once; and the step that advances the high watermark completes every waiting broker's answer at once,
``model.kraft_quorum.settle_answers``, where an engine action changes only its own actors' fields: an update of
every actor's, a z3 lambda over the broker sort, would have to come first), ZK brokers registering with KRaft
(KIP-866 §Broker
Registration's IsMigratingZkBroker path), and BrokerEpochIsRegistrationOffset, the registry's ALWAYS
property about where in the log each registration sits: the core keeps the log's length, not its
records.

How this fits with the rest: docs/design.md §9.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from model.actions import (
    Action,
    BeginControlledShutdown,
    BrokerHeartbeat,
    DeliverHeartbeat,
    FetchMetadata,
    HeartbeatResponseLost,
    HoldHeartbeat,
    RegisterWithKRaft,
    RegistrationResponseLost,
    RestartBroker,
    SessionTimeout,
    StopBroker,
)
from model.bugs import Bug, Variant
from model.kraft import BrokerState, ZkMigrationState
from model.kraft_invariants import one_broker_epoch_per_incarnation
from model.kraft_quorum import is_active, own_image
from model.scopes import Scope
from model.state import BrokerHeartbeatRequest, ClusterState
from model.step import candidate_actions
from model.types import UNKNOWN_BROKER_EPOCH, BrokerId
from properties.proofs.engine import (
    BOOL,
    INT,
    ZXID,
    Core,
    Effect,
    EncodedAction,
    EncodedStep,
    Invariant,
    OutsideProjection,
    Projection,
    SymState,
)

# The seeded bugs the encoding switches, with the encoded actions whose formulas they change.
ENCODED_BUGS: dict[Bug, tuple[str, ...]] = {
    # handle_heartbeat serves a heartbeat whose broker epoch is older than the registration's
    Bug.HEARTBEAT_ACCEPTS_OLDER_BROKER_EPOCH: ("BrokerHeartbeat", "DeliverHeartbeat", "HeartbeatResponseLost"),
    # handle_heartbeat unfences a fenced registration whether or not the broker has caught up
    Bug.UNFENCE_BEFORE_CAUGHT_UP: ("BrokerHeartbeat", "DeliverHeartbeat", "HeartbeatResponseLost"),
    # _response_lost: the broker takes the offset it has replayed to as the epoch it was not told
    Bug.LOST_REGISTRATION_GUESSES_EPOCH: ("RegistrationResponseLost",),
    # decide_broker_registration gives a retried registration of the same incarnation a new record and epoch
    Bug.RETRIED_REGISTRATION_NEW_EPOCH: ("RegisterWithKRaft", "RegistrationResponseLost"),
}

NO_EPOCH = int(UNKNOWN_BROKER_EPOCH)  # a process that holds no broker epoch

GLOBAL_FIELDS: dict[str, str] = {
    "log_end": ZXID,  # the controller's log length: the offset (and broker epoch) its next record takes
    "restarts_left": INT,
    "shutdowns_left": INT,
    "held_left": INT,
    "timeouts_left": INT,
    "lost_left": INT,
    # OneBrokerEpochPerIncarnation broken: the committed log holds two broker epochs of one incarnation (read off
    # the log by the registry's predicate; the actions keep it: see the module docstring)
    "split_epochs": BOOL,
}

BROKER_FIELDS: dict[str, str] = {
    "alive": BOOL,
    "incarnation": INT,
    "kraft_epoch": ZXID,  # the broker epoch its process holds, NO_EPOCH if none
    "want_shutdown": BOOL,
    "online": BOOL,  # lifecycle is Online
    "offset": ZXID,  # how far it has replayed the committed log
    "reg_exists": BOOL,  # the controller's image holds a registration of it
    "reg_epoch": ZXID,
    "reg_incarnation": INT,
    "reg_fenced": BOOL,
    "reg_shutdown": BOOL,  # in controlled shutdown
    "held": BOOL,  # the network holds a heartbeat of it
    "held_epoch": ZXID,
    "held_shutdown": BOOL,  # its WantShutDown
    "held_offset": ZXID,  # its metadata offset
    "lapsed": BOOL,  # its session lapsed at the controller (KRaftController.lapsed: hasValidSession is false)
}

# Budgets whose actions the core does not encode: a state that may still spend them is outside it.
UNENCODED_BUDGETS = ("crashes", "kraft_elections", "controller_crashes", "migrations", "partition_creations",
                     "reassignments", "topic_deletions", "operator", "answer_at_commit", "heartbeats_at_commit")

# The scopes BMC runs from (each projects every reachable state: tests/test_proofs_heartbeats.py).
SCOPE_NAMES = ("held-heartbeats", "kraft-broker-restart", "lost-responses")


def _held_by_broker(state: ClusterState, controller: int) -> dict[int, BrokerHeartbeatRequest]:
    out: dict[int, BrokerHeartbeatRequest] = {}
    for r in sorted(state.held, key=repr):
        if r.controller != controller:
            raise OutsideProjection(f"a heartbeat is held for controller {r.controller}, not the core's one")
        if r.broker in out:
            raise OutsideProjection(f"two heartbeats of broker {r.broker} are held at once")
        out[r.broker] = r
    return out


def project(state: ClusterState) -> Projection:
    """The heartbeat core of ``state``; raises OutsideProjection where the core's assumptions fail."""
    if not state.controllers:
        raise OutsideProjection("no KRaft controller: the ZooKeeper era is the fencing core's")
    if len(state.controllers) > 1:
        raise OutsideProjection("the core has one KRaft controller: failover is not encoded")
    c = state.controllers[0]
    if not is_active(c):
        raise OutsideProjection("the KRaft controller is not active")
    if c.high_watermark != len(c.log) or c.pending:
        raise OutsideProjection("answers waiting for a commit (a purgatory) are not encoded")
    if c.stale_fencing:
        raise OutsideProjection("a heartbeat manager whose fencing an aborted transaction left stale is not encoded")
    for name in UNENCODED_BUDGETS:
        if getattr(state.budget, name):
            raise OutsideProjection(f"the budget allows {name}, which the core does not encode")
    image = own_image(c)
    if image.migration_state is ZkMigrationState.PRE_MIGRATION:
        raise OutsideProjection("pre-migration's rules for brokers are not encoded")
    if len(image.partitions) > 1:
        raise OutsideProjection("the core counts at most one partition record per registration change")
    held = _held_by_broker(state, c.id)
    out: Projection = {
        "log_end": len(c.log),
        "restarts_left": state.budget.restarts,
        "shutdowns_left": state.budget.shutdowns,
        "held_left": state.budget.held_requests,
        "timeouts_left": state.budget.timeouts,
        "lost_left": state.budget.lost_responses,
        "split_epochs": not one_broker_epoch_per_incarnation(state),
    }
    rows: dict[str, list] = {name: [] for name in BROKER_FIELDS}
    for b in state.brokers:
        if not b.config.kraft_mode:
            raise OutsideProjection(f"broker {b.id} is a ZooKeeper-mode broker: its registrations are not encoded")
        reg = image.registration(b.id)
        r = held.get(b.id)
        values = {
            "alive": b.alive,
            "incarnation": int(b.incarnation),
            "kraft_epoch": int(b.kraft_epoch),
            "want_shutdown": b.want_shutdown,
            "online": b.lifecycle is BrokerState.ONLINE,
            "offset": int(b.image.offset),
            "reg_exists": reg is not None,
            "reg_epoch": 0 if reg is None else int(reg.epoch),
            "reg_incarnation": 0 if reg is None else int(reg.incarnation),
            "reg_fenced": reg is not None and reg.fenced,
            "reg_shutdown": reg is not None and reg.in_controlled_shutdown,
            "held": r is not None,
            "held_epoch": 0 if r is None else int(r.broker_epoch),
            "held_shutdown": r is not None and r.want_shutdown,
            "held_offset": 0 if r is None or r.metadata_offset is None else int(r.metadata_offset),
            "lapsed": b.id in c.lapsed,
        }
        for name, value in values.items():
            rows[name].append(value)
    out.update({name: tuple(values) for name, values in rows.items()})
    return out


# ---- the actions --------------------------------------------------------------------------------------------------

# process_dies / fresh_process: what a process that is gone holds (its incarnation stays: a restart takes the next).
PROCESS_GONE = {"alive": False, "kraft_epoch": NO_EPOCH, "want_shutdown": False, "online": False, "offset": 0}
NOTHING_HELD = {"held": False, "held_epoch": 0, "held_shutdown": False, "held_offset": 0}


def _more(choose) -> z3.ArithRef:
    """The records a registration change writes: its own, and one partition record if the choice says so."""
    return z3.If(choose("more"), 2, 1)


@dataclass
class Decision:
    """What the controller decides of one heartbeat (``handle_heartbeat``): refused as stale, else the records it
    appends (0 if none), the registration's changes, and the answer."""

    stale: z3.BoolRef
    records: z3.ArithRef
    registration: dict[str, Any]
    fenced: z3.BoolRef
    in_controlled_shutdown: z3.BoolRef
    shutdown_now: z3.BoolRef


def _decide_heartbeat(s: SymState, b, epoch, want_shutdown, offset, variant: Variant, choose) -> Decision:
    """handle_heartbeat (BrokerHeartbeatManager.calculateNextBrokerState, reference §3.2; KIP-500 §Broker States):
    the broker epoch must be the registration's (checkBrokerEpoch: STALE_BROKER_EPOCH); a fenced registration is
    unfenced once the broker has replayed past it (caught_up), a shutdown is answered, a live one moves into
    controlled shutdown while it leads and is fenced for good once it does not."""
    me = s.of(b)
    older_accepted = variant.has(Bug.HEARTBEAT_ACCEPTS_OLDER_BROKER_EPOCH)
    wrong = me.reg_epoch != epoch
    if older_accepted:
        wrong = z3.And(wrong, z3.Not(epoch < me.reg_epoch))
    stale = z3.Or(z3.Not(me.reg_exists), wrong)
    leads = choose("leads")
    fenced, shutting = me.reg_fenced, me.reg_shutdown
    caught_up = z3.BoolVal(True) if variant.has(Bug.UNFENCE_BEFORE_CAUGHT_UP) else offset > me.reg_epoch
    unfences = z3.And(fenced, z3.Not(want_shutdown), caught_up)
    asks_shutdown = z3.And(z3.Not(fenced), z3.Or(shutting, want_shutdown))
    fences = z3.And(asks_shutdown, z3.Not(leads))
    starts_shutdown = z3.And(asks_shutdown, leads, z3.Not(shutting))
    records = z3.If(z3.Or(unfences, fences, starts_shutdown), _more(choose), 0)
    return Decision(
        stale,
        records,
        {"reg_fenced": z3.If(unfences, False, z3.Or(fenced, fences)), "reg_shutdown": z3.Or(shutting, starts_shutdown)},
        fenced=z3.Or(z3.And(fenced, z3.Not(unfences)), fences),
        in_controlled_shutdown=z3.If(fenced, z3.And(shutting, z3.Not(unfences)), asks_shutdown),
        shutdown_now=z3.Or(z3.And(fenced, want_shutdown), fences),
    )


@dataclass
class Registration:
    """The controller's side of a registration (``handle_registration``): when it is accepted, the epoch it answers,
    and what it changes: the log (a record unless the same incarnation's registration stands), the registration,
    the session."""

    accepted: z3.BoolRef
    stands: z3.BoolRef  # the same incarnation's registration stands: no record
    epoch: z3.ArithRef
    changes: dict[str, Any]
    registration: dict[str, Any]


def _decide_registration(s: SymState, b, variant: Variant) -> Registration:
    """decide_broker_registration and handle_registration for a running process with no broker epoch: a registration
    of another incarnation whose session is valid (unfenced, not lapsed: hasValidSession) refuses it
    (DUPLICATE_BROKER_REGISTRATION); the same incarnation's stands, epoch and all (a retry); else a
    RegisterBrokerRecord at the log's end gives the epoch (the offset), fenced. Either way the session is renewed
    (``_renew_session``). A record of the incarnation the current registration has, with another epoch, splits its
    epochs (``split_epochs``: what retried_registration_new_epoch does)."""
    me = s.of(b)
    same = z3.And(me.reg_exists, me.reg_incarnation == me.incarnation)
    stands = z3.BoolVal(False) if variant.has(Bug.RETRIED_REGISTRATION_NEW_EPOCH) else same
    duplicate = z3.And(me.reg_exists, me.reg_incarnation != me.incarnation, z3.Not(me.reg_fenced),
                       z3.Not(me.lapsed))
    epoch = z3.If(stands, me.reg_epoch, s.log_end)
    return Registration(
        accepted=z3.And(me.alive, me.kraft_epoch == NO_EPOCH, z3.Not(duplicate)),
        stands=stands,
        epoch=epoch,
        changes={"log_end": z3.If(stands, s.log_end, s.log_end + 1),
                 "split_epochs": z3.Or(s.split_epochs, z3.And(same, me.reg_epoch != epoch))},
        registration={
            "reg_exists": True,
            "reg_epoch": epoch,
            "reg_incarnation": me.incarnation,
            "reg_fenced": z3.Or(z3.Not(stands), me.reg_fenced),
            "reg_shutdown": z3.And(stands, me.reg_shutdown),
            "lapsed": False,
        },
    )


def register_with_kraft(s: SymState, b, variant: Variant, choose) -> Effect:
    """_register_with_kraft: a running process with no broker epoch registers (``_decide_registration``) and takes
    the epoch it is answered with (_take_epoch: Fenced until caught up)."""
    r = _decide_registration(s, b, variant)
    return Effect(r.accepted, changes=r.changes, mine={**r.registration, "kraft_epoch": r.epoch, "online": False})


def registration_response_lost(s: SymState, b, variant: Variant, choose) -> Effect:
    """_response_lost of a registration: the controller's side (``_decide_registration``) happens, the broker learns
    nothing and registers again later. Enabled only where the controller's side changed something (a record, or a
    lapsed session renewed), and it spends the lost_responses budget. lost_registration_guesses_epoch: the broker
    takes the offset it has replayed to as its epoch, Fenced."""
    me = s.of(b)
    r = _decide_registration(s, b, variant)
    guard = z3.And(s.lost_left > 0, r.accepted, z3.Or(z3.Not(r.stands), me.lapsed))
    mine = dict(r.registration)
    if variant.has(Bug.LOST_REGISTRATION_GUESSES_EPOCH):
        mine.update({"kraft_epoch": me.offset, "online": False})
    return Effect(guard, changes={**r.changes, "lost_left": s.lost_left - 1}, mine=mine)


def broker_heartbeat(s: SymState, b, variant: Variant, choose) -> Effect:
    """_heartbeat: the broker's heartbeat with its own epoch, decided (``_decide_heartbeat``) and answered at once
    (_take_heartbeat_answer). STALE_BROKER_EPOCH makes the broker drop its epoch and register again; ShouldShutDown
    ends the process; an answer that neither fences nor shuts it down takes it Online. A heartbeat that changes
    nothing is not a step, even if it would renew a lapsed session; one whose records the lag bound refuses is refused
    (the guard is necessary only). One that is not stale renews the session (``_renew_session``)."""
    me = s.of(b)
    d = _decide_heartbeat(s, b, me.kraft_epoch, me.want_shutdown, me.offset, variant, choose)
    goes_online = z3.Not(z3.Or(d.fenced, d.in_controlled_shutdown, me.want_shutdown))
    online = z3.Or(me.online, goes_online)
    changes_something = z3.Or(d.stale, d.records > 0, d.shutdown_now, online != me.online)
    guard = z3.And(me.alive, me.kraft_epoch != NO_EPOCH, changes_something)

    answered = {name: z3.If(d.shutdown_now, value, getattr(me, name)) for name, value in PROCESS_GONE.items()}
    answered["online"] = z3.And(z3.Not(d.shutdown_now), online)
    refused = {"kraft_epoch": NO_EPOCH, "online": False}  # STALE_BROKER_EPOCH: Fenced, it registers again
    mine = {name: z3.If(d.stale, refused.get(name, getattr(me, name)), value) for name, value in answered.items()}
    mine.update({name: z3.If(d.stale, getattr(me, name), value) for name, value in d.registration.items()})
    mine["lapsed"] = z3.And(d.stale, me.lapsed)
    return Effect(guard, changes={"log_end": z3.If(d.stale, s.log_end, s.log_end + d.records)}, mine=mine)


def heartbeat_response_lost(s: SymState, b, variant: Variant, choose) -> Effect:
    """_response_lost of a heartbeat: the controller's side of the broker's own heartbeat (``_decide_heartbeat``)
    happens, the broker learns nothing. Enabled only where that side changed something (records, or a lapsed session
    renewed: a stale heartbeat is refused), and it spends the lost_responses budget; one whose records the lag bound
    refuses is refused (the guard is necessary only)."""
    me = s.of(b)
    d = _decide_heartbeat(s, b, me.kraft_epoch, me.want_shutdown, me.offset, variant, choose)
    guard = z3.And(s.lost_left > 0, me.alive, me.kraft_epoch != NO_EPOCH, z3.Not(d.stale),
                   z3.Or(d.records > 0, me.lapsed))
    return Effect(guard, changes={"log_end": s.log_end + d.records, "lost_left": s.lost_left - 1},
                  mine={**d.registration, "lapsed": False})


def hold_heartbeat(s: SymState, b, variant: Variant, choose) -> Effect:
    """_hold_heartbeat: the network holds the heartbeat the broker sends now; the broker, whose request timed out,
    is unchanged. (The core has one slot per broker: see the module docstring.)"""
    me = s.of(b)
    guard = z3.And(s.held_left > 0, me.alive, me.kraft_epoch != NO_EPOCH, z3.Not(me.held))
    return Effect(
        guard,
        changes={"held_left": s.held_left - 1},
        mine={"held": True, "held_epoch": me.kraft_epoch, "held_shutdown": me.want_shutdown,
              "held_offset": me.offset},
    )


def deliver_heartbeat(s: SymState, b, variant: Variant, choose) -> Effect:
    """_deliver_heartbeat: the held heartbeat reaches the controller, which decides it on the broker epoch it was
    sent with (``_decide_heartbeat``); its answer goes nowhere. A stale one, or one whose records the lag bound
    refuses, is consumed, writes nothing and renews no session; any other renews it (``_renew_session``)."""
    me = s.of(b)
    d = _decide_heartbeat(s, b, me.held_epoch, me.held_shutdown, me.held_offset, variant, choose)
    blocked = z3.And(d.records > 0, choose("blocked"))
    writes = z3.And(z3.Not(d.stale), d.records > 0, z3.Not(blocked))
    mine: dict[str, Any] = dict(NOTHING_HELD)
    mine.update({name: z3.If(writes, value, getattr(me, name)) for name, value in d.registration.items()})
    mine["lapsed"] = z3.And(me.lapsed, z3.Or(d.stale, blocked))
    return Effect(me.held, changes={"log_end": z3.If(writes, s.log_end + d.records, s.log_end)}, mine=mine)


def session_timeout(s: SymState, b, variant: Variant, choose) -> Effect:
    """_session_timeout (maybeFenceOneStaleBroker, ``SessionTimeout`` with ``fence=True``): an unfenced registration
    is fenced and its session is no longer a lapsed one. Timing out a live process of the registered incarnation and
    epoch takes it to Fenced, and spends the timeouts budget unless its session had lapsed already; one whose
    process is gone or replaced is healing, free."""
    me = s.of(b)
    alive_same = _alive_same(me)
    spends = z3.And(alive_same, z3.Not(me.lapsed))
    guard = z3.And(me.reg_exists, z3.Not(me.reg_fenced), z3.Or(z3.Not(spends), s.timeouts_left > 0))
    return Effect(
        guard,
        changes={"log_end": s.log_end + _more(choose),
                 "timeouts_left": z3.If(spends, s.timeouts_left - 1, s.timeouts_left)},
        mine={"reg_fenced": True, "online": z3.And(me.online, z3.Not(alive_same)), "lapsed": False},
    )


def session_lapses(s: SymState, b, variant: Variant, choose) -> Effect:
    """_session_lapses (``SessionTimeout`` with ``fence=False``): the session of an unfenced registration whose
    process is not running (``timeout_heals``) lapses; no record, no budget. A lapsed one is not a step again."""
    me = s.of(b)
    guard = z3.And(me.reg_exists, z3.Not(me.reg_fenced), z3.Not(me.lapsed), z3.Not(_alive_same(me)))
    return Effect(guard, mine={"lapsed": True})


def _alive_same(me) -> z3.BoolRef:
    """The registration's own process runs: alive, its incarnation and broker epoch (``timeout_heals`` negated)."""
    return z3.And(me.alive, me.incarnation == me.reg_incarnation, me.kraft_epoch == me.reg_epoch)


def begin_controlled_shutdown(s: SymState, b, variant: Variant, choose) -> Effect:
    """_begin_controlled_shutdown: an Online broker gets SIGINT: Stopping, and its heartbeats ask to shut down."""
    me = s.of(b)
    guard = z3.And(me.alive, z3.Not(me.want_shutdown), me.online, s.shutdowns_left > 0)
    return Effect(guard, changes={"shutdowns_left": s.shutdowns_left - 1},
                  mine={"want_shutdown": True, "online": False})


def stop_broker(s: SymState, b, variant: Variant, choose) -> Effect:
    """zk_era._stop of a KRaft broker: the process is gone (process_dies); its registration stays until fenced."""
    me = s.of(b)
    return Effect(z3.And(me.alive, s.restarts_left > 0), changes={"restarts_left": s.restarts_left - 1},
                  mine=dict(PROCESS_GONE))


def restart_broker(s: SymState, b, variant: Variant, choose) -> Effect:
    """zk_era._restart (fresh_kraft_process): a new process, with the next incarnation and no broker epoch."""
    me = s.of(b)
    return Effect(z3.Not(me.alive), mine={**PROCESS_GONE, "alive": True, "incarnation": me.incarnation + 1})


def fetch_metadata(s: SymState, b, variant: Variant, choose) -> Effect:
    """_fetch_metadata: the broker replays the committed log, which in the core is the controller's whole log."""
    me = s.of(b)
    return Effect(z3.And(me.alive, me.offset < s.log_end), mine={"offset": s.log_end})


def stutter(s: SymState, variant: Variant, choose) -> Effect:
    """Every model step that leaves the core as it was (DualWrite, SyncKRaftToZk, ...)."""
    return Effect(z3.BoolVal(True))


ACTIONS: tuple[EncodedAction, ...] = (
    # The lag bound (writes_blocked, outside the core) may refuse what these write: their guards are necessary only.
    EncodedAction("RegisterWithKRaft", register_with_kraft, exact_guard=False),
    EncodedAction("BrokerHeartbeat", broker_heartbeat, exact_guard=False),
    EncodedAction("RegistrationResponseLost", registration_response_lost, exact_guard=False),
    EncodedAction("HeartbeatResponseLost", heartbeat_response_lost, exact_guard=False),
    EncodedAction("SessionTimeout", session_timeout, exact_guard=False),
    EncodedAction("SessionLapses", session_lapses),
    EncodedAction("HoldHeartbeat", hold_heartbeat),
    EncodedAction("DeliverHeartbeat", deliver_heartbeat),
    EncodedAction("BeginControlledShutdown", begin_controlled_shutdown),
    EncodedAction("StopBroker", stop_broker),
    EncodedAction("RestartBroker", restart_broker),
    EncodedAction("FetchMetadata", fetch_metadata),
    EncodedAction("Stutter", stutter, exact_guard=False, arity=0),
)


# ---- the properties -----------------------------------------------------------------------------------------------

def _delivered(pre: SymState, post: SymState, b) -> z3.BoolRef:
    """The step delivered broker ``b``'s held heartbeat: only DeliverHeartbeat empties its slot."""
    return z3.And(pre.of(b).held, z3.Not(post.of(b).held))


def _stale_heartbeat_writes_nothing(pre: SymState, post: SymState) -> z3.BoolRef:
    def nothing(b):
        old = pre.of(b)
        stale = z3.And(old.reg_exists, old.held_epoch < old.reg_epoch)
        return z3.Implies(z3.And(_delivered(pre, post, b), stale), post.log_end == pre.log_end)

    return pre.dom.every(nothing)


def _unfenced_only_when_caught_up(pre: SymState, post: SymState) -> z3.BoolRef:
    # As the registry: the step that unfences is a heartbeat (the broker's own, answered or with its answer lost, or
    # a held one delivered late: no other action unfences), judged by the offset it carried.
    def caught_up(b):
        old, new = pre.of(b), post.of(b)
        unfenced = z3.And(old.reg_exists, new.reg_exists, old.reg_fenced, z3.Not(new.reg_fenced))
        carried = z3.If(_delivered(pre, post, b), old.held_offset, old.offset)
        return z3.Implies(unfenced, carried > old.reg_epoch)

    return pre.dom.every(caught_up)


def _broker_epoch_given_by_controller(pre: SymState, post: SymState) -> z3.BoolRef:
    def given(b):
        old, new = pre.of(b), post.of(b)
        takes = z3.And(new.alive, new.kraft_epoch != old.kraft_epoch, new.kraft_epoch != NO_EPOCH)
        return z3.Implies(takes, z3.And(new.reg_exists, new.reg_incarnation == new.incarnation,
                                        new.reg_epoch == new.kraft_epoch))

    return pre.dom.every(given)


def _one_broker_epoch_per_incarnation(s: SymState) -> z3.BoolRef:
    return z3.Not(s.split_epochs)


INVARIANTS: tuple[Invariant, ...] = (
    Invariant("StaleHeartbeatWritesNothing", "a held heartbeat older than its broker's registration writes nothing",
              _stale_heartbeat_writes_nothing, on_step=True),
    Invariant("UnfencedOnlyWhenCaughtUp", "a heartbeat unfences a registration only if the offset it carried is"
              " past it", _unfenced_only_when_caught_up, on_step=True),
    Invariant("BrokerEpochGivenByController", "a broker takes a broker epoch only from its incarnation's"
              " registration (the core: the current one)", _broker_epoch_given_by_controller, on_step=True),
    Invariant("OneBrokerEpochPerIncarnation", "every committed registration of one incarnation carries the same"
              " broker epoch (the core: split_epochs, kept by the registrations)", _one_broker_epoch_per_incarnation),
)


def kraft_start(s: SymState) -> z3.BoolRef:
    """Init: a controller with any log, every broker's process just started: no epoch, no registration, nothing
    held (scopes.cold_state has no active controller yet: the core begins where one is). A log with no registration
    of any broker holds no RegisterBrokerRecord of them (no record removes one), so no split epochs."""

    def fresh(b):
        me = s.of(b)
        return z3.And(
            me.alive, me.kraft_epoch == NO_EPOCH, z3.Not(me.want_shutdown), z3.Not(me.online), me.offset == 0,
            z3.Not(me.reg_exists), me.reg_epoch == 0, me.reg_incarnation == 0, z3.Not(me.reg_fenced),
            z3.Not(me.reg_shutdown), z3.Not(me.lapsed),
            *[getattr(me, name) == value for name, value in NOTHING_HELD.items()],
        )

    return z3.And(s.log_end >= 0, s.restarts_left >= 0, s.shutdowns_left >= 0, s.held_left >= 0,
                  s.timeouts_left >= 0, s.lost_left >= 0, z3.Not(s.split_epochs), s.dom.every(fresh))


# ---- decoding a step into model actions ---------------------------------------------------------------------------

BY_BROKER_AND_CONTROLLER = {"RegisterWithKRaft": RegisterWithKRaft, "BrokerHeartbeat": BrokerHeartbeat,
                            "RegistrationResponseLost": RegistrationResponseLost,
                            "HeartbeatResponseLost": HeartbeatResponseLost, "HoldHeartbeat": HoldHeartbeat,
                            "SessionTimeout": SessionTimeout, "FetchMetadata": FetchMetadata}
BY_BROKER = {"BeginControlledShutdown": BeginControlledShutdown, "StopBroker": StopBroker,
             "RestartBroker": RestartBroker}
ENCODED_KINDS = {cls: name for name, cls in {**BY_BROKER_AND_CONTROLLER, **BY_BROKER}.items()}


def model_actions(step: EncodedStep, state: ClusterState, scope: Scope, variant: Variant) -> list[Action]:
    """The model action an encoded step stands for."""
    b = BrokerId(step.broker)
    if step.action in BY_BROKER_AND_CONTROLLER:
        return [BY_BROKER_AND_CONTROLLER[step.action](b, state.controllers[0].id)]
    if step.action in BY_BROKER:
        return [BY_BROKER[step.action](b)]
    if step.action == "SessionLapses":
        return [SessionTimeout(b, state.controllers[0].id, fence=False)]
    if step.action == "DeliverHeartbeat":
        return [DeliverHeartbeat(r) for r in state.held if r.broker == b]
    raise ValueError(f"no model action for {step}")


def encoded_as(action: Action, state: ClusterState) -> tuple[str, tuple[int, ...]]:
    """The encoded action a model action is, with its actors (every action the core does not name: a Stutter)."""
    if isinstance(action, DeliverHeartbeat):
        return "DeliverHeartbeat", (action.request.broker,)
    if isinstance(action, SessionTimeout) and not action.fence:
        return "SessionLapses", (action.broker,)
    kind = ENCODED_KINDS.get(type(action))
    if kind is None:
        return "Stutter", ()
    return kind, (action.broker,)  # type: ignore[attr-defined]  # every class in ENCODED_KINDS has a broker


MAX_STUTTERS = 2  # a DualWrite or two, which bring ZooKeeper's lag under the bound that refused a write


def stutters(state: ClusterState, scope: Scope) -> list[Action]:
    return [a for a in candidate_actions(state, scope) if encoded_as(a, state)[0] == "Stutter"]


HEARTBEAT_CORE = Core(
    name="heartbeats",
    noun="broker",
    global_fields=GLOBAL_FIELDS,
    actor_fields=BROKER_FIELDS,
    actions=ACTIONS,
    invariants=INVARIANTS,
    project=project,
    initial=kraft_start,
    encoded_bugs=ENCODED_BUGS,
    model_actions=model_actions,
    scopes=SCOPE_NAMES,
    stutters=stutters,
    max_stutters=MAX_STUTTERS,
    bmc_may_stop=True,  # budgets run out: a scope's encoded runs may end before the depth
)
