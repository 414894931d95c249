"""What the implementation writes in znodes: Kafka's JSON (``kafka.zk.ZkData``), and back.

Rules:
- Every znode the control plane uses has one encoder and one decoder here, and nowhere else;
  nodes keep the decoded values (the model's znode data records) in memory.
- ``decode(path, encode(path, value))`` is ``value``: a test checks it for every kind of znode.
  Fields Kafka writes that the model does not keep (timestamps, endpoints) are written (from
  the simulated clock, so a seed still gives the same bytes) and ignored on the way back.
- Bytes are canonical JSON (sorted keys, no spaces), so the same value always gives the same
  bytes: the real-ZooKeeper end-to-end test compares znodes byte for byte.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, assert_never

from model.kraft import ControllerId, KRaftEpoch, Offset
from model.migration import (
    CONFIG,
    DELETE_TOPICS,
    MIGRATION,
    KRaftControllerZNode,
    MigrationZNode,
)
from model.state import (
    BROKER_IDS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    FEATURES,
    BrokerRegistration,
    FeaturesZNode,
    PartitionState,
)
from model.types import BrokerId, ControllerEpoch, FeatureLevel, FeatureStatus, Ibp, LeaderEpoch

TOPICS = "/brokers/topics"

# The parents every cluster has before any node starts (Kafka's ZkData.PersistentZkPaths).
PERSISTENT_PATHS = ("/brokers", BROKER_IDS, TOPICS, "/admin", DELETE_TOPICS, "/config")

IBP_NAMES = {
    Ibp.IBP_2_6_IV0: "2.6-IV0",
    Ibp.IBP_2_7_IV0: "2.7-IV0",
    Ibp.IBP_3_3_IV0: "3.3-IV0",
    Ibp.IBP_3_4_IV0: "3.4-IV0",
    Ibp.IBP_3_5_IV2: "3.5-IV2",
    Ibp.IBP_3_6_IV1: "3.6-IV1",
    Ibp.IBP_3_7_IV0: "3.7-IV0",
    Ibp.IBP_3_8_IV0: "3.8-IV0",
    Ibp.IBP_3_9_IV0: "3.9-IV0",
}
IBP_BY_NAME = {name: ibp for ibp, name in IBP_NAMES.items()}
# The one cluster-level config the model tracks (/config/cluster, KIP-866's config migration).
CLUSTER_CONFIG_KEY = "log.retention.ms"


class CodecError(ValueError):
    """A znode's bytes are not what Kafka writes there."""


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _load(path: str, data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError as e:
        raise CodecError(f"{path}: not JSON: {data[:40]!r}") from e


def _ranges(supported) -> dict:
    return {name: {"min_version": lo, "max_version": hi} for name, (lo, hi) in supported}


def _from_ranges(obj: dict, lo_key: str, hi_key: str):
    return tuple(sorted((name, (FeatureLevel(r[lo_key]), FeatureLevel(r[hi_key]))) for name, r in obj.items()))


class ZNode(StrEnum):
    """The kinds of znode the codec knows: one encoder and one decoder each (values as the kinds were named)."""

    CONTROLLER = "controller"
    CONTROLLER_EPOCH = "controller_epoch"
    FEATURES = "features"
    MIGRATION = "migration"
    CONFIG = "config"
    BROKER = "broker"
    PENDING_DELETION = "pending_deletion"
    TOPIC = "topic"
    PARTITION_STATE = "partition_state"
    PARENT = "parent"  # a parent only: no data


def kind_of(path: str) -> ZNode:
    """Which znode ``path`` is, as the codec knows them."""
    if path == CONTROLLER:
        return ZNode.CONTROLLER
    if path == CONTROLLER_EPOCH:
        return ZNode.CONTROLLER_EPOCH
    if path == FEATURES:
        return ZNode.FEATURES
    if path == MIGRATION:
        return ZNode.MIGRATION
    if path == CONFIG:
        return ZNode.CONFIG
    if path.startswith(BROKER_IDS + "/"):
        return ZNode.BROKER
    if path.startswith(DELETE_TOPICS + "/"):
        return ZNode.PENDING_DELETION
    if path.startswith(TOPICS + "/"):
        rest = path[len(TOPICS) + 1:].split("/")
        if len(rest) == 1:
            return ZNode.TOPIC
        if len(rest) == 4 and rest[1] == "partitions" and rest[3] == "state":
            return ZNode.PARTITION_STATE
        if len(rest) in (2, 3) and rest[1] == "partitions":
            return ZNode.PARENT
    if path in PERSISTENT_PATHS or path == "/":
        return ZNode.PARENT
    raise CodecError(f"{path}: not a znode the control plane uses")


def encode(path: str, value: Any, now: int = 0) -> bytes:
    """The bytes Kafka writes at ``path`` for the model's value ``value``."""
    kind = kind_of(path)
    match kind:
        case ZNode.CONTROLLER:
            if isinstance(value, KRaftControllerZNode):  # KIP-866 §Controller ZNodes: version 2 adds the Raft epoch
                return _dump({"version": 2, "brokerid": value.controller, "timestamp": str(now),
                              "kraftControllerEpoch": value.kraft_epoch})
            return _dump({"version": 1, "brokerid": int(value), "timestamp": str(now)})
        case ZNode.CONTROLLER_EPOCH:
            return str(int(value)).encode()
        case ZNode.BROKER:
            broker_id = int(path.rsplit("/", 1)[1])
            return _dump({
                "version": 5, "host": f"broker-{broker_id}", "port": 9092, "jmx_port": -1,
                "endpoints": [f"PLAINTEXT://broker-{broker_id}:9092"], "timestamp": str(now),
                "features": _ranges(value.supported),
                # Differs: Kafka's BrokerInfo JSON has no IBP; the model's registration carries it.
                "ibp": IBP_NAMES[value.ibp],
            })
        case ZNode.TOPIC:
            partitions = {str(p): list(replicas) for p, replicas in enumerate(value)}
            return _dump({"version": 3, "partitions": partitions, "adding_replicas": {}, "removing_replicas": {}})
        case ZNode.PARTITION_STATE:
            return _dump({"version": 1, "controller_epoch": value.controller_epoch, "leader": value.leader,
                          "leader_epoch": value.leader_epoch, "isr": list(value.isr)})
        case ZNode.FEATURES:
            finalized = {n: {"min_version_level": lo, "max_version_level": hi} for n, (lo, hi) in value.finalized}
            return _dump({"version": 1, "status": int(value.status), "features": finalized})
        case ZNode.MIGRATION:
            return _dump({"version": 0, "kraft_controller_id": value.kraft_controller_id,
                          "kraft_controller_epoch": value.kraft_controller_epoch,
                          "kraft_metadata_offset": value.kraft_metadata_offset, "kraft_metadata_epoch": -1})
        case ZNode.CONFIG:
            return _dump({"version": 1, "config": {CLUSTER_CONFIG_KEY: str(value)}})
        case ZNode.PENDING_DELETION | ZNode.PARENT:
            if value not in ((), None, b""):
                raise CodecError(f"{path}: carries no data, got {value!r}")
            return b""
        case _:
            assert_never(kind)


def decode(path: str, data: bytes) -> Any:
    """The model's value for the bytes at ``path``; raises ``CodecError`` on anything Kafka would not write."""
    kind = kind_of(path)
    try:
        match kind:
            case ZNode.CONTROLLER_EPOCH:
                return ControllerEpoch(int(data))
            case ZNode.PENDING_DELETION | ZNode.PARENT:
                return ()
            case ZNode.CONTROLLER:
                obj = _load(path, data)
                if obj["version"] >= 2 and "kraftControllerEpoch" in obj:
                    return KRaftControllerZNode(ControllerId(obj["brokerid"]),
                                                KRaftEpoch(obj["kraftControllerEpoch"]))
                return BrokerId(obj["brokerid"])
            case ZNode.BROKER:
                obj = _load(path, data)
                return BrokerRegistration(IBP_BY_NAME[obj["ibp"]], _from_ranges(obj["features"], "min_version",
                                                                                  "max_version"))
            case ZNode.TOPIC:
                parts = _load(path, data)["partitions"]
                return tuple(tuple(BrokerId(r) for r in parts[str(p)]) for p in range(len(parts)))
            case ZNode.PARTITION_STATE:
                obj = _load(path, data)
                return PartitionState(BrokerId(obj["leader"]), LeaderEpoch(obj["leader_epoch"]),
                                      tuple(BrokerId(r) for r in obj["isr"]), ControllerEpoch(obj["controller_epoch"]))
            case ZNode.FEATURES:
                obj = _load(path, data)
                return FeaturesZNode(FeatureStatus(obj["status"]),
                                     _from_ranges(obj["features"], "min_version_level", "max_version_level"))
            case ZNode.MIGRATION:
                obj = _load(path, data)
                return MigrationZNode(ControllerId(obj["kraft_controller_id"]),
                                      KRaftEpoch(obj["kraft_controller_epoch"]), Offset(obj["kraft_metadata_offset"]))
            case ZNode.CONFIG:
                return int(_load(path, data)["config"][CLUSTER_CONFIG_KEY])
            case _:
                assert_never(kind)
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, CodecError):
            raise
        raise CodecError(f"{path}: unexpected {kind} data {data[:60]!r}: {e}") from e
