"""Many real runs, one per seed: resumable, with Parquet tables and a self-contained report.

Rules:
- Seed N's run lives in ``DIR/runs/seed-N``; a run counts once its folder holds
  ``violations.json`` (written last, whole or not at all). A folder without it is a run that was
  killed: it is discarded and run again, so a resumed campaign neither loses nor doubles a run.
  A resumed campaign checks its finished runs again, offline, with the checks as they are now.
- Runs are sequential on one machine (each is a whole cluster on 2 cores). With ``--master`` each
  run is a Spark task that runs its cluster on its executor's host, writing into ``DIR``, which
  must be a folder every executor sees.
- ``runs.parquet`` (a row per run) and ``violations.parquet`` (a row per violation) are rebuilt
  from the run folders after every run, and ``report.html`` at the end, each whole or not at all.
- Once the runs are done, each check a run broke is shrunk once (``properties.kafka.shrink``), on
  the first run that broke it, while the shrinking budget lasts: its folder gets ``shrunk-plan.json``
  and ``shrink.json``, and the report shows the shrunk plan next to the original. A resumed
  campaign does not shrink a check again that a run's folder already holds a shrink of. On one
  machine the shrinks run one after another within the budget; with ``--master`` each is a Spark
  task of its own, run beside the others on its executor's host, each within the whole budget.
"""

from __future__ import annotations

import base64
import html
import io
import json
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from model import PROPERTIES
from properties.files import replace_atomically, write_text
from properties.kafka.install import Installation
from properties.kafka.observe import describe
from properties.kafka.run import (
    FAULT_KINDS,
    Execute,
    RealRunPlan,
    aimable_cells,
    check_folder,
    execute_run,
    timeline,
)
from properties.kafka.shrink import SHRINK_LOG, SHRUNK_PLAN, real_runner, shrink_folder, step_names, summary

SOMETIMES_NAMES = tuple(p.name for p in PROPERTIES if p.kind.value == "sometimes")


def run_folder(out: Path, seed: int) -> Path:
    return out / "runs" / f"seed-{seed}"


def finished(folder: Path) -> bool:
    return (folder / "violations.json").is_file()


def run_one(plan: RealRunPlan, kafka: Installation, out: Path, execute: Execute = execute_run) -> dict:
    """Seed ``plan.seed``'s run, or the one a previous campaign finished; its row."""
    folder = run_folder(out, plan.seed)
    if not finished(folder):
        shutil.rmtree(folder, ignore_errors=True)  # a killed run's half: run it again whole
        execute(plan, kafka, folder)
    check_folder(folder)  # a finished run is checked again: the checks may have changed since
    return row(folder)


def row(folder: Path) -> dict:
    meta = json.loads((folder / "run.json").read_text())
    end = next(
        (
            json.loads(line)
            for line in reversed((folder / "operator.jsonl").read_text().splitlines())
            if '"end"' in line
        ),
        {},
    )
    violations = json.loads((folder / "violations.json").read_text())
    faults = [f"{f['kind']}@{f['step']}" for f in meta["faults"]]
    operator = [json.loads(line) for line in (folder / "operator.jsonl").read_text().splitlines()]
    validation_file = folder / "validation.json"
    validation = json.loads(validation_file.read_text()) if validation_file.is_file() else {}
    return {
        "seed": meta["plan"]["seed"],
        "kafka": meta["kafka"],
        "runbook": meta["plan"]["runbook"],
        "faults": ", ".join(faults),
        "struck": ", ".join(_struck(faults, operator)),
        "outcome": end.get("outcome", "unknown"),
        "seconds": end.get("seconds", 0.0),
        "violations": len(violations),
        "invariants": ", ".join(sorted({v["invariant"] for v in violations})),
        # trace validation: explained, unexplained, undecided or not validated (with its reason)
        "trace": validation.get("outcome", "not checked"),
        "trace_explained": validation.get("explained", 0),
        "trace_total": validation.get("total", 0),
        # the model's witnesses its explaining path reaches; the runbook steps the run began, in order
        "witnesses": ", ".join(validation.get("witnesses", [])),
        "steps": ", ".join(e["step"] for e in operator if e.get("kind") == "step-begins"),
        # aimed faults (``after``): each "kind@moment" the plan aimed at, and those whose moment was logged
        "aimed": ", ".join(f"{f['kind']}@{f['after']}" for f in meta["faults"] if f.get("after")),
        "moments": ", ".join(f"{e['fault']}@{e['after']}" for e in operator if e.get("kind") == "moment"),
    }


