"""The Raft quorum of the KRaft controllers (KIP-595 as KafkaRaftClient and QuorumState implement it).

Rules:
- ``QuorumState`` is one voter's Raft state: what the quorum-state file and the log persist
  (epoch, voted-for, entries) and what only memory holds (role, leader, votes, high watermark,
  the leader's view of each voter's log end). No I/O here: ``impl.kraft_controller`` carries the
  requests and responses (``impl.kraft.rpc``) in ``Rpc`` round trips.
- A node learns of a newer epoch only from an exchange (a deposed leader goes on believing it
  leads until a Vote or Fetch tells it), and steps down to Unattached, or to Follower of a
  leader it was told of, forgetting its votes and its leadership (``step_down``).
- A vote is granted once per epoch, to a candidate whose (last epoch, end offset) is at least
  the voter's own, by a voter that neither leads nor follows in that epoch (``decide_vote``).
- The leader's high watermark is the largest end offset a majority of voters holds, and it
  moves only onto an entry of the leader's own epoch (Raft §5.4.2); it never moves back.
- A new leader appends its LeaderChange at the epoch start offset; its listener (QuorumController)
  hears that it leads only once the high watermark has passed that offset (``leader_change_due``,
  KafkaRaftClient's ListenerContext.maybeFireLeaderChange), so it activates on a log it has
  read committed to the end, never on a predecessor's uncommitted tail.
- Fetch: a follower whose (fetch offset, last fetched epoch) disagrees with the leader's log is
  told where it diverges (``end_offset_for_epoch``) and truncates there; the exchange repeats
  until the logs agree, then the follower copies the rest. The model's Fetch is one atomic
  step: the leader counts what it returns as replicated at once (``acknowledge``).
"""

from __future__ import annotations

from impl.decisions import decision
from impl.kraft.image import end_offset_for_epoch
from impl.kraft.rpc import ApiError, FetchRequest, FetchResponse, VoteRequest, VoteResponse
from model.kraft import ControllerId, KRaftEpoch, LeaderChangeMessage, LogEntry, MetadataRecord, QuorumRole


def majority(voters: int) -> int:
    return voters // 2 + 1


@decision("yes", "no")
def decide_vote(request: VoteRequest, voted_for: int | None, role: QuorumRole, last_epoch: int, end_offset: int,
                ignore_log: bool = False) -> bool:
    """Whether a voter in the candidate's epoch grants its vote (KIP-595 §Vote, KafkaRaftClient.handleVoteRequest):
    it has not voted for another in this epoch, neither leads nor follows in it, and the candidate's log
    is at least as up to date as its own ((last epoch, end offset) compared in that order, Raft §5.4.1).
    ``ignore_log``: the seeded bug VOTE_IGNORES_LOG."""
    may_vote = voted_for in (None, request.candidate_id)
    fresh = ignore_log or (request.last_offset_epoch, request.last_offset) >= (last_epoch, end_offset)
    return may_vote and fresh and role in (QuorumRole.UNATTACHED, QuorumRole.VOTED)


