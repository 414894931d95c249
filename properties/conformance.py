"""Kafka's own tests as kraftcheck's conformance suite (issue 18 §3): the inventory, its scenarios, the page.

Rules:
- ``tests/scenarios/kafka/inventory.json`` is the data: for each Kafka test class the suite reads
  (at Kafka 3.9.0), every test method (each ``@Test`` / ``@ParameterizedTest`` method, each
  system-test method) with a status:
  ``ported`` — a scenario under ``kafka-3.9`` in which the model does what Kafka's test asserts;
  ``disagrees`` — a scenario showing what the model does instead, and the finding (``finding``);
  ``needs-inject`` / ``needs-outcome`` — fully portable once scenarios can inject any request with
  any epochs / report a refusal's reason (issue 18 §1): the ``reason`` says what is missing, and a
  scenario may port the rest today;
  ``out-of-model`` — what the case exercises that the model does not have (``reason``, and ``see``,
  a section of docs/not-modeled.md, where one applies); ``disabled`` — Kafka does not run it;
  ``not-selected`` — outside the part of a class issue 18 picks (QuorumControllerTest's migration
  and activation cases). A class whose ``cases`` is null is not covered yet.
- A covered class's scenarios are one file, ``tests/scenarios/kafka/<scenarios>``: a case is the
  blocks from a comment line ``# case: <method>`` up to the next such line, and starts with its own
  ``init``, so every case runs on its own state.
- ``problems()`` is what tests/test_conformance.py asserts empty: every case of a covered class has
  its scenario (which gives its expected output) or its reason, and no scenario case is unlisted.
  ``render()`` is docs/conformance.md, written by ``kraftcheck docs``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from properties.catalogue import GENERATED, ROOT
from properties.scenario import FileResult, run_file

KAFKA = ROOT / "tests" / "scenarios" / "kafka"
INVENTORY = KAFKA / "inventory.json"
CASE = re.compile(r"^# case: (\S+)\s*$", re.MULTILINE)

SCENARIO_STATUSES = ("ported", "disagrees")  # a scenario, always
PARTIAL_STATUSES = ("needs-inject", "needs-outcome")  # a reason, and a scenario of what is portable today, if any
REASON_STATUSES = ("out-of-model", "disabled", "not-selected")  # a reason, never a scenario
STATUS_MEANING = {
    "ported": "a scenario under `kafka-3.9` in which the model does what Kafka's test asserts",
    "disagrees": "a scenario in which the model does otherwise; the finding says how",
    "needs-inject": "fully portable once a scenario can inject any request with any epochs (issue 18 §1); "
                    "a scenario may port the rest",
    "needs-outcome": "fully portable once a scenario step reports a refusal's reason, Kafka's error code "
                     "(issue 18 §1); a scenario may show the decision itself",
    "out-of-model": "the case exercises something the model does not have (the reason)",
    "disabled": "Kafka 3.9.0 does not run the case (`@Disabled`)",
    "not-selected": "outside the part of the class issue 18 §3 selects",
}


@dataclass(frozen=True)
class Case:
    method: str
    status: str
    note: str = ""  # ported or disagrees: how the port differs from Kafka's test (what it leaves out, what stands in)
    reason: str = ""  # the other statuses: why there is no scenario
    see: str = ""  # a docs/ page and anchor that says more (docs/not-modeled.md#the-migration)
    finding: str = ""  # disagrees: how Kafka and the model differ


@dataclass(frozen=True)
class KafkaClass:
    name: str
    path: str  # in apache/kafka at the inventory's tag
    part: str  # which of its cases issue 18 selects ("" for all)
    scenarios: str  # the scenario file under tests/scenarios/kafka, "" until covered
    cases: tuple[Case, ...] | None  # None: not covered yet

    @property
    def covered(self) -> bool:
        return self.cases is not None


@dataclass(frozen=True)
class Inventory:
    kafka: str  # the release read
    tag: str  # its tag in apache/kafka, as read
    classes: tuple[KafkaClass, ...]


def load(path: Path = INVENTORY) -> Inventory:
    data = json.loads(path.read_text(encoding="utf-8"))
    classes = []
    for entry in data["classes"]:
        cases = entry.get("cases")
        classes.append(KafkaClass(
            name=entry["class"], path=entry["path"], part=entry.get("part", ""),
            scenarios=entry.get("scenarios", ""),
            cases=None if cases is None else tuple(Case(**c) for c in cases),
        ))
    return Inventory(data["kafka"], data["tag"], tuple(classes))


@cache
def _run(path: Path) -> FileResult:
    return run_file(path)


def case_blocks(result: FileResult) -> dict[str, list[int]]:
    """method -> the indices of its blocks in the file (the case's ``# case:`` comment opens them)."""
    out: dict[str, list[int]] = {}
    current = None
    for i, block in enumerate(result.blocks):
        named = CASE.findall(block.preamble)
        if named:
            current = named[-1]
            out.setdefault(current, [])
        if current is not None:
            out[current].append(i)
    return out


def case_passes(result: FileResult, blocks: list[int]) -> bool:
    return all(result.outputs[i] == result.blocks[i].expected for i in blocks) and len(result.outputs) == len(
        result.blocks
    )


def problems(inventory: Inventory | None = None, directory: Path = KAFKA) -> list[str]:
    """Everything that keeps the inventory from being complete and its scenarios from passing."""
    inventory = inventory or load()
    out = []
    for k in inventory.classes:
        if not k.covered:
            continue
        assert k.cases is not None
        path = directory / k.scenarios
        if not k.scenarios or not path.exists():
            out.append(f"{k.name}: no scenario file {k.scenarios!r}")
            continue
        result = run_file(path)
        blocks = case_blocks(result)
        methods = [c.method for c in k.cases]
        for dup in sorted({m for m in methods if methods.count(m) > 1}):
            out.append(f"{k.name}.{dup}: listed twice")
        for case in k.cases:
            where = f"{k.name}.{case.method}"
            if case.status in SCENARIO_STATUSES:
                if case.method not in blocks:
                    out.append(f"{where}: {case.status} but {k.scenarios} has no '# case: {case.method}'")
                    continue
                first = result.blocks[blocks[case.method][0]].command
                if not first.startswith("init "):
                    out.append(f"{where}: its scenario starts with {first!r}, not an init")
                if not case_passes(result, blocks[case.method]):
                    out.append(f"{where}: its scenario does not give its expected output")
                if case.status == "disagrees" and not case.finding:
                    out.append(f"{where}: disagrees without a finding")
            elif case.status in PARTIAL_STATUSES + REASON_STATUSES:
                if not case.reason:
                    out.append(f"{where}: {case.status} without a reason")
                if case.method in blocks and case.status in REASON_STATUSES:
                    out.append(f"{where}: {case.status}, yet {k.scenarios} has a scenario for it")
                elif case.method in blocks:
                    first = result.blocks[blocks[case.method][0]].command
                    if not first.startswith("init "):
                        out.append(f"{where}: its scenario starts with {first!r}, not an init")
                    if not case_passes(result, blocks[case.method]):
                        out.append(f"{where}: its scenario does not give its expected output")
            else:
                out.append(f"{where}: unknown status {case.status!r}")
        for method in blocks:
            if method not in methods:
                out.append(f"{k.name}: {k.scenarios} has '# case: {method}', which the inventory does not list")
    return out


# ---- the page ------------------------------------------------------------------------------------

def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _see(case: Case) -> str:
    return f" ([{case.see.split('#')[-1].replace('-', ' ')}]({case.see}))" if case.see else ""


def render(inventory: Inventory | None = None) -> str:
    inventory = inventory or load()
    covered = [k for k in inventory.classes if k.covered]
    rest = [k for k in inventory.classes if not k.covered]
    out = [
        "# Conformance: Kafka's own tests as scenarios",
        "",
        GENERATED,
        "",
        f"Kafka's unit, integration and system tests of the control plane, read at Kafka {inventory.kafka} "
        f"(tag {inventory.tag}), "
        "are the conformance suite of the `kafka-3.9` profile (issue 18 §3). Each test case is either ported "
        "as a [scenario](guide/scenarios.md) under `tests/scenarios/kafka/` (one file per Kafka test class, "
        "a case's blocks opened by a `# case: <method>` comment, run under `--profile kafka-3.9` by "
        "`tests/test_conformance.py`, every invariant checked on every step), or listed with the reason it "
        "is not. The inventory is `tests/scenarios/kafka/inventory.json`; this page is generated from it and "
        "from running the scenarios.",
        "",
        "A port is the same situation at the model's scale, not a copy of the test: Kafka's tests set up "
        "images and mocks of any size, the model starts from one of its [scopes](manifest.md) (a scenario's "
        "`init` may stage its KRaft side and set its metadata.version) and takes protocol steps. What a "
        "ported case leaves out is said next to it.",
        "",
        "| status | meaning |",
        "|---|---|",
    ]
    out += [f"| {status} | {meaning} |" for status, meaning in STATUS_MEANING.items()]
    out += ["", "## Summary", "", "| Kafka test class | cases | " + " | ".join(STATUS_MEANING) + " | scenarios |",
            "|---|---|" + "---|" * len(STATUS_MEANING) + "---|"]
    for k in covered:
        assert k.cases is not None
        counts = [sum(1 for c in k.cases if c.status == s) for s in STATUS_MEANING]
        out.append(f"| [{k.name}](#{k.name.lower()}) | {len(k.cases)} | " + " | ".join(map(str, counts))
                   + f" | `{k.scenarios}` |")
    for k in covered:
        assert k.cases is not None
        result = _run(KAFKA / k.scenarios)
        blocks = case_blocks(result)
        part = f" ({k.part})" if k.part else ""
        out += ["", f"## {k.name}", "", f"`{k.path}`{part}; scenarios in `tests/scenarios/kafka/{k.scenarios}`.", "",
                "| case | status | scenario | result | notes |", "|---|---|---|---|---|"]
        for case in k.cases:
            if case.status in SCENARIO_STATUSES or case.method in blocks:
                where = f"line {result.blocks[blocks[case.method][0]].line}" if case.method in blocks else "missing"
                if not (case.method in blocks and case_passes(result, blocks[case.method])):
                    verdict = "**fails**"
                else:
                    verdict = {"ported": "pass", "disagrees": "disagrees"}.get(case.status, "partial")
            else:
                where, verdict = "", ""
            notes = "; ".join(filter(None, (case.finding, case.reason, case.note)))
            out.append(f"| `{case.method}` | {case.status} | {where} | {verdict} | {_cell(notes)}{_see(case)} |")
    findings = [(k, c) for k in covered for c in k.cases or () if c.status == "disagrees"]
    out += ["", "## Findings", ""]
    if findings:
        out += [f"- `{k.name}.{c.method}`: {_cell(c.finding)}" for k, c in findings]
    else:
        out.append("No ported case disagrees with the model under `kafka-3.9`.")
    out += ["", "## Not covered yet", ""]
    if rest:
        out += ["These classes of issue 18 §3's list have no inventory of their cases yet:", ""]
        out += [f"- {k.name}{f' ({k.part})' if k.part else ''}: `{k.path}`" for k in rest]
    else:
        out.append("Every class of issue 18 §3's list has its inventory.")
    out.append("")
    return "\n".join(out)
