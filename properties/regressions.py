"""Scripted differential runs: short, named situations that random walks almost never reach.

Each is a scope and a list of steps the model takes one by one. The correct implementation
agrees with the model on every step (a test checks it); an implementation bug that only shows
in such a race is caught by running its script (``kraftcheck mutants`` does, before the walks).
A failing seed found by a walk or a campaign belongs here too, as a pinned regression.
"""

from __future__ import annotations

from collections.abc import Callable

from impl.bugs import ImplBug
from model.actions import (
    Action,
    AlterConfigs,
    AlterPartitionReassignments,
    BecomeLeader,
    BecomeZkController,
    BrokerHeartbeat,
    BrokerZkServerLags,
    CompleteMigration,
    CreatePartitions,
    DualWrite,
    DualWriteReplyLost,
    DualWriteSessionExpired,
    ElectController,
    ExpireSession,
    Fetch,
    KRaftLeaderChange,
    MigrateMetadata,
    ObserveControllerEpoch,
    OpenSession,
    PublishMetadataChange,
    RegisterBroker,
    RegisterWithKRaft,
    RequestVote,
    ResignController,
    RunMetadataChange,
    StartElection,
    WaitForControllerQuorum,
    WaitForZkBrokers,
    ZkServerLags,
)
from model.scopes import MIGRATING, SCOPES, Scope
from model.state import Budget
from model.types import BrokerId, PartitionId, SessionId
from properties.differential import Differential

A, B, C = 3000, 3001, 3002


def dual_write_scope() -> Scope:
    return SCOPES["dual-write"]


def three_voter_pre_migration() -> Scope:
    """pre-migration with 3 voters and 1 broker: two controllers can both believe they are active."""
    base = SCOPES["pre-migration"]
    return base.replace(name="pre-migration-3-voters", controllers=(MIGRATING,) * 3, ibps=base.ibps[:1],
                        supported=base.supported[:1], partitions=((BrokerId(0),),), broker_flags=((True, True),),
                        budget=Budget(kraft_elections=1, max_in_flight=8))


# A deposed leader's driver still believes it leads; the new leader claims ZooKeeper; before the new
# leader's driver rewrites /migration, the old one dual-writes a record committed in its own epoch.
# (The Fetch that commits the new leader's LeaderChange, and so activates it, tells the old leader of
# the new epoch, but its driver has not handled the leadership change yet.)
DEPOSED_DUAL_WRITE: tuple[Action, ...] = (
    AlterConfigs(A), Fetch(B, A), StartElection(B), RequestVote(B, A), BecomeLeader(B), Fetch(A, B),
    KRaftLeaderChange(B), WaitForControllerQuorum(B), BecomeZkController(B), DualWrite(A),
)

# Two controllers believe they are active (the old leader is not asked for its vote, nor fetches: the
# third voter's Fetch commits the new leader's LeaderChange); the broker bounces between them and ends
# up holding the old leader's (older) registration epoch.
OLDER_EPOCH_HEARTBEAT: tuple[Action, ...] = (
    RegisterWithKRaft(0, A), StartElection(B), RequestVote(B, C), BecomeLeader(B), Fetch(C, B),
    BrokerHeartbeat(0, B), RegisterWithKRaft(0, B), BrokerHeartbeat(0, A), RegisterWithKRaft(0, A),
    BrokerHeartbeat(0, B),
)

# The old leader's ZooKeeper server falls behind before anyone claims; the new leader claims ZooKeeper; the
# old leader's driver, not yet told of the new leadership, claims too from what its server shows: the
# /controller_epoch and /controller of before the new claim. Its multi's versions refuse it at the leader.
# (the model's shortest counterexample of claim_trusts_stale_read in scope stale-reads)
STALE_CLAIM: tuple[Action, ...] = (
    ZkServerLags(A), WaitForZkBrokers(A), StartElection(B), RequestVote(B, A), BecomeLeader(B), Fetch(A, B),
    KRaftLeaderChange(B), WaitForControllerQuorum(B), WaitForZkBrokers(B), BecomeZkController(B),
    BecomeZkController(A),
)


def stale_reads_scope() -> Scope:
    return SCOPES["stale-reads"]


# The controller's session expires; broker 0 opens a new one, re-registers, resigns and reads /controller_epoch, and its
# ZooKeeper server falls behind; broker 1 is elected (epoch + 1) and its session expires in turn, so /controller is
# gone again; broker 0 runs for controller with what its server still shows. The epoch set's version refuses it at
# the leader (BADVERSION); a re-read through the same server cannot. (the model's shortest counterexample of
# election_checks_epoch_by_read in scope zk-lag)
STALE_ELECTION: tuple[Action, ...] = (
    ExpireSession(SessionId(1)), OpenSession(BrokerId(0)), RegisterBroker(BrokerId(0)), ResignController(BrokerId(0)),
    ObserveControllerEpoch(BrokerId(0)), BrokerZkServerLags(BrokerId(0)), ObserveControllerEpoch(BrokerId(1)),
    ElectController(BrokerId(1)), ExpireSession(SessionId(2)), ElectController(BrokerId(0)),
)


def zk_lag_scope() -> Scope:
    return SCOPES["zk-lag"]


