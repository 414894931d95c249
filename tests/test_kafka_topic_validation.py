"""Trace validation of a real run's topic changes: each partition created, topic removed and topic config set
in the metadata log explained by the model's admin action for the operator's request, each one's mirror into
ZooKeeper by the model's dual write, and recordings in which one is not (KIP-866 §Dual Metadata Writes: in dual
write the admin's requests are KRaft's, and the controller writes each change to ZooKeeper too).

The recorded run is a real Kafka 3.9.2 dual-write run (tests/data/kafka-3.9-topics-traced-run.json says how
it was made): in dual write, refunds created with a config, payments deleted, orders grown by a partition and
orders-0 reassigned. Each broken variant changes the log or the operator's log the way a bug would show in it.
"""

from __future__ import annotations

import copy
import json
from functools import partial
from pathlib import Path

import pytest

from model.actions import StopBroker
from model.bugs import Variant
from model.state import Budget
from model.types import BrokerId
from properties.kafka.checks import (
    Observed,
    zk_broker_partition_changes_bump_leader_epoch,
    zk_equals_image_at_migration_offset,
)
from properties.kafka.validate import (
    Environment,
    Node,
    Observation,
    OperatorAdminRequest,
    Search,
    Shape,
    _steps_when_they_began,
    _take_deferred,
    admin_records,
    observations,
    validate,
    view,
    visible_changes,
)

DATA = Path(__file__).parent / "data"
RUN = "kafka-3.9-topics-traced-run.json"


def recorded(name: str = RUN) -> tuple[Observed, dict]:
    """A recorded real run, as ``properties.kafka.run.load`` gives it (what validation and the topic checks read)."""
    run = json.loads((DATA / name).read_text())
    obs = Observed(version=tuple(run["version"]))
    obs.operator = run["operator"]
    obs.logs = run.get("logs", {})
    obs.metadata = {int(c): records for c, records in run["metadata"].items()}
    obs.zk = run["zk"]
    for events in obs.zk.values():  # the older recordings kept no zxid on a znode's observations
        for e in events:
            e.setdefault("zxid", e.get("mzxid", 0))
    return obs, run["plan"]


def log(obs: Observed) -> list[dict]:
    return obs.metadata[3000]


def record(obs: Observed, kind: str, **data: object) -> dict:
    return next(r for r in log(obs) if r["type"] == kind and all(r["data"].get(k) == v for k, v in data.items()))


def topic_id(obs: Observed, name: str) -> str:
    return record(obs, "TOPIC_RECORD", name=name)["data"]["topicId"]


def mirrored(obs: Observed) -> list[tuple[str, object, str]]:
    """The run's observed mirror of the admin's facts into ZooKeeper: (fact, count, znode)."""
    return [(o.key[0], o.value, o.event["path"]) for o in observations(obs, 3)
            if o.key[0] in ("zk-partitions", "zk-removed", "zk-configs")]


def znode_written(obs: Observed, path: str, like: dict, zxid: int, **fields: object) -> None:
    """A write of ``path`` the watch saw, shaped like the observation ``like``, at ``zxid`` (later than any)."""
    obs.zk.setdefault(path, []).append(like | {"path": path, "mzxid": zxid, "zxid": zxid, "time": like["time"] + 5000}
                                       | fields)


def without_operator_step(obs: Observed, action: str) -> None:
    obs.operator = [e for e in obs.operator if e.get("action") != action]


def without_the_move(obs: Observed) -> None:
    """The run without orders-0's reassignment: its request and its two records."""
    without_operator_step(obs, "reassign")
    obs.metadata[3000] = [r for r in log(obs) if r["offset"] not in (125, 127)]


