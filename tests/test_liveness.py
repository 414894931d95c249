"""Liveness: leads-to properties under weak fairness, checked on the explored graph.

The engine is tested on hand-made graphs labelled with real model actions (so that the one
fairness rule, "not a perturbation", decides), then on the model: the registered properties
hold where the search is complete, an unreachable goal and a seeded bug give lassos that replay
through ``model.step``, and a bounded search never claims "holds".
"""

import json

import pytest

from model import SCOPES, Kind, Variant, initial_state, step
from model.actions import (
    CrashBroker,
    Deliver,
    ObserveControllerEpoch,
    OpenSession,
    RegisterBroker,
    ResignController,
    RestartBroker,
    StopBroker,
    ZkOutage,
    ZkRecover,
)
from model.bugs import CORRECT, Bug
from model.invariants import BY_NAME, PROPERTIES, Property, violations, witnessed
from model.migration import Profile
from model.state import CONTROLLER_EPOCH, Budget, znode_data
from properties import traces
from properties.explore import explore
from properties.liveness import (
    HOLDS,
    INCONCLUSIVE,
    VIOLATED,
    Lasso,
    as_json,
    check_eventually,
    check_liveness,
    eventually_properties,
    explore_graph,
    is_fair,
    make_graph,
    render_lasso,
    replay_lasso,
)

REGISTERED = ("EveryLiveBrokerEventuallyRegistered", "ControllerEventuallySeesEveryBroker")

# Small scopes derived from `bounce` (2 brokers, 1 partition, warm): a broker may be stopped once.
RESTART = SCOPES["bounce"].replace(name="test-restart", budget=Budget(restarts=1, max_in_flight=8), settled=False)
SETTLED_RESTART = RESTART.replace(name="test-settled-restart", settled=True)

# Hand-made graphs: the fairness rule only looks at the action's type.
LOOP_A, LOOP_B = ObserveControllerEpoch(0), ResignController(0)  # fair
FAIR_ESCAPE, UNFAIR_ESCAPE = RegisterBroker(0), CrashBroker(0)
assert is_fair(FAIR_ESCAPE) and is_fair(LOOP_A) and is_fair(LOOP_B) and not is_fair(UNFAIR_ESCAPE)


def prop(goal, when=None, name="Toy"):
    return Property(name, Kind.EVENTUALLY, "a test property", "none", "tests", goal, when)


def reach_goal(state):
    return state == "goal"


def toy_walk(g, lasso):
    """Follow the lasso's actions over the hand-made graph; the states of prefix and loop."""
    by_label = {(src, action): dst for src, dst, action in g.edges}
    here, prefix = 0, [0]
    for action in lasso.prefix:
        here = by_label[(here, action)]
        prefix.append(here)
    loop = [here]
    for action in lasso.loop:
        here = by_label[(here, action)]
        loop.append(here)
    return prefix, loop


def assert_fair_toy_loop(g, lasso):
    """The loop closes, and every fair action enabled all around it is taken in it."""
    _, loop = toy_walk(g, lasso)
    assert loop[0] == loop[-1]
    always = frozenset.intersection(*(frozenset(a for a in g.enabled[s] if is_fair(a)) for s in loop))
    assert always <= set(lasso.loop)


# ---- the engine on hand-made graphs ----------------------------------------------------------------


def two_state_loop(escape, escape_from=(0, 1)):
    """start <-> other by fair steps; ``escape`` leads to the goal from the states in ``escape_from``."""
    states = ["start", "other", "goal"]
    edges = [(0, 1, LOOP_A), (1, 0, LOOP_B)] + [(s, 2, escape) for s in escape_from]
    return make_graph(states, edges)


def test_liveness_loop_with_a_fair_escape_holds():
    """A cycle that never reaches the goal is not a counterexample when a fair action, enabled all
    around it, leaves it: weak fairness takes that action eventually."""
    verdict = check_eventually(two_state_loop(FAIR_ESCAPE), prop(reach_goal))
    assert verdict.result == HOLDS and verdict.lasso is None


