"""A step's outcome (model.outcome, model.step.outcome): accepted, unchanged or refused, with Kafka's error code.

Each refusal with an error code is shown in the situation that gets it, through the scripted API
(properties.script) and the test harness's injected requests (model.harness); the first test holds
``outcome`` and ``step`` to one answer on every candidate action of several scopes' first levels.
"""

from __future__ import annotations

import pytest

from model import SCOPES, initial_state, step
from model.actions import (
    AlterConfigs,
    BrokerHeartbeat,
    Deliver,
    ElectController,
    Fetch,
    FetchMetadata,
    RegisterWithKRaft,
    UpdateFeatures,
    UpdateMetadataVersion,
)
from model.bugs import CORRECT
from model.harness import Inject
from model.kraft import UpgradeType, ZkMigrationState
from model.kraft_quorum import decide_metadata_version, heartbeat_request, own_image, registration_request
from model.migration import Profile
from model.outcome import Outcome, Refused, Unchanged, Verdict, error_of
from model.state import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ControlledShutdown,
    LeaderAndIsr,
)
from model.step import candidate_actions, outcome, successors
from model.types import Errors, Ibp
from model.zk_era import decide_control_request
from properties.script import Script, ScriptError

C0, C1 = 3000, 3001


def lisr(epoch: int, broker_epoch: int = 7, leader_epoch: int = 0) -> LeaderAndIsr:
    """A LeaderAndIsr for broker 1 of the fencing scope, from controller 0."""
    return LeaderAndIsr(0, epoch, broker_epoch, 1, 0, 0, leader_epoch, (0, 1))


def refused(taken, error: Errors | None, *words: str, delivered: bool = False) -> None:
    verdict = Verdict.DELIVERED_REFUSED if delivered else Verdict.REFUSED
    assert taken.outcome.verdict is verdict, str(taken.outcome)
    assert taken.outcome.error is error, str(taken.outcome)
    for word in words:
        assert word in taken.outcome.reason, str(taken.outcome)


@pytest.mark.parametrize("name", ["fencing", "bounce", "pre-migration", "dual-write", "finalize", "kraft-quorum"])
def test_outcome_agrees_with_step_on_every_candidate(name):
    """``step`` is ``outcome``'s state: None exactly when the outcome is a refusal or an unchanged answer
    without effects; every refusal says why; no candidate is a test-harness action."""
    scope = SCOPES[name]
    frontier = [initial_state(scope)]
    for _ in range(2):
        following = []
        for state in frontier:
            for action in candidate_actions(state, scope):
                assert not isinstance(action, Inject)
                got = outcome(state, action)
                assert got.state == step(state, action)
                if got.verdict is Verdict.ACCEPTED:
                    assert got.state is not None and got.state != state
                elif got.verdict is Verdict.REFUSED:
                    assert got.state is None and got.reason, got
                elif got.verdict is Verdict.DELIVERED_REFUSED:
                    assert got.state is not None and got.reason
                str(got)  # every reason formats
            following += [nxt for _, nxt in successors(state, scope)]
        frontier = following[:40]


# ---- the ZooKeeper era -----------------------------------------------------------------------------


def test_control_request_with_a_controller_epoch_one_below_is_stale_controller_epoch():
    """KIP-380 / KAFKA-6082: a broker that has seen controller epoch 1 refuses epoch 0, inside the delivery."""
    script = Script("fencing", "kafka-3.9")
    assert script.inject(lisr(1)).outcome.verdict is Verdict.ACCEPTED
    taken = script.inject(lisr(0))
    refused(taken, Errors.STALE_CONTROLLER_EPOCH, "controller epoch 0 < 1", delivered=True)
    assert taken.after.brokers[1] == taken.before.brokers[1]
    assert str(taken.outcome) == "delivered, refused: STALE_CONTROLLER_EPOCH (controller epoch 0 < 1)"
    # The reason is the decision's own: decide_control_request says the same.
    assert error_of(decide_control_request(taken.before.brokers[1], lisr(0), CORRECT)) is taken.outcome.error