def test_validation_explains_a_real_runs_topic_changes():
    """Each admin request of a real 3.9.2 dual write is one model step whose record the log shows: refunds'
    two partitions (CreatePartitions on the brokers Kafka placed them), its config (AlterConfigs), payments'
    removal (DeleteTopics), orders' new partition, and orders-0's reassignment: its first record
    (AlterPartitionReassignments) and the leader's ISR join that completes it (AlterPartition, a hidden step). The
    migration's copy and __consumer_offsets (made for the run's consumer) are no admin facts of the view."""
    obs, plan = recorded()
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    facts = [(o.key[1], o.value, o.event["offset"]) for o in observations(obs, 3) if o.key[0] == "topics"]
    assert facts == [("partitions", 1, 112), ("partitions", 2, 113), ("configs", 1, 114), ("removed", 1, 115),
                     ("partitions", 3, 117), ("reassigning", 1, 125), ("reassigned", 1, 127)]
    assert mirrored(obs) == [("zk-partitions", 1, "/brokers/topics/refunds/partitions/0/state"),
                             ("zk-partitions", 2, "/brokers/topics/refunds/partitions/1/state"),
                             ("zk-configs", 1, "/config/topics/refunds"),
                             ("zk-removed", 1, "/brokers/topics/payments"),
                             ("zk-partitions", 3, "/brokers/topics/orders/partitions/3/state")]
    names = [type(a).__name__ for a in result.path]
    assert names.count("CreatePartitions") == 3
    assert names.count("DeleteTopics") == names.count("AlterConfigs") == 1
    assert names.count("AlterPartitionReassignments") == names.count("AlterPartition") == 1
    assert result.path.index(next(a for a in result.path if type(a).__name__ == "DeleteTopics")) > names.index(
        "MigrateMetadata")


def test_validation_explains_a_creation_mirrored_after_another_topics_deletion_was_asked():
    """payments' deletion asked before ZooKeeper showed refunds' partitions (a real run's timing under load): the
    model's one topic is deleted before its dual write ran, and that write, deleting it, stands for Kafka's mirror of
    the new topic's partitions and the other's deletion (tests/test_kafka_real.py failed on it now and then)."""
    obs, plan = recorded()
    first_mirror = obs.zk["/brokers/topics/refunds/partitions/0/state"][0]["time"]
    delete = next(e for e in obs.operator if e.get("action") == "delete-topics")
    delete["began"] = first_mirror - 1
    timeline = observations(obs, 3)
    asked = next(i for i, o in enumerate(timeline) if OperatorAdminRequest("delete", "payments") in o.actions)
    assert [(o.key, o.value) for o in timeline].index((("zk-partitions",), 1)) > asked
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())


def test_validation_explains_a_deletion_mirrored_after_a_later_request_was_sent():
    """payments' deletion mirrored into ZooKeeper after orders' growth was asked and before its record (a real run's
    timing: tests/test_kafka_real.py failed on it now and then). Kafka's controller takes a request some time after
    it was sent, so the model may take it later, up to when Kafka answered it; or take it at once and dual-write the
    deletion with the new partition in one multi (the next test)."""
    obs, plan = recorded()
    removed = obs.zk["/brokers/topics/payments"][-1]["time"]
    grow = next(e for e in obs.operator if e.get("action") == "add-partitions")
    grow["began"] = removed - 1
    timeline = observations(obs, 3)
    asked = next(i for i, o in enumerate(timeline) if OperatorAdminRequest("create", "orders", (2, 0)) in o.actions)
    assert [(o.key, o.value) for o in timeline].index((("zk-removed",), 1)) > asked
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())


