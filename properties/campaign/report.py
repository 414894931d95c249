"""The campaign report: one self-contained HTML page made from a campaign directory's tables.

``write_report(DIR)`` reads ``DIR/runs.parquet``, ``DIR/violations.parquet``,
``DIR/coverage.parquet`` (the consolidated tables of ``properties.campaign``) and
``DIR/summary.json``, and writes ``DIR/report.html``: the summary figures and the campaign's
options; four plots (distinct coverage keys found over time, by kind; violations by invariant;
throughput over time; how far each run's migration got, by runbook); the documented findings;
and one row per counterexample signature with a link to its shrunk trace file, then each
trace's sequence diagram drawn as inline SVG (``properties.mermaid.svg``), its Mermaid source
folded beneath it for pasting into a Mermaid viewer.
``kraftcheck report DIR`` regenerates the page from the tables.

Rules:
- Reads only DIR; writes only ``DIR/report.html``, through a temporary file in DIR and
  ``os.replace``, so a reader sees the old page or the whole new one.
- Self-contained: plots are PNGs drawn by matplotlib's Agg canvas (no pyplot, no GUI backend)
  and inlined as ``data:`` URIs; sequence diagrams are inline SVG, drawn without Mermaid; the
  style sheet is inline; no script, font or other file is
  referenced, so the page can be mailed or archived alone. Links to trace files are relative
  to DIR, where the page lives.
- Everything that comes from the tables, the summary or a trace file goes through
  ``html.escape`` (links are also URL-quoted): a signature or a summary line is data, not markup.
- The figures come from the tables (the summary adds the wall time and the options), so a page
  regenerated from the same tables says the same thing.
- Empty tables are a result, not an error: a campaign without violations says plainly that it
  is clean, one without runs says it checked nothing, and a plot without data is left out with
  a line saying why. A DIR without the tables is a ``ReportError`` (one line).
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from impl.sim.simulator import PROGRESS
from properties import traces
from properties.files import write_text

REPORT = "report.html"
ROLLED_BACK = "rolled-back"  # properties.campaign.driver.ROLLED_BACK (not imported: the report reads only tables)
SUMMARY = "summary.json"

# The columns the report reads, by table (the campaign spec's schemas); a missing column reads as empty.
COLUMNS = {
    "runs": ("partition", "seed", "scope", "faults", "mutant", "runbook", "engine", "steps", "duration_s",
             "finished_s", "outcome", "invariant", "progress", "findings", "coverage_signature", "new_coverage",
             "rolled_back"),
    "violations": ("partition", "seed", "scope", "mutant", "invariant", "signature", "step", "summary",
                   "trace_file", "shrunk_steps", "original_steps"),
    "coverage": ("partition", "seed", "kind", "key", "count"),
}
COVERAGE_KINDS = ("action", "driver_transition", "state", "decision", "fault_at", "progress")
THROUGHPUT_BINS = 40


class ReportError(ValueError):
    """A campaign directory the report cannot be made from (one line)."""


def write_report(out_dir: str | os.PathLike) -> Path:
    """Write ``out_dir/report.html`` from the campaign's tables; return its path."""
    directory = Path(out_dir)
    tables = {name: _read_table(directory, name) for name in COLUMNS}
    summary = _read_summary(directory)
    page = render(directory, tables["runs"], tables["violations"], tables["coverage"], summary)
    target = directory / REPORT
    write_text(target, page)
    return target