def test_control_request_with_a_controller_epoch_one_above_is_taken():
    """A newer controller epoch is accepted and remembered (ReplicaManager: controllerEpoch = the request's)."""
    script = Script("fencing", "kafka-3.9")
    taken = script.inject(lisr(2))
    assert taken.outcome.verdict is Verdict.ACCEPTED
    assert taken.after.brokers[1].controller_epoch == 2


def test_control_request_with_an_older_broker_epoch_is_stale_broker_epoch():
    """KIP-380 §Broker Rejects Control Requests: broker 1's epoch is 7; a request for epoch 6 is refused."""
    refused(Script("fencing").inject(lisr(1, broker_epoch=6)), Errors.STALE_BROKER_EPOCH, "broker epoch 6 < 7",
            delivered=True)


def test_leader_and_isr_with_a_leader_epoch_not_newer_is_the_partitions_stale_controller_epoch():
    """ReplicaManager.becomeLeaderOrFollower answers a leader epoch not newer than the replica's with the
    partition's STALE_CONTROLLER_EPOCH; the request's controller epoch is taken all the same."""
    script = Script("fencing", "kafka-3.9")
    script.inject(lisr(1))
    taken = script.inject(lisr(2))
    refused(taken, Errors.STALE_CONTROLLER_EPOCH, "leader epoch 0 of partition 0 is not newer than 0", delivered=True)
    assert taken.after.brokers[1].controller_epoch == 2


def test_control_request_to_a_broker_that_has_not_registered_waits():
    """KAFKA-7235: a new process serves nothing before it registers; the request stays in flight."""
    script = Script("fencing", cold=True)
    refused(script.inject(lisr(1)), None, "before it has registered")
    assert script.inject(lisr(1), deliver=False).outcome.verdict is Verdict.ACCEPTED
    refused(script.step(Deliver(lisr(1))), None, "waits")


def test_controlled_shutdown_from_an_older_generation_is_stale_broker_epoch():
    """KIP-380 §Controller Rejects ControlledShutdownRequest Sent from Former Generations."""
    script = Script("fencing", "kafka-3.9")
    taken = script.inject(ControlledShutdown(1, 6, 0))
    refused(taken, Errors.STALE_BROKER_EPOCH, "broker epoch 6 < 7", delivered=True)
    assert taken.after.zk == taken.before.zk  # no leadership moved


def test_controlled_shutdown_of_a_broker_the_controller_does_not_know_is_broker_not_available():
    script = Script("fencing")
    refused(script.inject(ControlledShutdown(2, 9, 0)), Errors.BROKER_NOT_AVAILABLE, "not live", delivered=True)


def test_controlled_shutdown_sent_to_a_broker_that_is_not_controller_is_stale_controller_epoch():
    """Shipped Kafka answers ControllerMovedException, which maps to STALE_CONTROLLER_EPOCH (reference §4)."""
    script = Script("fencing")
    refused(script.inject(ControlledShutdown(0, 5, 1)), Errors.STALE_CONTROLLER_EPOCH, "not an initialized controller",
            delivered=True)


def test_update_features_on_a_broker_that_is_not_controller_is_not_controller():
    refused(Script("fencing").step(UpdateFeatures(1, "group_coordinator", 2, True)), Errors.NOT_CONTROLLER)


def test_update_features_the_controller_refuses_is_invalid_request_and_spent():
    """KIP-584 §Changes to Kafka Controller: the request is handled (its answer is the error); nothing is finalized."""
    script = Script("fencing")
    taken = script.step(UpdateFeatures(0, "group_coordinator", 3, False))
    refused(taken, Errors.INVALID_REQUEST, "already finalized at max level 3", delivered=True)
    assert taken.after.zk == taken.before.zk


def test_an_election_refused_says_which_condition_failed():
    assert str(Script("fencing").step(ElectController(1)).outcome) == "refused: /controller exists"


# ---- brokers on KRaft and the active controller ----------------------------------------------------


def test_registration_with_a_controller_that_is_not_active_is_not_controller():
    refused(Script("pre-migration").step(RegisterWithKRaft(0, C1)), Errors.NOT_CONTROLLER)


