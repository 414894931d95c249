"""The real-Kafka checks on hand-written observations: each is quiet on a clean migration and fires on its seeded bug.

The clean observations are those of a real Kafka 3.9.2 run (ZooKeeper, three brokers, one
controller, the migration to dual write), cut down to what each check reads; each seeded bug
changes one observation the way the bug it stands for would (KIP sections in the docstrings).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from model import PROPERTIES
from properties.kafka.checks import (
    ACKNOWLEDGED_WRITES,
    BROKER_GAUGES,
    BROKERS_SERVE_IMAGE,
    BROKERS_SERVE_ZK,
    CHECKS,
    DUAL_WRITES_RESUME,
    FAILED_LEADER_AND_ISR,
    GAUGES_FOLLOW_THE_LOG,
    MIGRATION_COPIES_ZK,
    NO_METADATA_ERRORS,
    NOT_OBSERVABLE,
    ONE_ACTIVE_CONTROLLER,
    RUNBOOK_PROGRESS,
    ZK_BROKER_EPOCH_BUMP,
    Observed,
    run_checks,
)
from properties.kafka.observe import parse_log_text

DATA = Path(__file__).parent / "data"
MIGRATION, PRE_MIGRATION, POST_MIGRATION = 1, 2, 3  # Kafka >= 3.5's ZkMigrationState bytes


def zk(path, data, czxid, mzxid, version, time, owner=0):
    return {
        "channel": "zk",
        "path": path,
        "exists": True,
        "data": data,
        "czxid": czxid,
        "mzxid": mzxid,
        "version": version,
        "owner": owner,
        "time": time,
        "seen": time / 1000,
        "zxid": mzxid,
    }


def gone(path, time, zxid):
    return {"channel": "zk", "path": path, "exists": False, "time": time, "seen": time / 1000, "zxid": zxid}


def rec(offset, epoch, type_, time, **data):
    return {
        "channel": "metadata",
        "controller": 3000,
        "offset": offset,
        "epoch": epoch,
        "type": type_,
        "data": data,
        "time": time,
    }


def zk_broker_registers(offset, time, broker):
    """A migrating ZK broker's RegisterBrokerRecord: its epoch its offset, its IBP 3.9 (level 21) as its range."""
    mv = {"name": "metadata.version", "minSupportedVersion": 21, "maxSupportedVersion": 21}
    return rec(offset, 1, "REGISTER_BROKER_RECORD", time, brokerId=broker, brokerEpoch=offset,
               isMigratingZkBroker=True, features=[mv], incarnationId=f"incarnation-{broker}")


def line(process, kind, number, time, **fields):
    return {"channel": "log", "process": process, "line": number, "time": time, "kind": kind, **fields}


def jmx(process, time, final=False, **metrics):
    sample = {"channel": "jmx", "process": process, "time": time, "up": True, "metrics": metrics}
    return sample | {"final": True} if final else sample


def unreachable(process, time):
    return {"channel": "jmx", "process": process, "time": time, "up": False}


def served(broker, time, round_, brokers=(), topics=None):
    """What a broker answered a MetadataRequest (BrokerMetadata.java): ``topics`` name -> (id, partitions), each
    partition (partition, leader, leader epoch, replicas, ISR)."""
    return {"channel": "broker-metadata", "time": time, "round": round_, "broker": broker, "brokers": list(brokers),
            "topics": [{"name": name, "id": topic_id, "error": 0, "partitions": [
                {"partition": p, "leader": leader, "leader_epoch": epoch, "replicas": list(replicas), "isr": list(isr),
                 "error": 0} for p, leader, epoch, replicas, isr in partitions]}
                for name, (topic_id, partitions) in (topics or {}).items()]}


def controller_znode(broker, kraft_epoch=-1):
    return json.dumps({"version": 2, "brokerid": broker, "timestamp": "0", "kraftControllerEpoch": kraft_epoch})


def migration_znode(offset, epoch, controller_epoch=1):
    return json.dumps(
        {
            "version": 0,
            "kraft_metadata_offset": offset,
            "kraft_controller_id": 3000,
            "kraft_metadata_epoch": epoch,
            "kraft_controller_epoch": controller_epoch,
        }
    )


def txn(zxid, session, time, *ops, kind="multi", failed=False):
    """One transaction of ZooKeeper's log, as ZkTxnLog.java prints it."""
    return {"channel": "zk-txn", "zxid": zxid, "session": session, "time": time, "type": kind, "failed": failed,
            "ops": list(ops)}


def op(kind, path=None, data=None, version=None, ephemeral=None, error=None):
    fields = {"path": path, "version": version, "ephemeral": ephemeral, "data": data, "error": error}
    return {"op": kind, **{k: v for k, v in fields.items() if v is not None}}


ZK_CONTROLLER_SESSION, KRAFT_SESSION = 0x100007, 0x100011
STALE_ZK_CONTROLLER_WRITE = 4  # obs.zk_txns' index of broker 0's write after the claim, which failed


def clean() -> Observed:
    """A migration to dual write, as Kafka 3.9.2 showed it (zxids, offsets and lines from a real run)."""
    obs = Observed(version=(3, 9, 2))
    obs.zk = {
        "/controller_epoch": [
            zk("/controller_epoch", "1", 25, 25, 0, 1000),
            zk("/controller_epoch", "2", 25, 70, 1, 5000),
            zk("/controller_epoch", "3", 25, 194, 2, 9000),
        ],
        "/controller": [
            zk("/controller", controller_znode(0), 70, 70, 0, 5000, owner=7),
            zk("/controller", controller_znode(3000, 1), 194, 194, 0, 9000),
        ],
        "/brokers/ids/0": [
            zk("/brokers/ids/0", "{}", 56, 56, 0, 900, owner=7),
            zk("/brokers/ids/0", "{}", 134, 134, 0, 6000, owner=9),
        ],
        "/brokers/ids/1": [zk("/brokers/ids/1", "{}", 62, 62, 0, 950, owner=8)],
        "/brokers/topics/orders": [zk("/brokers/topics/orders", '{"partitions":{},"topic_id":"x"}', 80, 80, 0, 2000)],
        "/migration": [
            zk("/migration", migration_znode(-1, -1), 96, 96, 0, 3000),
            zk("/migration", migration_znode(75, 1), 96, 197, 1, 9100),
            zk("/migration", migration_znode(76, 1), 96, 198, 2, 9200),
        ],
    }
    obs.metadata = {
        3000: [
            rec(0, 1, "CONTROL:LEADER_CHANGE", 2000),
            rec(1, 1, "BEGIN_TRANSACTION_RECORD", 2001, name="Bootstrap records"),
            rec(2, 1, "FEATURE_LEVEL_RECORD", 2001, name="metadata.version", featureLevel=21),
            rec(3, 1, "ZK_MIGRATION_STATE_RECORD", 2001, zkMigrationState=PRE_MIGRATION),
            rec(4, 1, "END_TRANSACTION_RECORD", 2001),
            zk_broker_registers(10, 6100, broker=0),
            zk_broker_registers(20, 7000, broker=1),
            rec(70, 1, "BEGIN_TRANSACTION_RECORD", 9050, name="ZK Migration"),
            rec(71, 1, "TOPIC_RECORD", 9050, name="orders", topicId="x"),
            rec(74, 1, "ZK_MIGRATION_STATE_RECORD", 9060, zkMigrationState=MIGRATION),
            rec(75, 1, "END_TRANSACTION_RECORD", 9060),
            rec(76, 1, "NO_OP_RECORD", 9150),
        ]
    }
    ctl = "controller-3000"
    obs.logs = {
        ctl: [
            line(ctl, "raft-leader", 10, 1990, node="3000", epoch="1"),
            line(ctl, "driver-transition", 20, 2100, node="3000", old="UNINITIALIZED", new="INACTIVE"),
            line(ctl, "driver-transition", 21, 2200, node="3000", old="INACTIVE", new="WAIT_FOR_CONTROLLER_QUORUM"),
            line(
                ctl,
                "driver-transition",
                22,
                2300,
                node="3000",
                old="WAIT_FOR_CONTROLLER_QUORUM",
                new="WAIT_FOR_BROKERS",
            ),
            line(ctl, "driver-transition", 30, 8990, node="3000", old="WAIT_FOR_BROKERS", new="BECOME_CONTROLLER"),
            line(ctl, "driver-transition", 31, 9010, node="3000", old="BECOME_CONTROLLER", new="ZK_MIGRATION"),
            line(ctl, "driver-transition", 32, 9070, node="3000", old="ZK_MIGRATION", new="SYNC_KRAFT_TO_ZK"),
            line(ctl, "driver-zk-writes", 33, 9080, node="3000", what="reconciling with KRaft state"),
            line(
                ctl,
                "driver-transition",
                34,
                9090,
                node="3000",
                old="SYNC_KRAFT_TO_ZK",
                new="KRAFT_CONTROLLER_TO_BROKER_COMM",
            ),
            line(
                ctl, "driver-transition", 35, 9095, node="3000", old="KRAFT_CONTROLLER_TO_BROKER_COMM", new="DUAL_WRITE"
            ),
            line(ctl, "driver-zk-writes", 36, 9200, node="3000", what="handling KRaft delta"),
        ],
        "broker-0": [
            line("broker-0", "zk-broker-registered", 5, 900, broker="0", epoch="56"),
            line("broker-0", "zk-controller-elected", 6, 1000, node="0", epoch="1", version="1"),
            line("broker-0", "zk-broker-registered", 50, 6000, broker="0", epoch="134"),
        ],
        "broker-1": [
            line("broker-1", "zk-broker-registered", 5, 950, broker="1", epoch="62"),
            line("broker-1", "zk-controller-elected", 9, 5000, node="1", epoch="2", version="2"),
        ],
    }
    obs.operator = [
        {"channel": "operator", "kind": "goal", "goal": "dual-write", "time": 8000},
        {"channel": "operator", "kind": "reached", "goal": "dual-write", "time": 9400},
        {"channel": "operator", "kind": "ledger", "written": 3, "unknown": 0, "read_complete": True, "time": 9500},
    ]
    obs.acknowledged = [
        {"seq": 0, "partition": 0, "offset": 0, "time": 2100},
        {"seq": 1, "partition": 1, "offset": 0, "time": 2140},
        {"seq": 2, "error": "_MSG_TIMED_OUT", "time": 9000},
    ]
    obs.ledger = [{"seq": 0, "partition": 0, "offset": 0}, {"seq": 1, "partition": 1, "offset": 0}]
    # the gauges as Kafka 3.9.2 showed them: -1 before the first image, a ZK broker's constant 4,
    # the controller's state following its log; the brokers' counts are the log's (two fenced, migrating)
    ctl_gauges = {"ActiveControllerCount": 1, "MetadataErrorCount": 0, "ActiveBrokerCount": 0, "FencedBrokerCount": 2}
    obs.jmx = [
        jmx("broker-0", 900, ZkMigrationState=4, ActiveControllerCount=1),
        jmx("controller-3000", 1995, ZkMigrationState=-1, MetadataErrorCount=0),
        jmx("controller-3000", 2500, ZkMigrationState=PRE_MIGRATION, **ctl_gauges, **{"high-watermark": 5}),
        jmx("broker-0", 9050, ZkMigrationState=4, ActiveControllerCount=0),
        jmx("controller-3000", 9100, ZkMigrationState=MIGRATION, **ctl_gauges, **{"high-watermark": 76}),
        unreachable("controller-3000", 9200),
        jmx("controller-3000", 9300, ZkMigrationState=-1, MetadataErrorCount=0, **{"high-watermark": -1}),
        jmx("controller-3000", 9400, ZkMigrationState=MIGRATION, **ctl_gauges, **{"high-watermark": 77}),
        jmx("broker-0", 9600, True, ZkMigrationState=4, ActiveControllerCount=0),
        jmx(
            "controller-3000", 9600, True, ZkMigrationState=MIGRATION, MigratingZkBrokerCount=2, **ctl_gauges,
            **{"high-watermark": 77}
        ),
    ]
    # ZooKeeper's log of the same story: broker 0's election and write, the KRaft claim, broker 0's write fenced by
    # the claim's /controller_epoch, the dual write's multi (its last op sets /migration) and the config change's
    # notification, which Kafka writes outside the multi
    obs.zk_txns = [
        txn(70, ZK_CONTROLLER_SESSION, 5000, op("create", "/controller", controller_znode(0), ephemeral=True),
            op("setData", "/controller_epoch", "2", version=1)),
        txn(80, ZK_CONTROLLER_SESSION, 5100, op("check", "/controller_epoch", version=1),
            op("create", "/brokers/topics/orders", '{"partitions":{},"topic_id":"x"}', ephemeral=False)),
        txn(96, KRAFT_SESSION, 3000, op("create", "/migration", migration_znode(-1, -1), ephemeral=False)),
        txn(194, KRAFT_SESSION, 9000, op("setData", "/controller_epoch", "3", version=2), op("delete", "/controller"),
            op("create", "/controller", controller_znode(3000, 1), ephemeral=False)),
        txn(195, ZK_CONTROLLER_SESSION, 9010, op("error", error=-103), op("error", error=-2), failed=True),
        txn(197, KRAFT_SESSION, 9100, op("setData", "/migration", migration_znode(75, 1), version=1), kind="setData"),
        txn(198, KRAFT_SESSION, 9200, op("check", "/controller_epoch", version=2),
            op("setData", "/migration", migration_znode(76, 1), version=2),
            op("setData", "/config/topics/orders", '{"version":1,"config":{}}', version=1)),
        txn(199, KRAFT_SESSION, 9210, op("create", "/config/changes/config_change_0000000000",
                                         '{"version":2,"entity_path":"topics/orders"}', ephemeral=False),
            kind="create"),
    ]
    # at rest, each ZK broker serves the image: orders (no partitions yet), and no live broker (both fenced)
    obs.broker_metadata = [served(b, 9600, 0, topics={"orders": ("x", [])}) for b in (0, 1)]
    obs.operator.append({"channel": "operator", "kind": "end", "outcome": "completed", "time": 9700})
    return obs


