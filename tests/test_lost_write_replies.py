"""A dual write ZooKeeper applied but whose reply was lost, resent (scope ``dual-write-resend``).

In dual write ZooKeeper stalls; the KRaft controller's client gives up on the connection (CONNECTIONLOSS) while a
MetadataChangeEvent's multi waits, and when it reconnects to the same session it sends the multi again
(KafkaZkClient.retryRequestsUntilConnected). ZooKeeper had applied the first copy, which bumped /migration's version,
so the copy fails its /migration op (BADVERSION; Kafka's wrapMigrationRequest puts that op before the data op). KIP-866
§Migration State ZNode fences with /migration's conditional update only "old KRaft controllers ... if there has been
a new election": under ``kip`` the driver reads /migration, finds its own write (its id, its Raft epoch, an offset at
or past the one written) and goes on. Kafka 3.9 throws "Conditional update on KRaft Migration ZNode failed", keeps
the stale version in its ZkMigrationLeadershipState, and every later dual write of the leadership fails until a
failover (reproduced on Kafka 3.9.2 and 3.6.2: docs/guide/real-kafka.md, seed 86 of the dual-write runbook). Under
``kafka-3.9`` the model's driver keeps the stale version and its next dual write parks it in INACTIVE. In the model:
``DualWriteReplyLost``, spending ``Budget.lost_write_replies`` (0 in every other scope); in the implementation: the
fault mix ``reply-loss``.
"""

from __future__ import annotations

import pytest

from impl.bugs import ImplBug
from impl.sim.faults import parse
from model import zookeeper as zkm
from model.actions import DualWrite, DualWriteReplyLost
from model.bugs import Bug, Variant
from model.invariants import violations
from model.migration import MIGRATION, MigrationDriverState, Profile
from model.scopes import SCOPES, initial_state, profile_findings
from model.step import candidate_actions, step
from properties.differential import Differential, Disagreement
from properties.explore import explore
from properties.liveness import VIOLATED, check_liveness
from properties.regressions import LOST_REPLY, A
from tests.conftest import run, walked_kinds

SCOPE = "dual-write-resend"
KAFKA = Variant(profile=Profile.KAFKA_3_9)
BUG = Variant(frozenset({Bug.RESEND_KEEPS_STALE_VERSION}))
NEW_PARTITION = "/brokers/topics/t/partitions/1/state"
WEDGE = "ActiveDriverNeverStaysInactive"


def migration_node(state):
    return zkm.get_existing(state.zk, MIGRATION)


def test_scopes_without_the_budget_lose_no_reply():
    """Existing scopes' pinned counts do not move: without ``lost_write_replies`` no reply is lost."""
    for name, scope in SCOPES.items():
        if name != SCOPE:
            assert scope.budget.lost_write_replies == 0
    for name in ("dual-write", "dual-write-failure", "create-partitions"):
        state = initial_state(SCOPES[name])
        assert not any(isinstance(a, DualWriteReplyLost) for a in candidate_actions(state, SCOPES[name]))


@pytest.mark.parametrize("variant", [Variant(), KAFKA], ids=["kip", "kafka-3.9"])
def test_lost_reply_applies_the_write_and_spends_the_budget(variant):
    """ZooKeeper applies the first copy under either profile: the new partition's znode and /migration at the
    image's offset, one version on; the resent copy changes nothing. It needs a change ZooKeeper lacks."""
    state = initial_state(SCOPES[SCOPE])
    assert step(state, DualWriteReplyLost(A), variant) is None  # nothing to write
    created = run(state, LOST_REPLY[0], variant=variant)
    written = step(created, DualWrite(A), variant)
    lost = step(created, DualWriteReplyLost(A), variant)
    assert lost is not None and written is not None
    assert lost.zk.nodes == written.zk.nodes and zkm.get(lost.zk, NEW_PARTITION) is not None
    assert migration_node(lost).version == migration_node(created).version + 1
    assert migration_node(lost).data.kraft_metadata_offset == lost.controllers[0].high_watermark
    assert lost.budget.lost_write_replies == 0
    assert step(lost, DualWriteReplyLost(A), variant) is None


def test_kip_finds_its_own_write_and_goes_on():
    """KIP-866 §Migration State ZNode: /migration holds this controller's id, epoch and the offset written, so the
    conflict is no fence: the driver takes /migration's version, sends the partition's LeaderAndIsr, and the next
    dual write succeeds; the state is the plain DualWrite's, and no property breaks."""
    state = initial_state(SCOPES[SCOPE])
    created = run(state, LOST_REPLY[0])
    lost = step(created, DualWriteReplyLost(A))
    written = step(created, DualWrite(A))
    assert lost is not None and written is not None and violations(created, DualWriteReplyLost(A), lost) == []
    assert lost.controllers == written.controllers and lost.network == written.network
    d = lost.controllers[0].driver
    assert d.migration_offset == lost.controllers[0].high_watermark
    assert d.migration_version == migration_node(lost).version
    after = run(state, *LOST_REPLY)
    assert after.controllers[0].driver.state is MigrationDriverState.DUAL_WRITE
    assert migration_node(after).data.kraft_metadata_offset == after.controllers[0].high_watermark


