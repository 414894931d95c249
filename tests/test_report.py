"""The campaign report (``properties.campaign.report``, ``kraftcheck report``) on small synthetic campaigns.

Each test writes the consolidated tables a campaign leaves in its directory (the schemas of the
campaign spec, issue 6), with pyarrow, and reads back the page ``write_report`` made.
"""

from __future__ import annotations

import base64
import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from properties.campaign.report import REPORT, write_report
from properties.cli import main

RUNS = pa.schema([
    ("partition", pa.int32()), ("seed", pa.int64()), ("scope", pa.string()), ("faults", pa.string()),
    ("mutant", pa.string()), ("runbook", pa.string()), ("engine", pa.string()), ("steps", pa.int64()),
    ("duration_s", pa.float64()), ("finished_s", pa.float64()), ("outcome", pa.string()),
    ("invariant", pa.string()), ("progress", pa.string()), ("findings", pa.list_(pa.string())),
    ("coverage_signature", pa.string()), ("new_coverage", pa.int32()),
])
VIOLATIONS = pa.schema([
    ("partition", pa.int32()), ("seed", pa.int64()), ("scope", pa.string()), ("mutant", pa.string()),
    ("invariant", pa.string()), ("signature", pa.string()), ("step", pa.int64()), ("summary", pa.string()),
    ("trace_file", pa.string()), ("shrunk_steps", pa.int32()), ("original_steps", pa.int64()),
])
COVERAGE = pa.schema([
    ("partition", pa.int32()), ("seed", pa.int64()), ("kind", pa.string()), ("key", pa.string()),
    ("count", pa.int64()),
])
PNG_HEADER = b"\x89PNG\r\n\x1a\n"


def run_row(seed: int, *, steps: int = 2000, violation: str | None = None, findings=()) -> dict:
    return {
        "partition": seed // 4, "seed": seed, "scope": "sim-migration", "faults": "all", "mutant": None,
        "runbook": "rollback" if seed % 4 == 3 else "finalize", "engine": "sim", "steps": steps,
        "duration_s": 1.0, "finished_s": 1.0 + seed * 0.5, "outcome": "violation" if violation else "clean",
        "invariant": violation, "progress": "finalized" if seed % 4 != 3 else "dual-write",
        "findings": list(findings), "coverage_signature": f"{seed:08x}", "new_coverage": 3 if seed < 4 else 0,
    }


def coverage_rows(seed: int) -> list[dict]:
    keys = [("action", "BecomeLeader"), ("action", f"Deliver{seed % 3}"), ("state", f"migration=M{seed % 5}"),
            ("driver_transition", "INACTIVE->WAIT_FOR_CONTROLLER_QUORUM")]
    return [{"partition": seed // 4, "seed": seed, "kind": k, "key": key, "count": 1 + seed} for k, key in keys]


def write_campaign(directory, runs, violations, coverage, summary: dict | None = None):
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows, schema in (("runs", runs, RUNS), ("violations", violations, VIOLATIONS),
                               ("coverage", coverage, COVERAGE)):
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), directory / f"{name}.parquet")
    if summary is not None:
        (directory / "summary.json").write_text(json.dumps(summary))
    return directory


def figure(page: str, name: str) -> str:
    """The value of one row of the page's summary table."""
    found = re.search(rf"<tr><th>{re.escape(name)}</th><td class=\"n\">([^<]*)</td></tr>", page)
    assert found, f"no figure {name!r} on the page"
    return found.group(1)


def images(page: str) -> list[bytes]:
    return [base64.b64decode(data) for data in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]


def assert_self_contained(page: str) -> None:
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page.lower() and "<link" not in page.lower() and "@import" not in page
    for source in re.findall(r'src="([^"]*)"', page):
        assert source.startswith("data:image/png;base64,"), source


@pytest.fixture
def clean_campaign(tmp_path):
    seeds = range(8)
    return write_campaign(
        tmp_path / "clean",
        [run_row(s, findings=["ZkBrokersSeeStaleMetadata"] if s == 2 else ()) for s in seeds],
        [],
        [row for s in seeds for row in coverage_rows(s)],
        {"options": {"seeds": 8, "scope": "sim-migration", "faults": "all", "master": "local[2]"},
         "wall_seconds": 8.0},
    )


