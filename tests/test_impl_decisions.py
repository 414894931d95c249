"""What a campaign's runs exercised beyond the model's coverage: the implementation's decisions by
outcome, and the faults by the step of the migration they struck in.

A campaign's report shows, for each decision of ``impl/`` (``decide_*`` and its kin), how many
runs reached each of its outcomes, marking those no run reached: a rule no run exercised is
visible (issue 17 §2).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd

from impl import decisions
from model.migration import MigrationDriverState
from properties.campaign.report import _decisions_table
from properties.plan import Plan
from properties.runs import run_seed

IMPL = Path(__file__).resolve().parents[1] / "impl"


def _decide_functions() -> set[str]:
    found = set()
    for path in IMPL.rglob("*.py"):
        module = ".".join(path.relative_to(IMPL.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found |= {f"{module}.{node.name}.{f.name}" for f in node.body
                          if isinstance(f, ast.FunctionDef) and f.name.startswith("decide_")}
            elif isinstance(node, ast.Module):
                found |= {f"{module}.{f.name}" for f in node.body
                          if isinstance(f, ast.FunctionDef) and f.name.startswith("decide_")}
    return {name.removeprefix("impl.") for name in found}


def test_every_decide_function_is_marked_with_its_outcomes():
    marked = decisions.registered()
    assert _decide_functions() <= set(marked), "mark it with @decision(...) and list its module in DECIDING_MODULES"
    assert all(outcomes for outcomes in marked.values())


def test_a_run_counts_its_decisions_as_coverage_and_each_outcome_is_declared():
    """A migration run reaches decisions on both sides of the cluster, each outcome one its decision
    declares (an undeclared one would show in the report, but then the declaration is wrong)."""
    counted = {}
    for seed in range(2):
        run = run_seed(Plan(steps=600, runbook="finalize"), seed)
        assert run.disagreement is None
        for (kind, key), n in run.coverage.items():
            if kind == "decision":
                counted[key] = counted.get(key, 0) + n
    names = {key.split("=", 1)[0] for key in counted}
    assert {"broker.decide_control_request", "kraft_controller.decide_broker_heartbeat"} <= names
    marked = decisions.registered()
    undeclared = [key for key in counted if key.split("=", 1)[1] not in marked[key.split("=", 1)[0]]]
    assert undeclared == []


def test_counting_does_not_change_a_run():
    """Counting is observation only: the same seed gives the same record with or without a collector."""
    plan = Plan(steps=300, runbook="finalize")
    counted, plain = run_seed(plan, 3), run_seed(plan, 3, coverage=False)
    assert counted.record == plain.record
    assert not any(kind == "decision" for kind, _ in plain.coverage)


def test_report_marks_the_outcomes_no_run_reached():
    coverage = pd.DataFrame(
        [
            {"partition": 0, "seed": 0, "kind": "decision", "key": "broker.decide_control_request=NONE", "count": 9},
            {"partition": 0, "seed": 1, "kind": "decision", "key": "broker.decide_control_request=NONE", "count": 4},
            {"partition": 0, "seed": 1, "kind": "decision", "key": "kraft.raft.decide_vote=yes", "count": 2},
        ]
    )
    page = _decisions_table(coverage)
    name = "<td><code>broker.decide_control_request</code></td>"
    assert f'{name}<td>NONE</td><td class="n">2</td><td class="n">13</td>' in page  # 2 runs, 13 times
    assert f'<tr class="unreached">{name}<td>STALE_BROKER_EPOCH</td>' in page
    total = sum(len(o) for o in decisions.registered().values())
    assert f"{total - 2} outcomes of the implementation" in page


def test_faults_are_counted_by_the_driver_state_they_struck_in():
    """Issue 17 §2: faults aimed at every step of the migration. Each fault a run injects is counted
    with the active controller's driver state at that moment; a dead process's session timing out
    heals and is not a fault."""
    from properties.runs import FAULTS, NO_DRIVER

    run = run_seed(Plan(steps=1500, runbook="finalize", faults="all"), 1)
    struck = {key: n for (kind, key), n in run.coverage.items() if kind == "fault_at"}
    assert struck, "a run under every fault kind struck with none"
    states = {key.split("|")[0] for key in struck}
    faults = {key.split("|")[1] for key in struck}
    assert faults <= set(FAULTS.values())
    assert states <= {NO_DRIVER, *(s.name for s in MigrationDriverState)}


def test_report_grid_marks_the_faults_no_run_aimed_at_a_step():
    from properties.campaign.report import _faults_grid

    coverage = pd.DataFrame(
        [
            {"partition": 0, "seed": 0, "kind": "fault_at", "key": "ZK_MIGRATION|crash controller", "count": 1},
            {"partition": 0, "seed": 1, "kind": "fault_at", "key": "ZK_MIGRATION|crash controller", "count": 2},
        ]
    )
    page = _faults_grid(coverage)
    row = page.split("<tr><th>ZK_MIGRATION</th>")[1].split("</tr>")[0]
    assert '<td class="n">2</td>' in row  # two runs struck there
    assert row.count('class="n unreached"') == row.count("<td") - 1
    from properties.runs import GRID_FAULTS, GRID_STATES

    cells = len(GRID_STATES) * len(GRID_FAULTS)  # 10 states by 13 faults, held heartbeats included
    assert cells == 130 and f"{cells - 1} of {cells} cells are empty" in page