def _log(obs, process):
    return obs.logs[process]


# Each seeded bug: the check it must trip, and how it changes the clean observations.
def _epoch_goes_back(obs):
    obs.zk["/controller_epoch"][2] = zk("/controller_epoch", "1", 25, 194, 2, 9000)


def _controller_without_epoch_bump(obs):
    obs.zk["/controller_epoch"][2]["mzxid"] = 193  # the claim's multi left /controller_epoch alone


def _election_same_epoch(obs):
    _log(obs, "broker-1")[1]["epoch"] = "1"


def _broker_czxid_goes_back(obs):
    obs.zk["/brokers/ids/0"][1] = zk("/brokers/ids/0", "{}", 40, 40, 0, 6000, owner=9)


def _unlogged_registration(obs):
    obs.zk["/brokers/ids/1"][0]["czxid"] = 63


def _second_kraft_leader(obs):
    _log(obs, "controller-3000").append(line("controller-3000", "raft-leader", 99, 9999, node="3001", epoch="1"))
    obs.logs["controller-3000"][-1]["process"] = "controller-3001"


def _log_epoch_goes_back(obs):
    obs.metadata[3000][-1]["epoch"] = 0


def _committed_record_changes(obs):
    changed = copy.deepcopy(obs.metadata[3000])
    changed[5]["type"] = "NO_OP_RECORD"
    obs.dumps = [changed]


def _epoch_not_offset(obs):
    obs.metadata[3000][5]["data"]["brokerEpoch"] = 9


def _retry_renews_epoch(obs):
    """Broker 0's registration retried by the same incarnation (its answer lost) gets a new epoch."""
    retried = zk_broker_registers(21, 7100, broker=0)
    obs.metadata[3000].insert(6, retried)


def _mixed_ibp(obs):
    obs.metadata[3000][6]["data"]["features"][0]["minSupportedVersion"] = 20


def _migration_state_back(obs):
    obs.metadata[3000].append(rec(77, 1, "ZK_MIGRATION_STATE_RECORD", 9300, zkMigrationState=PRE_MIGRATION))


def _mv_changes_in_migration(obs):
    obs.metadata[3000].append(rec(77, 1, "FEATURE_LEVEL_RECORD", 9300, name="metadata.version", featureLevel=22))


def _open_transaction_not_aborted(obs):
    obs.metadata[3000][10:] = [rec(75, 2, "TOPIC_RECORD", 9400, name="late", topicId="y")]


def _migration_without_topics(obs):
    del obs.metadata[3000][8]


def _invalid_driver_move(obs):
    _log(obs, "controller-3000")[4]["old"] = "WAIT_FOR_CONTROLLER_QUORUM"
    _log(obs, "controller-3000")[4]["new"] = "ZK_MIGRATION"


def _dual_write_too_early(obs):
    _log(obs, "controller-3000").insert(
        5, line("controller-3000", "driver-zk-writes", 30, 9000, node="3000", what="handling KRaft delta")
    )


def _migration_names_unwritten_offset(obs):
    obs.zk["/migration"][2] = zk("/migration", migration_znode(73, 2), 96, 198, 2, 9200)


def _migration_epoch_goes_back(obs):
    obs.zk["/migration"].append(zk("/migration", migration_znode(76, 1, controller_epoch=0), 96, 199, 3, 9300))


def _migration_offset_goes_back(obs):
    # a stale MetadataChangeEvent run under a newer claim (KAFKA-16667): ZooKeeper back to an older image
    obs.zk["/migration"].append(zk("/migration", migration_znode(75, 1, controller_epoch=2), 96, 199, 3, 9300))


def _older_kraft_claim(obs):
    obs.zk["/controller"].append(zk("/controller", controller_znode(3000, 0), 200, 200, 0, 9500))


def _zk_write_after_finalize(obs):
    obs.metadata[3000].append(rec(77, 1, "ZK_MIGRATION_STATE_RECORD", 9150, zkMigrationState=POST_MIGRATION))


def _claim_before_broker_registered(obs):
    obs.metadata[3000][6]["time"] = 9500


def _controller_registered_not_ready(obs):
    # the controller's RegisterControllerRecord (offset 5 in a real 3.9.2 run) says it lacks the flag
    obs.metadata[3000].insert(5, rec(5, 1, "REGISTER_CONTROLLER_RECORD", 2002, controllerId=3000,
                                     incarnationId="fpl_V1etSrO9Kdz_WlultQ", zkMigrationReady=False))


def _kraft_broker_takes_live_id(obs):
    obs.metadata[3000] += [
        rec(
            77, 1, "BROKER_REGISTRATION_CHANGE_RECORD", 9500, brokerId=1, brokerEpoch=20, fenced=-1
        ),  # ZK broker 1 unfenced
        rec(78, 1, "REGISTER_BROKER_RECORD", 9600, brokerId=1, brokerEpoch=78, isMigratingZkBroker=False, features=[]),
    ]


def _never_dual_write(obs):
    obs.logs["controller-3000"] = obs.logs["controller-3000"][:5]
    obs.operator[0]["time"] = 0


def _unfencing_aborted(obs, end="ABORT_TRANSACTION_RECORD"):
    """Broker 1, registered with KRaft at epoch 20, is answered that it is unfenced and moves to RUNNING, but its one
    unfencing was inside a metadata transaction that a failover aborted (Kafka 3.9.2's, recorded)."""
    obs.metadata[3000][7:7] = [
        rec(60, 1, "BEGIN_TRANSACTION_RECORD", 8000, name="ZK Migration"),
        rec(61, 1, "BROKER_REGISTRATION_CHANGE_RECORD", 8001, brokerId=1, brokerEpoch=20, fenced=-1),
        rec(62, 2, end, 8500, **({"reason": "Controller failover"} if end == "ABORT_TRANSACTION_RECORD" else {})),
    ]
    obs.logs["broker-1"] += [line("broker-1", "kraft-broker-registered", 20, 7000, broker="1", zk="true", epoch="20"),
                             line("broker-1", "kraft-broker-running", 21, 8010, broker="1")]


def _zk_broker_left_fenced(obs):
    # broker 1 registered with KRaft at 7000 and answered at rest 33 s later, fenced still: no heartbeat unfenced it
    obs.broker_metadata[1]["time"] = 40_000


def _kraft_broker_never_running(obs):
    obs.operator.append(
        {
            "channel": "operator",
            "kind": "step",
            "action": "start",
            "role": "kraft-broker",
            "node": 2,
            "process": "broker-2",
            "time": 9500,
        }
    )


def _czxid_newer_than_mzxid(obs):
    obs.zk["/brokers/topics/orders"][0]["czxid"] = 81


def _stuck(obs):
    obs.operator.append({"channel": "operator", "kind": "stuck", "goal": "broker-2 started", "time": 9900})


