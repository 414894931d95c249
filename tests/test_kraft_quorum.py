"""The KRaft controller quorum (KIP-500 §Controller Quorum; Raft as KIP-595 uses it).

Scenarios run in the ``kraft-quorum`` scope: three voters of a KRaft-born cluster (ids 3000,
3001, 3002), cold (no leader yet). One action is a whole Vote or Fetch round trip, so a
refused vote is a step that changes nothing, and a Fetch copies the leader's whole log. Every
step goes through ``run``, which checks every invariant on every step.
"""

from __future__ import annotations

from model.actions import (
    AlterConfigs,
    BecomeLeader,
    CrashController,
    Fetch,
    RequestVote,
    RestartController,
    StartElection,
)
from model.invariants import witnessed
from model.kraft import (
    ConfigRecord,
    ControllerId,
    FeatureLevelRecord,
    KRaftEpoch,
    LeaderChangeMessage,
    LogEntry,
    QuorumRole,
    ZkMigrationState,
    ZkMigrationStateRecord,
    advance_high_watermark,
    image_of,
    log_up_to_date,
)
from model.kraft_quorum import ctrl
from model.scopes import SCOPES, initial_state
from model.step import step
from model.types import Ibp
from tests.conftest import run

C0, C1, C2 = ControllerId(3000), ControllerId(3001), ControllerId(3002)
SCOPE = SCOPES["kraft-quorum"]

# What a KRaft-born leader of epoch 1 appends: LeaderChange, then (once that commits) its bootstrap records.
BOOTSTRAP = (
    LogEntry(KRaftEpoch(1), LeaderChangeMessage(C0)),
    LogEntry(KRaftEpoch(1), FeatureLevelRecord("metadata.version", Ibp.IBP_3_4_IV0)),
    LogEntry(KRaftEpoch(1), ZkMigrationStateRecord(ZkMigrationState.NONE)),
)


def led_by_3000():
    """3000 wins epoch 1 with 3001's vote; 3001 fetches twice: the LeaderChange commits (3000 activates and
    appends its bootstrap records), then the bootstrap records commit."""
    return run(
        initial_state(SCOPE), StartElection(C0), RequestVote(C0, C1), BecomeLeader(C0), Fetch(C1, C0), Fetch(C1, C0)
    )


def test_quorum_split_vote_elects_no_one_until_a_later_epoch():
    """Two candidates stand in one epoch with the third voter down: neither reaches a majority.

    KIP-500 §Controller Quorum (Raft leader election); a split vote is resolved only by a new
    election timeout, which starts a higher epoch.
    """
    state = run(initial_state(SCOPE), CrashController(C2), StartElection(C0))
    before = state
    state = run(state, StartElection(C1))
    assert "SplitVote" in witnessed(before, StartElection(C1), state)
    for c in (C0, C1):
        cand = ctrl(state, c)
        assert (cand.role, cand.epoch, cand.voted_for, cand.votes) == (QuorumRole.CANDIDATE, 1, c, frozenset({c}))
    # The first timeout repaired a leaderless quorum (free); the second disrupted a candidate.
    assert state.budget.kraft_elections == SCOPE.budget.kraft_elections - 1

    # Each has voted for itself in epoch 1: the exchange is refused and changes nothing (not a step).
    assert step(state, RequestVote(C0, C1)) is None
    assert step(state, RequestVote(C1, C0)) is None
    assert step(state, RequestVote(C0, C2)) is None  # 3002 is down
    assert step(state, BecomeLeader(C0)) is None
    assert step(state, BecomeLeader(C1)) is None
    assert state.history.kraft_terms == frozenset()

    # A new timeout: 3000 stands in epoch 2, 3001 learns the epoch from the request and votes.
    state = run(state, StartElection(C0), RequestVote(C0, C1))
    voter = ctrl(state, C1)
    assert (voter.role, voter.epoch, voter.voted_for) == (QuorumRole.VOTED, 2, C0)
    state = run(state, BecomeLeader(C0))
    assert ctrl(state, C0).role is QuorumRole.LEADER
    assert state.history.kraft_terms == frozenset({(2, C0)})
    assert state.budget.kraft_elections == SCOPE.budget.kraft_elections - 2


