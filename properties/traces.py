"""Replayable trace files: a counterexample as plain JSON that any later run can check again.

A trace file names a scope, the seeded bugs switched on, the actions taken from the scope's
initial state, and the invariant the last action broke::

    {
      "schema": "kraftcheck-trace",
      "version": 1,
      "scope": "bounce",
      "bugs": ["broker_change_ignores_czxid"],
      "violation": "ControllerSeesEveryBounce",
      "seed": null,
      "actions": [
        {"kind": "StopBroker", "broker": 1},
        {"kind": "Deliver", "message": {"kind": "UpdateMetadata", "controller_id": 0, ...}},
        ...
      ]
    }

Version 2 adds ``"kind"``: ``"model"`` (the fields above) or ``"differential"``, a run of the
implementation checked against the model (``properties.differential``), as the simulator
recorded it and ``properties.shrink`` shrank it::

    {
      "schema": "kraftcheck-trace",
      "version": 2,
      "kind": "differential",
      "scope": "sim-migration",
      "profile": "kip",
      "bugs": [],
      "impl_bugs": ["impl_broker_epoch_from_session_id"],
      "seed": 0,
      "faults": "all",
      "runbook": "finalize",
      "violation": "BrokerEpochIsRegistrationCzxid",
      "signature": "BrokerEpochIsRegistrationCzxid",
      "summary": "after RegisterBroker(broker=2): the implementation broke BrokerEpochIsRegistrationCzxid",
      "original_steps": 5,
      "steps": [
        {"at": 13, "cuts": [], "action": {"kind": "OpenSession", "broker": 2}},
        ...
      ]
    }

``seed`` is the cluster's (its rng draws incarnation ids), each step keeps the simulated time
(``at``, ms) and the node pairs a partition separated (``cuts``); ``signature`` is what a replay
must reproduce (``properties.shrink.signature_of``); ``faults``, ``summary`` and
``original_steps`` are for the reader, and so are ``runbook`` and ``aims`` (the faults the run
aimed at driver states: ``properties.steering``) but for a stall. A stall's trace (a progress
goal not met: ``properties.progress``) also has ``"handover": {"at": 208, "events": 1792,
"held": [], "rolling_back": false, "rolled_back": false, "progress": "migration"}``: the step
where its faults stopped, how many events its quiet continuation may take, and the operator's
memory the continuation takes over, which with ``runbook`` is what a replay generates the
continuation from. A version-1 file is a model trace.

Rules:
- The codec is generic: a record (an action or a message inside ``Deliver``/``Drop``) is an
  object whose ``kind`` is its class name, with one key per dataclass field. Each field is
  encoded and decoded by its annotated type: integers (and the ``NewType`` identifiers over
  them) as numbers, enums by member name, tuples as lists, unions by the ``kind`` of the
  record. A new action or message type in the model needs no change here: the registry is
  read from ``ACTION_TYPES`` and the ``Message`` union.
- Decoding is exact: ``decode(encode(action)) == action`` for every model action.
- A malformed file is a ``TraceError`` with one line saying where and what: the file, the
  JSON path (``actions[3].message.isr[1]``) and the problem. Nothing else escapes ``load_trace``.
  The codec does not check that the actions fit the scope; ``check_fits`` does (a broker, KRaft
  controller or partition the scope does not have), and what replays a file calls it first.
- ``save_trace`` writes a temporary file in the target's directory and renames it over the
  target, so a reader sees the old file or the whole new one, never half of one.
- Model traces are still written as version 1 (every kraftcheck reads them); differential
  traces as version 2. ``load_trace`` returns a ``Trace`` or a ``DifferentialTrace``.
- ``replay`` runs the actions through ``step`` from ``initial_state(scope)`` with the trace's
  variant, checks ``violations`` after every step, and stops at the first violation or at the
  first action that is not enabled. It replays against the model as it is now: a trace saved
  before the model changed may no longer reproduce, and the summary says so. A differential
  trace is replayed by ``properties.shrink.replay_trace`` (it needs the implementation).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from impl.bugs import ImplBug
from model import SCOPES, Variant, initial_state, step
from model.actions import ACTION_TYPES, Action
from model.bugs import Bug
from model.harness import HARNESS_ACTION_TYPES
from model.invariants import BY_NAME, Kind, violations
from model.kraft import QUIET_WHEN_EMPTY as PARTITION_QUIET
from model.kraft import PartitionChangeRecord, PartitionImage, PartitionRecord
from model.migration import Profile
from model.state import KRaftRequest, Message

if TYPE_CHECKING:
    from impl.sim.simulator import SimStep
    from properties.progress import Handover

SCHEMA = "kraftcheck-trace"
VERSION = 1  # model traces
DIFFERENTIAL_VERSION = 2  # adds "kind"; differential traces
KINDS = ("model", "differential")
_TOP_LEVEL_KEYS = ("schema", "version", "scope", "profile", "bugs", "violation", "seed", "actions")
_REQUIRED_KEYS = frozenset(_TOP_LEVEL_KEYS) - {"seed", "profile"}  # absent profile: kip
_DIFFERENTIAL_KEYS = ("schema", "version", "kind", "scope", "profile", "bugs", "impl_bugs", "seed", "faults",
                      "runbook", "aims", "violation", "signature", "summary", "original_steps", "handover", "steps")
_HANDOVER_KEYS = ("at", "events", "held", "rolling_back", "rolled_back", "progress")
# for the reader only, so optional: profile (absent: kip), faults, runbook, violation, summary, original_steps
_DIFFERENTIAL_REQUIRED = frozenset({"schema", "version", "kind", "scope", "bugs", "impl_bugs", "seed", "signature",
                                    "steps"})
_STEP_KEYS = ("at", "cuts", "action")
_VERSIONS_READ = 'version 1 (model traces) and version 2 (with a "kind": model or differential)'

MESSAGE_TYPES: tuple[type, ...] = typing.get_args(Message)
# Every record type a trace can hold, by the name written in its "kind".
RECORD_TYPES: dict[str, type] = {cls.__name__: cls for cls in (*ACTION_TYPES, *MESSAGE_TYPES)}


class TraceError(ValueError):
    """A trace that cannot be read, written or trusted; the message is one line."""


@dataclass(frozen=True)
class Trace:
    """A run of the model: which scope and bugs, which actions, and what the last one broke."""

    scope: str
    actions: tuple[Action, ...]
    bugs: frozenset[Bug] = frozenset()
    violation: str | None = None
    seed: int | None = None
    profile: Profile = Profile.KIP  # optional in files: absent means kip

    @property
    def variant(self) -> Variant:
        return Variant(frozenset(self.bugs), self.profile)

    @property
    def kind(self) -> str:
        return "model"


@dataclass(frozen=True)
class DifferentialTrace:
    """A run of the implementation checked against the model: the simulator's steps, and what the last one broke."""

    scope: str  # a simulator scenario or a model scope (``impl.sim.scenarios.scenario``)
    steps: tuple[SimStep, ...]
    seed: int  # the cluster's: its rng draws incarnation ids
    signature: str  # what a replay must reproduce (``properties.shrink.signature_of``)
    impl_bugs: frozenset[ImplBug] = frozenset()
    bugs: frozenset[Bug] = frozenset()  # the model's seeded bugs (its variant)
    profile: Profile = Profile.KIP
    violation: str | None = None  # the first broken invariant, or "Disagreement"
    summary: str | None = None  # the disagreement's first line when it was recorded
    faults: str | None = None  # the fault mix the run had, for the record (a replay needs none)
    runbook: str | None = None  # likewise; a stall's replay needs it (its quiet continuation follows it)
    original_steps: int | None = None  # how many events the run had before shrinking
    # A stall's (``properties.progress``): where its quiet continuation starts in ``steps``, which the replay
    # generates again from there rather than performing the recorded steps.
    handover: Handover | None = None
    aims: tuple[str, ...] = ()  # the faults the run aimed at driver states, for the reader and to run it again

    @property
    def variant(self) -> Variant:
        return Variant(frozenset(self.bugs), self.profile)

    @property
    def actions(self) -> tuple[Action, ...]:
        return tuple(s.action for s in self.steps)

    @property
    def kind(self) -> str:
        return "differential"


