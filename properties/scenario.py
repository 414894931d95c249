"""Scenario files: a situation written as commands and the output each must give, run against the model.

In the manner of etcd's ``testdata/*.txt`` (the datadriven format): a file is a sequence of
blocks, each a command, a ``----`` line and the expected output, ending at a blank line::

    # the old controller's write, fenced by the new one's epoch (KIP-380)
    init scope=bounce profile=kafka-3.9
    ----
    scope bounce (warm), profile kafka-3.9, 3 brokers, 0 controllers

    step ElectController broker=1
    ----
    refused

Commands (a comment before a command stays with it through ``--rewrite``):
- ``init scope=NAME [profile=kip|kafka-3.9] [cold=true] [stage=none|STAGE] [metadata_version=IBP_X]
  [bugs=NAME,...] [impl_bugs=NAME,...]``: the scope's start state (its warm start unless
  ``cold=true``; ``stage`` and ``metadata_version`` change the scope, ``_shaped``), under the model
  with those seeded bugs switched on (and, with ``--impl``, the implementation with its own).
  Budgets are lifted: in a scenario the script chooses the faults. A file may ``init`` again.
- ``step KIND field=value ...``: one model action (the names of ``model.actions``; values are
  JSON: numbers, ``true``, strings, objects such as a message ``{"kind": "UpdateMetadata", ...}``,
  enums by their member's name, ``IBP_3_6_IV1``). The output says ``refused`` (not enabled), ``accepted, no
  change``, or ``accepted`` and every field the step changed, ``path: old -> new``. Every
  invariant is checked on every step: a broken one adds ``VIOLATED: Name``.
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
from model.bugs import Bug, Variant
from model.invariants import violations
from model.migration import Profile
from model.scopes import SCOPES, STAGES, Scope, cold_state, initial_state
from model.state import Budget, ClusterState
from model.step import enabled_actions, step
from model.types import Ibp
from model.zookeeper import ZkState
from properties.differential import Differential, Disagreement
from properties.files import write_text
from properties.traces import TraceError, decode, describe

SEPARATOR = "----"
BUG_NAMES = {b.value: b for b in Bug}
IMPL_BUG_NAMES = {b.value: b for b in ImplBug}
# Scripted: the script chooses every fault, so the scope's budgets must never refuse one.
UNBOUNDED = Budget(
    crashes=1 << 20, restarts=1 << 20, expiries=1 << 20, elections=1 << 20, outages=1 << 20, drops=1 << 20,
    duplicates=1 << 20, operator=1 << 20, shutdowns=1 << 20, max_in_flight=1 << 20, kraft_elections=1 << 20,
    controller_crashes=1 << 20, timeouts=1 << 20, migrations=1 << 20, max_lag=1 << 20,
)
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


class Session:
    """One file's model: the state the commands so far left, under a scope and a profile."""

    def __init__(self, where: str, against_impl: bool = False) -> None:
        self.where = where
        self.scope: Scope | None = None
        self.variant = Variant()
        self.state: ClusterState | None = None
        self.against_impl = against_impl
        self.impl: Differential | None = None  # the implementation, checked against the model
        self.impl_skipped = ""  # why the implementation does not run this file

    def run(self, block: Block) -> str:
        name, _, rest = block.command.partition(" ")
        here = f"{self.where}:{block.line}"
        if name == "init":
            return self._init(rest, here)
        if self.state is None or self.scope is None:
            raise ScenarioError(f"{here}: '{name}' before 'init'")
        if name == "step":
            return self._step(rest, here)
        if name == "show":
            return self._show(rest.strip(), here)
        if name == "enabled":
            return "\n".join(describe(a) for a in enabled_actions(self.state, self.scope, self.variant)) or "none"
        raise ScenarioError(f"{here}: unknown command '{name}' (init, step, show, enabled)")

    def _init(self, rest: str, here: str) -> str:
        options = _options(rest, here)
        unknown = set(options) - {"scope", "profile", "cold", "bugs", "impl_bugs", "stage", "metadata_version"}
        if unknown:
            raise ScenarioError(
                f"{here}: unknown init option {sorted(unknown)[0]} "
                "(scope, profile, cold, bugs, impl_bugs, stage, metadata_version)"
            )
        name = options.get("scope")
        if name not in SCOPES:
            raise ScenarioError(f"{here}: unknown scope {name!r}; `kraftcheck scopes` lists them")
        scope, shaped = _shaped(SCOPES[name], options, here)
        try:
            profile = Profile(options.get("profile", Profile.KIP.value))
        except ValueError:
            raise ScenarioError(f"{here}: unknown profile {options['profile']!r} (kip, kafka-3.9)") from None
        cold = options.get("cold", False) is True
        bugs = frozenset()
        for bug in filter(None, str(options.get("bugs", "")).split(",")):
            if bug not in BUG_NAMES:
                raise ScenarioError(f"{here}: unknown seeded bug {bug!r}; `kraftcheck mutants` lists them")
            bugs |= {BUG_NAMES[bug]}
        impl_bugs = frozenset()
        for bug in filter(None, str(options.get("impl_bugs", "")).split(",")):
            if bug not in IMPL_BUG_NAMES:
                raise ScenarioError(f"{here}: unknown seeded bug of the implementation {bug!r}; `kraftcheck mutants`")
            impl_bugs |= {IMPL_BUG_NAMES[bug]}
        self.scope, self.variant = scope, Variant(bugs=bugs, profile=profile)
        start = cold_state(self.scope) if cold else initial_state(self.scope)
        self.state = start.replace(budget=UNBOUNDED)
        self.impl = None  # a file may start again: each init its own implementation
        if self.against_impl:
            if bugs:
                self.impl_skipped = "seeded model bugs: the implementation has its own (impl/bugs.py)"
            elif cold and self.scope.warm:
                self.impl_skipped = "a cold start of a warm scope: the implementation starts at the scope's start"
            else:
                self.impl = Differential(self.scope, bugs=impl_bugs, variant=self.variant, bounded=False)
        warmth = "cold" if cold or not self.scope.warm else "warm"
        seeded = f", bugs {','.join(sorted(b.value for b in bugs))}" if bugs else ""
        seeded += f", implementation bugs {','.join(sorted(b.value for b in impl_bugs))}" if impl_bugs else ""
        return (f"scope {name} ({warmth}{shaped}), profile {profile.value}{seeded}, {len(self.state.brokers)} brokers, "
                f"{len(self.state.controllers)} controllers")

    def _step(self, rest: str, here: str) -> str:
        kind, _, args = rest.strip().partition(" ")
        data: dict[str, Any] = {"kind": kind, **_options(args, here)}
        try:
            action = decode(data)
        except TraceError as err:
            raise ScenarioError(f"{here}: {err}") from None
        before = self.state
        assert before is not None
        after = step(before, action, self.variant)
        if self.impl is not None:
            self.impl.apply(action)  # raises Disagreement when the implementation does otherwise
        if after is None:
            return "refused"
        lines = ["accepted" if after != before else "accepted, no change"]
        lines += [f"  {change}" for change in changes(before, after)]
        broken = violations(before, action, after)
        if broken:
            lines.append("VIOLATED: " + ", ".join(broken))
        self.state = after
        return "\n".join(lines)

    def _show(self, path: str, here: str) -> str:
        value: Any = self.state
        for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
            try:
                value = value[int(part[1:-1])] if part.startswith("[") else getattr(value, part)
            except (AttributeError, IndexError, TypeError):
                raise ScenarioError(f"{here}: the state has no {path!r} (at {part!r})") from None
        if isinstance(value, frozenset):  # one item a line, sorted: a set's own order is the hash's
            return "\n".join(sorted(describe(item) for item in value)) or "(empty)"
        return describe(value)


