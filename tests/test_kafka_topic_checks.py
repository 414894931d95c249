"""The topic checks on a recorded real run: the migration copies ZooKeeper exactly, dual writes mirror KRaft.

The recorded run is a real Kafka 3.9.2 finalize run (ZooKeeper, three brokers, one controller, no
fault): orders, payments and ledger created in ZooKeeper mode, refunds created and payments deleted
during dual write (tests/data/kafka-3.9-topics-dual-write-run.json says how it was cut down). Each
corrupted variant changes the recording the way a Kafka bug would show in it (KIP-866 §Controller
Migration, §Dual Metadata Writes); the check must name it. Every other recorded run passes too, but
the findings: Kafka 3.4.1 leaving a deleted topic and a new partition out of ZooKeeper, Kafka 3.5.2 and 3.6.1
moving a partition without the leader-epoch bump ZooKeeper-mode brokers need (KIP-866 §ZK Broker RPCs), and Kafka
3.9.2 losing a dual write that a ZooKeeper stall failed, or every dual write after a resent one failed.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from properties.kafka.checks import (
    CHECKS,
    FAILED_LEADER_AND_ISR,
    MIGRATION_COPIES_ZK,
    ZK_BROKER_EPOCH_BUMP,
    Observed,
    TopicImage,
    dual_writes_follow_commits,
    migration_copies_zk_exactly,
    quota_znode_name,
    zk_broker_partition_changes_bump_leader_epoch,
    zk_equals_image_at_migration_offset,
)

DATA = Path(__file__).parent / "data"
RUN = "kafka-3.9-topics-dual-write-run.json"
EQUAL = "ZkEqualsImageAtMigrationOffset"
FOLLOW = "ZkWritesFollowKRaftCommits"


def recorded(name: str = RUN) -> Observed:
    """A recorded real run, as ``properties.kafka.run.load`` gives it (what the topic checks read)."""
    run = json.loads((DATA / name).read_text())
    obs = Observed(version=tuple(run["version"]))
    obs.operator = run.get("operator", [])
    obs.metadata = {int(c): records for c, records in run.get("metadata", {}).items()}
    obs.zk = run.get("zk", {})
    for events in obs.zk.values():  # the older recordings kept no zxid on a znode's observations
        for e in events:
            e.setdefault("zxid", e.get("mzxid", 0))
    return obs


def topic_violations(obs: Observed) -> list[tuple[str, str]]:
    checks = (migration_copies_zk_exactly, zk_equals_image_at_migration_offset, dual_writes_follow_commits)
    return [(v.invariant, v.message) for check in checks for v in check(obs)]


def found_messages(found: list[tuple[str, str]]) -> list[str]:
    return [m for _, m in found]


def log(obs: Observed) -> list[dict]:
    return obs.metadata[3000]


def migrated(obs: Observed, kind: str, topic: str, partition: int | None = None) -> list[dict]:
    """The migration transaction's records of ``kind`` for ``topic`` (and ``partition``)."""
    names = {r["data"]["topicId"]: r["data"]["name"] for r in log(obs) if r["type"] == "TOPIC_RECORD"}
    end = next(r["offset"] for r in log(obs) if r["type"] == "END_TRANSACTION_RECORD" and r["offset"] > 10)
    return [
        r
        for r in log(obs)
        if r["type"] == kind
        and r["offset"] < end
        and topic in (r["data"].get("name"), r["data"].get("resourceName"), names.get(r["data"].get("topicId")))
        and (partition is None or r["data"].get("partitionId") == partition)
    ]


def test_recorded_run_creates_and_deletes_topics_during_dual_write():
    """The recording has what the checks need: a topic created and another deleted in dual write, and
    the migration and the dual writes agree with ZooKeeper (KIP-866 §Controller Migration, §Dual Metadata Writes)."""
    obs = recorded()
    kinds = [r["type"] for r in log(obs)]
    assert "REMOVE_TOPIC_RECORD" in kinds
    # and __consumer_offsets, which the ledger's read-back creates
    assert [r["data"]["name"] for r in log(obs) if r["type"] == "TOPIC_RECORD"] == [
        "ledger", "orders", "payments", "refunds", "__consumer_offsets"
    ]
    assert not obs.zk["/brokers/topics/payments"][-1]["exists"]
    assert topic_violations(obs) == []


FINDING_34 = "kafka-3.4-deletion-not-mirrored-run.json"
FINDING_39_STALL = "kafka-3.9-stalled-zookeeper-dual-write-lost-run.json"
FINDING_39_WEDGED = "kafka-3.9-stalled-zookeeper-dual-write-wedged-run.json"
FINDING_34_PARTITION = "kafka-3.4-new-partition-not-mirrored-run.json"
FINDING_34_QUOTA = "kafka-3.4-quota-migrated-as-users-run.json"
FINDING_35_QUOTA_NAMES = "kafka-3.5-quota-names-run.json"
FINDING_35_ACLS = "kafka-3.5-acl-deletion-drops-acls-run.json"  # the quota findings and KAFKA-16120 too


