"""The z3 proofs of epoch fencing (properties/proofs/fencing.py) agree with the model and hold.

Situations: the correct model survives bounded model checking to depth 20 in both fencing scopes;
each seeded fencing bug is found, and its decoded trace breaks the same invariant when replayed
through model.step; every (action, invariant) induction obligation is proved for 2 brokers and
for any number of brokers, and a seeded bug breaks the obligation of the action it lives in;
on Hypothesis-drawn reachable states, every model step is the encoded step it claims to be.
Seeds: KIP-866 §Controller Leadership, KIP-380 §Broker Registration in Zookeeper.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model import SCOPES, SEEDED_BUGS_BY_NAME, Bug, Variant, initial_state, step
from model import zookeeper as zkm
from model.actions import ExpireSession
from model.bugs import CORRECT
from model.invariants import violations
from model.scopes import cold_state
from model.step import candidate_actions
from properties.proofs import fencing as proofs
from properties.proofs.engine import SymState, _value
from properties.proofs.fencing import (
    ACTIONS,
    ACTIONS_BY_NAME,
    ENCODED_BUGS,
    INVARIANTS,
    PROPERTY_NAMES,
    FiniteBrokers,
    bmc,
    broken_state_invariants,
    cold_start,
    encoded_guard,
    encoded_successor,
    project,
    prove,
    prove_unbounded,
    satisfies_transition,
)
from properties.simulate import random_path

FENCING_SCOPES = ("fencing", "election")
BUG_VARIANTS = {bug: Variant(frozenset({bug})) for bug in ENCODED_BUGS}


def _bug_id(bug) -> str:
    return bug.value


def _search_bug(bug):
    """BMC of the property the seeded bug targets, in the scope it names."""
    target = SEEDED_BUGS_BY_NAME[bug.value].invariant
    return bmc(20, BUG_VARIANTS[bug], properties=[target])


@pytest.fixture(scope="session")
def bug_bmc(run_once):
    """``bug_bmc(bug)``: ``_search_bug``, once per bug in the whole test run whichever worker asks
    (``tests.run_once``)."""
    return lambda bug: run_once("bmc", bug.value, lambda: _search_bug(bug))


# ---- bounded model checking -----------------------------------------------------------------------

# Depth 12 in every run (3-5 s a scope); depth 20 (about 34 s each on a loaded machine, ten times as long) under
# the slow marker.
BMC_DEPTHS = [12, pytest.param(20, marks=pytest.mark.slow)]


@pytest.mark.parametrize("depth", BMC_DEPTHS)
@pytest.mark.parametrize("scope", FENCING_SCOPES)
def test_bmc_correct_model_holds_to_depth(scope, depth):
    """No trace of ``depth`` encoded steps from the warm start breaks any encoded property."""
    result = bmc(depth, CORRECT, scope=scope)
    assert result.holds and result.complete, result.as_json()
    assert [p.name for p in result.properties] == list(PROPERTY_NAMES)
    assert all(p.refinements == 0 for p in result.properties)


@pytest.mark.parametrize("bug", sorted(ENCODED_BUGS, key=_bug_id), ids=_bug_id)
def test_bmc_finds_seeded_bug_and_trace_replays_to_the_same_violation(bug, bug_bmc):
    """The decoded counterexample, replayed from the scope's initial state, breaks the targeted invariant
    at its last step and at no step before."""
    result = bug_bmc(bug)
    assert not result.holds
    assert_replays_to_the_violation(result, bug)


@pytest.mark.parametrize("bug", sorted(ENCODED_BUGS, key=_bug_id), ids=_bug_id)
def test_bmc_counterexample_is_harmless_without_the_bug(bug, bug_bmc):
    """The same actions under the correct model break nothing: the bug, not the encoding, is to blame."""
    assert_harmless_without_the_bug(bug_bmc(bug), bug)


def assert_replays_to_the_violation(result, bug) -> None:
    """The counterexample BMC found for ``bug``, replayed from its scope's initial state, breaks the
    invariant the bug targets at its last step and at no step before."""
    seeded = SEEDED_BUGS_BY_NAME[bug.value]
    assert result.scope == seeded.scope
    cex = result.counterexamples[seeded.invariant]
    assert seeded.invariant in cex.violated
    state = initial_state(SCOPES[seeded.scope])
    for i, action in enumerate(cex.actions):
        nxt = step(state, action, Variant(frozenset({bug})))
        assert nxt is not None, f"step {i + 1} ({action!r}) is not enabled in the model"
        broken = violations(state, action, nxt)
        if i < len(cex.actions) - 1:
            assert seeded.invariant not in broken
        state = nxt
    assert seeded.invariant in broken


def assert_harmless_without_the_bug(result, bug) -> None:
    """The counterexample's actions under the correct model break nothing (as far as it can follow them)."""
    seeded = SEEDED_BUGS_BY_NAME[bug.value]
    state = initial_state(SCOPES[seeded.scope])
    for action in result.counterexamples[seeded.invariant].actions:
        nxt = step(state, action)
        if nxt is None:
            break
        assert not violations(state, action, nxt)
        state = nxt