def _read_table(directory: Path, name: str) -> pd.DataFrame:
    path = directory / f"{name}.parquet"
    if not directory.is_dir():
        raise ReportError(f"{directory}: no such campaign directory")
    if not path.is_file():
        if (directory / "_parts").is_dir():  # partitions written, the tables not yet: the campaign did not finish
            raise ReportError(f"{directory}: no campaign tables yet ({path.name} is missing): the campaign did not "
                              "finish; `kraftcheck campaign --resume` with its options finishes it")
        raise ReportError(f"{directory}: no campaign tables ({path.name} is missing; run `kraftcheck campaign` first)")
    try:
        frame = pq.read_table(path).to_pandas()
    except (OSError, pa.ArrowException) as err:
        raise ReportError(f"{path}: not a readable Parquet table ({str(err).splitlines()[0]})") from None
    for column in COLUMNS[name]:
        if column not in frame.columns:
            frame[column] = pd.Series([None] * len(frame), dtype=object)
    return frame


def _read_summary(directory: Path) -> dict:
    path = directory / SUMMARY
    if not path.is_file():
        return {}  # the tables hold every figure but the wall time and the options
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ReportError(f"{path}: not a readable summary ({err})") from None
    if not isinstance(summary, dict):
        raise ReportError(f"{path}: not a readable summary (expected a JSON object)")
    return summary


# ---- figures ----------------------------------------------------------------------------------

def figures(runs: pd.DataFrame, violations: pd.DataFrame, coverage: pd.DataFrame, summary: dict) -> dict:
    """The summary figures, from the tables; the wall time from the summary when it has one."""
    steps = int(runs["steps"].fillna(0).sum()) if len(runs) else 0
    wall = _first_number(summary, "wall_seconds", "wall_s", "seconds")
    if wall is None:
        wall = float(runs["finished_s"].max()) if len(runs) and runs["finished_s"].notna().any() else 0.0
    findings = _finding_counts(runs)
    span = float(runs["finished_s"].max()) if len(runs) and runs["finished_s"].notna().any() else None
    return {
        "seeds": int(runs["seed"].nunique()),
        "runs": len(runs),
        "steps": steps,
        "wall_seconds": round(wall, 1),
        "runs_span_seconds": None if span is None else round(span, 1),
        "steps_per_second": round(steps / wall) if wall > 0 else None,
        "runs_per_second": round(len(runs) / wall, 2) if wall > 0 else None,
        "violations": len(violations),
        "violating_runs": int((runs["outcome"] == "violation").sum()) if len(runs) else 0,
        "distinct_signatures": int(violations["signature"].nunique()),
        "findings": sum(findings.values()),
        "coverage_keys": {kind: int(group["key"].nunique()) for kind, group in coverage.groupby("kind")},
    }


def _first_number(summary: dict, *keys: str) -> float | None:
    for key in keys:
        value = summary.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _finding_counts(runs: pd.DataFrame) -> Counter:
    """Runs that showed each documented finding (``Scope.findings``: known, not violations)."""
    counts: Counter = Counter()
    for found in runs["findings"]:
        if found is not None:
            counts.update(set(found))
    return counts


def counterexamples(violations: pd.DataFrame) -> list[dict]:
    """One row per signature: what broke, how many seeds hit it, and its shrunk trace."""
    rows = []
    for signature, group in violations.groupby("signature", sort=True):
        group = group.sort_values("seed")
        rows.append({
            "signature": str(signature),
            "invariant": _first(group["invariant"]),
            "seeds": int(group["seed"].nunique()),
            "first_seed": _first(group["seed"]),
            "summary": _first(group["summary"]),
            "original_steps": _first(group["original_steps"]),
            "shrunk_steps": _first(group["shrunk_steps"]),
            "trace_file": _first(group["trace_file"]),
        })
    return rows


def _first(column: pd.Series):
    present = column.dropna()
    if present.empty:
        return None
    value = present.iloc[0]
    return value.item() if isinstance(value, np.generic) else value


# ---- plots ------------------------------------------------------------------------------------

