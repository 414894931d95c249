"""Replayable trace files (properties/traces.py): exact round trips, one-line errors, atomic writes, replay.

A trace is only worth keeping if it comes back exactly as it was written, if a damaged file is
refused with a message that says where the damage is, and if replaying it through ``step``
shows the same violation at the same step.
"""

import json
import os
from collections import deque

import pytest

from model import SCOPES, Variant, initial_state, successors
from model.actions import (
    ACTION_TYPES,
    AlterPartition,
    ChangeIbp,
    CrashBroker,
    Deliver,
    ExpireSession,
    LeaderAndIsrFailsInBroker,
    RestartBroker,
)
from model.bugs import CORRECT, Bug
from model.migration import Profile
from model.state import LeaderAndIsr
from model.types import Ibp
from properties import traces
from properties.simulate import random_path
from properties.traces import Trace, TraceError


def walk_actions(seed_count: int = 25, steps: int = 60) -> dict[type, list]:
    """Real actions of every type: every enabled action seen along seeded random walks in every scope."""
    seen: dict[type, list] = {}
    for scope in SCOPES.values():
        for seed in range(seed_count):
            for _, choices, _ in random_path(scope, seed, steps):
                for action, _ in choices:
                    seen.setdefault(type(action), []).append(action)
    # controller registrations happen only under kafka-3.9 (from metadata.version 3.7-IV0)
    for seed in range(3):
        for _, choices, _ in random_path(SCOPES["controller-registration"], seed, steps, KAFKA_3_9):
            for action, _ in choices:
                seen.setdefault(type(action), []).append(action)
    # an adding replica's ISR join is enabled only deep in the reassignment scope, which walks rarely reach
    seen.setdefault(AlterPartition, []).extend(first_enabled(SCOPES["reassignment"], AlterPartition))
    # a LeaderAndIsr failing inside a broker is kafka-3.9's alone
    seen.setdefault(LeaderAndIsrFailsInBroker, []).extend(
        first_enabled(SCOPES["failed-leader-and-isr"], LeaderAndIsrFailsInBroker, KAFKA_3_9))
    return seen


def first_enabled(scope, kind: type, variant=CORRECT) -> list:
    """The actions of ``kind`` enabled in the first state a breadth-first search of ``scope`` finds them in."""
    start = initial_state(scope)
    frontier, seen = deque([start]), {start}
    while frontier:
        state = frontier.popleft()
        found = []
        for action, nxt in successors(state, scope, variant):
            if isinstance(action, kind):
                found.append(action)
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
        if found:
            return found
    return []


KAFKA_3_9 = Variant(profile=Profile.KAFKA_3_9)
ACTIONS_BY_TYPE = walk_actions()


