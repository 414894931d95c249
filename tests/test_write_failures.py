"""A dual write that fails: its ZooKeeper session expired while it waited (scope ``dual-write-failure``).

In dual write, ZooKeeper stalls past the KRaft controller's session timeout while a MetadataChangeEvent's write waits
on it; when ZooKeeper answers, the session has expired and the write fails (ZooKeeperClientExpiredException, logged
by MigrationEvent.handleException as "Will retry."). KIP-866 §Failure Modes ("ZK Write Failures") keeps the change
and retries it within the lag bound: under ``kip`` the next dual write writes everything since /migration's offset.
Kafka 3.9's MetadataChangeEvent.run has already made the event's image the driver's (KRaftMigrationDriver.image), and
its PollEvent does nothing in DUAL_WRITE: the next event writes only its own delta and moves /migration past the lost
one, whose LeaderAndIsr is never sent (reproduced on Kafka 3.9.2: docs/guide/real-kafka.md). Under ``kafka-3.9`` the
model keeps that image as ``Driver.handed_offset``. In the model: ``DualWriteSessionExpired``, spending
``Budget.write_failures`` (0 in every other scope); in the implementation: the fault mix ``write-failure``.
"""

from __future__ import annotations

import pytest

from impl.bugs import ImplBug
from impl.sim.faults import parse
from model import zookeeper as zkm
from model.actions import AlterConfigs, DualWrite, DualWriteSessionExpired
from model.bugs import Bug, Variant
from model.invariants import violations
from model.kraft import ControllerId, image_of
from model.migration import CONFIG, MIGRATION, Profile
from model.scopes import SCOPES, initial_state, profile_findings
from model.step import candidate_actions, step
from model.types import NO_SESSION
from model.zookeeper import Delete
from properties.differential import Differential, Disagreement
from properties.explore import explore
from properties.regressions import FAILED_WRITE
from tests.conftest import run, walked_kinds

A = ControllerId(3000)
SCOPE = "dual-write-failure"
KAFKA = Variant(profile=Profile.KAFKA_3_9)
BUG = Variant(frozenset({Bug.FAILED_WRITE_DROPS_DELTA}))
LOST = ("ZkEqualsImageAtMigrationOffset", "ServedMetadataSurvivesFailover", "ZkBrokersConvergeToCommittedImage")


def migration_offset(state) -> int:
    return zkm.get_existing(state.zk, MIGRATION).data.kraft_metadata_offset


def test_scopes_without_the_budget_fail_no_write():
    """Existing scopes' pinned counts do not move: without ``write_failures`` no dual write fails."""
    for name, scope in SCOPES.items():
        if name != SCOPE:
            assert scope.budget.write_failures == 0
    for name in ("dual-write", "create-partitions", "event-queue"):
        state = initial_state(SCOPES[name])
        assert not any(isinstance(a, DualWriteSessionExpired) for a in candidate_actions(state, SCOPES[name]))


@pytest.mark.parametrize("variant", [Variant(), KAFKA], ids=["kip", "kafka-3.9"])
def test_failed_dual_write_writes_nothing_and_spends_the_budget(variant):
    """The write fails: ZooKeeper, /migration and the network are as they were; the budget is spent; it needs a
    change ZooKeeper lacks, as a MetadataChangeEvent does."""
    state = initial_state(SCOPES[SCOPE])
    assert step(state, DualWriteSessionExpired(A), variant) is None  # nothing to write
    created = run(state, FAILED_WRITE[0], variant=variant)
    failed = step(created, DualWriteSessionExpired(A), variant)
    assert failed is not None and failed.zk == created.zk and failed.network == created.network
    assert failed.budget.write_failures == 0
    assert step(failed, DualWriteSessionExpired(A), variant) is None


def test_kip_retries_the_failed_change():
    """KIP-866 §Failure Modes: the next dual write writes the partition the failed one left out, with the config,
    and sends the new partition's LeaderAndIsr; nothing breaks."""
    state = initial_state(SCOPES[SCOPE])
    before = run(state, *FAILED_WRITE[:-1])
    assert before.controllers[0].driver.handed_offset == 0
    after = step(before, DualWrite(A))
    assert after is not None and violations(before, DualWrite(A), after) == []
    assert migration_offset(after) == after.controllers[0].high_watermark
    assert zkm.get(after.zk, "/brokers/topics/t/partitions/1/state") is not None
    # The retry alone, without the config: DualWrite again right after the failure writes the partition.
    retried = run(state, *FAILED_WRITE[:2], DualWrite(A))
    assert zkm.get(retried.zk, "/brokers/topics/t/partitions/1/state") is not None