def test_a_deferred_request_is_taken_once_kafka_answered_it():
    """A request is deferred at most until Kafka answered it: a change seen later finds it taken, and a node that
    cannot take it (here, with no KRaft controller to take it) is no explanation. The operator's next step finds it
    taken whenever it comes, unless, while a fault strikes, it is a later part of the same request (it shares its
    answer); a fault's strike or heal, which does not wait for the operator, only once Kafka had answered it."""
    obs, plan = recorded()
    shape = Shape.of(plan, obs.version)
    search = Search(shape.scope(), Variant(profile=obs.profile), {}, partial(view, version=obs.version))
    waiting = Node(shape.initial(), deferred=(((OperatorAdminRequest("config", "refunds"),), 100),))

    def change(time):
        return Observation(("zk-partitions",), 1, {"time": time})

    def operator(time, **event):
        return Observation(("operator",), None, {"time": time, **event}, actions=(StopBroker(BrokerId(0)),))

    assert _take_deferred([waiting], search, Budget(), change(99)) == [waiting]
    assert _take_deferred([waiting], search, Budget(), change(100)) == []
    assert _take_deferred([waiting], search, Budget(), None) == []
    assert _take_deferred([waiting], search, Budget(), operator(50, kind="step", action="stop")) == []
    same_request = operator(50, kind="step", answered=100)
    assert _take_deferred([waiting], search, Budget(), same_request) == []
    assert _take_deferred([waiting], search, Budget(), same_request, faulty=True) == [waiting]
    assert _take_deferred([waiting], search, Budget(), operator(50, kind="heal")) == [waiting]


def test_validation_names_a_topic_removed_that_no_admin_deleted():
    """A RemoveTopicRecord with no DeleteTopics behind it (a controller dropping a migrated topic on its own):
    the model removes a topic only at an admin's request, so no path explains it."""
    obs, plan = recorded()
    without_operator_step(obs, "delete-topics")
    result = validate(obs, plan)
    assert result.failed and result.unexplained is not None
    assert result.unexplained.event["type"] == "REMOVE_TOPIC_RECORD"
    assert "DeleteTopics" not in {type(a).__name__ for a in result.path}


def test_validation_names_a_partition_no_admin_created():
    """A PartitionRecord for a new partition of orders that no CreatePartitions asked for is unexplained."""
    obs, plan = recorded()
    grown = record(obs, "PARTITION_RECORD", topicId=topic_id(obs, "orders"), partitionId=3)
    extra = copy.deepcopy(grown) | {"offset": 119, "batch": 119, "time": grown["time"] + 1000}
    extra["data"]["partitionId"] = 4
    log(obs).insert(log(obs).index(grown) + 1, extra)
    result = validate(obs, plan)
    assert result.failed and result.unexplained is not None
    assert (result.unexplained.key, result.unexplained.value) == (("topics", "partitions"), 4)
    assert result.unexplained.event["offset"] == 119


def test_validation_names_a_reassignment_no_admin_asked_for():
    """A PartitionChangeRecord with adding and removing replicas that no AlterPartitionReassignments asked for (a
    controller moving a partition on its own): no hidden step starts a move, so the first record is unexplained."""
    obs, plan = recorded()
    without_operator_step(obs, "reassign")
    result = validate(obs, plan)
    assert result.failed and result.unexplained is not None
    assert (result.unexplained.key, result.unexplained.value) == (("topics", "reassigning"), 1)
    assert result.unexplained.event["offset"] == 125
    assert "AlterPartitionReassignments" not in {type(a).__name__ for a in result.path}


def test_validation_names_a_completion_no_isr_join_explains():
    """A second completing PartitionChangeRecord of orders-0 (replicas set, none adding or removing): the move is
    done, and no ISR join completes it again, so it is unexplained; the first completion is explained."""
    obs, plan = recorded()
    done = next(r for r in log(obs) if r["offset"] == 127)
    again = copy.deepcopy(done) | {"offset": 128, "batch": 128, "time": done["time"] + 1000}
    log(obs).insert(log(obs).index(done) + 1, again)
    result = validate(obs, plan)
    assert result.failed and result.unexplained is not None
    assert (result.unexplained.key, result.unexplained.value) == (("topics", "reassigned"), 2)
    assert result.unexplained.event["offset"] == 128
    assert "AlterPartition" in {type(a).__name__ for a in result.path}


