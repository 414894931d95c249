"""Differential testing itself: it agrees on the correct implementation and fires on a buggy one.

The per-scope walks live with the nodes (tests/test_impl_zk.py, tests/test_impl_kraft.py); here:
the Hypothesis machine over a part-1 and a part-2 scope, the three ways a Disagreement is
raised, and the seeded-bug score of the implementation layer.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from impl.bugs import IMPL_SEEDED_BUGS, ImplBug
from model.actions import Deliver, ElectController, OpenSession
from model.scopes import SCOPES
from properties.differential import Differential, Disagreement, differential_machine, walk

QUICK = settings(max_examples=15, stateful_step_count=25, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("scope", ["fencing", "dual-write"])
def test_differential_machine_agrees_on_the_correct_implementation(scope):
    """The Hypothesis machine drives impl and model with the same steps; they agree after each one."""
    run_state_machine_as_test(differential_machine(SCOPES[scope]), settings=QUICK)


def test_differential_machine_finds_a_seeded_implementation_bug():
    """A broker that applies requests addressed to its previous generation: the machine must find it."""
    machine = differential_machine(SCOPES["bounce"], frozenset({ImplBug.ACCEPT_OLDER_BROKER_EPOCH}))
    with pytest.raises(Disagreement):
        run_state_machine_as_test(machine, settings=settings(QUICK, max_examples=200))


def test_differential_reports_each_kind_of_disagreement(monkeypatch):
    """A step the model forbids, a step the implementation refuses, and a state that differs are each reported."""
    diff = Differential(SCOPES["fencing"])
    monkeypatch.setattr(diff.cluster, "perform", lambda action: [ElectController(1)])  # /controller exists
    with pytest.raises(Disagreement, match="does not allow"):
        diff.apply(ElectController(1))

    diff = Differential(SCOPES["fencing"])
    message = sorted(diff.model.network, key=repr)[0]
    monkeypatch.setattr(diff.cluster, "perform", lambda action: [])
    with pytest.raises(Disagreement, match="refused Deliver"):
        diff.apply(Deliver(message))

    diff = Differential(SCOPES["fencing"])
    diff.cluster.network.clear()  # the implementation loses its messages behind the model's back
    with pytest.raises(Disagreement, match="not the model's") as raised:
        diff.apply(ElectController(1))
    assert "network: only in model" in str(raised.value)


def test_differential_agrees_on_refusals():
    """Both sides refuse the same step: a stutter, not a disagreement."""
    diff = Differential(SCOPES["fencing"])
    before = diff.model
    assert diff.apply(ElectController(1)) == []
    assert diff.apply(OpenSession(0)) == []
    assert diff.model == before


def test_walks_are_seeded():
    """The same seed walks the same steps (the differential check replays a failure exactly)."""
    a = walk(SCOPES["bounce"], 7, 30).steps
    b = walk(SCOPES["bounce"], 7, 30).steps
    assert a == b and len(a) > 10


def test_every_implementation_bug_is_registered_and_named_in_a_node():
    """Each ImplBug has a registry entry with a known property and scope, a model scope or the simulator's own
    scenario (kraftcheck mutants lists them): its own, or the shared one of a mistake the model makes too."""
    from impl.bugs import SHARED_SEEDED_BUGS
    from impl.sim.scenarios import SCENARIOS
    from model.invariants import BY_NAME

    registered = {b.bug for b in IMPL_SEEDED_BUGS} | {b.bug for b in SHARED_SEEDED_BUGS}
    assert registered == set(ImplBug), f"bugs without an entry: {sorted(b.name for b in set(ImplBug) - registered)}"
    assert len(IMPL_SEEDED_BUGS) >= 12
    for b in IMPL_SEEDED_BUGS:
        assert b.invariant in BY_NAME and (b.scope in SCOPES or b.scope in SCENARIOS), b


# One bug per way the differential check catches one (a walk, a swarm walk, a scripted situation, a campaign run, a
# progress goal), each caught in well under a second: the default run's sample; the slow run takes every bug (about
# 35 s alone on the machine that measured it, over 80 s of a loaded test worker's time).
CATCH_KINDS = ("impl_broker_epoch_from_session_id", "impl_controller_write_without_epoch_check",
               "impl_heartbeat_accepts_older_broker_epoch", "impl_complete_before_last_batch",
               "impl_reelected_controller_ignores_broker_change")


@pytest.mark.parametrize("names", [
    pytest.param(CATCH_KINDS, id="one-per-catch-kind"),
    pytest.param(tuple(b.name for b in IMPL_SEEDED_BUGS), id="every-bug", marks=pytest.mark.slow),
])
def test_mutants_catches_every_implementation_bug(capsys, names):
    """`kraftcheck mutants --check differential --json`: every impl bug asked for caught, layer "impl", exit 0."""
    from properties.cli import main

    code = main(["mutants", "--check", "differential", "--json", *[f"--bug={name}" for name in names]])
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} == set(names)
    assert all(r["layer"] == "impl" for r in rows)
    escaped = [r["name"] for r in rows if r["caught_by"] is None]
    assert escaped == [] and code == 0
    if names == CATCH_KINDS:
        assert {_catch_kind(r["caught_by"]) for r in rows} == {"walk", "swarm", "script", "campaign", "progress"}


def _catch_kind(caught_by: str) -> str:
    """"differential:bounce walk 0 (...)" -> "walk"; "differential:script older-epoch-heartbeat" -> "script"."""
    where, how, *_ = caught_by.removeprefix("differential:").split()
    return where if where in ("script", "campaign", "progress") else how
