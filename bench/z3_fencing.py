"""Benchmark: the z3 proofs of epoch fencing against their time targets.

    python -m bench.z3_fencing [--json] [--repeats N] [--depth D]

Measured (medians of ``--repeats`` runs, correct model, 2 brokers):
- BMC to depth ``--depth`` (20) of every encoded property, per scope ("fencing", "election"),
  with its ratio to the target of 60 s (ratio < 1 meets it);
- every induction obligation, for 2 brokers and for any number of brokers, with the largest
  ratio to the target of 10 s per obligation.
The targets are the issue's; the tests do not time anything, this does. ``bench.z3_migration``
measures the migration's fencing core (properties.proofs.migration) with the same code.
"""

from __future__ import annotations

import argparse
import json
import statistics

from model import CORRECT
from properties.proofs.engine import Core
from properties.proofs.fencing import FENCING

BMC_TARGET_SECONDS = 60.0
OBLIGATION_TARGET_SECONDS = 10.0


def measure(repeats: int, depth: int, core: Core = FENCING) -> dict:
    """``core``: the z3 core measured; the BMC runs in every one of its scopes."""
    bmc_runs = {scope: [core.bmc_in_scope(depth, CORRECT, scope=scope) for _ in range(repeats)]
                for scope in core.scopes}
    for runs in bmc_runs.values():
        # a scope's pinned finding (the migration core's stale-reads) is the design's, reported, not a violation
        results = {row["result"] for r in runs for row in r.rows()}
        assert results <= {"holds", "finding"}, f"BMC found a violation in the correct model: {results}"
    bmc_rows = {}
    for scope, runs in bmc_runs.items():
        seconds = statistics.median(r.seconds for r in runs)
        bmc_rows[scope] = {
            "seconds": round(seconds, 3),
            "ratio_to_target": round(seconds / BMC_TARGET_SECONDS, 3),
            "per_property_seconds": {
                p.name: round(statistics.median(r.properties[i].seconds for r in runs), 3)
                for i, p in enumerate(runs[0].properties)
            },
        }

    obligations: dict[tuple[str, str], list[float]] = {}
    verdicts: dict[tuple[str, str], str] = {}
    for _ in range(repeats):
        for r in core.prove_finite(CORRECT) + core.prove_unbounded(CORRECT):
            r = core.as_finding(r, CORRECT)
            obligations.setdefault((r.brokers, r.name), []).append(r.seconds)
            verdicts[(r.brokers, r.name)] = r.result
    rows = [
        {"name": name, "brokers": brokers, "result": verdicts[(brokers, name)], "seconds": statistics.median(times)}
        for (brokers, name), times in obligations.items()
    ]
    # against the target: the obligations decided; a known finding's time is its timeout and the search after it
    slowest = max((r for r in rows if r["result"] != "finding"), key=lambda r: r["seconds"])
    return {
        "repeats": repeats,
        "bmc_depth": depth,
        "bmc_target_seconds": BMC_TARGET_SECONDS,
        "bmc": bmc_rows,
        "bmc_max_ratio_to_target": max(r["ratio_to_target"] for r in bmc_rows.values()),
        "obligation_target_seconds": OBLIGATION_TARGET_SECONDS,
        "obligations": [{**r, "seconds": round(r["seconds"], 4)} for r in rows],
        "obligations_proved": sum(r["result"] == "proved" for r in rows),
        "obligations_findings": sum(r["result"] == "finding" for r in rows),
        "obligations_total": len(rows),
        "obligation_max_seconds": round(slowest["seconds"], 4),
        "obligation_slowest": f"{slowest['name']} ({slowest['brokers']})",
        "obligation_max_ratio_to_target": round(slowest["seconds"] / OBLIGATION_TARGET_SECONDS, 5),
    }


def main(core: Core = FENCING, description: str = __doc__) -> None:
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.repeats, args.depth, core)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{core.name} core, correct model, 2 {core.noun}s, medians of {args.repeats} runs")
    for scope, row in result["bmc"].items():
        print(
            f"BMC {scope:9s} depth {args.depth}: {row['seconds']:6.2f} s"
            f"  (target {BMC_TARGET_SECONDS:.0f} s: ratio {row['ratio_to_target']:.2f})"
        )
        for name, seconds in row["per_property_seconds"].items():
            print(f"    {name:40s} {seconds:6.2f} s")
    print(
        f"induction: {result['obligations_proved']}/{result['obligations_total']} obligations proved"
        f" ({result['obligations_findings']} known findings of the design);"
        f" slowest {result['obligation_slowest']} {result['obligation_max_seconds'] * 1000:.1f} ms"
        f"  (target {OBLIGATION_TARGET_SECONDS:.0f} s: max ratio {result['obligation_max_ratio_to_target']:.4f})"
    )
    for r in result["obligations"]:
        print(f"    {r['brokers']:22s} {r['name']:62s} {r['result']:10s} {r['seconds'] * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
