"""The KRaft RPCs as dataclasses, with Kafka's request and field names (clients/.../message/*.json).

Rules:
- A request is what ``Rpc(dest, request)`` carries; the handler's generator returns the response.
- Field names are Kafka's, in snake case. A few fields are not on Kafka's wire; each says so
  with a ``# Differs:`` line. Most of those tell the requester whether the peer's state changed,
  because the model's exchange is one atomic step that is refused when it changes nothing, and
  the requester is the node that names (``Trace``) or refuses it.
- Errors are Kafka's codes (``ApiError``, from Errors.java).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from model.kraft import LogEntry


class ApiError(IntEnum):
    """The Kafka error codes these RPCs answer with (clients/.../protocol/Errors.java)."""

    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    BROKER_NOT_AVAILABLE = 8
    UNSUPPORTED_VERSION = 35
    INVALID_REPLICA_ASSIGNMENT = 39
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    FENCED_LEADER_EPOCH = 74
    STALE_BROKER_EPOCH = 77
    THROTTLING_QUOTA_EXCEEDED = 89  # KIP-866 §Unavailable ZooKeeper: the write-behind lag is at its bound
    INVALID_UPDATE_VERSION = 95
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INELIGIBLE_REPLICA = 107


# ---- the Raft quorum (KIP-595) --------------------------------------------------------------------

@dataclass(frozen=True)
class VoteRequest:
    candidate_id: int
    candidate_epoch: int
    last_offset_epoch: int  # the epoch of the candidate's last entry (0 when empty)
    last_offset: int  # the candidate's log end offset


@dataclass(frozen=True)
class VoteResponse:
    error: ApiError
    leader_epoch: int  # the voter's epoch after it handled the request
    leader_id: int | None  # the leader the voter knows in that epoch
    vote_granted: bool
    # Differs: not on Kafka's wire; the voter stepped into the candidate's epoch (its state changed).
    voter_changed: bool = False


@dataclass(frozen=True)
class FetchRequest:
    replica_id: int
    replica_epoch: int  # the follower's epoch (Kafka's CurrentLeaderEpoch)
    fetch_offset: int
    last_fetched_epoch: int
    # Differs: not on Kafka's wire. A leader that learns a newer epoch from a fetch follows the
    # fetcher's leader (the model's rule), and refuses a fetch from a leader of its own epoch.
    replica_leader_id: int | None = None
    replica_is_leader: bool = False
    # Differs: the model's Fetch is one exchange; a final fetch (no divergence left) acknowledges
    # what it returns at once, so the leader counts the returned entries as replicated.
    acknowledge: bool = False


@dataclass(frozen=True)
class FetchResponse:
    error: ApiError
    leader_epoch: int
    leader_id: int | None
    high_watermark: int = 0
    diverging_epoch: int = -1  # -1: no divergence
    diverging_end_offset: int = -1
    records: tuple[LogEntry, ...] = ()
    # Differs: not on Kafka's wire; the leader's replication state (its fetched offsets, its HW) moved.
    leader_changed: bool = False


@dataclass(frozen=True)
class ApiVersionsRequest:
    """Asked of every voter: its ``ZkMigrationReady`` (KIP-866 §Migration Trigger 5, ApiVersionsResponse)."""


@dataclass(frozen=True)
class ApiVersionsResponse:
    zk_migration_ready: bool  # zookeeper.metadata.migration.enable and the ZooKeeper configs are set
    # Differs: not on Kafka's wire; KIP-866 §Finalizing the Migration needs every member's flag alone.
    migration_enabled: bool = False


# ---- brokers and the active controller (KIP-500, KIP-866 §Broker Registration) ---------------------

@dataclass(frozen=True)
class BrokerRegistrationRequest:
    broker_id: int
    incarnation_id: int
    is_migrating_zk_broker: bool
    ibp: int  # model.types.Ibp's value: the metadata.version advertised as [ibp, ibp]


@dataclass(frozen=True)
class BrokerRegistrationResponse:
    error: ApiError
    broker_epoch: int = -1
    # the request waits in the controller's purgatory until its record commits (``BrokerRegistrationAnswer``)
    deferred: bool = False


@dataclass(frozen=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int  # entries of the metadata log the broker has replayed
    want_shut_down: bool
    # Differs: not on Kafka's wire; a ZK broker does not replay the log, and counts as caught up.
    is_migrating_zk_broker: bool = False


@dataclass(frozen=True)
class BrokerHeartbeatResponse:
    error: ApiError
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False
    # Differs: not on Kafka's wire; the registration is in controlled shutdown (a broker stays Stopping).
    in_controlled_shutdown: bool = False
    # Differs: not on Kafka's wire; this heartbeat appended records (it changed the controller's log).
    appended: bool = False
    # Differs: not on Kafka's wire; this heartbeat unfenced the broker.
    unfenced: bool = False
    # the request waits in the controller's purgatory until the log up to it is stable (``BrokerHeartbeatAnswer``)
    deferred: bool = False


@dataclass(frozen=True)
class MetadataFetchRequest:
    """A broker's fetch of the committed metadata log (it fetches as a Raft observer in Kafka)."""

    broker_id: int
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(frozen=True)
class MetadataFetchResponse:
    error: ApiError
    high_watermark: int = 0
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    records: tuple[LogEntry, ...] = ()  # committed entries from fetch_offset up to the high watermark