def test_liveness_loop_whose_escape_is_a_perturbation_is_violated():
    """The same cycle, but the way out is a perturbation: nothing forces it, the goal never comes."""
    g = two_state_loop(UNFAIR_ESCAPE)
    verdict = check_eventually(g, prop(reach_goal))
    assert verdict.result == VIOLATED
    assert verdict.lasso.prefix == [] and sorted(verdict.lasso.loop, key=repr) == sorted([LOOP_A, LOOP_B], key=repr)
    assert_fair_toy_loop(g, verdict.lasso)


def test_liveness_escape_enabled_only_intermittently_is_not_forced():
    """Weak, not strong, fairness: an escape enabled in one state of the cycle only is not
    continuously enabled, so a loop that keeps passing through the other state is fair."""
    g = two_state_loop(FAIR_ESCAPE, escape_from=(0,))
    verdict = check_eventually(g, prop(reach_goal))
    assert verdict.result == VIOLATED
    _, loop = toy_walk(g, verdict.lasso)
    assert 1 in loop  # it must visit the state where the escape is disabled
    assert_fair_toy_loop(g, verdict.lasso)


def test_liveness_self_loop_with_and_without_fair_escape():
    """A state that can only repeat a fair step or escape: held by a fair escape, broken by an unfair one."""
    for escape, expected in ((FAIR_ESCAPE, HOLDS), (UNFAIR_ESCAPE, VIOLATED)):
        g = make_graph(["start", "goal"], [(0, 0, LOOP_A), (0, 1, escape)])
        verdict = check_eventually(g, prop(reach_goal))
        assert verdict.result == expected
        if expected == VIOLATED:
            assert verdict.lasso == Lasso([], [LOOP_A])


def test_liveness_fair_loop_takes_every_action_enabled_throughout():
    """In a three-state component where two fair actions are enabled everywhere, the loop is routed
    through an edge taking each, not just around the shortest cycle."""
    x, y = OpenSession(1), RestartBroker(1)  # fair, enabled in every state, each staying inside once only
    states = ["a", "b", "c", "x-done", "y-done"]
    edges = [(0, 1, LOOP_A), (1, 0, LOOP_B), (2, 1, LOOP_A), (1, 2, x), (2, 0, y)]
    edges += [(0, 3, x), (2, 3, x), (0, 4, y), (1, 4, y)]  # elsewhere x and y leave for the goal
    g = make_graph(states, edges)
    verdict = check_eventually(g, prop(lambda s: s.endswith("done")))
    assert verdict.result == VIOLATED
    assert {x, y} <= set(verdict.lasso.loop)
    assert_fair_toy_loop(g, verdict.lasso)


def test_liveness_stutter_where_only_perturbations_are_enabled():
    """A state whose only way on is a perturbation: the behaviour may stay there forever."""
    g = make_graph(["start", "stuck", "goal"], [(0, 1, LOOP_A), (1, 2, UNFAIR_ESCAPE)])
    verdict = check_eventually(g, prop(reach_goal))
    assert verdict.result == VIOLATED and verdict.lasso == Lasso([LOOP_A], [])
    assert "stutters there forever" in render_lasso(verdict.lasso)


def test_liveness_deadlock_before_the_goal_is_violated_and_in_the_goal_holds():
    g = make_graph(["start", "dead", "goal"], [(0, 1, LOOP_A), (0, 2, FAIR_ESCAPE)])
    verdict = check_eventually(g, prop(reach_goal))
    assert verdict.result == VIOLATED and verdict.lasso == Lasso([LOOP_A], [])
    g = make_graph(["start", "goal"], [(0, 1, FAIR_ESCAPE)])
    assert check_eventually(g, prop(reach_goal)).result == HOLDS


def test_liveness_trigger_limits_where_the_obligation_starts():
    """``when ~> goal`` only binds from trigger states: a stuck state no trigger leads to is fine."""
    states = ["start", "stuck", "armed", "goal"]
    g = make_graph(states, [(0, 1, UNFAIR_ESCAPE), (0, 2, LOOP_A), (2, 3, FAIR_ESCAPE)])
    assert check_eventually(g, prop(reach_goal, when=lambda s: s == "armed")).result == HOLDS
    verdict = check_eventually(g, prop(reach_goal, when=lambda s: s in ("armed", "stuck")))
    assert verdict.result == VIOLATED and verdict.lasso == Lasso([UNFAIR_ESCAPE], [])
    # From the initial state (when=None), the behaviour may take the perturbation and stop in "stuck".
    assert check_eventually(g, prop(reach_goal)).result == VIOLATED


