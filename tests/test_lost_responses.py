"""Responses lost after their requests took effect, and the retries that follow (issue #17).

A broker's BrokerRegistration or BrokerHeartbeat can take effect on the active controller (its records
appended) while the response never reaches the broker: the broker learns nothing and sends the same
request again, as Kafka's BrokerLifecycleManager does after a timeout. In the model that is a step of
its own (``RegistrationResponseLost``, ``HeartbeatResponseLost``, spending ``Budget.lost_responses``, 0
in every other scope); in the implementation the cluster runs the controller's handler and hands the
broker a timeout. What must hold: a retried registration is the same registration (one broker epoch per
incarnation, KIP-500 §Broker Metadata Management, registerBroker's "same incarnation" branch), and a
broker takes on only an epoch a controller gave it (KIP-866 §Broker Registration).
"""

from __future__ import annotations

import pytest

from impl.bugs import IMPL_SEEDED_BUGS, ImplBug
from impl.protocol import Unreachable
from impl.sim.faults import parse
from model.actions import (
    BeginControlledShutdown,
    BrokerHeartbeat,
    DualWrite,
    FetchMetadata,
    HeartbeatResponseLost,
    RegisterWithKRaft,
    RegistrationResponseLost,
    RestartBroker,
    SessionTimeout,
    StopBroker,
)
from model.bugs import Bug, Variant
from model.kraft import BrokerRegistrationChangeRecord, BrokerState, ControllerId, RegisterBrokerRecord
from model.kraft_quorum import ctrl, own_image
from model.scopes import SCOPES, initial_state
from model.step import step
from model.types import UNKNOWN_BROKER_EPOCH, BrokerId
from properties.differential import Differential, Disagreement, walk
from tests.conftest import appended, run, walked_kinds, with_budget

B0, C0 = BrokerId(0), ControllerId(3000)
SCOPE = "lost-responses"
# The broker restarts; its old registration is fenced (its heartbeats stopped), so the new incarnation may register.
# (Dual writes keep ZooKeeper's write-behind lag under its bound, KIP-866 §Unavailable ZooKeeper.)
RESTARTED = (StopBroker(B0), RestartBroker(B0), SessionTimeout(B0, C0), DualWrite(C0))


def restarted():
    return run(initial_state(SCOPES[SCOPE]), *RESTARTED)


def test_lost_registration_response_leaves_the_broker_without_an_epoch_and_its_retry_gets_the_same_one():
    """KIP-500 §Broker Metadata Management; registerBroker: the controller appended the registration, the broker
    never heard; its retry with the same incarnation is answered with the same epoch and appends nothing."""
    before = restarted()
    lost = run(before, RegistrationResponseLost(B0, C0))
    (rec,) = appended(before, lost, C0)
    assert isinstance(rec, RegisterBrokerRecord) and rec.incarnation == before.brokers[0].incarnation
    assert lost.brokers[0].kraft_epoch == UNKNOWN_BROKER_EPOCH and lost.budget.lost_responses == 1
    retried = run(lost, RegisterWithKRaft(B0, C0))
    assert appended(lost, retried, C0) == []
    assert retried.brokers[0].kraft_epoch == rec.epoch


def test_lost_heartbeat_response_unfences_on_the_controller_only_and_the_next_heartbeat_brings_the_broker_online():
    """KIP-500 §Broker States: the unfencing heartbeat's record is appended, the broker stays Fenced; its next
    heartbeat finds the registration unfenced and brings it Online without another record."""
    state = run(restarted(), RegisterWithKRaft(B0, C0), DualWrite(C0), FetchMetadata(B0, C0))
    lost = run(state, HeartbeatResponseLost(B0, C0))
    assert [type(r) for r in appended(state, lost, C0)][0] is BrokerRegistrationChangeRecord
    assert not own_image(ctrl(lost, C0)).registration(B0).fenced
    assert lost.brokers[0].lifecycle is BrokerState.FENCED
    online = run(lost, BrokerHeartbeat(B0, C0))
    assert appended(lost, online, C0) == [] and online.brokers[0].lifecycle is BrokerState.ONLINE


def test_lost_controlled_shutdown_response_is_answered_again_on_the_retry():
    """KIP-500 §Stopping: the heartbeat asking to shut down moves the broker's leadership away (in controlled
    shutdown); its answer lost, the broker, still Stopping, asks again and the retry finds the shutdown under way:
    it is fenced and told to shut down."""
    state = run(initial_state(with_budget(SCOPE, lost_responses=3)), BeginControlledShutdown(B0))
    lost = run(state, HeartbeatResponseLost(B0, C0))
    assert own_image(ctrl(lost, C0)).registration(B0).in_controlled_shutdown
    assert lost.brokers[0].alive and lost.brokers[0].lifecycle is BrokerState.STOPPING
    lost = run(lost, DualWrite(C0))
    done = run(lost, BrokerHeartbeat(B0, C0))
    assert appended(lost, done, C0)[0] == BrokerRegistrationChangeRecord(B0, lost.brokers[0].kraft_epoch, True)
    assert not done.brokers[0].alive


def test_a_lost_response_needs_a_request_that_took_effect_and_the_budget():
    """A heartbeat that changes nothing on the controller has no response worth losing; nor is one lost with the
    budget spent (every scope but this one has none)."""
    state = initial_state(SCOPES[SCOPE])
    assert step(state, HeartbeatResponseLost(B0, C0)) is None  # Online already: the heartbeat writes nothing
    spent = restarted().replace(budget=restarted().budget.replace(lost_responses=0))
    assert step(spent, RegistrationResponseLost(B0, C0)) is None
    assert all(s.budget.lost_responses == 0 for name, s in SCOPES.items() if name != SCOPE)