def write(tmp_path, text: str, name: str = "trace.json"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def deliveries(count: int) -> list:
    """``count`` harmless steps in the fencing scope: deliver start-up requests, first in order."""
    scope = SCOPES["fencing"]
    state, actions = initial_state(scope), []
    for _ in range(count):
        action, state = next((a, s) for a, s in successors(state, scope) if isinstance(a, Deliver))
        actions.append(action)
    return actions


def controller_session_expiry(state) -> ExpireSession:
    return ExpireSession(state.brokers[0].session)


# ---- round trips -----------------------------------------------------------------------------------


def test_trace_round_trip_of_every_action_type_is_exact():
    """Every action the model can take, messages and enums inside included, survives JSON unchanged."""
    assert set(ACTIONS_BY_TYPE) == set(ACTION_TYPES), "the walks missed an action type"
    for kind, actions in ACTIONS_BY_TYPE.items():
        for action in set(actions):
            data = json.loads(json.dumps(traces.encode(action)))
            back = traces.decode(data)
            assert back == action and type(back) is kind
            if isinstance(action, Deliver):
                assert type(back.message) is type(action.message)
            if isinstance(action, ChangeIbp):
                assert back.ibp is action.ibp


def test_trace_file_round_trip_keeps_scope_bugs_violation_seed_and_actions(tmp_path):
    """A whole trace, saved and loaded again, is equal to the one saved."""
    actions = tuple(a for kind in ACTION_TYPES for a in ACTIONS_BY_TYPE[kind][:3])
    trace = Trace("cluster", actions, frozenset({Bug.ACCEPT_STALE_BROKER_EPOCH}), "NoStaleControlRequestApplied", 42)
    path = traces.save_trace(tmp_path / "t.json", trace)
    assert traces.load_trace(path) == trace
    data = json.loads(path.read_text())
    assert data["schema"] == "kraftcheck-trace" and data["version"] == 1
    assert data["bugs"] == ["accept_stale_broker_epoch"] and data["seed"] == 42


def test_trace_encodes_enums_by_name_and_messages_by_kind():
    """The file is readable on its own: enum members by name, a message as an object with its kind."""
    assert traces.encode(ChangeIbp(2, Ibp.IBP_2_6_IV0)) == {"kind": "ChangeIbp", "broker": 2, "ibp": "IBP_2_6_IV0"}
    message = LeaderAndIsr(0, 1, 5, 1, 0, 0, 1, (0, 1))
    encoded = traces.encode(Deliver(message))
    assert encoded["message"]["kind"] == "LeaderAndIsr" and encoded["message"]["isr"] == [0, 1]
    assert traces.describe(ChangeIbp(2, Ibp.IBP_2_6_IV0)) == "ChangeIbp(broker=2, ibp=Ibp.IBP_2_6_IV0)"


# ---- malformed files ----------------------------------------------------------------------------------

GOOD = {
    "schema": "kraftcheck-trace",
    "version": 1,
    "scope": "fencing",
    "bugs": [],
    "violation": None,
    "seed": None,
    "actions": [{"kind": "CrashBroker", "broker": 1}],
}


def with_(**changes):
    return json.dumps({**GOOD, **changes})


def without(key):
    return json.dumps({k: v for k, v in GOOD.items() if k != key})


def deliver(**message):
    base = {"kind": "StopReplica", "controller_id": 0, "controller_epoch": 1, "broker_epoch": 3, "dest": 1,
            "partition": 0, "delete_partition": False}
    return [{"kind": "Deliver", "message": {**base, **message}}]


MALFORMED = [
    ("not JSON", '{"schema": "kraftcheck-trace",', "not JSON: "),
    ("top level not an object", "[1, 2]", "expected a JSON object at the top, got a list"),
    ("wrong schema", with_(schema="other"), 'schema is "other", expected "kraftcheck-trace"'),
    ("wrong version", with_(version=2), "version is 2, this kraftcheck reads version 1"),
    ("unknown key", with_(steps=[]), "unknown key 'steps'"),
    ("missing key", without("actions"), "missing key 'actions'"),
    ("unknown scope", with_(scope="galaxy"), 'scope: unknown scope "galaxy"'),
    ("unknown bug", with_(bugs=["typo_bug"]), 'bugs: unknown seeded bug "typo_bug"'),
    ("bugs not a list", with_(bugs="x"), "bugs: expected a list of seeded-bug names"),
    ("bug twice", with_(bugs=["write_without_zxid"] * 2), 'bugs: "write_without_zxid" is listed twice'),
    ("violation is a witness", with_(violation="ControllerFailover"), "is not an ALWAYS or TRANSITION property"),
    ("seed not an integer", with_(seed="7"), 'seed: expected an integer >= 0 or null, got "7"'),
    ("seed negative", with_(seed=-3), 'seed: expected an integer >= 0 or null, got -3'),
    ("actions not a list", with_(actions={}), "actions: expected a list, got an object"),
    ("unknown action kind", with_(actions=[GOOD["actions"][0], {"kind": "Teleport"}]),
     "actions[1]: unknown action kind 'Teleport'"),
    ("action without kind", with_(actions=[{"broker": 1}]), 'actions[0]: missing "kind"'),
    ("field of the wrong type", with_(actions=[{"kind": "CrashBroker", "broker": "one"}]),
     'actions[0].broker: expected an integer, got "one"'),
    ("boolean for an integer", with_(actions=[{"kind": "CrashBroker", "broker": True}]),
     "actions[0].broker: expected an integer, got true"),
    ("missing field", with_(actions=[{"kind": "CrashBroker"}]), "actions[0]: CrashBroker is missing field 'broker'"),
    ("extra field", with_(actions=[{"kind": "ZkOutage", "broker": 1}]), "actions[0]: ZkOutage has no field 'broker'"),
    ("unknown enum member", with_(actions=[{"kind": "ChangeIbp", "broker": 1, "ibp": "IBP_9_9"}]),
     'actions[0].ibp: expected one of Ibp (IBP_2_6_IV0, IBP_2_7_IV0, IBP_3_3_IV0, IBP_3_4_IV0, IBP_3_5_IV2, '
     'IBP_3_6_IV1, IBP_3_7_IV0, IBP_3_8_IV0, IBP_3_9_IV0),'
     ' got "IBP_9_9"'),
    ("unknown message kind", with_(actions=deliver(kind="Gossip")),
     "actions[0].message: unknown message kind 'Gossip'"),
    ("bad field inside a message", with_(actions=[{"kind": "Deliver", "message": {
        "kind": "LeaderAndIsr", "controller_id": 0, "controller_epoch": 1, "broker_epoch": 3, "dest": 1,
        "partition": 0, "leader": 0, "leader_epoch": 1, "isr": [0, "1"]}}]),
     'actions[0].message.isr[1]: expected an integer, got "1"'),
    ("message not an object", with_(actions=[{"kind": "Drop", "message": 3}]),
     "actions[0].message: expected an object"),
]


@pytest.mark.parametrize("text, expected", [(t, e) for _, t, e in MALFORMED], ids=[n for n, _, _ in MALFORMED])
def test_trace_malformed_file_is_refused_with_one_specific_line(tmp_path, text, expected):
    """A damaged or hand-edited file is a TraceError naming the file, where in it, and what is wrong."""
    path = write(tmp_path, text)
    with pytest.raises(TraceError) as raised:
        traces.load_trace(path)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert expected in message


def test_trace_missing_or_binary_file_is_a_trace_error(tmp_path):
    """Files that cannot be read at all are TraceErrors too, not OSError or UnicodeDecodeError."""
    with pytest.raises(TraceError, match="cannot read"):
        traces.load_trace(tmp_path / "absent.json")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TraceError, match="not UTF-8"):
        traces.load_trace(binary)


