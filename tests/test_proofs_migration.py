"""The z3 proofs of the migration's fencing (properties/proofs/migration.py) agree with the model and hold.

Situations: every (action, invariant) induction obligation of the migration fencing core is
proved for 2 KRaft controllers and for any number of them, and each seeded bug the core switches
breaks the obligation of the action it lives in; BMC from a scope's real initial state is clean
on the correct model, and finds each seeded bug whose trace it can follow, with a counterexample
that replays through model.step (log-only model steps inserted where the core does not see them)
to the same violation and is harmless without the bug; on Hypothesis-drawn reachable states of
the migration scopes, every model step is the encoded step it claims to be, or a stutter.
Seeds: KIP-866 §Controller Leadership, §Dual Metadata Writes (the /migration compare-and-set),
§Migration Overview (the driver's states); KIP-500 §Controller Quorum (Raft epochs).
"""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model import SCOPES, SEEDED_BUGS_BY_NAME, Bug, Variant, initial_state
from model.actions import RunMetadataChange
from model.bugs import CORRECT
from model.invariants import violations
from model.migration import Profile
from model.scopes import cold_state
from model.step import step as model_step
from properties import cli
from properties.proofs import migration as pm
from properties.proofs.engine import Core, ObligationResult, OutsideProjection, _value, all_hold
from properties.simulate import random_path
from tests.test_proofs import (
    assert_encoding_agrees,
    assert_harmless_without_the_bug,
    assert_replays_to_the_violation,
)

CORE = pm.MIGRATION_CORE
# The migration scopes the core projects (the others allow ZooKeeper elections: the fencing core's).
PROJECTED = ("kraft-quorum", "kraft-born", "pre-migration", "migration", "dual-write", "broker-migration",
             "finalize", "finalize-failover", "handover", "kraft-broker-restart", "stale-reads", "dual-write-resend",
             "dual-write-failure", "event-queue", "batched-migration")
BUG_VARIANTS = {bug: Variant(frozenset({bug})) for bug in pm.ENCODED_BUGS}
# Its trace needs a new leader's committed log to show the migration done while /migration does not;
# the search spends its refinements on the old leader's paths first (see the module docstring).
NOT_FOUND_BY_BMC = {Bug.DUAL_WRITE_BEFORE_SYNC}
BMC_BUGS = sorted(set(pm.ENCODED_BUGS) - NOT_FOUND_BY_BMC, key=lambda b: b.value)
BUG_DEPTH = 10  # the longest of their shortest traces is 9 encoded steps, but for:
BUG_DEPTHS = {
    Bug.ACTIVATE_ON_UNCOMMITTED_LOG: 20,  # 14 encoded steps: the migration, a restarted quorum, an election
    Bug.CLAIM_TRUSTS_STALE_READ: 12,  # 11: a lag, a claim, a failover whose driver claims from the lagging read
}
# The obligations the design itself fails (a finding the explorer pins in scope stale-reads, both profiles).
FINDINGS = {f"{action}/{prop}" for action, prop in CORE.findings}
# A bug whose own step breaks a lemma the targeted property's proof rests on, not the property: the
# activation bug's POST_MIGRATION, appended on an uncommitted MIGRATION, commits in a later Fetch.
BREAKS_LEMMA = {Bug.ACTIVATE_ON_UNCOMMITTED_LOG: "LogsAtMostOneStateAhead"}


def _bug_id(bug) -> str:
    return bug.value


def _search_bug(bug):
    """BMC of the property the seeded bug targets, in the scope it names."""
    depth = BUG_DEPTHS.get(bug, BUG_DEPTH)
    return CORE.bmc_in_scope(depth, BUG_VARIANTS[bug], properties=[SEEDED_BUGS_BY_NAME[bug.value].invariant])


@pytest.fixture(scope="session")
def bug_bmc(run_once):
    """``bug_bmc(bug)``: ``_search_bug``, once per bug in the whole test run whichever worker asks
    (``tests.run_once``)."""
    return lambda bug: run_once("bmc-migration", bug.value, lambda: _search_bug(bug))


