"""ZooKeeper-mode brokers reading from a lagging server (model.zookeeper views; scope ``zk-lag``).

A ZooKeeper-mode broker reads through the server its session is connected to, and Kafka 3.9 never calls
``sync()`` (KafkaController.elect reads /controller, then KafkaZkClient.registerControllerAndIncrementControllerEpoch
reads /controller_epoch, then sends the multi). What keeps a stale read from doing harm in the election is the multi
itself, decided at the leader: the create of /controller (NODEEXISTS) and the set of /controller_epoch at the version
read (BADVERSION); KIP-866 §Controller Leadership, KIP-380 §Motivation (controller epoch fencing).
"""

from __future__ import annotations

import pytest

from impl.bugs import ImplBug
from model import zookeeper as zkm
from model.actions import BrokerZkServerLags, ElectController, ExpireSession, OpenSession
from model.bugs import Bug, Variant
from model.invariants import violations, witnessed
from model.scopes import SCOPES, initial_state
from model.state import CONTROLLER, CONTROLLER_EPOCH
from model.step import candidate_actions, step
from model.types import BrokerId, SessionId, ZkCode
from properties.differential import Disagreement
from properties.regressions import STALE_ELECTION, run_script
from tests.conftest import run

SCOPE = SCOPES["zk-lag"]
BUG = Variant(frozenset({Bug.ELECTION_CHECKS_EPOCH_BY_READ}))
UNLAGGED = tuple(a for a in STALE_ELECTION if not isinstance(a, BrokerZkServerLags))


def test_scopes_without_the_budget_offer_no_broker_lag():
    """Existing scopes' pinned counts do not move: without ``broker_stale_reads`` no broker's server lags."""
    for name in ("election", "fencing", "bounce", "stale-reads", "migration"):
        state = initial_state(SCOPES[name])
        assert not any(isinstance(a, BrokerZkServerLags) for a in candidate_actions(state, SCOPES[name]))


def test_only_a_broker_that_is_not_the_controller_lags():
    """The controller's reads set watches (``/brokers/ids``), which a lagging server would deliver late: not
    modeled, so its server does not lag (docs/not-modeled.md); broker 1's may."""
    state = initial_state(SCOPE)
    assert state.brokers[0].controller is not None
    assert step(state, BrokerZkServerLags(BrokerId(0))) is None
    lagged = step(state, BrokerZkServerLags(BrokerId(1)))
    assert lagged is not None and zkm.lagging(lagged.zk, 1) and lagged.budget.broker_stale_reads == 0


def test_a_new_session_ends_the_lag():
    """createSession is a transaction the server applies before it answers: a broker whose session expired while
    its server lagged reads current state through its new one."""
    state = run(initial_state(SCOPE), BrokerZkServerLags(BrokerId(1)))
    session = state.brokers[1].session
    state = run(state, ExpireSession(session))
    assert zkm.lagging(state.zk, 1)  # the view stays, but nothing reads through a dead session
    state = run(state, OpenSession(BrokerId(1)))
    assert not zkm.lagging(state.zk, 1)


def test_stale_election_is_refused_at_the_leader_and_its_write_ends_the_lag():
    """Broker 0 read /controller_epoch before broker 1's election and its server lagged since; with /controller
    gone again it runs for controller on what it read: the multi's create succeeds but the set of the epoch at
    the old version fails (BADVERSION), so nothing applies, broker 0 stays a broker, and the failed write has
    brought its server up to date."""
    state = run(initial_state(SCOPE), *STALE_ELECTION[:-1])
    seen = zkm.seen_by(state.zk, 0)
    assert zkm.get(seen, CONTROLLER_EPOCH).version < zkm.get(state.zk, CONTROLLER_EPOCH).version
    assert zkm.get(state.zk, CONTROLLER) is None
    after = step(state, ElectController(BrokerId(0)))
    assert after is not None and violations(state, STALE_ELECTION[-1], after) == []
    assert after.ghost.last_multi == (ZkCode.OK, ZkCode.BAD_VERSION)
    assert after.brokers[0].controller is None and zkm.get(after.zk, CONTROLLER) is None
    assert not zkm.lagging(after.zk, 0)
    assert "StaleElectionRefusedAtLeader" in witnessed(state, STALE_ELECTION[-1], after)


def test_election_checking_the_epoch_by_a_read_reuses_an_epoch_only_with_a_lagging_server():
    """The seeded bug election_checks_epoch_by_read: the election reads /controller_epoch again and sets it with
    version -1 when it still shows what was observed. From an up-to-date server the read sees broker 1's epoch, so
    the multi keeps its version and fails as the correct one does; from the lagging one it sees the old epoch, and
    broker 0 takes broker 1's epoch again."""
    state = run(initial_state(SCOPE), *STALE_ELECTION[:-1], variant=BUG)
    after = step(state, ElectController(BrokerId(0)), BUG)
    assert after is not None
    broken = violations(state, STALE_ELECTION[-1], after)
    assert {"AtMostOneControllerPerEpoch", "EveryElectionBumpsControllerEpoch"} <= set(broken)
    fresh = run(initial_state(SCOPE), *UNLAGGED[:-1], variant=BUG)
    after = step(fresh, ElectController(BrokerId(0)), BUG)
    assert after is not None and violations(fresh, UNLAGGED[-1], after) == []
    assert after == step(fresh, ElectController(BrokerId(0)))  # the correct model's step


def test_stale_election_script_agrees_and_catches_the_impl_bug():
    """The implementation's embedded ZooKeeper serves broker 0's reads from its lagging server as the model does;
    the same bug in the implementation's election is a disagreement at the last step."""
    diff = run_script("stale-election")
    assert diff.model.brokers[0].controller is None
    with pytest.raises(Disagreement, match=r"ElectController\(broker=0\)"):
        run_script("stale-election", frozenset({ImplBug.ELECTION_CHECKS_EPOCH_BY_READ}))


def test_sessions_are_numbered_as_the_script_expects():
    """The script names sessions by the model's ids: the warm start's controller holds session 1."""
    state = initial_state(SCOPE)
    assert state.brokers[0].session == SessionId(1) and state.brokers[1].session == SessionId(2)


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["kip", "kafka-3.9"])
def test_zk_lag_explores_to_completion_clean(profile):
    """Scope zk-lag is complete at depth 25 with 223,648 states under both profiles and breaks nothing (the default
    run pins it to depth 10 in the manifest: the whole search takes minutes)."""
    from model.migration import Profile
    from properties.explore import explore

    result = explore("zk-lag", Variant(profile=Profile(profile)), workers=2)
    assert result.complete and not result.violations
    assert (result.distinct_states, result.generated, result.depth) == (223_648, 919_578, 25)