def _rollback_loses_a_topic(obs):
    obs.operator.append({"channel": "operator", "kind": "step", "action": "rollback", "time": 9700})
    obs.zk["/brokers/topics/orders"].append(gone("/brokers/topics/orders", 9800, 300))


def _migration_copies_a_wrong_topic_id(obs):
    obs.metadata[3000][8]["data"]["topicId"] = "y"  # KIP-866 §Controller Migration: ZooKeeper's topic id is kept


def _kraft_deletion_not_mirrored(obs):
    # KIP-866 §Dual Metadata Writes: KRaft deletes orders at offset 76, /migration moves there, the znode stays
    obs.metadata[3000][-1:] = [rec(76, 1, "REMOVE_TOPIC_RECORD", 9150, topicId="x"), rec(77, 1, "NO_OP_RECORD", 9300)]


def _replica_removed_without_epoch_bump(obs):
    # KIP-866 §ZK Broker RPCs: orders-0, migrated on ZK brokers 0 and 1, loses replica 1 in dual write by a
    # PARTITION_CHANGE_RECORD with no leader, so at the same leader epoch, which ZK broker 0 (the leader) ignores
    obs.metadata[3000].insert(9, rec(72, 1, "PARTITION_RECORD", 9050, topicId="x", partitionId=0, replicas=[0, 1],
                                     isr=[0, 1], leader=0, leaderEpoch=4, partitionEpoch=6))
    obs.metadata[3000].append(rec(77, 1, "PARTITION_CHANGE_RECORD", 9300, topicId="x", partitionId=0, replicas=[0],
                                  isr=[0]))


def _reassignment_completes_outside_the_isr(obs):
    # KIP-866 §ZK Broker RPCs: orders-0 moves from [0, 1] to [1, 2]; the record that ends the move leaves the
    # new replica 2 outside the ISR, a replica that never caught up
    obs.metadata[3000].insert(9, rec(72, 1, "PARTITION_RECORD", 9050, topicId="x", partitionId=0, replicas=[0, 1],
                                     isr=[0, 1], leader=0, leaderEpoch=4, partitionEpoch=6))
    obs.metadata[3000] += [
        rec(77, 1, "PARTITION_CHANGE_RECORD", 9300, topicId="x", partitionId=0, replicas=[0, 1, 2],
            addingReplicas=[2], removingReplicas=[0]),
        rec(78, 1, "PARTITION_CHANGE_RECORD", 9400, topicId="x", partitionId=0, replicas=[1, 2], isr=[1], leader=1,
            addingReplicas=[], removingReplicas=[]),
    ]


def _metadata_version_downgraded_losing_metadata(obs):
    # KIP-584: metadata.version 21 (3.9-IV0) down to 13 (3.6-IV1), across 3.6-IV2, 3.7-IV0 and 3.7-IV2, which
    # changed metadata, with no operator forcing it
    obs.metadata[3000].append(rec(77, 1, "FEATURE_LEVEL_RECORD", 9300, name="metadata.version", featureLevel=13))


def _zk_broker_serves_a_stale_topic(obs):
    # KIP-866 §ZK Broker RPCs: broker 1 never got the UpdateMetadata for orders' re-creation: it serves the old id
    obs.broker_metadata[1]["topics"][0]["id"] = "old"


def _kraft_broker_serves_a_deleted_topic(obs):
    # KIP-500 §Broker Metadata Management: a KRaft broker (2) registered, then orders was deleted; the broker still
    # serves it
    obs.metadata[3000] += [
        rec(77, 1, "REGISTER_BROKER_RECORD", 9300, brokerId=2, brokerEpoch=77, incarnationId="incarnation-2"),
        rec(78, 1, "REMOVE_TOPIC_RECORD", 9310, topicId="x"),
    ]
    obs.broker_metadata = [served(2, 12000, 1, topics={"orders": ("x", [])})]  # 2.7 s after the deletion


def _broker_serves_a_topic_zookeeper_lost_after_rollback(obs):
    # KIP-866 §Rollback to ZK: rolled back, broker 0 controls again from ZooKeeper, which has orders only; broker 1
    # still serves payments, which the KRaft side made and ZooKeeper never got
    _rolled_back(obs)
    obs.broker_metadata[1]["topics"].append({"name": "payments", "id": "p", "error": 0, "partitions": []})


def _rolled_back(obs):
    """clean() rolled back: /controller deleted by the operator, then won by broker 0 again; each broker serves
    ZooKeeper's state."""
    obs.zk["/controller"] += [
        {**zk("/controller", "", 194, 194, 0, 9800), "exists": False, "zxid": 200},
        zk("/controller", controller_znode(0), 201, 201, 0, 9900, owner=7),
    ]
    obs.zk["/controller_epoch"].append(zk("/controller_epoch", "4", 25, 201, 3, 9900))
    obs.broker_metadata = [served(b, 12000, 1, brokers=(0, 1), topics={"orders": ("x", [])}) for b in (0, 1)]


def _failed_multi_applies(obs):
    """A multi that failed (broker 0's write after the claim) whose write the watches see applied."""
    failed = obs.zk_txns[STALE_ZK_CONTROLLER_WRITE]
    obs.zk["/brokers/topics/orders"].append(zk("/brokers/topics/orders", '{"partitions":{},"topic_id":"y"}', 80,
                                               failed["zxid"], 1, failed["time"]))


def _dual_write_wedged(obs, after_heal_s=130, session=KRAFT_SESSION, epoch_version=None):
    """A ZooKeeper stall heals, and the claiming controller's writes go on failing on /migration's version (its driver
    holds a version ZooKeeper no longer has): each a multi whose check of /controller_epoch at ``epoch_version``
    passes (none: not written) and whose write of /migration fails."""
    obs.operator[-1:-1] = [{"channel": "operator", "kind": "fault", "fault": "pause-zookeeper", "time": 9300},
                           {"channel": "operator", "kind": "heal", "fault": "pause-zookeeper", "time": 9400}]
    checked = () if epoch_version is None else (op("check", "/controller_epoch", version=epoch_version),)
    for i in range(3):
        at = 9400 + after_heal_s * 1000 + 500 * i
        obs.zk_txns.append(txn(300 + i, session, at, *checked, op("error", error=-103), kind="error", failed=True))


def _stale_zk_controller_write_applies(obs):
    """KIP-866 §Controller Leadership: the claim bumps /controller_epoch so that the ZooKeeper controller's writes,
    each conditional on its own epoch's version, fail; here broker 0's write after the claim applies."""
    state = '{"controller_epoch":2,"leader":0,"version":1,"leader_epoch":1,"isr":[0,1]}'
    obs.zk_txns[STALE_ZK_CONTROLLER_WRITE].update(failed=False, ops=[
        op("check", "/controller_epoch", version=1),
        op("setData", "/brokers/topics/orders/partitions/0/state", state, version=2),
    ])


def _failed_leader_and_isr_never_repaired(obs):
    # KIP-866 §ZK Broker RPCs: orders-0 on ZK brokers 0 and 1, broker 1 out of the ISR; the KRaft controller's
    # LeaderAndIsr to broker 1 fails inside it (UNKNOWN_SERVER_ERROR) and nothing moves orders-0's leader epoch
    obs.metadata[3000].insert(9, rec(72, 1, "PARTITION_RECORD", 9050, topicId="x", partitionId=0, replicas=[0, 1],
                                     isr=[0], leader=0, leaderEpoch=4, partitionEpoch=6))
    obs.logs["controller-3000"].append(leader_and_isr_failed(1, 9250, ("x", 0)))


def leader_and_isr_failed(broker, time, *partitions, error="UNKNOWN_SERVER_ERROR"):
    """A KRaft controller's log line: broker ``broker`` answered its LeaderAndIsr with ``error`` for
    ``partitions`` ((topic id, partition) each), as Kafka 3.9 logs the response."""
    topics = ", ".join(f"LeaderAndIsrTopicError(topicId={t}, partitionErrors=[LeaderAndIsrPartitionError(topicName='', "
                       f"partitionIndex={p}, errorCode=-1)])" for t, p in partitions)
    response = f"LeaderAndIsrResponseData(errorCode=-1, partitionErrors=[], topics=[{topics}])"
    return line("controller-3000", "leader-and-isr-failed", 600, time, node="3000", error=error, response=response,
                broker=str(broker))


def _feature_outside_a_broker(obs):
    obs.metadata[3000].append(rec(77, 1, "FEATURE_LEVEL_RECORD", 9300, name="metadata.version", featureLevel=22))
    obs.logs["controller-3000"].clear()  # (the migration's own check of metadata.version aside)


def _acknowledged_write_lost(obs):
    del obs.ledger[1]  # acknowledged at ledger-1 offset 0, gone after a failover


def _version_back(obs):
    obs.zk["/migration"][2]["version"] = 0


def _gauge_shows_an_uncommitted_state(obs):
    obs.jmx[4]["metrics"]["ZkMigrationState"] = POST_MIGRATION  # before its log has POST_MIGRATION


def _two_active_controllers_at_rest(obs):
    obs.jmx[-2]["metrics"]["ActiveControllerCount"] = 1  # the ZK broker still leads after the KRaft claim


def _gauge_counts_a_broker_the_log_lacks(obs):
    obs.jmx[-1]["metrics"]["MigratingZkBrokerCount"] = 3


def _metadata_record_fails_to_apply(obs):
    obs.jmx[4]["metrics"]["MetadataErrorCount"] = 1


def _high_watermark_goes_back(obs):
    obs.jmx[4]["metrics"]["high-watermark"] = 4  # within the controller's first incarnation