def test_quorum_high_watermark_advances_only_on_a_majority():
    """The leader's appends commit only once a majority of the three voters hold them.

    KIP-500 §Controller Quorum (the metadata log is committed by a Raft majority);
    RaftEventSimulationTest MajorityReachedHighWatermark.
    """
    state = run(initial_state(SCOPE), StartElection(C0), RequestVote(C0, C1), BecomeLeader(C0))
    leader = ctrl(state, C0)
    assert leader.log == BOOTSTRAP[:1]
    assert (leader.role, leader.active) == (QuorumRole.LEADER, False)  # it activates once its LeaderChange commits
    assert (leader.high_watermark, leader.fetched) == (0, (1, 0, 0))
    assert state.history.committed == ()

    state = run(state, Fetch(C1, C0))  # the LeaderChange commits: 3000 activates and appends its bootstrap
    leader = ctrl(state, C0)
    assert (leader.active, leader.log, leader.high_watermark) == (True, BOOTSTRAP, 1)
    assert state.history.committed == BOOTSTRAP[:1]

    state = run(state, Fetch(C1, C0))
    assert (ctrl(state, C0).high_watermark, ctrl(state, C1).high_watermark) == (3, 3)
    assert state.history.committed == BOOTSTRAP

    state = run(state, AlterConfigs(C0))
    assert ctrl(state, C0).log[3] == LogEntry(KRaftEpoch(1), ConfigRecord(1))
    assert ctrl(state, C0).high_watermark == 3  # only the leader holds offset 3
    assert image_of(state.history.committed).config is None

    state = run(state, Fetch(C2, C0))  # 3000 and 3002 hold 4 entries, 3001 three: a majority holds 4
    assert ctrl(state, C0).fetched == (4, 3, 4)
    assert ctrl(state, C0).high_watermark == 4
    assert (ctrl(state, C1).high_watermark, ctrl(state, C2).high_watermark) == (3, 4)
    assert image_of(state.history.committed).config == 1


def test_quorum_high_watermark_commits_only_an_entry_of_the_leaders_epoch():
    """A majority holding an entry of an older epoch does not commit it; the leader's own entry does.

    KIP-500 §Controller Quorum; Raft §5.4.2 (Figure 8). Tested on the rule itself: through
    actions a Fetch copies the leader's whole log and a new leader's log always ends with its
    own LeaderChange, so a majority offset never lands on an older entry there.
    """
    log = BOOTSTRAP + (
        LogEntry(KRaftEpoch(1), ConfigRecord(1)),  # appended by the epoch-1 leader, never committed
        LogEntry(KRaftEpoch(2), LeaderChangeMessage(C0)),
    )
    # The epoch-2 leader holds all 5; a majority holds 4, whose last entry is of epoch 1.
    assert advance_high_watermark(log, KRaftEpoch(2), (5, 4, 3), 3) == 3
    # Once a majority holds the epoch-2 entry, everything before it commits with it.
    assert advance_high_watermark(log, KRaftEpoch(2), (5, 5, 3), 3) == 5
    # The same majority of 4 commits under the epoch-1 leader, whose entry it is.
    assert advance_high_watermark(log[:4], KRaftEpoch(1), (4, 4, 3), 3) == 4
    # And the high watermark never moves back.
    assert advance_high_watermark(log, KRaftEpoch(2), (5, 3, 3), 4) == 4