def assert_encoding_agrees(core, encoded_as, state, scope, variant) -> None:
    """Every candidate action at ``state``: the model's projected step satisfies the formula of the encoded action
    ``encoded_as(action, state)`` says it is (a stutter leaves the core alone); a refused action has a false guard
    where the guard is exact. For a core whose module names each model action's encoded action (the migration's,
    the heartbeats')."""
    before = core.project(state)
    for action in candidate_actions(state, scope):
        kind, actors = encoded_as(action, state)
        after = step(state, action, variant)
        if after is None:
            if core.actions_by_name[kind].exact_guard:
                assert not core.encoded_guard(before, kind, actors, variant), f"{action!r}: refused, the guard holds"
            continue
        got = core.project(after)
        if kind == "Stutter":
            assert got == core.without_step_ghosts(before), f"{action!r} changes the {core.name} core"
            continue
        assert core.satisfies_transition(before, got, kind, actors, variant), f"{action!r}: the formula rejects it"


def test_bmc_decodes_expiry_to_the_session_the_broker_holds(bug_bmc):
    """ExpireSession takes a session id: the decoder looks up the one the broker holds at that point."""
    cex = bug_bmc(Bug.BROKER_KEEPS_OLD_EPOCH).counterexamples["BrokerEpochIsRegistrationCzxid"]
    state = initial_state(SCOPES["fencing"])
    expiry = cex.actions[0]
    assert isinstance(expiry, ExpireSession)
    assert zkm.session_client(state.zk, expiry.session) == cex.encoded_trace[0].broker


# ---- induction ----------------------------------------------------------------------------------------

def test_every_induction_obligation_is_proved_for_two_brokers():
    """One obligation per (action, invariant) pair plus initiation, each discharged within 10 s."""
    results = prove(CORRECT)
    state_invariants = [i for i in INVARIANTS if not i.on_step]
    assert len(results) == len(state_invariants) + len(ACTIONS) * len(INVARIANTS)
    assert [r.name for r in results if not r.proved] == []
    assert all(r.seconds < 10 for r in results)
    names = {r.name for r in results}
    assert "ElectController/AtMostOneControllerPerEpoch" in names
    assert "ControllerWrite/OnlyCurrentControllerWritesApply" in names


@pytest.mark.parametrize("bug", sorted(ENCODED_BUGS, key=_bug_id), ids=_bug_id)
def test_seeded_bug_breaks_the_obligation_of_the_action_it_lives_in(bug):
    """The failed obligation names the bug's action and its targeted invariant; no other action's fails."""
    seeded = SEEDED_BUGS_BY_NAME[bug.value]
    failed = [r for r in prove(BUG_VARIANTS[bug]) if not r.proved]
    names = {r.name for r in failed}
    assert any(f"{action}/{seeded.invariant}" in names for action in ENCODED_BUGS[bug]), names
    assert {r.name.split("/")[0] for r in failed} <= set(ENCODED_BUGS[bug])
    assert all(r.result == "counterexample-to-induction" and r.counterexample for r in failed)


def test_unbounded_proof_holds_for_any_number_of_brokers():
    """Brokers as an uninterpreted sort: the same obligations, proved for every cluster size."""
    results = prove_unbounded(CORRECT)
    assert [r.name for r in results if not r.proved] == []
    assert {r.brokers for r in results} == {"any number of brokers"}
    for name in ("AtMostOneControllerPerEpoch", "OnlyCurrentControllerWritesApply"):
        assert f"ElectController/{name}" in {r.name for r in results}


@pytest.mark.parametrize("bug", [Bug.ELECTION_WITHOUT_EPOCH_CAS, Bug.SKIP_CONTROLLER_EPOCH_CHECK],
                         ids=_bug_id)
def test_unbounded_proof_fails_where_a_seeded_bug_breaks_fencing(bug):
    """The unbounded obligations are not vacuous: the seeded bug's obligation fails there too."""
    seeded = SEEDED_BUGS_BY_NAME[bug.value]
    results = prove_unbounded(BUG_VARIANTS[bug], actions=ENCODED_BUGS[bug])
    failed = {r.name for r in results if not r.proved}
    assert any(f"{action}/{seeded.invariant}" in failed for action in ENCODED_BUGS[bug]), failed


