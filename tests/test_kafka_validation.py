"""Trace validation: a real run's visible changes explained by model paths, and runs no path explains.

The recorded run is a real Kafka 3.9.2 finalize run (ZooKeeper, three brokers, one controller; a
ZooKeeper outage while the controller starts, which makes it exit and be restarted, and a broker
killed after POST_MIGRATION), cut down to what validation reads (tests/data/kafka-finalize-run.json
says how it was made). Each broken variant changes the run the way a Kafka bug would show in it
(KIP sections in the docstrings); validation must name the first change no model path explains.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model.kraft import ZkMigrationState
from properties.kafka.checks import Observed
from properties.kafka.observe import parse_log_text
from properties.kafka.validate import TRACE_VALIDATION, BrokerLeavesKRaft, observations, validate

DATA = Path(__file__).parent / "data"


def recorded(name: str = "kafka-finalize-run.json") -> tuple[Observed, dict]:
    """A recorded real run, as ``properties.kafka.run.load`` gives it (only what validation reads)."""
    run = json.loads((DATA / name).read_text())
    obs = Observed(version=tuple(run["version"]))
    obs.operator = run["operator"]
    obs.logs = run["logs"]
    obs.metadata = {int(c): records for c, records in run["metadata"].items()}
    obs.zk = run["zk"]
    return obs, run["plan"]


def controller_lines(obs: Observed) -> list[dict]:
    return obs.logs["controller-3000"]


def test_validation_names_the_witnesses_its_explanation_reaches():
    """A campaign's coverage of the model's witnesses (KIP-866 §Migration Overview): the finalize run's explaining path
    reaches dual write and the finalization, and no rollback; a rolled-back run's reaches the rollback's end. The path
    is played again step by step, so each witness is the model's own predicate on it."""
    result = validate(*recorded())
    assert {"MigrationReachesDualWrite", "MigrationFinalized"} <= set(result.witnesses)
    assert "RollbackCompletes" not in result.witnesses
    assert result.as_json()["witnesses"] == list(result.witnesses)
    rolled_back = validate(*recorded("kafka-rollback-paused-run.json"))
    assert rolled_back.ok and "RollbackCompletes" in rolled_back.witnesses
    assert "MigrationFinalized" not in rolled_back.witnesses


def test_validation_explains_the_recorded_real_run():
    """Every visible change of a real finalize run, faults included, is a step of the kafka-3.9 model."""
    obs, plan = recorded()
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    assert result.explained == result.total == len([o for o in observations(obs, 3) if not o.is_operator])
    assert result.total >= 20
    # the path the model took goes through the whole migration and its finalization
    names = [type(a).__name__ for a in result.path]
    steps = ("BecomeZkController", "MigrateMetadata", "CompleteMigration", "SendRPCsToBrokers", "ReconfigureController")
    for step in steps:
        assert step in names


@pytest.mark.parametrize(
    ("name", "steps"),
    [
        # Kafka 3.4: no SYNC_KRAFT_TO_ZK, no PRE_MIGRATION record, the claim read from the /controller watch
        ("kafka-3.4-dual-write-run.json", ("BecomeZkController", "MigrateMetadata", "SyncKRaftToZk")),
        # Kafka 3.5: migrates below 3.6-IV1 (played at 3.6-IV1); a broker killed just before its roll to
        # KRaft is started by the roll, and the heal the roll made needless is skipped
        ("kafka-3.5-finalize-run.json", ("CrashBroker", "MigrateBrokerToKRaft", "ReconfigureController")),
        # Kafka 3.4.1: finalized by the roll alone, a KRaft broker killed while the controller restarts without the flag
        ("kafka-3.4-finalize-killed-broker-run.json", ("MigrateBrokerToKRaft", "ReconfigureController", "CrashBroker")),
        # Kafka 4.1: a KRaft-born quorum, its brokers registered and rolled
        ("kafka-4-kraft-run.json", ("BecomeLeader", "RegisterWithKRaft", "StopBroker", "RestartBroker")),
    ],
)
def test_validation_explains_recorded_runs_of_other_releases(name, steps):
    """The releases at both ends: each change of a 3.4 migration and of a 4.1 KRaft-born cluster is a model step."""
    obs, plan = recorded(name)
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    assert result.explained == result.total > 5
    names = {type(a).__name__ for a in result.path}
    assert set(steps) <= names