def test_quorum_deposed_leader_appends_until_it_fetches_and_truncates():
    """A leader partitioned away keeps appending in its old epoch; the new leader's log wins.

    KIP-500 §Controller Quorum (followers truncate on divergence). The deposed leader learns of
    epoch 2 only from an exchange; its uncommitted AlterConfigs record is then truncated.
    """
    state = run(led_by_3000(), Fetch(C2, C0), StartElection(C1), RequestVote(C1, C2), BecomeLeader(C1))
    new, old = ctrl(state, C1), ctrl(state, C0)
    assert (new.role, new.epoch, new.log) == (QuorumRole.LEADER, 2, BOOTSTRAP + (LogEntry(2, LeaderChangeMessage(C1)),))
    assert (old.role, old.epoch, old.active) == (QuorumRole.LEADER, 1, True)  # it has not heard of epoch 2

    state = run(state, AlterConfigs(C0))
    old = ctrl(state, C0)
    assert old.log == BOOTSTRAP + (LogEntry(KRaftEpoch(1), ConfigRecord(1)),)
    assert old.high_watermark == 3  # no majority: 3001 and 3002 are in epoch 2

    state = run(state, Fetch(C2, C1))
    assert ctrl(state, C1).high_watermark == 4
    assert state.history.committed == ctrl(state, C1).log

    before = state
    state = run(state, Fetch(C0, C1))
    assert "FollowerTruncates" in witnessed(before, Fetch(C0, C1), state)
    old = ctrl(state, C0)
    assert (old.role, old.epoch, old.leader, old.active) == (QuorumRole.FOLLOWER, 2, C1, False)
    assert old.log == ctrl(state, C1).log
    assert not any(isinstance(e.record, ConfigRecord) for e in old.log)
    assert image_of(state.history.committed).config is None
    assert state.history.kraft_terms == frozenset({(1, C0), (2, C1)})


def test_quorum_vote_refused_to_a_candidate_with_a_staler_log():
    """A voter whose log is fresher refuses its vote, though it adopts the candidate's higher epoch.

    KIP-500 §Controller Quorum; Raft §5.4.1 (the election restriction): 3002 voted in epoch 1
    but never fetched, so its empty log is behind the others'.
    """
    state = run(initial_state(SCOPE), StartElection(C0), RequestVote(C0, C2), RequestVote(C0, C1), BecomeLeader(C0))
    state = run(state, Fetch(C1, C0))
    assert ctrl(state, C2).log == () and ctrl(state, C2).epoch == 1
    assert not log_up_to_date(ctrl(state, C2).log, ctrl(state, C1).log)

    state = run(state, StartElection(C2), RequestVote(C2, C1), RequestVote(C2, C0))
    cand = ctrl(state, C2)
    assert (cand.role, cand.epoch, cand.votes) == (QuorumRole.CANDIDATE, 2, frozenset({C2}))
    for voter in (ctrl(state, C1), ctrl(state, C0)):
        assert (voter.role, voter.epoch, voter.voted_for, voter.leader) == (QuorumRole.UNATTACHED, 2, None, None)
    assert ctrl(state, C0).active is False  # the old leader stepped down on seeing epoch 2
    assert step(state, BecomeLeader(C2)) is None
    assert state.history.kraft_terms == frozenset({(1, C0)})


def test_quorum_crash_restart_keeps_epoch_vote_and_log_but_not_high_watermark():
    """A voter's quorum-state file and log survive a crash; its high watermark is relearned.

    KIP-500 §Controller Quorum; KIP-595 (quorum-state persists epoch and vote);
    RaftEventSimulationTest MonotonicEpoch.
    """
    state = led_by_3000()
    follower = ctrl(state, C1)
    assert (follower.epoch, follower.voted_for, follower.high_watermark) == (1, C0, 3)

    state = run(state, CrashController(C1))
    crashed = ctrl(state, C1)
    assert (crashed.alive, crashed.high_watermark, crashed.role) == (False, 0, QuorumRole.UNATTACHED)
    assert state.budget.controller_crashes == 0

    state = run(state, RestartController(C1))
    restarted = ctrl(state, C1)
    assert (restarted.alive, restarted.epoch, restarted.voted_for) == (True, 1, C0)
    assert restarted.log == BOOTSTRAP
    assert (restarted.role, restarted.leader, restarted.high_watermark) == (QuorumRole.VOTED, None, 0)

    state = run(state, AlterConfigs(C0), Fetch(C1, C0))
    back = ctrl(state, C1)
    assert (back.role, back.leader, back.high_watermark) == (QuorumRole.FOLLOWER, C0, 4)