def _png(fig: Figure) -> str:
    """The figure as a base64 PNG (Agg), for a data: URI."""
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _over_time(fig: Figure, ax, ylabel: str, title: str) -> str:
    """The finish of a plot against the campaign's clock: labels, legend, grid, as a PNG."""
    ax.set_xlabel("seconds since the first partition started (a run counts when it ends)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    return _png(fig)


def _label(text) -> str:
    return str(text).replace("$", r"\$")  # a data label is text, never mathtext


def plot_coverage(runs: pd.DataFrame, coverage: pd.DataFrame) -> str | None:
    """Cumulative distinct coverage keys of each kind over the campaign's time (when a run first reached them)."""
    reached = coverage[["partition", "seed", "kind", "key"]].merge(
        runs[["partition", "seed", "finished_s"]], on=["partition", "seed"], how="inner"
    ).dropna(subset=["finished_s"])
    if reached.empty:
        return None
    first_seen = reached.groupby(["kind", "key"])["finished_s"].min().reset_index()
    fig = Figure(figsize=(7, 3.6))
    ax = fig.subplots()
    kinds = [k for k in COVERAGE_KINDS if k in set(first_seen["kind"])]
    kinds += sorted(set(first_seen["kind"]) - set(kinds))
    for kind in kinds:
        times = np.sort(first_seen.loc[first_seen["kind"] == kind, "finished_s"].to_numpy(dtype=float))
        ax.step(np.concatenate(([0.0], times)), np.arange(len(times) + 1), where="post",
                label=f"{_label(kind)} ({len(times)})")
    return _over_time(fig, ax, "distinct keys reached", "Coverage over time")


def plot_violations(violations: pd.DataFrame) -> str | None:
    if violations.empty:
        return None
    counts = violations["invariant"].fillna("?").astype(str).value_counts().sort_values()
    fig = Figure(figsize=(7, 0.9 + 0.35 * len(counts)))
    ax = fig.subplots()
    ax.barh([_label(name) for name in counts.index], counts.to_numpy(), color="#c0392b")
    ax.set_xlabel("violations")
    ax.set_title("Violations by invariant")
    ax.xaxis.get_major_locator().set_params(integer=True)
    return _png(fig)


def plot_throughput(runs: pd.DataFrame) -> str | None:
    """Steps per second over time: each run's steps spread evenly over the time it ran."""
    timed = runs.dropna(subset=["finished_s"])
    if timed.empty:
        return None
    end = timed["finished_s"].to_numpy(dtype=float)
    steps = timed["steps"].fillna(0).to_numpy(dtype=float)
    duration = np.clip(timed["duration_s"].fillna(0).to_numpy(dtype=float), 0.0, None)
    start = np.clip(end - duration, 0.0, None)
    horizon = max(float(end.max()), 1e-6)
    edges = np.linspace(0.0, horizon, THROUGHPUT_BINS + 1)
    width = edges[1] - edges[0]
    # the part of each run (rows) inside each bin (columns); an instantaneous run falls in its end's bin
    overlap = np.clip(np.minimum(end[:, None], edges[None, 1:]) - np.maximum(start[:, None], edges[None, :-1]),
                      0.0, None)
    spread = np.where(duration[:, None] > 0, overlap / np.where(duration > 0, duration, 1.0)[:, None], 0.0)
    instant = np.minimum(np.searchsorted(edges, end, side="right") - 1, THROUGHPUT_BINS - 1)
    spread[(duration <= 0), instant[duration <= 0]] = 1.0
    rate = (spread * steps[:, None]).sum(axis=0) / width
    order = np.argsort(end)
    fig = Figure(figsize=(7, 3.4))
    ax = fig.subplots()
    ax.stairs(rate, edges, fill=True, alpha=0.4, label="steps/s in each interval")
    with np.errstate(divide="ignore", invalid="ignore"):
        average = np.cumsum(steps[order]) / end[order]
    ax.plot(end[order][end[order] > 0], average[end[order] > 0], color="black", lw=1, label="average since start")
    return _over_time(fig, ax, "steps per second", "Throughput")


def run_levels(runs: pd.DataFrame) -> pd.Series:
    """Each run's level: its PROGRESS level, or ``rolled-back`` when its rollback runbook finished (a rollback
    run that stopped short stays at the level it reached, so the two can be told apart)."""
    rolled_back = runs["rolled_back"].astype("boolean").fillna(False).astype(bool)  # None (older tables): not known
    return runs["progress"].fillna("?").astype(str).where(~rolled_back, ROLLED_BACK)


def plot_progress(runs: pd.DataFrame) -> str | None:
    """How far each run's migration got (``Simulation``'s PROGRESS levels, then rolled-back), one bar per runbook."""
    if runs.empty:
        return None
    table = pd.crosstab(run_levels(runs), runs["runbook"].fillna("?").astype(str))
    known = [*PROGRESS, ROLLED_BACK]
    levels = known + sorted(set(table.index) - set(known))  # every level, reached or not
    table = table.reindex(levels, fill_value=0)
    fig = Figure(figsize=(7, 3.6))
    ax = fig.subplots()
    x = np.arange(len(levels))
    width = 0.8 / max(len(table.columns), 1)
    for i, runbook in enumerate(table.columns):
        ax.bar(x + (i - (len(table.columns) - 1) / 2) * width, table[runbook].to_numpy(), width,
               label=_label(runbook))
    ax.set_xticks(x, [_label(level) for level in levels], rotation=20, ha="right")
    ax.set_ylabel("runs")
    ax.set_title("How far the migration got, by runbook")
    ax.legend(title="runbook")
    ax.yaxis.get_major_locator().set_params(integer=True)
    return _png(fig)


# ---- the page ---------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; padding: 0 1em; max-width: 72em; color: #222;
       line-height: 1.4; }