def _struck(faults: list[str], operator: list[dict]) -> list[str]:
    """The run's planned faults ("kind@step") but those it skipped (their moment never logged, their process not
    running, ZooKeeper not answering: the operator's ``fault-skipped`` notes, a step named or the first of the kind)."""
    struck = list(faults)
    for e in operator:
        if e.get("kind") != "fault-skipped":
            continue
        wanted = f"{e['fault']}@{e['step']}" if e.get("step") else None
        match = next((f for f in struck if f == wanted or wanted is None and f.startswith(f"{e['fault']}@")), None)
        if match is not None:
            struck.remove(match)
    return struck


def write_tables(out: Path) -> tuple[list[dict], list[dict]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    runs, violations = [], []
    for folder in sorted((out / "runs").glob("seed-*"), key=lambda p: int(p.name.split("-")[1])):
        if not finished(folder):
            continue
        runs.append(row(folder))
        for v in json.loads((folder / "violations.json").read_text()):
            violations.append(
                {
                    "seed": runs[-1]["seed"],
                    "invariant": v["invariant"],
                    "message": v["message"],
                    "folder": str(folder.relative_to(out)),
                    "shrunk": shrunk_text(folder, v["invariant"]),
                }
            )
    schema_violations = pa.schema(
        [
            ("seed", pa.int64()),
            ("invariant", pa.string()),
            ("message", pa.string()),
            ("folder", pa.string()),
            ("shrunk", pa.string()),
        ]
    )
    for name, rows, schema in (("runs", runs, None), ("violations", violations, schema_violations)):
        table = (
            pa.Table.from_pylist(rows, schema=schema)
            if rows or schema
            else pa.table({"seed": pa.array([], pa.int64())})
        )
        replace_atomically(out / f"{name}.parquet", lambda temp, table=table: pq.write_table(table, temp))
    return runs, violations


def shrink_log(folder: Path, invariant: str) -> dict | None:
    """The shrink the run's folder holds for ``invariant``, if any."""
    path = folder / SHRINK_LOG
    if not path.is_file():
        return None
    log = json.loads(path.read_text())
    return log if log.get("invariant") == invariant else None


def shrunk_text(folder: Path, invariant: str) -> str | None:
    log = shrink_log(folder, invariant)
    return None if log is None else summary(None, log=log)


def _shrink_targets(out: Path) -> list[tuple[str, Path]]:
    """Each check some run broke, with the first run that broke it, unless a run's folder holds its shrink."""
    _, violations = write_tables(out)
    first: dict[str, Path] = {}
    for v in violations:
        first.setdefault(v["invariant"], out / v["folder"])
    return [(invariant, folder) for invariant, folder in first.items() if shrink_log(folder, invariant) is None]


def shrink_one(
    folder: Path,
    invariant: str,
    kafka: Installation,
    budget_s: float,
    tries: int,
    execute: Execute = execute_run,
    say: Callable[[str], None] = lambda line: None,
) -> str:
    """``invariant`` shrunk on the run in ``folder`` within ``budget_s``; the line that says how it went."""
    runner = real_runner(folder, kafka, say, execute)
    state = shrink_folder(folder, invariant, tries=tries, budget_s=budget_s, say=say, runner=runner, kafka=kafka)
    return f"{folder.name} {invariant} shrunk: {summary(state, step_names(kafka))}"


def shrink_violations(
    out: Path,
    kafka: Installation,
    minutes: float,
    tries: int,
    say: Callable[[str], None],
    execute: Execute = execute_run,
) -> None:
    """Each check some run broke, shrunk on the first run that broke it, one after another while ``minutes`` last."""
    began = time.monotonic()
    for invariant, folder in _shrink_targets(out):
        left = minutes * 60 - (time.monotonic() - began)
        if left <= 0:
            say(f"shrinking budget spent: {invariant} ({folder.name}) not shrunk")
            continue
        say(shrink_one(folder, invariant, kafka, left, tries, execute, say))


def campaign(
    plan: RealRunPlan,
    kafka: Installation,
    out: Path,
    seeds: int | None,
    minutes: float | None,
    master: str | None,
    say: Callable[[str], None],
    shrink_minutes: float | None = None,
    tries: int = 2,
    execute: Execute = execute_run,
) -> tuple[list[dict], list[dict]]:
    """Seeds 0.. while the budget lasts (``seeds`` runs, or ``minutes`` of wall time), then, with
    ``shrink_minutes``, each broken check shrunk; the tables. ``execute`` carries a plan out (a real
    cluster; tests give a stand-in)."""
    out.mkdir(parents=True, exist_ok=True)
    write_text(
        out / "campaign.json",
        json.dumps(
            {"plan": asdict(plan), "kafka": kafka.version, "lib": str(kafka.lib), "seeds": seeds, "minutes": minutes},
            indent=1,
        )
        + "\n",
    )
    if master:
        _on_spark(plan, kafka, out, seeds or 1, master, shrink_minutes, tries, execute, say)
    else:
        began = time.monotonic()
        seed = 0
        while (seeds is None or seed < seeds) and (minutes is None or time.monotonic() - began < minutes * 60):
            done = finished(run_folder(out, seed))
            result = run_one(seed_plan(plan, seed, out), kafka, out, execute)
            say(
                f"seed {seed}: {result['outcome']}, {result['violations']} violations"
                + (" (finished before)" if done else f", {result['seconds']:.0f} s")
            )
            write_tables(out)
            seed += 1
        if shrink_minutes:
            shrink_violations(out, kafka, shrink_minutes, tries, say, execute)
    runs, violations = write_tables(out)
    cells = aimable_cells(plan, step_names(kafka)(plan)) if plan.aimed else None
    write_text(out / "report.html", render(out, runs, violations, cells))
    return runs, violations


def seed_plan(plan: RealRunPlan, seed: int, out: Path) -> RealRunPlan:
    """Seed ``seed``'s plan; an aimed campaign's steered by the cells its runs of lower seeds struck."""
    return replace(plan, seed=seed, covered=struck_cells(out, seed) if plan.aimed else ())


def struck_cells(out: Path, before: int) -> tuple[str, ...]:
    """The cells ("kind@moment": a fault struck at a moment it was aimed at, the moment logged) the campaign's
    finished runs of seeds below ``before`` struck."""
    cells: set[str] = set()
    for seed in range(before):
        folder = run_folder(out, seed)
        if finished(folder):
            cells.update(_split(row(folder)["moments"]))
    return tuple(sorted(cells))


def _on_spark(
    plan: RealRunPlan,
    kafka: Installation,
    out: Path,
    seeds: int,
    master: str,
    shrink_minutes: float | None,
    tries: int,
    execute: Execute,
    say: Callable[[str], None],
) -> None:
    """The runs as Spark tasks, then each broken check's shrink as a task of its own: every task runs its
    clusters on its executor's host, so the shrinks run side by side, each within the whole budget."""
    from properties.campaign.spark import session

    spark = session(master, "kraftcheck kafka campaign")
    try:
        where = str(out.resolve())
        # an aimed campaign runs in waves as wide as the cluster, each steered by the runs before it
        wave = max(1, spark.sparkContext.defaultParallelism) if plan.aimed else seeds
        rows = []
        for first in range(0, seeds, wave):
            jobs = [(seed_plan(plan, s, out), kafka, where) for s in range(first, min(seeds, first + wave))]
            rows += (
                spark.sparkContext.parallelize(jobs, len(jobs))
                .map(lambda job: run_one(job[0], job[1], Path(job[2]), execute))
                .collect()
            )
        for r in rows:
            say(f"seed {r['seed']}: {r['outcome']}, {r['violations']} violations")
        targets = _shrink_targets(out) if shrink_minutes else []
        if shrink_minutes and targets:
            budget_s = shrink_minutes * 60
            tasks = [(invariant, str(folder.resolve())) for invariant, folder in targets]  # as the executors see it
            for line in (
                spark.sparkContext.parallelize(tasks, len(tasks))
                .map(lambda task: shrink_one(Path(task[1]), task[0], kafka, budget_s, tries, execute))
                .collect()
            ):
                say(line)
    finally:
        spark.stop()


# ---- report.html --------------------------------------------------------------------------------


def _plot(counts: Counter) -> str | None:
    if not counts:
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 0.4 * len(counts) + 1.2))
    names = sorted(counts, key=counts.get)
    ax.barh(names, [counts[n] for n in names], color="#c0392b")
    ax.set_xlabel("runs")
    ax.set_title("violations by invariant")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _excerpt(out: Path, folder: str, evidence: list[dict], around: int = 4) -> str:
    """The timeline's events around a violation's evidence, as rows."""
    from properties.kafka.run import load

    events = timeline(load(out / folder))
    marks = [i for i, e in enumerate(events) if any(e == x for x in evidence)]
    if not marks:
        return ""
    lo, hi = max(0, min(marks) - around), min(len(events), max(marks) + around + 1)
    rows = "".join(
        f"<tr class='{'hit' if i in marks else ''}'><td>{i}</td><td>{html.escape(describe(events[i]))}</td></tr>"
        for i in range(lo, hi)
    )
    return f"<table class='timeline'>{rows}</table>"