SEEDED = {
    GAUGES_FOLLOW_THE_LOG: _gauge_shows_an_uncommitted_state,
    ONE_ACTIVE_CONTROLLER: _two_active_controllers_at_rest,
    BROKER_GAUGES: _gauge_counts_a_broker_the_log_lacks,
    NO_METADATA_ERRORS: _metadata_record_fails_to_apply,
    "HighWatermarkNeverDecreases": _high_watermark_goes_back,
    "ControllerEpochNeverDecreases": _epoch_goes_back,
    "ZkControllerEpochsIncreaseAcrossHandOver": _epoch_goes_back,
    "EveryElectionBumpsControllerEpoch": _controller_without_epoch_bump,
    "AtMostOneControllerPerEpoch": _election_same_epoch,
    "BrokerEpochGrowsWithEachRegistration": _broker_czxid_goes_back,
    "BrokerEpochIsRegistrationCzxid": _unlogged_registration,
    "AtMostOneKRaftLeaderPerEpoch": _second_kraft_leader,
    "KRaftEpochNeverDecreases": _log_epoch_goes_back,
    "CommittedRecordsNeverChange": _committed_record_changes,
    "BrokerEpochIsRegistrationOffset": _epoch_not_offset,
    "OneBrokerEpochPerIncarnation": _retry_renews_epoch,
    "ZkBrokersAdmittedAtMetadataVersion": _mixed_ibp,
    "MigrationStateOnlyMovesForward": _migration_state_back,
    "MetadataVersionFixedDuringMigration": _mv_changes_in_migration,
    "FailoverAbortsMigrationTransaction": _open_transaction_not_aborted,
    "InitialMigrationAllOrNothing": _migration_without_topics,
    "DriverTakesOnlyTableTransitions": _invalid_driver_move,
    "DualWritesOnlyInDualWriteStates": _dual_write_too_early,
    "ZkWritesFollowKRaftCommits": _migration_names_unwritten_offset,
    "OnlyCurrentKRaftLeaderWritesApply": _migration_epoch_goes_back,
    "MigrationOffsetNeverGoesBack": _migration_offset_goes_back,
    "KRaftEpochInZkOnlyIncreases": _older_kraft_claim,
    "NoZkWriteAfterPostMigration": _zk_write_after_finalize,
    "MigrationStartsOnlyWithEveryKnownZkBroker": _claim_before_broker_registered,
    "MigrationWaitsForEveryVoterRegisteredReady": _controller_registered_not_ready,
    "NoKRaftBrokerTakesALiveZkBrokersId": _kraft_broker_takes_live_id,
    "MigrationReachesDualWriteWithoutFaults": _never_dual_write,
    "LiveFencedBrokerEventuallyUnfenced": _kraft_broker_never_running,
    "BrokerOnlineOnlyOnceUnfencingCommitted": _unfencing_aborted,
    "MigratingZkBrokerEventuallyUnfenced": _zk_broker_left_fenced,
    "ZxidStrictlyIncreases": _czxid_newer_than_mzxid,
    "CzxidFixedForNodeLife": _version_back,
    RUNBOOK_PROGRESS: _stuck,
    ACKNOWLEDGED_WRITES: _acknowledged_write_lost,
    "AdmittedBrokersSupportFinalizedFeatures": _feature_outside_a_broker,
    "RollbackLosesNothingCommitted": _rollback_loses_a_topic,
    MIGRATION_COPIES_ZK: _migration_copies_a_wrong_topic_id,
    "ZkEqualsImageAtMigrationOffset": _kraft_deletion_not_mirrored,
    ZK_BROKER_EPOCH_BUMP: _replica_removed_without_epoch_bump,
    FAILED_LEADER_AND_ISR: _failed_leader_and_isr_never_repaired,
    "OneZkWriterAfterClaim": _stale_zk_controller_write_applies,
    "MultiIsAllOrNothing": _failed_multi_applies,
    DUAL_WRITES_RESUME: _dual_write_wedged,
    "ReassignmentCompletesWithTargetInIsr": _reassignment_completes_outside_the_isr,
    "MetadataVersionGoesDownOnlyWhenForced": _metadata_version_downgraded_losing_metadata,
    "ZkBrokersConvergeToCommittedImage": _zk_broker_serves_a_stale_topic,
    BROKERS_SERVE_IMAGE: _kraft_broker_serves_a_deleted_topic,
    BROKERS_SERVE_ZK: _broker_serves_a_topic_zookeeper_lost_after_rollback,
}


def test_kafka_checks_clean_migration_passes():
    """A migration to dual write as Kafka 3.9.2 carried it out breaks no check (KIP-866 §Migration Overview)."""
    assert run_checks(clean()) == []


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_kafka_check_catches_its_seeded_bug(name):
    """Every check fires on the observation its bug would leave, and names the invariant it evaluates."""
    obs = clean()
    SEEDED[name](obs)
    fired = {v.invariant for v in CHECKS[name](obs)}
    assert fired == {name}


def test_kafka_checks_cover_the_model_registry():
    """Every model property is either checked on real runs or listed with the reason it cannot be."""
    own = {RUNBOOK_PROGRESS, ACKNOWLEDGED_WRITES, GAUGES_FOLLOW_THE_LOG, ONE_ACTIVE_CONTROLLER, BROKER_GAUGES,
           NO_METADATA_ERRORS, MIGRATION_COPIES_ZK, ZK_BROKER_EPOCH_BUMP, FAILED_LEADER_AND_ISR, DUAL_WRITES_RESUME,
           BROKERS_SERVE_IMAGE, BROKERS_SERVE_ZK}
    names = {p.name for p in PROPERTIES} | own
    assert set(CHECKS) | set(NOT_OBSERVABLE) == names
    assert not set(CHECKS) & set(NOT_OBSERVABLE)
    assert set(SEEDED) == set(CHECKS)


@pytest.mark.parametrize("repair", ["newer epoch", "restart", "rejoined", "deleted", "refusal", "zk controller"])
def test_a_failed_leader_and_isr_is_repaired_by(repair):
    """What ends the failed LeaderAndIsr's harm: a newer leader epoch of the partition after it (the broker acts on
    it), the broker's restart, the broker back in the ISR, the topic deleted; and what was no such failure: an error
    the broker decided before changing anything (a stale epoch), or a ZooKeeper controller's request (KIP-380's bounce
    resends it). A newer epoch before the failure repairs nothing."""
    obs = clean()
    _failed_leader_and_isr_never_repaired(obs)
    check = CHECKS[FAILED_LEADER_AND_ISR]
    assert [v.message for v in check(obs)] == [
        "broker 1 failed controller 3000's LeaderAndIsr (UNKNOWN_SERVER_ERROR, controller-3000/logs/server.log:600); "
        "orders-0 was never sent to it again at a newer leader epoch, it did not restart, and it is outside its ISR "
        "at the end"]
    bump_before = rec(73, 1, "PARTITION_CHANGE_RECORD", 9100, topicId="x", partitionId=0, leader=0)
    obs.metadata[3000].insert(10, bump_before)
    assert len(check(obs)) == 1
    if repair == "newer epoch":
        obs.metadata[3000].append(rec(77, 1, "PARTITION_CHANGE_RECORD", 9300, topicId="x", partitionId=0, leader=0))
    elif repair == "restart":
        obs.logs["broker-1"] = [line("broker-1", "process-started", 900, 9400, zkbroker="1")]
    elif repair == "rejoined":
        obs.metadata[3000].append(rec(77, 1, "PARTITION_CHANGE_RECORD", 9300, topicId="x", partitionId=0, isr=[0, 1]))
    elif repair == "deleted":
        obs.metadata[3000].append(rec(77, 1, "REMOVE_TOPIC_RECORD", 9300, topicId="x"))
    elif repair == "refusal":
        obs.logs["controller-3000"][-1] = leader_and_isr_failed(1, 9250, ("x", 0), error="STALE_BROKER_EPOCH")
    else:
        obs.logs["broker-0"] = [{**obs.logs["controller-3000"].pop(), "process": "broker-0", "node": "0"}]
    assert check(obs) == []


def test_gauges_are_judged_within_one_incarnation_and_at_rest_only():
    """A restarted controller's high watermark and state start over (-1 until it has loaded): no
    violation across the restart. A run that did not complete has no samples at rest to judge."""
    obs = clean()
    assert CHECKS["HighWatermarkNeverDecreases"](obs) == []  # 76 -> (restart) -1 -> 77
    obs.jmx[-2]["metrics"]["ActiveControllerCount"] = 1
    obs.operator[-1]["outcome"] = "stuck: dual-write"
    assert CHECKS[ONE_ACTIVE_CONTROLLER](obs) == []
    assert CHECKS[BROKER_GAUGES](obs) == []


def test_broker_gauges_are_judged_against_a_dump_as_old_as_the_sample():
    """The final dumps of the controllers' logs are taken one after another before the last samples (3.9.2,
    dual-write with three controllers: a broker a healed kill let register again was unfenced between two dumps, and
    the earlier-dumped controllers' final gauges counted it). A controller whose dump lacks a record another
    controller's holds is judged by its last sample before that record: no violation; a wrong count there is one."""
    obs = clean()
    registration = next(r for r in obs.metadata[3000] if r["type"] == "REGISTER_BROKER_RECORD")
    newer = copy.deepcopy(obs.metadata[3000])
    last = newer[-1]
    newer.append(last | {"controller": 3001, "offset": last["offset"] + 1, "time": 9550,
                         "type": "BROKER_REGISTRATION_CHANGE_RECORD",
                         "data": {"brokerId": registration["data"]["brokerId"],
                                  "brokerEpoch": registration["data"]["brokerEpoch"], "fenced": -1}})
    obs.metadata[3001] = newer
    final = obs.jmx[-1]
    final["metrics"] |= {"ActiveBrokerCount": 1, "FencedBrokerCount": 1}  # it applied the unfencing
    assert CHECKS[BROKER_GAUGES](obs) == []
    obs.jmx[-3]["metrics"]["ActiveBrokerCount"] = 1  # the sample at 9400, before the record its dump lacks
    assert [v.message for v in CHECKS[BROKER_GAUGES](obs)] == [
        "at rest controller-3000 reported ActiveBrokerCount 1; its log's registrations give 0"]


def test_the_gauge_may_not_go_back_to_an_earlier_state():
    obs = clean()
    obs.jmx.append(jmx("controller-3000", 9500, ZkMigrationState=PRE_MIGRATION))  # same incarnation as 9400
    assert {v.invariant for v in CHECKS[GAUGES_FOLLOW_THE_LOG](obs)} == {GAUGES_FOLLOW_THE_LOG}


def test_kafka_checks_unobserved_versions_are_no_violation():
    """A watch that skipped /controller_epoch versions leaves the claim unjudged, not failed (observation is
    partial)."""
    obs = clean()
    epochs = obs.zk["/controller_epoch"]
    obs.zk["/controller_epoch"] = [epochs[0], epochs[2]]  # version 1, the ZK controller's election, never seen
    assert CHECKS["EveryElectionBumpsControllerEpoch"](obs) == []


