"""Differential trace files, `kraftcheck replay` of both kinds, the Mermaid diagram, and `kraftcheck pin`.

Issue 6 §3 "Counterexamples": a shrunk counterexample is saved as a versioned JSON trace;
`kraftcheck replay FILE` replays it deterministically, prints a table and a Mermaid sequence
diagram, and exits 1 when the violation reproduces (0 when it replays clean, 2 for a malformed
file); `kraftcheck pin` turns a trace or a failing seed into a pinned regression, refusing bad input
without writing anything.
"""

import dataclasses
import json
import re

import pytest

from model import SCOPES, initial_state, successors
from model.actions import ACTION_TYPES, Deliver, ExpireSession
from model.bugs import Bug
from properties import mermaid, traces
from properties.cli import main
from properties.plan import Plan
from properties.runs import run_seed
from properties.shrink import shrink_violation, signature_of, trace_for
from properties.traces import DifferentialTrace, Trace, TraceError

BUG = "impl_broker_epoch_from_session_id"
PLAN = Plan(scope="sim-migration", faults="all", mutant=BUG, steps=2000, runbook="mixed")


def run(capsys, *argv):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def shrunk_trace() -> DifferentialTrace:
    """KIP-380's rejected alternative: a broker epoch taken from the session id (seed 0 breaks at event 8)."""
    run = run_seed(PLAN, 0)
    found = run.disagreement
    signature = signature_of(found)
    result = shrink_violation(PLAN, 0, run.record, signature, seconds=30)
    assert result.reproduced
    return trace_for(PLAN, 0, result.steps, signature, result.summary, result.original_steps)


@pytest.fixture
def trace_file(tmp_path, shrunk_trace):
    return traces.save_trace(tmp_path / "counterexample.json", shrunk_trace)


def model_trace() -> Trace:
    """fencing, with session expiry keeping ephemerals: two deliveries, then the first broker's session expires."""
    scope = SCOPES["fencing"]
    state, actions = initial_state(scope), []
    for _ in range(2):
        action, state = next((a, s) for a, s in successors(state, scope) if isinstance(a, Deliver))
        actions.append(action)
    actions.append(ExpireSession(initial_state(scope).brokers[0].session))
    return Trace("fencing", tuple(actions), frozenset({Bug.EXPIRY_KEEPS_EPHEMERALS}), "EphemeralsOnlyForLiveSessions")


# ---- the file format ------------------------------------------------------------------------------


def test_differential_trace_round_trips_with_version_2_and_its_kind(tmp_path, shrunk_trace):
    """Saved and loaded again, a differential trace is equal to the one saved; the file says version 2."""
    path = traces.save_trace(tmp_path / "t.json", shrunk_trace)
    assert traces.load_trace(path) == shrunk_trace
    data = json.loads(path.read_text())
    assert data["version"] == 2 and data["kind"] == "differential" and data["impl_bugs"] == [BUG]
    assert data["signature"] == "BrokerEpochIsRegistrationCzxid" and data["violation"] == data["signature"]
    assert data["seed"] == 0 and data["original_steps"] == 8 and data["runbook"] == "finalize"
    assert all(set(step) == {"at", "cuts", "action"} for step in data["steps"])


def test_differential_trace_survives_pickling_for_spark_tasks(shrunk_trace):
    """A campaign's shrink task returns the trace from a Spark executor to the driver."""
    import pickle

    assert pickle.loads(pickle.dumps(shrunk_trace)) == shrunk_trace


def test_version_2_model_trace_loads_as_a_model_trace(tmp_path):
    """A version-2 file of kind "model" is the version-1 format plus the kind."""
    data = traces.trace_to_json(model_trace())
    data = {**data, "version": 2, "kind": "model"}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    assert traces.load_trace(path) == model_trace()


def changed(data: dict, **changes) -> dict:
    return {**data, **changes}


def step_changed(data: dict, index: int, **changes) -> dict:
    steps = [dict(s) for s in data["steps"]]
    steps[index] = {k: v for k, v in {**steps[index], **changes}.items() if v is not ...}
    return {**data, "steps": steps}


