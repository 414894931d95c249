"""The z3 proofs of KRaft brokers' registrations and heartbeats (properties/proofs/heartbeats.py) agree with the
model and hold.

Situations: every (action, invariant) induction obligation of the heartbeat core is proved for 2 brokers and for
any number of them, and each seeded bug it switches breaks the obligations of the actions it lives in and no other
(heartbeat_accepts_older_broker_epoch: DeliverHeartbeat; unfence_before_caught_up: BrokerHeartbeat;
lost_registration_guesses_epoch: RegistrationResponseLost; retried_registration_new_epoch: the two actions that
decide a registration); BMC from the held-heartbeats, kraft-broker-restart and lost-responses scopes is clean on the
correct model, and with the first bug finds a heartbeat of a former incarnation, held while it shut down, that
reaches the controller after the broker restarted and registered again and writes to the log, with the second a
restarted broker unfenced before it replayed anything, with the third a restarted broker whose registration's
answer is lost taking an epoch no controller gave it, with the fourth a registration retried after its answer was
lost written again with a new epoch: the traces replay through model.step to the same violation and are harmless
without the bug; on Hypothesis-drawn reachable states of those scopes (and on every reachable state of
kraft-broker-restart; of held-heartbeats and lost-responses, slow), every model step is the encoded step it claims
to be, or a stutter, an encoded action the model refuses has a false guard where the guard is exact, and the encoded
properties the step breaks are the registry's.
Seeds: KIP-380 §Controller Rejects ControlledShutdownRequest Sent from Former Generations (on KRaft: reference
§3.2, checkBrokerEpoch); KIP-500 §Broker Metadata Management, §Broker States; KIP-866 §Broker Registration.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from model import SCOPES, SEEDED_BUGS_BY_NAME, Bug, Variant, initial_state, step
from model.actions import (
    HeartbeatResponseLost,
    HoldHeartbeat,
    RegisterWithKRaft,
    RestartBroker,
    SessionTimeout,
    StopBroker,
)
from model.bugs import CORRECT
from model.invariants import violations
from model.migration import Profile
from model.step import candidate_actions
from model.types import BrokerId
from properties import cli
from properties.proofs import heartbeats as hb
from properties.proofs.engine import OutsideProjection
from properties.simulate import random_path
from tests.test_proofs import (
    assert_encoding_agrees,
    assert_harmless_without_the_bug,
    assert_replays_to_the_violation,
)

CORE = hb.HEARTBEAT_CORE
BUG = Bug.HEARTBEAT_ACCEPTS_OLDER_BROKER_EPOCH
BUGGY = Variant(frozenset({BUG}))
UNFENCE = Bug.UNFENCE_BEFORE_CAUGHT_UP  # its scope, broker-migration, is not this core's: BMC runs from the core's
TARGET = "StaleHeartbeatWritesNothing"
GUESS = Bug.LOST_REGISTRATION_GUESSES_EPOCH  # both in lost-responses
RETRY = Bug.RETRIED_REGISTRATION_NEW_EPOCH


@pytest.fixture(scope="session")
def bug_bmc(run_once):
    """BMC of the bug's property at depth 12 (its trace has 9 encoded steps) from its scope, once in the whole test run
    (``tests.run_once``)."""
    return run_once("bmc-heartbeats", BUG.value, lambda: CORE.bmc_in_scope(12, BUGGY, properties=[TARGET]))


# ---- induction ----------------------------------------------------------------------------------------

def test_every_induction_obligation_is_proved_for_two_brokers():
    """One obligation per (action, property), and Init's of the one state invariant, OneBrokerEpochPerIncarnation."""
    results = CORE.prove_finite(CORRECT)
    assert len(results) == 1 + len(hb.ACTIONS) * len(hb.INVARIANTS)
    assert [r.name for r in results if not r.proved] == []
    assert {r.brokers for r in results} == {"2 brokers"}
    assert {"DeliverHeartbeat/StaleHeartbeatWritesNothing", "BrokerHeartbeat/UnfencedOnlyWhenCaughtUp",
            "RegisterWithKRaft/BrokerEpochGivenByController", "Init/OneBrokerEpochPerIncarnation",
            "RegistrationResponseLost/BrokerEpochGivenByController",
            "RegistrationResponseLost/OneBrokerEpochPerIncarnation",
            "HeartbeatResponseLost/UnfencedOnlyWhenCaughtUp"} <= {r.name for r in results}


