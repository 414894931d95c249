"""Kafka's own tests as the conformance suite (issue 18 §3): every ported case's scenario gives its expected
output under kafka-3.9, and every case of a covered Kafka test class has a scenario or a reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from properties import conformance
from properties.scenario import run_file

KAFKA_SCENARIOS = sorted(conformance.KAFKA.glob("*.txt"))

# Issue 18 §3's list, in the order the inventory keeps it.
ISSUE_CLASSES = (
    "KRaftMigrationDriverTest", "FeatureControlManagerTest", "QuorumFeaturesTest", "ClusterControlManagerTest",
    "BrokerHeartbeatManagerTest", "ActivationRecordsGeneratorTest", "QuorumControllerTest", "ZkMigrationClientTest",
    "KafkaZkClientTest", "BrokerEpochIntegrationTest", "ControllerIntegrationTest",
    "FinalizedFeatureChangeListenerTest", "RaftEventSimulationTest", "ZkMigrationIntegrationTest",
    "zookeeper_migration_test",
)


@pytest.mark.parametrize("path", KAFKA_SCENARIOS, ids=lambda p: p.stem)
def test_conformance_kafka_scenario_gives_its_expected_output(path):
    result = run_file(path)
    assert result.passed, "\n\n".join(result.diffs)


def test_conformance_kafka_scenarios_run_under_kafka_3_9():
    """The suite checks the kafka-3.9 profile: every init of every ported case names it."""
    for path in KAFKA_SCENARIOS:
        inits = [b.command for b in run_file(path).blocks if b.command.startswith("init ")]
        assert inits and all("profile=kafka-3.9" in command.split() for command in inits), path.name


def test_conformance_inventory_lists_issue_18s_classes_and_each_covered_one_is_complete():
    inventory = conformance.load()
    assert tuple(k.name for k in inventory.classes) == ISSUE_CLASSES
    assert inventory.classes[0].covered  # the first class of the issue's order is done
    assert conformance.problems(inventory) == []


def _copy(tmp_path: Path, name: str = "kafka") -> Path:
    directory = tmp_path / name
    shutil.copytree(conformance.KAFKA, directory)
    return directory


def _edit_case(directory: Path, method: str, **changes) -> conformance.Inventory:
    data = json.loads((directory / "inventory.json").read_text())
    for entry in data["classes"]:
        for case in entry["cases"] or ():
            if case["method"] == method:
                case.update(changes)
    (directory / "inventory.json").write_text(json.dumps(data))
    return conformance.load(directory / "inventory.json")


def test_conformance_problems_name_a_case_without_its_scenario_or_reason_and_an_unlisted_one(tmp_path):
    """The completeness check can fail: a ported case whose `# case:` is gone, an out-of-model case with no
    reason, a scenario case the inventory does not list, and a scenario whose output changed."""
    directory = _copy(tmp_path)
    scenario = directory / "kraft-migration-driver.txt"
    text = scenario.read_text()
    scenario.write_text(text.replace("# case: testBeginMigrationOnce", "# case: testSomethingElse"))
    inventory = _edit_case(directory, "testCoalesceMigrationRecords", reason="")
    found = conformance.problems(inventory, directory)
    assert any("testBeginMigrationOnce: ported but" in p for p in found)
    assert any("testCoalesceMigrationRecords: out-of-model without a reason" in p for p in found)
    assert any("'# case: testSomethingElse', which the inventory does not list" in p for p in found)

    directory = _copy(tmp_path, "again")
    scenario = directory / "kraft-migration-driver.txt"
    waiting = "MigrationDriverState.WAIT_FOR_CONTROLLER_QUORUM\n"
    scenario.write_text(text.replace(waiting, "MigrationDriverState.INACTIVE\n", 1))
    found = conformance.problems(conformance.load(directory / "inventory.json"), directory)
    assert found == ["KRaftMigrationDriverTest.testOnControllerChangeWhenUninitialized: "
                     "its scenario does not give its expected output"]


def test_conformance_page_shows_each_case_with_its_result(tmp_path):
    page = conformance.render()
    assert "| `testBeginMigrationOnce` | ported | line " in page and "| pass |" in page
    assert "| `testCoalesceMigrationRecords` | out-of-model |" in page
    assert "## Not covered yet" in page
    for k in conformance.load().classes:
        if not k.covered:
            assert f"- {k.name}" in page
