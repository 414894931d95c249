"""Kafka's znode JSON: every znode the control plane uses decodes back to what was encoded."""

from __future__ import annotations

import pytest

from impl.codec import CodecError, decode, encode, kind_of
from model.kraft import ControllerId, KRaftEpoch, Offset
from model.migration import CONFIG, MIGRATION, KRaftControllerZNode, MigrationZNode, pending_deletion_path, topic_path
from model.scopes import SAME_RANGE
from model.state import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    FEATURES,
    TOPIC,
    BrokerRegistration,
    FeaturesZNode,
    PartitionState,
    broker_path,
    partition_state_path,
)
from model.types import BrokerId, ControllerEpoch, FeatureStatus, Ibp, LeaderEpoch, PartitionId

VALUES = [
    (CONTROLLER, BrokerId(2)),
    (CONTROLLER, KRaftControllerZNode(ControllerId(3001), KRaftEpoch(4))),
    (CONTROLLER_EPOCH, ControllerEpoch(7)),
    (broker_path(BrokerId(1)), BrokerRegistration(Ibp.IBP_3_4_IV0, SAME_RANGE)),
    (TOPIC, ((BrokerId(0), BrokerId(1)), (BrokerId(1), BrokerId(2)))),
    (topic_path("d"), ()),
    (partition_state_path(PartitionId(1)),
     PartitionState(BrokerId(1), LeaderEpoch(3), (BrokerId(1), BrokerId(2)), ControllerEpoch(2))),
    (FEATURES, FeaturesZNode(FeatureStatus.ENABLED, SAME_RANGE)),
    (FEATURES, FeaturesZNode(FeatureStatus.DISABLED, ())),
    (MIGRATION, MigrationZNode(ControllerId(3000), KRaftEpoch(2), Offset(17))),
    (CONFIG, 3),
    (pending_deletion_path("d"), ()),
]


@pytest.mark.parametrize("path,value", VALUES, ids=[f"{p}={v!r}"[:60] for p, v in VALUES])
def test_codec_round_trip(path, value):
    """decode(encode(v)) == v for each znode kind, and the bytes do not depend on anything but v and now."""
    data = encode(path, value, now=1234)
    assert decode(path, data) == value
    assert encode(path, value, now=1234) == data


def test_codec_controller_znode_versions():
    """KIP-866 §Controller ZNodes: a KRaft controller writes /controller version 2 with kraftControllerEpoch."""
    assert b'"kraftControllerEpoch":4' in encode(CONTROLLER, KRaftControllerZNode(ControllerId(3001), KRaftEpoch(4)))
    assert b'"version":1' in encode(CONTROLLER, BrokerId(0))


def test_codec_refuses_what_kafka_would_not_write():
    """Bad bytes are a one-line CodecError naming the path, not a KeyError deep inside."""
    with pytest.raises(CodecError, match="/controller"):
        decode(CONTROLLER, b'{"version":1}')
    with pytest.raises(CodecError, match="not JSON"):
        decode(FEATURES, b"\xff")
    with pytest.raises(CodecError, match="not a znode"):
        kind_of("/somewhere/else")
