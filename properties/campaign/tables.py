"""A campaign's files: the Parquet tables, each partition's parts, the plan and the summary.

Rules:
- Files are written whole or not at all: each to a temporary name starting with "." in its
  directory, then ``os.replace``. Readers only read ``part-NNNNN.parquet``. A partition's
  ``_parts/runs`` file is written after its violations and coverage parts and is its commit
  mark: ``--resume`` skips exactly the partitions that have one.
- ``new_coverage`` is computed when the tables are consolidated (``consolidate``), so it is the
  same however the partitions were scheduled.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from properties.files import replace_atomically, write_text

PLAN_FILE = "campaign.json"
SUMMARY_FILE = "summary.json"
PARTS = "_parts"
COUNTEREXAMPLES = "counterexamples"
TABLES = ("runs", "violations", "coverage")


# ---- tables ----------------------------------------------------------------------------------

def schemas():
    import pyarrow as pa

    return {
        "runs": pa.schema([
            ("partition", pa.int32()), ("seed", pa.int64()), ("scope", pa.string()), ("config", pa.string()),
            ("faults", pa.string()), ("mutant", pa.string()), ("runbook", pa.string()), ("engine", pa.string()),
            ("steps", pa.int64()),
            ("duration_s", pa.float64()), ("finished_s", pa.float64()), ("outcome", pa.string()),
            ("invariant", pa.string()), ("progress", pa.string()), ("findings", pa.list_(pa.string())),
            ("coverage_signature", pa.string()), ("new_coverage", pa.int32()), ("rolled_back", pa.bool_()),
            ("aims", pa.list_(pa.string())), ("fault_steps", pa.int64()),
        ]),
        "violations": pa.schema([
            ("partition", pa.int32()), ("seed", pa.int64()), ("scope", pa.string()), ("mutant", pa.string()),
            ("invariant", pa.string()), ("signature", pa.string()), ("step", pa.int64()), ("summary", pa.string()),
            ("trace_file", pa.string()), ("shrunk_steps", pa.int32()), ("original_steps", pa.int64()),
        ]),
        "coverage": pa.schema([
            ("partition", pa.int32()), ("seed", pa.int64()), ("kind", pa.string()), ("key", pa.string()),
            ("count", pa.int64()),
        ]),
    }


def write_table(path: Path, name: str, rows: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = schemas()[name]
    table = pa.Table.from_pylist([{f: row.get(f) for f in schema.names} for row in rows], schema=schema)
    replace_atomically(path, lambda temp: pq.write_table(table, temp))


def write_json(path: Path, data: dict) -> None:
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def read_rows(path: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


_PART = re.compile(r"part-(\d{5,})\.parquet")


def part_path(out: Path, table: str, partition: int) -> Path:
    return out / PARTS / table / f"part-{partition:05d}.parquet"


def finished_partitions(out: Path) -> list[int]:
    """The partitions whose runs part (the commit mark) exists; temporary files never count."""
    directory = out / PARTS / "runs"
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for name in os.listdir(directory) if (m := _PART.fullmatch(name)))


def write_partition(out: Path, partition: int, rows: dict, started: float) -> None:
    now = time.time() - started  # ``started``: the time axis's origin, earlier invocations' time included
    for row in rows["runs"]:
        finished = row.get("finished_s")
        row["finished_s"] = now if finished is None else min(max(finished, 0.0), now)
    # the runs part last: it marks the partition done
    for name in ("violations", "coverage", "runs"):
        write_table(part_path(out, name, partition), name, rows.get(name, []))


def consolidate(out: Path, partitions: list[int]) -> dict[str, list[dict]]:
    """Every finished partition's rows, in seed order, with each run's ``new_coverage``."""
    tables: dict[str, list[dict]] = {}
    for name in TABLES:
        rows = [row for p in partitions for row in read_rows(part_path(out, name, p))]
        if name == "coverage":
            rows.sort(key=lambda r: (r["seed"], r["kind"], r["key"]))
        else:
            rows.sort(key=lambda r: r["seed"])
        tables[name] = rows
    keys_of: dict[int, set] = {}
    for row in tables["coverage"]:
        keys_of.setdefault(row["seed"], set()).add((row["kind"], row["key"]))
    seen: set = set()
    for run in tables["runs"]:
        keys = keys_of.get(run["seed"], set())
        run["new_coverage"] = len(keys - seen)
        seen |= keys
    return tables