class QuorumState:
    def __init__(self, node_id: int, voters: list[int]) -> None:
        self.node_id = node_id
        self.voters = sorted(voters)
        # persisted: the quorum-state file and the log
        self.epoch = 0
        self.voted_for: int | None = None
        self.log: list[LogEntry] = []
        self.log_version = 0  # counts changes to the log (what images replayed from it are remembered by)
        # in memory only
        self.role = QuorumRole.UNATTACHED
        self.leader: int | None = None
        self.votes: set[int] = set()
        self.high_watermark = 0
        self.fetched: list[int] = []  # as leader: each voter's log end offset, in ``voters`` order
        self.epoch_start_offset = 0  # as leader: the offset of its LeaderChange record (LeaderState)
        self.active = False  # as leader: QuorumController's activation ran

    # ---- reads ---------------------------------------------------------------------------------

    @property
    def last_epoch(self) -> int:
        return self.log[-1].epoch if self.log else 0

    @property
    def end_offset(self) -> int:
        return len(self.log)

    def index(self, voter: int) -> int:
        return self.voters.index(voter)

    def snapshot(self) -> tuple:
        """Everything an exchange may change, to tell whether one changed anything."""
        return (self.epoch, self.voted_for, tuple(self.log), self.role, self.leader, frozenset(self.votes),
                self.high_watermark, tuple(self.fetched), self.active)

    # ---- transitions ---------------------------------------------------------------------------

    def step_down(self, epoch: int, leader: int | None = None) -> None:
        """Learn a newer epoch (or a leader in this one): Unattached, or Follower of a known leader."""
        if epoch > self.epoch:
            self.voted_for = None
        self.epoch = epoch
        self.role = QuorumRole.UNATTACHED if leader is None else QuorumRole.FOLLOWER
        self.leader = leader
        self.votes = set()
        self.active = False
        self.fetched = []

    def start_election(self) -> bool:
        """The election timeout fired: a candidate in the next epoch, voting for itself."""
        if self.role is QuorumRole.LEADER:
            return False
        self.epoch += 1
        self.voted_for = self.node_id
        self.role = QuorumRole.CANDIDATE
        self.leader = None
        self.votes = {self.node_id}
        self.active = False
        return True

    def vote_request(self) -> VoteRequest:
        return VoteRequest(self.node_id, self.epoch, self.last_epoch, self.end_offset)

    def handle_vote(self, request: VoteRequest, ignore_log: bool = False) -> VoteResponse:
        """KafkaRaftClient.handleVoteRequest."""
        changed = False
        if request.candidate_epoch < self.epoch:
            return VoteResponse(ApiError.FENCED_LEADER_EPOCH, self.epoch, self.leader, False)
        if request.candidate_epoch > self.epoch:
            self.step_down(request.candidate_epoch)
            changed = True
        granted = decide_vote(request, self.voted_for, self.role, self.last_epoch, self.end_offset, ignore_log)
        if granted:
            self.voted_for = request.candidate_id
            self.role = QuorumRole.VOTED
        return VoteResponse(ApiError.NONE, self.epoch, self.leader, granted, changed)

    def handle_vote_response(self, voter: int, response: VoteResponse) -> bool:
        """The candidate's side; True when the exchange changed either side."""
        if response.leader_epoch > self.epoch:
            self.step_down(response.leader_epoch, response.leader_id)
            return True
        if response.vote_granted:
            self.votes.add(voter)
            return True
        return response.voter_changed

    def can_become_leader(self) -> bool:
        return self.role is QuorumRole.CANDIDATE and len(self.votes) >= majority(len(self.voters))

    def become_leader(self) -> None:
        """onBecomeLeader: the epoch starts at the log end with the LeaderChange control record."""
        self.role = QuorumRole.LEADER
        self.leader = self.node_id
        self.votes = set()
        self.fetched = [0] * len(self.voters)
        self.active = False
        self.epoch_start_offset = self.end_offset
        self.append([LeaderChangeMessage(ControllerId(self.node_id))])

    def leader_change_due(self) -> bool:
        """pollLeader's maybeFireLeaderChange: the listener is told of this leadership once it has read
        past the epoch start offset, i.e. once the high watermark covers the LeaderChange record."""
        return self.role is QuorumRole.LEADER and not self.active and self.high_watermark > self.epoch_start_offset

    def resign(self) -> None:
        """QuorumController refused to activate: the leader gives up (Resigned) without a new epoch."""
        self.role = QuorumRole.RESIGNED
        self.active = False
        self.fetched = []

    def process_stops(self) -> None:
        """Crash or clean stop: only the persisted epoch, vote and log survive."""
        self.role = QuorumRole.UNATTACHED
        self.leader = None
        self.votes = set()
        self.high_watermark = 0
        self.fetched = []
        self.active = False

    def restart(self) -> None:
        """Read the quorum-state file: a voter that voted for another in its epoch is Voted."""
        voted_other = self.voted_for is not None and self.voted_for != self.node_id
        self.role = QuorumRole.VOTED if voted_other else QuorumRole.UNATTACHED

    # ---- the leader's log ----------------------------------------------------------------------

    def append(self, records: list[MetadataRecord]) -> None:
        """The leader appends in its epoch; its own log end counts at once (a quorum of one commits)."""
        assert self.role is QuorumRole.LEADER
        self.log.extend(LogEntry(KRaftEpoch(self.epoch), r) for r in records)
        self.log_version += 1
        self.fetched[self.index(self.node_id)] = len(self.log)
        self._advance_high_watermark()

    def _advance_high_watermark(self) -> None:
        ranked = sorted(self.fetched, reverse=True)
        candidate = ranked[majority(len(self.voters)) - 1]
        if candidate > self.high_watermark and self.log[candidate - 1].epoch == self.epoch:
            self.high_watermark = candidate

    # ---- Fetch ---------------------------------------------------------------------------------

    def fetch_request(self, acknowledge: bool) -> FetchRequest:
        return FetchRequest(
            self.node_id, self.epoch, self.end_offset, self.last_epoch, self.leader,
            self.role is QuorumRole.LEADER, acknowledge,
        )

    def handle_fetch(self, request: FetchRequest) -> FetchResponse:
        """KafkaRaftClient.handleFetchRequest on the leader."""
        if self.role is not QuorumRole.LEADER:
            return FetchResponse(ApiError.NOT_LEADER_OR_FOLLOWER, self.epoch, self.leader)
        if request.replica_epoch > self.epoch:
            # The deposed leader learns of the newer epoch from the fetch.
            self.step_down(request.replica_epoch, request.replica_leader_id)
            return FetchResponse(ApiError.FENCED_LEADER_EPOCH, self.epoch, self.leader, leader_changed=True)
        if request.replica_is_leader and request.replica_epoch == self.epoch:
            return FetchResponse(ApiError.INVALID_REQUEST, self.epoch, self.leader)
        diverging = diverging_point(self.log, request.fetch_offset, request.last_fetched_epoch)
        if diverging is not None:
            return FetchResponse(ApiError.NONE, self.epoch, self.node_id, self.high_watermark, *diverging)
        records = tuple(self.log[request.fetch_offset:])
        before = (tuple(self.fetched), self.high_watermark)
        if request.acknowledge:
            self.fetched[self.index(request.replica_id)] = len(self.log)
            self._advance_high_watermark()
        changed = (tuple(self.fetched), self.high_watermark) != before
        return FetchResponse(ApiError.NONE, self.epoch, self.node_id, self.high_watermark, records=records,
                             leader_changed=changed)

    def follow(self, epoch: int, leader: int) -> None:
        """The follower's side of a fetch answered by ``leader`` in ``epoch``."""
        if self.epoch < epoch or self.role is not QuorumRole.FOLLOWER or self.leader != leader:
            self.step_down(epoch, leader)

    def truncate(self, diverging_epoch: int, diverging_end_offset: int) -> None:
        _, own_end = end_offset_for_epoch([e.epoch for e in self.log], diverging_epoch)
        del self.log[min(own_end, diverging_end_offset):]
        self.log_version += 1

    def replicate(self, records: tuple[LogEntry, ...], leader_high_watermark: int) -> None:
        self.log.extend(records)
        self.log_version += 1
        self.high_watermark = max(self.high_watermark, min(leader_high_watermark, len(self.log)))


def diverging_point(log: list[LogEntry], fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
    """Where a fetcher's log (ending at ``fetch_offset`` in ``last_fetched_epoch``) leaves ``log``, if it does."""
    if fetch_offset == 0:
        return None
    epoch, end = end_offset_for_epoch([e.epoch for e in log], last_fetched_epoch)
    if epoch != last_fetched_epoch or end < fetch_offset:
        return epoch, end
    return None
