"""The explorer manifest: pinned reachability of every scope, so a change in it shows in review.

``properties/manifest.json`` records, for each named scope, the depth limit it is explored to
(null: completely) and what the exploration of the correct model found: distinct states,
generated steps, the depth reached, whether the search was complete, and the SOMETIMES
properties it witnessed (so that a test can tell every witness is reached somewhere without
exploring every scope again). A test explores each
scope again and compares; when a change to the model or a scope moves a count on purpose,
``kraftcheck manifest --write`` pins the new figures, and the diff of the JSON file is where a
reviewer sees (and should ask) why reachability moved.

Keys are scope names, explored under the default profile (``kip``); the scopes of model part 2
(those with KRaft controllers) are also pinned under ``kafka-3.9`` as ``<scope>@kafka-3.9``.

How this fits with the rest: docs/design.md §6.
"""

from __future__ import annotations

import json
from pathlib import Path

from model import SCOPES, Variant
from model.migration import Profile
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
    "kraft-quorum": 7,
    "kraft-born": None,
    "pre-migration": 6,
    "migration": 10,
    "dual-write": 10,
    "broker-migration": 6,
    "finalize": 10,
    "finalize-failover": 10,
    "rollback": 6,
    "handover": None,
    "lifecycle": 6,
    "kraft-broker-restart": None,
    "kraft-metadata-version": None,
    "dual-write-outage": 8,
    "broker-failover": 8,
    "controller-registration": 7,
    "lost-responses": None,
    "batched-migration": 14,
    "stale-reads": None,
    "create-partitions": None,
    "reassignment": None,
    "reassignment-move": None,
    "event-queue": None,
    "dual-write-failure": None,
    "dual-write-resend": None,
    "zk-lag": 10,  # complete at depth 25, 223,648 states: tests/test_zk_lag.py, under the slow marker
    "purgatory": None,
    "delete-topics": None,
    "deletion-while-fenced": None,
    "heartbeat-commit": None,
    "heartbeat-transaction": None,
    "aborted-unfencing": None,
    "failed-leader-and-isr": None,
    "held-heartbeats": None,
}


SYMMETRIC = "+symmetry"  # a key's suffix: explored with symmetry reduction of interchangeable controllers


def keys() -> list[str]:
    """Every manifest entry: each scope; each KRaft scope under the kafka-3.9 profile too; and each
    scope with interchangeable controllers explored with symmetry reduction as well."""
    out = list(SCOPES)
    out += [f"{name}@{Profile.KAFKA_3_9.value}" for name, scope in SCOPES.items() if scope.controllers]
    out += [f"{name}{SYMMETRIC}" for name in SYMMETRY_PINNED]
    return out


# Scopes also pinned under symmetry reduction: those that start symmetric. (A warm start makes
# 3000 the leader, and every state reached from it keeps that history, so there it removes nothing.)
SYMMETRY_PINNED = ("kraft-quorum",)


def split(key: str) -> tuple[str, Profile]:
    """A manifest key's scope and profile."""
    name, _, profile = key.removesuffix(SYMMETRIC).partition("@")
    return name, Profile(profile) if profile else Profile.KIP


def entry(result: ExploreResult, depth_limit: int | None) -> dict:
    return {
        "depth_limit": depth_limit,
        "distinct_states": result.distinct_states,
        "generated": result.generated,
        "depth": result.depth,
        "complete": result.complete,
        "witnesses": sorted(result.witnesses),
    }


def measure(key: str) -> tuple[ExploreResult, dict]:
    name, profile = split(key)
    depth_limit = DEPTH_LIMITS[name]
    result = explore(name, Variant(profile=profile), max_depth=depth_limit, symmetry=key.endswith(SYMMETRIC))
    return result, entry(result, depth_limit)


def load(path: Path = MANIFEST) -> dict[str, dict]:
    return json.loads(path.read_text())


def write(entries: dict[str, dict], path: Path = MANIFEST) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def measure_all(progress=None) -> dict[str, dict]:
    """Every key's entry; ``progress(index, count, key)`` is called before each is explored."""
    missing = set(SCOPES) - set(DEPTH_LIMITS)
    if missing:
        raise ValueError(f"scopes without a manifest depth limit: {sorted(missing)}")
    out = {}
    for index, key in enumerate(keys()):
        if progress is not None:
            progress(index, len(keys()), key)
        out[key] = measure(key)[1]
    return out