def test_report_clean_campaign_says_so_with_its_figures_and_plots(clean_campaign):
    """A campaign where every run agreed with the model: the page says clean and shows what ran."""
    path = write_report(clean_campaign)
    assert path == clean_campaign / REPORT
    page = path.read_text(encoding="utf-8")
    assert "Clean: in all 8 runs (16,000 steps)" in page
    assert figure(page, "seeds") == "8"
    assert figure(page, "runs") == "8"
    assert figure(page, "steps (events run)") == "16,000"
    assert figure(page, "wall time (s): the runs, consolidating and shrinking; not Spark&#x27;s start") == "8"
    assert figure(page, "runs&#x27; time (s): the first partition&#x27;s start to the last run&#x27;s end, "
                        "the plots&#x27; time axis") == "4.5"
    assert figure(page, "steps/s (over the wall time)") == "2,000"
    assert figure(page, "violations") == "0"
    assert figure(page, "distinct signatures") == "0"
    assert figure(page, "documented findings (runs showing one)") == "1"
    assert figure(page, "distinct coverage keys: state") == "5"
    assert figure(page, "distinct coverage keys: action") == "4"
    assert "local[2]" in page and "ZkBrokersSeeStaleMetadata" in page
    # coverage, throughput, progress; no violations plot
    pngs = images(page)
    assert len(pngs) == 3 and all(p.startswith(PNG_HEADER) for p in pngs)
    assert "No violations." in page and "None: no run broke an invariant" in page
    assert_self_contained(page)


def test_report_lists_each_counterexample_signature_once_escaped(tmp_path):
    """Two seeds break the same rule (one signature), a third disagrees: two counterexamples, data escaped."""
    hostile = "Disagreement:state:<script>alert('x')</script>&"
    violations = [
        {"partition": 0, "seed": 1, "scope": "sim-migration", "mutant": "impl_vote_ignores_log",
         "invariant": "CommittedRecordsNeverChange", "signature": "CommittedRecordsNeverChange", "step": 812,
         "summary": "record 3 changed: <b>bold</b>", "trace_file": "counterexamples/CommittedRecordsNeverChange.json",
         "shrunk_steps": 9, "original_steps": 812},
        {"partition": 1, "seed": 5, "scope": "sim-migration", "mutant": "impl_vote_ignores_log",
         "invariant": "CommittedRecordsNeverChange", "signature": "CommittedRecordsNeverChange", "step": 400,
         "summary": "record 1 changed", "trace_file": "counterexamples/CommittedRecordsNeverChange.json",
         "shrunk_steps": 9, "original_steps": 400},
        {"partition": 1, "seed": 6, "scope": "sim-migration", "mutant": "impl_vote_ignores_log",
         "invariant": "Disagreement", "signature": hostile, "step": 77, "summary": "zk.nodes differ",
         "trace_file": None, "shrunk_steps": None, "original_steps": 77},
    ]
    runs = [run_row(s, violation={1: "CommittedRecordsNeverChange", 5: "CommittedRecordsNeverChange",
                                  6: "Disagreement"}.get(s)) for s in range(8)]
    directory = write_campaign(tmp_path / "bad", runs, violations, [r for s in range(8) for r in coverage_rows(s)],
                               {"options": {"mutant": "<i>impl_vote_ignores_log</i>"}})
    page = write_report(directory).read_text(encoding="utf-8")
    assert "3 violations in 3 of 8 runs, 2 distinct signatures" in page
    assert figure(page, "distinct signatures") == "2"
    table = page[page.index('<table id="counterexamples">'):]
    assert table.count("<tr><td>") == 2
    row = re.search(r"<tr><td>CommittedRecordsNeverChange</td>.*?</tr>", table).group(0)
    assert '<td class="n">2</td>' in row  # two seeds hit it
    assert '<td class="n">1</td>' in row  # the first of them
    assert "9 / 812" in row
    assert 'href="counterexamples/CommittedRecordsNeverChange.json"' in row
    # data is escaped, never markup
    assert "<script>" not in page and "<b>bold</b>" not in page and "<i>impl" not in page
    assert "Disagreement:state:&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&amp;" in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "&lt;i&gt;impl_vote_ignores_log&lt;/i&gt;" in page
    pngs = images(page)
    assert len(pngs) == 4 and all(p.startswith(PNG_HEADER) for p in pngs)
    assert_self_contained(page)