def test_unbounded_proof_holds_for_any_number_of_brokers():
    """Brokers as an uninterpreted sort: the same obligations, proved for every cluster size."""
    results = CORE.prove_unbounded(CORRECT)
    assert [r.name for r in results if not r.proved] == []
    assert {r.brokers for r in results} == {"any number of brokers"}


# The obligations each seeded bug breaks: of the actions it lives in, the property it targets.
BROKEN = {
    BUG: [f"DeliverHeartbeat/{TARGET}"],
    UNFENCE: [f"{action}/UnfencedOnlyWhenCaughtUp" for action in
              ("BrokerHeartbeat", "HeartbeatResponseLost", "DeliverHeartbeat")],
    GUESS: ["RegistrationResponseLost/BrokerEpochGivenByController"],
    RETRY: ["RegisterWithKRaft/OneBrokerEpochPerIncarnation", "RegistrationResponseLost/OneBrokerEpochPerIncarnation"],
}


@pytest.mark.parametrize("domain", ["finite", "unbounded"], ids=["two-brokers", "any-number"])
@pytest.mark.parametrize("bug", list(BROKEN), ids=lambda b: b.value)
def test_seeded_bug_breaks_only_the_obligations_of_its_actions(domain, bug):
    """Serving a heartbeat older than the registration fails DeliverHeartbeat/StaleHeartbeatWritesNothing (a broker's
    own heartbeat, answered or lost, carries its current epoch); unfencing before the broker caught up fails
    UnfencedOnlyWhenCaughtUp's obligations of the three heartbeats that decide it (the broker's own, answered or
    lost, and a held one delivered late); a broker that guesses the epoch of a lost registration fails
    RegistrationResponseLost/BrokerEpochGivenByController; a retry written with a new epoch fails
    OneBrokerEpochPerIncarnation's obligations of both actions that decide a registration. Each with a CTI for
    2 brokers, and nothing else fails."""
    prove = CORE.prove_finite if domain == "finite" else CORE.prove_unbounded
    failed = [r for r in prove(Variant(frozenset({bug}))) if not r.proved]
    assert [r.name for r in failed] == BROKEN[bug]
    assert {r.result for r in failed} == {"counterexample-to-induction"}
    if domain == "finite":
        assert all(r.counterexample is not None for r in failed)


def test_every_action_can_be_taken():
    """No obligation holds vacuously: each encoded action has a step."""
    assert CORE.enabled_under_invariants(CORE.finite(2)) == {a.name: True for a in hb.ACTIONS}


# ---- bounded model checking -----------------------------------------------------------------------

@pytest.mark.parametrize("scope", hb.SCOPE_NAMES)
@pytest.mark.parametrize("depth", [12, pytest.param(20, marks=pytest.mark.slow)])  # 20: 2-4 s a scope, loaded
def test_bmc_correct_model_holds_to_depth(scope, depth):
    """No trace of ``depth`` encoded steps from the scope's start breaks an encoded property."""
    result = CORE.bmc_in_scope(depth, CORRECT, scope=scope)
    assert result.holds and result.complete, result.as_json()
    assert [p.name for p in result.properties] == list(CORE.property_names)


def test_bmc_finds_the_former_generations_heartbeat_and_it_replays(bug_bmc):
    """The decoded counterexample, replayed from held-heartbeats' start, breaks StaleHeartbeatWritesNothing at its
    last step and at no step before: a heartbeat held while the broker shut down, delivered after the restarted
    broker registered again."""
    assert_replays_to_the_violation(bug_bmc, BUG)
    cex = bug_bmc.counterexamples[TARGET]
    names = [type(a).__name__ for a in cex.actions]
    assert names[-1] == "DeliverHeartbeat"
    held = names.index("HoldHeartbeat")
    assert "RestartBroker" in names[held:] and "RegisterWithKRaft" in names[names.index("RestartBroker"):]
    assert cex.actions[-1].request.broker_epoch < 15  # the first incarnation's epoch (12), not the new one
    assert 0 <= len(cex.actions) - len(cex.encoded_trace) <= hb.MAX_STUTTERS


def test_bmc_counterexample_is_harmless_without_the_bug(bug_bmc):
    assert_harmless_without_the_bug(bug_bmc, BUG)


