"""A campaign's options: checked one line each, and made into its ``Plan``; how its seeds are partitioned.

Rules:
- Bad input (an option, scope, fault mix, seeded bug, master, a Spark master nothing answers at,
  a DIR that holds another campaign or that cannot be created or written) is a ``CampaignError``:
  one line, raised before anything is written and before Spark starts (``kraftcheck campaign``
  prints it and exits 2).
- Partition p holds seeds ``[p*S, (p+1)*S)`` (S: ``--partition-size``; the last one is cut at
  ``--seeds``); a timed campaign (``--minutes``) has no partition count.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from impl.bugs import ImplBug
from impl.sim.faults import parse as parse_faults
from impl.sim.scenarios import CONFIGS, scenario
from impl.sim.simulator import RUNBOOKS
from model.bugs import Variant
from properties.plan import (
    DEFAULT_CONFIGS,
    DEFAULT_ENGINE,
    DEFAULT_FAULTS,
    DEFAULT_OUT,
    DEFAULT_RUNBOOK,
    DEFAULT_SCOPE,
    DEFAULT_SHRINK_SECONDS,
    DEFAULT_STEPS,
    PLACE_KEYS,
    WAVE_PARTITIONS,
    Plan,
    default_partition_size,
    default_quiet_steps,
    resolve_mutant,
)

# ---- defaults (the README's main job, ``scripts/run.sh``, runs a campaign with these) -----------

DEFAULT_SEEDS = 16
DEFAULT_MASTER = "local[*]"
MAX_SEEDS = 2**31 - 1  # partition numbers are 32-bit in the tables

CAMPAIGN_RUNBOOKS = (*RUNBOOKS, "mixed")
ENGINES = ("sim", "hypothesis")
MACHINES = ("model", "differential")


class CampaignError(ValueError):
    """Bad input for a campaign: one line, nothing written."""


# ---- the plan --------------------------------------------------------------------------------

def seeded_bug(name: str | None) -> tuple[frozenset[ImplBug], Variant]:
    """A seeded bug of either layer by name: (the implementation's bugs, the model's variant)."""
    try:
        return resolve_mutant(name)
    except ValueError as e:
        raise CampaignError(str(e)) from None


def _checked(read: Callable[[str], object], text: str) -> str:
    """``text`` if ``read`` accepts it; its one-line ValueError as a CampaignError otherwise."""
    try:
        read(text)
    except ValueError as e:
        raise CampaignError(str(e)) from None
    return text


def check_scope(name: str) -> str:
    return _checked(scenario, name)


def check_faults(spec: str) -> str:
    return _checked(parse_faults, spec)


def check_mutant(name: str) -> str:
    seeded_bug(name)
    return name


def make_plan(*, seeds: int | None = None, minutes: float | None = None, scope: str = DEFAULT_SCOPE,
              faults: str = DEFAULT_FAULTS, mutant: str | None = None, steps: int = DEFAULT_STEPS,
              runbook: str = DEFAULT_RUNBOOK, partition_size: int | None = None, engine: str = DEFAULT_ENGINE,
              machine: str | None = None, shrink_seconds: float = DEFAULT_SHRINK_SECONDS,
              out: str | os.PathLike = DEFAULT_OUT, quiet_steps: int | None = None, steer: bool = True,
              wave: int = WAVE_PARTITIONS, configs: str = DEFAULT_CONFIGS) -> Plan:
    """The campaign's plan, every option checked (``CampaignError``, one line)."""
    if seeds is not None and minutes is not None:
        raise CampaignError("--seeds and --minutes exclude each other")
    if not os.fspath(out).strip():
        raise CampaignError("--out: expected a directory, got an empty name")
    if seeds is None and minutes is None:
        seeds = DEFAULT_SEEDS
    if seeds is not None and not 1 <= seeds <= MAX_SEEDS:
        raise CampaignError(f"--seeds: expected a positive integer of at most {MAX_SEEDS:,}, got {seeds}")
    if minutes is not None and not (minutes > 0 and math.isfinite(minutes)):
        raise CampaignError(f"--minutes: expected a positive number, got {minutes}")
    if steps < 1:
        raise CampaignError(f"--steps: expected a positive integer, got {steps}")
    if partition_size is not None and partition_size < 1:
        raise CampaignError(f"--partition-size: expected a positive integer, got {partition_size}")
    if quiet_steps is not None and not 0 <= quiet_steps <= steps:
        raise CampaignError(f"--quiet-steps: expected an integer from 0 to --steps ({steps}), got {quiet_steps}")
    if wave < 1:
        raise CampaignError(f"--wave: expected a positive integer, got {wave}")
    if not (shrink_seconds >= 0 and math.isfinite(shrink_seconds)):
        raise CampaignError(f"--shrink-seconds: expected a number >= 0, got {shrink_seconds}")
    if runbook not in CAMPAIGN_RUNBOOKS:
        raise CampaignError(f"unknown runbook {runbook!r}; expected one of {', '.join(CAMPAIGN_RUNBOOKS)}")
    if configs not in CONFIGS:
        raise CampaignError(f"unknown --configs {configs!r}; expected one of {', '.join(CONFIGS)}")
    if engine not in ENGINES:
        raise CampaignError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    if engine == "sim" and machine is not None:
        raise CampaignError("--machine chooses the Hypothesis machine: it needs --engine hypothesis")
    if engine == "hypothesis":
        machine = machine or "differential"
        if machine not in MACHINES:
            raise CampaignError(f"unknown machine {machine!r}; expected one of {', '.join(MACHINES)}")
    check_scope(scope)
    check_faults(faults)
    seeded_bug(mutant)
    plan = Plan(seeds=seeds, minutes=minutes, scope=scope, faults=faults, mutant=mutant, steps=steps,
                runbook=runbook, partition_size=partition_size or default_partition_size(steps), engine=engine,
                machine=machine, shrink_seconds=float(shrink_seconds), out=str(Path(out).resolve()),
                quiet_steps=default_quiet_steps(steps) if quiet_steps is None else quiet_steps, steer=steer, wave=wave,
                configs=configs)
    if engine == "hypothesis":
        from properties.campaign.hypothesis import check_plan

        try:
            check_plan(plan)
        except ValueError as e:
            raise CampaignError(str(e)) from None
    return plan