def test_every_action_can_be_taken_under_the_invariants():
    """No obligation holds vacuously: each action has a step from a state satisfying every lemma.

    Two brokers suffice for the unbounded obligations too: a 2-broker witness is a model of the
    formulas over the uninterpreted sort with two elements."""
    assert proofs.enabled_under_invariants(FiniteBrokers(2)) == {a.name: True for a in ACTIONS}


@pytest.mark.parametrize("scope", FENCING_SCOPES)
def test_initial_states_satisfy_the_invariants(scope):
    """The cold start is what the induction's Init says, and the warm start keeps every lemma."""
    cold = project(cold_state(SCOPES[scope]))
    assert _value(cold_start(SymState.concrete(FiniteBrokers(2), cold, proofs.FENCING)))
    assert broken_state_invariants(project(initial_state(SCOPES[scope]))) == []


# ---- the encoding agrees with model.step ----------------------------------------------------------------

VARIANTS = [CORRECT] + [BUG_VARIANTS[b] for b in sorted(ENCODED_BUGS, key=_bug_id)]


def _encoded_as(action, state) -> tuple[str, int]:
    """The encoded action a model action is, with its broker."""
    if isinstance(action, ExpireSession):
        return "ExpireSession", zkm.session_client(state.zk, action.session)
    name = type(action).__name__
    if name in ACTIONS_BY_NAME:
        return name, getattr(action, "broker", getattr(action, "controller", None))
    b = proofs.writer(action)
    if b is not None:
        return "ControllerWrite", b
    return "Stutter", 0


def _check_agreement(state, scope, variant) -> None:
    """Every candidate action at ``state``: the model's projected step satisfies the encoded formula and
    is the encoding's successor; a refused action has a false guard (where the guard is exact)."""
    before = project(state)
    if variant == CORRECT:
        assert broken_state_invariants(before) == []  # the lemmas hold on reachable states too
    for action in candidate_actions(state, scope):
        kind, b = _encoded_as(action, state)
        after = step(state, action, variant)
        if after is None:
            if ACTIONS_BY_NAME[kind].exact_guard:
                assert not encoded_guard(before, kind, b, variant), f"{action!r}: refused, but the guard holds"
            continue
        got = project(after)
        if kind == "Stutter" or (kind == "ControllerWrite" and got == before):
            assert got == before, f"{action!r} changes the fencing core"
            continue
        assert satisfies_transition(before, got, kind, b, variant), f"{action!r}: the formula rejects the step"
        assert got in [encoded_successor(before, kind, b, variant, w) for w in (False, True)], f"{action!r}"


@settings(deadline=None, max_examples=30)
@given(
    scope_name=st.sampled_from(FENCING_SCOPES),
    variant=st.sampled_from(VARIANTS),
    seed=st.integers(0, 2**32 - 1),
    length=st.integers(0, 30),
)
def test_encoding_agrees_with_model_step_on_reachable_states(scope_name, variant, seed, length):
    """A seeded random walk through model.successors; the encoding agrees with model.step at every
    state on the way (the scopes run out of budget after about 20 steps, so every state counts)."""
    scope = SCOPES[scope_name]
    for state, _, _ in random_path(scope, seed, length + 1, variant):
        _check_agreement(state, scope, variant)


# ---- slow: bigger clusters, every property under every bug ---------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("scope", FENCING_SCOPES)
def test_bmc_correct_model_holds_to_depth_20_with_three_brokers(scope):
    result = bmc(20, CORRECT, n_brokers=3, scope=scope)
    assert result.holds and result.complete, result.as_json()


@pytest.mark.slow
@pytest.mark.parametrize("bug", sorted(ENCODED_BUGS, key=_bug_id), ids=_bug_id)
def test_bmc_every_property_under_seeded_bug_replays(bug):
    """All six properties under each bug: every counterexample found replays (bmc raises otherwise),
    and the targeted invariant is among those broken."""
    result = bmc(20, BUG_VARIANTS[bug])
    assert SEEDED_BUGS_BY_NAME[bug.value].invariant in result.counterexamples
    assert result.complete


@pytest.mark.slow
def test_bmc_finds_split_brain_with_three_brokers():
    result = bmc(12, BUG_VARIANTS[Bug.ELECTION_WITHOUT_EPOCH_CAS], n_brokers=3,
                 properties=["AtMostOneControllerPerEpoch"])
    assert "AtMostOneControllerPerEpoch" in result.counterexamples


@pytest.mark.slow
@pytest.mark.parametrize("n", [3, 5])
def test_every_induction_obligation_is_proved_for_bigger_clusters(n):
    assert [r.name for r in prove(CORRECT, FiniteBrokers(n)) if not r.proved] == []