MALFORMED_V2 = [
    ("no kind", lambda d: {k: v for k, v in d.items() if k != "kind"}, "missing key 'kind'"),
    ("unknown kind", lambda d: changed(d, kind="other"), 'kind: expected "model" or "differential", got "other"'),
    ("model key in a differential trace", lambda d: changed(d, actions=[]), "unknown key 'actions'"),
    ("missing steps", lambda d: {k: v for k, v in d.items() if k != "steps"}, "missing key 'steps'"),
    ("unknown scope", lambda d: changed(d, scope="galaxy"), "scope: unknown scope 'galaxy'"),
    ("unknown impl bug", lambda d: changed(d, impl_bugs=["impl_typo"]), 'impl_bugs: unknown seeded bug "impl_typo"'),
    ("impl bug twice", lambda d: changed(d, impl_bugs=[BUG, BUG]), f'impl_bugs: "{BUG}" is listed twice'),
    ("seed null", lambda d: changed(d, seed=None), "seed: expected an integer >= 0 (the cluster's seed), got null"),
    ("seed negative", lambda d: changed(d, seed=-1), "seed: expected an integer >= 0 (the cluster's seed), got -1"),
    ("empty signature", lambda d: changed(d, signature=""), "signature: expected a non-empty string"),
    ("violation is a witness", lambda d: changed(d, violation="ControllerFailover"), "is neither \"Disagreement\""),
    ("negative original steps", lambda d: changed(d, original_steps=-1), "original_steps: expected an integer >= 0"),
    ("steps not a list", lambda d: changed(d, steps={}), "steps: expected a list, got an object"),
    ("step without action", lambda d: step_changed(d, 0, action=...), "steps[0]: missing key 'action'"),
    ("step with another key", lambda d: step_changed(d, 0, now=3), "steps[0]: a step has no key 'now'"),
    ("time not an integer", lambda d: step_changed(d, 0, at="5"), 'steps[0].at: expected an integer, got "5"'),
    ("time goes back", lambda d: step_changed(d, 1, at=0), "steps[1].at: 0 is earlier than the step before"),
    ("cut not a pair", lambda d: step_changed(d, 0, cuts=[[1]]), "steps[0].cuts[0]: expected a pair of node ids"),
    ("unknown action", lambda d: step_changed(d, 1, action={"kind": "Teleport"}),
     "steps[1].action: unknown action kind 'Teleport'"),
]


@pytest.mark.parametrize("damage, expected", [(f, e) for _, f, e in MALFORMED_V2], ids=[n for n, _, _ in MALFORMED_V2])
def test_malformed_differential_trace_is_one_line_naming_file_path_and_problem(tmp_path, shrunk_trace, damage,
                                                                               expected):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(damage(traces.trace_to_json(shrunk_trace))))
    with pytest.raises(TraceError) as raised:
        traces.load_trace(path)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{path}: ") and expected in message


# ---- kraftcheck replay ----------------------------------------------------------------------------


def test_replay_of_a_differential_trace_reproduces_with_its_bug_and_exits_1(capsys, trace_file, shrunk_trace):
    """The table has one row per step with its time, the last row says what broke; the Mermaid diagram follows."""
    code, out, err = run(capsys, "replay", trace_file)
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["step", "at", "(ms)", "actor", "action", "result"]
    assert lines[1].split()[:2] == ["1", str(shrunk_trace.steps[0].now)]
    assert f"{len(shrunk_trace.steps)}  " in lines[len(shrunk_trace.steps)]
    assert lines[len(shrunk_trace.steps)].endswith("VIOLATION: breaks BrokerEpochIsRegistrationCzxid")
    assert f"step {len(shrunk_trace.steps)} reproduces BrokerEpochIsRegistrationCzxid" in out
    assert "sequenceDiagram" in out


def test_replay_without_the_seeded_bug_replays_clean_and_exits_0(capsys, tmp_path, shrunk_trace):
    """The same steps on the correct implementation: it agrees with the model, and the output says so."""
    path = traces.save_trace(tmp_path / "fixed.json", dataclasses.replace(shrunk_trace, impl_bugs=frozenset()))
    code, out, _ = run(capsys, "replay", path)
    assert code == 0
    assert "replayed clean: the recorded violation BrokerEpochIsRegistrationCzxid did not reproduce" in out
    code, out, _ = run(capsys, "replay", path, "--json")
    assert code == 0 and json.loads(out)["reproduced"] is False and json.loads(out)["signature"] is None