def _shaped(scope: Scope, options: dict[str, Any], here: str) -> tuple[Scope, str]:
    """The scope with ``init``'s ``stage`` and ``metadata_version``, and how the output names them.

    ``stage=none`` starts the KRaft side cold (the ZooKeeper side warm); another stage takes the warm
    start that far. ``metadata_version=IBP_X`` is the cluster's level: every broker's IBP and the
    quorum's bootstrap metadata.version (a ZK broker registers only at the finalized level, reference §3.1).
    """
    said = []
    if "stage" in options:
        stage = str(options["stage"])
        if stage != "none" and stage not in STAGES:
            raise ScenarioError(f"{here}: unknown stage {stage!r} (none, {', '.join(STAGES)})")
        if not scope.controllers:
            raise ScenarioError(f"{here}: scope {scope.name} has no KRaft side to stage")
        scope = scope.replace(stage=None if stage == "none" else stage)
        said.append(f"stage {stage}")
    if "metadata_version" in options:
        level = Ibp.__members__.get(str(options["metadata_version"]))
        if level is None:
            raise ScenarioError(f"{here}: unknown metadata_version {options['metadata_version']!r} "
                                f"({', '.join(Ibp.__members__)})")
        scope = scope.replace(ibps=(level,) * scope.brokers,
                              controllers=tuple(c.replace(metadata_version=level) for c in scope.controllers))
        said.append(f"metadata.version {level.name}")
    return scope, "".join(f", {s}" for s in said)


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
    impl_skipped: str = ""  # with ``against_impl``: why the implementation did not run the file

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
    return FileResult(Path(path), diffs, outputs, blocks, session.impl_skipped)


def rewrite(result: FileResult) -> None:
    """The file with the model's outputs as its expected ones, whole or not at all."""
    write_text(result.path, render(result.blocks, result.outputs))