# ---- the codec: records, enums, tuples and integers, driven by field annotations -------------


def _field_types(cls: type) -> list[tuple[str, Any]]:
    hints = typing.get_type_hints(cls)
    return [(f.name, hints[f.name]) for f in fields(cls)]


_FIELDS: dict[type, list[tuple[str, Any]]] = {cls: _field_types(cls) for cls in RECORD_TYPES.values()}
# What a script's ``inject`` decodes (properties.scenario): no trace file holds one.
_FIELDS.update({cls: _field_types(cls) for cls in (*HARNESS_ACTION_TYPES, *typing.get_args(KRaftRequest))})


def _base(hint: Any) -> Any:
    """The runtime type behind a ``NewType`` (``BrokerId`` -> ``int``), else the hint itself."""
    while hasattr(hint, "__supertype__"):
        hint = hint.__supertype__
    return hint


def _is_union(hint: Any) -> bool:
    return isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union


def _hint_name(hint: Any) -> str:
    if _is_union(hint):
        return " or ".join(_hint_name(h) for h in typing.get_args(hint))
    return getattr(hint, "__name__", str(hint))


def encode(value: Any, hint: Any = Action, where: str = "action") -> Any:
    """``value`` (of annotated type ``hint``) as plain JSON data; TraceError if it does not fit."""
    hint = _base(hint)
    if _is_union(hint):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is not type(None) and type(value) is _base(option):
                return encode(value, option, where)
        raise TraceError(f"{where}: expected {_hint_name(hint)}, got {type(value).__name__}")
    if hint in _FIELDS:
        if type(value) is not hint:
            raise TraceError(f"{where}: expected {hint.__name__}, got {type(value).__name__}")
        out: dict[str, Any] = {"kind": hint.__name__}
        for name, field_hint in _FIELDS[hint]:
            out[name] = encode(getattr(value, name), field_hint, f"{where}.{name}")
        return out
    if isinstance(hint, type) and issubclass(hint, Enum):
        if not isinstance(value, hint):
            raise TraceError(f"{where}: expected {hint.__name__}, got {value!r}")
        return value.name
    if hint is bool:
        if not isinstance(value, bool):
            raise TraceError(f"{where}: expected a boolean, got {value!r}")
        return value
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise TraceError(f"{where}: expected an integer, got {value!r}")
        return int(value)
    if hint is str:
        if not isinstance(value, str):
            raise TraceError(f"{where}: expected a string, got {value!r}")
        return value
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, tuple):
            raise TraceError(f"{where}: expected a tuple, got {type(value).__name__}")
        return [encode(item, h, f"{where}[{i}]") for i, (item, h) in enumerate(zip(value, _item_hints(hint, value)))]
    raise TraceError(f"{where}: no JSON form for annotation {hint!r}")


