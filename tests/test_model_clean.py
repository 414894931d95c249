"""The correct model breaks no invariant in any scope, reaches what the manifest pins, and every
witness is reached somewhere.

The default run explores each scope to the depth limit in properties/manifest.py (``bounce``
completely) and compares the counts with properties/manifest.json; the ``slow`` marker explores
each scope to the depth its seeded bugs are searched at, so that no seeded bug is "caught" by a
violation the correct model has too.
"""

import pytest

from model import PROPERTIES, SCOPES, Kind
from properties import manifest
from properties.explore import explore
from properties.simulate import walk

_results = {}


def _explored(name):
    if name not in _results:
        _results[name] = manifest.measure(name)
    return _results[name]


@pytest.mark.parametrize("name", list(SCOPES))
def test_correct_model_breaks_nothing_in_scope(name):
    """Every step of the bounded search satisfies every always and transition property."""
    result, _ = _explored(name)
    assert result.violations == {}, {k: [repr(a) for a in t.actions] for k, t in result.violations.items()}
    assert result.distinct_states > 100


@pytest.mark.parametrize("name", list(SCOPES))
def test_reachability_matches_the_manifest(name):
    """A change in what a scope reaches must be pinned on purpose: `kraftcheck manifest --write`."""
    _, measured = _explored(name)
    assert measured == manifest.load()[name]


def test_bounce_scope_is_explored_completely():
    """The bounce scope is finite: budgets bound every perturbation, and healing always ends."""
    result, _ = _explored("bounce")
    assert result.complete


def test_every_witness_is_reached_in_some_scope():
    """Each sometimes-property happens, so the properties it guards are not vacuous."""
    reached = set()
    for name in SCOPES:
        reached |= set(_explored(name)[0].witnesses)
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
@pytest.mark.parametrize("name", [n for n in SCOPES if n != "cluster"])
def test_correct_model_is_clean_to_the_seeded_bug_depth(name):
    result = explore(name, max_depth=SCOPES[name].max_depth)
    assert result.violations == {}