def test_a_reassignment_without_its_completion_is_an_explained_prefix():
    """With the completion record cut from the 3.6.2 log, the move's start is explained and the model need not
    complete it (no step is forced): a move that never completes is a liveness matter, which the runbook's goal
    names (the 3.6.1 run's stuck step, mapped to its request)."""
    obs, plan = recorded("kafka-3.6.2-reassignment-run.json")
    obs.metadata[3000] = [r for r in log(obs) if r["offset"] != 101]
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    assert [o.key[1] for o in observations(obs, 3) if o.key[0] == "topics"][-1] == "reassigning"
    obs, plan = recorded("kafka-3.6.1-reassignment-stuck-run.json")
    requests = [a for o in observations(obs, 3) for a in o.actions if isinstance(a, OperatorAdminRequest)]
    assert requests[-1] == OperatorAdminRequest("reassign", "orders", (0, 1), (0, 2))


def test_validation_names_a_topic_config_no_admin_set():
    """A topic's ConfigRecord the operator never asked for (its request set no config) is unexplained."""
    obs, plan = recorded()
    for e in obs.operator:
        if e.get("topics") == ["refunds"]:
            e["config"] = {}
    result = validate(obs, plan)
    assert result.unexplained is not None and result.unexplained.event["type"] == "CONFIG_RECORD"


def test_validation_names_a_topic_zookeeper_lost_with_no_removal_in_the_log():
    """payments vanishing from ZooKeeper in dual write while the log holds no RemoveTopicRecord (no admin deleted
    it): the model's dual write deletes a topic's znodes only for a removal in its image, so no path explains it."""
    obs, plan = recorded()
    obs.metadata[3000] = [r for r in log(obs) if r["type"] != "REMOVE_TOPIC_RECORD"]
    without_operator_step(obs, "delete-topics")
    result = validate(obs, plan)
    assert result.unexplained is not None
    assert (result.unexplained.key, result.unexplained.event["path"]) == (("zk-removed",), "/brokers/topics/payments")


def test_validation_names_a_partition_in_zookeeper_that_no_record_created():
    """A partition state znode for orders-4 appearing in ZooKeeper in dual write, with no PartitionRecord behind
    it: the model's dual write creates one only for a partition in its image."""
    obs, plan = recorded()
    grown = obs.zk["/brokers/topics/orders/partitions/3/state"][0]
    znode_written(obs, "/brokers/topics/orders/partitions/4/state", grown, 290, czxid=290)
    result = validate(obs, plan)
    assert result.unexplained is not None
    assert (result.unexplained.key, result.unexplained.value) == (("zk-partitions",), 4)
    assert result.unexplained.event["path"] == "/brokers/topics/orders/partitions/4/state"


def test_validation_names_a_topic_config_written_to_zookeeper_that_no_record_asked_for():
    """orders' config znode taking a key in dual write that no ConfigRecord set: the model's dual write writes a
    config only from its image."""
    obs, plan = recorded()
    config = obs.zk["/config/topics/orders"][-1]
    znode_written(obs, "/config/topics/orders", config, 290, version=2,
                  data='{"version":1,"config":{"retention.ms":"3600000","cleanup.policy":"compact"}}')
    result = validate(obs, plan)
    assert result.unexplained is not None
    assert (result.unexplained.key, result.unexplained.value) == (("zk-configs",), 2)


def test_validation_names_a_mirror_write_that_never_happened():
    """orders' new partition is in the log and ZooKeeper's /migration says it holds the log past it, but ZooKeeper
    never showed its state znode: every path of the model that brings ZooKeeper that far shows it. (The move of
    orders-0 after it is cut too: its completion needs the leader told by the dual write that would show it.)"""
    obs, plan = recorded()
    del obs.zk["/brokers/topics/orders/partitions/3/state"]
    without_the_move(obs)
    result = validate(obs, plan)
    assert result.failed and result.unexplained is None
    assert result.unshown == ("zk-partitions 2 -> 3 (ZooKeeper's /migration holds offset 139, past the "
                              "PARTITION_RECORD of orders at offset 117, and never showed it)",)