def test_zk_broker_at_another_ibp_than_the_finalized_level_is_unsupported_version():
    """A ZK broker advertises metadata.version as [IBP, IBP] (reference §3.1): 3.6-IV1 against 3.4-IV0."""
    taken = Script("pre-migration").step(RegisterWithKRaft(1, C0))
    refused(taken, Errors.UNSUPPORTED_VERSION, "IBP_3_6_IV1 only, not the finalized IBP_3_4_IV0")


def test_kraft_broker_registering_in_pre_migration_is_broker_id_not_registered():
    """ClusterControlManager: "Controller is in pre-migration mode and cannot register KRaft brokers"."""
    script = Script("pre-migration")
    request = BrokerRegistrationRequest(0, C0, 9, False, Ibp.IBP_3_4_IV0)
    refused(script.inject(request), Errors.BROKER_ID_NOT_REGISTERED, "pre-migration")


def test_zk_broker_registering_with_a_quorum_without_the_flag_is_broker_id_not_registered():
    """"Controller does not support registering ZK brokers": a KRaft-born quorum."""
    script = Script("kraft-born")
    refused(script.step(RegisterWithKRaft(0, C0)), Errors.BROKER_ID_NOT_REGISTERED, "no migration flag")


def test_registration_sent_twice_keeps_its_epoch_and_another_incarnation_is_a_duplicate():
    """testReRegistrationAndBrokerEpoch: the same incarnation again keeps its registration and epoch; another
    incarnation while the registration is live is DUPLICATE_BROKER_REGISTRATION."""
    script = Script("migration")
    broker = script.state.brokers[0]
    again = script.inject(registration_request(broker, C0))
    assert again.outcome.verdict is Verdict.UNCHANGED
    assert str(again.outcome) == f"accepted, unchanged (the registration stands: broker epoch {broker.kraft_epoch})"
    other = registration_request(broker, C0).replace(incarnation=broker.incarnation + 1)
    refused(script.inject(other), Errors.DUPLICATE_BROKER_REGISTRATION, "holds a live registration")


def test_heartbeat_with_a_stale_broker_epoch_is_stale_broker_epoch():
    """ClusterControlManager.checkBrokerEpoch; the harness's request leaves the broker's process alone."""
    script = Script("dual-write")
    request = heartbeat_request(script.state.brokers[0], C0)
    taken = script.inject(request.replace(broker_epoch=request.broker_epoch - 1))
    refused(taken, Errors.STALE_BROKER_EPOCH, "is not the registration's")
    assert taken.after == taken.before


def test_heartbeat_from_a_broker_that_never_registered_is_stale_broker_epoch():
    """testTouchThrowsExceptionUnlessRegistered: "No broker registration found"."""
    taken = Script("pre-migration").inject(BrokerHeartbeatRequest(1, C0, 5, False, None))
    refused(taken, Errors.STALE_BROKER_EPOCH, "no registration of broker 1")


def test_brokers_heartbeat_answered_stale_broker_epoch_makes_it_register_again():
    """The broker's own heartbeat: the answer reaches it, and it registers again (a delivered refusal)."""
    script = Script("dual-write")
    broker = script.state.brokers[0]
    script.state = script.state.replace(brokers=(broker.replace(kraft_epoch=broker.kraft_epoch + 100),
                                                 *script.state.brokers[1:]))
    taken = script.step(BrokerHeartbeat(0, C0))
    refused(taken, Errors.STALE_BROKER_EPOCH, delivered=True)
    assert taken.after.brokers[0].kraft_epoch == -1


def test_heartbeat_that_changes_nothing_is_accepted_unchanged():
    """testCalculateNextBrokerState's UNFENCED stays UNFENCED: no longer indistinguishable from a refusal."""
    script = Script("dual-write")
    taken = script.step(BrokerHeartbeat(0, C0))
    assert taken.outcome.verdict is Verdict.UNCHANGED and str(taken.outcome) == "accepted, unchanged (unfenced)"
    assert step(taken.before, BrokerHeartbeat(0, C0)) is None  # the explorer sees what it always saw