def test_validation_keeps_an_election_won_while_stopping_and_a_killed_stops_session_loss():
    """A broker stopped right after the rollback deleted /controller won the ZooKeeper election while it
    shut down (epoch 5), hung, and was killed; the next controller took epoch 6 once its session expired.
    The election outlives the stop, so the stop is placed after it; and a killed process's session is
    lost later, as after a kill -9 (KIP-380 §Proposed Changes: a new controller bumps the epoch)."""
    obs, plan = recorded("kafka-rollback-killed-stop-run.json")
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    names = [str(a) for a in result.path]
    elected, crashed = names.index("ElectController(broker=0)", names.index("DeleteControllerZNodes()")), names.index(
        "CrashBroker(broker=0)"
    )
    assert elected < crashed
    assert "ExpireSession" in " ".join(names[crashed:])


def test_validation_lets_a_resumed_broker_find_its_session_lost():
    """A broker paused past its ZooKeeper session while the run settled hears of the expiry only when it
    resumes, and registers again after the heal (KIP-380 §Proposed Changes: a new czxid, a new epoch)."""
    obs, plan = recorded("kafka-rollback-paused-run.json")
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    names = [str(a) for a in result.path]
    assert names[-2:] == ["OpenSession(broker=0)", "RegisterBroker(broker=0)"]
    assert any(n.startswith("ExpireSession") for n in names[-6:-2])


def test_validation_reads_a_34_migration_record_as_kafka_35_does(monkeypatch):
    """3.4 wrote one ZkMigrationStateRecord, byte 1, when its migration began; read with the KIP's
    numbering (PRE_MIGRATION) no model path explains it after the migration."""
    obs, plan = recorded("kafka-3.4-dual-write-run.json")
    assert obs.migration_states[1].name == "MIGRATION"
    kip_numbering = {0: ZkMigrationState.NONE, 1: ZkMigrationState.PRE_MIGRATION}
    monkeypatch.setattr(Observed, "migration_states", property(lambda self: kip_numbering))
    result = validate(obs, plan)
    assert result.unexplained is not None and result.unexplained.event["type"] == "ZK_MIGRATION_STATE_RECORD"


def test_validation_shows_a_kraft_born_bootstrap_as_each_release_writes_it():
    """ActivationRecordsGenerator.recordsForEmptyLog by release: 3.4 and 4.x write no ZkMigrationStateRecord
    for a KRaft-born log, 3.5 to 3.8 NONE from 3.4-IV0, 3.9 NONE from 3.6-IV1 (KAFKA-17457), as the
    model's kafka-3.9 profile does. Only where the release's rule is not its profile's is the model's
    record shown otherwise; a 3.9 run at 3.4-IV0 is the model's own log."""
    from model.bugs import Variant
    from model.kraft import ControllerConfig, KRaftEpoch, LogEntry, MetadataImage
    from model.kraft_quorum import bootstrap_records
    from model.migration import Profile
    from model.types import Ibp
    from properties.kafka.validate import Shape, release_writes_none, view

    releases = ((3, 4, 1), (3, 5, 2), (3, 8, 1), (3, 9, 0), (4, 1, 1))
    assert [release_writes_none(v, Ibp.IBP_3_4_IV0) for v in releases] == [False, True, True, False, False]
    assert release_writes_none((3, 9, 0), Ibp.IBP_3_6_IV1) and not release_writes_none((3, 5, 2), Ibp.IBP_3_3_IV0)
    obs, plan = recorded("kafka-4-kraft-run.json")
    state = Shape.of(plan, obs.version).initial()
    c = state.controllers[0]

    def seen(level: Ibp, profile: Profile, version: tuple[int, int, int]) -> object:
        log = tuple(LogEntry(KRaftEpoch(1), r) for r in bootstrap_records(level, False, Variant(profile=profile)))
        bootstrapped = c.replace(log=log, high_watermark=len(log), config=ControllerConfig(False, level))
        return view(state.replace(controllers=(bootstrapped,)), version)[("migration",)]

    assert seen(Ibp.IBP_3_4_IV0, Profile.KAFKA_3_9, (3, 9, 0)) is None  # the model's own: no record
    assert seen(Ibp.IBP_3_6_IV1, Profile.KAFKA_3_9, (3, 9, 0)) is ZkMigrationState.NONE
    assert seen(Ibp.IBP_3_4_IV0, Profile.KAFKA_3_9, (3, 5, 2)) is ZkMigrationState.NONE  # 3.5 wrote it
    assert seen(Ibp.IBP_3_6_IV1, Profile.KAFKA_3_9, (4, 1, 1)) is None  # 4.x writes none
    assert seen(Ibp.IBP_3_3_IV0, Profile.KIP, (3, 4, 1)) is None  # 3.4 wrote none
    assert MetadataImage().migration is None