def _item_hints(hint: Any, items: Sequence) -> list[Any]:
    """One hint per item of a tuple annotation: ``tuple[X, ...]`` or a fixed ``tuple[X, Y]``."""
    args = typing.get_args(hint)
    if len(args) == 2 and args[1] is Ellipsis:
        return [args[0]] * len(items)
    if len(args) != len(items):
        raise TraceError(f"expected {len(args)} items, got {len(items)}")
    return list(args)


def decode(data: Any, hint: Any = Action, where: str = "action") -> Any:
    """The value of annotated type ``hint`` that ``data`` encodes; TraceError naming ``where`` if none."""
    hint = _base(hint)
    if _is_union(hint):
        options = typing.get_args(hint)
        if data is None:
            if type(None) in options:
                return None
            raise TraceError(f"{where}: expected {_hint_name(hint)}, got null")
        records = [o for o in options if o in _FIELDS]
        if records and isinstance(data, dict):
            return _decode_record(data, {o.__name__: o for o in records}, where)
        for option in options:
            if option is not type(None) and option not in _FIELDS:
                return decode(data, option, where)
        raise TraceError(f"{where}: expected an object for {_hint_name(hint)}, got {_json_type(data)}")
    if hint in _FIELDS:
        return _decode_record(data, {hint.__name__: hint}, where)
    if isinstance(hint, type) and issubclass(hint, Enum):
        if not isinstance(data, str) or data not in hint.__members__:
            known = ", ".join(hint.__members__)
            raise TraceError(f"{where}: expected one of {hint.__name__} ({known}), got {json.dumps(data)}")
        return hint[data]
    if hint is bool:
        if not isinstance(data, bool):
            raise TraceError(f"{where}: expected true or false, got {json.dumps(data)}")
        return data
    if hint is int:
        if not isinstance(data, int) or isinstance(data, bool):
            raise TraceError(f"{where}: expected an integer, got {json.dumps(data)}")
        return data
    if hint is str:
        if not isinstance(data, str):
            raise TraceError(f"{where}: expected a string, got {json.dumps(data)}")
        return data
    if typing.get_origin(hint) is tuple:
        if not isinstance(data, list):
            raise TraceError(f"{where}: expected a list, got {_json_type(data)}")
        try:
            item_hints = _item_hints(hint, data)
        except TraceError as err:
            raise TraceError(f"{where}: {err}") from None
        return tuple(decode(item, h, f"{where}[{i}]") for i, (item, h) in enumerate(zip(data, item_hints)))
    raise TraceError(f"{where}: no JSON form for annotation {hint!r}")