def test_validation_holds_no_mirror_to_a_run_that_ended_before_its_dual_write_caught_up():
    """The same run cut off while ZooKeeper's /migration was still below orders' new partition (offset 117): the
    mirror not shown yet is no failure, and the rest is explained."""
    obs, plan = recorded()
    del obs.zk["/brokers/topics/orders/partitions/3/state"]
    without_the_move(obs)
    obs.zk["/migration"] = [e for e in obs.zk["/migration"] if e.get("mzxid", 0) < 259]
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())


def test_validation_holds_kafkas_placement_to_the_models_decision():
    """Kafka placing a new partition on a broker that never registered: the model's CreatePartitions refuses
    it (INVALID_REPLICA_ASSIGNMENT) while Kafka accepted, so the operator's request is what no path explains."""
    obs, plan = recorded()
    record(obs, "PARTITION_RECORD", topicId=topic_id(obs, "refunds"), partitionId=1)["data"]["replicas"] = [7, 0]
    result = validate(obs, plan)
    assert result.unexplained is not None and result.unexplained.is_operator
    assert result.unexplained.actions == (OperatorAdminRequest("create", "refunds", (7, 0)),)


def test_validation_names_a_created_topic_the_log_does_not_hold():
    """The operator was told refunds exists, and the committed log holds none of it: unexplained."""
    obs, plan = recorded()
    refunds = topic_id(obs, "refunds")
    obs.metadata[3000] = [r for r in log(obs) if refunds not in (r["data"].get("topicId"), r["data"].get("name"))]
    result = validate(obs, plan)
    assert result.unexplained is not None
    assert result.unexplained.actions == (OperatorAdminRequest("unrecorded", "refunds"),)


def test_an_admin_request_is_placed_when_it_began():
    """A request noted with when it began (runs made since) is placed there; one noted without, just after the
    runbook's step before it: its records come before its note either way."""
    began = [{"channel": "operator", "kind": "step", "action": "delete-topics", "topics": ["t"], "time": 50,
              "began": 20}]
    assert _steps_when_they_began(began)[0]["time"] == 20
    older = [{"channel": "operator", "kind": "step-begins", "step": "s", "time": 10},
             {"channel": "operator", "kind": "goal", "goal": "g", "time": 12},
             {"channel": "operator", "kind": "admin-retry", "time": 30},
             {"channel": "operator", "kind": "step", "action": "add-partitions", "topic": "t", "time": 40}]
    assert next(e for e in _steps_when_they_began(older) if e.get("action"))["time"] == 10


def test_a_reassignment_is_placed_when_its_tool_ran_not_after_a_heal_during_it():
    """A move waits for its replicas to catch up, and a fault may heal meanwhile: its records come after the tool
    ran (``began``, noted since a real run showed the first one before the heal), not after that heal, and a move
    seen stuck keeps the same time."""
    def timeline(*move: dict) -> list[dict]:
        return [{"channel": "operator", "kind": "goal", "goal": "orders-0 reassigned to [0, 2]", "time": 100},
                {"channel": "operator", "kind": "heal", "fault": "kill-broker", "process": "broker-0", "time": 150},
                *move]
    reassign = {"channel": "operator", "kind": "step", "action": "reassign", "topic": "orders", "partition": 0,
                "replicas": [0, 2], "time": 600}
    placed = [e for e in _steps_when_they_began(timeline(reassign)) if e.get("action")]
    assert [(e["time"], e["answered"]) for e in placed] == [(150, 600)]  # an older recording: after the heal
    placed = [e for e in _steps_when_they_began(timeline(reassign | {"began": 120})) if e.get("action")]
    assert [(e["time"], e["answered"]) for e in placed] == [(120, 600)]
    stuck = {"channel": "operator", "kind": "stuck", "goal": "orders-0 reassigned to [0, 2]", "time": 900,
             "began": 120}
    placed = [e for e in _steps_when_they_began(timeline(stuck)) if e.get("action")]
    assert [(e["action"], e["time"]) for e in placed] == [("reassign", 120)]