def test_liveness_frontier_states_make_the_verdict_inconclusive_not_violated():
    """A bounded search's frontier state has unknown successors: it is no deadlock."""
    g = make_graph(["start", "frontier"], [(0, 1, LOOP_A)], expanded=[0])
    assert not g.complete and g.enabled[1] is None
    verdict = check_eventually(g, prop(reach_goal))
    assert verdict.result == INCONCLUSIVE and verdict.lasso is None


def test_liveness_fair_cycle_among_expanded_states_is_violated_even_when_incomplete():
    states = ["start", "other", "frontier"]
    g = make_graph(states, [(0, 1, LOOP_A), (1, 0, LOOP_B), (1, 2, UNFAIR_ESCAPE)], expanded=[0, 1])
    verdict = check_eventually(g, prop(reach_goal))
    assert not g.complete and verdict.result == VIOLATED
    assert_fair_toy_loop(g, verdict.lasso)


# ---- the registry ---------------------------------------------------------------------------------


def test_liveness_properties_are_registered_apart_from_safety():
    """EVENTUALLY properties carry their trigger and stay out of every safety check."""
    names = {p.name for p in PROPERTIES if p.kind is Kind.EVENTUALLY}
    assert names >= set(REGISTERED)
    assert {p.name for p in eventually_properties()} == names  # late registrations included
    for name in REGISTERED:
        p = BY_NAME[name]
        assert p.when is not None and p.source.startswith("KIP-")
    s = initial_state(RESTART)
    after = step(s, StopBroker(1))
    assert after is not None
    assert not names & set(violations(None, None, s) + violations(s, StopBroker(1), after))
    assert not names & set(witnessed(s, StopBroker(1), after))


# ---- the model ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bounce(correct_liveness):
    """Every EVENTUALLY property checked on the complete ``bounce`` graph, as tests/test_seeded_bugs.py's bounce
    bugs compare with."""
    return correct_liveness("bounce", Profile.KIP)


def test_liveness_registered_properties_hold_in_bounce(bounce):
    """KIP-380 §Broker Registration and §Controller Detects Bounced Broker: in the complete `bounce`
    scope (a stop, a restart, a ControlledShutdown), every running broker registers again and the
    controller catches up with /brokers/ids, under weak fairness of the healing steps."""
    assert bounce.complete
    verdicts = {v.name: v for v in bounce.verdicts}
    for name in REGISTERED:
        verdict = verdicts[name]
        assert verdict.result == HOLDS, render_lasso(verdict.lasso)
        assert verdict.pending_states > 0  # not vacuous: states where the goal waits are reached


def test_liveness_registered_properties_hold_in_a_small_scope():
    result = check_liveness(RESTART, props=REGISTERED)
    assert result.complete and result.distinct_states > 100
    verdicts = {v.name: v.result for v in result.verdicts}
    assert [verdicts[name] for name in REGISTERED] == [HOLDS, HOLDS]


def test_liveness_graph_search_agrees_with_the_explorer():
    g = explore_graph(RESTART)
    plain = explore(RESTART)
    assert g.complete and plain.complete
    assert (len(g.states), len(g.edges)) == (plain.distinct_states, plain.generated)
    assert g.parents[0] is None and all(p is not None for p in g.parents[1:])


def _epoch_over_100(state):
    return (znode_data(state, CONTROLLER_EPOCH) or 0) > 100


def test_liveness_unreachable_goal_gives_a_lasso_that_replays():
    """A goal the model never reaches (/controller_epoch above 100): the lasso leads from the initial
    state to a state where the behaviour may stop for good, and replays through model.step."""
    p = prop(_epoch_over_100, name="ControllerEpochEventuallyExceeds100")
    result = check_liveness(RESTART, props=[p])
    (verdict,) = result.verdicts
    assert verdict.result == VIOLATED
    assert replay_lasso(RESTART, CORRECT, verdict.lasso, p).ok
    out = as_json(result)
    assert out["complete"] and out["properties"][0]["result"] == VIOLATED
    assert set(out) == {"scope", "complete", "distinct_states", "seconds", "properties"}
    lasso = out["properties"][0]["lasso"]
    json.dumps(out)
    assert [traces.decode(a) for a in lasso["prefix"]] == verdict.lasso.prefix and lasso["loop"] == []


