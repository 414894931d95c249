"""The default campaign's drawn inputs (issue 17 §2, "Inputs that real clusters see"): each seed of
``sim-migration`` runs a cluster configuration drawn from the seed (swarm testing of the cluster: Groce et al.,
ISSTA 2012), and an admin sends metadata.version and feature updates in every phase; the operator sets a
misconfigured cluster right before the migration goes on (KIP-866 §Migration Trigger).

Each drawn dimension and each admin request must be reached (these tests fail if the campaign never draws or
sends one), the configuration must be a function of (plan, seed) that a trace file and a replay carry, and the
seeded bugs that only these inputs reach must be caught by the default campaign's runs.
"""

from __future__ import annotations

from collections import Counter

import pytest

from impl.sim.scenarios import (
    BATCH_SIZES,
    DRAWN_ADMIN,
    MIGRATION_LEVELS,
    WORLDS,
    Configuration,
    draw,
    parse,
    scenario,
)
from model.kraft import DEFAULT_MIGRATION_BATCH_SIZE, UpgradeType
from properties.campaign.tasks import run_partition
from properties.plan import Plan
from properties.runs import run_seed
from properties.shrink import trace_for

SEEDS = range(64)  # the draws of the first 64 seeds: four default campaigns


def test_draw_reaches_every_dimension_within_64_seeds():
    """KIP-866 §Migration Trigger: quorums of 1 and 3, every metadata.version a migration starts from, a ZK broker
    at another IBP than the quorum's level, a controller started without the flag, each admin request and each
    upgrade type of UpdateFeatures for metadata.version (KIP-778); the initial migration in 1, 2 or 3 batches
    (KIP-866 §Initial Data Migration)."""
    drawn = [draw(seed) for seed in SEEDS]
    assert {c.controllers for c in drawn} == {1, 3}
    assert {c.metadata_version for c in drawn} == set(MIGRATION_LEVELS)
    assert any(len(set(c.ibps)) > 1 for c in drawn)
    assert any(c.unflagged for c in drawn)
    assert {kind for c in drawn for kind in c.admin} == set(DRAWN_ADMIN)  # partitions: drawn+partitions only
    assert {kind for c in drawn for _, kind in c.updates} == set(UpgradeType)
    assert {c.batch for c in drawn} == {*BATCH_SIZES, DEFAULT_MIGRATION_BATCH_SIZE}
    assert any(not c.admin and len(set(c.ibps)) == 1 and not c.unflagged for c in drawn)  # the plain cluster too


def test_configuration_is_a_function_of_plan_and_seed_and_its_name_builds_it_again():
    """A run's cluster is drawn from (plan, seed) alone; the scope's name carries it, so that a trace file,
    ``kraftcheck replay`` and ``kraftcheck pin`` build the same cluster; ``--configs fixed`` runs the scope as named."""
    plan = Plan()
    for seed in range(8):
        name = plan.scope_of(seed)
        assert name == Plan().scope_of(seed) and name.startswith("sim-migration@")
        scope = scenario(name)
        assert scope.name == name and parse(name.partition("@")[2]) == draw(seed)
        assert scenario(name) == scope
    assert Plan(configs="fixed").scope_of(3) == "sim-migration"
    assert Plan(scope="dual-write").scope_of(3) == "dual-write"  # model scopes run as named


@pytest.mark.parametrize("label", ["controllers=2,mv=3.4-IV0,ibps=3.4-IV0/3.4-IV0/3.4-IV0",
                                   "controllers=3,mv=3.3-IV0,ibps=3.3-IV0/3.3-IV0/3.3-IV0",
                                   "controllers=3,mv=3.4-IV0,ibps=3.4-IV0",
                                   "controllers=1,mv=3.4-IV0,ibps=3.4-IV0/3.4-IV0/3.4-IV0,unflagged=2",
                                   "controllers=3,mv=3.4-IV0,mv=3.5-IV2,ibps=3.4-IV0/3.4-IV0/3.4-IV0",
                                   "controllers=1,mv=3.4-IV0,ibps=3.4-IV0/3.4-IV0/3.4-IV0,batch=0"])
def test_a_bad_configuration_is_one_line(label):
    with pytest.raises(ValueError) as e:
        scenario(f"sim-migration@{label}")
    assert "\n" not in str(e.value)


def _actions(run) -> Counter:
    return Counter({key: n for (kind, key), n in run.coverage.items() if kind == "action"})


def test_default_campaign_sends_admin_requests_and_prepares_the_cluster():
    """Seeds of the default campaign whose draws call for them: metadata.version updates of the admin (seed 0),
    feature updates to the ZooKeeper controller (seed 7), a ZK broker rolled to the quorum's level and a
    controller restarted with the flag (seed 5); every run checked against the model at every event, clean."""
    plan = Plan()
    runs = {seed: run_seed(plan, seed) for seed in (0, 5, 7)}
    assert all(run.disagreement is None for run in runs.values())
    assert _actions(runs[0])["UpdateMetadataVersion"] > 0
    assert _actions(runs[7])["UpdateFeatures"] > 0
    assert _actions(runs[5])["ChangeIbp"] > 0
    assert "unflagged=" in runs[5].config and _actions(runs[5])["ReconfigureController"] > 3  # 3: finalization's