def test_a_deletion_seen_stuck_is_the_request_kafka_accepted_when_its_record_is_in_the_log():
    """A deletion whose topics the brokers kept listing (its dual write lost under a stalled ZooKeeper, Kafka 3.9)
    was still sent and accepted: its RemoveTopicRecord is explained by it, placed when it was sent, and the lost
    mirror is what validation names. A stuck deletion the log holds no record of is no request the model takes."""
    stuck = {"channel": "operator", "kind": "stuck", "goal": "topics payments deleted", "time": 900, "began": 120}
    [placed] = _steps_when_they_began([stuck])
    assert (placed["action"], placed["topics"], placed["time"], placed["stuck"]) == (
        "delete-topics", ["payments"], 120, True)
    env = Environment(placed={}, removed=frozenset({"payments"}))
    env.started.add("controller-3000")
    assert env.admin(placed) == (OperatorAdminRequest("delete", "payments"),)
    env.removed = frozenset()
    assert env.admin(placed) is None


def test_recordings_without_topics_keep_admin_steps_unmapped():
    """A recording cut down before topics were compared holds no TopicRecord: its admin steps stay no model
    action, as before (else the model would show partitions its log cannot)."""
    obs, plan = recorded("kafka-finalize-run.json")
    assert admin_records(obs) is None
    assert not [o for o in observations(obs, 3) if o.key[0] == "topics" or any(
        isinstance(a, OperatorAdminRequest) for a in o.actions)]


@pytest.mark.parametrize("name", ["kafka-3.6.2-reassignment-run.json", "kafka-3.6.1-reassignment-stuck-run.json"])
def test_validation_explains_the_topic_changes_of_recordings_without_logs(name):
    """Recordings cut down to what the topic checks read keep no process logs: driver states, leadership and
    ZooKeeper's controllers are hidden, and the migration state, registrations and topic changes explained."""
    obs, plan = recorded(name)
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    moves = {"reassigning", "reassigned"} if "stuck" not in name else {"reassigning"}
    assert {o.key[1] for o in observations(obs, 3) if o.key[0] == "topics"} == {"partitions", "configs", "removed",
                                                                                   *moves}
    assert not [o for o in observations(obs, 3) if o.key[0] in ("driver", "leader", "zk-controller")]


def test_the_checks_still_name_what_validation_does_not_see():
    """Validation shows no reassignment and no partition's state in ZooKeeper: the 3.6.1 run's move that its
    ZooKeeper-mode brokers never applied (KAFKA-16120) is explained, and still named by its check; the 3.4 run
    without logs or registrations is not validated, and its deletion left in ZooKeeper is still named."""
    obs, plan = recorded("kafka-3.6.1-reassignment-stuck-run.json")
    assert validate(obs, plan).ok
    assert zk_broker_partition_changes_bump_leader_epoch(obs)
    obs, plan = recorded("kafka-3.4-deletion-not-mirrored-run.json")
    result = validate(obs, plan)
    assert result.not_validated == "the recording keeps neither process logs nor broker registrations"
    assert zk_equals_image_at_migration_offset(obs)


def test_validation_explains_a_34_runs_topic_changes_past_its_untransacted_migration():
    """Kafka 3.4 migrates in no transaction, its MIGRATION record first (KAFKA-14805): the migration's end is read
    from /migration, and refunds' creation in dual write is explained, the copy before it no observation."""
    obs, plan = recorded("kafka-3.4-dual-write-checked-run.json")
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    facts = [(o.key[1], o.value) for o in observations(obs, 3) if o.key[0] == "topics"]
    assert facts == [("partitions", 1), ("partitions", 2), ("configs", 1)]
    # 3.4.1 mirrored refunds' partitions; the recording left the config znodes' data out, so its config is hidden
    assert [(fact, n) for fact, n, _ in mirrored(obs)] == [("zk-partitions", 1), ("zk-partitions", 2)]


