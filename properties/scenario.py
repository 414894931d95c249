"""Scenario files: a situation written as commands and the output each must give, run against the model.

In the manner of etcd's ``testdata/*.txt`` (the datadriven format): a file is a sequence of
blocks, each a command, a ``----`` line and the expected output, ending at a blank line::

    # the old controller's write, fenced by the new one's epoch (KIP-380)
    init scope=bounce profile=kafka-3.9
    ----
    scope bounce (warm), profile kafka-3.9, 3 brokers, 0 controllers

    step ElectController broker=1
    ----
    refused: /controller exists

Commands (a comment before a command stays with it through ``--rewrite``):
- ``init scope=NAME [profile=kip|kafka-3.9] [cold=true] [stage=none|STAGE] [metadata_version=IBP_X]
  [warm=profile|kip] [bugs=NAME,...] [impl_bugs=NAME,...]``: the scope's start state (its warm start
  under the profile's rules, on the scope as the profile's Kafka runs it, unless ``warm=kip`` asks for
  the checks' start or ``cold=true`` for the cold one; ``stage`` and ``metadata_version`` change the
  scope), under the model with those seeded bugs switched on (and, with ``--impl``, the
  implementation with its own). ``properties.script.Script`` is the session: budgets are lifted,
  the script chooses the faults. A file may ``init`` again.
- ``step KIND field=value ...``: one model action (the names of ``model.actions``; values are
  JSON: numbers, ``true``, strings, objects such as a message ``{"kind": "UpdateMetadata", ...}``,
  enums by their member's name, ``IBP_3_6_IV1``). The output is the step's outcome
  (``model.outcome``): ``accepted``, ``accepted, unchanged``, ``refused: WHY`` or ``refused: CODE (WHY)``
  with Kafka's error code, or ``delivered, refused: CODE (WHY)`` for a request delivered and
  answered with an error; then every field the step changed, ``path: old -> new``. Every
  invariant is checked on every step: a broken one adds ``VIOLATED: Name``.
- ``inject KIND field=value ... [deliver=false]``: a request the test harness sends, with any
  epochs (``model.harness``): a message (``LeaderAndIsr``, ``UpdateMetadata``, ``StopReplica``,
  ``ControlledShutdown``, every field given), delivered at once as ``Deliver`` delivers it or, with
  ``deliver=false``, put in flight; or a request to a KRaft controller (``BrokerRegistrationRequest``,
  ``BrokerHeartbeatRequest``), ``broker`` and ``controller`` given and each other field, when
  omitted, what the broker's process would send; a ``ControllerRegistrationRequest`` with every
  field given. Its output is a step's.
- ``show PATH``: a part of the state (``controllers[0].driver.state``, ``zk``, ``brokers[1].epoch``).
- ``enabled``: every action the model would take now, in its fixed order.

``kraftcheck scenario FILE...`` runs files and prints a diff for each block whose output differs;
``--rewrite`` writes the outputs the model gives into the files instead. With ``--impl`` each step
is also performed by the implementation (``impl/``), checked against the model after every step
as the simulator's runs are (``properties.differential``): a disagreement fails the block. pytest
runs every file in ``tests/scenarios`` both ways. A malformed file is one line naming the file,
the line and what is wrong.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from impl.bugs import ImplBug
from model.harness import HARNESS_ACTION_TYPES, Inject
from model.kraft import ControllerId
from model.kraft_quorum import heartbeat_request, registration_request
from model.migration import Profile
from model.state import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ControllerRegistrationRequest,
    KRaftRequest,
    Message,
)
from model.zookeeper import ZkState
from properties.differential import Differential, Disagreement
from properties.files import write_text
from properties.script import Script, ScriptError, Taken
from properties.traces import TraceError, decode, describe, encode

SEPARATOR = "----"
IMPL_BUG_NAMES = {b.value: b for b in ImplBug}
KRAFT_REQUEST_TYPES = (BrokerRegistrationRequest, BrokerHeartbeatRequest, ControllerRegistrationRequest)
KRAFT_REQUESTS = {cls.__name__: cls for cls in KRAFT_REQUEST_TYPES}
# What a step's output leaves out: scratch of the checks (ghost), what was spent (budget), and the
# history the invariants keep (their own bookkeeping, not the cluster's).
UNSHOWN = frozenset({"ghost", "budget", "history"})


class ScenarioError(ValueError):
    """A malformed scenario file: one line, naming the file, the line and what is wrong."""


@dataclass(frozen=True)
class Block:
    line: int  # where its command starts, 1-based
    command: str
    expected: str
    preamble: str = ""  # the comment (and blank) lines just before the command, kept by --rewrite


def parse(text: str, where: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    preamble: list[str] = []
    while i < len(lines):
        if not lines[i].strip() or lines[i].startswith("#"):
            if preamble or lines[i].strip():  # blank lines before a comment are the blocks' separator
                preamble.append(lines[i])
            i += 1
            continue
        start, command = i + 1, lines[i].strip()
        i += 1
        if i >= len(lines) or lines[i].strip() != SEPARATOR:
            raise ScenarioError(f"{where}:{start}: '{command}' is not followed by a '{SEPARATOR}' line")
        i += 1
        output = []
        while i < len(lines) and lines[i].strip():
            output.append(lines[i])
            i += 1
        blocks.append(Block(start, command, "\n".join(output), "".join(f"{line}\n" for line in preamble)))
        preamble = []
    if any(line.strip() for line in preamble) and blocks:
        # --rewrite keeps a comment with the command after it; one with no command after it would be lost.
        raise ScenarioError(f"{where}:{len(lines)}: a comment after the last command (put it before a command)")
    return blocks


def render(blocks: list[Block], outputs: list[str]) -> str:
    """The file with ``outputs`` as each block's expected output, each block's comments kept before it."""
    return "\n".join(
        f"{block.preamble}{block.command}\n{SEPARATOR}\n{output}".rstrip() + "\n"
        for block, output in zip(blocks, outputs)
    )


# ---- running ----------------------------------------------------------------------------------


INIT_OPTIONS = ("scope", "profile", "cold", "bugs", "impl_bugs", "stage", "metadata_version", "warm")


class Session:
    """One file's model: a ``Script`` (``properties.script``) the commands so far stepped."""

    def __init__(self, where: str, against_impl: bool = False) -> None:
        self.where = where
        self.script: Script | None = None
        self.against_impl = against_impl
        self.impl: Differential | None = None  # the implementation, checked against the model
        self.impl_skips: list[str] = []  # where and why the implementation stopped running this file
        self.impl_ran = False  # some block was run by the implementation too

    def run(self, block: Block) -> str:
        name, _, rest = block.command.partition(" ")
        here = f"{self.where}:{block.line}"
        if name == "init":
            return self._init(rest, here)
        if self.script is None:
            raise ScenarioError(f"{here}: '{name}' before 'init'")
        if name == "step":
            return self._step(rest, here)
        if name == "inject":
            return self._inject(rest, here)
        if name == "show":
            return self._show(rest.strip(), here)
        if name == "enabled":
            return "\n".join(describe(a) for a in self.script.enabled()) or "none"
        raise ScenarioError(f"{here}: unknown command '{name}' (init, step, inject, show, enabled)")

    def _init(self, rest: str, here: str) -> str:
        options = _options(rest, here)
        unknown = set(options) - set(INIT_OPTIONS)
        if unknown:
            raise ScenarioError(f"{here}: unknown init option {sorted(unknown)[0]} ({', '.join(INIT_OPTIONS)})")
        name = options.get("scope")
        cold = options.get("cold", False) is True
        bugs = [b for b in str(options.get("bugs", "")).split(",") if b]
        impl_bugs = frozenset()
        for bug in filter(None, str(options.get("impl_bugs", "")).split(",")):
            if bug not in IMPL_BUG_NAMES:
                raise ScenarioError(f"{here}: unknown seeded bug of the implementation {bug!r}; `kraftcheck mutants`")
            impl_bugs |= {IMPL_BUG_NAMES[bug]}
        stage = options.get("stage")
        try:
            script = Script(
                name if isinstance(name, str) else repr(name), str(options.get("profile", Profile.KIP.value)),
                bugs=bugs, cold=cold, stage=None if stage is None else str(stage),
                metadata_version=options.get("metadata_version"), warm=str(options.get("warm", "profile")),
            )
        except ScriptError as err:
            raise ScenarioError(f"{here}: {err}") from None
        self.script = script
        self.impl = None  # a file may start again: each init its own implementation
        if self.against_impl:
            why = _impl_skips(script, cold)
            if why:
                self.impl_skips.append(f"from line {_line(here)}: {why}")
            else:
                self.impl = Differential(script.scope, bugs=impl_bugs, variant=script.variant, bounded=False,
                                         warm_profile=script.warm_profile)
        warmth = "cold" if script.cold else "warm"
        said = [f"stage {stage}"] if stage is not None else []
        if "metadata_version" in options:
            said.append(f"metadata.version {options['metadata_version']}")
        if script.warm_profile is not script.profile:
            said.append(f"warm start under {script.warm_profile.value}")
        elif script.raised is not None and "metadata_version" not in options:
            said.append(f"metadata.version {script.raised.name} ({script.profile.value}'s)")
        shaped = "".join(f", {s}" for s in said)
        seeded = f", bugs {','.join(sorted(b.value for b in script.variant.bugs))}" if script.variant.bugs else ""
        seeded += f", implementation bugs {','.join(sorted(b.value for b in impl_bugs))}" if impl_bugs else ""
        return (f"scope {name} ({warmth}{shaped}), profile {script.profile.value}{seeded}, "
                f"{len(script.state.brokers)} brokers, {len(script.state.controllers)} controllers")

    def _step(self, rest: str, here: str) -> str:
        kind, _, args = rest.strip().partition(" ")
        data: dict[str, Any] = {"kind": kind, **_options(args, here)}
        if kind in {cls.__name__ for cls in HARNESS_ACTION_TYPES}:
            raise ScenarioError(f"{here}: {kind} is the test harness's: write 'inject KIND field=value ...'")
        try:
            action = decode(data)
        except TraceError as err:
            raise ScenarioError(f"{here}: {err}") from None
        return self._take(action, here)

    def _inject(self, rest: str, here: str) -> str:
        kind, _, args = rest.strip().partition(" ")
        options = _options(args, here)
        deliver = options.pop("deliver", True)
        if not isinstance(deliver, bool):
            raise ScenarioError(f"{here}: deliver= takes true or false")
        assert self.script is not None
        if kind in KRAFT_REQUESTS and kind != ControllerRegistrationRequest.__name__:  # a script gives all its fields
            options = self._as_sent(kind, options, here)
        try:
            request = decode({"kind": kind, **options}, Message | KRaftRequest, "inject")
        except TraceError as err:
            raise ScenarioError(f"{here}: {err}") from None
        return self._take(Inject(request, deliver), here)

    def _as_sent(self, kind: str, options: dict[str, Any], here: str) -> dict[str, Any]:
        """A KRaft request's omitted fields: what the broker's process would send the controller."""
        assert self.script is not None
        broker, controller = options.get("broker"), options.get("controller")
        state = self.script.state
        if not isinstance(broker, int) or not 0 <= broker < len(state.brokers) or not isinstance(controller, int):
            raise ScenarioError(f"{here}: {kind} needs broker= (one of the scope's) and controller=")
        b = state.brokers[broker]
        sent: KRaftRequest = (registration_request(b, ControllerId(controller)) if kind == "BrokerRegistrationRequest"
                              else heartbeat_request(b, ControllerId(controller)))
        fields = encode(sent, KRAFT_REQUESTS[kind], "inject")
        return {**{k: v for k, v in fields.items() if k != "kind"}, **options}

    def _take(self, action: Any, here: str) -> str:
        assert self.script is not None
        if self.impl is not None and isinstance(action, Inject) and isinstance(action.request, KRAFT_REQUEST_TYPES):
            self.impl_skips.append(f"from line {_line(here)}: a request to a KRaft controller injected by the test "
                                   "harness (the implementation takes injected messages only)")
            self.impl = None
        taken = self.script.step(action)
        if self.impl is not None:
            self.impl.apply(action)  # raises Disagreement when the implementation does otherwise
            self.impl_ran = True
        return render_step(taken)

    def _show(self, path: str, here: str) -> str:
        assert self.script is not None
        value: Any = self.script.state
        for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
            try:
                value = value[int(part[1:-1])] if part.startswith("[") else getattr(value, part)
            except (AttributeError, IndexError, TypeError):
                raise ScenarioError(f"{here}: the state has no {path!r} (at {part!r})") from None
        if isinstance(value, frozenset):  # one item a line, sorted: a set's own order is the hash's
            return "\n".join(sorted(describe(item) for item in value)) or "(empty)"
        return describe(value)


