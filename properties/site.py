"""The documentation site's generated pages, and the command that writes or checks them.

Rules (docs/design.md §13):
- ``PAGES`` maps each generated page under docs/ to the function that renders it from the
  model's and the checks' own data; nothing on these pages is typed in by hand. ``kraftcheck
  docs`` writes them all (each through a temporary file), ``kraftcheck docs --check`` names the
  stale ones, and tests/test_docs_site.py fails when any is stale.
- The state diagrams are Mermaid, drawn from the model's tables: the persisted migration state
  from ``model.migration.STATE_ORDER`` (with ``STATE_BYTES`` per profile), the migration driver
  from ``VALID_TRANSITIONS`` (with the driver's events, the actions ``model.actions`` declares
  under the migration driver's heading). The broker lifecycle has no table in the model: it is
  what ``step`` does, so its diagram is every lifecycle change seen in complete explorations of
  small scopes (``LIFECYCLE_SCOPES``), labelled by the actions that made it.
- The profiles page lists the ``# Differs:`` marks (``properties.catalogue.differences``),
  split by whether the marked code switches on the profile; the manifest page is
  ``properties/manifest.json`` with each scope's definition; the KIP sections page
  (``properties.citations``) maps each section of the seeds to the properties and the code that
  cite it; the conformance page (``properties.conformance``) lists Kafka's own test cases with their
  scenarios, run, or the reasons they have none.
- Output is deterministic: the same model and manifest give the same bytes.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from pathlib import Path

from impl.bugs import IMPL_SEEDED_BUGS
from model import SCOPES, SEEDED_BUGS, Scope, initial_state, successors
from model.kraft import BrokerState, ZkMigrationState
from model.migration import STATE_BYTES, STATE_ORDER, VALID_TRANSITIONS, MigrationDriverState, Profile
from model.scopes import PROFILE_FINDINGS, ROLLBACK_REUSES_ZK_EPOCH
from properties import catalogue, citations, conformance
from properties.catalogue import GENERATED, ROOT, campaign_scope, pinned, scope_link, write_page
from properties.manifest import DEPTH_LIMITS, SYMMETRIC, keys, split

DOCS = ROOT / "docs"


# ---- state diagrams ------------------------------------------------------------------------------

def _state(value) -> str:
    return "[*]" if value is None else value.value


def persisted_state_diagram() -> str:
    lines = ["stateDiagram-v2", "    direction LR"]
    for source in STATE_ORDER:
        for target in sorted(STATE_ORDER[source], key=list(ZkMigrationState).index):
            lines.append(f"    {_state(source)} --> {_state(target)}")
    for state in ZkMigrationState:
        if state in STATE_ORDER and not STATE_ORDER[state]:
            lines.append(f"    {state.value} --> [*]")
    return "\n".join(lines)


def driver_diagram() -> str:
    order = list(MigrationDriverState).index
    lines = ["stateDiagram-v2", f"    [*] --> {MigrationDriverState.UNINITIALIZED.value}"]
    for source in sorted(VALID_TRANSITIONS, key=order):
        for target in sorted(VALID_TRANSITIONS[source], key=order):
            lines.append(f"    {source.value} --> {target.value}")
    dual = [s.value for s in MigrationDriverState if s.allows_dual_write]
    if dual:
        lines.append("    classDef dualWrite stroke-width:3px")
        lines.append(f"    class {','.join(dual)} dualWrite")
    return "\n".join(lines)


DRIVER_SECTION = "# ---- the migration driver"


def driver_events() -> list[tuple[str, str]]:
    """(action, first line of its docstring) for the actions model/actions.py declares under the
    migration driver's heading: the driver's events, one action each."""
    path = ROOT / "model" / "actions.py"
    source = path.read_text()
    lines = source.splitlines()
    starts = [i + 1 for i, line in enumerate(lines) if line.startswith(DRIVER_SECTION)]
    if len(starts) != 1:
        raise ValueError(f"{path}: expected one line starting {DRIVER_SECTION!r}, found {len(starts)}")
    ends = [i + 1 for i, line in enumerate(lines) if line.startswith("# ----") and i + 1 > starts[0]]
    end = ends[0] if ends else len(lines) + 1
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and starts[0] < node.lineno < end:
            doc = (ast.get_docstring(node) or "").strip().splitlines()
            out.append((node.name, doc[0] if doc else ""))
    return out


# The broker lifecycle has no table in the model, so the diagram shows what ``step`` does: every
# change of a broker's BrokerState in complete explorations of ``kraft-broker-restart`` with these
# budgets (a restart and a missed heartbeat; and with a controlled shutdown, each in turn).
LIFECYCLE_SCOPE = "kraft-broker-restart"
LIFECYCLE_BUDGETS: tuple[dict[str, int], ...] = ({}, {"shutdowns": 1, "restarts": 0}, {"shutdowns": 1, "timeouts": 0})


def lifecycle_scopes() -> list[Scope]:
    base = SCOPES[LIFECYCLE_SCOPE]
    return [base.replace(budget=base.budget.replace(**change)) for change in LIFECYCLE_BUDGETS]


@cache
def lifecycle_moves() -> dict[tuple[BrokerState, BrokerState], frozenset[str]]:
    """(from, to) -> the action kinds that made a broker's lifecycle change so, in ``lifecycle_scopes``
    (explored once per process: the model does not change under a running command)."""
    moves: dict[tuple[BrokerState, BrokerState], set[str]] = {}
    for scope in lifecycle_scopes():
        start = initial_state(scope)
        seen, frontier = {start}, [start]
        while frontier:
            following = []
            for state in frontier:
                for action, after in successors(state, scope):
                    for before_b, after_b in zip(state.brokers, after.brokers):
                        if before_b.lifecycle is not after_b.lifecycle:
                            moves.setdefault((before_b.lifecycle, after_b.lifecycle), set()).add(type(action).__name__)
                    if after not in seen:
                        seen.add(after)
                        following.append(after)
            frontier = following
    return {move: frozenset(kinds) for move, kinds in moves.items()}


def lifecycle_diagram(moves: dict[tuple[BrokerState, BrokerState], frozenset[str]]) -> str:
    order = list(BrokerState).index
    lines = ["stateDiagram-v2", f"    [*] --> {BrokerState.OFFLINE.value}"]
    for source, target in sorted(moves, key=lambda m: (order(m[0]), order(m[1]))):
        lines.append(f"    {source.value} --> {target.value}: {', '.join(sorted(moves[(source, target)]))}")
    return "\n".join(lines)


def _mermaid(diagram: str) -> list[str]:
    return ["``` mermaid", diagram, "```", ""]


def render_diagrams() -> str:
    bytes_header = "| state | " + " | ".join(f"`{p.value}`" for p in Profile) + " |"
    out = [
        "# State diagrams",
        "",
        GENERATED,
        "",
        "Drawn from the model's own tables, so a change there changes this page (and the test that keeps "
        "the generated pages fresh fails until `kraftcheck docs` is run).",
        "",
        "## The persisted migration state",
        "",
        "`ZkMigrationState`, the state the `ZkMigrationStateRecord` persists in the metadata log "
        "(KIP-866 §Migration Overview), and its only legal moves (`model/migration.py`, `STATE_ORDER`). "
        "The first record of a log writes `NONE` (a KRaft-born cluster, which never migrates) or "
        "`PRE_MIGRATION` (a quorum started with the migration flag). `MigrationStateOnlyMovesForward` "
        "checks every step against this table.",
        "",
    ]
    out += _mermaid(persisted_state_diagram())
    out += ["The byte each profile writes for each state (`STATE_BYTES`):", "", bytes_header,
            "|---|" + "---|" * len(Profile)]
    out += ["| `" + s.value + "` | " + " | ".join(str(STATE_BYTES[p][s]) for p in Profile) + " |"
            for s in ZkMigrationState]
    out += [
        "",
        "## The migration driver",
        "",
        "`MigrationDriverState`, the in-memory state of each KRaft controller's `KRaftMigrationDriver`, and "
        "`VALID_TRANSITIONS`, the table of `isValidStateChange` (`model/migration.py`). A driver moves only "
        "through it (staying put is always valid; nothing returns to `UNINITIALIZED`), and "
        "`DriverTakesOnlyTableTransitions` re-checks every step against the same table. States drawn with "
        "a thick border allow dual writes (`allows_dual_write`; `DualWritesOnlyInDualWriteStates`).",
        "",
    ]
    out += _mermaid(driver_diagram())
    out += ["The driver's events, one model action each (`model/actions.py`), each enabled only in the state "
            "that runs it:", "", "| action | what it does |", "|---|---|"]
    out += [f"| `{name}` | {doc} |" for name, doc in driver_events()]
    moves = lifecycle_moves()
    budgets = "; ".join(
        ", ".join(f"{f.name} {getattr(s.budget, f.name)}" for f in fields(s.budget) if getattr(s.budget, f.name))
        for s in lifecycle_scopes()
    )
    out += [
        "",
        "## The broker lifecycle on KRaft",
        "",
        "`BrokerState` (KIP-500 §Broker States), as a KRaft broker itself sees it: registered and "
        "`Fenced` until it has replayed its own registration, then `Online`; `Stopping` during a "
        "controlled shutdown; `Offline` when the process is down. ZooKeeper-mode brokers stay `Offline` "
        "in this view. The model has no table of these moves: they are what `step` does. This diagram is "
        f"every change seen in complete explorations of scope [`{LIFECYCLE_SCOPE}`](manifest.md#{LIFECYCLE_SCOPE}) "
        f"with budgets ({budgets}), each move labelled with the actions that made it.",
        "",
    ]
    out += _mermaid(lifecycle_diagram(moves))
    return "\n".join(out)


# ---- the profiles ----------------------------------------------------------------------------------

def _difference_rows(diffs) -> list[str]:
    rows = ["| where | what |", "|---|---|"]
    rows += [f"| `{d.file}` `{d.where}` | {d.text.replace('|', '&#124;')} |" for d in diffs]
    return rows


def render_profiles() -> str:
    model_diffs = catalogue.differences("model")
    switched = [d for d in model_diffs if d.by_profile]
    always = [d for d in model_diffs if not d.by_profile]
    out = [
        "# Profiles: `kip` and `kafka-3.9`",
        "",
        GENERATED,
        "",
        "Where the seeds (the KIPs as written) and shipped Kafka differ, the model follows one or the other "
        "by profile: `--profile kip` (the default) or `--profile kafka-3.9`, on `explore`, `liveness` and "
        "`simulate`. Every place the model differs from a seed or from Kafka is marked where it is made with "
        "a one-line `# Differs:` comment; this page lists them all.",
        "",
        "## What the profile switches",
        "",
        f"{len(switched)} marks are on code that reads the profile: there, `kip` does what the seed says and "
        "`kafka-3.9` what Kafka 3.9 does.",
        "",
    ]
    out += _difference_rows(switched)
    out += ["", "The migration state's byte in `ZkMigrationStateRecord`:", "",
            "| state | " + " | ".join(f"`{p.value}`" for p in Profile) + " |", "|---|" + "---|" * len(Profile)]
    out += ["| `" + s.value + "` | " + " | ".join(str(STATE_BYTES[p][s]) for p in Profile) + " |"
            for s in ZkMigrationState]
    out += [
        "",
        "## Warm starts",
        "",
        "Every check (`explore`, `liveness`, `simulate`, the machines, the manifest's pins) starts a scope "
        "from its warm start taken under `kip`'s rules, whichever profile it explores: so the `kafka-3.9` pins "
        "of a migrating scope start from a quorum bootstrapped at metadata.version 3.4-IV0, which Kafka 3.9 "
        "would refuse to bootstrap a migration at. A script and a scenario file start from their own "
        "profile's (`model.scopes.for_profile`, `warm_up(scope, profile)`): under `kafka-3.9` a quorum that "
        "bootstraps with the migration flag starts at 3.6-IV1, the scope's levels raised in order, and its "
        "bootstrap records are in a metadata transaction "
        "([scenarios](guide/scenarios.md#warm-starts-follow-the-profile); "
        "`warm=kip` asks for the checks' start).",
        "",
        "## Differences under both profiles",
        "",
        f"{len(always)} marks are on code that does not read the profile: the model keeps the seed's rule where "
        "Kafka differs (and the difference does not change what the checks are about), or departs from both "
        "to keep states finite or steps atomic.",
        "",
    ]
    out += _difference_rows(always)
    findings = [(s, profile, prop) for s in [*SCOPES.values(), campaign_scope()] for profile, prop in s.findings]
    out += [
        "",
        "## Findings by profile",
        "",
        "Properties the correct model breaks in a scope under one profile, because of the seed's text "
        "([the findings](model.md#findings-the-checks-report-on-the-seeds)). Exploration shows them as "
        "violations; Hypothesis machines, differential runs and campaigns report them without counting them. "
        "The rollback's (KIP-866 §Rollback to ZK: the operator deletes /controller_epoch) hold in any scope "
        "once a differential run or a campaign's `rollback` runbook has taken that deletion: "
        + ", ".join(f"[{prop}](invariants.md#{prop.lower()}) under `{profile}`"
                    for profile, prop in ROLLBACK_REUSES_ZK_EPOCH) + ". "
        "A profile's own findings hold in every scope where their situation arises, whatever its budget: "
        + ", ".join(f"[{prop}](invariants.md#{prop.lower()}) under `{profile}`"
                    for profile, prop in PROFILE_FINDINGS) + ".",
        "",
        "| scope | profile | property |",
        "|---|---|---|",
    ]
    out += [f"| {scope_link(s.name)} | `{profile}` | [{prop}](invariants.md#{prop.lower()}) |"
            for s, profile, prop in findings]
    pins = pinned()
    rows = []
    for name in SCOPES:
        kip, other = pins.get(name), pins.get(f"{name}@{Profile.KAFKA_3_9.value}")
        if kip is not None and other is not None:
            rows.append(f"| [`{name}`](manifest.md#{name}) | {kip['distinct_states']:,} ({kip['generated']:,}) | "
                        f"{other['distinct_states']:,} ({other['generated']:,}) | {'no' if kip == other else 'yes'} |")
    out += [
        "",
        "## Reachability by profile",
        "",
        "The scopes with KRaft controllers are pinned under both profiles in the "
        "[manifest](manifest.md), at the same depth limit: distinct states (steps checked).",
        "",
        "| scope | `kip` | `kafka-3.9` | the profile changes reachability |",
        "|---|---|---|---|",
        *rows,
        "",
        "## Where the implementation differs",
        "",
        "The implementation (`impl/`) follows the `kip` profile; its own marks say where it departs from Kafka "
        "or from the model (the refinement map and differential testing account for each).",
        "",
    ]
    out += _difference_rows(catalogue.differences("impl"))
    out.append("")
    return "\n".join(out)


# ---- the explorer manifest -------------------------------------------------------------------------

def _budgets(scope: Scope) -> str:
    return ", ".join(f"{f.name} {getattr(scope.budget, f.name)}" for f in fields(scope.budget)
                     if getattr(scope.budget, f.name)) or "none"


def _start(scope: Scope) -> str:
    text = ("settled " if scope.settled else "") + ("warm" if scope.warm else "cold")
    return text + (f", KRaft side at stage `{scope.stage}`" if scope.stage else "")


def _pin_text(pin: dict | None) -> str:
    if pin is None:
        return "not pinned"
    reach = "all of them" if pin["complete"] else f"to depth {pin['depth']}"
    return f"{pin['distinct_states']:,} distinct states ({reach}), {pin['generated']:,} steps checked"


COMPLETION = Path(__file__).resolve().parent / "completion.json"


def _completion_section() -> list[str]:
    """The scopes explored with no depth limit (``python -m bench.complete_scopes --write``), as pinned."""
    if not COMPLETION.exists():
        return []
    rows = json.loads(COMPLETION.read_text())
    out = ["", "## Explored to completion", "",
           "`python -m bench.complete_scopes` explores the migration's scopes with no depth limit, each in its own "
           "process within a time budget, on the parallel engine (`--workers`); a scope that completes has its "
           "`eventually` properties checked on its whole graph. `properties/completion.json` pins the figures, and "
           "`pytest -m slow` explores every complete entry again and compares the counts. Where a scope does not "
           "complete, the reason is the one shown: the depth and the size it reached when the budget ran out, "
           "with its last level's size. Seconds are on a shared 2-core machine (the load average beside them).",
           "",
           "| entry | complete | distinct states | steps checked | depth | seconds (load) | liveness on the graph |",
           "|---|---|---|---|---|---|---|"]
    for key in sorted(rows):
        row = rows[key]
        scope, _, profile = key.partition("@")
        seconds = f"{row['seconds']:,.0f} ({row['load_average']})"
        if row["complete"]:
            live = row.get("liveness")
            verdicts = "not checked" if not live else "; ".join(
                f"{prop}: {verdict}" for prop, verdict in sorted(live.items()) if verdict != "holds") or "all hold"
            cells = ["yes", f"{row['distinct_states']:,}", f"{row['generated']:,}", str(row["depth"]), seconds,
                     verdicts]
        else:
            trend = "still growing" if row["levels_growing"] else "shrinking"
            cells = [f"no, in {row['budget_minutes']:g} min", f"{row['distinct_states']:,} so far",
                     f"{row['generated']:,}", f"{row['depth_reached']} reached (last level {row['last_level']:,}, "
                     f"{trend})", seconds, ""]
        out.append(f"| [`{key}`](#{scope}) | " + " | ".join(cells) + " |")
    return out


def render_manifest() -> str:
    pins = pinned()
    out = [
        "# The explorer manifest",
        "",
        GENERATED,
        "",
        "`properties/manifest.json` pins, for each scope, what a breadth-first exploration of the correct model finds "
        "to the scope's depth limit: distinct states, generated (checked) steps, the depth reached, whether the search "
        "was complete, and the sometimes-properties it witnessed (the union must cover them all, so no property they "
        "guard is vacuous). A test explores every scope again and compares (those checking over 70,000 steps under "
        "`pytest -m slow` only); `kraftcheck manifest` does the same from "
        "the command line, and `kraftcheck manifest --write` pins new figures when a change moves them on purpose, so "
        "the JSON diff is where a reviewer sees reachability move. Scopes with KRaft controllers are pinned under "
        "`kafka-3.9` as well (`<scope>@kafka-3.9`), and scopes that start symmetric "
        f"also with symmetry reduction (`<scope>{SYMMETRIC}`).",
        "",
        "| entry | profile | symmetry | depth limit | distinct states | steps checked | depth | complete |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in keys():
        name, profile = split(key)
        pin = pins.get(key)
        limit = DEPTH_LIMITS.get(name)
        cells = [f"[`{key}`](#{name})", f"`{profile.value}`", "yes" if key.endswith(SYMMETRIC) else "",
                 "none" if limit is None else str(limit)]
        if pin is None:
            cells += ["not pinned", "", "", ""]
        else:
            cells += [f"{pin['distinct_states']:,}", f"{pin['generated']:,}", str(pin["depth"]),
                      "yes" if pin["complete"] else "no"]
        out.append("| " + " | ".join(cells) + " |")
    out += _completion_section()
    out += ["", "## Scopes", "",
            "Each scope bounds the perturbations with budgets (healing steps are free) and caps the messages in "
            "flight (`model/scopes.py`). The seeded-bug search depth is how deep `kraftcheck mutants` searches "
            "for the bugs found in the scope.", ""]
    for name, scope in SCOPES.items():
        model_bugs = [b.name for b in SEEDED_BUGS if b.scope == name]
        impl_bugs = [b.name for b in IMPL_SEEDED_BUGS if b.scope == name]
        partitions = " ".join("(" + ",".join(str(r) for r in p) + ")" for p in scope.partitions) or "none"
        out += [
            f"### {name}",
            "",
            scope.summary,
            "",
            f"- **Cluster:** {scope.brokers} ZooKeeper-mode brokers, {len(scope.controllers)} KRaft controllers, "
            f"partitions {partitions} (replicas, preferred leader first)",
            f"- **Budgets:** {_budgets(scope)}",
            f"- **Start:** {_start(scope)}",
            f"- **Pinned (`kip`):** {_pin_text(pins.get(name))}",
        ]
        if scope.controllers:
            out.append(f"- **Pinned (`kafka-3.9`):** {_pin_text(pins.get(f'{name}@{Profile.KAFKA_3_9.value}'))}")
        if name + SYMMETRIC in pins:
            out.append(f"- **Pinned with symmetry reduction:** {_pin_text(pins[name + SYMMETRIC])}")
        out.append(f"- **Seeded-bug search depth:** {scope.max_depth}")
        if model_bugs or impl_bugs:
            listed = ", ".join(f"`{b}`" for b in model_bugs + impl_bugs)
            out.append(f"- **Seeded bugs found here:** {listed}")
        if scope.findings:
            listed = ", ".join(f"[{prop}](invariants.md#{prop.lower()}) (`{p}`)" for p, prop in scope.findings)
            out.append(f"- **Documented findings:** {listed}")
        out.append("")
    sim = campaign_scope()
    out += [
        "## The simulator scenario",
        "",
        f"`{sim.name}` (`impl/sim/scenarios.py`) is not explored: it is the default scope of the simulator and of "
        f"campaigns. {sim.summary}. Its model budgets are unbounded (the fault mix decides what happens); "
        f"{sim.brokers} ZooKeeper-mode brokers, {len(sim.controllers)} KRaft controllers.",
        "",
    ]
    return "\n".join(out)


# ---- the pages ---------------------------------------------------------------------------------------

PAGES: dict[str, Callable[[], str]] = {
    "invariants.md": catalogue.render,
    "diagrams.md": render_diagrams,
    "profiles.md": render_profiles,
    "manifest.md": render_manifest,
    "kip-sections.md": citations.render,
    "conformance.md": conformance.render,
}


def render_all(directory: Path = DOCS) -> dict[Path, str]:
    return {directory / name: render() for name, render in PAGES.items()}


def write_all(directory: Path = DOCS) -> list[Path]:
    """Every generated page into ``directory`` (``kraftcheck docs`` passes the one the user names)."""
    pages = render_all(directory)
    for path, text in pages.items():
        write_page(path, text)
    return list(pages)


def stale_pages(directory: Path = DOCS) -> list[Path]:
    return [path for path, text in render_all(directory).items() if not path.exists() or path.read_text() != text]

