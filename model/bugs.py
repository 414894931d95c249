"""Seeded bugs: named, plausible mistakes that the model can be told to make.

Rules:
- A seeded bug is a one-line deviation inside ``step`` (or the ZooKeeper model it calls),
  switched on by naming it in a ``Variant``; the correct model is ``Variant()``.
- Every seeded bug names the invariant it is meant to break and the scope whose bounded search
  must find the break (``properties.mutants`` runs them; ``tests/test_seeded_bugs.py`` pins it).
- Every invariant is the target of at least one seeded bug; a bug that no check catches means
  the invariant or the search is too weak, and the fix is never to drop the bug.
"""

from __future__ import annotations

from enum import Enum

from model.migration import Profile
from model.record import Record, record


class Bug(Enum):
    """Seeded bugs in the model, named after the mistake they make."""

    # ZooKeeper itself
    MULTI_APPLIES_PREFIX = "multi_applies_prefix"
    WRITE_WITHOUT_ZXID = "write_without_zxid"
    SETDATA_RESETS_CZXID = "setdata_resets_czxid"
    EXPIRY_KEEPS_EPHEMERALS = "expiry_keeps_ephemerals"
    # ZK controller election and epoch fencing
    ELECTION_WITHOUT_EPOCH_CAS = "election_without_epoch_cas"
    ELECTION_REUSES_EPOCH = "election_reuses_epoch"
    ELECTION_CHECKS_EPOCH_BY_READ = "election_checks_epoch_by_read"
    STOP_DELETES_CONTROLLER_EPOCH = "stop_deletes_controller_epoch"
    SKIP_CONTROLLER_EPOCH_CHECK = "skip_controller_epoch_check"
    # Broker generations (KIP-380)
    BROKER_KEEPS_OLD_EPOCH = "broker_keeps_old_epoch"
    BROKER_EPOCH_FROM_SESSION_ID = "broker_epoch_from_session_id"
    ACCEPT_STALE_BROKER_EPOCH = "accept_stale_broker_epoch"
    ACCEPT_STALE_CONTROLLER_EPOCH = "accept_stale_controller_epoch"
    SERVE_BEFORE_REGISTERING = "serve_before_registering"
    BOUNCE_SKIPS_BROKER_FAILURE = "bounce_skips_broker_failure"
    BROKER_CHANGE_IGNORES_CZXID = "broker_change_ignores_czxid"
    BROKER_CHANGE_WATCH_NOT_REARMED = "broker_change_watch_not_rearmed"
    RESTARTED_BROKER_KEEPS_DEAD_SESSION = "restarted_broker_keeps_dead_session"
    SHUTDOWN_IGNORES_BROKER_EPOCH = "shutdown_ignores_broker_epoch"
    ACCEPT_OLDER_LEADER_EPOCH = "accept_older_leader_epoch"
    SHUTDOWN_SHRINKS_LEADER_OUT_OF_ISR = "shutdown_shrinks_leader_out_of_isr"
    # Feature versioning (KIP-584)
    FINALIZE_LEVEL_ZERO = "finalize_level_zero"
    ADMIT_INCOMPATIBLE_BROKER = "admit_incompatible_broker"
    UPDATE_SKIPS_BROKER_CHECK = "update_skips_broker_check"
    RECREATE_FEATURES_ZNODE = "recreate_features_znode"
    DISABLE_KEEPS_FEATURES = "disable_keeps_features"
    BROKER_RESETS_FEATURE_EPOCH = "broker_resets_feature_epoch"
    # The KRaft quorum (KIP-500)
    VOTE_TWICE_IN_EPOCH = "vote_twice_in_epoch"
    VOTE_IGNORES_LOG = "vote_ignores_log"
    RESTART_FORGETS_EPOCH = "restart_forgets_epoch"
    COMMIT_WITHOUT_MAJORITY = "commit_without_majority"
    LEADER_RESETS_HIGH_WATERMARK = "leader_resets_high_watermark"
    ACTIVATE_ON_UNCOMMITTED_LOG = "activate_on_uncommitted_log"
    # Broker lifecycle on KRaft
    BROKER_EPOCH_FROM_INCARNATION = "broker_epoch_from_incarnation"
    UNFENCE_BEFORE_CAUGHT_UP = "unfence_before_caught_up"
    CAUGHT_UP_OFF_BY_ONE = "caught_up_off_by_one"
    SERVE_FENCED_BROKERS = "serve_fenced_brokers"
    KRAFT_BROKER_TAKES_LIVE_ZK_ID = "kraft_broker_takes_live_zk_id"
    ADMIT_ZK_BROKER_WITH_OTHER_IBP = "admit_zk_broker_with_other_ibp"
    # A response lost after its request took effect (the ``lost-responses`` scope)
    RETRIED_REGISTRATION_NEW_EPOCH = "retried_registration_new_epoch"
    LOST_REGISTRATION_GUESSES_EPOCH = "lost_registration_guesses_epoch"
    # A heartbeat held in the network and delivered late (the ``held-heartbeats`` scope)
    HEARTBEAT_ACCEPTS_OLDER_BROKER_EPOCH = "heartbeat_accepts_older_broker_epoch"
    # The migration (KIP-866)
    DRIVER_SKIPS_TO_DUAL_WRITE = "driver_skips_to_dual_write"
    DUAL_WRITE_BEFORE_SYNC = "dual_write_before_sync"
    DUAL_WRITE_UNCOMMITTED = "dual_write_uncommitted"
    DUAL_WRITE_DROPS_CONFIG = "dual_write_drops_config"
    DUAL_WRITE_DELTA_OF_LAST_RECORD = "dual_write_delta_of_last_record"
    LEADER_AND_ISR_BEFORE_UPDATE_METADATA = "leader_and_isr_before_update_metadata"
    DUAL_WRITE_SKIPS_EPOCH_CHECK = "dual_write_skips_epoch_check"
    CLAIM_REUSES_ZK_EPOCH = "claim_reuses_zk_epoch"
    CLAIM_IGNORES_NEWER_KRAFT_EPOCH = "claim_ignores_newer_kraft_epoch"
    CLAIM_TRUSTS_STALE_READ = "claim_trusts_stale_read"
    # Partitions created during the migration (the ``create-partitions`` scope)
    DUAL_WRITE_SETS_NEW_PARTITION = "dual_write_sets_new_partition"
    DUAL_WRITE_KEEPS_ASSIGNMENT = "dual_write_keeps_assignment"
    MIGRATION_SKIPS_UNSTARTED_PARTITION = "migration_skips_unstarted_partition"
    # Reassignments during the migration (the ``reassignment`` scope)
    REASSIGNMENT_KEEPS_LEADER_EPOCH = "reassignment_keeps_leader_epoch"
    REASSIGNMENT_COMPLETES_EARLY = "reassignment_completes_early"
    # Topic deletions during the migration (the ``delete-topics`` scope)
    DELETION_STOPS_WITHOUT_DELETE = "deletion_stops_without_delete"
    MIGRATES_PENDING_DELETION = "migrates_pending_deletion"
    DELETION_SKIPS_FENCED_BROKER = "deletion_skips_fenced_broker"
    STALE_EVENT_RUNS = "stale_event_runs"
    FAILED_WRITE_DROPS_DELTA = "failed_write_drops_delta"
    RESEND_KEEPS_STALE_VERSION = "resend_keeps_stale_version"
    RPCS_WAIT_FOR_NEWER_OFFSET = "rpcs_wait_for_newer_offset"
    MIGRATION_OUTSIDE_TRANSACTION = "migration_outside_transaction"
    NO_ABORT_ON_FAILOVER = "no_abort_on_failover"
    COMPLETE_BEFORE_LAST_BATCH = "complete_before_last_batch"
    BATCH_ENDS_TRANSACTION = "batch_ends_transaction"
    PRE_MIGRATION_ACCEPTS_WRITES = "pre_migration_accepts_writes"
    IGNORE_LAG_BOUND = "ignore_lag_bound"
    REENTER_MIGRATION_AFTER_FINALIZE = "reenter_migration_after_finalize"
    KRAFT_BORN_MIGRATES = "kraft_born_migrates"
    MV_CHANGE_DURING_MIGRATION = "mv_change_during_migration"
    SHUTDOWN_WITHOUT_ZK_CATCH_UP = "shutdown_without_zk_catch_up"
    SYNC_SKIPS_TOPIC_DELETION = "sync_skips_topic_deletion"
    WAIT_ONLY_FOR_LIVE_BROKERS = "wait_only_for_live_brokers"
    READY_COMPARES_ZK_EPOCH = "ready_compares_zk_epoch"
    INACTIVE_IGNORES_LEADERSHIP = "inactive_ignores_leadership"
    READINESS_READS_CONFIGURATION = "readiness_reads_configuration"
    # Mistakes of the design, made by the model and the implementation alike (impl.bugs.SHARED_SEEDED_BUGS):
    # only the model-independent properties (model.end_to_end_invariants) catch them.
    DUAL_WRITE_RPCS_BEFORE_ZK = "dual_write_rpcs_before_zk"
    ZK_BROKER_KEEPS_REMOVED_BROKERS = "zk_broker_keeps_removed_brokers"
    TIMEOUT_IGNORES_ZK_BROKER_HEARTBEATS = "timeout_ignores_zk_broker_heartbeats"
    SAFE_DOWNGRADE_LOSES_METADATA = "safe_downgrade_loses_metadata"
    FENCED_WRITE_ADOPTS_NEWER_CLAIM = "fenced_write_adopts_newer_claim"
    METADATA_FETCH_PAST_HIGH_WATERMARK = "metadata_fetch_past_high_watermark"
    REGISTRATION_ANSWERED_BEFORE_COMMIT = "registration_answered_before_commit"
    HEARTBEAT_ANSWERED_BEFORE_COMMIT = "heartbeat_answered_before_commit"
    HEARTBEAT_MANAGER_SURVIVES_ABORT = "heartbeat_manager_survives_abort"
    LEADER_AND_ISR_APPLIED_PART_WAY = "leader_and_isr_applied_part_way"
    REASSIGNMENT_SENDS_NO_STOP_REPLICA = "reassignment_sends_no_stop_replica"


