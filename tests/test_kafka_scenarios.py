"""Scenario files of an operator's steps (tests/scenarios/real/*.txt): on the model in the default run,
on a real Kafka behind the ``slow`` marker, as ``kraftcheck scenario --kafka`` runs them.

The model's side is fast and deterministic, so every file's expected output is checked against
the model on every run; the real cluster's side takes a minute or two a file on 2 cores and waits
only on what the processes show (properties.kafka.run's waits), never on a fixed sleep.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from model.kraft import UpgradeType
from model.types import Ibp
from properties.cli import main
from properties.kafka.scenario import OPERATOR_STEPS, check_file, feature_command, kafka_error, run_file
from properties.scenario import ScenarioError
from tests.zk_server import SKIP_ENV

REAL = sorted((Path(__file__).parent / "scenarios" / "real").glob("*.txt"))
HEAD = "cluster brokers=3 controllers=1\n----\n"


def test_kafka_scenarios_exist():
    assert len(REAL) >= 3


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.stem)
def test_kafka_scenario_gives_its_expected_output_on_the_model(path):
    """The operator's steps, as model actions and hidden protocol steps up to each goal, give the file's output."""
    result = run_file(path)
    assert result.passed, "\n".join(result.diffs)


def test_kafka_scenario_cli_runs_a_cluster_file_on_the_model(capsys):
    """`kraftcheck scenario FILE` knows a file of an operator's steps and runs it on the model alone."""
    assert main(["scenario", str(REAL[0])]) == 0
    assert "blocks as expected" in capsys.readouterr().out


@pytest.mark.parametrize(
    "body, message",
    [
        ("step Deliver message=0\n----\n", "4: Deliver is not an operator's step"),
        ("inject LeaderAndIsr controller=0\n----\n", "4: 'inject' cannot run on a real Kafka"),
        ("show zk\n----\n", "4: 'show' cannot run on a real Kafka"),
        ("enabled\n----\n", "4: 'enabled' cannot run on a real Kafka"),
        ("step RollBrokerIntoMigration broker=7\n----\n", "4: broker=7: the cluster has brokers 0 to 2"),
        ("step FinalizeController\n----\n", "4: FinalizeController takes controller="),
        ("wait epoch=3\n----\n", "4: wait takes one KEY=VALUE"),
        ("step UpdateMetadataVersion level=IBP_9 upgrade_type=UPGRADE\n----\n", "4: level=IBP_9"),
    ],
)
def test_kafka_scenario_refuses_a_step_kafka_cannot_take_naming_its_line(tmp_path, capsys, body, message):
    """A model-only step (a protocol step, an injected request, a read of the model's state) refuses the
    whole file under --kafka, one line and exit 2, before any cluster starts."""
    path = tmp_path / "bad.txt"
    path.write_text(HEAD + "\n" + body)
    with pytest.raises(ScenarioError, match=message):
        check_file(path)
    assert main(["scenario", "--kafka", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{path}:{message}" in err


def test_kafka_scenario_refuses_a_model_file(capsys):
    """A model scenario (init scope=...) is the model's alone: --kafka names its first line."""
    model_file = Path(__file__).parent / "scenarios" / "zombie-controller.txt"
    assert main(["scenario", "--kafka", str(model_file)]) == 2
    err = capsys.readouterr().err
    assert "runs on the model alone" in err and len(err.strip().splitlines()) == 1


def test_kafka_scenario_operator_steps_name_their_fields():
    """Every operator step says what it is; a roll waits for its broker's registration and shows it."""
    assert all(step.meaning for step in OPERATOR_STEPS.values())
    roll = OPERATOR_STEPS["RollBrokerIntoMigration"]
    assert roll.goal({"broker": 2}) == ("zk_broker_2", "registered")
    assert OPERATOR_STEPS["FinalizeController"].goal({"controller": 3000}) == ("migration", "POST_MIGRATION")


def test_kafka_scenario_feature_command_and_kafkas_answer():
    """UpdateMetadataVersion becomes FeatureCommand's arguments; its refusal's message, Kafka's error code."""
    assert feature_command(Ibp.IBP_3_6_IV1, UpgradeType.SAFE_DOWNGRADE) == ["downgrade", "3.6-IV1"]
    assert feature_command(Ibp.IBP_3_6_IV1, UpgradeType.UNSAFE_DOWNGRADE) == ["downgrade", "3.6-IV1", "--unsafe"]
    assert feature_command(Ibp.IBP_3_7_IV0, UpgradeType.UPGRADE) == ["upgrade", "3.7-IV0"]
    refusal = "Could not downgrade metadata.version to 13. Invalid metadata.version 13. Unable to modify " \
              "metadata.version while a ZK migration is in progress."
    assert kafka_error(refusal) == "INVALID_UPDATE_VERSION"
    seen = "Could not downgrade metadata.version to 13. Invalid update version 13 for feature metadata.version. " \
           "Broker 2 only supports versions 21"  # Kafka 3.9.2, in dual write
    assert kafka_error(seen) == "INVALID_UPDATE_VERSION"
    assert kafka_error("Could not downgrade metadata.version to 13. Timed out") == "UNKNOWN_SERVER_ERROR"


def test_kafka_scenario_version_without_kafka_is_bad_usage(capsys):
    assert main(["scenario", "--version", "3.6.2", str(REAL[0])]) == 2
    assert "--version names the Kafka release of --kafka" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get(SKIP_ENV) == "1", reason=f"{SKIP_ENV}=1")
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.stem)
def test_kafka_scenario_on_a_real_kafka(path, tmp_path):
    """The file's steps on a real Kafka 3.9.2 give the file's output, as the model does, and nothing is left running."""
    from properties.kafka import install
    from tests.test_kafka_real import _processes_under

    found = install.install(install.DEFAULT_VERSION)
    result = run_file(path, found, tmp_path / "run")
    assert result.passed, "\n".join(result.diffs)
    assert len(result.kafka) == len(result.blocks)
    assert _processes_under(tmp_path) == []


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get(SKIP_ENV) == "1", reason=f"{SKIP_ENV}=1")
def test_kafka_scenario_interrupted_leaves_nothing_running(tmp_path):
    """`kraftcheck scenario --kafka` stopped mid-file (SIGTERM) stops its cluster, as `kafka run` does."""
    import signal

    from properties.kafka import install
    from tests.test_kafka_real import interrupt_leaves_nothing_running

    install.install(install.DEFAULT_VERSION)
    interrupt_leaves_nothing_running(["scenario", "--kafka", str(REAL[0])], tmp_path, "*/broker-*/logs/server.log",
                                     signal.SIGTERM, env={**os.environ, "TMPDIR": str(tmp_path)})
