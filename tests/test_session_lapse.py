"""A broker registration decided by the heartbeat session, as Kafka 3.9 decides it (issue 17 §1).

ClusterControlManager.registerBroker refuses a new incarnation with DUPLICATE_BROKER_REGISTRATION only while the
existing registration has a valid session (BrokerHeartbeatManager.hasValidSession: unfenced, heard from within
broker.session.timeout.ms). Time alone ends a session: once it lapsed, the new incarnation is admitted before
maybeFenceOneStaleBroker has written any fencing record. The active controller's sessions live in its memory:
activate() starts every registration's session afresh (KIP-500 §Broker States; KIP-866 §Broker Registration).
"""

from __future__ import annotations

import pytest

from impl.bugs import ImplBug
from impl.pacing import BROKER_SESSION_TIMEOUT_MS
from model.actions import (
    BrokerHeartbeat,
    CrashController,
    DeliverHeartbeat,
    HoldHeartbeat,
    MigrateBrokerToKRaft,
    OpenSession,
    RegisterBroker,
    RegisterWithKRaft,
    RestartBroker,
    SessionTimeout,
    StopBroker,
)
from model.bugs import Variant
from model.kraft import BrokerRegistrationChangeRecord, ControllerId, Incarnation, RegisterBrokerRecord
from model.kraft_quorum import ctrl, decide_broker_registration, own_image, registration_request
from model.migration import Profile
from model.outcome import error_of
from model.scopes import SCOPES, initial_state
from model.step import step
from model.types import UNKNOWN_BROKER_EPOCH, BrokerEpoch, BrokerId, Errors, Ibp
from properties.differential import Differential, Disagreement, walk
from tests.conftest import appended, run

C0 = ControllerId(3000)
B1 = BrokerId(1)
KAFKA_3_9 = Variant(profile=Profile.KAFKA_3_9)


def refusal(state, broker: BrokerId, variant: Variant = Variant()) -> Errors:
    c = ctrl(state, C0)
    refused, _ = decide_broker_registration(own_image(c), c, registration_request(state.brokers[broker], C0), variant)
    return error_of(refused)


def zk_broker_1_restarted_on_kraft():
    """Broker 1's ZK process stops and comes back in KRaft mode; its ZK registration is still unfenced."""
    state = run(initial_state(SCOPES["broker-migration"]), StopBroker(B1), MigrateBrokerToKRaft(B1), RestartBroker(B1))
    assert not own_image(ctrl(state, C0)).registration(B1).fenced
    return state


def test_session_lapse_admits_the_new_incarnation_before_any_fencing_record():
    """A broker bounced faster than the fencing loop: its old session lapses, no record yet, and the new
    incarnation's registration is accepted with a new epoch (registerBroker: hasValidSession is false)."""
    state = zk_broker_1_restarted_on_kraft()
    assert refusal(state, B1) is Errors.DUPLICATE_BROKER_REGISTRATION  # the old session is still valid
    assert step(state, RegisterWithKRaft(B1, C0)) is None

    lapsed = run(state, SessionTimeout(B1, C0, fence=False))
    assert appended(state, lapsed, C0) == []  # a lapse writes nothing
    assert ctrl(lapsed, C0).lapsed == {B1}
    assert refusal(lapsed, B1) is Errors.NONE

    registered = run(lapsed, RegisterWithKRaft(B1, C0))
    assert appended(lapsed, registered, C0) == [
        RegisterBrokerRecord(B1, Incarnation(1), BrokerEpoch(12), False, Ibp.IBP_3_4_IV0)
    ]
    assert ctrl(registered, C0).lapsed == frozenset()  # register() gives the new incarnation a fresh session
    assert step(registered, SessionTimeout(B1, C0)) is None  # the new registration is fenced: nothing to fence


def test_session_lapse_then_fence_writes_the_record_once_and_spends_no_budget():
    """maybeFenceOneStaleBroker fences a lapsed session: the fencing record, and the session is gone."""
    state = run(zk_broker_1_restarted_on_kraft(), SessionTimeout(B1, C0, fence=False))
    fenced = run(state, SessionTimeout(B1, C0))
    assert appended(state, fenced, C0)[0] == BrokerRegistrationChangeRecord(B1, BrokerEpoch(4), True)
    assert ctrl(fenced, C0).lapsed == frozenset()
    assert fenced.budget == state.budget


def test_session_of_a_running_registration_lapses_only_as_it_is_fenced():
    """A live broker whose heartbeats were lost: its lapse is folded into its fence (a lapse alone would change
    nothing but a new incarnation's registration, and no new incarnation of it runs)."""
    state = initial_state(SCOPES["broker-migration"])
    assert step(state, SessionTimeout(B1, C0, fence=False)) is None
    assert step(state, SessionTimeout(B1, C0)) is not None  # the perturbation, from the timeouts budget


def test_session_lapse_is_renewed_by_a_late_heartbeat_of_the_registration():
    """A heartbeat of the registration's epoch touches the session (BrokerHeartbeatManager.touch), even one the
    network held past the process's exit: the lapse is gone, and a lapse is taken once (no step while lapsed)."""
    state = initial_state(SCOPES["held-heartbeats"])
    b0 = state.brokers[0].id
    state = run(state, HoldHeartbeat(b0, C0), StopBroker(b0), SessionTimeout(b0, C0, fence=False))
    assert ctrl(state, C0).lapsed == {b0}
    assert step(state, SessionTimeout(b0, C0, fence=False)) is None
    [late] = state.held
    assert ctrl(run(state, DeliverHeartbeat(late)), C0).lapsed == frozenset()