# ---- induction ----------------------------------------------------------------------------------------

def test_every_induction_obligation_is_proved_for_two_controllers():
    """One obligation per (action, invariant) pair plus initiation, each discharged within 10 s, but for the
    design's finding: BecomeZkController writes /migration back as a lagging server shows it, an older offset."""
    results = CORE.prove_finite(CORRECT)
    state_invariants = [i for i in pm.INVARIANTS if not i.on_step]
    assert len(results) == len(state_invariants) + len(pm.ACTIONS) * len(pm.INVARIANTS)
    failed = [r for r in results if not r.proved]
    assert [r.name for r in failed] == ["BecomeZkController/MigrationOffsetNeverGoesBack"] == sorted(FINDINGS)
    [cti] = failed
    assert cti.result == "counterexample-to-induction"
    pre, post = cti.counterexample["pre"], cti.counterexample["post"]
    # the writer reads through a lagging server, which shows an older offset
    assert any(pre["lags"]) and post["migration_offset"] < pre["migration_offset"]
    assert all(r.seconds < 10 for r in results)
    assert {r.brokers for r in results} == {"2 controllers"}
    names = {r.name for r in results}
    assert "DualWrite/OnlyCurrentKRaftLeaderWritesApply" in names
    assert "BecomeZkController/KRaftEpochInZkOnlyIncreases" in names
    assert {"Fetch/MigrationStateOnlyMovesForward", "CompleteMigration/MigrationStateOnlyMovesForward"} <= names


def test_unbounded_proof_holds_for_any_number_of_controllers():
    """Controllers as an uninterpreted sort: the same obligations, proved for every quorum size."""
    results = CORE.prove_unbounded(CORRECT)
    failed = [r for r in results if not r.proved]
    assert [r.name for r in failed] == sorted(FINDINGS)
    # z3 leaves the finding unknown over any number; its counterexample is found among 2 controllers
    assert [(r.result, r.brokers) for r in failed] == [("counterexample-to-induction",
                                                        "any number of controllers, found among 2")]
    assert {r.brokers for r in results if r.proved} == {"any number of controllers"}
    assert "BecomeZkController/ZkControllerEpochsIncreaseAcrossHandOver" in {r.name for r in results}


@pytest.mark.parametrize("bug", sorted(pm.ENCODED_BUGS, key=_bug_id), ids=_bug_id)
def test_seeded_bug_breaks_the_obligation_of_the_action_it_lives_in(bug):
    """The bug's action fails the obligation of the invariant the bug targets (or of the lemma its proof rests
    on, ``BREAKS_LEMMA``), with a CTI."""
    broken = BREAKS_LEMMA.get(bug, SEEDED_BUGS_BY_NAME[bug.value].invariant)
    failed = [r for r in CORE.prove_finite(BUG_VARIANTS[bug], actions=pm.ENCODED_BUGS[bug]) if not r.proved]
    assert any(f"{action}/{broken}" in {r.name for r in failed} for action in pm.ENCODED_BUGS[bug])
    assert all(r.result == "counterexample-to-induction" and r.counterexample for r in failed)


@pytest.mark.parametrize("bug", [Bug.DUAL_WRITE_SKIPS_EPOCH_CHECK, Bug.CLAIM_IGNORES_NEWER_KRAFT_EPOCH],
                         ids=_bug_id)
def test_unbounded_proof_fails_where_a_seeded_bug_breaks_fencing(bug):
    """The unbounded obligations are not vacuous: the seeded bug's obligation has a counterexample to induction in
    the unbounded encoding, with every invariant assumed as in the whole proof (``goals``: the other properties'
    obligations of its actions, which the proof of the correct model discharges below, are left out). z3 finds it
    among states of 2 controllers (``refute_unbounded``); over any number it answers "unknown" at its timeout."""
    seeded = SEEDED_BUGS_BY_NAME[bug.value]
    results = CORE.refute_unbounded(BUG_VARIANTS[bug], actions=pm.ENCODED_BUGS[bug], goals=[seeded.invariant])
    assert {r.name for r in results} == {f"{action}/{seeded.invariant}" for action in pm.ENCODED_BUGS[bug]}
    assert any(r.result == "counterexample-to-induction" for r in results), results