def _line(here: str) -> str:
    return here.rsplit(":", 1)[-1]


def render_step(taken: Taken) -> str:
    """A step's output: its outcome, every field it changed, and the invariants it broke."""
    lines = [str(taken.outcome)]
    lines += [f"  {change}" for change in changes(taken.before, taken.after)]
    if taken.violations:
        lines.append("VIOLATED: " + ", ".join(taken.violations))
    return "\n".join(lines)


def _impl_skips(script: Script, cold: bool) -> str:
    """Why the implementation cannot run a file from this start, or ''."""
    if script.variant.bugs:
        return "seeded model bugs: the implementation has its own (impl/bugs.py)"
    if cold and script.scope.warm:
        return "a cold start of a warm scope: the implementation starts at the scope's start"
    if script.profile is not Profile.KIP and script.scope.controllers:
        return "the implementation's KRaft side follows the kip profile only (impl/kraft_controller.py)"
    return ""


def _options(text: str, here: str) -> dict[str, Any]:
    """``key=value ...``, each value JSON (a bare word is a string); a JSON value may hold spaces."""
    out: dict[str, Any] = {}
    decoder = json.JSONDecoder()
    i, text = 0, text.strip()
    while i < len(text):
        match = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)=").match(text, i)
        if match is None:
            raise ScenarioError(f"{here}: expected key=value at {text[i:]!r}")
        key, i = match.group(1), match.end()
        try:
            value, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            word = re.compile(r"[^\s]+").match(text, i)
            if word is None:
                raise ScenarioError(f"{here}: {key}= has no value") from None
            value, i = word.group(0), word.end()
        out[key] = value
        while i < len(text) and text[i].isspace():
            i += 1
    return out


