"""The plan: what a run of the implementation under the simulator is, one frozen value.

Rules:
- A ``Plan`` holds every option that changes a run's results (scope, fault mix, seeded bug,
  steps, runbook) and, for a campaign, how its seeds are cut and run (seeds or minutes,
  partition size, engine, machine, shrink budget) and where it lives (``out``). Campaigns,
  shrinking, ``kraftcheck pin`` and replay all take one; a run is a function of (plan, seed).
- ``Plan.to_json()`` is what ``DIR/campaign.json`` holds; ``PLACE_KEYS`` (where the campaign
  lives, and the wall clock its tasks' time axis starts from) do not change results, so two
  plans that differ only there run the same campaign. ``started_at`` and ``struck`` (the fault
  grid's cells struck by the waves before, which steering aims the next wave away from:
  ``properties.steering``) are only in the plans the tasks get, never in the file.
- A run has a fault window, then a quiet continuation in which every progress goal must be met
  (``properties.progress``). The window is ``fault_steps`` events (all but the last
  ``quiet_steps``), except for one seed in four (2, 7, 10, 15, ...: of each eight, one that
  finalizes and one that rolls back under the mixed runbook): ``fault_window(seed)`` draws
  where its window ends from the seed, between a sixteenth of ``fault_steps`` and all of them,
  so that some runs stop their faults at every step of the migration (before it starts, in the
  middle of the roll) while most keep their faults as long as they can.
- A seed's cluster: under ``configs == "drawn"`` (the default) a seed of ``sim-migration`` runs a
  configuration drawn from the seed (``impl.sim.scenarios.draw``), named in the scope it runs
  (``scope_of``); ``fixed`` runs the scope as named.
- Everything inside passes a ``Plan``. A plan comes in as JSON only from ``DIR/campaign.json``,
  where ``Plan.from_json`` parses it once (missing options at their defaults; an unknown option or
  a value of the wrong type is a one-line ``ValueError``).
- Options are checked where they are read (``properties.campaign.options.make_plan`` checks a campaign's,
  one line each); a ``Plan`` itself only fills the partition size its steps call for.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, get_type_hints

from impl.bugs import IMPL_SEEDED_BUGS, SHARED_SEEDED_BUGS, ImplBug
from model import SEEDED_BUGS_BY_NAME
from model.bugs import CORRECT, Variant

if TYPE_CHECKING:
    from impl.sim.faults import FaultMix

DEFAULT_SCOPE = "sim-migration"
DEFAULT_FAULTS = "all"
DEFAULT_STEPS = 2_000  # a 3-controller 3-broker migration finalizes in about 800 events
DEFAULT_RUNBOOK = "mixed"
DEFAULT_ENGINE = "sim"
DEFAULT_CONFIGS = "drawn"  # each seed of sim-migration runs a configuration drawn from it (impl.sim.scenarios)
DEFAULT_SHRINK_SECONDS = 60.0
DEFAULT_OUT = "campaign-out"
# A partition should be some seconds of work: Spark costs ~35 ms a task and ~0.3 s a (warm) job.
PARTITION_SECONDS = 4.0
CHECKED_STEPS_PER_SECOND = 2_000  # differential events per second on one core (bench.sim)
# Keys of the plan that do not change results: where the campaign lives, and (in the plan the tasks
# get, not in campaign.json) the wall clock its time axis starts from (``finished_s``).
PLACE_KEYS = ("out", "started_at")
TASK_KEYS = ("started_at", "struck")  # in the tasks' plans only
EARLY_QUIET = (2, 7)  # seeds that are these modulo 8 stop their faults at a point drawn from them (``fault_window``)
WAVE_PARTITIONS = 4  # a steered campaign's waves: this many partitions each, by default


def default_partition_size(steps: int) -> int:
    return max(1, round(PARTITION_SECONDS * CHECKED_STEPS_PER_SECOND / steps))


def default_quiet_steps(steps: int) -> int:
    """A quarter of a run's events, after its fault window, to check its progress in."""
    return steps // 4