def test_replay_json_of_a_differential_trace(capsys, trace_file, shrunk_trace):
    code, out, _ = run(capsys, "replay", trace_file, "--json")
    result = json.loads(out)
    assert code == 1 and result["kind"] == "differential" and result["reproduced"] is True
    assert result["violation_step"] == len(shrunk_trace.steps) and result["impl_bugs"] == [BUG]
    assert result["mermaid"].startswith("sequenceDiagram\n")


def test_replay_output_is_deterministic(capsys, trace_file, tmp_path):
    """Twice the same file, byte for byte the same output, for both kinds and every output form."""
    model_file = traces.save_trace(tmp_path / "model.json", model_trace())
    for path in (trace_file, model_file):
        for form in ((), ("--json",), ("--mermaid",)):
            first, second = run(capsys, "replay", path, *form), run(capsys, "replay", path, *form)
            assert first == second


def test_replay_of_a_model_trace_prints_its_table_and_diagram(capsys, tmp_path):
    path = traces.save_trace(tmp_path / "model.json", model_trace())
    code, out, _ = run(capsys, "replay", path)
    assert code == 1 and "step 3 breaks EphemeralsOnlyForLiveSessions (reproduced)" in out
    assert "Note over ZK: VIOLATION: breaks EphemeralsOnlyForLiveSessions" in out
    clean = traces.save_trace(tmp_path / "clean.json", dataclasses.replace(model_trace(), bugs=frozenset()))
    code, out, _ = run(capsys, "replay", clean)
    assert code == 0 and "replayed clean: the recorded violation EphemeralsOnlyForLiveSessions did not reproduce" in out


def test_replay_of_a_malformed_differential_file_is_one_line_and_exit_2(capsys, tmp_path, shrunk_trace):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**traces.trace_to_json(shrunk_trace), "seed": "zero"}))
    code, out, err = run(capsys, "replay", path)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"kraftcheck replay: error: {path}: seed:")


# ---- the Mermaid diagram -----------------------------------------------------------------------------

PARTICIPANT = re.compile(r"^    participant (\w+) as [^;#\n]+$")
ARROW = re.compile(r"^    (\w+)(->>|-->>|--x)(\w+): [^;#\n]+$")
NOTE = re.compile(r"^    Note over (\w+)(?:,(\w+))?: [^;#\n]+$")


def check_mermaid(text: str) -> list[str]:
    """Structural validity: the header, then participants, then arrows and notes between declared participants only.
    Returns the arrow and note lines."""
    lines = text.splitlines()
    assert lines[0] == "sequenceDiagram" and text.endswith("\n")
    declared: list[str] = []
    body: list[str] = []
    for line in lines[1:]:
        if m := PARTICIPANT.match(line):
            assert not body, f"participant declared after use: {line}"
            assert m.group(1) not in declared, f"declared twice: {line}"
            declared.append(m.group(1))
            continue
        m = ARROW.match(line) or NOTE.match(line)
        assert m is not None, f"not a participant, arrow or note: {line!r}"
        used = [m.group(1), m.group(3)] if m.re is ARROW else [g for g in m.groups() if g]
        assert set(used) <= set(declared), f"undeclared participant in {line!r}"
        body.append(line)
    return body


def test_mermaid_of_a_differential_trace_is_valid_and_ends_with_the_violation(shrunk_trace):
    body = check_mermaid(mermaid.sequence_diagram(shrunk_trace))
    assert len(body) == len(shrunk_trace.steps) + 1
    assert body[-1] == "    Note over B2,ZK: VIOLATION: breaks BrokerEpochIsRegistrationCzxid"
    assert body[0].startswith("    B2->>ZK: 1. open session")


def test_mermaid_of_a_model_trace_is_valid_with_deliveries_from_sender_to_destination():
    trace = model_trace()
    text = mermaid.sequence_diagram(trace)
    body = check_mermaid(text)
    first = trace.actions[0].message
    assert body[0].startswith(f"    B{first.controller_id}->>B{first.dest}: 1. {type(first).__name__}")
    assert "participant C3000" not in text  # fencing has no KRaft quorum