FINDING_39_FAILED_LEADER_AND_ISR = "kafka-3.9-failed-leader-and-isr-run.json"


def test_kafka_39_leader_and_isr_failed_in_a_zk_broker_is_never_repaired():
    """A finding about Kafka 3.9.2 (KIP-866 §ZK Broker RPCs, KIP-380 §Motivation): the KRaft controller's LeaderAndIsr
    to a ZooKeeper-mode broker whose ZooKeeper session had just expired failed inside it, after it had taken the new
    leader epoch of the partitions before the one whose config read threw; nothing sent them again at a newer epoch
    (a KRaft controller resends on neither the error nor the broker's new ZooKeeper registration), so the broker
    never fetched them again and the reassignment of orders-0, which needed it in the ISR, never completed. The
    check names the request and the partitions; the broker's restart would have repaired them."""
    run = json.loads((DATA / FINDING_39_FAILED_LEADER_AND_ISR).read_text())
    obs = recorded(FINDING_39_FAILED_LEADER_AND_ISR)
    obs.logs = run["logs"]
    assert [e["goal"] for e in obs.operator if e["kind"] == "stuck"] == ["orders-0 reassigned to [0, 2]"]
    assert [v.message for v in CHECKS[FAILED_LEADER_AND_ISR](obs)] == [
        "broker 0 failed controller 3000's LeaderAndIsr (UNKNOWN_SERVER_ERROR, controller-3000/logs/server.log:488); "
        "ledger-0, ledger-1, ledger-2, orders-0, refunds-0 were never sent to it again at a newer leader epoch, it "
        "did not restart, and it is outside their ISR at the end"]
    failed_at = obs.log_events("leader-and-isr-failed")[0]["time"]
    obs.logs["broker-0"].append({"channel": "log", "process": "broker-0", "line": 9999, "time": failed_at + 1000,
                                 "kind": "process-started", "zkbroker": "0"})
    assert CHECKS[FAILED_LEADER_AND_ISR](obs) == []


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("kafka-*-run.json")
                                        if p.name not in (FINDING_34, FINDING_34_PARTITION, FINDING_34_QUOTA,
                                                          FINDING_35_QUOTA_NAMES, FINDING_35_ACLS, FINDING_39_STALL,
                                                          FINDING_39_WEDGED)))
def test_every_recorded_run_passes_the_topic_checks(name):
    """Kafka 3.4 to 4.1, faults and rollbacks included: no other recorded run breaks a topic check."""
    assert topic_violations(recorded(name)) == []


def test_kafka_34_does_not_mirror_a_topic_deletion_in_dual_write():
    """A finding about Kafka 3.4.1 (KIP-866 §Dual Metadata Writes): payments, deleted in KRaft during dual
    write, stays in ZooKeeper; 3.4's KRaftMigrationDriver writes topic creations and partition changes to
    ZooKeeper, not deletions (KAFKA-14840 added them in 3.5.0). A rollback would bring the topic back."""
    obs = recorded(FINDING_34)
    assert "REMOVE_TOPIC_RECORD" in {r["type"] for r in log(obs)}
    assert obs.zk["/brokers/topics/payments"][-1]["exists"]
    found = topic_violations(obs)
    assert [i for i, _ in found] == [EQUAL]
    assert found[0][1].startswith("at the end of dual write, topic payments: ZooKeeper has id ")
    assert "has none" in found[0][1]


def test_kafka_34_does_not_mirror_a_partition_added_in_dual_write():
    """A finding about Kafka 3.4.1 (KIP-866 §Dual Metadata Writes): orders, grown from 3 partitions to 4 in KRaft
    during dual write, keeps 3 in ZooKeeper. 3.4's ZkMigrationClient.updateTopicPartitions writes a changed
    partition with a setData on its state znode, which fails with NONODE for a new one; the driver's fault handler
    drops the write, so neither ZooKeeper nor the ZooKeeper-mode brokers learn of orders-3 (KAFKA-15003 fixed the
    dual write of partition assignments in 3.5.0)."""
    obs = recorded(FINDING_34_PARTITION)
    added = [r for r in log(obs) if r["type"] == "PARTITION_RECORD" and r["data"]["partitionId"] == 3]
    assert len(added) == 1 and "/brokers/topics/orders/partitions/3/state" not in obs.zk
    assert [e["goal"] for e in obs.operator if e["kind"] == "stuck"] == ["topic orders grown to 4 partitions"]
    found = sorted(m for _, m in topic_violations(obs))
    assert [i for i, _ in topic_violations(obs)] == [EQUAL, EQUAL]  # and payments, deleted before, stays too
    assert found[0].startswith("at the end of dual write, partition orders-3: ZooKeeper has none; the image at offset")
    assert found[1].startswith("at the end of dual write, topic payments: ZooKeeper has id ")