tr.unreached td, td.unreached { background: #fff4d6; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { font-size: 1.15em; padding: 0.6em 0.9em; border-radius: 4px; }
.clean { background: #e8f6ec; border: 1px solid #7bc38f; }
.violations { background: #fdecea; border: 1px solid #e08a80; }
.empty { background: #f3f3f3; border: 1px solid #bbb; }
img { max-width: 100%; display: block; margin: 0.5em 0; }
pre { background: #f6f8fa; padding: 0.6em; overflow-x: auto; font-size: 0.85em; }
h3 { font-size: 1em; margin: 1.4em 0 0.2em; overflow-wrap: anywhere; }
.wide, .diagram { max-width: 100%; overflow-x: auto; }
.diagram svg { max-width: 100%; height: auto; }  /* a diagram wider than the page shrinks to fit, whole */
#counterexamples { width: 100%; table-layout: fixed; }
#counterexamples td { overflow-wrap: anywhere; }
#counterexamples th:nth-child(1) { width: 22%; } #counterexamples th:nth-child(2) { width: 38%; }
#counterexamples th:nth-child(3), #counterexamples th:nth-child(4) { width: 7%; }
#counterexamples th:nth-child(5) { width: 10%; } #counterexamples th:nth-child(6) { width: 16%; }
.note { color: #666; }
"""


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _number(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.1f}" if value % 1 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else _e(value)


def _image(png: str | None, alt: str, missing: str) -> str:
    if png is None:
        return f'<p class="note">{_e(missing)}</p>'
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{png}">'


def _verdict(fig: dict) -> str:
    if fig["runs"] == 0:
        return '<p class="verdict empty">No runs: this campaign recorded no run, so it checked nothing.</p>'
    if fig["violations"] == 0:
        return (f'<p class="verdict clean">Clean: in all {fig["runs"]:,} runs ({fig["steps"]:,} steps) the '
                "implementation agreed with the model and no invariant broke.</p>")
    return (f'<p class="verdict violations">{fig["violations"]:,} violations in {fig["violating_runs"]:,} of '
            f'{fig["runs"]:,} runs, {fig["distinct_signatures"]:,} distinct signatures: see the counterexamples '
            "below.</p>")


def _summary_table(fig: dict) -> str:
    rows = [
        ("seeds", fig["seeds"]), ("runs", fig["runs"]), ("steps (events run)", fig["steps"]),
        ("wall time (s): the runs, consolidating and shrinking; not Spark's start", fig["wall_seconds"]),
        ("runs' time (s): the first partition's start to the last run's end, the plots' time axis",
         fig["runs_span_seconds"]),
        ("steps/s (over the wall time)", fig["steps_per_second"]),
        ("runs/s (over the wall time)", fig["runs_per_second"]), ("violations", fig["violations"]),
        ("distinct signatures", fig["distinct_signatures"]),
        ("documented findings (runs showing one)", fig["findings"]),
    ]
    rows += [(f"distinct coverage keys: {kind}", n) for kind, n in sorted(fig["coverage_keys"].items())]
    body = "".join(f'<tr><th>{_e(name)}</th><td class="n">{_number(value)}</td></tr>' for name, value in rows)
    return f'<table id="figures">{body}</table>'


def _options_table(summary: dict) -> str:
    options = summary.get("options")
    if not isinstance(options, dict) or not options:
        return '<p class="note">The summary records no options.</p>'
    options = dict(options)
    if "master" in summary:  # where it ran: not an option of the plan (it does not change the results)
        options["master"] = summary["master"]

    def text(value) -> str:
        return "–" if value is None else json.dumps(value) if isinstance(value, (dict, list)) else str(value)

    body = "".join(f"<tr><th>{_e(key)}</th><td>{_e(text(value))}</td></tr>" for key, value in sorted(options.items()))
    return f'<table id="options">{body}</table>'


def _findings_table(runs: pd.DataFrame) -> str:
    counts = _finding_counts(runs)
    if not counts:
        return '<p class="note">No run showed a documented finding.</p>'
    body = "".join(f'<tr><td>{_e(name)}</td><td class="n">{n:,}</td></tr>' for name, n in sorted(counts.items()))
    return ('<p class="note">Known behaviours of the design the scope documents (<code>Scope.findings</code>): '
            f"counted, not violations.</p><table><tr><th>finding</th><th>runs</th></tr>{body}</table>")


def _diagrams(directory: Path, trace_file: str | None, ident: str) -> tuple[str, str] | None:
    """The trace's sequence diagram as (inline SVG, Mermaid source), when its file is inside DIR and loads."""
    if not trace_file:
        return None
    path = (directory / trace_file).resolve()
    if not path.is_relative_to(directory.resolve()) or not path.is_file():
        return None
    from properties import mermaid  # the renderer also behind `kraftcheck replay`

    try:
        trace = traces.load_trace(path)
        return mermaid.sequence_svg(trace, ident), mermaid.sequence_diagram(trace)
    except (traces.TraceError, ValueError):  # ValueError: a scope this kraftcheck does not know
        return None


def _counterexamples(directory: Path, violations: pd.DataFrame) -> str:
    rows = counterexamples(violations)
    if not rows:
        return '<p class="note">None: no run broke an invariant or disagreed with the model.</p>'
    head = ("<tr><th>invariant</th><th>signature</th><th>seeds</th><th>first seed</th><th>steps (shrunk / run)</th>"
            "<th>trace</th></tr>")
    body, diagrams = [], []
    for number, row in enumerate(rows, 1):
        trace = row["trace_file"]
        link = f'<a href="{_e(quote(str(trace)))}">{_e(trace)}</a>' if trace else '<span class="note">none</span>'
        steps = f"{_number(row['shrunk_steps'])} / {_number(row['original_steps'])}"
        body.append(f"<tr><td>{_e(row['invariant'])}</td><td><code>{_e(row['signature'])}</code><br>"
                    f'<span class="note">{_e(row["summary"])}</span></td><td class="n">{_number(row["seeds"])}</td>'
                    f'<td class="n">{_number(row["first_seed"])}</td><td class="n">{steps}</td><td>{link}</td></tr>')
        drawn = _diagrams(directory, trace, f"cx{number}")
        if drawn is not None:
            picture, source = drawn
            diagrams.append(f'<h3 id="diagram-{number}"><code>{_e(row["signature"])}</code></h3>'
                            f'<p class="note">{_e(trace)}: {_number(row["shrunk_steps"])} steps</p>'
                            f'<div class="diagram">{picture}</div>'
                            "<details><summary>Mermaid source (paste into any Mermaid viewer)</summary>"
                            f'<pre class="mermaid-text">{_e(source)}</pre></details>')
    page = f"<div class=\"wide\"><table id=\"counterexamples\">{head}{''.join(body)}</table></div>"
    if diagrams:
        page += ("<p class=\"note\">Each shrunk trace as a sequence diagram: who did what to whom, step by step, "
                 "and the step that broke; <code>kraftcheck replay FILE</code> replays it.</p>" + "".join(diagrams))
    return page


def _faults_grid(coverage: pd.DataFrame, runs: pd.DataFrame | None = None) -> str:
    """Runs that injected each kind of fault in each state of the migration driver; an empty cell is
    a fault no run aimed at that step of the migration. A steered campaign's aims are counted below it."""
    from properties.runs import GRID_FAULTS, GRID_STATES

    taken = coverage[coverage["kind"] == "fault_at"] if len(coverage) else coverage
    struck = taken.groupby("key").size().to_dict() if len(taken) else {}
    aimed = runs["aims"] if runs is not None and "aims" in runs else ()
    aims: Counter = Counter(a for cell in aimed if cell is not None for a in cell)
    head = "<tr><th>driver state</th>" + "".join(f"<th>{_e(f)}</th>" for f in GRID_FAULTS) + "</tr>"
    empty = 0
    body = []
    for state in GRID_STATES:
        cells = []
        for fault in GRID_FAULTS:
            n = int(struck.get(f"{state}|{fault}", 0))
            empty += n == 0
            cells.append(f'<td class="n">{n:,}</td>' if n else '<td class="n unreached">0</td>')
        body.append(f"<tr><th>{_e(state)}</th>{''.join(cells)}</tr>")
    note = (f'<p class="note">Runs that struck with each fault in each state of the active controller\'s migration '
            f"driver; {empty} of {len(GRID_STATES) * len(GRID_FAULTS)} cells are empty (marked): faults no run aimed "
            "at that step.</p>")
    if aims:
        hit = sum(1 for cell in aims if struck.get(cell))
        note += (f'<p class="note">Steered: {sum(aims.values()):,} faults aimed at {len(aims)} cells the earlier '
                 f"waves had left empty, in {sum(1 for a in aimed if a is not None and len(a))} runs; "
                 f"{hit} of those cells were struck (a run aims a fault at a state it may never reach).</p>")
    return note + f'<div class="wide"><table id="faults-by-driver-state">{head}{"".join(body)}</table></div>'


def _progress_table(runs: pd.DataFrame, violations: pd.DataFrame, coverage: pd.DataFrame) -> str:
    """Each progress goal (an EVENTUALLY property) with its bound: the runs whose quiet continuation met it, and
    the runs that stalled on it."""
    from properties.progress import goal_of, progress_goals

    met = coverage[coverage["kind"] == "progress"] if len(coverage) else coverage
    met_runs = met.groupby("key")["seed"].nunique().to_dict() if len(met) else {}
    signatures = violations["signature"] if len(violations) else []
    stalled = Counter(goal_of(s) for s in signatures if goal_of(s))
    quiet = int(runs["fault_steps"].notna().sum()) if "fault_steps" in runs else 0
    head = "<tr><th>goal</th><th>bound</th><th>what it says</th><th>met after the faults (runs)</th>" \
           "<th>stalled (runs)</th></tr>"
    rows = []
    for g in progress_goals():
        n, bad = int(met_runs.get(g.name, 0)), stalled.get(g.name, 0)
        rows.append(f"<tr><td>{_e(g.name)}</td><td class=\"n\">{g.bound_ms / 1000:g} s</td><td>{_e(g.prop.meaning)}"
                    f"</td><td class=\"n{'' if n else ' unreached'}\">{n:,}</td>"
                    f"<td class=\"n\">{bad:,}</td></tr>")
    note = (f'<p class="note">{quiet:,} runs reached the end of their fault window; each went on without faults, and '
            "every goal open once the faults were healed had to be met within its bound (simulated time). A goal "
            "no run met after its faults (marked) was not exercised there.</p>")
    return note + f'<div class="wide"><table id="progress-goals">{head}{"".join(rows)}</table></div>'


def _decisions_table(coverage: pd.DataFrame) -> str:
    """Every named decision of the implementation by outcome, with the runs that reached it; an
    outcome no run reached is marked, so a rule no run exercised is visible."""
    from impl.decisions import registered

    outcomes = registered()
    taken = coverage[coverage["kind"] == "decision"] if len(coverage) else coverage
    runs_by_key = taken.groupby("key").size().to_dict() if len(taken) else {}
    calls_by_key = taken.groupby("key")["count"].sum().to_dict() if len(taken) else {}
    rows, unreached = [], 0
    for name in sorted(outcomes):
        seen = [key.split("=", 1)[1] for key in runs_by_key if key.split("=", 1)[0] == name]
        for outcome in [*outcomes[name], *sorted(set(seen) - set(outcomes[name]))]:
            key = f"{name}={outcome}"
            runs, calls = int(runs_by_key.get(key, 0)), int(calls_by_key.get(key, 0))
            unreached += runs == 0
            mark = ' class="unreached"' if runs == 0 else ""
            rows.append(f"<tr{mark}><td><code>{_e(name)}</code></td><td>{_e(outcome)}</td>"
                        f'<td class="n">{runs:,}</td><td class="n">{calls:,}</td></tr>')
    note = (f'<p class="note">{unreached} outcomes of the implementation\'s decisions no run reached (marked): '
            "rules these runs never exercised.</p>" if unreached else
            '<p class="note">Every outcome of every decision was reached.</p>')
    return (note + '<div class="wide"><table id="decisions"><tr><th>decision</th><th>outcome</th><th>runs</th>'
            f"<th>times</th></tr>{''.join(rows)}</table></div>")


def render(directory: Path, runs: pd.DataFrame, violations: pd.DataFrame, coverage: pd.DataFrame,
           summary: dict) -> str:
    """The whole page, as a string."""
    fig = figures(runs, violations, coverage, summary)
    title = f"kraftcheck campaign: {directory.resolve().name}"
    sections = [
        f"<h1>{_e(title)}</h1>",
        _verdict(fig),
        "<h2>Summary</h2>", _summary_table(fig),
        "<h2>Options</h2>", _options_table(summary),
        "<h2>Coverage over time</h2>",
        _image(plot_coverage(runs, coverage), "coverage over time", "No coverage recorded."),
        "<h2>Violations by invariant</h2>",
        _image(plot_violations(violations), "violations by invariant", "No violations."),
        "<h2>Throughput</h2>",
        _image(plot_throughput(runs), "throughput over time", "No runs."),
        "<h2>How far the migration got</h2>",
        _image(plot_progress(runs), "migration progress by runbook", "No runs."),
        "<h2>Documented findings</h2>", _findings_table(runs),
        "<h2>Progress after the faults</h2>", _progress_table(runs, violations, coverage),
        "<h2>Faults by step of the migration</h2>", _faults_grid(coverage, runs),
        "<h2>The implementation's decisions</h2>", _decisions_table(coverage),
        "<h2>Counterexamples</h2>", _counterexamples(directory, violations),
    ]
    body = "\n".join(sections)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{_e(title)}</title>\n'
            f"<style>{_STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")