def _feature_updates(obs: Observed) -> list[dict]:
    return [e for e in obs.operator if e.get("action") == "update-features"]


def test_validation_holds_kafka_to_the_models_feature_decisions():
    """KIP-584: each answer Kafka gave an UpdateFeatures request is the model's decision. 4.1 accepted
    the upgrade and refused both downgrades of metadata.version, as the model does; told that it
    refused the upgrade, or accepted the safe downgrade, validation names that operator step."""
    obs, plan = recorded("kafka-4-kraft-run.json")
    upgrade, downgrade, _ = _feature_updates(obs)
    assert (upgrade["refused"], downgrade["refused"]) == (False, True)
    assert validate(obs, plan).ok
    for update in (upgrade, downgrade):
        obs, plan = recorded("kafka-4-kraft-run.json")
        changed = next(e for e in _feature_updates(obs) if e["command"] == update["command"])
        changed["refused"] = not changed["refused"]
        result = validate(obs, plan)
        assert result.unexplained is not None, result.report()[0]
        assert (result.unexplained.event["command"], result.unexplained.event["refused"]) == (
            changed["command"], changed["refused"]
        )


def test_validation_names_what_the_model_showed_and_the_run_did_not():
    """A metadata.version upgrade Kafka said it made, with no FeatureLevelRecord in the log: every model
    path that accepts it shows a level the run never showed."""
    obs, plan = recorded("kafka-4-kraft-run.json")
    records = next(iter(obs.metadata.values()))
    upgraded = [r for r in records if r["type"] == "FEATURE_LEVEL_RECORD" and r["data"]["name"] == "metadata.version"]
    records.remove(upgraded[-1])
    result = validate(obs, plan)
    assert result.failed and result.unexplained is None
    assert result.unshown == ("metadata.version (1, <Ibp.IBP_3_6_IV1: 36>) -> (2, <Ibp.IBP_3_7_IV0: 37>)",)
    assert "never shown by the run" in "\n".join(result.report())
    assert result.as_json()["outcome"] == "unexplained"


def test_validation_names_a_skipped_driver_state():
    """KIP-866 §Migration Overview: a driver that went from BECOME_CONTROLLER straight on without ZK_MIGRATION.

    The line for the transition into ZK_MIGRATION is taken out: the MIGRATION record that follows
    cannot be written by any model path whose driver never migrated."""
    obs, plan = recorded()
    lines = controller_lines(obs)
    lines.remove(next(e for e in lines if e["kind"] == "driver-transition" and e["new"] == "ZK_MIGRATION"))
    result = validate(obs, plan)
    assert result.unexplained is not None and not result.undecided
    assert result.unexplained.event["type"] == "ZK_MIGRATION_STATE_RECORD"
    assert "driver 3000 BECOME_CONTROLLER -> ZK_MIGRATION" in result.alternatives
    assert type(result.path[-1]).__name__ == "BecomeZkController"
    report = "\n".join(result.report())
    assert "no path of the model explains the next one" in report and "unexplained: log  controller 3000" in report