def test_an_unknown_unbounded_obligation_is_refuted_among_few_controllers_and_never_proved():
    """What z3 leaves unknown over any number (here at a 1 ms timeout) is searched among 2 and 3 controllers: the
    bug's counterexample is found and reported for any number; the correct model's obligation stays unknown."""
    bug = Bug.DUAL_WRITE_SKIPS_EPOCH_CHECK
    goals = [SEEDED_BUGS_BY_NAME[bug.value].invariant]
    [refuted] = CORE.prove_unbounded(BUG_VARIANTS[bug], actions=pm.ENCODED_BUGS[bug], goals=goals, timeout_ms=1)
    assert (refuted.result, refuted.brokers) == ("counterexample-to-induction",
                                                 "any number of controllers, found among 2")
    [kept] = CORE.prove_unbounded(actions=pm.ENCODED_BUGS[bug], goals=goals, timeout_ms=1)
    assert (kept.result, kept.brokers) == ("unknown", "any number of controllers")


def test_no_counterexample_of_few_controllers_where_the_correct_model_is_proved():
    """The same search finds none in the correct model's obligations of those actions, so what it finds above is
    the bug's."""
    actions = sorted({a for bug in (Bug.DUAL_WRITE_SKIPS_EPOCH_CHECK, Bug.CLAIM_IGNORES_NEWER_KRAFT_EPOCH)
                      for a in pm.ENCODED_BUGS[bug]})
    results = CORE.refute_unbounded(actions=actions)
    assert results and [r.name for r in results if not r.proved] == sorted(FINDINGS)


def test_every_action_can_be_taken_under_the_invariants():
    """No obligation holds vacuously: each action has a step from a state satisfying every lemma."""
    assert CORE.enabled_under_invariants(CORE.finite(2)) == {a.name: True for a in pm.ACTIONS}


@pytest.mark.parametrize("scope", PROJECTED)
def test_initial_states_satisfy_the_invariants(scope):
    """The cold start is what the induction's Init says, and the warm start keeps every lemma."""
    cold = pm.project(cold_state(SCOPES[scope]))
    assert _value(pm.migration_start(CORE.concrete(CORE.finite(CORE.size_of(cold)), cold)))
    assert CORE.broken_state_invariants(pm.project(initial_state(SCOPES[scope]))) == []


@pytest.mark.parametrize("scope", ["rollback", "lifecycle"])
def test_projection_refuses_scopes_with_zookeeper_elections(scope):
    """After the KIP's rollback a ZooKeeper election reuses an epoch (the scopes' pinned finding): not this core's."""
    with pytest.raises(OutsideProjection, match="election"):
        pm.project(initial_state(SCOPES[scope]))


def test_bmc_assumes_only_the_lemmas_a_seeded_bug_leaves_inductive():
    """Without the /controller_epoch check a stale dual write can move /migration's epoch back: the lemmas
    about /migration's epoch are dropped, the ones about claims are kept (they fence the claim, not writes)."""
    start = pm.project(initial_state(SCOPES["dual-write"]))
    buggy = BUG_VARIANTS[Bug.DUAL_WRITE_SKIPS_EPOCH_CHECK]
    kept = {i.name for i in CORE.inductive_lemmas(buggy, CORE.finite(2), start)}
    assert "MigrationZnodeNamesNoNewerLeadership" not in kept
    assert {"CurrentClaimantOwnsTheControllerZnode", "ClaimedVersionsAreNotAhead"} <= kept
    every = {i.name for i in pm.INVARIANTS if i.lemma}
    assert {i.name for i in CORE.inductive_lemmas(CORRECT, CORE.finite(2), start)} == every


# ---- bounded model checking -----------------------------------------------------------------------