@pytest.mark.parametrize("scope", hb.SCOPE_NAMES)
def test_bmc_finds_unfencing_before_caught_up_from_the_cores_scopes(scope):
    """A restarted broker registers and its first heartbeat unfences it, though it has replayed nothing: the trace
    replays through model.step to UnfencedOnlyWhenCaughtUp at its last step only, and breaks nothing without the
    bug. (Found at any depth up to 20: the runs of these scopes end before it, see Core.bmc_may_stop.) In
    lost-responses that heartbeat's answer may be lost: a trace as short ends in either, and the solver picks."""
    buggy = Variant(frozenset({UNFENCE}))
    result = CORE.bmc_in_scope(20, buggy, scope=scope, properties=["UnfencedOnlyWhenCaughtUp"])
    cex = result.counterexamples["UnfencedOnlyWhenCaughtUp"]
    names = [type(a).__name__ for a in cex.actions]
    assert names[-1] in ("BrokerHeartbeat", "HeartbeatResponseLost") and "RestartBroker" in names
    for variant, breaks in ((buggy, True), (CORRECT, False)):
        state = initial_state(SCOPES[scope])
        for i, action in enumerate(cex.actions):
            nxt = step(state, action, variant)
            if nxt is None and not breaks:
                break  # the correct model need not follow it
            assert nxt is not None, f"step {i + 1} ({action!r}) is not enabled in the model"
            broken = "UnfencedOnlyWhenCaughtUp" in violations(state, action, nxt)
            assert broken == (breaks and i == len(cex.actions) - 1)
            state = nxt


@pytest.fixture(scope="session")
def lost_bmc(run_once):
    """``lost_bmc(bug)``: BMC of the bug's property at depth 12 from lost-responses, once per bug in the whole test
    run (``tests.run_once``)."""
    def search(bug):
        target = SEEDED_BUGS_BY_NAME[bug.value].invariant
        return CORE.bmc_in_scope(12, Variant(frozenset({bug})), properties=[target])

    return lambda bug: run_once("bmc-heartbeats", bug.value, lambda: search(bug))


def _agrees_along(result, bug) -> list[str]:
    """The encoding agrees with the model at every state of the bug's counterexample (``_check_agreement``, the
    broken properties included); the names of its actions."""
    seeded = SEEDED_BUGS_BY_NAME[bug.value]
    scope, variant = SCOPES[seeded.scope], Variant(frozenset({bug}))
    state = initial_state(scope)
    actions = result.counterexamples[seeded.invariant].actions
    for action in actions:
        _check_agreement(state, scope, variant)
        state = step(state, action, variant)
    return [type(a).__name__ for a in actions]


def test_bmc_finds_a_broker_guessing_the_epoch_of_a_lost_registration(lost_bmc):
    """The broker restarts (replayed nothing), the former incarnation's session lapses or is fenced, and the new
    incarnation's registration is written but its answer lost: the broker takes offset 0 for its epoch, which no
    controller gave it. The trace replays from lost-responses' start to BrokerEpochGivenByController at its last
    step only, breaks nothing without the bug, and the encoding agrees with the model at each of its states."""
    result = lost_bmc(GUESS)
    assert_replays_to_the_violation(result, GUESS)
    assert_harmless_without_the_bug(result, GUESS)
    names = _agrees_along(result, GUESS)
    assert names[-1] == "RegistrationResponseLost" and "RestartBroker" in names


def test_bmc_finds_a_retried_registration_written_with_a_new_epoch(lost_bmc):
    """A restarted broker's registration is written and its answer lost; the broker registers again with the same
    incarnation, and the controller writes a second registration of it with a new epoch. The trace replays from
    lost-responses' start to OneBrokerEpochPerIncarnation at its last step only, breaks nothing without the bug,
    and the encoding agrees with the model at each of its states (its last step sets split_epochs, as the registry's
    predicate reads the log after it)."""
    result = lost_bmc(RETRY)
    assert_replays_to_the_violation(result, RETRY)
    assert_harmless_without_the_bug(result, RETRY)
    names = _agrees_along(result, RETRY)
    assert names[-1] in ("RegisterWithKRaft", "RegistrationResponseLost")
    assert "RegistrationResponseLost" in names[:-1] and "RestartBroker" in names


# ---- the projection -------------------------------------------------------------------------------

@pytest.mark.parametrize(("scope", "reason"), [
    ("finalize-failover", "one KRaft controller"),
    ("create-partitions", "partition_creations"),
    ("fencing", "no KRaft controller"),
])
def test_projection_refuses_what_the_core_does_not_encode(scope, reason):
    with pytest.raises(OutsideProjection, match=reason):
        hb.project(initial_state(SCOPES[scope]))