def test_kafka_checks_registration_after_cleanup_records_keeps_the_batch_offset():
    """A re-registration whose records start with one cleaning up the unclean earlier incarnation carries the
    offset of that first record as its epoch, as Kafka 4.1.1 wrote it (offset 82, epoch 81): not a violation."""
    obs = clean()
    obs.metadata[3000][5:6] = [
        rec(9, 1, "PARTITION_CHANGE_RECORD", 6100, partitionId=2),
        rec(
            10,
            1,
            "REGISTER_BROKER_RECORD",
            6100,
            batch=9,
            brokerId=0,
            brokerEpoch=9,
            isMigratingZkBroker=True,
            features=[],
        ),
    ]
    assert CHECKS["BrokerEpochIsRegistrationOffset"](obs) == []


def test_kafka_checks_registration_behind_a_leader_change_is_one_offset_late_only_before_3_6():
    """Before 3.6.0 (KAFKA-15213) a new active controller took its last committed offset for its write offset, not
    counting the LeaderChange control record its epoch begins with: a registration it handled before its first
    append carries the control record's offset as its epoch, one less than its own (a 3.5.2 run: offset 58, epoch
    57). Allowed on 3.5.2; from 3.6.0 the claim starts after the control record, and the same log is a violation."""
    obs = clean()
    obs.metadata[3000][5:6] = [
        rec(9, 2, "CONTROL:LEADER_CHANGE", 6100),
        rec(10, 2, "REGISTER_BROKER_RECORD", 6100, brokerId=0, brokerEpoch=9, isMigratingZkBroker=True, features=[]),
    ]
    obs.version = (3, 5, 2)
    assert CHECKS["BrokerEpochIsRegistrationOffset"](obs) == []
    for version in ((3, 6, 0), (3, 9, 2)):
        obs.version = version
        found = CHECKS["BrokerEpochIsRegistrationOffset"](obs)
        assert [v.message for v in found] == [
            "RegisterBrokerRecord at offset 10 gives broker 0 epoch 9, with CONTROL:LEADER_CHANGE between"]
    obs.version = (3, 5, 2)
    obs.metadata[3000][5] = rec(9, 2, "TOPIC_RECORD", 6100, name="other")  # anything else between is not allowed
    assert len(CHECKS["BrokerEpochIsRegistrationOffset"](obs)) == 1


def test_kafka_checks_a_migration_without_progress_says_where_its_drivers_stood():
    """MigrationReachesDualWriteWithoutFaults names each driver that did not end a silent standby, where it ended
    and why it said it waited: on 3.5.2 the leader's driver waited for a controller's ApiVersions its Raft client
    never learnt again (the lines as Kafka 3.5.2 logs them, parsed by the log channel); a leader whose driver
    logged nothing is named too (KAFKA-16563)."""
    obs = clean()
    _never_dual_write(obs)
    ctl = "controller-3000"
    text = "\n".join(
        f"[2026-11-29 07:32:{second},452] INFO [KRaftMigrationDriver id=3000] Still waiting for all controller nodes "
        "ready to begin the migration. due to: Missing apiVersion from nodes: [3001] "
        "(org.apache.kafka.metadata.migration.KRaftMigrationDriver)" for second in (22, 23, 24))
    waits = parse_log_text(text, ctl)
    assert [e["kind"] for e in waits] == ["driver-waiting"] * 3
    obs.logs[ctl] = obs.logs[ctl][:3] + waits  # the leader's driver went no further than the controllers' check
    obs.logs["controller-3001"] = [line("controller-3001", "driver-transition", 4, 2000, node="3001",
                                        old="UNINITIALIZED", new="INACTIVE")]  # a silent standby: left out
    [found] = CHECKS["MigrationReachesDualWriteWithoutFaults"](obs)
    assert found.message.endswith(
        ": the driver of controller 3000 (the last Raft leader) ended in WAIT_FOR_CONTROLLER_QUORUM, logging \"Still "
        "waiting for all controller nodes ready to begin the migration. due to: Missing apiVersion from nodes: [3001]\""
        " 3 times (the last at controller-3000/logs/server.log:3)")
    assert found.evidence[-1] == waits[-1]
    obs.logs[ctl] = obs.logs[ctl][:1]  # the leader's driver logged no transition and no wait
    [found] = CHECKS["MigrationReachesDualWriteWithoutFaults"](obs)
    assert found.message.endswith(": the driver of controller 3000 (the last Raft leader) logged no transition")


def test_a_recorded_3_5_migration_that_never_starts_names_the_missing_api_versions():
    """Kafka 3.5.2 (the guide's plan): the active controller killed for 4 s as the brokers roll; the controller
    elected meanwhile never connects to it again once it is back, and its driver waits in WAIT_FOR_CONTROLLER_QUORUM
    for that controller's ApiVersions to the end. The progress check says so, with the line to read."""
    obs = _recorded_log("kafka-3.5-migration-waits-for-apiversions-run.json")
    [found] = CHECKS["MigrationReachesDualWriteWithoutFaults"](obs)
    assert found.message == (
        "no driver reached DUAL_WRITE within 120 s of the last fault healing: the driver of controller 3002 (the last"
        " Raft leader) ended in WAIT_FOR_CONTROLLER_QUORUM, logging \"Still waiting for all controller nodes ready to"
        " begin the migration. due to: Missing apiVersion from nodes: [3001]\" 122 times (the last at"
        " controller-3002/logs/server.log:555)")
    assert not any(e["kind"] == "driver-transition" and e["new"] == "DUAL_WRITE" for e in obs.logs["controller-3002"])


def test_kafka_checks_amended_registration_keeps_its_epoch():
    """A registration retried by the same incarnation, amended as Kafka 3.9 amends it (the record again, later,
    with the epoch the incarnation has: ClusterControlManager's "Amending registration"), breaks no check."""
    obs = clean()
    amended = zk_broker_registers(21, 7100, broker=0)
    amended["data"]["brokerEpoch"] = 10
    obs.metadata[3000].insert(6, amended)
    assert run_checks(obs) == []


def test_kafka_checks_a_new_incarnation_with_an_older_epoch_is_caught():
    """The KRaft half of BrokerEpochGrowsWithEachRegistration: a new incarnation of broker 0 registered with an
    epoch below its last one (the amendment above is exempt, a new incarnation is not)."""
    obs = clean()
    bounced = zk_broker_registers(21, 7100, broker=0)
    bounced["data"] |= {"brokerEpoch": 5, "incarnationId": "incarnation-0-restarted"}
    obs.metadata[3000].insert(6, bounced)
    assert "BrokerEpochGrowsWithEachRegistration" in {v.invariant for v in run_checks(obs)}


def test_kafka_checks_aborted_transaction_is_not_replayed():
    """Records of a transaction a new leader aborted do not count (KIP-866 §Initial Data Migration: the
    migration restarts)."""
    obs = clean()
    obs.metadata[3000][10:] = [rec(75, 2, "ABORT_TRANSACTION_RECORD", 9400), rec(76, 2, "NO_OP_RECORD", 9401)]
    violations = run_checks(obs)
    assert [v.invariant for v in violations if v.invariant == "FailoverAbortsMigrationTransaction"] == []
    # the MIGRATION record was in the aborted transaction: the log never counted the migration
    assert CHECKS["InitialMigrationAllOrNothing"](obs) == []


def test_kafka_checks_driver_table_follows_the_release():
    """Kafka 3.4's driver went from ZK_MIGRATION straight to KRAFT_CONTROLLER_TO_BROKER_COMM (3.5 added
    SYNC_KRAFT_TO_ZK between them): allowed on 3.4, a violation of the model's table on 3.9."""

    def skipping(version):
        obs = clean()
        obs.version = version
        log = obs.logs["controller-3000"]
        del log[6:9]  # ZK_MIGRATION -> SYNC_KRAFT_TO_ZK, its writes, SYNC -> KRAFT_CONTROLLER_TO_BROKER_COMM
        log.insert(
            6,
            line(
                "controller-3000",
                "driver-transition",
                32,
                9070,
                node="3000",
                old="ZK_MIGRATION",
                new="KRAFT_CONTROLLER_TO_BROKER_COMM",
            ),
        )
        return CHECKS["DriverTakesOnlyTableTransitions"](obs)

    assert skipping((3, 4, 1)) == []
    assert [v.invariant for v in skipping((3, 9, 2))] == ["DriverTakesOnlyTableTransitions"]


def test_a_write_acknowledged_without_an_offset_is_looked_for_in_its_partition():
    """A duplicate the broker recognised is acknowledged without an offset: found anywhere in its
    partition it survived; missing from it, it was lost."""
    obs = clean()
    obs.acknowledged[1]["offset"] = None
    assert CHECKS[ACKNOWLEDGED_WRITES](obs) == []
    obs.ledger[1]["partition"] = 2
    assert [v.invariant for v in CHECKS[ACKNOWLEDGED_WRITES](obs)] == [ACKNOWLEDGED_WRITES]


def test_kafka_checks_unread_ledger_judges_nothing():
    """A ledger that could not be read back whole (the run ended stuck) is no evidence of loss."""
    obs = clean()
    next(e for e in obs.operator if e["kind"] == "ledger")["read_complete"] = False
    del obs.ledger[1]
    assert CHECKS[ACKNOWLEDGED_WRITES](obs) == []


def test_kafka_checks_zk_broker_fenced_before_its_kraft_successor_registers():
    """The ZK broker's KRaft registration fenced at its controlled shutdown, then the KRaft broker takes the id
    (Kafka 3.9.2, three controllers, ZooKeeper down when the ZK broker stopped, so its ephemeral lingered):
    not a violation, whatever ZooKeeper still shows."""
    obs = clean()
    obs.metadata[3000] += [
        rec(77, 1, "BROKER_REGISTRATION_CHANGE_RECORD", 9500, brokerId=1, brokerEpoch=20, inControlledShutdown=1),
        rec(78, 1, "BROKER_REGISTRATION_CHANGE_RECORD", 9550, brokerId=1, brokerEpoch=20, fenced=1),
        rec(79, 1, "REGISTER_BROKER_RECORD", 9600, brokerId=1, brokerEpoch=79, isMigratingZkBroker=False, features=[]),
    ]
    assert CHECKS["NoKRaftBrokerTakesALiveZkBrokersId"](obs) == []


def _recorded_34() -> Observed:
    """A real Kafka 3.4.1 migration to dual write, as ``properties.kafka.run.load`` gives it (cut down)."""
    from pathlib import Path

    run = json.loads((Path(__file__).parent / "data" / "kafka-3.4-dual-write-checked-run.json").read_text())
    obs = Observed(version=tuple(run["version"]))
    obs.operator, obs.logs, obs.zk = run["operator"], run["logs"], run["zk"]
    obs.metadata = {int(c): records for c, records in run["metadata"].items()}
    return obs