def _shrunk(folder: Path, invariant: str) -> str:
    """The run's plan next to its shrunk plan, when the check was shrunk on this run."""
    log = shrink_log(folder, invariant)
    if log is None:
        return ""
    rows = "".join(
        f"<tr><th>{name}</th><td>{html.escape(log[key]['text'])}</td></tr>"
        for name, key in (("original plan", "original"), ("shrunk plan", "shrunk"))
    )
    return (
        f"<table class='shrink'>{rows}</table><p>shrunk: {html.escape(summary(None, log=log))}; each candidate "
        f"judged by up to {log['tries']} real runs. Replay: <code>kraftcheck kafka run --plan "
        f"{html.escape(str(folder / SHRUNK_PLAN))}</code></p>"
    )


def _split(text: str) -> list[str]:
    return [part for part in text.split(", ") if part]


def fault_coverage(runs: list[dict]) -> str:
    """A table of the faults struck, by runbook step (rows, in the runbooks' order) and kind (columns): how many
    runs struck each; an empty cell is a fault no run struck at that step (a fault skipped, its moment never logged
    or its process not running, is not counted; tables made before "struck" was kept count the planned ones)."""
    steps = list(dict.fromkeys(step for r in runs for step in _split(r.get("steps", ""))))
    struck = Counter(tuple(f.split("@", 1)) for r in runs for f in _split(r.get("struck", r["faults"])))
    steps += [step for _, step in struck if step not in steps]
    kinds = [k for k in FAULT_KINDS["all"] if any(kind == k for kind, _ in struck)] or list(FAULT_KINDS["all"])
    head = "".join(f"<th>{html.escape(k)}</th>" for k in kinds)
    rows = "".join(
        f"<tr><td>{html.escape(step)}</td>"
        + "".join(f"<td class='{'' if struck[(k, step)] else 'empty'}'>{struck[(k, step)] or ''}</td>" for k in kinds)
        + "</tr>"
        for step in steps
    )
    return f"<table class='coverage'><tr><th>runbook step</th>{head}</tr>{rows}</table>"