def test_admin_write_in_pre_migration_is_not_controller_from_the_gate_before_the_feature_decision():
    """QuorumController's pre-migration gate answers NOT_CONTROLLER before FeatureControlManager is asked."""
    script = Script("pre-migration")
    refused(script.step(AlterConfigs(C0)), Errors.NOT_CONTROLLER, "pre-migration", delivered=True)
    refused(script.step(UpdateMetadataVersion(C0, Ibp.IBP_3_6_IV1)), Errors.NOT_CONTROLLER, delivered=True)
    image = own_image(script.state.controllers[0])
    # FeatureControlManager alone would say the migration is in progress.
    assert error_of(decide_metadata_version(image, Ibp.IBP_3_6_IV1, UpgradeType.UPGRADE, CORRECT)) is (
        Errors.INVALID_UPDATE_VERSION
    )


@pytest.mark.parametrize(
    ("current", "level", "how", "message"),
    [
        (Ibp.IBP_3_6_IV1, Ibp.IBP_3_4_IV0, UpgradeType.UPGRADE, "without setting the upgrade type"),
        (Ibp.IBP_3_6_IV1, Ibp.IBP_3_7_IV0, UpgradeType.SAFE_DOWNGRADE, "Can't downgrade to a newer version."),
        (Ibp.IBP_3_7_IV0, Ibp.IBP_3_6_IV1, UpgradeType.SAFE_DOWNGRADE, "it might delete metadata information."),
        (Ibp.IBP_3_7_IV0, Ibp.IBP_3_6_IV1, UpgradeType.UNSAFE_DOWNGRADE, "Unsafe metadata downgrade is not supported"),
    ],
)
def test_metadata_version_refusals_are_invalid_update_version_with_kafkas_message(current, level, how, message):
    """FeatureControlManager.updateFeature / updateMetadataVersion (Kafka 3.9), on a finalized cluster."""
    script = Script("finalize")
    c = script.state.controllers[0]
    image = own_image(c).replace(migration=ZkMigrationState.POST_MIGRATION, metadata_version=current)
    answer = decide_metadata_version(image, level, how, CORRECT)
    assert isinstance(answer, Refused) and answer.error is Errors.INVALID_UPDATE_VERSION and message in answer.reason


def test_metadata_version_change_during_the_migration_is_invalid_update_version():
    taken = Script("finalize").step(UpdateMetadataVersion(C0, Ibp.IBP_3_6_IV1))
    refused(taken, Errors.INVALID_UPDATE_VERSION, "while a ZK migration is in progress", delivered=True)


def test_metadata_version_update_to_the_current_level_is_accepted_unchanged():
    taken = Script("finalize").step(UpdateMetadataVersion(C0, Ibp.IBP_3_4_IV0, UpgradeType.SAFE_DOWNGRADE))
    refused(taken, Errors.INVALID_UPDATE_VERSION, delivered=True)  # the migration is in progress
    script = Script("kraft-born", warm="kip")
    taken = script.step(UpdateMetadataVersion(C0, Ibp.IBP_3_4_IV0))
    assert str(taken.outcome) == "accepted, unchanged (metadata.version is IBP_3_4_IV0)"


def test_fetch_from_a_controller_that_does_not_lead_is_not_leader_or_follower():
    script = Script("pre-migration")
    refused(script.step(Fetch(C0, C1)), Errors.NOT_LEADER_OR_FOLLOWER, "does not lead")
    assert script.step(Fetch(C1, C0)).outcome.verdict is Verdict.UNCHANGED  # caught up: nothing to fetch
    assert script.step(FetchMetadata(0, C0)).outcome.verdict is Verdict.REFUSED  # a ZK broker replays no log


def test_outcome_text_forms():
    """What a scenario file prints for each verdict."""
    assert str(Outcome(Verdict.ACCEPTED, None)) == "accepted"
    assert str(Outcome(Verdict.UNCHANGED, None)) == "accepted, unchanged"
    assert str(Outcome(Verdict.REFUSED, None, None, "ZooKeeper is unavailable")) == "refused: ZooKeeper is unavailable"
    assert str(Outcome(Verdict.DELIVERED_REFUSED, None, Errors.STALE_BROKER_EPOCH, "broker epoch 6 < 7")) == (
        "delivered, refused: STALE_BROKER_EPOCH (broker epoch 6 < 7)"
    )
    assert Refused(Errors.NONE, "x {} {}", (1, 2)).reason == "x 1 2" and Unchanged("y").reason == "y"