def _decode_record(data: Any, allowed: dict[str, type], where: str) -> Any:
    if not isinstance(data, dict):
        raise TraceError(f"{where}: expected an object with a \"kind\", got {_json_type(data)}")
    noun = _noun(allowed.values())
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise TraceError(f"{where}: missing \"kind\" (a string naming the {noun})")
    cls = allowed.get(kind)
    if cls is None:
        known = ", ".join(allowed) if len(allowed) <= 6 else f"the {noun}s in model/actions.py"
        raise TraceError(f"{where}: unknown {noun} kind {kind!r} (known: {known})")
    names = [name for name, _ in _FIELDS[cls]]
    unknown = sorted(set(data) - {"kind", *names})
    if unknown:
        raise TraceError(f"{where}: {kind} has no field {unknown[0]!r} (fields: {', '.join(names) or 'none'})")
    # Fields added later with a default (a message's ``kraft`` flag) may be absent from older files.
    optional = {f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
    missing = [name for name in names if name not in data and name not in optional]
    if missing:
        raise TraceError(f"{where}: {kind} is missing field {missing[0]!r}")
    return cls(**{name: decode(data[name], h, f"{where}.{name}") for name, h in _FIELDS[cls] if name in data})


def _noun(classes: Iterable[type]) -> str:
    classes = set(classes)
    if classes <= set(ACTION_TYPES):
        return "action"
    if classes <= set(MESSAGE_TYPES):
        return "message"
    return "record"


def _json_type(data: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(data), "a number"
    )


# ---- whole traces ----------------------------------------------------------------------------


def trace_to_json(trace: Trace | DifferentialTrace) -> dict[str, Any]:
    """The trace as the JSON object a file holds (TraceError if it names unknown things)."""
    if isinstance(trace, DifferentialTrace):
        return _differential_to_json(trace)
    _check_header(trace.scope, [b.value for b in trace.bugs], trace.violation, trace.seed)
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "scope": trace.scope,
        "profile": trace.profile.value,
        "bugs": sorted(b.value for b in trace.bugs),
        "violation": trace.violation,
        "seed": trace.seed,
        "actions": [encode(a, Action, f"actions[{i}]") for i, a in enumerate(trace.actions)],
    }


def trace_from_json(data: Any) -> Trace | DifferentialTrace:
    """The trace a parsed JSON document holds; TraceError (one line, no file name) if malformed."""
    if not isinstance(data, dict):
        raise TraceError(f"expected a JSON object at the top, got {_json_type(data)}")
    if data.get("schema") != SCHEMA:
        raise TraceError(f"schema is {json.dumps(data.get('schema'))}, expected \"{SCHEMA}\"")
    version = data.get("version")
    if version not in (VERSION, DIFFERENTIAL_VERSION) or isinstance(version, bool):
        raise TraceError(f"version is {json.dumps(version)}, this kraftcheck reads {_VERSIONS_READ}")
    keys = _TOP_LEVEL_KEYS
    if version == DIFFERENTIAL_VERSION:
        if "kind" not in data:
            raise TraceError(f"version is 2, this kraftcheck reads {_VERSIONS_READ}: missing key 'kind'")
        if data["kind"] not in KINDS:
            raise TraceError(f"kind: expected \"model\" or \"differential\", got {json.dumps(data['kind'])}")
        if data["kind"] == "differential":
            return _differential_from_json(data)
        keys = (*_TOP_LEVEL_KEYS[:2], "kind", *_TOP_LEVEL_KEYS[2:])
    _check_keys(data, keys, _REQUIRED_KEYS, f"a version {version} model trace")
    bugs = data["bugs"]
    if not isinstance(bugs, list) or not all(isinstance(b, str) for b in bugs):
        raise TraceError(f"bugs: expected a list of seeded-bug names, got {json.dumps(bugs)}")
    _check_header(data["scope"], bugs, data["violation"], data.get("seed"))
    actions = data["actions"]
    if not isinstance(actions, list):
        raise TraceError(f"actions: expected a list, got {_json_type(actions)}")
    profile = data.get("profile", Profile.KIP.value)
    if profile not in {p.value for p in Profile}:
        known = ", ".join(p.value for p in Profile)
        raise TraceError(f"profile: expected one of {known}, got {json.dumps(profile)}")
    decoded = tuple(decode(a, Action, f"actions[{i}]") for i, a in enumerate(actions))
    return Trace(
        scope=data["scope"],
        actions=decoded,
        bugs=frozenset(Bug(b) for b in bugs),
        violation=data["violation"],
        seed=data.get("seed"),
        profile=Profile(profile),
    )


def _check_header(scope: Any, bugs: list[str], violation: Any, seed: Any) -> None:
    if not isinstance(scope, str) or scope not in SCOPES:
        raise TraceError(f"scope: unknown scope {json.dumps(scope)} (known: {', '.join(SCOPES)})")
    _check_bug_names("bugs", bugs, {b.value for b in Bug})
    if violation is not None:
        prop = BY_NAME.get(violation) if isinstance(violation, str) else None
        if prop is None or prop.kind is Kind.SOMETIMES:
            raise TraceError(
                f"violation: {json.dumps(violation)} is not an ALWAYS or TRANSITION property "
                "(see `kraftcheck invariants`)"
            )
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise TraceError(f"seed: expected an integer >= 0 or null, got {json.dumps(seed)}")