def test_kafka_3_9_loses_the_failed_delta():
    """Kafka 3.9: the driver keeps the image it was handed; the same image is not written again (no new event),
    and the next change's delta starts there: /migration moves past the partition ZooKeeper never gets, and the ZK
    broker never hears of it. The three properties that see it are the scope's documented findings."""
    state = run(initial_state(SCOPES[SCOPE]), *FAILED_WRITE[:2], variant=KAFKA)
    c = state.controllers[0]
    assert c.driver.handed_offset == c.high_watermark > c.driver.migration_offset
    assert step(state, DualWrite(A), KAFKA) is None
    before = run(state, FAILED_WRITE[2], variant=KAFKA)
    after = step(before, DualWrite(A), KAFKA)
    assert after is not None and after.controllers[0].driver.handed_offset == 0
    assert migration_offset(after) == after.controllers[0].high_watermark
    assert zkm.get(after.zk, "/brokers/topics/t/partitions/1/state") is None
    assert image_of(after.controllers[0].log).partitions[1] is not None
    assert {"ZkEqualsImageAtMigrationOffset", "ServedMetadataSurvivesFailover"} <= set(
        violations(before, DualWrite(A), after))
    assert SCOPES[SCOPE].expected_findings(Profile.KAFKA_3_9) == set(LOST) | profile_findings(Profile.KAFKA_3_9)
    assert SCOPES[SCOPE].expected_findings(Profile.KIP) == set()


def test_explorer_finds_the_lost_delta_under_kafka_3_9_and_the_seeded_bug_only():
    """The scope, explored whole: clean under kip; under kafka-3.9 and under kip with failed_write_drops_delta the
    shortest counterexample of each of the three properties is 4 steps (a change, the failed write, another change,
    the dual write)."""
    assert explore(SCOPES[SCOPE], variant=Variant()).violations == {}
    for variant in (KAFKA, BUG):
        result = explore(SCOPES[SCOPE], variant=variant)
        assert result.complete
        assert set(result.violations) == set(LOST)
        assert all(len(result.violations[name]) == 4 for name in LOST)


# ---- the implementation -------------------------------------------------------------------------------------


def test_impl_retries_the_failed_write_and_the_model_agrees():
    """The script through the differential checker: the implementation's write fails, the next one writes both
    changes, step for step with the model."""
    diff = Differential(SCOPES[SCOPE])
    for action in FAILED_WRITE:
        assert diff.apply(action) == [action]
    driver = diff.cluster.controllers[A].driver
    assert driver.handed_offset == 0 and driver.migration_offset == diff.model.controllers[0].high_watermark


def test_impl_seeded_bug_keeps_the_handed_image_and_is_caught():
    """impl_failed_write_drops_delta: the implementation takes Kafka 3.9's rule; its driver differs from the model's
    at the failed write (the handed image kept)."""
    diff = Differential(SCOPES[SCOPE], bugs=frozenset({ImplBug.FAILED_WRITE_DROPS_DELTA}))
    diff.apply(FAILED_WRITE[0])
    with pytest.raises(Disagreement) as caught:
        diff.apply(FAILED_WRITE[1])
    assert "handed_offset" in str(caught.value)


def test_walks_take_the_failed_write():
    """Seeded differential walks of the scope take DualWriteSessionExpired and agree with the model."""
    assert DualWriteSessionExpired in walked_kinds(SCOPE, 16, 40)


def test_fault_mix_write_failure_is_named_and_off_elsewhere():
    """``all+write-failure`` fails a drawn DualWrite now and then; ``all`` and swarm's reweighing leave it off, so
    the other mixes' runs stay as they were."""
    assert parse("all+write-failure").fail_write > 0
    assert parse("all").fail_write == 0.0 and parse("swarm").fail_write == 0.0


def test_failed_writes_let_a_campaign_catch_the_lost_delta():
    """Seed 1 of ``sim-migration`` under ``all+write-failure`` catches impl_failed_write_drops_delta (the first seed
    that does); the same seed with no write failed does not, and the correct implementation agrees with the model
    there (and reaches its progress goals: the failed change is written by the next dual write)."""
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    mutant = ImplBug.FAILED_WRITE_DROPS_DELTA.value
    caught = run_seed(make_plan(seeds=2, faults="all+write-failure", mutant=mutant, out="unused"), 1, coverage=False)
    assert caught.disagreement is not None and "DualWriteSessionExpired" in str(caught.disagreement)
    unfailed = make_plan(seeds=2, faults="all+write-failure,fail_write=0", mutant=mutant, out="unused")
    assert run_seed(unfailed, 1, coverage=False).disagreement is None
    correct = make_plan(seeds=2, faults="all+write-failure", out="unused")
    assert run_seed(correct, 1, coverage=False).disagreement is None


@pytest.mark.parametrize("variant", [Variant(), KAFKA], ids=["kip", "kafka-3.9"])
def test_dual_write_failing_on_a_metadata_op_is_a_failed_write_too(variant):
    """A dual write whose metadata op fails (here: the config znode deleted behind KRaft's back, so its SetData
    answers NoNode; in Kafka a MigrationClientException, handled as the session's expiry is) leaves its change for
    the next dual write under kip, and under kafka-3.9 keeps the image it was handed, as a session expiry does."""
    scope = SCOPES[SCOPE]
    state = initial_state(scope.replace(budget=scope.budget.replace(operator=2)))
    state = run(state, AlterConfigs(A), DualWrite(A), AlterConfigs(A), variant=variant)
    zk, results = zkm.multi(state.zk, NO_SESSION, (Delete(CONFIG),), reader=-1)
    assert zkm.succeeded(results)
    failed = step(state.replace(zk=zk), DualWrite(A), variant)
    assert failed is not None and zkm.get(failed.zk, CONFIG) is None
    c = failed.controllers[0]
    assert c.driver.migration_offset < c.high_watermark
    assert c.driver.handed_offset == (c.high_watermark if variant == KAFKA else 0)
