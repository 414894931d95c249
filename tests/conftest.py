"""Shared helpers for driving the model through ``step`` with explicit action sequences.

Rules the helpers enforce, so that each test only states its situation:
- ``run`` takes actions one by one and fails on the first that is not enabled (``step`` returned
  None): a scenario that silently skips a step proves nothing.
- For the correct model, ``run`` also checks every registered invariant on every step
  (``model.invariants.violations(before, action, after)`` must be empty); a seeded-bug variant is
  run without that check, and the test asks ``violations`` itself.
- Everything else here only reads a state: znodes, messages in flight, brokers.
"""

from __future__ import annotations

from model import zookeeper as zkm
from model.actions import Action
from model.bugs import CORRECT, Bug, Variant
from model.invariants import violations
from model.scopes import SAME_RANGE, Scope, ranges
from model.state import (
    Budget,
    ClusterState,
    FeaturesZNode,
    Message,
    message_sort_key,
)
from model.step import step
from model.types import BrokerId, FeatureStatus, Ibp
from model.zookeeper import ZkState, Znode

pytest_plugins = ["tests.zk_server", "tests.spark_cluster", "tests.run_once"]
__all__ = [
    "OFFLINE",
    "TWO_PARTITIONS",
    "EXCLUDED",
    "appended",
    "buggy",
    "messages",
    "only",
    "run",
    "run_steps",
    "tree",
    "with_budget",
    "znode",
]


def buggy(*bugs: Bug) -> Variant:
    return Variant(frozenset(bugs))


def run(state: ClusterState, *actions: Action, variant: Variant = CORRECT) -> ClusterState:
    """Apply ``actions`` in order; each must be enabled. Invariants are checked for the correct model."""
    for action in actions:
        after = step(state, action, variant)
        assert after is not None, f"not enabled: {action}"
        if variant == CORRECT:
            broken = violations(state, action, after)
            assert broken == [], f"{action} broke {broken}"
        state = after
    return state


def run_steps(
    state: ClusterState, *actions: Action, variant: Variant = CORRECT
) -> list[tuple[ClusterState, Action, ClusterState]]:
    """Like ``run``, but returns every (before, action, after) so a test can inspect each step."""
    steps = []
    for action in actions:
        after = run(state, action, variant=variant)
        steps.append((state, action, after))
        state = after
    return steps


def znode(state: ClusterState | ZkState, path: str) -> Znode:
    zk = state.zk if isinstance(state, ClusterState) else state
    node = zkm.get(zk, path)
    assert node is not None, f"no znode at {path}"
    return node


def tree(state: ClusterState | ZkState) -> tuple:
    """The znode tree alone (paths and znodes), without zxid, sessions or watches."""
    zk = state.zk if isinstance(state, ClusterState) else state
    return zk.paths, zk.nodes


def messages(state: ClusterState, kind: type | None = None, dest: int | None = None) -> list[Message]:
    """Messages in flight, in the model's fixed order, optionally of one type and to one broker."""
    found = [
        m
        for m in sorted(state.network, key=message_sort_key)
        if (kind is None or isinstance(m, kind)) and (dest is None or m.dest == dest)
    ]
    return found


def only(state: ClusterState, kind: type, dest: int) -> Message:
    """The one message of ``kind`` in flight to ``dest``."""
    found = messages(state, kind, dest)
    assert len(found) == 1, f"expected one {kind.__name__} to {dest}, found {found}"
    return found[0]


# ---- scopes the shipped ones do not cover --------------------------------------------------------

# Two partitions led by different brokers, start-up requests delivered: a ControlledShutdown then
# moves one leadership and shrinks one follower out of an ISR at once.
TWO_PARTITIONS = Scope(
    name="test-two-partitions",
    summary="2 brokers, partition 0 led by 1 and partition 1 led by 0; settled",
    ibps=(Ibp.IBP_2_7_IV0,) * 2,
    supported=(SAME_RANGE,) * 2,
    partitions=((BrokerId(1), BrokerId(0)), (BrokerId(0), BrokerId(1))),
    budget=Budget(shutdowns=1, max_in_flight=8),
    settled=True,
)

# Three replicas whose preferred leader (1) is not the controller (0), so the leader can die
# while the controller lives; assignment order (1, 2, 0) differs from id order.
OFFLINE = Scope(
    name="test-offline",
    summary="3 brokers, 1 partition assigned (1, 2, 0); settled",
    ibps=(Ibp.IBP_2_7_IV0,) * 3,
    supported=(SAME_RANGE,) * 3,
    partitions=((BrokerId(1), BrokerId(2), BrokerId(0)),),
    budget=Budget(crashes=1, restarts=1, expiries=1, shutdowns=2, max_in_flight=12),
    settled=True,
)