def _differential_to_json(trace: DifferentialTrace) -> dict[str, Any]:
    _check_differential_header(trace.scope, [b.value for b in trace.bugs], [b.value for b in trace.impl_bugs],
                               trace.seed, trace.signature, trace.violation)
    return {
        "schema": SCHEMA,
        "version": DIFFERENTIAL_VERSION,
        "kind": "differential",
        "scope": trace.scope,
        "profile": trace.profile.value,
        "bugs": sorted(b.value for b in trace.bugs),
        "impl_bugs": sorted(b.value for b in trace.impl_bugs),
        "seed": trace.seed,
        "faults": trace.faults,
        "runbook": trace.runbook,
        "violation": trace.violation,
        "signature": trace.signature,
        "summary": trace.summary,
        "original_steps": trace.original_steps,
        **({"aims": list(trace.aims)} if trace.aims else {}),  # (written only when there are some: older files
        **({"handover": _encode_handover(trace.handover)} if trace.handover is not None else {}),  # read the same)
        "steps": [_encode_step(s, f"steps[{i}]") for i, s in enumerate(trace.steps)],
    }


def _encode_handover(handover: Handover) -> dict[str, Any]:
    from impl.sim.simulator import PROGRESS

    op = handover.operator
    return {"at": handover.at, "events": handover.events, "held": list(op.held), "rolling_back": op.rolling_back,
            "rolled_back": op.rolled_back, "progress": PROGRESS[op.progress]}