def test_mermaid_draws_a_lost_message_a_duplicate_and_a_fault():
    delivery = model_trace().actions[0]
    from model.actions import CrashController, Drop, Redeliver

    text = mermaid.diagram(SCOPES["fencing"], [Drop(delivery.message), Redeliver(delivery.message),
                                               CrashController(3001)], "Disagreement:state@X:a,b")
    body = check_mermaid(text)
    assert "--x" in body[0] and "-->>" in body[1] and body[2] == "    Note over C3001: 3. crash"
    assert body[3] == "    Note over C3001: VIOLATION: implementation and model disagree (state) on a, b"


def test_mermaid_has_a_picture_for_every_action_type():
    """A new action type must get its own case in mermaid.view (the fallback only names it)."""
    import inspect

    source = inspect.getsource(mermaid.view)
    missing = [cls.__name__ for cls in ACTION_TYPES if not re.search(rf"(case|\|) act\.{cls.__name__}\(", source)]
    assert missing == []


# ---- kraftcheck pin ---------------------------------------------------------------------------------


def test_pin_of_a_failing_seed_writes_a_trace_that_replays(capsys, tmp_path):
    """One command: the seed runs, is shrunk and pinned; the pinned file reproduces under `kraftcheck replay`."""
    out_dir = tmp_path / "regressions"
    code, out, _ = run(capsys, "pin", "--seed", 0, "--mutant", BUG, "--name", "epoch", "--dir", out_dir)
    assert code == 0 and out.startswith(f"pinned {out_dir / 'epoch.json'}: BrokerEpochIsRegistrationCzxid, 2 steps")
    pinned = traces.load_trace(out_dir / "epoch.json")
    assert isinstance(pinned, DifferentialTrace) and len(pinned.steps) == 2
    assert run(capsys, "replay", out_dir / "epoch.json")[0] == 1


def test_pin_of_a_trace_file_copies_it_under_its_name(capsys, tmp_path, trace_file, shrunk_trace):
    out_dir = tmp_path / "regressions"
    code, out, _ = run(capsys, "pin", trace_file, "--dir", out_dir)
    assert code == 0 and traces.load_trace(out_dir / "counterexample.json") == shrunk_trace


@pytest.mark.parametrize("argv, complaint", [
    (("--seed", 0, "--steps", 3), "seed 0 does not fail"),
    (("--seed", 0, "--scope", "galaxy"), "unknown scope 'galaxy'"),
    (("--seed", 0, "--faults", "lightning"), "unknown fault mix 'lightning'"),
    (("--seed", 0, "--mutant", "nope"), "unknown seeded bug 'nope'"),
    ((), "give a trace FILE or --seed N"),
    (("--seed", 0, "--name", "../escape"), "--name '../escape'"),
])
def test_pin_refuses_bad_input_in_one_line_and_writes_nothing(capsys, tmp_path, argv, complaint):
    out_dir = tmp_path / "regressions"
    code, out, err = run(capsys, "pin", *argv, "--dir", out_dir)
    assert code == 2 and out == "" and err.count("\n") == 1 and complaint in err
    assert not out_dir.exists()


def test_pin_refuses_a_name_that_exists_a_malformed_file_and_a_trace_that_does_not_reproduce(
        capsys, tmp_path, trace_file, shrunk_trace):
    out_dir = tmp_path / "regressions"
    out_dir.mkdir()
    (out_dir / "taken.json").write_text("{}")
    cases = [
        (("--seed", 0, "--mutant", BUG, "--name", "taken"), "taken.json exists"),
        ((trace_file, "--seed", 0), "give a trace FILE or --seed N (not both)"),
        ((trace_file, "--mutant", BUG), "go with --seed, not with a FILE"),
    ]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    cases.append(((bad,), "bad.json: not JSON"))
    stale = traces.save_trace(tmp_path / "stale.json", dataclasses.replace(shrunk_trace, steps=shrunk_trace.steps[1:]))
    cases.append(((stale,), "does not reproduce with its seeded bugs"))
    for argv, complaint in cases:
        code, out, err = run(capsys, "pin", *argv, "--dir", out_dir)
        assert code == 2 and out == "" and err.count("\n") == 1 and complaint in err, (argv, err)
    assert [p.name for p in out_dir.iterdir()] == ["taken.json"] and (out_dir / "taken.json").read_text() == "{}"