def test_projection_refuses_a_zookeeper_mode_broker():
    """A migrating ZK broker registers with KRaft as IsMigratingZkBroker: not this core's."""
    state = initial_state(SCOPES["held-heartbeats"])
    b = state.brokers[0]
    zk_broker = state.replace(brokers=(b.replace(config=b.config.replace(kraft_mode=False)),))
    with pytest.raises(OutsideProjection, match="ZooKeeper-mode broker"):
        hb.project(zk_broker)


def test_projection_refuses_two_held_heartbeats_of_one_broker():
    """The core has one slot per broker; the scopes' budget holds one heartbeat at a time."""
    state = initial_state(SCOPES["held-heartbeats"])
    held = step(state, HoldHeartbeat(BrokerId(0), state.controllers[0].id))
    assert held is not None and len(held.held) == 1
    (r,) = held.held
    with pytest.raises(OutsideProjection, match="two heartbeats"):
        hb.project(held.replace(held=held.held | {r.replace(want_shutdown=not r.want_shutdown)}))


# ---- the encoding agrees with model.step ------------------------------------------------------------

VARIANTS = [CORRECT, Variant(profile=Profile.KAFKA_3_9), *[Variant(frozenset({b})) for b in BROKEN]]
VARIANT_IDS = ["correct", "kafka-3.9", *[b.value for b in BROKEN]]


def _check_agreement(state, scope, variant, core=CORE) -> None:
    """Every candidate action at ``state``: the step is the encoded one (``assert_encoding_agrees``), and the encoded
    properties it breaks are the registry's among them (``model.invariants.violations``)."""
    assert_encoding_agrees(core, hb.encoded_as, state, scope, variant)
    before = core.project(state)
    for action in candidate_actions(state, scope):
        after = step(state, action, variant)
        if after is not None:
            encoded = core.broken_properties(before, core.project(after))
            registry = set(violations(state, action, after)) & set(core.property_names)
            assert set(encoded) == registry, f"{action!r}: the encoding breaks {encoded}, the registry {registry}"


@settings(deadline=None, max_examples=40)  # 3 scopes, 6 variants: about 10 s, loaded
@given(
    scope_name=st.sampled_from(hb.SCOPE_NAMES),
    variant=st.sampled_from(VARIANTS),
    seed=st.integers(0, 2**32 - 1),
    length=st.integers(0, 16),
)
def test_encoding_agrees_with_model_step_on_reachable_states(scope_name, variant, seed, length):
    """A seeded random walk through model.successors; the encoding agrees with model.step at every state on it."""
    scope = SCOPES[scope_name]
    for state, _, _ in random_path(scope, seed, length + 1, variant):
        _check_agreement(state, scope, variant)


def _restarted_over_a_live_registration():
    """kraft-broker-restart's broker stopped and restarted: its new incarnation runs, with no broker epoch, beside
    its former incarnation's registration, still unfenced."""
    scope = SCOPES["kraft-broker-restart"]
    state, b = initial_state(scope), BrokerId(0)
    for action in (StopBroker(b), RestartBroker(b)):
        state = step(state, action)
        assert state is not None, action
    return scope, state, b, state.controllers[0].id


def _ignoring_the_lapse():
    """The core as it was before the session lapse: RegisterWithKRaft refused by any unfenced registration of
    another incarnation, lapsed or not."""
    def register(s, b, variant, choose):
        me, effect = s.of(b), hb.register_with_kraft(s, b, variant, choose)
        live = z3.And(me.reg_exists, me.reg_incarnation != me.incarnation, z3.Not(me.reg_fenced))
        return dataclasses.replace(effect, guard=z3.And(effect.guard, z3.Not(live)))

    core = copy.copy(CORE)
    core.actions = tuple(dataclasses.replace(a, effect=register) if a.name == "RegisterWithKRaft" else a
                         for a in CORE.actions)
    core.actions_by_name = {a.name: a for a in core.actions}
    return core