def test_kafka_39_loses_a_dual_write_that_a_zookeeper_stall_failed():
    """A finding about Kafka 3.9.2 (KIP-866 §Failure Modes, "ZK Write Failures": a failed write is to hold the log
    back within a lag bound, not to be dropped): ZooKeeper paused past the KRaft controller's session timeout while
    the dual write of orders-3 (a partition added in KRaft) waited on it. The write failed with the expired session;
    KRaftMigrationDriver logged "Will retry", but nothing runs a MetadataChangeEvent again (PollEvent does nothing in
    DUAL_WRITE) and the event had already taken its image as the driver's own, so the next event wrote only its own
    delta and moved /migration past the lost one. Neither ZooKeeper nor the ZooKeeper-mode brokers learn of orders-3
    until a controller failover's full reconciliation."""
    run = json.loads((DATA / FINDING_39_STALL).read_text())
    obs = recorded(FINDING_39_STALL)
    failed = [line for line in run["controller_log"] if "Encountered ZooKeeper error during event MetadataChangeEvent"
              in line]
    assert len(failed) == 1 and "Will retry" in failed[0]
    lost_offset = int(failed[0].split("lastContainedOffset=")[1].split(",")[0])
    added = [r for r in log(obs) if r["type"] == "PARTITION_RECORD" and r["data"]["partitionId"] == 3]
    assert [r["offset"] for r in added] == [lost_offset]
    written = [json.loads(e["data"])["kraft_metadata_offset"] for e in obs.zk["/migration"] if e.get("data")]
    assert written[-1] > lost_offset and "/brokers/topics/orders/partitions/3/state" not in obs.zk
    assert [e["fault"] for e in obs.operator if e["kind"] == "fault"] == ["pause-zookeeper"]
    found = topic_violations(obs)
    assert [i for i, _ in found] == [EQUAL]
    assert found[0][1].startswith("at the end of dual write, partition orders-3: ZooKeeper has none; the image at")


def test_kafka_39_dual_write_stops_for_good_after_a_resent_write_fails():
    """A finding about Kafka 3.9.2 (KIP-866 §Dual Metadata Writes, §Failure Modes): ZooKeeper paused while a dual
    write waited on it; the KRaft controller's client timed the connection out and, reconnected to the same session,
    sent the multi again (KafkaZkClient.retryRequestsUntilConnected). ZooKeeper had applied the first when it
    resumed (/migration at offset 131), so the second failed its /migration check, and the driver kept the version
    it had sent: every later dual write failed with BadVersion, and ZooKeeper stayed at offset 131 while the log
    went on (the deletion of payments and refunds-0's ISR change never reached it)."""
    run = json.loads((DATA / FINDING_39_WEDGED).read_text())
    obs = recorded(FINDING_39_WEDGED)
    assert any("Client session timed out" in line for line in run["controller_log"])
    resent = [line for line in run["controller_log"] if "Conditional update on KRaft Migration ZNode failed" in line]
    assert len(resent) == 1 and "Sent zkVersion = 17" in resent[0] and "kraftMetadataOffset=131" in resent[0]
    failed = [line for line in run["controller_log"] if "Encountered ZooKeeper error during event" in line]
    offsets = [int(line.split("lastContainedOffset=")[1].split(",")[0]) for line in failed]
    assert offsets[0] == 134 and offsets[-1] > 131 + 200 and run["controller_log"][-1].endswith("for /migration")
    last = obs.zk["/migration"][-1]
    assert (last["version"], json.loads(last["data"])["kraft_metadata_offset"]) == (18, 131)
    assert log(obs)[-1]["offset"] > 131 + 100  # the log went on for two minutes
    found = sorted(m for _, m in topic_violations(obs))
    assert [i for i, _ in topic_violations(obs)] == [EQUAL, EQUAL]
    assert found[0].startswith("at the end of dual write, partition refunds-0: ZooKeeper has replicas [0, 1], leader 0,"
                               " ISR [0, 1], leader epoch 0; the image at offset")
    assert found[1].startswith("at the end of dual write, topic payments: ZooKeeper has id ")
    assert all("(/migration says 131)" in m for m in found)


FINDING_35 = "kafka-3.5-reassignment-stuck-run.json"
FINDING_361 = "kafka-3.6.1-reassignment-stuck-run.json"
STUCK_MOVE_35 = (
    "the PARTITION_CHANGE_RECORD at offset 131 adds replica 2 of orders-0 (replicas [1, 0] -> [0, 2, 1]) at leader "
    "epoch 3, which it does not bump; ZooKeeper-mode brokers 0, 1, 2 apply a LeaderAndIsr only at a newer leader epoch"
)


def epoch_violations(obs: Observed) -> list[str]:
    found = zk_broker_partition_changes_bump_leader_epoch(obs)
    assert {v.invariant for v in found} <= {ZK_BROKER_EPOCH_BUMP}
    return [v.message for v in found]