# /features already finalizes group_coordinator up to 3 while broker 1 only supports up to 2.
EXCLUDED = Scope(
    name="test-excluded",
    summary="2 brokers; broker 1's supported range excludes the finalized level",
    ibps=(Ibp.IBP_2_7_IV0,) * 2,
    supported=(ranges(group_coordinator=(1, 3)), ranges(group_coordinator=(1, 2))),
    partitions=((BrokerId(0), BrokerId(1)),),
    budget=Budget(elections=1, expiries=1, max_in_flight=8),
    features_znode=FeaturesZNode(FeatureStatus.ENABLED, ranges(group_coordinator=(1, 3))),
    warm=False,
)


# ==== Hypothesis profiles ==========================================================================
# Chosen with `pytest --hypothesis-profile=NAME` (the Hypothesis plugin loads it after this file).
# "ci" is loaded here, so it is the default everywhere and CI=true cannot put Hypothesis's own
# "ci" profile in its place. Each profile sets derandomize and deadline itself and starts from
# Hypothesis's "default" profile, never from whatever was loaded before. The explain phase is
# left out: on a stateful test it replays the failure hundreds of times (measured: 12 s of a
# 14 s failing run) to annotate lines that the saved trace table shows better.

from hypothesis import HealthCheck, Phase  # noqa: E402 - appended block, kept apart from the helpers
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_WITHOUT_EXPLAIN = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
_HYPOTHESIS_DEFAULT = _hypothesis_settings.get_profile("default")

# Reproducible and quick: the same examples on every run, nothing saved between runs;
# tests/test_machines.py takes about 40 s on 2 cores.
_hypothesis_settings.register_profile(
    "ci",
    parent=_HYPOTHESIS_DEFAULT,
    derandomize=True,
    deadline=None,
    database=None,
    max_examples=200,
    stateful_step_count=50,
    phases=_WITHOUT_EXPLAIN,
    print_blob=False,
)
# A developer's run: new random examples each time, failures kept in .hypothesis/examples and
# replayed first next time.
_hypothesis_settings.register_profile(
    "dev",
    parent=_HYPOTHESIS_DEFAULT,
    derandomize=False,
    deadline=None,
    max_examples=1_000,
    stateful_step_count=50,
    phases=_WITHOUT_EXPLAIN,
)
# A campaign: many long examples (minutes per test).
_hypothesis_settings.register_profile(
    "deep",
    parent=_HYPOTHESIS_DEFAULT,
    derandomize=False,
    deadline=None,
    max_examples=20_000,
    stateful_step_count=200,
    phases=_WITHOUT_EXPLAIN,
    suppress_health_check=[HealthCheck.too_slow],
)
_hypothesis_settings.load_profile("ci")


def appended(before: ClusterState, after: ClusterState, cid) -> list:
    """The records KRaft controller ``cid`` appended between two states."""
    from model.kraft_quorum import ctrl

    return [e.record for e in ctrl(after, cid).log[len(ctrl(before, cid).log):]]


def with_budget(name: str, **budget) -> Scope:
    """Scope ``name`` with some of its budgets changed."""
    from model.scopes import SCOPES

    scope = SCOPES[name]
    return scope.replace(budget=scope.budget.replace(**budget))


def walked_kinds(scope: Scope | str, seeds: int, steps: int) -> set[type]:
    """The action types seeded differential walks of ``scope`` took (plain on even seeds, swarm on odd ones); each
    walk agreed with the model at every step, since ``walk`` raises Disagreement otherwise."""
    from model.scopes import SCOPES
    from properties.differential import walk

    kinds: set[type] = set()
    for seed in range(seeds):
        walked = walk(SCOPES[scope] if isinstance(scope, str) else scope, seed, steps, swarm=seed % 2 == 1)
        kinds |= {type(a) for a in walked.steps}
    return kinds


def agreed(diff, *actions) -> None:
    """``actions``, then every message in flight delivered, taken alike by the implementation and the model
    (``properties.differential.Differential``)."""
    from model.actions import Deliver

    for action in actions:
        assert diff.apply(action) == [action]
    while diff.model.network:
        m = messages(diff.model)[0]
        assert diff.apply(Deliver(m)) == [Deliver(m)]


def path_to_dual_write(cid) -> tuple[Action, ...]:
    """A one-controller scope's scripted path from a registered stage to its driver in DUAL_WRITE: the migration
    (KIP-866 §Initial Data Migration), then the full sync and the brokers' RPCs."""
    from model.actions import (
        BecomeZkController,
        CompleteMigration,
        MigrateMetadata,
        MigrationCommitted,
        SendRPCsToBrokers,
        SyncKRaftToZk,
        WaitForZkBrokers,
    )

    return (WaitForZkBrokers(cid), BecomeZkController(cid), BecomeZkController(cid), MigrateMetadata(cid),
            CompleteMigration(cid), MigrationCommitted(cid), SyncKRaftToZk(cid), SendRPCsToBrokers(cid))