# The leader publishes a committed image to its driver's queue (a MetadataChangeEvent), commits another change and
# dual-writes it; the other voter is elected; the queued event, raised under the older leader and epoch, reaches the
# head of the queue before the driver has handled the new leadership. Kafka 3.8+ drops it (KAFKA-16667); run, it
# takes ZooKeeper back to its image. (the model's shortest counterexample of stale_event_runs in scope event-queue)
STALE_EVENT: tuple[Action, ...] = (
    AlterConfigs(A), Fetch(B, A), PublishMetadataChange(A), AlterConfigs(A), Fetch(B, A), DualWrite(A),
    StartElection(B), RequestVote(B, A), RunMetadataChange(A),
)


def event_queue_scope() -> Scope:
    return SCOPES["event-queue"]


# An admin adds a partition in dual write; the dual write that would write it fails, its ZooKeeper session expired
# while it waited; an admin alters a config; the next dual write. KIP-866 §Failure Modes: it writes both changes.
# Kafka 3.9 (and the seeded bug failed_write_drops_delta): only the config's, and /migration moves past the partition,
# which ZooKeeper and the ZK broker never get. (the model's shortest counterexample under kafka-3.9 in scope
# dual-write-failure, up to the order of the two admin requests)
FAILED_WRITE: tuple[Action, ...] = (
    CreatePartitions(A, (BrokerId(0),)), DualWriteSessionExpired(A), AlterConfigs(A), DualWrite(A),
)


def dual_write_failure_scope() -> Scope:
    return SCOPES["dual-write-failure"]


# An admin adds a partition in dual write; ZooKeeper applies its dual write but the reply is lost, and the resent
# copy fails on /migration's version; an admin alters a config; the next dual write. KIP-866: the driver found its
# own write in /migration, sent the partition's LeaderAndIsr and writes the config. Kafka 3.9 (and the seeded bug
# resend_keeps_stale_version): nothing sent, and the next dual write fails on the stale version, the driver parked
# until a new leadership (seed 86 of the real-Kafka dual-write runbook; the first two steps are the model's
# shortest counterexample under kafka-3.9 in scope dual-write-resend).
LOST_REPLY: tuple[Action, ...] = (
    CreatePartitions(A, (BrokerId(0),)), DualWriteReplyLost(A), AlterConfigs(A), DualWrite(A),
)


def dual_write_resend_scope() -> Scope:
    return SCOPES["dual-write-resend"]


# The migration, then an admin's reassignment adding broker 1 to partition 0 on the KRaft controller: its first
# record must leave broker 1 adding, outside the ISR (the seeded bugs reassignment_completes_early complete it at
# once). (the model's shortest counterexample of the model's bug in scope reassignment)
EARLY_COMPLETION: tuple[Action, ...] = (
    WaitForZkBrokers(A), BecomeZkController(A), BecomeZkController(A), MigrateMetadata(A), CompleteMigration(A),
    AlterPartitionReassignments(A, PartitionId(0), (BrokerId(0), BrokerId(1))),
)


def reassignment_scope() -> Scope:
    return SCOPES["reassignment"]


SCRIPTS: dict[str, tuple[Callable[[], Scope], tuple[Action, ...]]] = {
    "deposed-dual-write": (dual_write_scope, DEPOSED_DUAL_WRITE),
    "older-epoch-heartbeat": (three_voter_pre_migration, OLDER_EPOCH_HEARTBEAT),
    "stale-claim": (stale_reads_scope, STALE_CLAIM),
    "stale-event": (event_queue_scope, STALE_EVENT),
    "failed-write": (dual_write_failure_scope, FAILED_WRITE),
    "lost-reply": (dual_write_resend_scope, LOST_REPLY),
    "stale-election": (zk_lag_scope, STALE_ELECTION),
    "early-completion": (reassignment_scope, EARLY_COMPLETION),
}

# The implementation bugs only a script reaches, and the script that catches each.
CATCHING_SCRIPT: dict[ImplBug, str] = {
    ImplBug.DUAL_WRITE_WITHOUT_EPOCH_CHECK: "deposed-dual-write",
    ImplBug.HEARTBEAT_ACCEPTS_OLDER_BROKER_EPOCH: "older-epoch-heartbeat",
    ImplBug.CLAIM_TRUSTS_STALE_READ: "stale-claim",
    ImplBug.STALE_EVENT_RUNS: "stale-event",
    ImplBug.FAILED_WRITE_DROPS_DELTA: "failed-write",
    ImplBug.RESEND_KEEPS_STALE_VERSION: "lost-reply",
    ImplBug.ELECTION_CHECKS_EPOCH_BY_READ: "stale-election",
    ImplBug.REASSIGNMENT_COMPLETES_EARLY: "early-completion",
}


class NotAStep(AssertionError):
    """A script's step is not one the model takes there: the script itself is stale."""


def run_script(name: str, bugs: frozenset[ImplBug] = frozenset()) -> Differential:
    """Run script ``name`` through the implementation and the model; raises Disagreement on a difference."""
    from model.step import enabled_actions

    make_scope, steps = SCRIPTS[name]
    scope = make_scope()
    diff = Differential(scope, bugs=bugs)
    for action in steps:
        if action not in enabled_actions(diff.model, scope):
            raise NotAStep(f"script {name}: {action} is not a step the model takes here")
        diff.apply(action)
    return diff