def test_kafka_35_reassignment_in_dual_write_never_completes():
    """A finding about Kafka 3.5.2 (KIP-866 §Dual Metadata Writes, §ZK Broker RPCs): orders-0, moved in dual write,
    gets its new replica set in KRaft and in ZooKeeper, but the change carries no leader (so no leader-epoch bump),
    and a ZooKeeper-mode broker applies a LeaderAndIsr only with a newer leader epoch: the leader never learns of
    the new replica, which never joins the ISR. The leader-epoch check names the change itself, the progress check
    the stuck step; KAFKA-16120 (3.6.2, 3.7.0, 3.8.0) made ZooKeeper-mode brokers take a KRaft controller's
    LeaderAndIsr at the same leader epoch."""
    obs = recorded(FINDING_35)
    orders = next(r["data"]["topicId"] for r in log(obs)
                  if r["type"] == "TOPIC_RECORD" and r["data"]["name"] == "orders")
    moves = [r["data"] for r in log(obs) if r["type"] == "PARTITION_CHANGE_RECORD" and r["data"]["topicId"] == orders
             and r["data"]["partitionId"] == 0]
    assert [(m.get("addingReplicas"), "leader" in m) for m in moves] == [([2], False)]
    assert [e["goal"] for e in obs.operator if e["kind"] == "stuck"] == ["orders-0 reassigned to [0, 2]"]
    assert topic_violations(obs) == []  # ZooKeeper has what KRaft committed: the brokers are what is stuck
    assert epoch_violations(obs) == [STUCK_MOVE_35]


def test_kafka_361_reassignment_in_dual_write_never_completes():
    """The same finding on Kafka 3.6.1, the last release before KAFKA-16120 (KIP-866 §ZK Broker RPCs): the move of
    orders-0 adds replica 1 at leader epoch 2, which no ZooKeeper-mode broker applies, and the runbook is stuck."""
    obs = recorded(FINDING_361)
    assert [e["goal"] for e in obs.operator if e["kind"] == "stuck"] == ["orders-0 reassigned to [0, 1]"]
    assert topic_violations(obs) == []
    assert epoch_violations(obs) == [
        "the PARTITION_CHANGE_RECORD at offset 130 adds replica 1 of orders-0 (replicas [2, 0] -> [0, 1, 2]) at leader "
        "epoch 2, which it does not bump; ZooKeeper-mode brokers 0, 1, 2 apply a LeaderAndIsr only at a newer leader "
        "epoch"
    ]


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("kafka-*-run.json")
                                        if p.name not in (FINDING_35, FINDING_361, FINDING_35_QUOTA_NAMES,
                                                          FINDING_35_ACLS)))
def test_every_other_recorded_run_bumps_the_leader_epoch_for_zk_brokers(name):
    """Kafka 3.4 to 4.1: every other recorded change that ZooKeeper-mode brokers act on moves the leader epoch
    (3.4.1 and 3.9.2 drop brokers from ISRs in dual write, each with a bump; 3.6.2 adds a replica without one,
    which its brokers take)."""
    assert epoch_violations(recorded(name)) == []


def test_kafka_39_isr_shrink_without_a_leader_epoch_bump_is_named():
    """KIP-866 §ZK Broker RPCs: in migration Kafka 3.9's PartitionChangeBuilder bumps the leader epoch on every ISR
    shrink "to maintain compatibility with migrating brokers that are still in ZK mode"; a recorded shrink of
    ledger-2 that keeps its leader sets the leader field only for that bump, and without it the check names it."""
    obs = recorded()
    shrink = next(r for r in log(obs) if r["offset"] == 135)
    assert shrink["data"]["isr"] == [2] and shrink["data"].pop("leader") == 2
    assert epoch_violations(obs) == [
        "the PARTITION_CHANGE_RECORD at offset 135 drops 1 from the ISR of ledger-2 (replicas [2, 0, 1] -> [2, 0, 1]) "
        "at leader epoch 4, which it does not bump; ZooKeeper-mode brokers 0, 1, 2 apply a LeaderAndIsr only at a "
        "newer leader epoch"
    ]


def kraft_registration(offset: int, broker: int) -> dict:
    data = {"brokerId": broker, "isMigratingZkBroker": False, "brokerEpoch": offset, "fenced": True}
    return {"channel": "metadata", "controller": 3000, "offset": offset, "epoch": 1, "batch": 0,
            "type": "REGISTER_BROKER_RECORD", "data": data, "time": 0}


def before_offset(obs: Observed, offset: int, *records: dict) -> None:
    at = next(i for i, r in enumerate(log(obs)) if r["offset"] == offset)
    log(obs)[at:at] = list(records)