def test_kafka_34_migration_record_comes_before_the_migrated_topics():
    """Kafka 3.4 writes its one ZkMigrationStateRecord (1, MIGRATION as 3.5+ reads it) when the migration begins,
    in no transaction, then the migrated topics (KAFKA-14805: "a single ZkMigrationStateRecord(PRE_MIGRATION) at
    the beginning of the migration"). Read as the migration's end, a real 3.4 run broke MigrationStateOnlyMovesForward
    (unset -> MIGRATION) and InitialMigrationAllOrNothing (MIGRATION before its topics): both were kraftcheck's."""
    obs = _recorded_34()
    records = obs.metadata[3000]
    state = next(r for r in records if r["type"] == "ZK_MIGRATION_STATE_RECORD")
    assert state["offset"] < min(r["offset"] for r in records if r["type"] == "TOPIC_RECORD")
    assert run_checks(obs) == []
    # the checks still bite on 3.4: a topic missing from the migrated records, a state that moves back
    lost = copy.deepcopy(obs)
    lost.metadata[3000] = [r for r in records if not (r["type"] == "TOPIC_RECORD" and r["data"]["name"] == "orders")]
    assert [v.invariant for v in run_checks(lost)] == ["InitialMigrationAllOrNothing"]
    back = copy.deepcopy(obs)
    back.metadata[3000].append(state | {"offset": records[-1]["offset"] + 1, "data": {"zkMigrationState": 0}})
    assert "MigrationStateOnlyMovesForward" in [v.invariant for v in run_checks(back)]


def test_kafka_gauge_shows_none_before_the_first_migration_state_commits():
    """A real 3.9.2 run with three controllers: the first leader reported ZkMigrationState 0 (NONE) before the
    PRE_MIGRATION it had just written (offset 3) committed. An image starts at NONE and a new controller
    publishes its bootstrap records' image first, so a gauge may show a NONE the log never wrote, before the
    log's first state only (KIP-866 §Migration Overview)."""
    from pathlib import Path

    from properties.kafka.checks import zk_migration_state_gauge_follows_the_log

    run = json.loads((Path(__file__).parent / "data" / "kafka-3-controllers-gauge-none-run.json").read_text())
    obs = Observed(version=tuple(run["version"]))
    obs.jmx, obs.operator = run["jmx"], run["operator"]
    obs.metadata = {int(c): records for c, records in run["metadata"].items()}
    leader = [e for e in obs.jmx if e["process"] == "controller-3002" and e.get("metrics")]
    assert [e["metrics"]["ZkMigrationState"] for e in leader][:3] == [-1, 0, PRE_MIGRATION]
    assert zk_migration_state_gauge_follows_the_log(obs) == []
    # a NONE after the log's PRE_MIGRATION was shown is still a gauge going back
    back = copy.deepcopy(obs)
    at = back.jmx.index(next(e for e in back.jmx if e.get("metrics", {}).get("ZkMigrationState") == PRE_MIGRATION))
    back.jmx.insert(at + 1, back.jmx[at] | {"metrics": {"ZkMigrationState": 0}, "time": back.jmx[at]["time"] + 1})
    assert [v.invariant for v in zk_migration_state_gauge_follows_the_log(back)] == [GAUGES_FOLLOW_THE_LOG]


def test_one_zk_writer_after_claim_names_the_write():
    """The seeded bug's message names the transaction, its session and the claim it broke; the stale write that
    failed, as Kafka's does, and the notification written outside the fenced multi are not writes of metadata."""
    obs = clean()
    _stale_zk_controller_write_applies(obs)
    assert [v.message for v in CHECKS["OneZkWriterAfterClaim"](obs)] == [
        "zxid 0xc3, session 0x100007: setData /brokers/topics/orders/partitions/0/state while controller 3000's claim "
        "at Raft epoch 1 holds /controller, in a transaction that neither moves nor checks /migration"]


def test_one_zk_writer_after_claim_wants_the_claimants_stamp_on_migration():
    """A write conditional on /migration that leaves it stamped by another controller (a deposed KRaft leader that
    read /migration before the claimant wrote it) is a second writer (KIP-866 §Migration State ZNode)."""
    obs = clean()
    deposed = json.loads(migration_znode(77, 1, controller_epoch=0)) | {"kraft_controller_id": 3001}
    obs.zk_txns.append(txn(200, 0x100012, 9300, op("setData", "/migration", json.dumps(deposed), version=3),
                           op("delete", "/brokers/topics/orders/partitions/0/state")))
    assert [v.message for v in CHECKS["OneZkWriterAfterClaim"](obs)] == [
        "zxid 0xc8, session 0x100012: delete /brokers/topics/orders/partitions/0/state while controller 3000's claim "
        "at Raft epoch 1 holds /controller, leaving /migration stamped by controller 3001 at Raft epoch 0"]


@pytest.mark.parametrize("ends", ["deleted", "owner's session closed", "another session closed"])
def test_one_zk_writer_after_claim_holds_until_the_claim_goes(ends):
    """KIP-866 §Rollback to ZK: the operator deletes /controller and a ZooKeeper-mode broker is elected, whose
    writes are the only ones then. A persistent claim outlives the session that wrote it."""
    obs = clean()
    if ends == "deleted":
        obs.zk_txns.append(txn(300, 0x100020, 9800, op("delete", "/controller"), kind="delete"))
        obs.zk_txns.append(txn(301, 0x100008, 9900, op("create", "/controller", controller_znode(1), ephemeral=True),
                               op("setData", "/controller_epoch", "4", version=3)))
    else:
        session = KRAFT_SESSION if ends == "owner's session closed" else ZK_CONTROLLER_SESSION
        obs.zk_txns.append(txn(300, session, 9800, kind="closeSession"))
    obs.zk_txns.append(txn(302, 0x100008, 9950, op("check", "/controller_epoch", version=4),
                           op("setData", "/brokers/topics/orders", '{"partitions":{},"topic_id":"x"}', version=1)))
    assert len(CHECKS["OneZkWriterAfterClaim"](obs)) == (0 if ends == "deleted" else 1)


def test_no_zk_write_after_post_migration_reads_zookeepers_log():
    """KIP-866 §Finalizing the Migration: once POST_MIGRATION is committed, nothing more is written to ZooKeeper. A
    write the watches do not follow (a config change's notification, 10 ms after the record) is in ZooKeeper's log."""
    obs = clean()
    obs.metadata[3000].append(rec(77, 1, "ZK_MIGRATION_STATE_RECORD", 9205, zkMigrationState=POST_MIGRATION))
    assert [v.message for v in CHECKS["NoZkWriteAfterPostMigration"](obs)] == [
        "/config/changes/config_change_0000000000 written (zxid 0xc7, session 0x100011) after POST_MIGRATION was "
        "committed"]
    obs.zk_txns.clear()  # a run made before ZooKeeper's log was read
    assert CHECKS["NoZkWriteAfterPostMigration"](obs) == []


@pytest.mark.parametrize("case", ["wedged", "within the bound", "deposed", "claimant's new session", "not the claim's"])
def test_dual_writes_resume_once_faults_heal(case):
    """A claimant's writes that keep failing on a version past the driver's retry bound are a wedged dual write;
    failures within the bound are a stall's, and a deposed claimant's are its fencing (a newer claim bumped its epoch).
    The claimant's writes from the session it opened after the stall expired its claiming one are its own: each is
    conditional on the /controller_epoch version its claim wrote (Kafka 3.9.2, stuck in SYNC_KRAFT_TO_ZK: aimed
    campaign seed 6, 2026-11-29); a write checking another version is not."""
    obs = clean()
    if case == "claimant's new session":
        _dual_write_wedged(obs, session=0x100030, epoch_version=2)
    elif case == "not the claim's":
        _dual_write_wedged(obs, session=0x100030, epoch_version=1)
    else:
        _dual_write_wedged(obs, after_heal_s=50 if case == "within the bound" else 130)
    if case == "deposed":
        claim = txn(299, 0x100012, 9500, op("setData", "/controller_epoch", "4", version=3),
                    op("setData", "/controller", controller_znode(3001, 2), version=1))
        obs.zk_txns.insert(-3, claim)
    found = [v.message for v in CHECKS[DUAL_WRITES_RESUME](obs)]
    session = "0x100030" if case == "claimant's new session" else "0x100011"
    assert found == ([] if case not in ("wedged", "claimant's new session") else [
        f"controller 3000's ZooKeeper writes (session {session}) still failed with BadVersion 62 s after the last "
        "heal: 3 of them, from zxid 0x12c to 0x12e"])


def test_kafka_38_dual_write_wedged_after_a_zookeeper_stall():
    """A finding about Kafka 3.8.1, as on 3.9.2 and 3.6.2 (KIP-866 §Failure Modes): after an 8 s ZooKeeper stall, the
    controller's multi that moved /migration applied, its resent copy failed on /migration's version, and every write
    of the session failed the same way until the run ended. The log of that run, cut down to the claim on; no other
    writer wrote ZooKeeper's metadata meanwhile."""
    run = json.loads((DATA / "kafka-3.8-dual-write-wedged-zk-txns.json").read_text())
    obs = Observed(version=tuple(run["version"]))
    obs.operator, obs.zk_txns = run["operator"], run["zk_txns"]
    assert [v.message for v in CHECKS[DUAL_WRITES_RESUME](obs)] == [
        "controller 3000's ZooKeeper writes (session 0x1000157d5730005) still failed with BadVersion 62 s after the "
        "last heal: 158 of them, from zxid 0x1c5 to 0x262"]
    applied, resent = [t for t in obs.zk_txns if t["zxid"] in (0x11a, 0x11e)]
    moved = applied["ops"][1]
    assert not applied["failed"] and (moved["path"], moved["version"]) == ("/migration", 21)
    assert resent["failed"] and resent["ops"][1] == {"op": "error", "error": -103}  # BadVersion on /migration
    assert CHECKS["OneZkWriterAfterClaim"](obs) == []