@dataclass(frozen=True)
class Plan:
    seeds: int | None = None  # seeds 0..seeds-1; None: a timed campaign (``minutes``), or one seed's run
    minutes: float | None = None
    scope: str = DEFAULT_SCOPE
    faults: str = DEFAULT_FAULTS
    mutant: str | None = None  # a seeded bug of either layer (``resolve_mutant``)
    steps: int = DEFAULT_STEPS
    runbook: str = DEFAULT_RUNBOOK  # one of ``impl.sim.simulator.RUNBOOKS``, or "mixed" (``runbook_for``)
    partition_size: int = 0  # 0: ``default_partition_size(steps)``
    engine: str = DEFAULT_ENGINE
    machine: str | None = None  # the Hypothesis engine's machine
    shrink_seconds: float = DEFAULT_SHRINK_SECONDS
    out: str = DEFAULT_OUT
    quiet_steps: int = -1  # events of quiet continuation after the fault window; -1: ``default_quiet_steps``
    steer: bool = True  # aim later seeds' faults at the driver states no run struck yet (``properties.steering``)
    wave: int = WAVE_PARTITIONS  # partitions per wave of a steered campaign
    # "drawn": each seed's cluster drawn from it ("drawn+partitions": and partitions created one run in two);
    # "fixed": the scope as named
    configs: str = DEFAULT_CONFIGS
    started_at: float | None = None  # the campaign's start, wall clock: in the tasks' plan only
    struck: tuple[str, ...] | None = None  # the fault grid's struck cells before this wave: in the tasks' plan only

    def __post_init__(self) -> None:
        if not self.partition_size:
            object.__setattr__(self, "partition_size", default_partition_size(self.steps))
        if self.quiet_steps < 0:
            object.__setattr__(self, "quiet_steps", default_quiet_steps(self.steps))

    @property
    def fault_steps(self) -> int:
        """The longest fault window: a run's events but the least its quiet continuation has."""
        return max(0, self.steps - self.quiet_steps)

    def fault_window(self, seed: int) -> int:
        """The events of ``seed``'s fault window: ``fault_steps``, or for one seed in four a number drawn from the
        seed (its own stream, not the simulation's)."""
        if seed % 8 not in EARLY_QUIET:
            return self.fault_steps
        return random.Random(f"fault-window:{seed}").randint(self.fault_steps // 16, self.fault_steps)

    @classmethod
    def from_json(cls, data: Any) -> Plan:
        """The plan ``DIR/campaign.json`` holds (``to_json``): options it leaves out at their defaults."""
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object of options, got {type(data).__name__}")
        types = get_type_hints(cls)
        unknown = sorted(set(data) - set(types) | set(TASK_KEYS) & set(data))
        if unknown:
            raise ValueError(f"unknown option {unknown[0]!r}")
        options = {}
        for key, value in data.items():
            if types[key] in (float, float | None) and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if (types[key] is bool) != isinstance(value, bool) or not isinstance(value, types[key]):
                raise ValueError(f"option {key!r}: {value!r} is not {getattr(types[key], '__name__', types[key])}")
            options[key] = value
        return cls(**options)

    def to_json(self) -> dict[str, Any]:
        """The plan as ``DIR/campaign.json`` holds it (without what only the tasks' plans hold)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in TASK_KEYS}

    def started(self, at: float) -> Plan:
        """The plan the tasks get: this one, with the wall clock its time axis starts from."""
        return replace(self, started_at=at)

    @property
    def seeded_bugs(self) -> tuple[frozenset[ImplBug], Variant]:
        """The mutant as (the implementation's bugs, the model's variant)."""
        return resolve_mutant(self.mutant)

    def scope_of(self, seed: int) -> str:
        """The scope ``seed`` runs: ``scope``, or the configuration drawn for it, ``sim-purgatory``'s under fault mix
        ``purgatory``, ``sim-heartbeat-commit``'s under ``heartbeat-commit`` (``impl.sim.scenarios.scope_for``)."""
        from impl.sim.faults import parse
        from impl.sim.scenarios import scope_for

        mix = parse(self.faults)
        return scope_for(self.scope, seed, self.configs, mix.answer_at_commit > 0, mix.heartbeats_at_commit > 0)

    def faults_of(self, seed: int) -> FaultMix:
        """The mix ``seed``'s fault window runs: ``faults``, with the worlds of the configuration drawn for the seed
        joined to its named mixes (``impl.sim.scenarios.WORLDS``)."""
        from impl.sim.faults import parse
        from impl.sim.scenarios import drawn_for

        configuration = drawn_for(self.scope, seed, self.configs)
        return parse(self.faults, () if configuration is None else configuration.worlds)

    def runbook_of(self, seed: int) -> str:
        return runbook_for(self.runbook, seed)


def resolve_mutant(name: str | None) -> tuple[frozenset[ImplBug], Variant]:
    """A seeded bug's name as the implementation's bugs and the model's variant (``kraftcheck mutants --list``)."""
    if name is None:
        return frozenset(), CORRECT
    for bug in IMPL_SEEDED_BUGS:
        if bug.name == name:
            return frozenset({bug.bug}), CORRECT
    for shared in SHARED_SEEDED_BUGS:
        if shared.name == name:  # a mistake of the design: the implementation and the model make it alike
            return frozenset({shared.bug}), Variant(frozenset({shared.model_bug}))
    if name in SEEDED_BUGS_BY_NAME:
        return frozenset(), Variant(frozenset({SEEDED_BUGS_BY_NAME[name].bug}))
    raise ValueError(f"unknown seeded bug {name!r} (see `kraftcheck mutants --list`)")


def runbook_for(runbook: str, seed: int) -> str:
    """``mixed``: every fourth seed rolls the migration back, the others finalize it (as bench/sim.py)."""
    if runbook == "mixed":
        return "rollback" if seed % 4 == 3 else "finalize"
    return runbook