# ---- the scripted API --------------------------------------------------------------------------------


def test_script_warm_start_under_kafka_3_9_is_one_kafka_3_9_accepts():
    """Kafka 3.9 bootstraps a migration from metadata.version 3.6-IV1 only, in a metadata transaction: the
    kafka-3.9 script's warm start is at 3.6-IV1 and its every step is one the kafka-3.9 model takes; the
    kip warm start is one it refuses (its quorum would resign at 3.4-IV0)."""
    script = Script("dual-write", "kafka-3.9")
    log = script.state.controllers[0].log
    assert own_image(script.state.controllers[0]).metadata_version is Ibp.IBP_3_6_IV1
    assert [type(e.record).__name__ for e in log[1:5]] == [
        "BeginTransactionRecord", "FeatureLevelRecord", "ZkMigrationStateRecord", "EndTransactionRecord"
    ]
    from model.bugs import Variant
    from model.scopes import for_profile, warm_up

    shaped = for_profile(SCOPES["dual-write"], Profile.KAFKA_3_9)
    state, prefix = warm_up(shaped, Profile.KAFKA_3_9)
    replayed = initial_state(shaped, Profile.KAFKA_3_9)
    assert state == replayed
    replay = _cold_replay(shaped, prefix, Variant(profile=Profile.KAFKA_3_9))
    assert replay.controllers == state.controllers
    with pytest.raises(ValueError, match="under kafka-3.9"):
        warm_up(SCOPES["dual-write"], Profile.KAFKA_3_9)  # the kip levels: 3.9 refuses to bootstrap
    kip = Script("dual-write", "kafka-3.9", warm="kip")
    assert own_image(kip.state.controllers[0]).metadata_version is Ibp.IBP_3_4_IV0


def _cold_replay(scope, prefix, variant):
    from model.scopes import cold_state

    state = cold_state(scope).replace(budget=scope.budget.replace(elections=1, kraft_elections=1, migrations=8,
                                                                   restarts=2, max_in_flight=64, max_lag=1 << 20))
    for action in prefix:
        nxt = step(state, action, variant)
        assert nxt is not None, action
        state = nxt
    return state


def test_script_keeps_pre_migrations_broker_at_another_level_under_kafka_3_9():
    """for_profile raises the levels in order: pre-migration's broker 1 stays one level above the quorum."""
    script = Script("pre-migration", "kafka-3.9")
    assert [b.config.ibp for b in script.state.brokers] == [Ibp.IBP_3_6_IV1, Ibp.IBP_3_7_IV0]
    refused(script.step(RegisterWithKRaft(1, C0)), Errors.UNSUPPORTED_VERSION)


def test_script_reports_the_invariant_a_step_breaks():
    script = Script("fencing", bugs=["setdata_resets_czxid"])
    from model.actions import ExpireSession, ObserveControllerEpoch

    script.step(ExpireSession(1))
    script.step(ObserveControllerEpoch(1))
    assert script.step(ElectController(1)).violations == ("CzxidFixedForNodeLife",)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scope": "nowhere"}, "unknown scope 'nowhere'"),
        ({"scope": "fencing", "profile": "kafka-4"}, "unknown profile"),
        ({"scope": "fencing", "bugs": ["nope"]}, "unknown seeded bug 'nope'"),
        ({"scope": "fencing", "stage": "quorum"}, "has no KRaft side"),
        ({"scope": "handover", "warm": "later"}, "unknown warm start"),
        ({"scope": "handover", "profile": "kafka-3.9", "metadata_version": "IBP_3_4_IV0"}, "warm=kip"),
    ],
)
def test_script_bad_arguments_are_one_line(kwargs, message):
    scope = kwargs.pop("scope")
    with pytest.raises(ScriptError, match=message) as caught:
        Script(scope, **kwargs)
    assert "\n" not in str(caught.value)


# ---- decisions layered as Kafka layers them ----------------------------------------------------------