def test_a_change_among_kraft_brokers_needs_no_leader_epoch_bump():
    """KIP-866 §Broker Migration: once every replica of orders-0 has registered as a KRaft broker, no ZooKeeper-mode
    broker is told of the change, and the same move needs no bump; while one replica is left in ZooKeeper mode, it
    does."""
    obs = recorded(FINDING_35)
    before_offset(obs, 131, kraft_registration(130, 1))
    assert epoch_violations(obs) == [STUCK_MOVE_35.replace("brokers 0, 1, 2", "brokers 0, 2")]
    before_offset(obs, 131, kraft_registration(130, 0))
    assert epoch_violations(obs) == [STUCK_MOVE_35.replace("brokers 0, 1, 2 apply", "broker 2 applies")]
    before_offset(obs, 131, kraft_registration(130, 2))
    assert epoch_violations(obs) == []


def test_a_change_after_post_migration_needs_no_leader_epoch_bump():
    """KIP-866 §Finalizing the Migration: once POST_MIGRATION is committed the controller "will also disable its
    special handling of ZK RPCs": what it writes after is no ZooKeeper-mode broker's concern."""
    obs = recorded(FINDING_35)
    post = {"channel": "metadata", "controller": 3000, "offset": 130, "epoch": 1, "batch": 0,
            "type": "ZK_MIGRATION_STATE_RECORD", "data": {"zkMigrationState": 3}, "time": 0}
    before_offset(obs, 131, post)
    assert epoch_violations(obs) == []


def test_kafka_362_takes_an_added_replica_at_the_same_leader_epoch():
    """Differs: Kafka 3.6.2 (KAFKA-16120, also 3.7.0 on) moves orders-0 in dual write with the same change as 3.5.2,
    an added replica and no leader-epoch bump, and completes the move: its ZooKeeper-mode brokers apply a KRaft
    controller's LeaderAndIsr at an equal leader epoch. Read as 3.6.1, whose brokers do not, the change is named."""
    obs = recorded("kafka-3.6.2-reassignment-run.json")
    assert [e["goal"] for e in obs.operator if e["kind"] == "reached" and "reassigned" in e["goal"]] == [
        "orders-0 reassigned to [2, 1]"
    ]
    assert epoch_violations(obs) == []
    obs.version = (3, 6, 1)
    assert epoch_violations(obs) == [
        "the PARTITION_CHANGE_RECORD at offset 100 adds replica 1 of orders-0 (replicas [0, 2] -> [2, 1, 0]) at leader "
        "epoch 2, which it does not bump; ZooKeeper-mode brokers 0, 1, 2 apply a LeaderAndIsr only at a newer leader "
        "epoch"
    ]


def test_migration_with_an_isr_copied_wrong_is_named():
    """KIP-866 §Controller Migration: a partition's ISR is copied as ZooKeeper holds it."""
    obs = recorded()
    record = migrated(obs, "PARTITION_RECORD", "orders", 0)[0]
    assert record["data"]["isr"] == [0]
    record["data"]["isr"] = [2]
    found = topic_violations(obs)
    assert [m for i, m in found if i == MIGRATION_COPIES_ZK] == [
        next(m for m in found_messages(found) if m.startswith("partition orders-0: ZooKeeper has replicas [0, 2], "
                                                              "leader 0, ISR [0],") and "ISR [2]" in m)
    ]


def test_migration_with_a_leader_epoch_copied_wrong_is_named():
    """KIP-866 §Controller Migration: the leader epoch (and the partition epoch, the znode's version) are kept."""
    obs = recorded()
    record = migrated(obs, "PARTITION_RECORD", "ledger", 2)[0]
    record["data"]["leaderEpoch"] += 1
    found = topic_violations(obs)
    assert [m for i, m in found if i == MIGRATION_COPIES_ZK] == [
        next(m for m in found_messages(found) if m.startswith("partition ledger-2: ZooKeeper has"))
    ]
    # every later state of ledger-2 in KRaft inherits the wrong epoch, so the dual writes disagree too
    assert all("ledger-2" in m or "ledger/partitions/2" in m for _, m in found)


def test_migration_missing_a_topic_is_named():
    """KIP-866 §Controller Migration: every topic ZooKeeper holds at the claim is in the migration."""
    obs = recorded()
    kinds = ("TOPIC_RECORD", "PARTITION_RECORD", "CONFIG_RECORD")
    gone = {id(r) for kind in kinds for r in migrated(obs, kind, "orders")}
    obs.metadata[3000] = [r for r in log(obs) if id(r) not in gone]
    found = [m for i, m in topic_violations(obs) if i == MIGRATION_COPIES_ZK]
    assert found == [next(m for m in found if m.startswith("topic orders: ZooKeeper has id"))]


def test_migration_copying_a_topic_zookeeper_lacks_is_named():
    """KIP-866 §Controller Migration: nothing but ZooKeeper's topics is copied."""
    obs = recorded()
    extra = copy.deepcopy(migrated(obs, "TOPIC_RECORD", "orders")[0])
    extra["data"] |= {"name": "ghost", "topicId": "AAAAAAAAAAAAAAAAAAAAAQ"}
    log(obs).insert(log(obs).index(migrated(obs, "TOPIC_RECORD", "orders")[0]), extra)
    assert [m for i, m in topic_violations(obs) if i == MIGRATION_COPIES_ZK] == [
        "topic ghost: ZooKeeper has none; the migration (up to offset 88) has id AAAAAAAAAAAAAAAAAAAAAQ "
        f"(ZooKeeper as of the claim, zxid {obs.existing('/controller')[-1]['mzxid']})"
    ]