def test_validation_names_a_second_zk_controller_in_one_epoch():
    """KIP-380 / KAFKA-6082: a second broker elected at an epoch another broker already won."""
    obs, plan = recorded()
    first = next(e for lines in obs.logs.values() for e in lines if e["kind"] == "zk-controller-elected")
    twin = dict(first, node=str((int(first["node"]) + 1) % 3), process=f"broker-{(int(first['node']) + 1) % 3}",
                time=first["time"] + 1)
    lines = obs.logs[twin["process"]]
    lines.insert(next((i for i, e in enumerate(lines) if e["time"] > twin["time"]), len(lines)), twin)
    result = validate(obs, plan)
    assert result.unexplained is not None and result.unexplained.event == twin
    assert "ElectController(broker=%s)" % first["node"] in [repr(a) for a in result.path]


def test_validation_names_a_registration_from_a_broker_without_the_migration_settings():
    """KIP-866 §Migration Trigger: a ZooKeeper broker registers with KRaft only once rolled with the
    migration flag and the controller configs; the first registration is made to come from a broker
    that has not been rolled yet."""
    obs, plan = recorded()
    records = next(iter(obs.metadata.values()))
    first = next(r for r in records if r["type"] == "REGISTER_BROKER_RECORD")
    assert first["data"]["brokerId"] == 0  # broker 0 is rolled first
    first["data"]["brokerId"] = 2
    result = validate(obs, plan)
    assert result.unexplained is not None and result.unexplained.event is first


def test_validation_names_a_leader_the_quorum_never_elected():
    """KIP-500 §Controller Quorum: a lone voter cannot lead an epoch it skipped to without an election."""
    obs, plan = recorded()
    lead = next(e for e in controller_lines(obs) if e["kind"] == "raft-leader")
    lead["epoch"] = "5"
    result = validate(obs, plan)
    assert result.unexplained is not None and result.unexplained.event["kind"] == "raft-leader"


def test_validation_names_a_migration_state_that_went_back():
    """KIP-866 §Migration Overview: POST_MIGRATION written before MIGRATION is no path of the model."""
    obs, plan = recorded()
    records = next(iter(obs.metadata.values()))
    states = [r for r in records if r["type"] == "ZK_MIGRATION_STATE_RECORD"]
    states[1]["data"]["zkMigrationState"] = 3  # POST_MIGRATION where MIGRATION was
    result = validate(obs, plan)
    assert result.unexplained is not None
    assert result.unexplained.event["type"] == "ZK_MIGRATION_STATE_RECORD"


def test_validation_explains_a_34_finalize_by_the_roll_alone():
    """Kafka 3.4 finalizes by the controller's roll without the migration flag and commits no POST_MIGRATION
    (3.4.0's QuorumController writes no record at that activation); the model's POST_MIGRATION is hidden for
    3.4 only, and the rest is explained: the brokers' KRaft registrations once their ZooKeeper-mode ones are
    fenced by their controlled shutdown, the roll, the new Raft leadership, and no driver after it."""
    obs, plan = recorded("kafka-3.4-finalize-run.json")
    assert plan["runbook"] == "finalize" and obs.version == (3, 4, 1)
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    assert result.explained == result.total >= 25
    names = [type(a).__name__ for a in result.path]
    roll = names.index("ReconfigureController")
    assert "BecomeLeader" in names[roll:] and "MigrateBrokerToKRaft" in names[:roll]
    shown = [o for o in observations(obs, 3) if o.key == ("migration",)]
    assert [o.value for o in shown] == [ZkMigrationState.MIGRATION]  # 3.4's one record: no POST_MIGRATION


