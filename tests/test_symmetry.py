"""Symmetry reduction of interchangeable KRaft controllers (model/symmetry.py, explore --symmetry).

Renaming controllers that share a configuration maps reachable states to reachable states with
the same verdicts, so the reduced search must find the same violations and witnesses as the
full one, in fewer states, with counterexamples that are real action sequences.
"""

import os
import subprocess
import sys

import pytest

from model import SCOPES, Variant, initial_state, step
from model.bugs import Bug
from model.invariants import violations
from model.symmetry import canonical, interchangeable_groups, rename_controllers
from model.types import Ibp
from properties import manifest
from properties.explore import explore
from properties.simulate import random_path


def test_symmetry_reduced_search_finds_the_same_verdicts_in_fewer_states(explored):
    """kraft-quorum: three voters with one configuration (KIP-500 §Controller Quorum). The searches are the
    manifest's (to depth 7, with and without symmetry), explored once in the run for tests/test_model_clean.py."""
    (full, pin), (reduced, reduced_pin) = explored("kraft-quorum"), explored("kraft-quorum" + manifest.SYMMETRIC)
    assert pin["depth_limit"] == reduced_pin["depth_limit"] == 7
    assert reduced.distinct_states * 4 < full.distinct_states
    assert set(reduced.violations) == set(full.violations) == set()
    assert set(reduced.witnesses) == set(full.witnesses)


@pytest.mark.parametrize("seed", range(3))
def test_renamed_states_have_one_representative_and_the_same_verdicts(seed):
    """Along a random path, every renaming of a state has the same canonical form and breaks what it breaks."""
    scope = SCOPES["kraft-quorum"]
    for state, choices, chosen in random_path(scope, seed, 40):
        if chosen < 0:
            break
        action, after = choices[chosen]
        for mapping in ((1, 0, 2), (2, 1, 0), (1, 2, 0)):
            renamed = rename_controllers(state, mapping)
            assert canonical(renamed) == canonical(state)
            assert violations(None, None, renamed) == violations(None, None, state)
        assert canonical(after) == canonical(rename_controllers(after, (2, 0, 1)))


def test_symmetry_reduced_search_returns_a_counterexample_that_replays():
    """A seeded bug (a voter votes twice in an epoch) is still caught, by a real action sequence."""
    variant = Variant(frozenset({Bug.VOTE_TWICE_IN_EPOCH}))
    found = explore("kraft-quorum", variant, max_depth=8, stop_at="AtMostOneKRaftLeaderPerEpoch", symmetry=True)
    trace = found.violations["AtMostOneKRaftLeaderPerEpoch"].actions
    state = initial_state(SCOPES["kraft-quorum"])
    for action in trace:
        after = step(state, action, variant)
        assert after is not None
        broken, state = violations(state, action, after), after
    assert "AtMostOneKRaftLeaderPerEpoch" in broken


def test_symmetry_pinned_scopes_have_interchangeable_controllers():
    for name in manifest.SYMMETRY_PINNED:
        assert interchangeable_groups(initial_state(SCOPES[name]))


def test_symmetry_reduced_counts_do_not_depend_on_the_hash_seed():
    """The representative is chosen by an order that does not follow set iteration order."""
    code = (
        "from properties.explore import explore;"
        "print(explore('kraft-quorum', max_depth=6, symmetry=True).distinct_states)"
    )
    counts = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        counts.add(out.stdout.strip())
    assert len(counts) == 1


def test_renaming_controllers_renames_their_registrations():
    """Under kafka-3.9 from metadata.version 3.7-IV0 a controller's id is in its RegisterControllerRecord
    too (reference §1.4): renaming the controllers renames the registrations, so a state and its renaming
    have the same readiness."""
    from model.actions import Fetch, RegisterController
    from model.kraft import ControllerId, image_of
    from model.migration import Profile
    from model.scopes import at_metadata_version

    variant = Variant(profile=Profile.KAFKA_3_9)
    state = initial_state(at_metadata_version(SCOPES["pre-migration"], Ibp.IBP_3_7_IV0))
    leader, other = ControllerId(3000), ControllerId(3001)
    for action in (RegisterController(other, leader), Fetch(other, leader)):
        nxt = step(state, action, variant)
        assert nxt is not None
        state = nxt
    renamed = rename_controllers(state, (1, 0))
    registered = [r.controller for r in image_of(renamed.controllers[0].log).controllers]
    assert registered == [3000]
    assert canonical(renamed) == canonical(state)