def test_report_draws_the_sequence_diagram_of_a_readable_trace(tmp_path):
    """A counterexample whose trace file is there: its sequence diagram is drawn on the page as inline SVG (no
    script, nothing fetched), each step in it, the violation as a red row; the Mermaid source is folded below."""
    from model.actions import StopBroker
    from properties import traces

    directory = tmp_path / "traced"
    trace_file = "counterexamples/ControllerSeesEveryBounce.json"
    (directory / "counterexamples").mkdir(parents=True)
    traces.save_trace(directory / trace_file,
                      traces.Trace(scope="bounce", bugs=frozenset(), violation="ControllerSeesEveryBounce",
                                   actions=(StopBroker(1),)))
    violation = {"partition": 0, "seed": 0, "scope": "bounce", "mutant": None,
                 "invariant": "ControllerSeesEveryBounce", "signature": "ControllerSeesEveryBounce", "step": 1,
                 "summary": "s", "trace_file": trace_file, "shrunk_steps": 1, "original_steps": 1}
    write_campaign(directory, [run_row(0, violation="ControllerSeesEveryBounce")], [violation], coverage_rows(0))
    page = write_report(directory).read_text(encoding="utf-8")
    diagram = re.search(r'<pre class="mermaid-text">(.*?)</pre>', page, re.S)
    assert diagram and "sequenceDiagram" in diagram.group(1)
    svg = re.search(r'<div class="diagram">(<svg .*?</svg>)', page, re.S)
    assert svg, "no drawn diagram"
    assert "<text" in svg.group(1) and ">broker 1<" in svg.group(1) and ">1. clean stop<" in svg.group(1)
    assert "VIOLATION: breaks ControllerSeesEveryBounce" in svg.group(1)
    assert_self_contained(page)


def test_report_shows_whether_each_rollback_finished(tmp_path):
    """How far the migration got has a rolled-back level: a rollback run whose runbook finished counts there, one
    that stopped short stays at the level it reached."""
    from properties.campaign.report import run_levels

    runs = [run_row(s) for s in range(8)]  # seeds 3 and 7 run the rollback runbook, both at dual-write
    runs[3]["rolled_back"] = True
    schema = RUNS.append(pa.field("rolled_back", pa.bool_()))
    directory = tmp_path / "rollback"
    directory.mkdir()
    pq.write_table(pa.Table.from_pylist(runs, schema=schema), directory / "runs.parquet")
    pq.write_table(pa.Table.from_pylist([], schema=VIOLATIONS), directory / "violations.parquet")
    pq.write_table(pa.Table.from_pylist([], schema=COVERAGE), directory / "coverage.parquet")
    write_report(directory)
    levels = run_levels(pq.read_table(directory / "runs.parquet").to_pandas())
    assert list(levels[[3, 7]]) == ["rolled-back", "dual-write"]
    assert levels.value_counts()["finalized"] == 6


def test_report_of_a_campaign_without_runs_says_it_checked_nothing(tmp_path):
    """Zero runs (a campaign stopped before its first partition): empty tables, no error, no plot."""
    directory = write_campaign(tmp_path / "empty", [], [], [])  # and no summary.json
    page = write_report(directory).read_text(encoding="utf-8")
    assert "No runs: this campaign recorded no run" in page
    assert figure(page, "runs") == "0" and figure(page, "steps/s (over the wall time)") == "–"
    assert images(page) == []
    assert_self_contained(page)


def test_report_replaces_the_page_whole_and_leaves_no_temporary_file(clean_campaign):
    """Regenerating writes a new page over the old one through a temporary file, which is gone after."""
    (clean_campaign / REPORT).write_text("stale")
    write_report(clean_campaign)
    assert (clean_campaign / REPORT).read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in clean_campaign.iterdir()) == [
        "coverage.parquet", REPORT, "runs.parquet", "summary.json", "violations.parquet"]


def test_cli_report_regenerates_the_page(clean_campaign, capsys):
    assert main(["report", str(clean_campaign)]) == 0
    assert (clean_campaign / REPORT).is_file()
    assert str(clean_campaign / REPORT) in capsys.readouterr().out


@pytest.mark.parametrize("setup", ["missing_dir", "no_tables", "no_violations_table", "not_parquet"])
def test_cli_report_of_a_directory_without_the_tables_is_a_usage_error(tmp_path, capsys, setup):
    """`kraftcheck report DIR` on a directory that holds no campaign: one line, exit 2, nothing written."""
    directory = tmp_path / "dir"
    if setup != "missing_dir":
        directory.mkdir()
    if setup == "no_violations_table":
        write_campaign(directory, [run_row(0)], [], coverage_rows(0))
        (directory / "violations.parquet").unlink()
    if setup == "not_parquet":
        write_campaign(directory, [run_row(0)], [], coverage_rows(0))
        (directory / "runs.parquet").write_text("not parquet")
    assert main(["report", str(directory)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kraftcheck report: error: ") and err.count("\n") == 1
    assert not (directory / REPORT).exists()