def test_validation_fences_a_migrating_zk_brokers_registration_when_it_stops(monkeypatch):
    """KafkaServer.shutdown (3.4.0 on) ends a migrating ZooKeeper broker's KRaft registration by a controlled
    shutdown (the 3.4.1 log: inControlledShutdown, then fenced); without that fencing the kip profile, whose
    migration waits for unfenced brokers, refuses the KRaft broker it is rolled into as a duplicate."""
    obs, plan = recorded("kafka-3.4-finalize-run.json")
    monkeypatch.setattr(BrokerLeavesKRaft, "apply", lambda self, state, variant: state)
    result = validate(obs, plan)
    assert result.unexplained is not None
    assert result.unexplained.event["type"] == "REGISTER_BROKER_RECORD"
    assert result.unexplained.event["data"]["isMigratingZkBroker"] is False


def test_validation_fences_a_kraft_brokers_registration_when_it_stops(monkeypatch):
    """A KRaft broker's clean stop (BrokerServer.shutdown) ends its registration by a controlled shutdown too: in a
    3.9.2 kraft run, rolling broker 1, which the model had unfenced, showed its controlled shutdown and fencing in the
    log and then its new incarnation's registration, which trace validation left unexplained while it fenced only a
    migrating ZK broker's registration at a stop. Explained now; unexplained again without the fencing."""
    obs, plan = recorded("kafka-3.9-kraft-roll-run.json")
    assert plan["runbook"] == "kraft"
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    assert sum(1 for a in result.path if isinstance(a, BrokerLeavesKRaft)) == 3  # each broker's roll
    monkeypatch.setattr(BrokerLeavesKRaft, "apply", lambda self, state, variant: state)
    result = validate(obs, plan)
    assert result.unexplained is not None
    assert result.unexplained.event["type"] == "REGISTER_BROKER_RECORD"
    assert result.unexplained.event["data"]["brokerId"] == 1


def test_validation_places_a_stop_after_the_registration_the_stopping_controller_wrote():
    """A rollback-before-brokers run (3.9.2, seed 16): controller-3000, paused as it started, was stopped by the
    rollback just after it said it had started, and wrote its REGISTER_CONTROLLER_RECORD 91 ms into the clean stop.
    The model's ShutdownController is one step, after which the controller writes nothing: the record was unexplained
    (five of 31 runs of that campaign). A stopping controller's own registration now comes before its stop, as an
    election it won while stopping does."""
    obs, plan = recorded("kafka-3.9-rollback-stop-while-registering-run.json")
    stop = next(e for e in obs.operator if e["kind"] == "step" and e.get("action") == "stop")
    registered = next(r for r in obs.metadata[3000] if r["type"] == "REGISTER_CONTROLLER_RECORD")
    assert stop["began"] < registered["time"] < stop["time"]
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    assert [type(a).__name__ for a in result.path][-2:] == ["RegisterController", "ShutdownController"]


def test_validation_lets_a_stopping_controller_vote_for_the_next_leader():
    """Seed 2 of `kafka campaign --runbook rollback-before-brokers --controllers 3 --faults all` (3.9.2): the rollback
    stopped controller-3000, then controller-3001, the leader at Raft epoch 1; controller-3002 became leader at epoch 2
    while 3001's clean stop was under way (a leader that stops resigns and hands over, and votes until its Raft client
    closes). The model's ShutdownController is one step, placed when the stop began, so no quorum was left to elect
    3002: unexplained, in 7 of 16 runs of that campaign. A stop is now placed after another controller's election
    made while it was under way, as after one the stopping controller won itself."""
    obs, plan = recorded("kafka-3.9-rollback-vote-while-stopping-run.json")
    stop = next(e for e in obs.operator if e["kind"] == "step" and e.get("action") == "stop"
                and e["process"] == "controller-3001")
    elected = next(e for e in obs.logs["controller-3002"] if e["kind"] == "raft-leader" and e["epoch"] == "2")
    assert stop["began"] < elected["time"] < stop["time"]
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    steps = [(type(a).__name__, getattr(a, "controller", None)) for a in result.path]
    assert steps.index(("BecomeLeader", 3002)) < steps.index(("ShutdownController", 3001))