def test_failover_starts_every_session_afresh():
    """The sessions are the active controller's memory: a crash loses the lapse, and a new active controller's
    heartbeat manager registers every unfenced broker with a fresh session (ClusterControlManager.activate), so
    the new incarnation is refused again until the session lapses anew."""
    state = run(zk_broker_1_restarted_on_kraft(), SessionTimeout(B1, C0, fence=False))
    crashed = run(state.replace(budget=state.budget.replace(controller_crashes=1)), CrashController(C0))
    assert all(c.lapsed == frozenset() for c in crashed.controllers)


def test_kafka_3_9_zk_broker_restarted_in_pre_migration_is_admitted_once_its_session_lapsed():
    """Kafka 3.9 fences no stale broker in pre-migration (KAFKA-15441), yet the session lapses: a ZK broker
    restarted then registers again; refused forever by the fencing record alone."""
    b0 = BrokerId(0)
    state = run(initial_state(SCOPES["pre-migration"]), RegisterWithKRaft(b0, C0), BrokerHeartbeat(b0, C0),
                variant=KAFKA_3_9)
    assert not own_image(ctrl(state, C0)).registration(b0).fenced
    state = run(state, StopBroker(b0), RestartBroker(b0), OpenSession(b0), RegisterBroker(b0), variant=KAFKA_3_9)
    assert state.brokers[b0].incarnation == 1
    assert step(state, SessionTimeout(b0, C0), KAFKA_3_9) is None  # no fencing in pre-migration
    assert refusal(state, b0, KAFKA_3_9) is Errors.DUPLICATE_BROKER_REGISTRATION
    state = run(state, SessionTimeout(b0, C0, fence=False), variant=KAFKA_3_9)
    before = state
    state = run(state, RegisterWithKRaft(b0, C0), variant=KAFKA_3_9)
    [record] = appended(before, state, C0)
    assert isinstance(record, RegisterBrokerRecord) and record.incarnation == 1


# ---- the implementation (impl.kraft_controller) ---------------------------------------------------


def test_impl_registration_after_the_session_timer_ran_out_lapses_the_session_first():
    """In the implementation the clock decides: a new incarnation registering before broker.session.timeout.ms
    has passed is refused; after it, the controller's session lapses (a trace of its own) and the registration
    is accepted, before its fencing loop ran; the model takes both steps."""
    diff = Differential(SCOPES["kraft-broker-restart"], strict=False, bounded=False)
    b0 = diff.model.brokers[0].id
    diff.apply(StopBroker(b0))
    diff.apply(RestartBroker(b0))
    assert diff.apply(RegisterWithKRaft(b0, C0)) == []  # DUPLICATE_BROKER_REGISTRATION: the session is valid
    diff.cluster.now += BROKER_SESSION_TIMEOUT_MS
    assert diff.apply(RegisterWithKRaft(b0, C0)) == [SessionTimeout(b0, C0, fence=False), RegisterWithKRaft(b0, C0)]
    assert diff.model.brokers[b0].kraft_epoch != UNKNOWN_BROKER_EPOCH


def test_impl_registration_decided_by_the_fencing_record_alone_is_caught_by_walks():
    """The seeded mistake (today's rule before issue 17 §1): a lapsed, unfenced session still refuses the new
    incarnation. A seeded walk takes the lapse and then the registration the implementation refuses; the
    correct implementation agrees with the model on the same walks."""
    scope = SCOPES["kraft-broker-restart"]
    with pytest.raises(Disagreement, match="refused RegisterWithKRaft"):
        walk(scope, 1, 40, bugs=frozenset({ImplBug.REGISTRATION_DECIDED_BY_FENCE}))
    for seed in range(8):
        walk(scope, seed, 40)


def test_impl_zk_broker_restarted_on_kraft_takes_its_id_once_its_session_lapsed():
    """A ZK broker restarted in KRaft mode registers after its old session's timer ran out: the controller's one
    event is two model steps (the lapse, then the registration), and the properties judge each step as the explorer
    does. Judged from the event's first state to its last, NoKRaftBrokerTakesALiveZkBrokersId would see a live ZK
    registration taken over (the default campaign's seed 128 did)."""
    diff = Differential(SCOPES["broker-migration"], strict=False, bounded=False)
    for action in (StopBroker(B1), MigrateBrokerToKRaft(B1), RestartBroker(B1)):
        diff.apply(action)
    assert diff.apply(RegisterWithKRaft(B1, C0)) == []  # DUPLICATE_BROKER_REGISTRATION: the ZK broker's session
    diff.cluster.now += BROKER_SESSION_TIMEOUT_MS
    assert diff.apply(RegisterWithKRaft(B1, C0)) == [SessionTimeout(B1, C0, fence=False), RegisterWithKRaft(B1, C0)]
    registration = own_image(ctrl(diff.model, C0)).registration(B1)
    assert registration.incarnation == diff.model.brokers[B1].incarnation and not registration.is_migrating_zk_broker