def test_zookeepers_log_names_the_sessions():
    """A transaction is shown with the process whose session made it, where the log shows it: a broker's registration
    names its session, a KRaft claim or a /migration stamp names the controller's; the rest stay numbers."""
    from properties.kafka.observe import describe, name_sessions

    obs = clean()
    obs.zk_txns.append(txn(300, ZK_CONTROLLER_SESSION, 9900, op("create", "/brokers/ids/0", ephemeral=True)))
    obs.zk_txns.append(txn(301, 0x100099, 9950, op("create", "/kraftcheck", ephemeral=True)))
    name_sessions(obs.zk_txns)
    assert {t["session"]: t.get("by") for t in obs.zk_txns} == {
        ZK_CONTROLLER_SESSION: "broker-0", KRAFT_SESSION: "controller-3000", 0x100099: None}
    _stale_zk_controller_write_applies(obs)
    assert [v.message for v in CHECKS["OneZkWriterAfterClaim"](obs)] == [
        "zxid 0xc3, session 0x100007 (broker-0): setData /brokers/topics/orders/partitions/0/state while controller "
        "3000's claim at Raft epoch 1 holds /controller, in a transaction that neither moves nor checks /migration"]
    assert describe(obs.zk_txns[STALE_ZK_CONTROLLER_WRITE]).startswith(
        "txn  zxid 0xc3 session 0x100007 (broker-0) multi: check /controller_epoch v1; setData ")
    assert describe(clean().zk_txns[STALE_ZK_CONTROLLER_WRITE]) == (
        "txn  zxid 0xc3 session 0x100007 multi (failed): error -103 (BadVersionError); error -2 (RuntimeInconsistency)")


def test_broker_gauges_of_a_controller_still_loading_are_not_judged():
    """3.8.1, three controllers: controller-3001, killed and started again 4 s before the run's end, was judged by its
    sample from before a record its dump lacks, and that sample came before it had loaded its first image
    (ZkMigrationState -1): its broker gauges read 0, as every gauge of an image not yet loaded does. Such a sample
    says nothing of the counts; one taken after the image loaded is judged as before."""
    obs = clean()
    obs.metadata[3001] = [*obs.metadata[3000], rec(77, 1, "NO_OP_RECORD", 9350)]  # a record 3000's dump lacks
    loading = obs.jmx[6]
    assert loading["process"] == "controller-3000" and loading["metrics"]["ZkMigrationState"] == -1
    loading["metrics"].update(ActiveBrokerCount=0, MigratingZkBrokerCount=0, FencedBrokerCount=0)
    check = CHECKS[BROKER_GAUGES]
    assert check(obs) == []
    loading["metrics"]["ZkMigrationState"] = MIGRATION  # loaded, and still counting no broker: judged
    assert sorted(v.message for v in check(obs)) == [
        "at rest controller-3000 reported FencedBrokerCount 0; its log's registrations give 2",
        "at rest controller-3000 reported MigratingZkBrokerCount 0; its log's registrations give 2"]


def _recorded_log(name: str) -> Observed:
    run = json.loads((DATA / name).read_text())
    obs = Observed(version=tuple(run["version"]))
    obs.operator = run["operator"]
    obs.metadata = {int(c): records for c, records in run["metadata"].items()}
    obs.broker_metadata = run.get("broker_metadata", [])
    obs.zk = run.get("zk", {})
    obs.logs = run.get("logs", {})
    return obs


def test_metadata_version_goes_down_only_where_nothing_is_lost_or_the_operator_forced_it():
    """KIP-584 on Kafka 3.9.2's kraft runbook: metadata.version up to 21 (3.9-IV0), a safe downgrade to 20 (3.8-IV0,
    no metadata changed between) and an unsafe one to the same level. Had the downgrade gone to 13 (3.6-IV1), across
    levels that changed metadata, it loses metadata: named unless an operator forced exactly that downgrade (Kafka
    3.x refuses them: a refused force forces nothing)."""
    obs = _recorded_log("kafka-3.9-kraft-roll-run.json")
    check = CHECKS["MetadataVersionGoesDownOnlyWhenForced"]
    assert check(obs) == []
    downgrade = next(r for r in obs.metadata[3000] if r["offset"] == 135)
    downgrade["data"]["featureLevel"] = 13
    assert [v.message for v in check(obs)] == [
        "controller 3000's log takes metadata.version from 21 (offset 45) down to 13 at offset 135, across levels 14,"
        " 15, 17 that changed metadata, and no operator forced it"]
    unsafe = next(e for e in obs.operator if e.get("action") == "update-features" and "--unsafe" in e["command"])
    unsafe["answer"] = "metadata.version was downgraded to 13."
    assert check(obs) == []
    unsafe["refused"] = True
    assert len(check(obs)) == 1


def test_reassignment_ends_only_with_its_replicas_in_the_isr():
    """Kafka 3.6.2 moved orders-0 from [0, 2] to [2, 1] in dual write: the record that ended the move had both new
    replicas in its ISR. Ended with replica 1 outside it, it is named; a cancelled move back to [0, 2] adds no replica,
    whatever the ISR (PartitionReassignmentReplicas.maybeCompleteReassignment; a revert keeps the replicas it began
    with)."""
    obs = _recorded_log("kafka-3.6.2-reassignment-run.json")
    check = CHECKS["ReassignmentCompletesWithTargetInIsr"]
    assert check(obs) == []
    end = next(r for r in obs.metadata[3000] if r["offset"] == 101)
    assert end["data"]["replicas"] == [2, 1] and end["data"]["isr"] == [2, 1]
    end["data"]["isr"] = [2]
    assert [v.message for v in check(obs)] == [
        "the PARTITION_CHANGE_RECORD at offset 101 completes the reassignment of orders-0 (replicas [2, 1, 0] -> "
        "[2, 1]) with replica 1 outside the ISR [2]"]
    end["data"]["replicas"] = [2, 0]  # cancelled: back to the replicas the move began with
    assert check(obs) == []
    obs = _recorded_log("kafka-3.6.2-reassignment-run.json")
    begin = next(r for r in obs.metadata[3000] if r["offset"] == 100)
    del begin["data"]["addingReplicas"], begin["data"]["removingReplicas"]  # a move at once, no reassignment
    assert [v.message for v in check(obs)][0] == (
        "the PARTITION_CHANGE_RECORD at offset 100 moves orders-0 (replicas [0, 2] -> [2, 1, 0]) with replica 1 "
        "outside the ISR [0, 2]")


def test_kafka_37_completes_a_reassignment_with_only_its_adding_replicas_in_the_isr():
    """Differs: Kafka 3.7.2 moved orders-0 from [1, 0] to [0, 2] while broker 0, its failed LeaderAndIsr never
    repaired, stayed outside the ISR, and completed the move with the ISR [2]: before KAFKA-15665 (3.8.0) a KRaft
    controller asked the ISR only for the adding replicas. Read as 3.8.1, which asks it for every target replica, the
    completion is named."""
    obs = _recorded_log("kafka-3.7-reassignment-outside-isr-run.json")
    check = CHECKS["ReassignmentCompletesWithTargetInIsr"]
    assert obs.version == (3, 7, 2) and check(obs) == []
    obs.version = (3, 8, 1)
    assert [v.message for v in check(obs)] == [
        "the PARTITION_CHANGE_RECORD at offset 151 completes the reassignment of orders-0 (replicas [0, 2, 1] -> "
        "[0, 2]) with replica 0 outside the ISR [2]"]


def test_each_broker_serves_the_committed_image_at_rest():
    """KIP-866 §ZK Broker RPCs: Kafka 3.9.2 in dual write, asked broker by broker at rest, served exactly the image
    (payments, deleted in dual write, by none). A ZooKeeper-mode broker that missed an UpdateMetadata serving orders-0
    at an older leader epoch, or serving payments still, is named; a change appended within 2 s before the answer may
    not have reached it yet, and is not."""
    obs = _recorded_log("kafka-3.9-brokers-serve-image-run.json")
    zk_brokers, kraft_brokers = CHECKS["ZkBrokersConvergeToCommittedImage"], CHECKS[BROKERS_SERVE_IMAGE]
    assert zk_brokers(obs) == [] and kraft_brokers(obs) == []
    assert [s["round"] for s in obs.broker_metadata] == [0, 0, 0, 1, 1, 1]
    last = obs.broker_metadata[4]  # broker 1's last round
    orders = next(t for t in last["topics"] if t["name"] == "orders")
    orders["partitions"][0]["leader_epoch"] = 3
    last["topics"].append({"name": "payments", "id": "gone", "error": 0, "partitions": []})
    assert [v.message for v in zk_brokers(obs)] == [
        "at rest ZooKeeper-mode broker 1 (round 1 of broker-metadata.jsonl) differs from the committed image: "
        "partition orders 0: serves leader 1 at epoch 3, replicas [1, 0], ISR [0, 1], the image has leader 1 at epoch "
        "4, replicas [1, 0], ISR [0, 1]; topic payments: serves id gone, the image has none"]
    assert kraft_brokers(obs) == []
    change = next(r for r in reversed(obs.metadata[3000]) if r["type"] == "PARTITION_CHANGE_RECORD"
                  and r["data"].get("leader", -2) != -2 and r["data"]["partitionId"] == 0)
    assert change["data"]["topicId"] == orders["id"]
    orders["partitions"][0]["leader_epoch"] = 4
    del last["topics"][-1]
    later = dict(change, time=last["time"] - 1000)  # orders-0's latest leader change, appended again 1 s before
    later["data"] = dict(change["data"], leader=0)
    obs.metadata[3000].append(later)
    assert zk_brokers(obs) == []  # the image passed through what it serves within the slack
    later["time"] = last["time"] - 3000
    obs.metadata[3000].sort(key=lambda r: r["time"])
    assert [v.message.split(" (")[0] for v in zk_brokers(obs)] == [  # appended 3 s before: no broker serves it
        f"at rest ZooKeeper-mode broker {b}" for b in (0, 1, 2)]