# ---- atomic writes --------------------------------------------------------------------------------------


def test_trace_that_cannot_be_encoded_writes_nothing(tmp_path):
    """An action that is not a model action (here, a broker id that is a string) fails before any write."""
    target = tmp_path / "out" / "t.json"
    bad = Trace("fencing", (CrashBroker(1), CrashBroker("one")))
    with pytest.raises(TraceError, match=r"actions\[1\]\.broker: expected an integer"):
        traces.save_trace(target, bad)
    assert not target.exists()
    assert not target.parent.exists() or list(target.parent.iterdir()) == []


def test_trace_interrupted_write_leaves_the_old_file_whole_and_no_temporary(tmp_path, monkeypatch):
    """If the rename never happens (a crash, a full disk), the old file is untouched and no part-file remains."""
    target = tmp_path / "t.json"
    old = Trace("fencing", (CrashBroker(1),))
    traces.save_trace(target, old)
    before = target.read_bytes()

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        traces.save_trace(target, Trace("fencing", (CrashBroker(0), CrashBroker(1))))
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]


# ---- replay ---------------------------------------------------------------------------------------------


def test_trace_replay_finds_the_violation_at_the_step_it_happens():
    """With session expiry keeping ephemerals, expiring the controller's session breaks the invariant at once."""
    prefix = deliveries(2)
    state = initial_state(SCOPES["fencing"])
    expiry = controller_session_expiry(state)
    actions = (*prefix, expiry, CrashBroker(1))  # the last action is never reached
    trace = Trace("fencing", actions, frozenset({Bug.EXPIRY_KEEPS_EPHEMERALS}), "EphemeralsOnlyForLiveSessions")
    result = traces.replay(trace)
    assert result.violation_step == 3 and result.not_enabled_index is None
    assert "EphemeralsOnlyForLiveSessions" in result.violations and result.reproduced
    assert [s.number for s in result.steps] == [1, 2, 3]
    assert "step 3 breaks EphemeralsOnlyForLiveSessions (reproduced)" in result.summary()


def test_trace_replay_of_the_same_actions_without_the_bug_breaks_nothing():
    """The same actions under the correct model: no violation, and the summary says the expected one did not happen."""
    state = initial_state(SCOPES["fencing"])
    trace = Trace("fencing", (*deliveries(2), controller_session_expiry(state)), frozenset(),
                  "EphemeralsOnlyForLiveSessions")
    result = traces.replay(trace)
    assert result.violation_step is None and not result.reproduced and len(result.steps) == 3
    assert "expected EphemeralsOnlyForLiveSessions, which did not happen" in result.summary()


def test_trace_replay_reports_an_action_that_is_not_enabled_with_its_index():
    """A running broker cannot be restarted: the replay stops there and names actions[2]."""
    actions = (*deliveries(2), RestartBroker(0), CrashBroker(1))
    result = traces.replay(Trace("fencing", actions))
    assert result.not_enabled_index == 2 and result.violation_step is None and not result.reproduced
    assert result.steps[-1].enabled is False and len(result.steps) == 3
    assert "actions[2] (step 3) is not enabled: RestartBroker(broker=0)" in result.summary()


def test_trace_table_shows_step_action_and_violations():
    """The readable table: one row per step taken, the violations on the step that broke them."""
    state = initial_state(SCOPES["fencing"])
    actions = (*deliveries(1), controller_session_expiry(state))
    trace = Trace("fencing", actions, frozenset({Bug.EXPIRY_KEEPS_EPHEMERALS}), "EphemeralsOnlyForLiveSessions")
    table = traces.render(traces.replay(trace))
    lines = table.splitlines()
    assert lines[0].split() == ["step", "action", "violations"]
    assert lines[1].split()[0] == "1" and lines[1].endswith("-")
    assert lines[2].split()[0] == "2" and traces.describe(actions[1]) in lines[2]
    assert lines[2].endswith("EphemeralsOnlyForLiveSessions")
    not_enabled = traces.render(traces.replay(Trace("fencing", (RestartBroker(0),))))
    assert "NOT ENABLED" in not_enabled


def test_trace_variant_switches_on_the_listed_bugs():
    trace = Trace("fencing", (), frozenset({Bug.WRITE_WITHOUT_ZXID}))
    assert trace.variant == Variant(frozenset({Bug.WRITE_WITHOUT_ZXID}))
