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

from model.record import record


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


@record
class Variant:
    """Which model runs: the correct one (no bugs) or one with seeded bugs switched on."""

    bugs: frozenset[Bug] = frozenset()

    def has(self, bug: Bug) -> bool:
        return bug in self.bugs


CORRECT = Variant()


@record
class SeededBug:
    bug: Bug
    invariant: str  # the invariant it must break
    scope: str  # the scope whose bounded search must find the break
    mistake: str  # one line: what the buggy code does

    @property
    def name(self) -> str:
        return self.bug.value


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
)

SEEDED_BUGS_BY_NAME = {b.name: b for b in SEEDED_BUGS}