def test_a_lapsed_session_lets_a_new_incarnation_register_and_the_encoding_agrees():
    """DUPLICATE_BROKER_REGISTRATION while the former incarnation's session is valid; SessionTimeout(fence=False)
    (the encoded SessionLapses) lapses it, with no record; then the new incarnation registers, which renews the
    session. The encoding agrees at each state, and the core that ignores the lapse fails the agreement check there
    (the check can fail), but not before the lapse."""
    scope, state, b, c = _restarted_over_a_live_registration()
    assert step(state, RegisterWithKRaft(b, c)) is None
    assert hb.encoded_as(SessionTimeout(b, c, fence=False), state) == ("SessionLapses", (0,))
    lapsed = step(state, SessionTimeout(b, c, fence=False))
    assert lapsed is not None and hb.project(lapsed)["lapsed"] == (True,)
    assert len(lapsed.controllers[0].log) == len(state.controllers[0].log)
    registered = step(lapsed, RegisterWithKRaft(b, c))
    assert registered is not None and hb.project(registered)["lapsed"] == (False,)
    for at in (state, lapsed, registered):
        _check_agreement(at, scope, CORRECT)
    old = _ignoring_the_lapse()
    assert_encoding_agrees(old, hb.encoded_as, state, scope, CORRECT)
    with pytest.raises(AssertionError, match="RegisterWithKRaft.*the formula rejects it"):
        assert_encoding_agrees(old, hb.encoded_as, lapsed, scope, CORRECT)


def test_encoding_agrees_on_every_reachable_state_of_kraft_broker_restart():
    """Exhaustively, over the small scope (469 states, 7 s on a loaded machine)."""
    scope = SCOPES["kraft-broker-restart"]
    assert _explore_checking(scope, CORRECT) == 469


def _explore_checking(scope, variant) -> int:
    start = initial_state(scope)
    seen, frontier = {start}, [start]
    while frontier:
        nxt = []
        for state in frontier:
            _check_agreement(state, scope, variant)
            for action in candidate_actions(state, scope):
                after = step(state, action, variant)
                if after is not None and after not in seen:
                    seen.add(after)
                    nxt.append(after)
        frontier = nxt
    return len(seen)


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_encoding_agrees_on_every_reachable_state_of_held_heartbeats(variant):
    """Every reachable state of held-heartbeats (20,657 under kip, 32,411 under kafka-3.9: minutes each)."""
    _explore_checking(SCOPES["held-heartbeats"], variant)


@pytest.mark.slow  # loaded machine: 1.6 min under kip, 2.7 under kafka-3.9, 1.8 and 5.1 with the scope's bugs
@pytest.mark.parametrize("variant", [*VARIANTS[:2], Variant(frozenset({GUESS})), Variant(frozenset({RETRY}))],
                         ids=[*VARIANT_IDS[:2], GUESS.value, RETRY.value])
def test_encoding_agrees_on_every_reachable_state_of_lost_responses(variant):
    """Every reachable state of lost-responses (5,546 under kip, 8,191 under kafka-3.9, docs/manifest.md): every
    lost registration and lost heartbeat, every retry after one, and the states of the scope's seeded bugs (5,936
    with lost_registration_guesses_epoch, 19,024 with retried_registration_new_epoch)."""
    count = _explore_checking(SCOPES["lost-responses"], variant)
    if not variant.bugs:
        assert count == {Profile.KAFKA_3_9: 8191}.get(variant.profile, 5546)


def _registered_after_a_restart(variant):
    """lost-responses' broker restarted over its former incarnation's registration, which a SessionTimeout fences (a
    process gone: free), and registered again: fenced, before its first heartbeat, having replayed nothing."""
    scope = SCOPES["lost-responses"]
    state, b = initial_state(scope), BrokerId(0)
    c = state.controllers[0].id
    for action in (StopBroker(b), RestartBroker(b), SessionTimeout(b, c), RegisterWithKRaft(b, c)):
        state = step(state, action, variant)
        assert state is not None, action
    return scope, state, b, c


def _unfenced_by_broker_heartbeat_alone(pre, post):
    """UnfencedOnlyWhenCaughtUp as the registry had it before: BrokerHeartbeat's alone, a lost heartbeat's (the step
    that spends lost_left) and a delivered held one's left out."""
    lost = post.lost_left != pre.lost_left

    def caught_up(b):
        old, new = pre.of(b), post.of(b)
        unfenced = z3.And(old.reg_exists, new.reg_exists, old.reg_fenced, z3.Not(new.reg_fenced))
        heartbeat = z3.Not(z3.Or(hb._delivered(pre, post, b), lost))
        return z3.Implies(z3.And(unfenced, heartbeat), old.offset > old.reg_epoch)

    return pre.dom.every(caught_up)