def test_liveness_catches_the_controller_that_misses_a_bounce():
    """KIP-380 §Motivation: "the controller will miss the broker restart and will not send any
    requests to the broker". With bounce detection off (czxids ignored), the controller's view of a
    restarted broker stays stale forever: a liveness failure, replayable step by step."""
    p = BY_NAME["ControllerEventuallySeesEveryBroker"]
    buggy = Variant(frozenset({Bug.BROKER_CHANGE_IGNORES_CZXID}))
    (verdict,) = check_liveness(SETTLED_RESTART, buggy, props=[p.name]).verdicts
    assert verdict.result == VIOLATED
    assert any(isinstance(a, RestartBroker) for a in verdict.lasso.prefix)
    assert replay_lasso(SETTLED_RESTART, buggy, verdict.lasso, p).ok
    (correct,) = check_liveness(SETTLED_RESTART, props=[p.name]).verdicts
    assert correct.result == HOLDS


def test_liveness_replay_rejects_lassos_that_are_not_counterexamples():
    p = prop(_epoch_over_100)
    (verdict,) = check_liveness(SETTLED_RESTART, props=[p]).verdicts
    good = verdict.lasso
    assert replay_lasso(SETTLED_RESTART, CORRECT, good, p).ok
    # stopping short of the quiescent state: a fair action is still enabled there
    shortened = Lasso(good.prefix[:-1], [])
    assert "unfair" in replay_lasso(SETTLED_RESTART, CORRECT, shortened, p).problem
    # a step that is not enabled
    bad = Lasso([ZkRecover()], [])
    assert "not enabled" in replay_lasso(SETTLED_RESTART, CORRECT, bad, p).problem
    # a loop that does not come back
    assert "does not return" in replay_lasso(SETTLED_RESTART, CORRECT, Lasso([], [StopBroker(1)]), p).problem
    # the goal is reached
    assert "goal holds" in replay_lasso(SETTLED_RESTART, CORRECT, good, prop(lambda s: True)).problem


def test_liveness_bounded_search_is_inconclusive(bounce):
    """Cut at depth 2, the properties that hold on the whole scope are not claimed to hold."""
    result = check_liveness("bounce", max_depth=2, props=REGISTERED)
    assert not result.complete and result.distinct_states < bounce.distinct_states
    assert {v.result for v in result.verdicts} == {INCONCLUSIVE}
    assert all(p["lasso"] is None for p in as_json(result)["properties"])


def test_liveness_names_only_eventually_properties():
    with pytest.raises(ValueError):
        check_liveness(RESTART, props=["LeaderIsInIsr"])
    with pytest.raises(KeyError):
        check_liveness(RESTART, props=["NoSuchProperty"])


def test_liveness_deliver_is_fair_per_message():
    """Fairness is per action instance: a Deliver of one message and of another are separate."""
    s = initial_state(RESTART)
    delivers = [Deliver(m) for m in s.network]
    assert len(set(delivers)) == len(delivers) > 1 and all(is_fair(d) for d in delivers)
    assert not is_fair(ZkOutage()) and is_fair(ZkRecover())


def test_liveness_fairness_may_depend_on_the_state():
    """A rule over (state, action): an action that heals in one state and perturbs in another (a
    session timeout of a dead broker versus a live one) is owed only where it heals."""
    g = two_state_loop(UNFAIR_ESCAPE)
    everywhere = check_eventually(g, prop(reach_goal), fair=lambda s, a: is_fair(a) or a == UNFAIR_ESCAPE)
    assert everywhere.result == HOLDS
    only_at_start = check_eventually(g, prop(reach_goal), fair=lambda s, a: is_fair(a) or s == "start")
    assert only_at_start.result == VIOLATED
    _, loop = toy_walk(g, only_at_start.lasso)
    assert "other" in [g.states[i] for i in loop]