def test_validation_lets_a_request_sent_while_no_controller_runs_wait_for_one():
    """A 3.9.2 kraft run whose one controller was killed as the admin asked for a topic (refunds: two partitions and
    a config, three parts of one request), and started again 20 s later: Kafka answered the request after the
    restart. Trace validation failed at the request (nothing could take it when it was sent, so it was not let wait
    for its answer), then, let wait, at its second part (every earlier request was taken before the operator's next
    step, the parts of the same one too). Now each part waits, in order, and is taken after the hidden steps that
    let the restarted controller lead."""
    from model.actions import CrashController, CreatePartitions, RestartController

    obs, plan = recorded("kafka-3.9-kraft-controller-down-run.json")
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    kinds = [type(a) for a in result.path]
    crash = kinds.index(CrashController)
    restart = kinds.index(RestartController, crash)
    assert CreatePartitions not in kinds[crash:restart]  # refunds' partitions are created once it runs again
    assert kinds[restart:].count(CreatePartitions) == 2


def test_validation_names_a_post_migration_record_in_a_34_log():
    """Only 3.4's one difference is hidden: a POST_MIGRATION record in a 3.4 log, which 3.4 never writes, is
    unexplained at once (the model's own POST_MIGRATION is never shown to a 3.4 run)."""
    obs, plan = recorded("kafka-3.4-finalize-run.json")
    records, after_the_roll = obs.metadata[3000], max(e["time"] for e in controller_lines(obs))
    last = records[-1]
    records.append(last | {"offset": last["offset"] + 1, "batch": last["offset"] + 1, "time": after_the_roll + 1,
                           "type": "ZK_MIGRATION_STATE_RECORD", "data": {"zkMigrationState": 3}})
    result = validate(obs, plan)
    assert result.unexplained is not None, "\n".join(result.report())
    assert result.unexplained.event["type"] == "ZK_MIGRATION_STATE_RECORD"
    assert result.explained == result.total - 1


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda obs, plan: plan.update(runbook="a-runbook-of-tomorrow"), "runbook a-runbook-of-tomorrow"),
    ],
)
def test_validation_says_what_it_does_not_validate(change, reason):
    """A run the mapping does not cover is reported as not validated, never as explained."""
    obs, plan = recorded()
    change(obs, plan)
    result = validate(obs, plan)
    assert not result.ok and result.unexplained is None
    assert reason in result.not_validated
    assert "not validated" in result.report()[0]


def test_validation_failure_is_a_violation_of_the_run(tmp_path, monkeypatch):
    """``kafka check`` reports an unexplained change as a violation, the observation its evidence,
    and keeps the whole validation (with the model path) in validation.json."""
    from properties.kafka import run

    obs, plan = recorded()
    lines = controller_lines(obs)
    lines.remove(next(e for e in lines if e["kind"] == "driver-transition" and e["new"] == "ZK_MIGRATION"))
    (tmp_path / "run.json").write_text(json.dumps({"plan": plan, "kafka": "3.9.2"}))
    monkeypatch.setattr(run, "load", lambda folder: obs)
    _, violations = run.check_folder(tmp_path)
    unexplained = [v for v in violations if v.invariant == TRACE_VALIDATION]
    assert len(unexplained) == 1
    assert unexplained[0].evidence[0]["type"] == "ZK_MIGRATION_STATE_RECORD"
    saved = json.loads((tmp_path / "validation.json").read_text())
    assert saved["outcome"] == "unexplained" and saved["path"][-1] == "BecomeZkController(controller=3000)"
    verdict = json.loads((tmp_path / "violations.json").read_text())
    assert TRACE_VALIDATION in {v["invariant"] for v in verdict}


