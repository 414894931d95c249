"""Steering: a campaign aims its later seeds' faults at the steps of the migration no run has struck yet.

The fault grid (``properties.runs``: coverage kind ``fault_at``, the report's "Faults by step of the
migration") counts each fault a run injected by the state of the active controller's migration
driver when it struck. Faults drawn at random times mostly strike where the cluster spends its
time (before the migration, in DUAL_WRITE), rarely in the short steps between, where the
migration's races live. An aim (``impl.sim.simulator.Aim``) strikes a fault as soon as the driver
is in a given state, so a run can be sent to a cell of the grid.

Rules:
- A steered campaign (``Plan.steer``) runs in waves of ``Plan.wave`` partitions: the driver
  starts a wave once every earlier one has finished, and gives its tasks the grid's struck cells
  so far (``Plan.struck``: the ``fault_at`` keys of every run of the earlier waves).
- ``aims_for(plan, seed)`` deals the cells still empty that an aim can strike (its fault in the
  plan's mix; a broker's session timing out is the controller's timer, not a fault one can aim)
  to the seeds of the wave in turn, in the grid's order: the seed at place i of a wave of n seeds
  takes the cells i, i + n, i + 2n, ... So each empty cell is aimed at once a wave, and a seed's
  aims are a function of the plan, its seed and the struck cells alone: the same options give the
  same campaign, and a run's aims, recorded in the runs table (``aims``) and in its trace,
  run it again (``kraftcheck pin --seed N --aims ...``).
- An aim is written as the grid's cell: ``STATE|fault`` (``WAIT_FOR_BROKERS|crash controller``,
  ``no active driver|ZooKeeper outage``).
"""

from __future__ import annotations

from impl.sim.faults import parse as parse_faults
from impl.sim.simulator import Aim
from model.migration import MigrationDriverState
from properties.plan import Plan
from properties.runs import FAULTS, GRID_FAULTS, GRID_STATES, NO_DRIVER

# Each fault's name in the grid, and the fault mix weight that makes the simulator offer it.
_ACTION = {label: action for action, label in FAULTS.items()}
_WEIGHT = {"Drop": "drop", "Redeliver": "duplicate", "CrashBroker": "crash", "CrashController": "crash",
           "StopBroker": "stop", "ShutdownController": "stop", "ExpireSession": "expire", "ZkOutage": "outage",
           "RegistrationResponseLost": "lose_response", "HeartbeatResponseLost": "lose_response",
           "ZkServerLags": "stale_read", "HoldHeartbeat": "hold_heartbeat"}


def cell(state: str, fault: str) -> str:
    """A cell of the grid as coverage keys and aims write it."""
    return f"{state}|{fault}"


def aimable(plan: Plan) -> list[str]:
    """The grid's cells an aim can strike under the plan's fault mix, in the grid's order."""
    mix = parse_faults(plan.faults)
    faults = [f for f in GRID_FAULTS if _ACTION[f] in _WEIGHT and getattr(mix, _WEIGHT[_ACTION[f]])]
    return [cell(state, fault) for state in GRID_STATES for fault in faults]


def steered(plan: Plan) -> bool:
    return plan.steer and plan.engine == "sim"


def wave_seeds(plan: Plan) -> int:
    return plan.wave * plan.partition_size


def wave_of_partition(plan: Plan, partition: int) -> int:
    return partition // plan.wave


def aims_for(plan: Plan, seed: int) -> tuple[str, ...]:
    """The cells ``seed`` aims at: its share of those no earlier wave struck (none when not steered)."""
    if not steered(plan) or plan.struck is None:
        return ()
    struck = set(plan.struck)
    empty = [c for c in aimable(plan) if c not in struck]
    size = wave_seeds(plan)
    first = seed // size * size
    if plan.seeds is not None:
        size = min(size, plan.seeds - first)
    return tuple(empty[seed - first::size])


def parse_aims(aims: tuple[str, ...] | list[str]) -> tuple[Aim, ...]:
    """Aims as the simulator takes them; a one-line ValueError for a cell that is not one an aim can strike."""
    parsed = []
    for text in aims:
        state, sep, fault = text.partition("|")
        action = _ACTION.get(fault)
        if not sep or action not in _WEIGHT or state not in GRID_STATES:
            raise ValueError(f"bad aim {text!r}: expected STATE|fault, STATE one of {', '.join(GRID_STATES)} and "
                             f"fault one of {', '.join(f for f in GRID_FAULTS if _ACTION[f] in _WEIGHT)}")
        parsed.append(Aim(None if state == NO_DRIVER else MigrationDriverState[state], action))
    return tuple(parsed)