@dataclass(frozen=True)
class BrokerSessionTimedOut:
    """The active controller fenced this registration because its heartbeats stopped.

    Differs: Kafka's broker learns it from its next heartbeat; the model moves a live KRaft
    broker to Fenced at the timeout itself, so the controller tells it in the same step.
    """

    broker_id: int
    incarnation_id: int
    broker_epoch: int


@dataclass(frozen=True)
class BrokerSessionTimedOutResponse:
    changed: bool  # the broker was that incarnation with that epoch (its lifecycle moved)


@dataclass(frozen=True)
class BrokerRegistrationAnswer:
    """The answer to a deferred BrokerRegistration, once its record committed (NONE, with the epoch) or once the
    controller resigned or stopped (NOT_CONTROLLER): QuorumController's deferred event queue completing the
    request's future. Sent on the request's own connection: a network partition that opens later does not
    lose it (the cluster does not check reachability for it)."""

    broker_id: int
    incarnation_id: int
    error: ApiError
    broker_epoch: int = -1


@dataclass(frozen=True)
class BrokerRegistrationAnswerResponse:
    taken: bool  # the process that asked took the epoch


@dataclass(frozen=True)
class BrokerHeartbeatAnswer:
    """The answer to a deferred BrokerHeartbeat, once the log up to it is stable (NONE, with the response decided
    when the heartbeat was handled) or once the controller resigned or stopped (NOT_CONTROLLER). Sent on the
    request's own connection, as ``BrokerRegistrationAnswer``."""

    broker_id: int
    incarnation_id: int
    error: ApiError
    response: BrokerHeartbeatResponse | None = None


@dataclass(frozen=True)
class BrokerHeartbeatAnswerResponse:
    taken: bool  # the process that asked took the answer


@dataclass(frozen=True)
class AlterPartitionRequest:
    """A partition leader's ISR change (AlterPartition), here only the ISR join of a reassignment's adding replica."""

    broker_id: int  # the leader asking
    partition: int
    leader_epoch: int  # the epoch it leads at
    # Differs: Kafka's request carries the whole new ISR; a ZK broker here keeps no ISR, so it names the one joining.
    joining: int


@dataclass(frozen=True)
class AlterPartitionResponse:
    error: ApiError
    # Differs: not on Kafka's wire; this request appended a record (it changed the controller's log).
    appended: bool = False


# The request types each kind of node serves (a node's ``handle(RpcRequest)`` dispatches on them).
CONTROLLER_REQUESTS: tuple[type, ...] = (
    VoteRequest, FetchRequest, ApiVersionsRequest, BrokerRegistrationRequest, BrokerHeartbeatRequest,
    MetadataFetchRequest, AlterPartitionRequest,
)
BROKER_REQUESTS: tuple[type, ...] = (BrokerSessionTimedOut, BrokerRegistrationAnswer, BrokerHeartbeatAnswer)