def test_dual_write_that_does_not_write_a_config_back_is_named():
    """KIP-866 §Dual Metadata Writes: refunds' retention.ms, set in KRaft during dual write, reaches ZooKeeper."""
    obs = recorded()
    config = obs.zk["/config/topics/refunds"]
    obs.zk["/config/topics/refunds"] = [e for e in config if "7200000" not in (e.get("data") or "")]
    found = topic_violations(obs)
    assert [i for i, _ in found] == [EQUAL]
    assert "the config of topic refunds: ZooKeeper has none" in found[0][1]


def test_dual_write_that_does_not_mirror_a_kraft_deletion_is_named():
    """KIP-866 §Dual Metadata Writes: payments, deleted in KRaft during dual write, is deleted in ZooKeeper."""
    obs = recorded()
    for path in [p for p in obs.zk if p.startswith(("/brokers/topics/payments", "/config/topics/payments"))]:
        obs.zk[path] = [e for e in obs.zk[path] if e["exists"]]
    found = topic_violations(obs)
    assert [i for i, _ in found] == [EQUAL]
    assert found[0][1].startswith("at the end of dual write, topic payments: ZooKeeper has id")


def test_dual_write_of_a_state_kraft_never_committed_is_named():
    """KIP-866 §Dual Metadata Writes (write-behind): ZooKeeper gets only what KRaft committed; an ISR written
    wrong in the middle of dual write (and corrected later) is named, though ZooKeeper ends right."""
    obs = recorded()
    claim = obs.existing("/controller")[-1]["mzxid"]
    states = [e for e in obs.zk["/brokers/topics/orders/partitions/1/state"] if e["mzxid"] > claim]
    assert len(states) > 1
    states[0]["data"] = states[0]["data"].replace('"isr":[', '"isr":[9,')
    found = topic_violations(obs)
    assert [i for i, _ in found] == [FOLLOW]
    assert "/brokers/topics/orders/partitions/1/state written in dual write" in found[0][1]


# ---- brokers' dynamic configs and client quotas (KIP-866 §Controller Migration: "all of the metadata") ----------

CONFIGS_RUN = "kafka-3.9-configs-and-quotas-run.json"


def test_the_migration_copies_a_broker_config_and_a_quota_and_dual_write_mirrors_them():
    """Kafka 3.9.2: every broker's message.max.bytes and user alice's producer_byte_rate, set in ZooKeeper mode, are
    in the migration (a ConfigRecord for the default broker, a ClientQuotaRecord), and their changes in dual write
    reach ZooKeeper: the topic checks compare them as entities of their own, and the recorded run passes."""
    obs = recorded(CONFIGS_RUN)
    assert topic_violations(obs) == []
    migrated_quota = next(r for r in log(obs) if r["type"] == "CLIENT_QUOTA_RECORD")
    migrated_quota["data"]["value"] = 1.0  # copied wrong
    [message] = [m for i, m in topic_violations(obs) if i == MIGRATION_COPIES_ZK]
    assert message.startswith(
        "the quota of users/alice: ZooKeeper has {'producer_byte_rate': 1048576.0}; the migration (up to offset")


def test_a_broker_config_the_migration_leaves_out_is_named():
    """KIP-866 §Controller Migration: the default broker's config in ZooKeeper is in the migration."""
    obs = recorded(CONFIGS_RUN)
    first = next(r for r in log(obs) if r["type"] == "CONFIG_RECORD" and r["data"]["resourceType"] == 4)
    log(obs).remove(first)
    assert [m for i, m in topic_violations(obs) if i == MIGRATION_COPIES_ZK] == [
        next(m for _, m in topic_violations(obs) if m.startswith(
            "every broker's dynamic config: ZooKeeper has {'message.max.bytes': '2000000'}; the migration"))]


def test_a_quota_change_dual_write_does_not_mirror_is_named():
    """KIP-866 §Dual Metadata Writes: alice's quota, raised in KRaft during dual write, reaches ZooKeeper."""
    obs = recorded(CONFIGS_RUN)
    path = "/config/users/alice"
    obs.zk[path] = [e for e in obs.zk[path] if "2097152" not in (e.get("data") or "")]
    found = topic_violations(obs)
    assert [i for i, _ in found] == [EQUAL]
    assert "the quota of users/alice: ZooKeeper has {'producer_byte_rate': 1048576.0}; the image at offset" \
        in found[0][1]