def test_after_a_rollback_brokers_serve_zookeeper_not_the_log():
    """KIP-866 §Rollback to ZK: rolled back, a ZooKeeper controller (broker 0) is in charge, and what each broker
    serves is held to ZooKeeper, not to the KRaft log, which the rollback left behind: the image's checks judge
    nothing. A broker serving an older leader epoch than the state znode's, or missing a registered broker, is named."""
    obs = clean()
    _rolled_back(obs)
    obs.zk["/brokers/topics/orders"].append(zk("/brokers/topics/orders", '{"partitions":{"0":[0,1]},"topic_id":"x"}',
                                               80, 202, 1, 9910))
    obs.zk["/brokers/topics/orders/partitions/0/state"] = [
        zk("/brokers/topics/orders/partitions/0/state", '{"leader":0,"leader_epoch":5,"isr":[0,1]}', 203, 203, 0, 9920)]
    for sample in obs.broker_metadata:
        sample["topics"][0]["partitions"] = [
            {"partition": 0, "leader": 0, "leader_epoch": 5, "replicas": [0, 1], "isr": [1, 0], "error": 0}]
    assert run_checks(obs) == []
    obs.broker_metadata[0]["topics"][0]["partitions"][0]["leader_epoch"] = 4
    obs.broker_metadata[1]["brokers"] = [0]
    assert [v.message for v in CHECKS[BROKERS_SERVE_ZK](obs)] == [
        "at rest after the rollback broker 0 (round 1 of broker-metadata.jsonl) differs from ZooKeeper: partition "
        "orders 0: serves leader 0 at epoch 4, replicas [0, 1], ISR [0, 1], ZooKeeper has leader 0 at epoch 5, "
        "replicas [0, 1], ISR [0, 1]",
        "at rest after the rollback broker 1 (round 1 of broker-metadata.jsonl) differs from ZooKeeper: live brokers: "
        "serves [0], ZooKeeper has [0, 1]"]
    assert CHECKS["ZkBrokersConvergeToCommittedImage"](obs) == []


def test_kafka_35_zk_broker_serves_a_topic_deleted_while_it_was_offline():
    """Kafka 3.5.2, dual write with three controllers: broker 1, paused while it rolled, lost its ZooKeeper session,
    and payments was deleted while the KRaft controller held it offline ("Not sending request UpdateMetadata ... to
    broker 1, since it is offline"). Registered again, it was never told: at rest it still served payments, which
    brokers 0 and 2 had dropped (KIP-866 §ZK Broker RPCs; 3.5's ZkMetadataCache reads every UpdateMetadata as
    incremental, and KAFKA-15799, 3.7.0, has a KRaft controller's full UpdateMetadata remove what it lacks)."""
    obs = _recorded_log("kafka-3.5-deleted-topic-still-served-run.json")
    assert [e["topics"] for e in obs.operator if e.get("action") == "delete-topics"] == [["payments"]]
    found = CHECKS["ZkBrokersConvergeToCommittedImage"](obs)
    assert [v.message for v in found] == [
        "at rest ZooKeeper-mode broker 1 (round 2 of broker-metadata.jsonl) differs from the committed image: "
        "partition payments 0: serves leader 0 at epoch 2, replicas [0, 2], ISR [0, 2], the image has none; "
        "partition payments 1: serves leader 2 at epoch 3, replicas [2, 1], ISR [2], the image has none; "
        "topic payments: serves id rOoYXFEnR1OjW6Tn5E9MhQ, the image has none"]
    assert {e["broker"] for e in obs.broker_metadata if "payments" in {t["name"] for t in e["topics"]}} == {1}


def test_kafka_39_zk_broker_unfenced_after_a_deletion_serves_the_topic_for_good():
    """Kafka 3.9.2, the LeaderAndIsr plan (broker-0 paused 23.4 s in dual write): payments was deleted while broker 0
    was offline to the KRaft controller, which skipped its UpdateMetadata and StopReplica; broker 0, unfenced 120 ms
    later, got its partitions in requests that were not "full", and at rest still served payments (KIP-866 §ZK Broker
    RPCs). Found by this check, after KAFKA-15799's fix (which covers a full UpdateMetadata only)."""
    obs = _recorded_log("kafka-3.9-deleted-topic-still-served-run.json")
    assert obs.version == (3, 9, 2)
    assert [v.message for v in CHECKS["ZkBrokersConvergeToCommittedImage"](obs)] == [
        "at rest ZooKeeper-mode broker 0 (round 1 of broker-metadata.jsonl) differs from the committed image: "
        "partition payments 0: serves leader 1 at epoch 3, replicas [0, 1], ISR [0, 1], the image has none; "
        "partition payments 1: serves leader 0 at epoch 2, replicas [2, 0], ISR [0], the image has none; "
        "topic payments: serves id T4aM_HbbR0uPsY2EhdW5Vw, the image has none"]
    deleted = next(e for e in obs.operator if e.get("action") == "delete-topics")
    healed = next(e for e in obs.operator if e["kind"] == "heal")
    assert deleted["time"] < healed["time"]  # the deletion came while broker 0 was still paused


def test_kafka_39_brokers_serve_zookeeper_after_a_rollback():
    """KIP-866 §Rollback to ZK on Kafka 3.9.2: rolled back from dual write, broker 0's ZooKeeper controller in charge,
    each broker served at rest exactly what the watches saw ZooKeeper hold. A broker that missed refunds is named."""
    obs = _recorded_log("kafka-3.9-rollback-brokers-serve-zk-run.json")
    check = CHECKS[BROKERS_SERVE_ZK]
    assert check(obs) == []
    last = obs.broker_metadata[-1]
    assert last["broker"] == 2 and len({t["name"] for t in last["topics"]}) == 4
    refunds = next(t for t in last["topics"] if t["name"] == "refunds")
    last["topics"].remove(refunds)
    found = [v.message for v in check(obs)]
    assert len(found) == 1 and found[0].startswith(
        f"at rest after the rollback broker 2 (round {last['round']} of broker-metadata.jsonl) differs from "
        "ZooKeeper: ")
    assert f"topic refunds: serves none, ZooKeeper has id {refunds['id']}" in found[0]


def test_a_broker_running_on_an_aborted_unfencing_is_named_and_a_kept_one_is_not():
    """KIP-500 §Broker States, KIP-868: the unfencing broker 1 moved to RUNNING on was taken back by the transaction's
    abort; committed with the transaction's end, or unfenced again after the abort, it stands."""
    obs = clean()
    _unfencing_aborted(obs)
    [found] = CHECKS["BrokerOnlineOnlyOnceUnfencingCommitted"](obs)
    assert found.message == (
        "broker 1 moved to RUNNING at broker epoch 20 (broker-1/logs/server.log:21), but KRaft never unfenced that "
        "epoch: its unfencing at offset 61 was inside a metadata transaction aborted at offset 62 ('Controller "
        "failover'), so KRaft's image keeps broker 1 fenced while it serves (a migrating ZooKeeper-mode broker then "
        "gets no control request from the KRaft controller)")
    ended = clean()
    _unfencing_aborted(ended, end="END_TRANSACTION_RECORD")
    assert CHECKS["BrokerOnlineOnlyOnceUnfencingCommitted"](ended) == []
    again = clean()
    _unfencing_aborted(again)
    again.metadata[3000].insert(10, rec(63, 2, "BROKER_REGISTRATION_CHANGE_RECORD", 8600, brokerId=1, brokerEpoch=20,
                                        fenced=-1))
    assert CHECKS["BrokerOnlineOnlyOnceUnfencingCommitted"](again) == []


def test_a_running_zk_broker_left_fenced_is_judged_only_once_it_had_time():
    """MigratingZkBrokerEventuallyUnfenced: a running migrating broker fenced in KRaft's image UNFENCE_BOUND_S after it
    registered (and the faults healed) is named; sooner, unfenced, or not running, it is not."""
    check = CHECKS["MigratingZkBrokerEventuallyUnfenced"]
    assert check(clean()) == []  # both brokers fenced at rest, 2.6 and 3.5 s after they registered
    late = clean()
    _zk_broker_left_fenced(late)
    [found] = check(late)
    assert found.message.startswith(
        "broker 1, a running migrating ZooKeeper-mode broker registered with KRaft at broker epoch 20 (offset 20), is "
        "still fenced in KRaft's image at the run's end, 33 s after it registered or the faults healed: KRaft never "
        "unfenced that epoch")
    healed = clean()
    _zk_broker_left_fenced(healed)
    healed.operator.append({"channel": "operator", "kind": "heal", "fault": "kill-controller", "time": 20_000})
    assert check(healed) == []  # 20 s after the heal
    down = clean()
    _zk_broker_left_fenced(down)
    down.broker_metadata[1]["error"] = "timed out"
    assert check(down) == []
    unfenced = clean()
    _zk_broker_left_fenced(unfenced)
    unfenced.metadata[3000].append(rec(77, 1, "BROKER_REGISTRATION_CHANGE_RECORD", 9300, brokerId=1, brokerEpoch=20,
                                       fenced=-1))
    assert check(unfenced) == []
    aborted = clean()
    _zk_broker_left_fenced(aborted)
    _unfencing_aborted(aborted)
    [found] = check(aborted)
    assert "its unfencing at offset 61 was inside a metadata transaction aborted at offset 62" in found.message


def test_kafka_39_unfencing_aborted_by_a_failover_in_the_migrations_transaction_is_named():
    """A finding about Kafka 3.9.2 (KIP-500 §Broker States, KIP-866 §Controller Migration, KIP-868): the controller
    killed just as the last ZooKeeper-mode broker registered; that broker's unfencing was appended inside the
    migration's transaction (answered at the Raft commit, KAFKA-15441's rule), and the restarted controller aborted
    the transaction. The broker stays RUNNING while KRaft never unfences its epoch again: its MigrationPropagator
    counts the broker offline for the rest of the run."""
    obs = _recorded_log("kafka-3.9-unfencing-aborted-by-failover-run.json")
    [found] = CHECKS["BrokerOnlineOnlyOnceUnfencingCommitted"](obs)
    assert found.message.startswith(
        "broker 2 moved to RUNNING at broker epoch 32 (broker-2/logs/server.log:2316), but KRaft never unfenced that "
        "epoch: its unfencing at offset 34 was inside a metadata transaction aborted at offset 36 ('Controller "
        "failover')")
    log = obs.metadata[3000]
    assert [r["type"] for r in log if 32 <= r["offset"] <= 36] == [
        "REGISTER_BROKER_RECORD", "BEGIN_TRANSACTION_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD",
        "CONTROL:LEADER_CHANGE", "ABORT_TRANSACTION_RECORD"]
    assert not [r for r in log if r["offset"] > 36 and r["data"].get("brokerId") == 2]
    # the run got stuck (no sample at rest); judged at its end, broker 2's process started last, it was left fenced
    [fenced] = CHECKS["MigratingZkBrokerEventuallyUnfenced"](obs)
    assert fenced.message.startswith("broker 2, a running migrating ZooKeeper-mode broker registered with KRaft at "
                                     "broker epoch 32 (offset 32), is still fenced in KRaft's image at the run's end, "
                                     "333 s after it registered or the faults healed: its unfencing at offset 34")