@pytest.mark.parametrize("bug", [Bug.RETRIED_REGISTRATION_NEW_EPOCH, Bug.LOST_REGISTRATION_GUESSES_EPOCH])
def test_model_seeded_bug_of_a_lost_response_breaks_its_property(bug):
    """The scripted situation with each model bug: the property it names breaks at the retry or at the loss."""
    from model.invariants import violations

    variant = Variant(frozenset({bug}))
    state = restarted()
    target = {Bug.RETRIED_REGISTRATION_NEW_EPOCH: "OneBrokerEpochPerIncarnation",
              Bug.LOST_REGISTRATION_GUESSES_EPOCH: "BrokerEpochGivenByController"}[bug]
    broken: list[str] = []
    for action in (RegistrationResponseLost(B0, C0), RegisterWithKRaft(B0, C0)):
        nxt = step(state, action, variant)
        if nxt is None:
            break
        broken += violations(state, action, nxt)
        state = nxt
    assert target in broken


# ---- the implementation -------------------------------------------------------------------------------------


def test_impl_lost_registration_response_is_a_timeout_to_the_broker_and_the_named_step_to_the_model():
    """The cluster runs the controller's handler and withholds the answer: the broker sees Unreachable(timed_out)
    and keeps no epoch; the model takes the same step (differential: both agree after it and after the retry)."""
    diff = Differential(SCOPES[SCOPE])
    for action in RESTARTED:
        diff.apply(action)
    seen = []
    diff.cluster.brokers[0].kraft._unanswered = lambda kind, c, now, response=None: seen.append(response)
    assert diff.apply(RegistrationResponseLost(B0, C0)) == [RegistrationResponseLost(B0, C0)]
    assert seen == [Unreachable(C0, timed_out=True)]
    assert diff.cluster.brokers[0].kraft.kraft_epoch == -1
    assert diff.apply(RegisterWithKRaft(B0, C0)) == [RegisterWithKRaft(B0, C0)]


def test_impl_lost_response_of_a_request_without_effect_is_no_step():
    """A heartbeat that wrote nothing, its answer lost: the broker saw a timeout, the model saw nothing."""
    diff = Differential(SCOPES[SCOPE])
    assert diff.cluster.perform(HeartbeatResponseLost(B0, C0)) == []


def test_differential_walks_with_lost_responses_agree():
    """Seeded walks of the scope, plain and swarm: the implementation stays the model's, and responses are lost."""
    assert {RegistrationResponseLost, HeartbeatResponseLost} & walked_kinds(SCOPE, 24, 60)


def test_fault_mix_responses_loses_responses_often_the_default_now_and_then():
    assert parse("responses").lose_response > parse("all").lose_response > 0 and parse("all+responses").crash > 0
    assert all(parse(name).lose_response == 0 for name in ("none", "network", "process", "zookeeper"))
    assert parse("swarm+responses").lose_response == parse("responses").lose_response


@pytest.mark.parametrize("bug", ["impl_retried_registration_new_epoch", "impl_lost_registration_guesses_epoch"])
def test_the_default_mix_catches_the_lost_response_bugs(bug):
    """``all``, the campaign's default, loses a response now and then: its own seeds catch both bugs of a lost
    response (seed 1 does, of the first 32: 9 and 27 of them do)."""
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    plan = make_plan(seeds=2, faults="all", mutant=bug, out="unused")
    assert run_seed(plan, 1, coverage=False).disagreement is not None
    assert run_seed(make_plan(seeds=2, faults="all", out="unused"), 1, coverage=False).disagreement is None


LOST_RESPONSE_BUGS = [b for b in IMPL_SEEDED_BUGS if b.scope == SCOPE]


@pytest.mark.parametrize("bug", LOST_RESPONSE_BUGS, ids=lambda b: b.name)
def test_impl_seeded_bug_of_a_lost_response_is_caught_by_a_campaign(bug):
    """A campaign's seeded runs of the scope with ``all+responses`` (the simulator draws the lost responses)
    disagree with the model within a few seeds."""
    from properties.plan import Plan
    from properties.runs import run_seed

    plan = Plan(scope=SCOPE, faults="all+responses", mutant=bug.name)
    for seed in range(12):
        if run_seed(plan, seed, coverage=False).disagreement is not None:
            return
    pytest.fail(f"{bug.name} escaped 12 campaign runs of {SCOPE}")


def test_impl_correct_campaign_runs_with_lost_responses_agree():
    from properties.plan import Plan
    from properties.runs import run_seed

    plan = Plan(scope=SCOPE, faults="all+responses")
    for seed in range(6):
        run = run_seed(plan, seed, coverage=False)
        assert run.disagreement is None, str(run.disagreement)


def test_walks_catch_the_impl_bugs_of_a_lost_response():
    for entry in LOST_RESPONSE_BUGS:
        with pytest.raises(Disagreement):
            for seed in range(20):
                walk(SCOPES[SCOPE], seed, 60, bugs=frozenset({entry.bug}), swarm=seed % 2 == 1)
    assert {b.bug for b in LOST_RESPONSE_BUGS} == {ImplBug.RETRIED_REGISTRATION_NEW_EPOCH,
                                                    ImplBug.LOST_REGISTRATION_GUESSES_EPOCH}