def changes(before: Any, after: Any, path: str = "") -> list[str]:
    """Every field that differs, as ``path: old -> new`` (appended entries as ``path: + item``)."""
    if before == after:
        return []
    if isinstance(before, ZkState) and isinstance(after, ZkState):
        return _zk_changes(before, after, path)
    if is_dataclass(before) and type(before) is type(after):
        out = []
        for f in fields(before):
            if f.name in UNSHOWN:
                continue
            out += changes(getattr(before, f.name), getattr(after, f.name), f"{path}.{f.name}" if path else f.name)
        return out
    if isinstance(before, tuple) and isinstance(after, tuple):
        if len(before) == len(after):
            return [c for i, (b, a) in enumerate(zip(before, after)) for c in changes(b, a, f"{path}[{i}]")]
        if after[: len(before)] == before:
            return [f"{path}: + {describe(item)}" for item in after[len(before):]]
    if isinstance(before, frozenset) and isinstance(after, frozenset):
        added = sorted(describe(x) for x in after - before)
        removed = sorted(describe(x) for x in before - after)
        return [f"{path}: + {x}" for x in added] + [f"{path}: - {x}" for x in removed]
    return [f"{path}: {_short(before)} -> {_short(after)}"]


def _zk_changes(before: ZkState, after: ZkState, path: str) -> list[str]:
    """ZooKeeper's tree as znodes by path (created, deleted, changed), then its other fields."""
    old, new = dict(zip(before.paths, before.nodes)), dict(zip(after.paths, after.nodes))
    out = [f"{path}[{p}]: created {describe(new[p])}" for p in sorted(new.keys() - old.keys())]
    out += [f"{path}[{p}]: deleted" for p in sorted(old.keys() - new.keys())]
    for p in sorted(old.keys() & new.keys()):
        out += changes(old[p], new[p], f"{path}[{p}]")
    for f in fields(before):
        if f.name not in ("paths", "nodes", "zxid"):  # the zxid shows on each znode it stamps
            out += changes(getattr(before, f.name), getattr(after, f.name), f"{path}.{f.name}")
    return out