@pytest.mark.parametrize("depth", [12, pytest.param(20, marks=pytest.mark.slow)])  # as tests/test_proofs.py
def test_bmc_correct_model_holds_to_depth(depth):
    """No trace of ``depth`` encoded steps from the finalize scope's start breaks any encoded property."""
    result = CORE.bmc_in_scope(depth, CORRECT, scope="finalize")
    assert result.holds and result.complete, result.as_json()
    assert [p.name for p in result.properties] == list(CORE.property_names)
    assert all(p.refinements == 0 for p in result.properties)


def _bmc_params():
    """Every bug BMC finds; the one at depth 20 (26 s of a loaded worker) under the slow marker: the explorer catches
    it in every run (tests/test_seeded_bugs.py), and its broken lemma is shown below."""
    return [pytest.param(bug, marks=pytest.mark.slow) if BUG_DEPTHS.get(bug, BUG_DEPTH) > BUG_DEPTH else bug
            for bug in BMC_BUGS]


@pytest.mark.parametrize("bug", _bmc_params(), ids=_bug_id)
def test_bmc_finds_seeded_bug_and_trace_replays_to_the_same_violation(bug, bug_bmc):
    """The decoded counterexample, replayed from the scope's initial state, breaks the targeted invariant
    at its last step and at no step before."""
    result = bug_bmc(bug)
    assert_replays_to_the_violation(result, bug)
    # The replay inserts only log-only steps the core does not see, and follows every encoded one.
    cex = result.counterexamples[SEEDED_BUGS_BY_NAME[bug.value].invariant]
    extra = len(cex.actions) - len(cex.encoded_trace)
    assert 0 <= extra <= pm.MAX_STUTTERS
    assert sum(isinstance(a, pm.STUTTER_KINDS) for a in cex.actions) >= extra


@pytest.mark.parametrize("bug", _bmc_params(), ids=_bug_id)
def test_bmc_counterexample_is_harmless_without_the_bug(bug, bug_bmc):
    """The same actions under the correct model break nothing: the bug, not the encoding, is to blame."""
    assert_harmless_without_the_bug(bug_bmc(bug), bug)


def test_bmc_stale_dual_write_needs_committed_metadata_the_core_does_not_see(bug_bmc):
    """A deposed leader dual-writes only what it has committed and ZooKeeper lacks: the replay puts
    the append and the Fetch that commits it before the election (KIP-866 §Dual Metadata Writes)."""
    cex = bug_bmc(Bug.DUAL_WRITE_SKIPS_EPOCH_CHECK).counterexamples["OnlyCurrentKRaftLeaderWritesApply"]
    names = [type(a).__name__ for a in cex.actions]
    assert names[-1] == "DualWrite" and "BecomeZkController" in names
    assert "Fetch" in names[: names.index("StartElection")]


@pytest.mark.parametrize("profile", [Profile.KIP, pytest.param(Profile.KAFKA_3_9, marks=pytest.mark.slow)])
def test_bmc_finds_the_lagging_write_back_of_migrations_offset(profile):
    """The design's finding, from scope stale-reads' start: a deposed driver's server lags from before the new
    leader's MigrationCommitted, and its BecomeZkController writes /migration back as that server shows it. BMC finds
    it in the 17 steps of the explorer's shortest trace (the solver's offsets are its own; the replay follows them by
    their order), and ``kraftcheck prove`` lists it as the scope's finding, not a violation."""
    result = CORE.bmc_in_scope(20, Variant(profile=profile), scope="stale-reads",
                               properties=["MigrationOffsetNeverGoesBack"])
    cex = result.counterexamples["MigrationOffsetNeverGoesBack"]
    names = [type(a).__name__ for a in cex.actions]
    assert len(names) == 17 and names[-1] == "BecomeZkController"
    assert names.index("ZkServerLags") < names.index("MigrationCommitted")
    state = initial_state(SCOPES["stale-reads"])
    for action in cex.actions:
        before, state = state, model_step(state, action, Variant(profile=profile))
    assert "MigrationOffsetNeverGoesBack" in violations(before, cex.actions[-1], state)
    [row] = result.rows()
    assert row["result"] == "finding" and "scope stale-reads" in row["why"]