@pytest.mark.parametrize(
    ("line", "claimed"),
    [
        # Kafka 3.9 (KRaftMigrationDriver.applyMigrationOperation with alwaysLog)
        ("INFO [KRaftMigrationDriver id=3000] Claimed ZK controller leadership in 1234 ns. Transitioned migration "
         "state from ZkMigrationLeadershipState{...} to ZkMigrationLeadershipState{...}", True),
        # Kafka 3.5 to 3.8, at TRACE: the claim changed the state
        ("TRACE [KRaftMigrationDriver id=3000] Claiming ZK controller leadership. Transitioned migration state from "
         "ZkMigrationLeadershipState{...} to ZkMigrationLeadershipState{...}", True),
        # a claim that failed leaves the state as it was: no claim
        ("TRACE [KRaftMigrationDriver id=3000] Claiming ZK controller leadership. Kept migration state as "
         "ZkMigrationLeadershipState{...}", False),
    ],
)
def test_the_claim_is_read_in_each_releases_wording(line, claimed):
    """Without the claim the driver's move to ZK_MIGRATION has no model path (KIP-866 §Controller
    Leadership: the claim comes first); 3.5 to 3.8 word it otherwise than 3.9."""
    logger = "(org.apache.kafka.metadata.migration.KRaftMigrationDriver)"
    events = parse_log_text(f"[2026-11-27 00:39:17,863] {line} {logger}", "controller-3000")
    assert [e["kind"] for e in events if e["kind"] == "driver-claimed"] == (["driver-claimed"] if claimed else [])


def test_validation_lets_a_killed_stops_old_session_expire_before_its_restart_registers():
    """A rollback's broker stopped 38 ms after a ZooKeeper controller was elected still named the KRaft
    controller as its own, sent its controlled shutdown to the deprovisioned quorum, hung, and was killed 60 s
    later; the runbook waited for its old registration to expire before it started it again, and the new
    incarnation registered at a new czxid (KIP-380 §Proposed Changes). Nothing visible marks the expiry between
    the kill and the start, so the model may place the old session's loss just after the start, within the
    window a heal opens."""
    obs, plan = recorded("kafka-rollback-killed-stop-restarted-run.json")
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    names = [str(a) for a in result.path]
    crashed = names.index("CrashBroker(broker=0)")
    assert "ExpireSession" in " ".join(names[crashed:]) and "RegisterBroker(broker=0)" in names[crashed:]


def test_validation_compares_controller_registrations():
    """KIP-866 §Migration Trigger (reference §1.4): from metadata.version 3.7-IV0 Kafka reads each voter's
    RegisterControllerRecord. A real 3.9.2 finalize run's log holds the controller's registration with the
    migration flag, then, after the controller restarted without it, one without: each is explained by the
    model's RegisterController."""
    obs, plan = recorded("kafka-3.9-controller-registrations-run.json")
    shown = [(o.key, o.value) for o in observations(obs, 3) if o.key[0] == "controller-registered"]
    assert shown == [(("controller-registered", 3000), True), (("controller-registered", 3000), False)]
    result = validate(obs, plan)
    assert result.ok, result.report()
    assert [repr(a) for a in result.path].count("RegisterController(controller=3000, leader=3000)") == 2


def test_validation_names_a_controller_registered_without_its_migration_flag():
    """A controller started with zookeeper.metadata.migration.enable registers zkMigrationReady=true
    (ControllerRegistrationManager): a first registration made to say false is no path of the model."""
    obs, plan = recorded("kafka-3.9-controller-registrations-run.json")
    records = next(iter(obs.metadata.values()))
    first = next(r for r in records if r["type"] == "REGISTER_CONTROLLER_RECORD")
    first["data"]["zkMigrationReady"] = False
    result = validate(obs, plan)
    assert result.unexplained is not None and result.unexplained.event is first


def test_real_run_check_holds_the_driver_to_ready_registrations():
    """KIP-866 §Migration Trigger (reference §1.4): on the real 3.9.2 run the driver left
    WAIT_FOR_CONTROLLER_QUORUM with the controller registered ready; made to say not ready, the check
    MigrationWaitsForEveryVoterRegisteredReady names it."""
    from properties.kafka.checks import CHECKS

    check = CHECKS["MigrationWaitsForEveryVoterRegisteredReady"]
    obs, _ = recorded("kafka-3.9-controller-registrations-run.json")
    assert check(obs) == []
    records = next(iter(obs.metadata.values()))
    next(r for r in records if r["type"] == "REGISTER_CONTROLLER_RECORD")["data"]["zkMigrationReady"] = False
    (violation,) = check(obs)
    assert "controller 3000" in violation.message