def test_runs_table_and_counterexample_carry_the_configuration():
    plan = Plan(seeds=1, steps=200, quiet_steps=0, mutant="impl_finalize_level_zero")
    rows = run_partition(plan, 0)
    assert rows["runs"][0]["config"] == draw(0).label
    trace = trace_for(plan, 0, [], "Disagreement")
    assert trace.scope == f"sim-migration@{draw(0).label}"


@pytest.mark.parametrize(("bug", "seed"), [("impl_admit_zk_broker_with_other_ibp", 2), ("impl_finalize_level_zero", 7),
                                         ("impl_complete_before_last_batch", 0)])
def test_default_campaign_catches_bugs_only_its_drawn_inputs_reach(bug, seed):
    """A ZK broker at another IBP than metadata.version admitted by the quorum (KIP-866 §Migration Trigger), a
    feature deletion finalized as level 0 (KIP-584 §Changes to Kafka Controller), and a migration completed after
    its first batch (KIP-866 §Initial Data Migration; seed 0 draws batches of 1 record): the scope as named never
    reaches any."""
    assert run_seed(Plan(mutant=bug), seed).disagreement is not None
    assert run_seed(Plan(mutant=bug, configs="fixed", steps=600), seed).disagreement is None


def test_configuration_draws_nothing_from_the_simulation():
    assert isinstance(draw(0), Configuration) and draw(0) == draw(0) and draw(0) != draw(1)


def test_drawn_batch_size_runs_the_migration_in_batches_and_its_name_builds_it_again():
    """A seed that draws batches of 1 record migrates ZooKeeper's 3 (2 partitions, the config) in 3 MigrateMetadata
    steps, the transaction open across the cluster's steps between them, checked against the model at every event;
    the label carries the size, and the default size is left out of it."""
    assert draw(0).batch == 1 and "batch=1" in draw(0).label.split(",")
    assert draw(5).batch == DEFAULT_MIGRATION_BATCH_SIZE and "batch=" not in draw(5).label
    scope = scenario(Plan().scope_of(0))
    assert {c.migration_batch_size for c in scope.controllers} == {1}
    run = run_seed(Plan(), 0)
    assert run.disagreement is None
    assert _actions(run)["MigrateMetadata"] >= 3 and _actions(run)["CompleteMigration"] >= 1


# ---- worlds: issue 17's freedoms in the default campaign --------------------------------------------------------

def test_about_a_third_of_the_seeds_live_in_no_world_and_every_world_is_drawn_within_64_seeds():
    """Each freedom behind an opt-in mix or scope (``WORLDS``) reaches the default campaign, some runs meet two; about
    a third of the runs have none (0.9 ** 11 of 64 seeds is 20; within about two standard deviations of it), and a
    seed without one draws the configuration it drew before worlds were drawn (its label has no world)."""
    drawn = [draw(seed) for seed in SEEDS]
    assert {world for c in drawn for world in c.worlds} == set(WORLDS)
    assert 13 <= sum(not c.worlds for c in drawn) <= 28
    assert any(len(c.worlds) > 1 for c in drawn)
    for configuration in drawn:
        assert ("world=" in configuration.label) == bool(configuration.worlds)
        assert parse(configuration.label) == configuration


def test_a_world_is_the_mix_joined_to_the_plans_named_mixes_before_its_overrides():
    """``--faults all`` runs a ``queue`` world's seed as ``all+queue``; ``queue_event=0`` still queues nothing; a
    plan that does not draw configurations has no world; ``purgatory`` and ``partitions`` are the scope's."""
    from impl.sim.faults import parse as parse_mix

    alone = {c.worlds[0]: seed for seed, c in reversed(list(enumerate(map(draw, range(200))))) if len(c.worlds) == 1}
    queued = alone["queue"]
    assert Plan().faults_of(queued) == parse_mix("all+queue")
    assert Plan(faults="all,queue_event=0").faults_of(queued).queue_event == 0
    assert Plan(configs="fixed").faults_of(queued) == parse_mix("all")
    assert Plan(faults="all+queue").faults_of(queued) == parse_mix("all+queue")  # named twice: joined once
    assert scenario(Plan().scope_of(alone["purgatory"])).budget.answer_at_commit
    assert scenario(Plan().scope_of(alone["partitions"])).created_replicas
    assert not scenario(Plan().scope_of(next(s for s in SEEDS if not draw(s).worlds))).created_replicas
    with pytest.raises(ValueError, match="world"):
        parse(draw(queued).label.replace("world=queue", "world=elsewhere"))
    with pytest.raises(ValueError, match="world"):
        parse(draw(queued).label.replace("world=queue", "world=queue/reassign"))  # out of WORLDS' order


def test_a_write_failure_worlds_run_fails_dual_writes_and_still_finalizes():
    """The world reaches the run (its mix has three failed dual writes in ten), and under ``kip`` the failed writes
    are written again, so the run agrees with the model and the migration finalizes."""
    seed = next(s for s in SEEDS if draw(s).worlds == ("write-failure",) and s % 4 != 3 and s % 8 not in (2, 7))
    run = run_seed(Plan(), seed, coverage=False)
    assert run.disagreement is None and run.progress == "finalized", (seed, run.progress, run.disagreement)
    assert "fail_write=0.3" in run.faults
