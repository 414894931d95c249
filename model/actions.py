"""The closed set of actions, each a protocol step named as Kafka or ZooKeeper names it.

Every action carries who acts. Perturbations (the environment breaking things) spend budget;
healing actions and protocol steps never do. ``PERTURBATIONS`` lists the former, which the
liveness checks leave out of fairness.
"""

from __future__ import annotations

from model.record import record
from model.state import Message
from model.types import BrokerId, FeatureLevel, Ibp, PartitionId, SessionId

# ---- the environment ----------------------------------------------------------------------


@record
class ZkOutage:
    """ZooKeeper loses its quorum: nothing can be read or written. (perturbation)"""


@record
class ZkRecover:
    """ZooKeeper serves again."""


@record
class ExpireSession:
    """ZooKeeper expires a session: its ephemerals and watches are gone. (perturbation)"""

    session: SessionId


@record
class Drop:
    """The network loses a message. (perturbation)"""

    message: Message


@record
class Deliver:
    """The network delivers a message, in any order relative to the others."""

    message: Message


# ---- broker processes ----------------------------------------------------------------------


@record
class CrashBroker:
    """The process dies without closing its ZooKeeper session. (perturbation)"""

    broker: BrokerId


@record
class StopBroker:
    """The operator stops the broker cleanly: its session closes at once. (perturbation)"""

    broker: BrokerId


@record
class RestartBroker:
    """A stopped or crashed broker starts again with an empty memory."""

    broker: BrokerId


@record
class ChangeIbp:
    """The operator edits inter.broker.protocol.version of a stopped broker. (perturbation)"""

    broker: BrokerId
    ibp: Ibp


@record
class OpenSession:
    """The broker opens a ZooKeeper session (at start-up or after its session expired)."""

    broker: BrokerId


@record
class RegisterBroker:
    """The broker creates its ephemeral /brokers/ids/<id>; the znode's czxid is its epoch (KIP-380)."""

    broker: BrokerId


@record
class SendControlledShutdown:
    """The broker asks the controller to move its leaderships away (KIP-380 ControlledShutdown v2). (perturbation)"""

    broker: BrokerId


@record
class RefreshFeatureCache:
    """The broker reads /features after its watch fired (KIP-584 FinalizedFeatureChangeListener)."""

    broker: BrokerId


# ---- the ZooKeeper controller ----------------------------------------------------------------


@record
class ObserveControllerEpoch:
    """A broker that sees no /controller reads /controller_epoch before trying to win."""

    broker: BrokerId


@record
class ElectController:
    """Create the ephemeral /controller and bump /controller_epoch by compare-and-set, in one multi."""

    broker: BrokerId


@record
class ResignController:
    """A controller learns that it lost /controller (or its session) and steps down."""

    broker: BrokerId


@record
class InitializeController:
    """onControllerFailover: set up feature versioning (KIP-584), read the brokers, arm the watch."""

    controller: BrokerId


@record
class ProcessBrokerChange:
    """Handle a /brokers/ids child notification: classify new, dead and bounced brokers (KIP-380)."""

    controller: BrokerId


@record
class ElectPartitionLeader:
    """Elect a live ISR replica for a partition whose leader is not live, and tell the replicas."""

    controller: BrokerId
    partition: PartitionId


@record
class UpdateFeatures:
    """An operator's UpdateFeatures request, handled by whoever believes it is the controller. (perturbation)"""

    controller: BrokerId
    feature: str
    level: FeatureLevel
    allow_downgrade: bool


Action = (
    ZkOutage
    | ZkRecover
    | ExpireSession
    | Drop
    | Deliver
    | CrashBroker
    | StopBroker
    | RestartBroker
    | ChangeIbp
    | OpenSession
    | RegisterBroker
    | SendControlledShutdown
    | RefreshFeatureCache
    | ObserveControllerEpoch
    | ElectController
    | ResignController
    | InitializeController
    | ProcessBrokerChange
    | ElectPartitionLeader
    | UpdateFeatures
)

ACTION_TYPES: tuple[type, ...] = Action.__args__  # type: ignore[attr-defined]

PERTURBATIONS: frozenset[type] = frozenset(
    {ZkOutage, ExpireSession, Drop, CrashBroker, StopBroker, ChangeIbp, UpdateFeatures, SendControlledShutdown}
)


def actor(action: Action) -> BrokerId | None:
    """The broker that takes the action, if one does."""
    for name in ("broker", "controller"):
        if hasattr(action, name):
            return getattr(action, name)
    return None
