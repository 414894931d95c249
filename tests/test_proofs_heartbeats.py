"""The z3 proofs of KRaft brokers' registrations and heartbeats (properties/proofs/heartbeats.py) agree with the
model and hold.

Situations: every (action, invariant) induction obligation of the heartbeat core is proved for 2 brokers and for
any number of them, and each seeded bug it switches breaks the obligation of the action it lives in and no other
(heartbeat_accepts_older_broker_epoch: DeliverHeartbeat; unfence_before_caught_up: BrokerHeartbeat); BMC from the
held-heartbeats and kraft-broker-restart scopes is clean on the correct model, and with the first bug finds a
heartbeat of a former incarnation, held while it shut down, that reaches the controller after the broker restarted
and registered again and writes to the log, with the second a restarted broker unfenced before it replayed
anything: the traces replay through model.step to the same violation and are harmless without the bug; on
Hypothesis-drawn reachable states of those scopes (and on every reachable state of kraft-broker-restart, and of
held-heartbeats, slow), every model step is the encoded step it
claims to be, or a stutter, and an encoded action the model refuses has a false guard where the guard is exact.
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

from model import SCOPES, Bug, Variant, initial_state, step
from model.actions import HoldHeartbeat, RegisterWithKRaft, RestartBroker, SessionTimeout, StopBroker
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


@pytest.fixture(scope="session")
def bug_bmc(run_once):
    """BMC of the bug's property at depth 12 (its trace has 9 encoded steps) from its scope, once in the whole test run
    (``tests.run_once``)."""
    return run_once("bmc-heartbeats", BUG.value, lambda: CORE.bmc_in_scope(12, BUGGY, properties=[TARGET]))


# ---- induction ----------------------------------------------------------------------------------------

def test_every_induction_obligation_is_proved_for_two_brokers():
    """One obligation per (action, step property): there is no state invariant, so no Init obligation."""
    results = CORE.prove_finite(CORRECT)
    assert len(results) == len(hb.ACTIONS) * len(hb.INVARIANTS)
    assert [r.name for r in results if not r.proved] == []
    assert {r.brokers for r in results} == {"2 brokers"}
    assert {"DeliverHeartbeat/StaleHeartbeatWritesNothing", "BrokerHeartbeat/UnfencedOnlyWhenCaughtUp",
            "RegisterWithKRaft/BrokerEpochGivenByController"} <= {r.name for r in results}


def test_unbounded_proof_holds_for_any_number_of_brokers():
    """Brokers as an uninterpreted sort: the same obligations, proved for every cluster size."""
    results = CORE.prove_unbounded(CORRECT)
    assert [r.name for r in results if not r.proved] == []
    assert {r.brokers for r in results} == {"any number of brokers"}


# The obligation each seeded bug breaks: the action it lives in, the property it targets.
BROKEN = {BUG: f"DeliverHeartbeat/{TARGET}", UNFENCE: "BrokerHeartbeat/UnfencedOnlyWhenCaughtUp"}


@pytest.mark.parametrize("domain", ["finite", "unbounded"], ids=["two-brokers", "any-number"])
@pytest.mark.parametrize("bug", [BUG, UNFENCE], ids=lambda b: b.value)
def test_seeded_bug_breaks_only_the_obligation_of_its_action(domain, bug):
    """Serving a heartbeat older than the registration fails DeliverHeartbeat/StaleHeartbeatWritesNothing (a broker's
    own heartbeat carries its current epoch); unfencing before the broker caught up fails
    BrokerHeartbeat/UnfencedOnlyWhenCaughtUp (the property leaves delivered heartbeats out, as the registry does).
    Each with a CTI for 2 brokers, and nothing else fails."""
    prove = CORE.prove_finite if domain == "finite" else CORE.prove_unbounded
    failed = [r for r in prove(Variant(frozenset({bug}))) if not r.proved]
    assert [r.name for r in failed] == [BROKEN[bug]]
    assert failed[0].result == "counterexample-to-induction"
    if domain == "finite":
        assert failed[0].counterexample is not None


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
    bug. (Found at any depth up to 20: the runs of these scopes end before it, see Core.bmc_may_stop.)"""
    buggy = Variant(frozenset({UNFENCE}))
    result = CORE.bmc_in_scope(20, buggy, scope=scope, properties=["UnfencedOnlyWhenCaughtUp"])
    cex = result.counterexamples["UnfencedOnlyWhenCaughtUp"]
    names = [type(a).__name__ for a in cex.actions]
    assert names[-1] == "BrokerHeartbeat" and "RestartBroker" in names
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


# ---- the projection -------------------------------------------------------------------------------

@pytest.mark.parametrize(("scope", "reason"), [
    ("lost-responses", "lost_responses"),
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

VARIANTS = [CORRECT, Variant(profile=Profile.KAFKA_3_9), BUGGY, Variant(frozenset({UNFENCE}))]
VARIANT_IDS = ["correct", "kafka-3.9", BUG.value, UNFENCE.value]


def _check_agreement(state, scope, variant) -> None:
    assert_encoding_agrees(CORE, hb.encoded_as, state, scope, variant)


@settings(deadline=None, max_examples=25)
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
    """Exhaustively, over the small scope (469 states, about 3 s)."""
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
@pytest.mark.parametrize("bug", [BUG, UNFENCE], ids=lambda b: b.value)
def test_mutants_credits_z3_with_the_bugs_it_switches(capsys, bug):
    """`kraftcheck mutants --check z3` finds each bug by this core's BMC: from the bug's scope, or, where that scope
    is not this core's (unfence_before_caught_up's broker-migration), from the core's first scope."""
    code = cli.main(["mutants", "--check", "z3", "--bug", bug.value, "--json"])
    (row,) = json.loads(capsys.readouterr().out)
    assert code == 0 and row["caught_by"] == "z3-bmc:held-heartbeats" and row["counterexample_length"] >= 4