def test_kafka_34_migrates_a_user_quota_under_zookeepers_folder_name():
    """Kafka 3.4.1: the migration copies user alice's quota as a ClientQuotaRecord whose entity type is "users"
    (ZooKeeper's folder, ConfigType.User) where KRaft's is "user" (ClientQuotaEntity.USER): KRaft's image holds no
    quota for user alice, and one for an entity type nothing reads. Kafka 3.5.0 rewrote the copy (KAFKA-14840's
    ZkConfigMigrationClient) and names the type right, as the 3.9.2 recording shows."""
    found = [m for i, m in topic_violations(recorded(FINDING_34_QUOTA)) if i == MIGRATION_COPIES_ZK]
    claim = "(ZooKeeper as of the claim, zxid 219)"
    assert found == [
        f"the quota of (entity type 'users') alice: ZooKeeper has none; the migration (up to offset 66) has "
        f"{{'producer_byte_rate': 1048576.0}} {claim}",
        f"the quota of users/alice: ZooKeeper has {{'producer_byte_rate': 1048576.0}}; the migration (up to offset 66)"
        f" has none {claim}",
    ]


def test_a_quota_entity_is_keyed_by_the_znode_name_zookeeper_gives_it():
    """ZooKeeper stores a quota under the entity's name sanitized (Kafka's Sanitizer) and the default entity under
    <default>; KRaft names the default null and any other entity as the operator wrote it. A user named by the empty
    string is not the default (KAFKA-16411), nor is a name left sanitized in KRaft the same user (KAFKA-16222)."""
    assert quota_znode_name(None) == "<default>"
    assert quota_znode_name("alice") == "alice"
    assert quota_znode_name("bob@example.com") == "bob%40example.com"
    assert quota_znode_name("CN=bob, O=x*y") == "CN%3Dbob%2C%20O%3Dx%2Ay"
    assert quota_znode_name("é") == "%C3%A9"
    assert quota_znode_name("bob%40example.com") == "bob%2540example.com"
    assert quota_znode_name("") not in {"<default>", ""}


def test_kafka_35_migrates_default_quotas_as_the_empty_name_and_keeps_a_sanitized_name():
    """A finding about Kafka 3.5.2 (KIP-866 §Controller Migration, §Dual Metadata Writes), Kafka's own KAFKA-16411
    and KAFKA-16222: the migration copies the default user's and the default client id's quotas (ZooKeeper's
    <default>) as quotas of the user and client id named by the empty string, and bob@example.com's (ZooKeeper's
    bob%40example.com) under the sanitized name as if it were the user's own; in dual write the defaults' raises
    never reach ZooKeeper and bob's lands in an unsanitized /config/users/bob@example.com. The same run's reassignment
    is the known KAFKA-16120 (no leader-epoch bump)."""
    obs = recorded(FINDING_35_QUOTA_NAMES)
    found = topic_violations(obs)
    claim = "(ZooKeeper as of the claim, zxid 250)"
    assert [m for i, m in found if i == MIGRATION_COPIES_ZK] == [
        f"the quota of clients/(the empty name): ZooKeeper has none; the migration (up to offset 91) has "
        f"{{'consumer_byte_rate': 2097152.0}} {claim}",
        f"the quota of clients/<default>: ZooKeeper has {{'consumer_byte_rate': 2097152.0}}; the migration (up to "
        f"offset 91) has none {claim}",
        f"the quota of users/(the empty name): ZooKeeper has none; the migration (up to offset 91) has "
        f"{{'producer_byte_rate': 4194304.0}} {claim}",
        f"the quota of users/<default>: ZooKeeper has {{'producer_byte_rate': 4194304.0}}; the migration (up to "
        f"offset 91) has none {claim}",
        f"the quota of users/bob%2540example.com: ZooKeeper has none; the migration (up to offset 91) has "
        f"{{'request_percentage': 25.0}} {claim}",
        f"the quota of users/bob%40example.com: ZooKeeper has {{'request_percentage': 25.0}}; the migration (up to "
        f"offset 91) has none {claim}",
    ]
    at_end = "\n".join(m for i, m in found if i == EQUAL)
    assert "the quota of users/bob@example.com: ZooKeeper has {'request_percentage': 50.0}; the image at offset 120 " \
        "has none" in at_end
    assert "the quota of users/<default>: ZooKeeper has {'producer_byte_rate': 4194304.0}; the image at offset 120 " \
        "has {'producer_byte_rate': 8388608.0}" in at_end
    assert "/config/users/bob@example.com written in dual write (mzxid 312)" in "\n".join(
        m for i, m in found if i == FOLLOW)
    assert [v.split(",")[0] for v in epoch_violations(obs)] == [
        "the PARTITION_CHANGE_RECORD at offset 121 adds replica 0 of orders-0 (replicas [2"]