@pytest.mark.parametrize("variant", [KAFKA, BUG], ids=["kafka-3.9", "resend_keeps_stale_version"])
def test_kafka_3_9_keeps_the_stale_version_and_wedges(variant):
    """Kafka 3.9 (and the seeded bug under kip): the driver keeps /migration's old version and offset, sends no
    LeaderAndIsr for the new partition, and the next change's dual write fails on /migration's version: the driver
    parks until a new leadership (the model's INACTIVE for Kafka's every-write-fails), ZooKeeper left behind."""
    state = initial_state(SCOPES[SCOPE])
    created = run(state, LOST_REPLY[0], variant=variant)
    lost = step(created, DualWriteReplyLost(A), variant)
    assert lost is not None and lost.network == created.network
    d = lost.controllers[0].driver
    assert d.migration_version == migration_node(created).version < migration_node(lost).version
    assert d.migration_offset < d.handed_offset == lost.controllers[0].high_watermark
    assert step(lost, DualWrite(A), variant) is None  # the same image: no new event
    before = run(lost, LOST_REPLY[2], variant=variant)
    after = step(before, DualWrite(A), variant)
    assert after is not None and after.controllers[0].driver.state is MigrationDriverState.INACTIVE
    assert after.zk.nodes == before.zk.nodes
    assert migration_node(after).data.kraft_metadata_offset < after.controllers[0].high_watermark


def test_explorer_finds_the_unsent_change_under_kafka_3_9_and_the_seeded_bug_only():
    """The scope, explored whole: clean under kip; under kafka-3.9 and under kip with resend_keeps_stale_version the
    quiesced ZK broker never learns of the partition added, in 2 steps (the partition, the write whose reply is
    lost): the scope's documented finding."""
    assert explore(SCOPES[SCOPE], variant=Variant()).violations == {}
    for variant in (KAFKA, BUG):
        result = explore(SCOPES[SCOPE], variant=variant)
        assert result.complete
        assert set(result.violations) == {"ZkBrokersConvergeToCommittedImage"}
        assert [type(a) for a in result.violations["ZkBrokersConvergeToCommittedImage"].actions] == [
            type(LOST_REPLY[0]), DualWriteReplyLost]
    documented = {"ZkBrokersConvergeToCommittedImage"} | profile_findings(Profile.KAFKA_3_9)
    assert SCOPES[SCOPE].expected_findings(Profile.KAFKA_3_9) == documented
    assert SCOPES[SCOPE].expected_findings(Profile.KIP) == set()


def test_liveness_sees_the_wedge_under_kafka_3_9_only():
    """The wedge itself: with no failover in the scope, the active controller's driver stays parked once a later
    dual write failed on the stale version (KIP-866 §Controller Crashes: only a new leader takes over). Holds
    under kip."""
    def verdict(variant):
        result = check_liveness(SCOPE, variant, props=[WEDGE])
        (v,) = result.verdicts
        return v.result

    assert verdict(Variant()) != VIOLATED
    assert verdict(KAFKA) == VIOLATED and verdict(BUG) == VIOLATED


# ---- the implementation -------------------------------------------------------------------------------------


def test_impl_takes_its_own_write_and_the_model_agrees():
    """The script through the differential checker: the implementation's resent copy fails, the driver reads
    /migration and goes on, step for step with the model."""
    diff = Differential(SCOPES[SCOPE])
    for action in LOST_REPLY:
        assert diff.apply(action) == [action]
    driver = diff.cluster.controllers[A].driver
    assert driver.migration_offset == diff.model.controllers[0].high_watermark
    assert driver.migration_version == migration_node(diff.model).version


def test_impl_seeded_bug_keeps_the_stale_version_and_is_caught():
    """impl_resend_keeps_stale_version: the implementation takes Kafka 3.9's rule; it sends no LeaderAndIsr where
    the model does, at the lost reply."""
    diff = Differential(SCOPES[SCOPE], bugs=frozenset({ImplBug.RESEND_KEEPS_STALE_VERSION}))
    diff.apply(LOST_REPLY[0])
    with pytest.raises(Disagreement) as caught:
        diff.apply(LOST_REPLY[1])
    assert "LeaderAndIsr" in str(caught.value)


def test_walks_take_the_lost_reply():
    """Seeded differential walks of the scope take DualWriteReplyLost and agree with the model."""
    assert DualWriteReplyLost in walked_kinds(SCOPE, 16, 40)


def test_fault_mix_reply_loss_is_named_and_off_elsewhere():
    """``all+reply-loss`` loses a drawn DualWrite's reply now and then; ``all`` and swarm's reweighing leave it off,
    so the other mixes' runs stay as they were."""
    assert parse("all+reply-loss").lose_reply > 0
    assert parse("all").lose_reply == 0.0 and parse("swarm").lose_reply == 0.0


def test_lost_replies_let_a_campaign_catch_the_stale_version():
    """Seed 1 of ``sim-migration`` under ``all+reply-loss`` catches impl_resend_keeps_stale_version (the first seed
    that does); the same seed with no reply lost does not, and the correct implementation agrees with the model
    there."""
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    mutant = ImplBug.RESEND_KEEPS_STALE_VERSION.value
    caught = run_seed(make_plan(seeds=2, faults="all+reply-loss", mutant=mutant, out="unused"), 1, coverage=False)
    assert caught.disagreement is not None and "DualWriteReplyLost" in str(caught.disagreement)
    unlost = make_plan(seeds=2, faults="all+reply-loss,lose_reply=0", mutant=mutant, out="unused")
    assert run_seed(unlost, 1, coverage=False).disagreement is None
    correct = make_plan(seeds=2, faults="all+reply-loss", out="unused")
    assert run_seed(correct, 1, coverage=False).disagreement is None