def moment_coverage(runs: list[dict], cells: list[tuple[str, str]] | None = None) -> str:
    """A table of the aimed faults, by moment (rows) and kind (columns): in how many runs the moment was logged
    and the fault struck, of how many aimed at it. ``cells``: every (kind, moment) the campaign's draw may aim at
    (``aimable_cells``); each no run struck is marked empty, aimed at or not ("0/0"), and a cell no fault of that
    kind may strike is blank. Without them, the cells aimed at, those whose moment never came marked empty."""
    aimed = Counter(tuple(f.split("@", 1)) for r in runs for f in _split(r.get("aimed", "")))
    if not aimed:
        return "<p>No fault was aimed at a moment (<code>--aimed</code>).</p>"
    logged = Counter(tuple(f.split("@", 1)) for r in runs for f in _split(r.get("moments", "")))
    possible = set(cells or ()) | set(aimed)
    moments = list(dict.fromkeys([moment for _, moment in cells or ()] + [moment for _, moment in aimed]))
    kinds = [k for k in FAULT_KINDS["all"] if any(kind == k for kind, _ in possible)]
    head = "".join(f"<th>{html.escape(k)}</th>" for k in kinds)

    def cell(kind: str, moment: str) -> str:
        if (kind, moment) not in possible:
            return "<td class=''></td>"
        struck, tried = logged[(kind, moment)], aimed[(kind, moment)]
        return f"<td class='{'' if struck else 'empty'}'>{struck}/{tried}</td>"

    rows = "".join(
        f"<tr><td>{html.escape(moment)}</td>" + "".join(cell(k, moment) for k in kinds) + "</tr>" for moment in moments
    )
    empty = sum(1 for kind, moment in possible if not logged[(kind, moment)])
    return (
        f"<p>{len(possible) - empty} of {len(possible)} cells struck; {empty} empty.</p>"
        f"<table class='coverage'><tr><th>moment</th>{head}</tr>{rows}</table>"
    )