def test_validation_names_a_34_mirror_that_left_out_part_of_a_delta():
    """Kafka 3.4.1 moves no /migration offset in dual write, so a 3.4 run is held to no mirror by the offset; but
    the model's dual write mirrors refunds' two committed partitions in one multi, so ZooKeeper showing only one of
    them is what every explaining path shows and the run never did (a mirror 3.4.1 left out whole, with nothing
    mirrored after it, is the checks' finding only)."""
    obs, plan = recorded("kafka-3.4-dual-write-checked-run.json")
    del obs.zk["/brokers/topics/refunds/partitions/1/state"]
    result = validate(obs, plan)
    assert result.failed and result.unexplained is None
    assert result.unshown == ("zk-partitions 1 -> 2",)


def test_a_commit_of_several_admin_records_shows_each_as_a_change_of_its_own():
    """A quorum of 3 commits the records a follower fetched all at once: two partitions' records committed by one
    fetch are two changes, each matched by the log's observation of its record (a count jumping 0 -> 2 matched
    neither the observation of 1 nor that of 2); other facts change once."""
    before = {("topics", "partitions"): None, ("topics", "configs"): 1, ("driver", 3000): None}
    after = {("topics", "partitions"): 2, ("topics", "configs"): 1, ("driver", 3000): "DUAL_WRITE"}
    assert visible_changes(before, after, frozenset()) == [
        (("topics", "partitions"), None, 1), (("topics", "partitions"), 1, 2), (("driver", 3000), None, "DUAL_WRITE")]


@pytest.mark.slow  # about 30 s: the quorum's hidden fetches multiply the states each window searches
def test_validation_explains_a_three_controller_runs_topic_changes():
    """A real 3.9.2 migration with a quorum of 3 (tests/data/kafka-3.9-three-controllers-topics-run.json says how
    it was made): the admin's records commit only once a follower fetches them, several at once, and orders-0's move
    completes after its dual write, the LeaderAndIsr it sends, a heartbeat that unfences the joining replica, the
    leader's ISR join and a fetch, all hidden (``MOVE_STEPS``). Each of those was an unexplained observation or a
    search past its bound before."""
    obs, plan = recorded("kafka-3.9-three-controllers-topics-run.json")
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())
    facts = [(o.key[1], o.value) for o in observations(obs, 3) if o.key[0] == "topics"]
    assert ("reassigned", 1) in facts and ("partitions", 3) in facts


BATCHED = "kafka-3.9-finalize-batched-record-run.json"


def test_validation_explains_a_record_appended_to_a_batch_begun_before_its_request_was_sent():
    """Kafka stamps each record of a metadata batch with the time the batch began (BatchAccumulator.startNewBatch,
    a timestamp delta of 0 each): in a real 3.9.2 finalize run (tests/data/kafka-3.9-finalize-batched-record-run.json
    says how it was made) the controller's NoOpRecord began a batch 2 ms before the operator sent orders'
    CreatePartitions, and orders-3's PartitionRecord, appended to that batch, showed a time before the request. It is
    placed after the request (and was unexplained there before: no hidden step writes an admin's record)."""
    obs, plan = recorded(BATCHED)
    timeline = observations(obs, 3)
    asked = next(i for i, o in enumerate(timeline) if OperatorAdminRequest("create", "orders", (1, 2)) in o.actions)
    grown = next(i for i, o in enumerate(timeline) if o.key == ("topics", "partitions") and o.value == 3)
    assert timeline[grown].event["time"] < timeline[asked].event["time"] and grown == asked + 1
    result = validate(obs, plan)
    assert result.ok, "\n".join(result.report())


def test_a_record_that_began_its_batch_before_its_request_was_sent_stays_unexplained():
    """Only a record its batch's time may precede is moved: the same record beginning a batch of its own (its time its
    own) before the request was sent is a record no request asked for yet."""
    obs, plan = recorded(BATCHED)
    orders_3 = record(obs, "PARTITION_RECORD", partitionId=3, topicId=topic_id(obs, "orders"))
    obs.metadata[3000] = [r for r in log(obs) if r["offset"] != orders_3["batch"]]
    orders_3["batch"] = orders_3["offset"]
    result = validate(obs, plan)
    assert result.unexplained is not None and result.unexplained.event["offset"] == orders_3["offset"]
