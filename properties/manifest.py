"""The explorer manifest: pinned reachability of every scope, so a change in it shows in review.

``properties/manifest.json`` records, for each named scope, the depth limit it is explored to
(null: completely) and what the exploration of the correct model found: distinct states,
generated steps, the depth reached and whether the search was complete. A test explores each
scope again and compares; when a change to the model or a scope moves a count on purpose,
``kraftcheck manifest --write`` pins the new figures, and the diff of the JSON file is where a
reviewer sees (and should ask) why reachability moved.
"""

from __future__ import annotations

import json
from pathlib import Path

from model import SCOPES
from properties.explore import ExploreResult, explore

MANIFEST = Path(__file__).resolve().parent / "manifest.json"

# How deep each scope is explored by the default test run (None: completely). Kept small enough
# for CI; `pytest -m slow` explores every scope to the depth its seeded bugs are searched at.
DEPTH_LIMITS: dict[str, int | None] = {
    "fencing": 7,
    "election": 9,
    "bounce": None,
    "leader-bounce": 12,
    "features": 8,
    "features-upgrade": 10,
    "features-downgrade": 10,
    "cluster": 3,
}


def entry(result: ExploreResult, depth_limit: int | None) -> dict:
    return {
        "depth_limit": depth_limit,
        "distinct_states": result.distinct_states,
        "generated": result.generated,
        "depth": result.depth,
        "complete": result.complete,
    }


def measure(name: str) -> tuple[ExploreResult, dict]:
    depth_limit = DEPTH_LIMITS[name]
    result = explore(name, max_depth=depth_limit)
    return result, entry(result, depth_limit)


def load(path: Path = MANIFEST) -> dict[str, dict]:
    return json.loads(path.read_text())


def write(entries: dict[str, dict], path: Path = MANIFEST) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def measure_all() -> dict[str, dict]:
    missing = set(SCOPES) - set(DEPTH_LIMITS)
    if missing:
        raise ValueError(f"scopes without a manifest depth limit: {sorted(missing)}")
    return {name: measure(name)[1] for name in SCOPES}
