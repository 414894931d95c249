"""The model-independent properties catch mistakes of the design, which the model and the implementation share.

Each shared seeded bug (``impl.bugs.SHARED_SEEDED_BUGS``) is a mistake made alike by the model and the
implementation: run together they agree step for step, every property that restates the model's rules
agrees with both, and only the model-independent property it names (``model.end_to_end_invariants``)
breaks. That is the point of these properties, and what these tests show, bug by bug: (a) the property
fires; (b) differential testing and every other property do not.
"""

import ast
from pathlib import Path

import pytest

from impl.bugs import SHARED_SEEDED_BUGS, ImplBug
from impl.sim.faults import parse as parse_faults
from impl.sim.scenarios import scenario
from model import PROPERTIES, SCOPES, Variant, initial_state, step
from model.actions import Deliver, Redeliver, SessionTimeout, UpdateMetadataVersion
from model.bugs import CORRECT
from model.invariants import BY_NAME, violations
from model.kraft import UpgradeType
from model.observations import observe
from model.state import ClusterState, UpdateMetadata
from model.types import BrokerEpoch, BrokerId, ControllerEpoch, Ibp, LeaderEpoch
from properties.differential import Differential, Disagreement, checked_simulation
from properties.explore import explore
from properties.mutants import shared_counterexample
from properties.plan import Plan, resolve_mutant
from properties.runs import run_seed

ROOT = Path(__file__).resolve().parent.parent
INDEPENDENT = [p for p in PROPERTIES if p.independent]


@pytest.fixture
def counterexample(run_once):
    """``counterexample(bug)``: the shared bug's model counterexample, searched once in the whole run (three tests
    below take it, on whichever workers)."""
    return lambda bug: run_once("shared-counterexample", bug.name, lambda: shared_counterexample(bug))


def _ids(bug):
    return bug.name


# ---- the properties -------------------------------------------------------------------------------

def test_model_independent_properties_are_registered_last_and_marked():
    """They come after every other property (the registry's order is pinned output) and are all of
    model.end_to_end_invariants; each has a seeded mistake of the design shared by both layers."""
    first = PROPERTIES.index(INDEPENDENT[0])
    assert INDEPENDENT == PROPERTIES[first:]
    assert {p.predicate.__module__ for p in INDEPENDENT} == {"model.end_to_end_invariants"}
    targeted = {b.invariant for b in SHARED_SEEDED_BUGS}
    assert {p.name for p in INDEPENDENT if p.kind.value != "sometimes"} == targeted