@record
class Variant(Record):
    """Which model runs: the correct one (no bugs) or one with seeded bugs switched on."""

    bugs: frozenset[Bug] = frozenset()
    profile: Profile = Profile.KIP  # whose rules where the seeds and shipped Kafka differ

    def has(self, bug: Bug) -> bool:
        return bug in self.bugs


CORRECT = Variant()


@record
class SeededBug(Record):
    bug: Bug
    invariant: str  # the invariant it must break
    scope: str  # the scope whose bounded search must find the break
    mistake: str  # one line: what the buggy code does
    profile: Profile = Profile.KIP  # the rules the search runs under (a kafka-3.9 rule's bug: kafka-3.9)

    @property
    def name(self) -> str:
        return self.bug.value

    @property
    def variant(self) -> Variant:
        """The model with this bug switched on, under its profile."""
        return Variant(frozenset({self.bug}), self.profile)


SEEDED_BUGS: tuple[SeededBug, ...] = (
    SeededBug(Bug.MULTI_APPLIES_PREFIX, "MultiIsAllOrNothing", "election",
              "a failed multi keeps the ops that ran before the failing one"),
    SeededBug(Bug.WRITE_WITHOUT_ZXID, "ZxidStrictlyIncreases", "fencing",
              "setData changes a znode without taking a new zxid"),
    SeededBug(Bug.SETDATA_RESETS_CZXID, "CzxidFixedForNodeLife", "fencing",
              "setData stamps the znode's czxid with the write's zxid"),
    SeededBug(Bug.EXPIRY_KEEPS_EPHEMERALS, "EphemeralsOnlyForLiveSessions", "fencing",
              "session expiry removes the session but leaves its ephemeral znodes"),
    SeededBug(Bug.ELECTION_WITHOUT_EPOCH_CAS, "AtMostOneControllerPerEpoch", "election",
              "the election multi sets /controller_epoch with version -1 instead of the version read"),
    SeededBug(Bug.ELECTION_REUSES_EPOCH, "EveryElectionBumpsControllerEpoch", "election",
              "the new controller writes back the epoch it read instead of epoch + 1"),
    SeededBug(Bug.ELECTION_CHECKS_EPOCH_BY_READ, "AtMostOneControllerPerEpoch", "zk-lag",
              "the election reads /controller_epoch again and, when it still shows what the broker observed, sets it"
              " with version -1: a read-then-write that only a read from an up-to-date server makes safe"),
    SeededBug(Bug.STOP_DELETES_CONTROLLER_EPOCH, "ControllerEpochNeverDecreases", "election",
              "a controller stopping cleanly deletes /controller_epoch with /controller, so epochs restart"),
    SeededBug(Bug.SKIP_CONTROLLER_EPOCH_CHECK, "OnlyCurrentControllerWritesApply", "fencing",
              "controller writes go to ZooKeeper without the /controller_epoch version check"),
    SeededBug(Bug.BROKER_KEEPS_OLD_EPOCH, "BrokerEpochIsRegistrationCzxid", "fencing",
              "a broker that re-registers keeps the epoch of its previous registration"),
    SeededBug(Bug.BROKER_EPOCH_FROM_SESSION_ID, "BrokerEpochGrowsWithEachRegistration", "bounce",
              "the broker epoch is the ZooKeeper session id (the KIP's rejected alternative)"),
    SeededBug(Bug.ACCEPT_STALE_BROKER_EPOCH, "NoStaleControlRequestApplied", "bounce",
              "a broker applies control requests addressed to an earlier generation of itself"),
    SeededBug(Bug.ACCEPT_STALE_CONTROLLER_EPOCH, "NoStaleControlRequestApplied", "fencing",
              "a broker applies control requests from an older controller epoch"),
    SeededBug(Bug.SERVE_BEFORE_REGISTERING, "NoStaleControlRequestApplied", "bounce",
              "a restarted broker handles control requests before it has registered and learned its epoch"),
    SeededBug(Bug.BOUNCE_SKIPS_BROKER_FAILURE, "OneLeaderPerLeaderEpoch", "leader-bounce",
              "a bounced broker is only re-started, not failed first, so it leads again in its old leader epoch"),
    SeededBug(Bug.BROKER_CHANGE_IGNORES_CZXID, "ControllerSeesEveryBounce", "bounce",
              "broker-change processing compares ids only, so a fast bounce is missed"),
    SeededBug(Bug.BROKER_CHANGE_WATCH_NOT_REARMED, "ControllerEventuallySeesEveryBroker", "bounce",
              "after a broker change the controller does not arm the /brokers/ids child watch again"),
    SeededBug(Bug.RESTARTED_BROKER_KEEPS_DEAD_SESSION, "EveryLiveBrokerEventuallyRegistered", "bounce",
              "a restarted broker that registered before never opens a new ZooKeeper session"),
    SeededBug(Bug.SHUTDOWN_IGNORES_BROKER_EPOCH, "StaleControlledShutdownMovesNothing", "bounce",
              "the controller acts on a ControlledShutdown without comparing its broker epoch"),
    SeededBug(Bug.ACCEPT_OLDER_LEADER_EPOCH, "LeaderEpochsNeverDecrease", "fencing",
              "a broker applies a LeaderAndIsr whose leader epoch is older than its own"),
    SeededBug(Bug.SHUTDOWN_SHRINKS_LEADER_OUT_OF_ISR, "LeaderIsInIsr", "bounce",
              "controlled shutdown drops the broker from the ISR even where it stays leader"),
    SeededBug(Bug.FINALIZE_LEVEL_ZERO, "FinalizedFeaturesWellFormed", "features",
              "an AllowDowngrade update to a level below 1 finalizes that level instead of deleting"),
    SeededBug(Bug.ADMIT_INCOMPATIBLE_BROKER, "AdmittedBrokersSupportFinalizedFeatures", "features",
              "broker-change processing admits a broker whose supported range excludes a finalized level"),
    SeededBug(Bug.UPDATE_SKIPS_BROKER_CHECK, "AdmittedBrokersSupportFinalizedFeatures", "features",
              "UpdateFeatures checks the controller's own range but not the live brokers'"),
    SeededBug(Bug.RECREATE_FEATURES_ZNODE, "FeatureEpochNeverDecreases", "features-upgrade",
              "re-enabling feature versioning deletes and re-creates /features, resetting its version"),
    SeededBug(Bug.DISABLE_KEEPS_FEATURES, "DisabledFeaturesFinalizeNothing", "features-downgrade",
              "an IBP downgrade marks /features Disabled but keeps the finalized levels"),
    SeededBug(Bug.BROKER_RESETS_FEATURE_EPOCH, "BrokerFeatureCacheNeverGoesBack", "features-downgrade",
              "a broker forgets its feature epoch when /features is Disabled"),
    # model part 2: the KRaft quorum
    SeededBug(Bug.VOTE_TWICE_IN_EPOCH, "AtMostOneKRaftLeaderPerEpoch", "kraft-quorum",
              "a voter grants its vote to a second candidate in the same epoch"),
    SeededBug(Bug.VOTE_IGNORES_LOG, "CommittedRecordsNeverChange", "kraft-quorum",
              "a voter grants its vote without comparing the candidate's log with its own"),
    SeededBug(Bug.RESTART_FORGETS_EPOCH, "KRaftEpochNeverDecreases", "kraft-quorum",
              "a restarted controller starts from epoch 0 instead of its quorum-state file"),
    SeededBug(Bug.COMMIT_WITHOUT_MAJORITY, "CommittedRecordsOnMajority", "kraft-quorum",
              "the leader advances its high watermark on its own append"),
    SeededBug(Bug.LEADER_RESETS_HIGH_WATERMARK, "HighWatermarkNeverDecreases", "kraft-quorum",
              "a new leader starts its high watermark from zero instead of what it learned as a follower"),
    SeededBug(Bug.ACTIVATE_ON_UNCOMMITTED_LOG, "MigrationStateOnlyMovesForward", "finalize-failover",
              "a new leader activates on its whole log at once, a predecessor's uncommitted records included,"
              " instead of once its LeaderChange has committed"),
    # brokers on KRaft
    SeededBug(Bug.BROKER_EPOCH_FROM_INCARNATION, "BrokerEpochIsRegistrationOffset", "pre-migration",
              "the controller gives a registering broker its incarnation number as its epoch"),
    SeededBug(Bug.UNFENCE_BEFORE_CAUGHT_UP, "UnfencedOnlyWhenCaughtUp", "broker-migration",
              "a heartbeat unfences a KRaft broker that has not replayed its own registration yet"),
    SeededBug(Bug.CAUGHT_UP_OFF_BY_ONE, "LiveFencedBrokerEventuallyUnfenced", "kraft-broker-restart",
              "a broker counts as caught up only past the record after its registration, which may never come"),
    SeededBug(Bug.RETRIED_REGISTRATION_NEW_EPOCH, "OneBrokerEpochPerIncarnation", "lost-responses",
              "the controller takes a registration retried with the same incarnation for a new broker: a new epoch,"
              " fenced again"),
    SeededBug(Bug.LOST_REGISTRATION_GUESSES_EPOCH, "BrokerEpochGivenByController", "lost-responses",
              "a broker whose registration response was lost takes the offset it has replayed to as its epoch"),
    SeededBug(Bug.HEARTBEAT_ACCEPTS_OLDER_BROKER_EPOCH, "StaleHeartbeatWritesNothing", "held-heartbeats",
              "the controller serves a heartbeat whose broker epoch is older than the broker's registration"),
    SeededBug(Bug.SERVE_FENCED_BROKERS, "FencedBrokersNeverServed", "broker-migration",
              "metadata responses list every registered broker, fenced ones too"),
    SeededBug(Bug.KRAFT_BROKER_TAKES_LIVE_ZK_ID, "NoKRaftBrokerTakesALiveZkBrokersId", "broker-migration",
              "a KRaft broker's registration replaces a ZK broker's registration that is still live"),
    SeededBug(Bug.ADMIT_ZK_BROKER_WITH_OTHER_IBP, "ZkBrokersAdmittedAtMetadataVersion", "pre-migration",
              "a migrating ZK broker is admitted whatever IBP it advertises"),
    # the migration
    SeededBug(Bug.DRIVER_SKIPS_TO_DUAL_WRITE, "DriverTakesOnlyTableTransitions", "pre-migration",
              "the driver goes from WAIT_FOR_CONTROLLER_QUORUM straight to DUAL_WRITE"),
    SeededBug(Bug.DUAL_WRITE_BEFORE_SYNC, "DualWritesOnlyInDualWriteStates", "handover",
              "metadata changes are dual-written while the driver is still in SYNC_KRAFT_TO_ZK"),
    SeededBug(Bug.DUAL_WRITE_UNCOMMITTED, "ZkWritesFollowKRaftCommits", "dual-write",
              "the dual write sends records to ZooKeeper before KRaft has committed them"),
    SeededBug(Bug.LEADER_AND_ISR_BEFORE_UPDATE_METADATA, "UpdateMetadataBeforeLeaderAndIsr", "migration",
              "the KRaft controller queues LeaderAndIsr to a ZK broker before its UpdateMetadata"),
    SeededBug(Bug.DUAL_WRITE_DROPS_CONFIG, "ZkEqualsImageAtMigrationOffset", "dual-write",
              "a dual write advances /migration past a config change it did not write"),
    SeededBug(Bug.DUAL_WRITE_DELTA_OF_LAST_RECORD, "ZkEqualsImageAtMigrationOffset", "broker-migration",
              "a dual write writes the change of the newest committed record only, not every change since"
              " /migration's offset"),
    SeededBug(Bug.DUAL_WRITE_SKIPS_EPOCH_CHECK, "OnlyCurrentKRaftLeaderWritesApply", "dual-write",
              "a dual-write multi leaves out the /controller_epoch check"),
    SeededBug(Bug.CLAIM_REUSES_ZK_EPOCH, "ZkControllerEpochsIncreaseAcrossHandOver", "migration",
              "the KRaft claim writes /controller_epoch back unchanged instead of + 1"),
    SeededBug(Bug.CLAIM_IGNORES_NEWER_KRAFT_EPOCH, "KRaftEpochInZkOnlyIncreases", "migration",
              "the claim overwrites a /controller that holds a newer Raft epoch"),
    SeededBug(Bug.CLAIM_TRUSTS_STALE_READ, "ZkControllerEpochsIncreaseAcrossHandOver", "stale-reads",
              "the claim's multi sets /controller_epoch and replaces /controller with version -1, trusting what its"
              " driver read from a server that may lag"),
    SeededBug(Bug.DUAL_WRITE_SETS_NEW_PARTITION, "KRaftZkWritesFailOnlyOnStaleReads", "create-partitions",
              "the dual write sets the state znode of a partition created on KRaft instead of creating it (NoNode:"
              " the write fails on every retry)"),
    SeededBug(Bug.DUAL_WRITE_KEEPS_ASSIGNMENT, "ZkEqualsImageAtMigrationOffset", "create-partitions",
              "the dual write creates a new partition's state znode but leaves /brokers/topics/t without it"),
    SeededBug(Bug.MIGRATION_SKIPS_UNSTARTED_PARTITION, "InitialMigrationAllOrNothing", "create-partitions",
              "the initial migration copies only partitions with a state znode, not one an admin added that no"
              " ZK controller has started yet"),
    SeededBug(Bug.STALE_EVENT_RUNS, "MigrationOffsetNeverGoesBack", "event-queue",
              "a queued MetadataChangeEvent raised under another leader and epoch runs (no KAFKA-16667 check), its"
              " image taken as the newest: ZooKeeper and /migration go back to it under the current claim"),
    SeededBug(Bug.REASSIGNMENT_KEEPS_LEADER_EPOCH, "ZkBrokersConvergeToCommittedImage", "reassignment",
              "a KRaft controller's reassignment adds replicas without bumping the leader epoch (Kafka 3.5's"
              " PartitionChangeBuilder, KAFKA-16120): the ZK broker leading the partition ignores the LeaderAndIsr"
              " and never learns the new replicas"),
    SeededBug(Bug.REASSIGNMENT_COMPLETES_EARLY, "ReassignmentCompletesWithTargetInIsr", "reassignment",
              "a KRaft controller completes a reassignment before every adding replica has joined the ISR (its"
              " completion check skipped): the partition's replicas include one that never caught up"),
    SeededBug(Bug.FAILED_WRITE_DROPS_DELTA, "ZkEqualsImageAtMigrationOffset", "dual-write-failure",
              "kafka-3.9's rule under kip: a dual write that failed (its session expired) has handed the driver its"
              " image, and the next dual write writes only the delta since that image, /migration past the lost one"),
    SeededBug(Bug.RESEND_KEEPS_STALE_VERSION, "ZkBrokersConvergeToCommittedImage", "dual-write-resend",
              "kafka-3.9's rule under kip: a dual write ZooKeeper applied but whose reply was lost is resent, the copy"
              " fails on /migration's version, and the driver keeps the stale version: the change's LeaderAndIsr is"
              " never sent, and every later dual write fails"),
    SeededBug(Bug.DELETION_STOPS_WITHOUT_DELETE, "ZkBrokersDropDeletedTopic", "delete-topics",
              "a topic deleted on KRaft in dual write is stopped on the ZK brokers without deletePartitions (KIP-866"
              " says only \"stop managing\"): they stop fetching it and keep hosting it"),
    SeededBug(Bug.DELETION_SKIPS_FENCED_BROKER, "ZkBrokersDropDeletedTopic", "deletion-while-fenced",
              "kafka-3.9's rule under kip (Kafka 3.7.2 to 3.9.2, found on real runs): a topic deleted in dual write"
              " is stopped only on the unfenced ZK brokers, and a broker unfenced later is told in an incremental"
              " UpdateMetadata: it keeps hosting and serving the deleted topic"),
    SeededBug(Bug.MIGRATES_PENDING_DELETION, "PendingDeletionNeverLiveInKRaft", "delete-topics",
              "KAFKA-15605 (Kafka 3.4 to 3.6.0): the migration copies a topic ZooKeeper marks for deletion as a live"
              " topic, and the sync leaves the mark: a topic the admin deleted lives on in KRaft"),
    SeededBug(Bug.RPCS_WAIT_FOR_NEWER_OFFSET, "MigrationReachesDualWriteWithoutFaults", "handover",
              "SendRPCsToBrokers waits for an image newer than /migration's offset instead of as new (off by one)"),
    SeededBug(Bug.MIGRATION_OUTSIDE_TRANSACTION, "InitialMigrationAllOrNothing", "migration",
              "the initial migration writes its records without a metadata transaction"),
    SeededBug(Bug.NO_ABORT_ON_FAILOVER, "FailoverAbortsMigrationTransaction", "migration",
              "a new leader leaves its predecessor's migration transaction open"),
    SeededBug(Bug.COMPLETE_BEFORE_LAST_BATCH, "InitialMigrationAllOrNothing", "batched-migration",
              "the driver completes the migration after its first batch, leaving the others uncopied"),
    SeededBug(Bug.BATCH_ENDS_TRANSACTION, "InitialMigrationAllOrNothing", "batched-migration",
              "each batch of the migration is its own metadata transaction, so a committed batch is applied at once"),
    SeededBug(Bug.PRE_MIGRATION_ACCEPTS_WRITES, "OnlyAllowedWritesInPreMigration", "pre-migration",
              "the controller in pre-migration accepts an admin write"),
    SeededBug(Bug.IGNORE_LAG_BOUND, "WriteBehindLagBounded", "dual-write",
              "metadata writes go on while ZooKeeper falls further behind than the bound"),
    SeededBug(Bug.REENTER_MIGRATION_AFTER_FINALIZE, "NoZkWriteAfterPostMigration", "finalize",
              "a driver that sees POST_MIGRATION claims ZooKeeper again"),
    SeededBug(Bug.KRAFT_BORN_MIGRATES, "MigrationStateOnlyMovesForward", "kraft-born",
              "a driver in a KRaft-born cluster (NONE) goes on to migrate"),
    SeededBug(Bug.MV_CHANGE_DURING_MIGRATION, "MetadataVersionFixedDuringMigration", "finalize",
              "UpdateFeatures changes metadata.version while the migration is in progress"),
    SeededBug(Bug.SHUTDOWN_WITHOUT_ZK_CATCH_UP, "RollbackLosesNothingCommitted", "rollback",
              "the KRaft leader shuts down cleanly before ZooKeeper has its committed records"),
    SeededBug(Bug.SYNC_SKIPS_TOPIC_DELETION, "TopicDeletionsCompletedByMigration", "migration",
              "the KRaft-to-ZooKeeper sync leaves a pending topic deletion in ZooKeeper"),
    SeededBug(Bug.WAIT_ONLY_FOR_LIVE_BROKERS, "MigrationStartsOnlyWithEveryKnownZkBroker", "pre-migration",
              "the driver waits only for brokers live in /brokers/ids, not those named in assignments"),
    SeededBug(Bug.READY_COMPARES_ZK_EPOCH, "DriverLeavesWaitForBrokersWhenReady", "handover",
              "a ZK broker counts as registered only if its KRaft broker epoch equals its ZooKeeper czxid"),
    SeededBug(Bug.INACTIVE_IGNORES_LEADERSHIP, "ActiveDriverNeverStaysInactive", "handover",
              "an INACTIVE driver ignores the event that makes its node the leader again"),
    SeededBug(Bug.READINESS_READS_CONFIGURATION, "MigrationWaitsForEveryVoterRegisteredReady",
              "controller-registration",
              "from metadata.version 3.7-IV0 the quorum's readiness reads each voter's configuration, not its"
              " RegisterControllerRecord", Profile.KAFKA_3_9),
    # mistakes of the design (the implementation makes each too): only a model-independent property sees them
    SeededBug(Bug.DUAL_WRITE_RPCS_BEFORE_ZK, "ZkHoldsWhatZkBrokersAreTold", "dual-write-outage",
              "while ZooKeeper is unavailable, the dual write sends ZK brokers the change's RPCs and leaves its"
              " ZooKeeper write for later"),
    SeededBug(Bug.ZK_BROKER_KEEPS_REMOVED_BROKERS, "ZkBrokersConvergeToCommittedImage", "broker-migration",
              "a ZK broker adds an UpdateMetadata's live brokers to those it caches instead of replacing them,"
              " so a fenced broker stays"),
    SeededBug(Bug.TIMEOUT_IGNORES_ZK_BROKER_HEARTBEATS, "HeartbeatingBrokerNeverFenced", "dual-write",
              "the broker session timeout takes a running migrating ZK broker for a gone one: its heartbeats do not"
              " keep its session"),
    SeededBug(Bug.SAFE_DOWNGRADE_LOSES_METADATA, "MetadataVersionGoesDownOnlyWhenForced", "kraft-metadata-version",
              "a safe metadata.version downgrade is accepted although it loses metadata"),
    SeededBug(Bug.FENCED_WRITE_ADOPTS_NEWER_CLAIM, "OneZkWriterAfterClaim", "dual-write",
              "a driver whose fenced ZooKeeper write failed reads the newer claim's versions and epoch and writes"
              " again under them"),
    SeededBug(Bug.METADATA_FETCH_PAST_HIGH_WATERMARK, "ServedMetadataSurvivesFailover", "broker-failover",
              "the leader serves brokers' metadata fetches up to its log end instead of its high watermark"),
    SeededBug(Bug.REGISTRATION_ANSWERED_BEFORE_COMMIT, "BrokerTakesOnlyCommittedRegistration", "purgatory",
              "the controller answers a BrokerRegistration as soon as it appended the record, not once it commits"
              " (a failover may truncate the registration the broker acts on)"),
    SeededBug(Bug.HEARTBEAT_ANSWERED_BEFORE_COMMIT, "BrokerOnlineOnlyOnceUnfencingCommitted", "heartbeat-commit",
              "the controller answers a BrokerHeartbeat that unfences the broker as soon as it appended the record,"
              " not once it commits (the broker serves while a failover may truncate its unfencing)"),
    SeededBug(Bug.HEARTBEAT_MANAGER_SURVIVES_ABORT, "MigratingZkBrokerEventuallyUnfenced", "aborted-unfencing",
              "a new active controller's heartbeat manager keeps the fencing it read before it aborted the migration's"
              " transaction: a ZK broker whose unfencing the abort took back counts as unfenced, and its heartbeats"
              " never unfence it again (as Kafka 3.6 to 3.9 do)"),
    SeededBug(Bug.LEADER_AND_ISR_APPLIED_PART_WAY, "FailedLeaderAndIsrIsRepaired", "failed-leader-and-isr",
              "kafka-3.9's rule under kip: a ZK broker whose LeaderAndIsr fails inside it (its session expired as it"
              " creates a new partition's log) keeps the leader epoch it took and starts no fetcher, and nothing"
              " sends it the partition at a newer epoch: the reassignment adding it never completes"),
    SeededBug(Bug.REASSIGNMENT_SENDS_NO_STOP_REPLICA, "ZkBrokersDropReassignedReplicas", "reassignment-move",
              "the dual write of a completed reassignment tells the ZK brokers the new replicas but sends the one it"
              " removed no StopReplica (only a deleted topic's get one): the removed ZK broker keeps hosting it"),
)

SEEDED_BUGS_BY_NAME = {b.name: b for b in SEEDED_BUGS}
