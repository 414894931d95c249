"""Scripted mode: the model driven one chosen step at a time, each step's outcome read, every invariant checked.

For tests and notebooks; scenario files (``properties.scenario``) run on it::

    from model.actions import ElectController, ExpireSession, ObserveControllerEpoch
    from model.state import LeaderAndIsr
    from model.types import Errors
    from properties.script import Script

    script = Script("fencing", profile="kafka-3.9")
    script.step(ExpireSession(1))                  # a Taken: .outcome, .violations, .before, .after
    taken = script.step(ElectController(0))
    str(taken.outcome)                             # 'refused: the broker has not read /controller_epoch'
    taken = script.inject(LeaderAndIsr(0, 0, 7, 1, 0, 0, 0, (0, 1)))   # a request sent by the harness
    taken.outcome.error is Errors.STALE_CONTROLLER_EPOCH

Rules:
- The start is the scope's warm start taken under the script's own profile, on the scope as that
  profile's Kafka runs it (``model.scopes.for_profile``: under ``kafka-3.9`` a migrating quorum
  starts at metadata.version 3.6-IV1), so it is a state that profile accepts. ``warm="kip"``
  takes the checks' start instead (the ``kip`` rules, whatever the profile: a state the profile
  may refuse), ``cold=True`` the cold one. ``stage`` and ``metadata_version`` shape the scope
  before that (``model.scopes.with_stage``, ``at_metadata_version``); ``stage="none"`` leaves the
  KRaft side cold.
- Budgets are lifted: the script chooses every fault, and no scope budget refuses one.
- ``step`` takes any action, ``inject`` any request (``model.harness``); neither raises when the
  model refuses: the outcome says why (``model.outcome``) and the state stays. A step that
  breaks an invariant is taken all the same, and its ``violations`` name what it broke.
- Bad arguments (an unknown scope, profile, stage or seeded bug; a warm start the profile
  refuses) raise ``ScriptError``, one line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from model.actions import Action
from model.bugs import Bug, Variant
from model.harness import HarnessAction, Inject
from model.invariants import violations
from model.migration import Profile
from model.outcome import Outcome
from model.scopes import SCOPES, STAGES, Scope, at_metadata_version, cold_state, for_profile, initial_state, with_stage
from model.state import Budget, ClusterState, KRaftRequest, Message
from model.step import enabled_actions, outcome
from model.types import Ibp

# The script chooses every fault, so the scope's budgets must never refuse one.
UNBOUNDED = Budget(
    crashes=1 << 20, restarts=1 << 20, expiries=1 << 20, elections=1 << 20, outages=1 << 20, drops=1 << 20,
    duplicates=1 << 20, operator=1 << 20, shutdowns=1 << 20, max_in_flight=1 << 20, kraft_elections=1 << 20,
    controller_crashes=1 << 20, timeouts=1 << 20, migrations=1 << 20, max_lag=1 << 20,
)
WARM_STARTS = ("profile", "kip")


class ScriptError(ValueError):
    """A script that cannot start as asked; the message is one line."""


@dataclass(frozen=True)
class Taken:
    """One step of a script: the action, its outcome, the states around it and the invariants it broke."""

    action: Action | HarnessAction
    outcome: Outcome
    before: ClusterState
    after: ClusterState  # ``before`` when the step changed nothing
    violations: tuple[str, ...]

    def __str__(self) -> str:
        return str(self.outcome)


class Script:
    """A scope's start under a profile, stepped by the caller; ``state`` is where the steps so far left it."""

    def __init__(
        self,
        scope: str | Scope,
        profile: str | Profile = Profile.KIP,
        *,
        bugs: Iterable[str | Bug] = (),
        cold: bool = False,
        stage: str | None = None,
        metadata_version: str | Ibp | None = None,
        warm: str = "profile",
    ) -> None:
        self.profile = _profile(profile)
        base = _scope(scope)
        if warm not in WARM_STARTS:
            raise ScriptError(f"unknown warm start {warm!r} ({', '.join(WARM_STARTS)})")
        self.warm_profile = self.profile if warm == "profile" else Profile.KIP
        self.scope = shaped(base, self.warm_profile, stage, metadata_version)
        # The quorum's level when the profile raised it (model.scopes.for_profile), else None.
        profiled = for_profile(base, self.warm_profile)
        self.raised = profiled.controllers[0].metadata_version if profiled != base else None
        self.variant = Variant(bugs=frozenset(_bug(b) for b in bugs), profile=self.profile)
        self.cold = cold or not self.scope.warm
        try:
            start = cold_state(self.scope) if cold else initial_state(self.scope, self.warm_profile)
        except ValueError as err:
            hint = " (warm=kip takes the kip warm start)" if self.warm_profile is not Profile.KIP else ""
            raise ScriptError(f"{err}{hint}") from None
        # the scope's modes (answers at commit) are how its controllers work, not faults: they stay
        modes = {"answer_at_commit": start.budget.answer_at_commit,
                 "heartbeats_at_commit": start.budget.heartbeats_at_commit}
        self.state: ClusterState = start.replace(budget=UNBOUNDED.replace(**modes))
        self.taken: list[Taken] = []

    def step(self, action: Action | HarnessAction) -> Taken:
        """Take ``action`` if the model does: its outcome, and the invariants the step broke."""
        before = self.state
        result = outcome(before, action, self.variant)
        after = before if result.state is None else result.state
        broken = () if result.state is None else tuple(violations(before, action, after))  # type: ignore[arg-type]
        taken = Taken(action, result, before, after, broken)
        self.state = after
        self.taken.append(taken)
        return taken

    def inject(self, request: Message | KRaftRequest, deliver: bool = True) -> Taken:
        """A request sent by the test harness, with any epochs (``model.harness.Inject``)."""
        return self.step(Inject(request, deliver))

    def enabled(self) -> list[Action]:
        """Every action the model would take now, in its fixed order."""
        return enabled_actions(self.state, self.scope, self.variant)