def witness_coverage(runs: list[dict]) -> str:
    """A table of the model's witnesses (sometimes-properties) by the runs whose explanation reached each; those no
    run reached are listed too."""
    reached = Counter(w for r in runs for w in _split(r.get("witnesses", "")))
    explained = sum(1 for r in runs if r.get("trace") in ("explained", "unexplained"))
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td>"
        f"<td class='{'' if reached[name] else 'empty'}'>{reached[name] or ''}</td></tr>"
        for name in sorted(SOMETIMES_NAMES, key=lambda n: (-reached[n], n))
    )
    return (
        f"<p>Read from trace validation's explaining path of each run ({explained} of {len(runs)} runs had one): a "
        "witness reached only by hidden steps is the model's guess of what the run did unseen.</p>"
        f"<table class='coverage'><tr><th>witness</th><th>runs</th></tr>{rows}</table>"
    )


def render(out: Path, runs: list[dict], violations: list[dict], cells: list[tuple[str, str]] | None = None) -> str:
    outcomes = Counter(r["outcome"].split(":")[0] for r in runs)
    traces = Counter(r.get("trace", "not checked") for r in runs)
    counts = Counter(v["invariant"] for v in {(v["seed"], v["invariant"]): v for v in violations}.values())
    plot = _plot(counts)
    table = "".join(
        f"<tr><td>{r['seed']}</td><td>{html.escape(r['runbook'])}</td><td>{html.escape(r['faults'])}</td>"
        f"<td>{html.escape(r['outcome'])}</td><td>{r['seconds']:.0f}</td><td>{r['violations']}</td>"
        f"<td>{html.escape(r['invariants'])}</td>"
        f"<td>{html.escape(r.get('trace', ''))} ({r.get('trace_explained', 0)}/{r.get('trace_total', 0)})</td></tr>"
        for r in runs
    )
    details = []
    for v in violations[:50]:
        evidence = next(
            (
                x["evidence"]
                for x in json.loads((out / v["folder"] / "violations.json").read_text())
                if x["message"] == v["message"]
            ),
            [],
        )
        details.append(
            f"<h3>seed {v['seed']}: {html.escape(v['invariant'])}</h3><p>{html.escape(v['message'])}</p>"
            f"<p>re-check: <code>kraftcheck kafka check {html.escape(str(out / v['folder']))}</code></p>"
            + _shrunk(out / v["folder"], v["invariant"])
            + _excerpt(out, v["folder"], evidence)
        )
    verdict = (
        "no violation"
        if not violations
        else f"{len(violations)} violations in {len({v['seed'] for v in violations})} runs"
    )
    image = f"<img alt='violations by invariant' src='data:image/png;base64,{plot}'>" if plot else ""
    tally = ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items()))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>kraftcheck: real Kafka campaign</title>
<style>body{{font-family:sans-serif;max-width:1300px;margin:1em auto;padding:0 1em}}
table{{border-collapse:collapse;width:100%}}
td,th{{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:left;overflow-wrap:anywhere}}
tr.hit{{background:#fde2e2}}code{{font-size:13px}}td.empty{{background:#f3f3f3}}
table.coverage{{width:auto}}</style></head><body>
<h1>Real Kafka campaign</h1>
<p><b>{html.escape(verdict)}</b>; {len(runs)} runs: {html.escape(tally)}.
Each seed fixes the schedule of steps and faults; Kafka's own timing varies from run to run,
and each run's folder keeps what it saw.</p>
<p>Trace validation (each visible change explained by a path of the model):
{html.escape(", ".join(f"{n} {k}" for k, n in sorted(traces.items())))}.</p>
{image}
<h2>Runs</h2><table><tr><th>seed</th><th>runbook</th><th>faults</th><th>outcome</th><th>s</th><th>violations</th>
<th>invariants</th><th>trace validation (explained/observed)</th></tr>{table}</table>
<h2>Violations</h2>{"".join(details) or "<p>none</p>"}
<h2>Coverage: faults by runbook step</h2>{fault_coverage(runs)}
<h2>Coverage: aimed faults by moment (logged and struck / aimed)</h2>{moment_coverage(runs, cells)}
<h2>Coverage: the model's witnesses</h2>{witness_coverage(runs)}
</body></html>
"""