def _decode_handover(data: Any, steps: int) -> Handover:
    from impl.sim.simulator import PROGRESS, Operator
    from properties.progress import Handover

    if not isinstance(data, dict):
        raise TraceError(f"handover: expected an object with {', '.join(_HANDOVER_KEYS)}, got {_json_type(data)}")
    _check_keys(data, _HANDOVER_KEYS, _HANDOVER_KEYS, "a handover")
    for key in ("at", "events"):
        value = data[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise TraceError(f"handover.{key}: expected an integer >= 0, got {json.dumps(value)}")
    if data["at"] > steps:
        raise TraceError(f"handover.at: {data['at']} is past the trace's {steps} steps")
    held = data["held"]
    if not isinstance(held, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in held):
        raise TraceError(f"handover.held: expected a list of node ids, got {json.dumps(held)}")
    for key in ("rolling_back", "rolled_back"):
        if not isinstance(data[key], bool):
            raise TraceError(f"handover.{key}: expected true or false, got {json.dumps(data[key])}")
    if data["progress"] not in PROGRESS:
        raise TraceError(f"handover.progress: expected one of {', '.join(PROGRESS)}, "
                         f"got {json.dumps(data['progress'])}")
    operator = Operator(tuple(sorted(held)), data["rolling_back"], data["rolled_back"],
                        PROGRESS.index(data["progress"]))
    return Handover(data["at"], operator, data["events"])


def _encode_step(sim_step: SimStep, where: str) -> dict[str, Any]:
    if not isinstance(sim_step.now, int) or isinstance(sim_step.now, bool):
        raise TraceError(f"{where}.at: expected an integer, got {sim_step.now!r}")
    cuts = [[encode(a, int, f"{where}.cuts[{i}]"), encode(b, int, f"{where}.cuts[{i}]")]
            for i, (a, b) in enumerate(sim_step.cuts)]
    return {"at": sim_step.now, "cuts": cuts, "action": encode(sim_step.action, Action, f"{where}.action")}


def _check_keys(data: dict[str, Any], allowed, required, what: str) -> None:
    """A one-line TraceError for the first key ``what`` does not have, or the first it lacks."""
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise TraceError(f"unknown key {unknown[0]!r} ({what} has: {', '.join(allowed)})")
    missing = sorted(set(required) - set(data))
    if missing:
        raise TraceError(f"missing key {missing[0]!r}")


def _differential_from_json(data: dict[str, Any]) -> DifferentialTrace:
    _check_keys(data, _DIFFERENTIAL_KEYS, _DIFFERENTIAL_REQUIRED, "a differential trace")
    names: dict[str, list[str]] = {}
    for key in ("bugs", "impl_bugs"):
        value = data[key]
        if not isinstance(value, list) or not all(isinstance(b, str) for b in value):
            raise TraceError(f"{key}: expected a list of seeded-bug names, got {json.dumps(value)}")
        names[key] = value
    seed, signature, violation = data["seed"], data["signature"], data.get("violation")
    _check_differential_header(data["scope"], names["bugs"], names["impl_bugs"], seed, signature, violation)
    profile = data.get("profile", Profile.KIP.value)
    if profile not in {p.value for p in Profile}:
        known = ", ".join(p.value for p in Profile)
        raise TraceError(f"profile: expected one of {known}, got {json.dumps(profile)}")
    for key in ("faults", "runbook", "summary"):
        if not isinstance(data.get(key), str | None):
            raise TraceError(f"{key}: expected a string or null, got {json.dumps(data[key])}")
    aims = data.get("aims", [])
    if not isinstance(aims, list) or not all(isinstance(a, str) for a in aims):
        raise TraceError(f"aims: expected a list of driver-state|fault cells, got {json.dumps(aims)}")
    original = data.get("original_steps")
    if original is not None and (not isinstance(original, int) or isinstance(original, bool) or original < 0):
        raise TraceError(f"original_steps: expected an integer >= 0 or null, got {json.dumps(original)}")
    steps = data["steps"]
    if not isinstance(steps, list):
        raise TraceError(f"steps: expected a list, got {_json_type(steps)}")
    decoded: list[SimStep] = []
    for i, item in enumerate(steps):
        decoded.append(_decode_step(item, f"steps[{i}]", decoded[-1].now if decoded else 0))
    handover = None if data.get("handover") is None else _decode_handover(data["handover"], len(decoded))
    if handover is not None and data.get("runbook") is None:
        raise TraceError("runbook: a trace with a handover needs its runbook (its quiet continuation follows it)")
    return DifferentialTrace(
        scope=data["scope"],
        steps=tuple(decoded),
        seed=seed,
        signature=signature,
        impl_bugs=frozenset(ImplBug(b) for b in names["impl_bugs"]),
        bugs=frozenset(Bug(b) for b in names["bugs"]),
        profile=Profile(profile),
        violation=violation,
        summary=data.get("summary"),
        faults=data.get("faults"),
        runbook=data.get("runbook"),
        original_steps=original,
        handover=handover,
        aims=tuple(aims),
    )


def _decode_step(data: Any, where: str, earlier: int) -> SimStep:
    from impl.sim.simulator import SimStep

    if not isinstance(data, dict):
        raise TraceError(f"{where}: expected an object with \"at\", \"cuts\" and \"action\", got {_json_type(data)}")
    unknown = sorted(set(data) - set(_STEP_KEYS))
    if unknown:
        raise TraceError(f"{where}: a step has no key {unknown[0]!r} (keys: {', '.join(_STEP_KEYS)})")
    missing = [k for k in _STEP_KEYS if k not in data]
    if missing:
        raise TraceError(f"{where}: missing key {missing[0]!r}")
    at = decode(data["at"], int, f"{where}.at")
    if at < earlier:  # the simulated clock never goes back
        raise TraceError(f"{where}.at: {at} is earlier than the step before ({earlier})")
    cuts = data["cuts"]
    if not isinstance(cuts, list):
        raise TraceError(f"{where}.cuts: expected a list of node pairs, got {_json_type(cuts)}")
    pairs = []
    for i, pair in enumerate(cuts):
        if not isinstance(pair, list) or len(pair) != 2:
            raise TraceError(f"{where}.cuts[{i}]: expected a pair of node ids [a, b], got {json.dumps(pair)}")
        a, b = (decode(node, int, f"{where}.cuts[{i}]") for node in pair)
        pairs.append((min(a, b), max(a, b)))  # as the simulator records a cut: lower id first
    return SimStep(at, tuple(sorted(pairs)), decode(data["action"], Action, f"{where}.action"))


def _check_differential_header(scope: Any, bugs: list[str], impl_bugs: list[str], seed: Any, signature: Any,
                               violation: Any) -> None:
    from impl.sim.scenarios import scenario

    try:
        scenario(scope if isinstance(scope, str) else json.dumps(scope))
    except ValueError as err:
        raise TraceError(f"scope: {err}") from None
    _check_bug_names("bugs", bugs, {b.value for b in Bug})
    _check_bug_names("impl_bugs", impl_bugs, {b.value for b in ImplBug})
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise TraceError(f"seed: expected an integer >= 0 (the cluster's seed), got {json.dumps(seed)}")
    if not isinstance(signature, str) or not signature:
        raise TraceError(f"signature: expected a non-empty string, got {json.dumps(signature)}")
    if violation is not None and violation != "Disagreement":
        prop = BY_NAME.get(violation) if isinstance(violation, str) else None
        if prop is None or prop.kind is Kind.SOMETIMES:
            raise TraceError(f"violation: {json.dumps(violation)} is neither \"Disagreement\" nor an ALWAYS, "
                             "TRANSITION or EVENTUALLY property (see `kraftcheck invariants`)")


def check_fits(scope, actions: Sequence[Action], where: str, steps: Sequence[SimStep] = ()) -> None:
    """TraceError for the first action (``where.format(index)``) that names a broker, a KRaft
    controller or a partition ``scope`` does not have, or the first of a differential trace's
    ``steps`` whose network cuts name such a node. A ``BrokerId`` may name a KRaft controller
    (one sends control requests to ZooKeeper brokers during the migration)."""
    from model.kraft import FIRST_CONTROLLER_ID, ControllerId
    from model.types import BrokerId, PartitionId

    controllers = range(FIRST_CONTROLLER_ID, FIRST_CONTROLLER_ID + len(scope.controllers))
    valid = {ControllerId: ("KRaft controller", set(controllers)),
             BrokerId: ("broker or KRaft controller" if scope.controllers else "broker",
                        set(range(scope.brokers)) | set(controllers)),
             PartitionId: ("partition", set(range(len(scope.partitions))))}
    def span(ids: range) -> str:
        return "none" if not ids else str(ids.start) if len(ids) == 1 else f"{ids.start}..{ids.stop - 1}"

    have = (f"brokers {span(range(scope.brokers))}, KRaft controllers {span(controllers)}, "
            f"partitions {span(range(len(scope.partitions)))}")

    def check(record, at: str) -> None:
        for name, hint in _FIELDS[type(record)]:
            value = getattr(record, name)
            if hint in valid and value not in valid[hint][1] and not (name == "leader" and value < 0):
                raise TraceError(f"{at}.{name}: {valid[hint][0]} {value} is not in scope {scope.name}, "
                                 f"which has {have}")
            if type(value) in _FIELDS:  # a message inside Deliver, Drop or Redeliver
                check(value, f"{at}.{name}")

    for i, action in enumerate(actions):
        check(action, where.format(i))
    for i, sim_step in enumerate(steps):
        for j, pair in enumerate(sim_step.cuts):
            outside = [n for n in pair if n not in valid[BrokerId][1]]
            if outside:
                raise TraceError(f"steps[{i}].cuts[{j}]: node {outside[0]} is not in scope {scope.name}, "
                                 f"which has {have}")


def _check_bug_names(key: str, bugs: list[str], known: set[str]) -> None:
    seen: set[str] = set()
    for b in bugs:
        if b not in known:
            raise TraceError(f"{key}: unknown seeded bug {json.dumps(b)} (see `kraftcheck mutants --list`)")
        if b in seen:
            raise TraceError(f"{key}: {json.dumps(b)} is listed twice")
        seen.add(b)


def dumps(trace: Trace | DifferentialTrace) -> str:
    """The file text: the header one key a line, then one action a line (readable, diffable)."""
    data = trace_to_json(trace)
    if isinstance(trace, DifferentialTrace):
        header = [f"  {json.dumps(k)}: {json.dumps(data[k])}," for k in _DIFFERENTIAL_KEYS
                  if k != "steps" and k in data]
        steps = ",\n".join(f"    {json.dumps(s, separators=(', ', ': '))}" for s in data["steps"])
        body = f"[\n{steps}\n  ]" if steps else "[]"
        return "{\n" + "\n".join(header) + f'\n  "steps": {body}\n}}\n'
    header = [f"  {json.dumps(k)}: {json.dumps(data[k])}," for k in _TOP_LEVEL_KEYS if k != "actions"]
    actions = ",\n".join(f"    {json.dumps(a, separators=(', ', ': '))}" for a in data["actions"])
    body = f"[\n{actions}\n  ]" if actions else "[]"
    return "{\n" + "\n".join(header) + f'\n  "actions": {body}\n}}\n'


def loads(text: str) -> Trace | DifferentialTrace:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise TraceError(f"not JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    return trace_from_json(data)


def load_trace(path: str | os.PathLike) -> Trace | DifferentialTrace:
    """Read and validate a trace file; every problem is a one-line TraceError naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise TraceError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise TraceError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        return loads(text)
    except TraceError as err:
        raise TraceError(f"{path}: {err}") from None
    except RecursionError:
        raise TraceError(f"{path}: nested too deeply to be a trace") from None


def save_trace(path: str | os.PathLike, trace: Trace | DifferentialTrace) -> Path:
    """Write ``trace`` to ``path`` atomically (temporary file in the same directory, then rename).

    The trace is encoded in full before anything touches the disk, so a trace that cannot be
    encoded raises TraceError and leaves no file, new or temporary, behind.
    """
    path = Path(path)
    text = dumps(trace)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes it private; a trace is meant to be shared
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


# ---- replay ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplayedStep:
    number: int  # 1-based: step n takes actions[n - 1]
    action: Action
    enabled: bool
    violations: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReplayResult:
    """What replaying a trace did: the steps taken, and where (if anywhere) it stopped."""

    trace: Trace
    steps: tuple[ReplayedStep, ...]
    violation_step: int | None  # the step number that broke something (0: the initial state)
    violations: tuple[str, ...]  # what that step broke
    not_enabled_index: int | None  # index in trace.actions of the first action step refused

    @property
    def reproduced(self) -> bool:
        """The trace's recorded violation happened again."""
        return self.trace.violation is not None and self.trace.violation in self.violations

    def summary(self) -> str:
        t = self.trace
        head = f"scope {t.scope}" + (f", bugs {', '.join(sorted(b.value for b in t.bugs))}" if t.bugs else "")
        if self.not_enabled_index is not None:
            i = self.not_enabled_index
            return f"{head}: actions[{i}] (step {i + 1}) is not enabled: {describe(t.actions[i])}"
        if self.violation_step is not None:
            verdict = "reproduced" if self.reproduced else (
                f"not the recorded {t.violation}" if t.violation else "the trace recorded no violation"
            )
            return f"{head}: step {self.violation_step} breaks {', '.join(self.violations)} ({verdict})"
        expected = f"; expected {t.violation}, which did not happen" if t.violation else ""
        return f"{head}: {len(self.steps)} steps, no violation{expected}"


def replay(trace: Trace) -> ReplayResult:
    """Run the trace's actions from its scope's initial state, checking every step."""
    variant = trace.variant
    state = initial_state(SCOPES[trace.scope])
    broken = violations(None, None, state)
    if broken:
        return ReplayResult(trace, (), 0, tuple(broken), None)
    steps: list[ReplayedStep] = []
    for index, action in enumerate(trace.actions):
        after = step(state, action, variant)
        if after is None:
            steps.append(ReplayedStep(index + 1, action, enabled=False))
            return ReplayResult(trace, tuple(steps), None, (), index)
        broken = violations(state, action, after)
        steps.append(ReplayedStep(index + 1, action, enabled=True, violations=tuple(broken)))
        if broken:
            return ReplayResult(trace, tuple(steps), index + 1, tuple(broken), None)
        state = after
    return ReplayResult(trace, tuple(steps), None, (), None)


# ---- reading a trace -------------------------------------------------------------------------


# Fields left out of ``describe`` while empty (or 0): the driver's queue, empty in every scope but event-queue, its
# handed image, 0 in every scope but dual-write-failure, and the replicas a LeaderAndIsr carries and a broker keeps,
# empty but for a partition created or reassigned on KRaft, and whether an UpdateMetadata is incremental (only
# kafka-3.9's dual writes send such), so that states read (and scenario files' expected outputs stay) as before they
# existed.
QUIET_WHEN_EMPTY = frozenset({("Driver", "queue"), ("Driver", "handed_offset"), ("LeaderAndIsr", "replicas"),
                              ("LocalReplica", "replicas"), ("LocalReplica", "no_fetcher"),
                              ("UpdateMetadata", "incremental")})


def describe(value: Any) -> str:
    """A record as ``Kind(field=value, ...)``, enums as ``Ibp.IBP_2_7_IV0``: like repr, but readable."""
    if is_dataclass(value) and not isinstance(value, type):
        kind = type(value).__name__
        quiet = PARTITION_QUIET if isinstance(value, (PartitionRecord, PartitionChangeRecord, PartitionImage)) \
            else frozenset()
        inner = ", ".join(f"{f.name}={describe(getattr(value, f.name))}" for f in fields(value)
                          if (f.name not in quiet and (kind, f.name) not in QUIET_WHEN_EMPTY) or getattr(value, f.name))
        return f"{kind}({inner})"
    if isinstance(value, Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, tuple):
        items = ", ".join(describe(v) for v in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    return repr(value)


def format_table(rows: Iterable[tuple[int, Action, str]]) -> str:
    """Rows of (step number, action, what it broke) as an aligned text table."""
    rows = [(str(n), describe(a), broke or "-") for n, a, broke in rows]
    header = ("step", "action", "violations")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(2)]
    lines = [f"{header[0]:>{widths[0]}}  {header[1]:<{widths[1]}}  {header[2]}"]
    lines += [f"{n:>{widths[0]}}  {a:<{widths[1]}}  {v}" for n, a, v in rows]
    return "\n".join(line.rstrip() for line in lines)


def render(result: ReplayResult) -> str:
    """The replayed trace as a table, with a heading and a one-line verdict."""
    rows = []
    for s in result.steps:
        broke = ", ".join(s.violations) if s.enabled else "NOT ENABLED"
        rows.append((s.number, s.action, broke))
    return f"{format_table(rows)}\n{result.summary()}"