def test_activation_is_a_decision_with_kafkas_reasons():
    """ActivationRecordsGenerator.generate as decide_activation: the bootstrap records of an empty log (in a
    metadata transaction under kafka-3.9 from 3.6-IV1), and a refusal (the controller resigns) with Kafka's
    message where 3.9 throws."""
    from model.bugs import Variant
    from model.kraft import MetadataImage
    from model.kraft_quorum import decide_activation
    from model.scopes import MIGRATING

    kafka = Variant(profile=Profile.KAFKA_3_9)
    empty = MetadataImage()
    assert [type(r).__name__ for r in decide_activation(empty, MIGRATING, CORRECT, lambda: True)] == [
        "FeatureLevelRecord", "ZkMigrationStateRecord"
    ]
    refusal = decide_activation(empty, MIGRATING, kafka, lambda: True)
    assert isinstance(refusal, Refused) and "IBP_3_4_IV0 does not support ZK migrations" in refusal.reason
    at_3_6 = decide_activation(empty, MIGRATING.replace(metadata_version=Ibp.IBP_3_6_IV1), kafka, lambda: True)
    assert [type(r).__name__ for r in at_3_6] == [
        "BeginTransactionRecord", "FeatureLevelRecord", "ZkMigrationStateRecord", "EndTransactionRecord"
    ]
    born = MetadataImage(metadata_version=Ibp.IBP_3_6_IV1, migration=ZkMigrationState.NONE)
    threw = decide_activation(born, MIGRATING, kafka, lambda: True)
    assert isinstance(threw, Refused) and "created in KRaft mode" in threw.reason
    assert decide_activation(born, MIGRATING, CORRECT, lambda: True) == []  # kip: it never migrates
    without_flag = MIGRATING.replace(migration_enabled=False)
    migrating = born.replace(migration=ZkMigrationState.MIGRATION)
    assert [type(r).__name__ for r in decide_activation(migrating, without_flag, kafka, lambda: True)] == [
        "ZkMigrationStateRecord"
    ]
    misconfigured = decide_activation(migrating, without_flag, CORRECT, lambda: False)
    assert isinstance(misconfigured, Refused) and "KIP-866 §Misconfigurations" in misconfigured.reason


def test_activation_of_a_kraft_born_log_below_3_6_iv1_writes_no_migration_state():
    """ActivationRecordsGenerator.recordsForEmptyLog in Kafka 3.9 (KAFKA-17457): a KRaft-born quorum
    formatted below 3.6-IV1 bootstraps metadata.version alone, NONE implied; from 3.6-IV1 NONE is written
    in the bootstrap transaction; kip writes NONE at every level. Such a log restarted with the migration
    flag is refused as one with the record is (recordsForNonEmptyLog), below 3.4-IV0 for its level."""
    from model.bugs import Variant
    from model.kraft import MetadataImage
    from model.kraft_quorum import decide_activation
    from model.scopes import KRAFT_ONLY, MIGRATING

    kafka = Variant(profile=Profile.KAFKA_3_9)
    empty = MetadataImage()

    def names(records: object) -> list[str]:
        assert isinstance(records, list)
        return [type(r).__name__ for r in records]

    assert names(decide_activation(empty, KRAFT_ONLY, kafka, lambda: True)) == ["FeatureLevelRecord"]
    assert names(decide_activation(empty, KRAFT_ONLY, CORRECT, lambda: True)) == [
        "FeatureLevelRecord", "ZkMigrationStateRecord"
    ]
    assert names(decide_activation(empty, KRAFT_ONLY.replace(metadata_version=Ibp.IBP_3_6_IV1), kafka,
                                   lambda: True)) == [
        "BeginTransactionRecord", "FeatureLevelRecord", "ZkMigrationStateRecord", "EndTransactionRecord"
    ]
    no_record = MetadataImage(metadata_version=Ibp.IBP_3_4_IV0)
    threw = decide_activation(no_record, MIGRATING, kafka, lambda: True)
    assert isinstance(threw, Refused) and "created in KRaft mode" in threw.reason
    too_low = decide_activation(no_record.replace(metadata_version=Ibp.IBP_3_3_IV0), MIGRATING, kafka, lambda: True)
    assert isinstance(too_low, Refused) and "running metadata.version IBP_3_3_IV0" in too_low.reason
    assert decide_activation(no_record, KRAFT_ONLY, kafka, lambda: True) == []