def shaped(
    scope: Scope, profile: Profile, stage: str | None = None, metadata_version: str | Ibp | None = None
) -> Scope:
    """``scope`` as ``profile``'s Kafka runs it, then taken to ``stage`` ("none": the KRaft side cold) and
    put at ``metadata_version``, in that order (an explicit level wins over the profile's)."""
    scope = for_profile(scope, profile)
    if stage is not None:
        if stage != "none" and stage not in STAGES:
            raise ScriptError(f"unknown stage {stage!r} (none, {', '.join(STAGES)})")
        try:
            scope = with_stage(scope, None if stage == "none" else stage)
        except ValueError as err:
            raise ScriptError(str(err)) from None
    if metadata_version is not None:
        level = metadata_version if isinstance(metadata_version, Ibp) else Ibp.__members__.get(str(metadata_version))
        if level is None:
            raise ScriptError(f"unknown metadata_version {metadata_version!r} ({', '.join(Ibp.__members__)})")
        scope = at_metadata_version(scope, level)
    return scope


def _scope(scope: str | Scope) -> Scope:
    if isinstance(scope, Scope):
        return scope
    if scope not in SCOPES:
        raise ScriptError(f"unknown scope {scope!r}; `kraftcheck scopes` lists them")
    return SCOPES[scope]


def _profile(profile: str | Profile) -> Profile:
    if isinstance(profile, Profile):
        return profile
    try:
        return Profile(profile)
    except ValueError:
        raise ScriptError(f"unknown profile {profile!r} (kip, kafka-3.9)") from None


BUG_NAMES = {b.value: b for b in Bug}


def _bug(bug: str | Bug) -> Bug:
    if isinstance(bug, Bug):
        return bug
    if bug not in BUG_NAMES:
        raise ScriptError(f"unknown seeded bug {bug!r}; `kraftcheck mutants` lists them")
    return BUG_NAMES[bug]