def check_writable(out: Path, option: str = "--out") -> None:
    """``CampaignError`` (naming ``option``) unless DIR can be created (with its parents) and written: tried
    with a probe file, and everything the try made is removed again, so a refused DIR is left as it was."""
    created: list[Path] = []
    try:
        missing, existing = [], out
        while not existing.exists() and existing != existing.parent:
            missing.append(existing)
            existing = existing.parent
        if not existing.is_dir():
            raise CampaignError(f"{option} {out}: {existing} is a file, not a directory")
        for directory in reversed(missing):
            directory.mkdir()
            created.append(directory)
        fd, probe = tempfile.mkstemp(dir=out, prefix=".kraftcheck-probe-", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise CampaignError(f"{option} {out}: cannot create or write it ({e.strerror or e})") from None
    finally:
        for directory in reversed(created):
            try:
                directory.rmdir()
            except OSError:
                pass


def plan_differences(recorded: Plan, plan: Plan) -> list[str]:
    """The options (as on the command line) whose values differ between two plans, where they live aside."""
    before, after = recorded.to_json(), plan.to_json()
    return [f"--{k.replace('_', '-')}" for k in sorted(before) if k not in PLACE_KEYS and before[k] != after[k]]


def partition_seeds(plan: Plan, partition: int) -> range:
    size = plan.partition_size
    end = (partition + 1) * size
    if plan.seeds is not None:
        end = min(end, plan.seeds)
    return range(partition * size, end)


def partition_count(plan: Plan) -> int | None:
    """How many partitions the plan has; None for a timed campaign (``--minutes``)."""
    if plan.seeds is None:
        return None
    return -(-plan.seeds // plan.partition_size)
