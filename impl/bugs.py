"""Seeded bugs of the implementation: plausible mistakes, each switched on by name in one node.

Rules:
- A bug is a member of ``ImplBug``; a node receives the set it runs with and tests
  ``bug in self.bugs`` exactly where the mistake would be made, nowhere else.
- Each bug names the model property it is expected to break (``IMPL_SEEDED_BUGS``), and the
  scope whose differential run must catch it; a bug that stalls progress (its property is an
  EVENTUALLY one) is caught by the progress check of seeded simulator runs of its scope.
  ``kraftcheck mutants`` lists them with ``layer: "impl"``; a test requires that differential
  testing or the invariants catch each.
- A mistake of the design is made by the model and the implementation alike: an ``ImplBug`` paired
  with a model ``Bug`` (``SHARED_SEEDED_BUGS``, ``layer: "shared"``). Run together, the two agree,
  and only the model-independent property the pair names may catch it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from model.bugs import SEEDED_BUGS_BY_NAME, Bug, SeededBug


class ImplBug(Enum):
    # ZooKeeper-mode brokers and the ZooKeeper controller (impl.broker, impl.zk_controller)
    ACCEPT_OLDER_BROKER_EPOCH = "impl_accept_older_broker_epoch"
    ACCEPT_STALE_CONTROLLER_EPOCH = "impl_accept_stale_controller_epoch"
    CONTROLLER_WRITE_WITHOUT_EPOCH_CHECK = "impl_controller_write_without_epoch_check"
    ELECTION_SETS_EPOCH_WITHOUT_VERSION = "impl_election_sets_epoch_without_version"
    ELECTION_CHECKS_EPOCH_BY_READ = "impl_election_checks_epoch_by_read"
    BROKER_EPOCH_FROM_SESSION_ID = "impl_broker_epoch_from_session_id"
    FEATURE_CACHE_GOES_BACK = "impl_feature_cache_goes_back"
    # KRaft controllers and the migration driver (impl.kraft_controller)
    DUAL_WRITE_WITHOUT_EPOCH_CHECK = "impl_dual_write_without_epoch_check"
    STALE_MIGRATION_VERSION_AFTER_CLAIM = "impl_stale_migration_version_after_claim"
    LEADER_AND_ISR_BEFORE_UPDATE_METADATA = "impl_leader_and_isr_before_update_metadata"
    MIGRATION_EVENT_IN_WRONG_DRIVER_STATE = "impl_migration_event_in_wrong_driver_state"
    HEARTBEAT_ACCEPTS_OLDER_BROKER_EPOCH = "impl_heartbeat_accepts_older_broker_epoch"
    RETRIED_REGISTRATION_NEW_EPOCH = "impl_retried_registration_new_epoch"
    REGISTRATION_DECIDED_BY_FENCE = "impl_registration_decided_by_fence"
    LOST_REGISTRATION_GUESSES_EPOCH = "impl_lost_registration_guesses_epoch"
    VOTE_IGNORES_LOG = "impl_vote_ignores_log"
    CLAIM_WITHOUT_EPOCH_CAS = "impl_claim_without_epoch_cas"
    COMPLETE_BEFORE_LAST_BATCH = "impl_complete_before_last_batch"
    BATCH_ENDS_TRANSACTION = "impl_batch_ends_transaction"
    CLAIM_TRUSTS_STALE_READ = "impl_claim_trusts_stale_read"
    DUAL_WRITE_DELTA_OF_LAST_RECORD = "impl_dual_write_delta_of_last_record"
    DUAL_WRITE_SETS_NEW_PARTITION = "impl_dual_write_sets_new_partition"
    MIGRATION_SKIPS_UNSTARTED_PARTITION = "impl_migration_skips_unstarted_partition"
    STALE_EVENT_RUNS = "impl_stale_event_runs"
    FAILED_WRITE_DROPS_DELTA = "impl_failed_write_drops_delta"
    RESEND_KEEPS_STALE_VERSION = "impl_resend_keeps_stale_version"
    DELETION_SENDS_NO_STOP_REPLICA = "impl_deletion_sends_no_stop_replica"
    # Reached only by a campaign's drawn configurations and admin requests (impl.sim.scenarios)
    ADMIT_ZK_BROKER_WITH_OTHER_IBP = "impl_admit_zk_broker_with_other_ibp"
    MV_CHANGE_DURING_MIGRATION = "impl_mv_change_during_migration"
    FINALIZE_LEVEL_ZERO = "impl_finalize_level_zero"
    # Progress (properties.progress): each makes a node leave out a step it should offer, so the implementation
    # never disagrees with the model at a step; the cluster just stops getting anywhere.
    RESTARTED_BROKER_KEEPS_DEAD_SESSION = "impl_restarted_broker_keeps_dead_session"
    REELECTED_CONTROLLER_IGNORES_BROKER_CHANGE = "impl_reelected_controller_ignores_broker_change"
    READY_COMPARES_ZK_EPOCH = "impl_ready_compares_zk_epoch"
    RPCS_WAIT_FOR_NEWER_OFFSET = "impl_rpcs_wait_for_newer_offset"
    INACTIVE_IGNORES_LEADERSHIP = "impl_inactive_ignores_leadership"
    FENCED_BROKER_HEARTBEATS_WHEN_CAUGHT_UP = "impl_fenced_broker_heartbeats_when_caught_up"
    ZK_BROKER_HEARTBEATS_WHEN_CAUGHT_UP = "impl_zk_broker_heartbeats_when_caught_up"
    REASSIGNMENT_COMPLETES_EARLY = "impl_reassignment_completes_early"
    # Mistakes of the design, each made by the model too (``SHARED_SEEDED_BUGS``)
    DUAL_WRITE_RPCS_BEFORE_ZK = "impl_dual_write_rpcs_before_zk"
    ZK_BROKER_KEEPS_REMOVED_BROKERS = "impl_zk_broker_keeps_removed_brokers"
    TIMEOUT_IGNORES_ZK_BROKER_HEARTBEATS = "impl_timeout_ignores_zk_broker_heartbeats"
    SAFE_DOWNGRADE_LOSES_METADATA = "impl_safe_downgrade_loses_metadata"
    REASSIGNMENT_KEEPS_LEADER_EPOCH = "impl_reassignment_keeps_leader_epoch"
    DELETION_STOPS_WITHOUT_DELETE = "impl_deletion_stops_without_delete"
    MIGRATES_PENDING_DELETION = "impl_migrates_pending_deletion"
    FENCED_WRITE_ADOPTS_NEWER_CLAIM = "impl_fenced_write_adopts_newer_claim"
    METADATA_FETCH_PAST_HIGH_WATERMARK = "impl_metadata_fetch_past_high_watermark"
    REGISTRATION_ANSWERED_BEFORE_COMMIT = "impl_registration_answered_before_commit"
    HEARTBEAT_ANSWERED_BEFORE_COMMIT = "impl_heartbeat_answered_before_commit"
    REASSIGNMENT_SENDS_NO_STOP_REPLICA = "impl_reassignment_sends_no_stop_replica"
    DELETION_SKIPS_FENCED_BROKER = "impl_deletion_skips_fenced_broker"


@dataclass(frozen=True)
class ImplSeededBug:
    bug: ImplBug
    invariant: str  # the model property the mistake breaks, when the abstraction shows it
    scope: str  # the scope whose differential run must catch it
    mistake: str  # one line: what the buggy code does

    @property
    def name(self) -> str:
        return self.bug.value


IMPL_SEEDED_BUGS: tuple[ImplSeededBug, ...] = (
    # impl.broker and impl.zk_controller (tests/test_impl_zk.py catches each in its situation and by walks)
    ImplSeededBug(ImplBug.ACCEPT_OLDER_BROKER_EPOCH, "NoStaleControlRequestApplied", "bounce",
                  "a broker applies a control request addressed to an earlier generation of itself"),
    ImplSeededBug(ImplBug.ACCEPT_STALE_CONTROLLER_EPOCH, "NoStaleControlRequestApplied", "fencing",
                  "a broker skips the controller-epoch check and takes the request's (older) epoch as its own"),
    ImplSeededBug(ImplBug.CONTROLLER_WRITE_WITHOUT_EPOCH_CHECK, "OnlyCurrentControllerWritesApply", "fencing",
                  "the controller's ZooKeeper multis leave out the check of /controller_epoch's version"),
    ImplSeededBug(ImplBug.ELECTION_SETS_EPOCH_WITHOUT_VERSION, "AtMostOneControllerPerEpoch", "fencing",
                  "the election multi sets /controller_epoch with version -1 instead of the version read"),
    ImplSeededBug(ImplBug.ELECTION_CHECKS_EPOCH_BY_READ, "AtMostOneControllerPerEpoch", "zk-lag",
                  "the election reads /controller_epoch again and sets it with version -1 when it still shows what"
                  " the broker observed: safe only when its ZooKeeper server does not lag"),
    ImplSeededBug(ImplBug.BROKER_EPOCH_FROM_SESSION_ID, "BrokerEpochIsRegistrationCzxid", "bounce",
                  "the broker takes its ZooKeeper session id as its epoch (KIP-380's rejected alternative)"),
    ImplSeededBug(ImplBug.FEATURE_CACHE_GOES_BACK, "BrokerFeatureCacheNeverGoesBack", "features-downgrade",
                  "a broker clears its feature cache, epoch included, when /features turns Disabled (as Kafka does)"),
    # impl.kraft_controller and impl.kraft (tests/test_impl_kraft.py catches each by walks or a scripted situation)
    ImplSeededBug(ImplBug.REASSIGNMENT_COMPLETES_EARLY, "ReassignmentCompletesWithTargetInIsr", "reassignment",
                  "the controller completes a reassignment before every adding replica has joined the ISR (its"
                  " completion check skipped): its first record already drops the adding and removing replicas"),
    ImplSeededBug(ImplBug.DUAL_WRITE_WITHOUT_EPOCH_CHECK, "OnlyCurrentKRaftLeaderWritesApply", "dual-write",
                  "the dual-write multi leaves out the /controller_epoch check: only the /migration CAS fences it"),
    ImplSeededBug(ImplBug.STALE_MIGRATION_VERSION_AFTER_CLAIM, "MigrationReachesDualWriteWithoutFaults", "handover",
                  "after its claim writes /migration, the driver keeps the /migration version it had before"),
    ImplSeededBug(ImplBug.LEADER_AND_ISR_BEFORE_UPDATE_METADATA, "UpdateMetadataBeforeLeaderAndIsr", "migration",
                  "SendRPCsToBrokers and dual writes queue a ZK broker's LeaderAndIsr before its UpdateMetadata"),
    ImplSeededBug(ImplBug.MIGRATION_EVENT_IN_WRONG_DRIVER_STATE, "DriverTakesOnlyTableTransitions", "migration",
                  "a KRaftLeaderEvent that finds its node leading again goes to WAIT_FOR_CONTROLLER_QUORUM from any"
                  " state, not only from INACTIVE"),
    ImplSeededBug(ImplBug.HEARTBEAT_ACCEPTS_OLDER_BROKER_EPOCH, "StaleHeartbeatWritesNothing", "held-heartbeats",
                  "a heartbeat whose broker epoch is older than the broker's registration is served, not STALE"),
    ImplSeededBug(ImplBug.RETRIED_REGISTRATION_NEW_EPOCH, "OneBrokerEpochPerIncarnation", "lost-responses",
                  "the controller takes a registration retried with the same incarnation for a new broker: a new"
                  " epoch, fenced again"),
    ImplSeededBug(ImplBug.REGISTRATION_DECIDED_BY_FENCE, "LiveFencedBrokerEventuallyUnfenced", "kraft-broker-restart",
                  "registerBroker refuses a new incarnation while the old registration is unfenced, its session lapsed"
                  " or not: a broker restarted before the fencing loop ran waits for it (or, unfenced forever, never"
                  " comes back)"),
    ImplSeededBug(ImplBug.LOST_REGISTRATION_GUESSES_EPOCH, "BrokerEpochGivenByController", "lost-responses",
                  "a broker whose registration timed out takes the offset it has replayed to as its epoch"),
    ImplSeededBug(ImplBug.VOTE_IGNORES_LOG, "CommittedRecordsNeverChange", "kraft-quorum",
                  "a voter grants its vote without comparing the candidate's log with its own"),
    ImplSeededBug(ImplBug.CLAIM_WITHOUT_EPOCH_CAS, "ZkControllerEpochsIncreaseAcrossHandOver", "migration",
                  "the claim sets /controller_epoch with version -1 to the value its driver read at recovery + 1"),
    ImplSeededBug(ImplBug.BATCH_ENDS_TRANSACTION, "InitialMigrationAllOrNothing", "batched-migration",
                  "each batch of the migration is a metadata transaction of its own, applied once it commits"),
    ImplSeededBug(ImplBug.CLAIM_TRUSTS_STALE_READ, "ZkControllerEpochsIncreaseAcrossHandOver", "stale-reads",
                  "the claim's multi sets /controller_epoch and replaces /controller with version -1, trusting what"
                  " it read from a ZooKeeper server that may lag"),
    ImplSeededBug(ImplBug.DUAL_WRITE_DELTA_OF_LAST_RECORD, "ZkEqualsImageAtMigrationOffset", "broker-migration",
                  "the dual write writes the change of the newest committed record only, not every change since"
                  " /migration's offset"),
    ImplSeededBug(ImplBug.DUAL_WRITE_SETS_NEW_PARTITION, "KRaftZkWritesFailOnlyOnStaleReads", "create-partitions",
                  "the KRaft-to-ZooKeeper writer sets a new partition's state znode instead of creating it (and its"
                  " parent): NoNode on every retry"),
    ImplSeededBug(ImplBug.MIGRATION_SKIPS_UNSTARTED_PARTITION, "InitialMigrationAllOrNothing", "create-partitions",
                  "the initial migration skips a partition the assignment holds with no state znode yet"),
    ImplSeededBug(ImplBug.STALE_EVENT_RUNS, "MigrationOffsetNeverGoesBack", "event-queue",
                  "a queued MetadataChangeEvent raised under another leader and epoch runs (no KAFKA-16667 check), its"
                  " image taken as the newest: ZooKeeper and /migration go back to it"),
    ImplSeededBug(ImplBug.FAILED_WRITE_DROPS_DELTA, "ZkEqualsImageAtMigrationOffset", "dual-write-failure",
                  "a dual write that failed (its session expired) has handed the driver its image, and the next dual"
                  " write writes only the delta since that image (Kafka 3.9's rule): /migration moves past the lost"
                  " change"),
    ImplSeededBug(ImplBug.RESEND_KEEPS_STALE_VERSION, "ZkBrokersConvergeToCommittedImage", "dual-write-resend",
                  "a dual write ZooKeeper applied but whose reply was lost is resent; the copy fails on /migration's"
                  " version and the driver keeps the stale one (Kafka 3.9's rule): the change's LeaderAndIsr is never"
                  " sent, and every later dual write fails"),
    ImplSeededBug(ImplBug.DELETION_SENDS_NO_STOP_REPLICA, "ZkBrokersDropDeletedTopic", "delete-topics",
                  "the dual write of a topic deleted on KRaft deletes it from ZooKeeper and tells the ZK brokers'"
                  " metadata, but sends them no StopReplica: they keep hosting its partitions"),
    # reached only by a campaign's drawn configurations (mixed IBPs, batch sizes) and admin requests
    ImplSeededBug(ImplBug.ADMIT_ZK_BROKER_WITH_OTHER_IBP, "ZkBrokersAdmittedAtMetadataVersion", "sim-migration",
                  "the KRaft controller registers a ZK broker whose IBP is not the finalized metadata.version"),
    ImplSeededBug(ImplBug.COMPLETE_BEFORE_LAST_BATCH, "InitialMigrationAllOrNothing", "sim-migration",
                  "the driver takes its first batch for the whole of ZooKeeper and completes the migration after it"
                  " (a drawn batch size below ZooKeeper's records reaches it)"),
    ImplSeededBug(ImplBug.MV_CHANGE_DURING_MIGRATION, "MetadataVersionFixedDuringMigration", "finalize",
                  "the active controller changes metadata.version while the migration is in progress"),
    ImplSeededBug(ImplBug.FINALIZE_LEVEL_ZERO, "FinalizedFeaturesWellFormed", "features",
                  "the ZooKeeper controller finalizes an AllowDowngrade update to level 0 instead of deleting the"
                  " feature"),
    # progress: caught by the progress check of simulator runs (properties.progress), as a campaign does
    ImplSeededBug(ImplBug.RESTARTED_BROKER_KEEPS_DEAD_SESSION, "EveryLiveBrokerEventuallyRegistered",
                  "sim-migration",
                  "a restarted ZooKeeper broker never opens a session: it waits for the one its host had before"),
    ImplSeededBug(ImplBug.REELECTED_CONTROLLER_IGNORES_BROKER_CHANGE, "ControllerEventuallySeesEveryBroker", "bounce",
                  "a broker elected controller a second time in one process never handles a broker change (its"
                  " handler was unregistered when it resigned)"),
    ImplSeededBug(ImplBug.READY_COMPARES_ZK_EPOCH, "DriverLeavesWaitForBrokersWhenReady", "sim-migration",
                  "the driver counts a ZK broker as registered only if its KRaft broker epoch equals its"
                  " /brokers/ids czxid"),
    ImplSeededBug(ImplBug.RPCS_WAIT_FOR_NEWER_OFFSET, "MigrationReachesDualWriteWithoutFaults", "sim-migration",
                  "the driver sends its RPCs to the brokers only for an image newer than /migration's offset, not"
                  " as new (off by one)"),
    ImplSeededBug(ImplBug.INACTIVE_IGNORES_LEADERSHIP, "ActiveDriverNeverStaysInactive", "sim-migration",
                  "an INACTIVE driver whose node led before ignores its node's becoming the leader again"),
    ImplSeededBug(ImplBug.FENCED_BROKER_HEARTBEATS_WHEN_CAUGHT_UP, "LiveFencedBrokerEventuallyUnfenced",
                  "sim-migration",
                  "a fenced KRaft broker heartbeats only once it counts itself caught up, and counts one record too"
                  " many after its registration"),
    ImplSeededBug(ImplBug.ZK_BROKER_HEARTBEATS_WHEN_CAUGHT_UP, "MigratingZkBrokerEventuallyUnfenced", "sim-migration",
                  "a migrating ZK broker, as a KRaft broker does, heartbeats only once it has replayed past its"
                  " registration: it replays no log, so it never heartbeats and KRaft never unfences it"),
)


# ---- mistakes of the design, made alike by the model and the implementation ---------------------


@dataclass(frozen=True)
class SharedSeededBug:
    """A mistake in the design itself: the model (``model.bugs``) and the implementation make it alike, so
    differential testing sees them agree and every property that restates the model's rules agrees with
    both. Only the model-independent property it names (``model.end_to_end_invariants``) can catch it, with
    those of ``also_breaks``, model-independent too, at the same step; switched on by its name, both are run
    together (``properties.plan.resolve_mutant``)."""

    model_bug: Bug
    bug: ImplBug
    invariant: str  # the model-independent property it breaks (the model bug's, in model.bugs)
    also_breaks: tuple[str, ...] = ()  # other model-independent properties it breaks at the same step

    @property
    def breaks(self) -> frozenset[str]:
        return frozenset({self.invariant, *self.also_breaks})

    @property
    def name(self) -> str:
        return f"shared_{self.model_bug.value}"

    @property
    def seeded(self) -> SeededBug:
        return SEEDED_BUGS_BY_NAME[self.model_bug.value]

    @property
    def scope(self) -> str:
        return self.seeded.scope

    @property
    def mistake(self) -> str:
        return self.seeded.mistake


SHARED_SEEDED_BUGS: tuple[SharedSeededBug, ...] = tuple(
    SharedSeededBug(model_bug, bug, SEEDED_BUGS_BY_NAME[model_bug.value].invariant, *also_breaks)
    for model_bug, bug, *also_breaks in (
        (Bug.DUAL_WRITE_RPCS_BEFORE_ZK, ImplBug.DUAL_WRITE_RPCS_BEFORE_ZK),
        (Bug.ZK_BROKER_KEEPS_REMOVED_BROKERS, ImplBug.ZK_BROKER_KEEPS_REMOVED_BROKERS),
        (Bug.TIMEOUT_IGNORES_ZK_BROKER_HEARTBEATS, ImplBug.TIMEOUT_IGNORES_ZK_BROKER_HEARTBEATS),
        (Bug.SAFE_DOWNGRADE_LOSES_METADATA, ImplBug.SAFE_DOWNGRADE_LOSES_METADATA),
        (Bug.FENCED_WRITE_ADOPTS_NEWER_CLAIM, ImplBug.FENCED_WRITE_ADOPTS_NEWER_CLAIM),
        (Bug.METADATA_FETCH_PAST_HIGH_WATERMARK, ImplBug.METADATA_FETCH_PAST_HIGH_WATERMARK),
        (Bug.REASSIGNMENT_KEEPS_LEADER_EPOCH, ImplBug.REASSIGNMENT_KEEPS_LEADER_EPOCH),
        (Bug.DELETION_STOPS_WITHOUT_DELETE, ImplBug.DELETION_STOPS_WITHOUT_DELETE),
        (Bug.MIGRATES_PENDING_DELETION, ImplBug.MIGRATES_PENDING_DELETION),
        (Bug.REGISTRATION_ANSWERED_BEFORE_COMMIT, ImplBug.REGISTRATION_ANSWERED_BEFORE_COMMIT),
        (Bug.HEARTBEAT_ANSWERED_BEFORE_COMMIT, ImplBug.HEARTBEAT_ANSWERED_BEFORE_COMMIT),
        (Bug.REASSIGNMENT_SENDS_NO_STOP_REPLICA, ImplBug.REASSIGNMENT_SENDS_NO_STOP_REPLICA),
        # the broker away at the deletion keeps the topic cached as well as hosted
        (Bug.DELETION_SKIPS_FENCED_BROKER, ImplBug.DELETION_SKIPS_FENCED_BROKER,
         ("ZkBrokersConvergeToCommittedImage",)),
    )
)