def test_replay_compares_offsets_by_their_order():
    """Two steps whose offsets differ but compare alike (with each other and with 0) have one key; offsets in
    another order, or a field that holds no offset with another value, do not."""
    p = pm.project(initial_state(SCOPES["event-queue"]))
    assert p["migration_exists"] and p["driver_migration_offset"][1] < 0 < p["migration_offset"]

    def shifted(q, migration, drivers, queued=(0, 0)):
        return {**q, "migration_offset": migration, "driver_migration_offset": drivers, "queued_offset": queued}

    same = shifted(p, 50, (50, -7))
    assert CORE.order_key(p, p) == CORE.order_key(same, same)
    assert CORE.order_key(p, p) != CORE.order_key(same, shifted(p, 40, (50, -7)))  # the offset went back
    assert CORE.order_key(p, p) != CORE.order_key(same, shifted(p, 50, (50, 3)))  # past 0
    assert CORE.order_key(p, p) != CORE.order_key(same, shifted(p, 50, (50, -7), (5, 0)))  # nothing queued


def test_prove_lists_the_design_finding_as_a_finding_and_only_for_the_correct_model():
    """An obligation in the core's findings fails as the finding; under a seeded bug it is reported as it is; a
    finding does not fail ``kraftcheck prove``, a violation does."""
    cti = ObligationResult("BecomeZkController/MigrationOffsetNeverGoesBack", "2 controllers",
                           "counterexample-to-induction", 0.1)
    finding = CORE.as_finding(cti, CORRECT)
    assert finding.result == "finding" and "KAFKA-16171" in finding.as_json()["why"]
    assert CORE.as_finding(cti, BUG_VARIANTS[Bug.STALE_EVENT_RUNS]).result == "counterexample-to-induction"
    other = dataclasses.replace(cti, name="RunMetadataChange/MigrationOffsetNeverGoesBack")
    assert CORE.as_finding(other, CORRECT).result == "counterexample-to-induction"
    assert all_hold([{"result": "proved"}, {"result": "finding"}]) and not all_hold([{"result": "violated"}])


# ---- the encoding agrees with model.step ------------------------------------------------------------

VARIANTS = [CORRECT, Variant(profile=Profile.KAFKA_3_9)] + [BUG_VARIANTS[b] for b in BMC_BUGS]
VARIANTS.append(BUG_VARIANTS[Bug.DUAL_WRITE_BEFORE_SYNC])


def _check_agreement(state, scope, variant) -> None:
    """``assert_encoding_agrees`` at ``state``; on the correct model, the lemmas hold there too."""
    if variant == CORRECT:
        assert CORE.broken_state_invariants(pm.project(state)) == []  # the lemmas hold on reachable states too
    assert_encoding_agrees(CORE, pm.encoded_as, state, scope, variant)


@settings(deadline=None, max_examples=30)
@given(
    scope_name=st.sampled_from(PROJECTED),
    variant=st.sampled_from(VARIANTS),
    seed=st.integers(0, 2**32 - 1),
    length=st.integers(0, 25),
)
def test_encoding_agrees_with_model_step_on_reachable_states(scope_name, variant, seed, length):
    """A seeded random walk through model.successors; the encoding agrees with model.step at every
    state on the way."""
    scope = SCOPES[scope_name]
    for state, _, _ in random_path(scope, seed, length + 1, variant):
        _check_agreement(state, scope, variant)


@pytest.mark.parametrize("profile", list(Profile))
def test_encoding_agrees_on_lost_replies_and_expired_sessions(profile):
    """Walks of the scopes with a dual write's lost reply and its expired session: at every state the encoding
    agrees with model.step (kip's driver finds its own write and goes on; kafka-3.9's keeps a stale /migration
    version, so its next write fails), and the lemmas hold; the walks take both actions."""
    variant = Variant(profile=profile)
    taken: set[str] = set()
    for scope_name in ("dual-write-resend", "dual-write-failure"):
        scope = SCOPES[scope_name]
        for seed in range(8):
            for state, choices, chosen in random_path(scope, seed, 45, variant):
                if variant == CORRECT:
                    assert CORE.broken_state_invariants(pm.project(state)) == []
                assert_encoding_agrees(CORE, pm.encoded_as, state, scope, variant)
                if chosen >= 0:
                    taken.add(type(choices[chosen][0]).__name__)
    assert {"DualWriteReplyLost", "DualWriteSessionExpired", "DualWrite"} <= taken


