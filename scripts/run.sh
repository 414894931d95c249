#!/usr/bin/env bash
# The main job, from a fresh machine: set up, then a short fuzzing campaign on Spark in local mode
# (seeded simulations of the implementation, every event checked against the model), which ends
# with a report. Arguments go to `kraftcheck campaign` (say --seeds 200, or --minutes 30).
# Run it again to continue an interrupted campaign (--resume: finished partitions are kept).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

out=campaign-out
master=()
if ! command -v java >/dev/null 2>&1; then
    echo "run.sh: java not found (Spark needs Java 17 or 21): running the campaign with --master processes" >&2
    master=(--master processes)
fi
# kraftcheck prints where the report is, the --out given among the arguments included.
exec .venv/bin/kraftcheck campaign --out "$out" --resume "${master[@]}" "$@"