def test_kafka_362_copies_and_mirrors_default_and_sanitized_quotas_exactly():
    """Kafka 3.6.2, the first release here with KAFKA-16222 and KAFKA-16411: the same runbook's quotas (the default
    user and client id, bob@example.com) are copied and mirrored exactly, and the checks hold; a default quota copied
    as the empty name again is named."""
    obs = recorded("kafka-3.6.2-quota-names-run.json")
    assert topic_violations(obs) == []
    default_user = next(r for r in log(obs) if r["type"] == "CLIENT_QUOTA_RECORD"
                        and r["data"]["entity"] == [{"entityType": "user", "entityName": None}])
    default_user["data"]["entity"][0]["entityName"] = ""
    assert any(m.startswith("the quota of users/(the empty name): ZooKeeper has none; the migration")
               for i, m in topic_violations(obs) if i == MIGRATION_COPIES_ZK)


# ---- ACLs (KIP-866 §Controller Migration: "all of the metadata"; ZkAclMigrationClient) ---------------------------

ACLS_RUN = "kafka-3.9-acls-run.json"
ALICE_READ, ALICE_WRITE, BOB_READ = "User:alice Allow Read from *", "User:alice Allow Write from *", \
    "User:bob Allow Read from *"


def test_the_migration_copies_acls_and_dual_write_mirrors_a_deletion_and_a_creation():
    """Kafka 3.9.2: topic audit's three ACLs, made in ZooKeeper mode, are AccessControlEntryRecords of the migration;
    bob's, deleted in dual write, and alice's on group audit-readers, created then, reach /kafka-acl; the checks
    compare them resource by resource, and the recorded run passes."""
    obs = recorded(ACLS_RUN)
    assert topic_violations(obs) == []
    image = TopicImage.of(log(obs))
    assert image.acls == {"Topic/audit": frozenset({ALICE_READ, ALICE_WRITE}),
                          "Group/audit-readers": frozenset({ALICE_READ})}
    removed = next(r for r in log(obs) if r["type"] == "REMOVE_ACCESS_CONTROL_ENTRY_RECORD")
    assert image.acl_ids.get(removed["data"]["id"]) is None


def test_an_acl_the_migration_leaves_out_is_named():
    obs = recorded(ACLS_RUN)
    bob = next(r for r in log(obs)
               if r["type"] == "ACCESS_CONTROL_ENTRY_RECORD" and r["data"]["principal"] == "User:bob")
    log(obs).remove(bob)
    [message] = [m for i, m in topic_violations(obs) if i == MIGRATION_COPIES_ZK]
    assert message.startswith(f"the ACLs of Topic/audit: ZooKeeper has [{ALICE_READ}, {ALICE_WRITE}, {BOB_READ}]; "
                              f"the migration (up to offset")
    assert message.split("; ")[1].startswith(f"the migration (up to offset 96) has [{ALICE_READ}, {ALICE_WRITE}]")


def test_an_acl_deletion_dual_write_writes_short_is_named():
    """The Kafka bug fixed by apache/kafka#15327 (before it, deleting one of a resource's ACLs in dual write could
    write only one of those left): /kafka-acl/Topic/audit rewritten with alice's Read alone is named at the end of
    dual write. (ZkWritesFollowKRaftCommits holds: the log held that state once, while the migration's records
    added the ACLs one by one.)"""
    obs = recorded(ACLS_RUN)
    path = "/kafka-acl/Topic/audit"
    last = obs.zk[path][-1]
    body = json.loads(last["data"])
    body["acls"] = [a for a in body["acls"] if a["operation"] == "Read"]
    last["data"] = json.dumps(body)
    found = topic_violations(obs)
    assert [i for i, _ in found] == [EQUAL]
    assert f"the ACLs of Topic/audit: ZooKeeper has [{ALICE_READ}]; the image at offset" in found[0][1]


def test_kafka_35_dual_write_of_an_acl_deletion_drops_the_resources_other_acls():
    """A finding about Kafka 3.5.2 (KIP-866 §Dual Metadata Writes): bob's Read on topic audit, deleted in dual write,
    is mirrored by rewriting /kafka-acl/Topic/audit with alice's Write alone, so alice's Read, which KRaft keeps, is
    gone from ZooKeeper, where the ZooKeeper-mode brokers' AclAuthorizer authorizes from. Kafka's handleAclsDelta
    (fixed by apache/kafka#15327) collected a resource's remaining ACLs through a set it emptied at the first one."""
    found = [(i, m) for i, m in topic_violations(recorded(FINDING_35_ACLS)) if "acl" in m.lower()]
    assert found == [
        (EQUAL, f"at the end of dual write, the ACLs of Topic/audit: ZooKeeper has [{ALICE_WRITE}]; the image at "
                f"offset 127 has [{ALICE_READ}, {ALICE_WRITE}] (nor any later committed state) (ZooKeeper as of "
                f"zxid 431)"),
        (FOLLOW, '/kafka-acl/Topic/audit written in dual write (mzxid 427) with {"version":1,"acls":[{"principal":'
                 '"User:alice","permissionType":"Allow","operation":"Write","host":"*"}]}, which the log had not '
                 'committed by then'),
    ]
    # the migration itself copied all three
    assert not [m for i, m in topic_violations(recorded(FINDING_35_ACLS)) if i == MIGRATION_COPIES_ZK and "ACL" in m]
