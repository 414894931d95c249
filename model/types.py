"""Identifiers, counters, error codes and the finite enums of the control plane.

Each identifier and counter has its own type so that a broker epoch is never compared with a
controller epoch by accident (``NewType`` costs nothing at run time, the type checker does the
work). Names follow Kafka's: error codes are the wire codes from ``Errors.java``, IBP names are
``inter.broker.protocol.version`` values.
"""

from __future__ import annotations

from collections.abc import Hashable
from enum import Enum, IntEnum
from typing import TYPE_CHECKING, Generic, NewType, TypeVar

BrokerId = NewType("BrokerId", int)
PartitionId = NewType("PartitionId", int)
ControllerEpoch = NewType("ControllerEpoch", int)
BrokerEpoch = NewType("BrokerEpoch", int)
LeaderEpoch = NewType("LeaderEpoch", int)
ZkVersion = NewType("ZkVersion", int)
Zxid = NewType("Zxid", int)
SessionId = NewType("SessionId", int)
FeatureLevel = NewType("FeatureLevel", int)
FeatureEpoch = NewType("FeatureEpoch", int)

# Znode paths. A path the control plane names is declared as ``ZPath[D]`` (its znode holds a ``D``) or
# ``ZDir[D]`` (its children hold ``D``s), and ``model.zookeeper``'s ``get`` and ``children`` read its
# data as a ``D``. That is for the type checker only: at run time both are ``str``, so states are
# unchanged. What a declaration says is kept by the code that writes the path; nothing checks a write.
D = TypeVar("D", bound=Hashable)

if TYPE_CHECKING:

    class ZPath(str, Generic[D]):
        """A path whose znode holds a ``D``."""

    class ZDir(str, Generic[D]):
        """A path whose children hold ``D``s."""

else:
    ZPath = ZDir = str

NO_SESSION = SessionId(0)
NO_LEADER = BrokerId(-1)
# KIP-380 as shipped: -1 means "the sender does not know the broker epoch" and is accepted
# (reference §4, ZkBrokerEpochManager). The seed does not mention it.
UNKNOWN_BROKER_EPOCH = BrokerEpoch(-1)
NO_EPOCH = ControllerEpoch(-1)
# ZooKeeper's "any version" in setData/delete/check.
ANY_VERSION = ZkVersion(-1)
# Kafka's KafkaController.InitialControllerEpoch: /controller_epoch holds 0 before the first election.
INITIAL_CONTROLLER_EPOCH = ControllerEpoch(0)


class Errors(IntEnum):
    """Kafka error codes the model returns from its decisions (clients/.../Errors.java)."""

    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    BROKER_NOT_AVAILABLE = 8
    STALE_CONTROLLER_EPOCH = 11
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    STALE_BROKER_EPOCH = 77
    UNSUPPORTED_VERSION = 35
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_UPDATE_VERSION = 95
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    FEATURE_UPDATE_FAILED = 96


class ZkCode(Enum):
    """ZooKeeper result codes (KeeperException.Code) used by the model."""

    OK = "OK"
    BAD_VERSION = "BADVERSION"
    NO_NODE = "NONODE"
    NODE_EXISTS = "NODEEXISTS"
    RUNTIME_INCONSISTENCY = "RUNTIMEINCONSISTENCY"
    CONNECTION_LOSS = "CONNECTIONLOSS"
    SESSION_EXPIRED = "SESSIONEXPIRED"


class Ibp(IntEnum):
    """inter.broker.protocol.version values the model distinguishes, in release order; from 3.3-IV0 on,
    metadata.version levels too. Each release's level is where a rule depends on it; a level between
    two modelled ones is played as the lower (a downgrade's decision still reads Kafka's whole table)."""

    IBP_2_6_IV0 = 26
    IBP_2_7_IV0 = 27  # KIP-584 feature versioning ("migration_ibp_version" in the seed's text)
    IBP_3_3_IV0 = 30  # the first KRaft-ready metadata.version (KIP-778)
    IBP_3_4_IV0 = 34  # KIP-866 bridge release: the first metadata.version that can migrate
    IBP_3_5_IV2 = 35  # 3.5's newest: migrates without metadata transactions
    IBP_3_6_IV1 = 36  # metadata transactions (KIP-868); Kafka 3.9 needs it to start a migration
    IBP_3_7_IV0 = 37  # controller registration (KIP-919): the quorum's readiness is checked from here on
    IBP_3_8_IV0 = 38  # changes no metadata: a downgrade from 3.9-IV0 to it loses nothing
    IBP_3_9_IV0 = 39  # changes no metadata

    @property
    def supports_feature_versioning(self) -> bool:
        return self >= Ibp.IBP_2_7_IV0

    @property
    def feature_level(self) -> int | None:
        """Kafka's metadata.version feature level (MetadataVersion.featureLevel); None before KRaft."""
        return FEATURE_LEVELS.get(self)


# Kafka 3.9's MetadataVersion: the modelled levels' feature levels, and for every feature level from
# 3.3-IV0 (4) to 3.9-IV0 (21) whether it changed metadata (didMetadataChange).
FEATURE_LEVELS = {
    Ibp.IBP_3_3_IV0: 4, Ibp.IBP_3_4_IV0: 8, Ibp.IBP_3_5_IV2: 11, Ibp.IBP_3_6_IV1: 13, Ibp.IBP_3_7_IV0: 15,
    Ibp.IBP_3_8_IV0: 20, Ibp.IBP_3_9_IV0: 21,
}
CHANGED_METADATA = frozenset({5, 6, 7, 8, 11, 13, 14, 15, 17})


def metadata_changed_between(low: Ibp, high: Ibp) -> bool:
    """MetadataVersion.checkIfMetadataChanged: whether a level above ``low``, up to ``high``, changed
    metadata, so that going down from ``high`` to ``low`` may lose some (KIP-778's safe downgrade). A
    level before KRaft's (a ZooKeeper-era IBP a scenario may give the quorum) counts as a change."""
    low_level, high_level = FEATURE_LEVELS.get(min(low, high)), FEATURE_LEVELS.get(max(low, high))
    if low_level is None or high_level is None:
        return low != high
    return any(level in CHANGED_METADATA for level in range(low_level + 1, high_level + 1))


class FeatureStatus(IntEnum):
    """Status of the /features znode (KIP-584 "Feature ZK node status")."""

    DISABLED = 0
    ENABLED = 1


class ReplicaRole(Enum):
    """What a broker does with a partition it hosts, as set by LeaderAndIsr / StopReplica."""

    LEADER = "Leader"
    FOLLOWER = "Follower"
    STOPPED = "Stopped"
