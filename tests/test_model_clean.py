"""The correct model breaks no invariant in any scope, reaches what the manifest pins, and every
witness is reached somewhere.

The default run explores each scope to the depth limit in properties/manifest.py and compares the counts with
properties/manifest.json, but for the heaviest pins (``DEFAULT_RUN_STEPS``), which it searches to their first few
thousand states only and compares under the slow marker; the ``slow`` marker also explores
each scope to the depth its seeded bugs are searched at, so that no seeded bug is "caught" by a
violation the correct model has too.

Each scope is explored once per test run, whichever xdist worker its tests land on: the first to need it explores
it under a lock and leaves the result in the run's shared temporary folder, where the other reads it (``explored``,
``tests.run_once``); and the witness test reads the witnesses the manifest pins (which the pin test compares with
the exploration) instead of exploring every scope again.
"""

import json

import pytest

from model import PROPERTIES, SCOPES, Kind, Variant
from model.scopes import profile_findings
from properties import manifest
from properties.explore import explore
from properties.simulate import walk

# The pins that check more than this many steps (sixteen keys, about nine of the default run's workers' minutes on
# the machine that measured it: the heaviest six, then stale-reads, event-queue and heartbeat-transaction@kafka-3.9 at
# 15-21 s each, then features-upgrade, features-downgrade, zk-lag, election and held-heartbeats@kafka-3.9 at 18-25 s)
# are compared under the slow marker; the others, most of the manifest, in every run. Each of them is still searched
# in every run to its first ``SHALLOW_STATES`` states (``test_correct_model_breaks_nothing_near_the_start``).
DEFAULT_RUN_STEPS = 45_000
SHALLOW_STATES = 3_000


def _keys():
    """Every manifest key, the heaviest under the slow marker (``DEFAULT_RUN_STEPS``)."""
    pins = manifest.load()
    return [pytest.param(key, marks=pytest.mark.slow) if pins[key]["generated"] > DEFAULT_RUN_STEPS else key
            for key in manifest.keys()]


def _findings(key):
    name, profile = manifest.split(key)
    return SCOPES[name].expected_findings(profile)


def _required(key):
    """The findings the scope itself documents: a profile's own (``profile_findings``) show only in the scopes that
    reach their situation, so they are allowed everywhere and required nowhere."""
    name, profile = manifest.split(key)
    return _findings(key) - profile_findings(profile)


@pytest.mark.parametrize("key", _keys())
def test_correct_model_breaks_nothing_in_scope(key, explored):
    """Every step of the bounded search satisfies every always and transition property, except the
    findings the scope documents (flaws of a seed's text under that profile), one of which at least
    must be found (the slow run below finds them all)."""
    result, _ = explored(key)
    found = {k: [repr(a) for a in t.actions] for k, t in result.violations.items()}
    expected, required = _findings(key), _required(key)
    assert set(found) <= expected, found
    assert not required or found, f"none of the documented findings {sorted(required)} was found"
    assert result.distinct_states > 100


@pytest.mark.parametrize("key", [k for k, pin in manifest.load().items() if pin["generated"] > DEFAULT_RUN_STEPS])
def test_correct_model_breaks_nothing_near_the_start(key):
    """The scopes whose pins are compared under the slow marker, searched breadth first to their first
    ``SHALLOW_STATES`` states in every run: the correct model breaks nothing there but the documented findings."""
    name, profile = manifest.split(key)
    result = explore(name, Variant(profile=profile), max_states=SHALLOW_STATES, symmetry=key.endswith(
        manifest.SYMMETRIC))
    assert result.distinct_states >= SHALLOW_STATES
    assert set(result.violations) <= _findings(key), {k: [repr(a) for a in t.actions]
                                                      for k, t in result.violations.items()}


@pytest.mark.parametrize("key", _keys())
def test_reachability_matches_the_manifest(key, explored):
    """A change in what a scope reaches (its counts, and which witnesses it reaches) must be pinned on purpose:
    `kraftcheck manifest --write`."""
    _, measured = explored(key)
    assert measured == manifest.load()[key]


@pytest.mark.slow  # its exploration is one of the heaviest pins (``DEFAULT_RUN_STEPS``)
def test_bounce_scope_is_explored_completely(explored):
    """The bounce scope is finite: budgets bound every perturbation, and healing always ends."""
    result, _ = explored("bounce")
    assert result.complete


def test_every_witness_is_reached_in_some_scope():
    """Each sometimes-property happens, so the properties it guards are not vacuous. The witnesses are the
    manifest's, which test_reachability_matches_the_manifest holds to what each scope's exploration reaches."""
    pins = manifest.load()
    assert set(pins) == set(manifest.keys())
    reached = {name for key in manifest.keys() for name in pins[key]["witnesses"]}
    assert {p.name for p in PROPERTIES if p.kind is Kind.SOMETIMES} - reached == set()


@pytest.mark.parametrize("seed", range(5))
def test_random_walks_in_the_cluster_scope_break_nothing(seed):
    """Long seeded walks reach deeper than the search; they must stay clean too."""
    result = walk("cluster", seed, 400)
    assert result.violation is None, [repr(a) for a in result.trace]
    assert result.steps > 20


def test_random_walk_replays_from_its_seed():
    assert walk("cluster", 7, 200).trace == walk("cluster", 7, 200).trace


@pytest.mark.slow
@pytest.mark.parametrize("key", [k for k in manifest.keys() if not k.startswith("cluster")])
def test_correct_model_is_clean_to_the_seeded_bug_depth(key):
    name, profile = manifest.split(key)
    result = explore(name, Variant(profile=profile), max_depth=SCOPES[name].max_depth)
    assert _required(key) <= set(result.violations) <= _findings(key)


def _complete_pins() -> dict[str, dict]:
    from properties.site import COMPLETION

    if not COMPLETION.exists():
        return {}
    return {key: row for key, row in json.loads(COMPLETION.read_text()).items() if row["complete"]}


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(_complete_pins()))
def test_complete_exploration_matches_its_pin(key):
    """A scope pinned as explored to completion (``python -m bench.complete_scopes --write``) still completes
    with the same counts, on the parallel engine as it was pinned."""
    row = _complete_pins()[key]
    name, profile = manifest.split(key)
    result = explore(name, Variant(profile=profile), workers=2)
    assert result.complete
    assert (result.distinct_states, result.generated, result.depth) == (
        row["distinct_states"], row["generated"], row["depth"])