def test_model_independent_properties_do_not_read_the_rules():
    """The module imports no handler module of the model, nor step: it restates nothing of the rules."""
    tree = ast.parse((ROOT / "model" / "end_to_end_invariants.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    rules = {"model.zk_era", "model.kraft_quorum", "model.kraft_migration", "model.step", "model.transitions"}
    assert imported and not imported & rules
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert "step" not in names and "successors" not in names


def test_catalogue_marks_model_independent_properties_and_what_they_read():
    from model.end_to_end_invariants import READS
    from properties import catalogue

    page = catalogue.render()
    for p in INDEPENDENT:
        section = "\n".join(catalogue.property_section(p))
        assert "**Model-independent:**" in section and READS[p.name] in section
    assert "**Model-independent:**" not in "\n".join(catalogue.property_section(BY_NAME["CommittedRecordsNeverChange"]))
    for b in SHARED_SEEDED_BUGS:
        assert f"`{b.name}`" in page


def test_correct_model_reaches_a_quiescent_zk_broker_and_breaks_nothing():
    """ZkBrokersConvergeToCommittedImage is not vacuous: the correct model quiesces with a ZK broker to check."""
    result = explore("dual-write-outage", max_depth=6)
    assert result.violations == {}
    assert "ZkBrokerCheckedAtQuiescence" in result.witnesses


# ---- observations ---------------------------------------------------------------------------------

def _update(epoch: int, live: tuple[int, ...]) -> UpdateMetadata:
    return UpdateMetadata(BrokerId(3000), ControllerEpoch(epoch), BrokerEpoch(5), BrokerId(1),
                          ((BrokerId(1), LeaderEpoch(0)),), kraft=True, live=tuple(BrokerId(b) for b in live))


def _sent(state: ClusterState, *messages: UpdateMetadata) -> ClusterState:
    return state.replace(ghost=state.ghost.replace(sent=messages))


def test_observations_keep_which_update_metadata_came_last():
    """A ZK broker is settled once the last UpdateMetadata sent to it is the last delivered; one that an
    older one overtakes, or that was lost, is not; an operator's forced downgrade is remembered."""
    s0 = initial_state(SCOPES["dual-write"])
    old, new = _update(2, (0, 1)), _update(2, (1,))
    s1 = s0.replace(ghost=s0.ghost.replace(observed=observe(s0, (), _sent(s0, old, new))))
    assert dict(s1.ghost.observed.told)[BrokerId(1)] == new and 1 not in s1.ghost.observed.settled
    s2 = s1.replace(ghost=s1.ghost.replace(observed=observe(s1, (Deliver(new),), s1)))
    assert 1 in s2.ghost.observed.settled
    s3 = s2.replace(ghost=s2.ghost.replace(observed=observe(s2, (Redeliver(old),), s2)))
    assert 1 not in s3.ghost.observed.settled
    assert observe(s3, (), s3) is s3.ghost.observed  # nothing seen, nothing new
    forced = observe(s3, (UpdateMetadataVersion(3000, Ibp.IBP_3_4_IV0, UpgradeType.UNSAFE_DOWNGRADE),), s3)
    assert forced.unsafe_downgrades == {Ibp.IBP_3_4_IV0}


def test_model_observes_a_timeout_as_silence_only_when_it_is_a_fault():
    """In the model a live broker's timeout spends the `timeouts` budget (its heartbeats were lost: silence);
    the timeout of a gone process is healing and silences nobody."""
    scope = SCOPES["broker-migration"]
    state = initial_state(scope)
    fault = step(state, SessionTimeout(BrokerId(0), 3000))
    assert fault.ghost.observed.silenced == {0} and not violations(state, SessionTimeout(BrokerId(0), 3000), fault)


# ---- the shared mistakes: (a) only their property fires, (b) nothing else does ----------------------

@pytest.mark.parametrize("bug", SHARED_SEEDED_BUGS, ids=_ids)
def test_shared_bug_breaks_only_its_property_in_the_model(bug, counterexample):
    """Every state within its shortest counterexample's depth: its properties break (the one it names and those it
    also breaks, all model-independent), no other one does."""
    steps = counterexample(bug)
    assert steps is not None, f"{bug.model_bug.value} escaped the bounded search of {bug.scope}"
    found = explore(bug.scope, Variant(frozenset({bug.model_bug})), max_depth=len(steps))
    assert set(found.violations) == bug.breaks and all(BY_NAME[name].independent for name in bug.breaks)


@pytest.mark.parametrize("bug", SHARED_SEEDED_BUGS, ids=_ids)
def test_shared_bug_makes_implementation_and_model_agree_until_only_its_property_breaks(bug, counterexample):
    """Both switched on, both take the model's counterexample step by step and agree on every one; at the
    last, the implementation's own state breaks its properties and nothing else (no state disagreement)."""
    steps = counterexample(bug)
    diff = Differential(SCOPES[bug.scope], bugs=frozenset({bug.bug}), variant=Variant(frozenset({bug.model_bug})))
    with pytest.raises(Disagreement) as raised:
        for action in steps:
            diff.apply(action)
    assert set(raised.value.broken) == bug.breaks
    assert "the implementation broke" in raised.value.summary
    assert len(raised.value.steps) == len(diff.steps) and raised.value.steps[-len(steps):] == steps


@pytest.mark.parametrize("bug", SHARED_SEEDED_BUGS, ids=_ids)
def test_shared_bug_counterexample_is_harmless_without_the_bugs(bug, counterexample):
    """The same steps, correct model and implementation: they agree, and nothing breaks."""
    diff = Differential(SCOPES[bug.scope])
    model = diff.model
    for action in counterexample(bug):
        if step(model, action) is None:
            break  # the correct model does not take this path
        diff.apply(action)
        model = diff.model


def test_shared_mutant_resolves_to_both_layers():
    bug = SHARED_SEEDED_BUGS[0]
    assert resolve_mutant(bug.name) == (frozenset({bug.bug}), Variant(frozenset({bug.model_bug})))


# ---- on the implementation's own state, with its clock ----------------------------------------------

def _simulate(bugs: frozenset[ImplBug], variant: Variant, seed: int = 0, steps: int = 2_000) -> Disagreement | None:
    """The default campaign's run of ``seed``: the first disagreement, or None."""
    sim = checked_simulation(scenario("sim-migration"), seed, parse_faults("all"), bugs=bugs, variant=variant)
    try:
        for _ in range(steps):
            if sim.step() is None:
                return None
    except Disagreement as found:
        return found
    return None


def test_simulation_fences_a_heartbeating_zk_broker_only_the_clock_sees_it():
    """The implementation forgets ZK brokers' heartbeats. With the model's mistake too, or against the correct
    model (whose budgets a simulation leaves unbounded: the timeout is a fault it allows), the two agree;
    only the property, evaluated on the implementation's run (the heartbeats its controller answered, and
    its clock), sees that the broker was not silent for broker.session.timeout.ms."""
    bug = next(b for b in SHARED_SEEDED_BUGS if b.bug is ImplBug.TIMEOUT_IGNORES_ZK_BROKER_HEARTBEATS)
    for variant in (Variant(frozenset({bug.model_bug})), CORRECT):
        found = _simulate(frozenset({bug.bug}), variant)
        assert found is not None and found.broken == [bug.invariant], found
        assert "the implementation broke" in found.summary
        timed_out = found.steps[-1]
        assert isinstance(timed_out, SessionTimeout)


def test_correct_simulations_break_no_model_independent_property():
    """A few seeds of the default campaign, both runbooks: the correct implementation breaks none."""
    for seed in (0, 3):
        run = run_seed(Plan(seeds=4), seed, coverage=False)
        assert run.disagreement is None, run.disagreement


def test_metadata_version_check_takes_a_high_watermark_past_the_log_as_a_possible_change():
    """A broken quorum (seeded bug commit_without_majority) can put a controller's high watermark past its log: the
    cheap test before MetadataVersionGoesDownOnlyWhenForced replays images says "may change" instead of indexing past
    the log (exploring kraft-quorum with that bug to depth 12 raised IndexError here)."""
    from model.end_to_end_invariants import _may_change_metadata_version
    from model.kraft import BeginTransactionRecord, KRaftEpoch, LogEntry

    controller = initial_state(SCOPES["kraft-quorum"]).controllers[0]
    entry = LogEntry(KRaftEpoch(1), BeginTransactionRecord("migration"))
    past_the_log = controller.replace(high_watermark=2, log=(entry,))
    grown = controller.replace(high_watermark=2, log=(entry, entry))
    assert _may_change_metadata_version(past_the_log, grown)
    assert not _may_change_metadata_version(grown, grown)