def test_a_lost_heartbeat_that_unfences_too_early_breaks_unfenced_only_when_caught_up():
    """With unfence_before_caught_up, the registered broker's heartbeat unfences it though it replayed nothing, and
    its answer is lost: the registry's UnfencedOnlyWhenCaughtUp judges every heartbeat that unfences, so the step
    breaks it, and the encoding agrees; the property that counted BrokerHeartbeat alone (as the registry did) let
    it through, and the agreement check tells the two apart. (kafka-3.9: no lag bound to refuse the write before
    ZooKeeper catches up.)"""
    variant = Variant(frozenset({UNFENCE}), profile=Profile.KAFKA_3_9)
    scope, state, b, c = _registered_after_a_restart(variant)
    lost = HeartbeatResponseLost(b, c)
    after = step(state, lost, variant)
    assert after is not None and "UnfencedOnlyWhenCaughtUp" in violations(state, lost, after)
    assert hb.project(state)["reg_fenced"] == (True,) and hb.project(after)["reg_fenced"] == (False,)
    _check_agreement(state, scope, variant)
    broker_heartbeat_alone = copy.copy(CORE)
    broker_heartbeat_alone.invariants = tuple(
        dataclasses.replace(i, holds=_unfenced_by_broker_heartbeat_alone) if i.name == "UnfencedOnlyWhenCaughtUp"
        else i for i in CORE.invariants)
    with pytest.raises(AssertionError, match="HeartbeatResponseLost.*the encoding breaks"):
        _check_agreement(state, scope, variant, broker_heartbeat_alone)


# ---- the command ------------------------------------------------------------------------------------

def test_prove_command_runs_the_heartbeat_core_alone_for_its_bug(capsys):
    """`kraftcheck prove --bug heartbeat_accepts_older_broker_epoch` runs only this core (the others do not switch
    the bug), exits 1, and its BMC row carries the replayed trace; ``--property`` keeps the bug's property's rows."""
    code = cli.main(["prove", "--depth", "10", "--bug", BUG.value, "--property", TARGET, "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 1
    names = {r["name"]: r for r in rows}
    violated = names[f"BMC/held-heartbeats/depth-10/{TARGET}"]
    assert violated["result"] == "violated" and violated["counterexample"]["actions"][-1].startswith("DeliverHeartbeat")
    assert names[f"BMC/kraft-broker-restart/depth-10/{TARGET}"]["result"] == "holds"  # nothing is held there
    assert {r["name"] for r in rows if r["result"] not in ("holds", "proved")} == {
        f"BMC/held-heartbeats/depth-10/{TARGET}", f"DeliverHeartbeat/{TARGET}"}
    assert all(r["name"].endswith(f"/{TARGET}") for r in rows)


def test_prove_command_without_a_bug_runs_the_heartbeat_core_too(monkeypatch, capsys):
    """With no bug every core runs: the heartbeat core's rows are among them (the other cores' checks stubbed out
    here; tests/test_cli.py runs them all, slow)."""
    from properties.proofs.fencing import FENCING
    from properties.proofs.migration import MIGRATION_CORE

    monkeypatch.setattr(FENCING, "report", lambda variant, depth, goals: [])
    monkeypatch.setattr(MIGRATION_CORE, "report", lambda variant, depth, goals: [])
    code = cli.main(["prove", "--depth", "4", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and {r["result"] for r in rows} == {"holds", "proved"}
    assert f"BMC/held-heartbeats/depth-4/{TARGET}" in {r["name"] for r in rows}


@pytest.mark.slow  # the bugs' BMC again, through the command (3 s each, loaded)
@pytest.mark.parametrize(("bug", "scope"), [(BUG, "held-heartbeats"), (UNFENCE, "held-heartbeats"),
                                            (GUESS, "lost-responses"), (RETRY, "lost-responses")],
                         ids=lambda v: getattr(v, "value", v))
def test_mutants_credits_z3_with_the_bugs_it_switches(capsys, bug, scope):
    """`kraftcheck mutants --check z3` finds each bug by this core's BMC: from the bug's scope, or, where that scope
    is not this core's (unfence_before_caught_up's broker-migration), from the core's first scope."""
    code = cli.main(["mutants", "--check", "z3", "--bug", bug.value, "--json"])
    (row,) = json.loads(capsys.readouterr().out)
    assert code == 0 and row["caught_by"] == f"z3-bmc:{scope}" and row["counterexample_length"] >= 4