def test_validation_lets_a_kill_cut_off_the_killed_drivers_last_log_line():
    """Kafka 3.6.2: the controller wrote /migration's offset (88) and was killed 40 ms later, before its driver logged
    the move to SYNC_KRAFT_TO_ZK; restarted, the driver read that offset and went on to BECOME_CONTROLLER. The model
    explains it only with MigrationCommitted taken just before the kill, its transition unseen: a killed process's
    last line may never be written. A transition line missing anywhere else is still unexplained (above)."""
    result = validate(*recorded("kafka-3.6-kill-cuts-driver-line-run.json"))
    assert result.ok, result.report()
    names = [type(a).__name__ for a in result.path]
    crash = names.index("CrashController")
    assert names[crash - 1] == "MigrationCommitted" and "MigrationCommitted" not in names[crash + 1:]


def test_validation_places_an_exit_of_its_own_when_its_fatal_line_was_logged():
    """Kafka 3.9.2: broker 2, ZooKeeper-mode controller since it started, exited on an authorizer session a ZooKeeper
    outage expired; its shutdown closed its own session, and broker 1 took /controller 12 ms later, 1.7 s before the
    runbook saw broker 2 gone and started it again. The model explains it with broker 2 stopped (its session closed)
    when its fatal line was logged; stopped when the runbook noticed, broker 1's election is unexplained."""
    obs, plan = recorded("kafka-3.9-broker-exits-at-startup-run.json")
    result = validate(obs, plan)
    assert result.ok, result.report()
    steps = [repr(a) for a in result.path]
    assert steps.index("StopBroker(broker=2)") < steps.index("ElectController(broker=1)")
    for e in obs.operator:  # the exits as the runbook noticed them, as validation placed them before
        if e["kind"] == "restart":
            e["why"] = "exit code 1"
    noticed = validate(obs, plan)
    assert not noticed.ok and noticed.unexplained.event["kind"] == "zk-controller-elected"
    assert noticed.unexplained.event["node"] == "1"


def test_validation_places_a_stop_begun_in_a_zookeeper_outage_at_the_heal():
    """Kafka 3.9.2: broker 0, ZooKeeper-mode controller, began its clean stop 0.2 s into a ZooKeeper outage; its
    shutdown closed its session once ZooKeeper was back (1.6 s after the heal) and broker 2 took /controller 9 ms
    later, before the stop ended. The model explains it with the stop at the heal, its session closed then (at the
    stop's beginning, ZooKeeper down, the model's session would outlive it: the run was unexplained so)."""
    from properties.kafka.validate import _steps_when_they_began

    obs, plan = recorded("kafka-3.9-stop-spans-zookeeper-outage-run.json")
    result = validate(obs, plan)
    assert result.ok, result.report()
    steps = [repr(a) for a in result.path]
    assert steps.index("ZkRecover()") < steps.index("StopBroker(broker=0)") < steps.index("ElectController(broker=2)")
    healed = next(e["time"] for e in obs.operator if e["kind"] == "heal" and e["process"] == "zookeeper")
    stop = next(e for e in obs.operator if e.get("action") == "stop" and e["node"] == 0)
    assert stop["began"] < healed < stop["time"]

    def placed(operator: list[dict]) -> int:
        return next(e["time"] for e in _steps_when_they_began(operator) if e.get("action") == "stop" and e["node"] == 0)

    assert placed(obs.operator) == healed
    # an outage that heals after the stop ends, or a stop begun after it healed, leaves the stop at its beginning
    late = [e | {"time": stop["time"] + 1} if e["kind"] == "heal" and e["process"] == "zookeeper" else e
            for e in obs.operator]
    assert placed(sorted(late, key=lambda e: e["time"])) == stop["began"]
    after = [e | {"began": healed + 1} if e is stop else e for e in obs.operator]
    assert placed(after) == healed + 1
