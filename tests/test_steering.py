"""Steering (properties/steering.py): later seeds' faults aimed at the fault grid's empty cells.

Issue 17 §2 "Faults aimed at every driver step": the report's grid of (driver state x fault kind)
shows its empty cells, and the campaign steers later seeds toward them. A run's aims are part of
its plan: a function of the campaign's options, its seed and the cells its earlier waves struck,
recorded in the runs table, so the same options give the same campaign.
"""

from dataclasses import replace

import pyarrow.parquet as pq
import pytest

from properties.campaign.driver import run_campaign
from properties.campaign.options import make_plan
from properties.plan import Plan
from properties.runs import run_seed
from properties.steering import aimable, aims_for, parse_aims


def test_a_wave_aims_at_each_empty_cell_once():
    """The cells no earlier wave struck are dealt to the wave's seeds in turn: each once, none struck again."""
    plan = replace(Plan(seeds=20, partition_size=2, wave=3), struck=("no active driver|drop", "DUAL_WRITE|drop"))
    first_wave = [c for seed in range(6) for c in aims_for(plan, seed)]
    assert sorted(first_wave) == sorted(c for c in aimable(plan) if c not in plan.struck)
    last_wave = [c for seed in range(18, 20) for c in aims_for(plan, seed)]  # a wave cut short by --seeds
    assert sorted(last_wave) == sorted(first_wave)
    assert aims_for(replace(plan, steer=False), 0) == () and aims_for(replace(plan, struck=None), 0) == ()
    assert aims_for(plan, 7) == aims_for(replace(plan, out="elsewhere"), 7)


def test_only_faults_of_the_mix_are_aimed_and_bad_aims_are_one_line():
    network = Plan(faults="network")
    assert {c.split("|")[1] for c in aimable(network)} == {"drop", "duplicate"}
    assert aimable(Plan(faults="none")) == []
    with pytest.raises(ValueError, match="bad aim 'NOWHERE|drop'"):
        parse_aims(["NOWHERE|drop"])
    with pytest.raises(ValueError, match="bad aim"):
        parse_aims(["DUAL_WRITE|broker timed out"])  # the controller's timer, not a fault one can aim


def test_an_aimed_fault_strikes_when_the_driver_reaches_its_state():
    """KIP-866 §Controller Migration: a controller crash while the driver waits for the ZK brokers. Seed 5 has
    none of its own there; aimed, it strikes as soon as the active driver is in WAIT_FOR_BROKERS."""
    plan = Plan(steps=600)
    cell = "WAIT_FOR_BROKERS|crash controller"
    plain = run_seed(plan, 5)
    aimed = run_seed(plan, 5, aims=(cell,))
    assert ("fault_at", cell) not in plain.coverage
    assert aimed.coverage["fault_at", cell] >= 1 and aimed.disagreement is None
    assert aimed.aims == (cell,)


def test_a_steered_campaign_fills_more_of_the_grid_than_the_same_seeds_unsteered(tmp_path):
    """Same seeds, same options but --no-steer: steering strikes more cells of the fault grid; a second wave
    aims only at cells the first left empty, and every run records its aims."""
    options = dict(seeds=8, steps=800, partition_size=2, wave=2, runbook="mixed")
    struck = {}
    for steer in (False, True):
        out = tmp_path / f"steer-{steer}"
        summary = run_campaign(make_plan(**options, steer=steer, out=out), "serial")
        assert summary["violations"] == 0
        struck[steer] = summary["coverage"]["fault_at"]
    assert struck[True] >= struck[False] + 10, struck
    runs = pq.read_table(tmp_path / "steer-True" / "runs.parquet").to_pylist()
    coverage = pq.read_table(tmp_path / "steer-True" / "coverage.parquet").to_pylist()
    first = {r["key"] for r in coverage if r["kind"] == "fault_at" and r["seed"] < 4}
    later = {a for r in runs if r["seed"] >= 4 for a in r["aims"]}
    assert all(r["aims"] for r in runs) and later and not later & first


@pytest.mark.parametrize("cell", ["DUAL_WRITE|heartbeat response lost", "WAIT_FOR_BROKERS|registration response lost",
                                  "DUAL_WRITE|ZooKeeper server lags"])
def test_lost_responses_and_lagging_servers_are_cells_an_aim_strikes(cell):
    """The grid has a column for each new timing fault of the default mix, and an aim strikes it. A lost response is
    aimed at the request it answers: the next such request loses its response, and the aim stays until a loss took
    effect on the controller's side (a heartbeat that changed nothing broke nothing)."""
    plan = Plan(steps=2_000)
    aimed = run_seed(plan, 1, aims=(cell,))
    assert aimed.coverage["fault_at", cell] >= 1 and aimed.disagreement is None
    assert cell in aimable(plan) and cell not in aimable(replace(plan, faults="none,crash=0.01"))


def test_a_held_heartbeat_is_a_cell_an_aim_strikes_in_a_mix_that_holds_them():
    """Issue 17 §1: a heartbeat held in the network is a column of the grid, and in a mix that holds heartbeats
    (``held``) an aim strikes it: the next BrokerHeartbeat among the options is held. The default mix holds none,
    so its campaigns do not aim at the column."""
    cell = "DUAL_WRITE|heartbeat held"
    plan = Plan(steps=2_000, faults="all+held")
    aimed = run_seed(plan, 1, aims=(cell,))
    assert aimed.coverage["fault_at", cell] >= 1 and aimed.disagreement is None
    assert cell in aimable(plan) and cell not in aimable(Plan())