QUEUE_VARIANTS = [Variant(), Variant(profile=Profile.KAFKA_3_9), Variant(frozenset({Bug.STALE_EVENT_RUNS}))]


@pytest.mark.parametrize("variant", QUEUE_VARIANTS, ids=["kip", "kafka-3.9", "stale-runs"])
def test_encoding_agrees_on_queued_driver_events(variant):
    """Walks of scope event-queue: at every state the encoding agrees with model.step (a MetadataChangeEvent queued
    with its epoch and leadership, run later: dropped when stale, as Kafka 3.8+ does, or, with the seeded bug
    STALE_EVENT_RUNS, written as current), and the lemmas hold; the walks run events both stale and current."""
    from model.kraft_migration import stale_event

    scope, ran = SCOPES["event-queue"], set()
    for seed in range(24):
        for state, choices, chosen in random_path(scope, seed, 60, variant):
            if variant == CORRECT:
                assert CORE.broken_state_invariants(pm.project(state)) == []
            assert_encoding_agrees(CORE, pm.encoded_as, state, scope, variant)
            if chosen >= 0 and isinstance(choices[chosen][0], RunMetadataChange):
                c = next(c for c in state.controllers if c.id == choices[chosen][0].controller)
                ran.add(stale_event(c, c.driver.queue[0]))
    assert ran == {True, False}


@pytest.mark.parametrize("profile", list(Profile))
def test_encoding_agrees_on_a_migration_in_batches(profile):
    """Walks of scope batched-migration (the initial migration in batches, a failover or an outage between them):
    each batch is a Stutter of the core, the encoding agrees with model.step at every state and the lemmas hold; the
    walks take batches, failovers and the migration's end."""
    variant, scope, taken = Variant(profile=profile), SCOPES["batched-migration"], set()
    for seed in range(6):
        for state, choices, chosen in random_path(scope, seed, 60, variant):
            assert CORE.broken_state_invariants(pm.project(state)) == []
            assert_encoding_agrees(CORE, pm.encoded_as, state, scope, variant)
            if chosen >= 0:
                taken.add(type(choices[chosen][0]).__name__)
    assert {"MigrateMetadata", "StartElection", "MigrationCommitted"} <= taken


def test_a_stale_event_that_runs_breaks_no_fencing_obligation():
    """STALE_EVENT_RUNS writes a stale event's image as current: that moves /migration's offset back
    (RunMetadataChange/MigrationOffsetNeverGoesBack fails, for any number of controllers too), but the write is the
    fenced multi of a driver that believes it leads, so every other obligation of the two queue actions stays proved;
    without the fencing check the run is not."""
    queue_actions = ("PublishMetadataChange", "RunMetadataChange")
    offset_back = ["RunMetadataChange/MigrationOffsetNeverGoesBack"]
    proved = CORE.prove_finite(Variant(frozenset({Bug.STALE_EVENT_RUNS})), actions=queue_actions)
    assert proved and [r.name for r in proved if not r.proved] == offset_back
    # (z3 leaves the failing one unknown over any number, at 5 s as at 60 s; it is refuted among 2 controllers)
    unbounded = CORE.prove_unbounded(Variant(frozenset({Bug.STALE_EVENT_RUNS})), actions=queue_actions,
                                     timeout_ms=10_000)
    assert [r.name for r in unbounded if not r.proved] == offset_back
    unfenced = CORE.prove_finite(Variant(frozenset({Bug.STALE_EVENT_RUNS, Bug.DUAL_WRITE_SKIPS_EPOCH_CHECK})),
                                 actions=["RunMetadataChange"])
    assert {r.name for r in unfenced if not r.proved} > set(offset_back)