def _short(value: Any) -> str:
    text = value.name if isinstance(value, Enum) else describe(value)
    return text if len(text) <= 200 else text[:197] + "..."


@dataclass
class FileResult:
    path: Path
    diffs: list[str]  # one per block whose output differs, or where the implementation disagreed
    outputs: list[str]
    blocks: list[Block]
    impl_skipped: str = ""  # with ``against_impl``: where and why the implementation stopped running the file
    impl_ran: bool = False  # with ``against_impl``: it ran some of the file's steps

    @property
    def passed(self) -> bool:
        return not self.diffs


def run_file(path: Path, against_impl: bool = False) -> FileResult:
    text = Path(path).read_text(encoding="utf-8")
    where = str(path)
    blocks = parse(text, where)
    if not blocks:
        raise ScenarioError(f"{where}: no command: a scenario needs at least an 'init'")
    session = Session(where, against_impl)
    outputs, diffs = [], []
    for block in blocks:
        try:
            output = session.run(block)
        except Disagreement as found:
            first = str(found).splitlines()[0]
            diffs.append(f"{where}:{block.line}: {block.command}\nthe implementation disagrees: {first}")
            outputs.extend(b.expected for b in blocks[len(outputs):])
            break
        outputs.append(output)
        if output != block.expected:
            diff = difflib.unified_diff(block.expected.splitlines(), output.splitlines(), "expected", "model",
                                        lineterm="")
            diffs.append(f"{where}:{block.line}: {block.command}\n" + "\n".join(diff))
    return FileResult(Path(path), diffs, outputs, blocks, "; ".join(session.impl_skips), session.impl_ran)


def rewrite(result: FileResult) -> None:
    """The file with the model's outputs as its expected ones, whole or not at all."""
    write_text(result.path, render(result.blocks, result.outputs))