def test_the_correct_queue_writes_only_past_migrations_offset():
    """Without the bug the same obligation is proved: an event runs only with an image past the driver's offset,
    which is /migration's whenever its compare-and-set succeeds (BelievedMigrationOffsetIsCurrent)."""
    results = CORE.prove_finite(CORRECT, actions=["RunMetadataChange"], goals=["MigrationOffsetNeverGoesBack"])
    assert [(r.name, r.result) for r in results] == [("RunMetadataChange/MigrationOffsetNeverGoesBack", "proved")]


# ---- slow: the scopes `kraftcheck prove` runs, the command itself, every obligation under every bug -------

@pytest.mark.slow
@pytest.mark.parametrize("scope", pm.MIGRATION_CORE.scopes)
def test_bmc_correct_model_holds_to_depth_20_in_the_two_controller_scopes(scope):
    """Every property holds, but for the scope's findings (stale-reads: /migration's offset goes back)."""
    result = CORE.bmc_in_scope(20, CORRECT, scope=scope)
    assert result.complete, result.as_json()
    assert {r["result"] for r in result.rows()} <= {"holds", "finding"}, result.as_json()


@pytest.mark.slow
@pytest.mark.parametrize("bug", sorted(pm.ENCODED_BUGS, key=_bug_id), ids=_bug_id)
def test_seeded_bug_breaks_no_obligation_of_another_action(bug):
    failed = {r.name.split("/")[0] for r in CORE.prove_finite(BUG_VARIANTS[bug])
              if not r.proved and r.name not in FINDINGS}
    assert failed and failed <= set(pm.ENCODED_BUGS[bug])


@pytest.mark.slow
def test_prove_command_lists_the_migration_obligations(capsys):
    """`kraftcheck prove --json` lists the migration core's rows next to the fencing core's; with a
    migration bug only the migration core runs, and its BMC rows carry the replayed trace."""
    code = cli.main(["prove", "--depth", "3", "--bug", "claim_reuses_zk_epoch", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 1
    assert all({"name", "brokers", "result", "seconds"} <= set(r) for r in rows)
    names = {r["name"]: r for r in rows}
    assert "DualWrite/OnlyCurrentKRaftLeaderWritesApply" in names
    assert "ElectController/AtMostOneControllerPerEpoch" not in names  # the fencing core does not switch it
    violated = names["BMC/migration/depth-3/ZkControllerEpochsIncreaseAcrossHandOver"]
    assert violated["result"] == "violated" and violated["counterexample"]["actions"]


def test_an_invariant_proved_without_a_lemma_does_not_assume_it_and_the_others_do():
    """LoneVoterLogIsCommitted is proved without ViewsAreNotAhead (over any number of controllers, Fetch's and
    CompleteMigration's obligations were unknown at the timeout with it assumed): its obligations leave that one
    premise out, every other obligation keeps it; a name that is no lemma of the core is refused."""
    obligations = {name: (formulas, pre) for name, formulas, pre, _ in
                   CORE.induction_obligations(CORE.unbounded(), actions=["Fetch"])}
    lone, pre = obligations["Fetch/LoneVoterLogIsCommitted"]
    other, other_pre = obligations["Fetch/KRaftEpochNeverDecreases"]
    views = CORE.invariants_by_name["ViewsAreNotAhead"].holds
    assert not any(f.eq(views(pre)) for f in lone) and any(f.eq(views(other_pre)) for f in other)
    assert len(lone) == len(other) - 1
    misspelt = tuple(dataclasses.replace(i, proved_without=("ViewsAreNotAhaed",))
                     if i.name == "LoneVoterLogIsCommitted" else i for i in CORE.invariants)
    arguments = {name: getattr(CORE, name) for name in inspect.signature(Core).parameters}
    with pytest.raises(ValueError, match="ViewsAreNotAhaed"):
        Core(**{**arguments, "invariants": misspelt})
