"""Scenario files (tests/scenarios/*.txt) run against the model, and the runner's own behaviour.

Each file is a situation written as commands and the output the model must give (KIP sections
in its comments); a file whose output changes fails here with the diff, as ``kraftcheck scenario``
prints it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from properties.cli import main
from properties.scenario import ScenarioError, run_file

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.txt"))


def test_scenarios_exist():
    assert len(SCENARIOS) >= 3


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_gives_its_expected_output(path):
    result = run_file(path)
    assert result.passed, "\n\n".join(result.diffs)


def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    target.write_text((Path(__file__).parent / "scenarios" / name).read_text())
    return target


def test_scenario_that_disagrees_prints_a_diff_and_exits_1(tmp_path, capsys):
    """An expected output that is no longer the model's: the block, the line and a unified diff."""
    path = _copy(tmp_path, "zombie-controller.txt")
    shown = "show brokers[1].controller_epoch\n----\n"
    path.write_text(path.read_text().replace(shown + "2", shown + "1"))
    assert main(["scenario", str(path)]) == 1
    out = capsys.readouterr().out
    assert "1 of 10 blocks differ" in out
    assert f"{path}:" in out and "show brokers[1].controller_epoch" in out
    assert "-1" in out.splitlines() and "+2" in out.splitlines()


def test_scenario_rewrite_writes_the_models_output_and_keeps_the_comments(tmp_path, capsys):
    path = _copy(tmp_path, "kraft-claim.txt")
    original = path.read_text()
    blank = "\n".join(line for line in original.splitlines() if not line.startswith(("accepted", "  ", "refused")))
    path.write_text(blank)
    assert main(["scenario", str(path)]) == 1
    assert main(["scenario", "--rewrite", str(path)]) == 0
    assert path.read_text() == original
    assert main(["scenario", str(path)]) == 0


def test_scenario_rewrite_keeps_the_comments_before_every_block(tmp_path):
    """A comment before any command (a Kafka test case's name and citation) stays with it through --rewrite."""
    path = tmp_path / "commented.txt"
    path.write_text("# the file\n\ninit scope=fencing\n----\n\n# case: first\n# why it matters\nshow brokers[0].epoch\n"
                    "----\n\n# case: second\n\nshow brokers[1].epoch\n----\n")
    assert main(["scenario", "--rewrite", str(path)]) == 0
    text = path.read_text()
    assert "# case: first\n# why it matters\nshow brokers[0].epoch\n----\n5\n" in text
    assert "# case: second\n\nshow brokers[1].epoch\n----\n7\n" in text
    assert text.startswith("# the file\n\ninit scope=fencing\n----\nscope fencing (warm)")


def test_scenario_init_stages_the_kraft_side_and_sets_the_metadata_version(tmp_path):
    """``stage=none`` leaves the KRaft quorum cold (ZooKeeper's side warm); ``metadata_version`` is every
    broker's IBP and the quorum's bootstrap level, so a kafka-3.9 quorum can bootstrap a migration."""
    path = tmp_path / "staged.txt"
    path.write_text("init scope=handover profile=kafka-3.9 stage=none metadata_version=IBP_3_6_IV1\n----\n\n"
                    "show controllers[0].driver.state\n----\n\nshow brokers[0].config.ibp\n----\n\n"
                    "step StartElection controller=3000\n----\n\nstep BecomeLeader controller=3000\n----\n\n"
                    "show controllers[0].active\n----\n")
    result = run_file(path)
    shaped = "scope handover (warm, stage none, metadata.version IBP_3_6_IV1), profile kafka-3.9"
    assert result.outputs[0].startswith(shaped)
    assert result.outputs[1] == "MigrationDriverState.UNINITIALIZED"
    assert result.outputs[2] == "Ibp.IBP_3_6_IV1"
    assert result.outputs[-1] == "True"
    path.write_text(path.read_text().replace(" metadata_version=IBP_3_6_IV1", ""))
    assert run_file(path).outputs[-1] == "False"  # at 3.4-IV0 Kafka 3.9 refuses to bootstrap a migration (resigns)


def test_scenario_reports_a_broken_invariant_in_the_step_that_breaks_it():
    """Every invariant is checked on every step: the seeded bug's file ends in VIOLATED."""
    result = run_file(Path(__file__).parent / "scenarios" / "seeded-bug-czxid.txt")
    assert result.outputs[-1].endswith("VIOLATED: CzxidFixedForNodeLife")
    assert not any("VIOLATED" in output for output in result.outputs[:-1])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("init scope=fencing\nshow zk\n", "is not followed by a '----' line"),
        ("step ElectController broker=1\n----\n", "'step' before 'init'"),
        ("init scope=nowhere\n----\n", "unknown scope 'nowhere'"),
        ("init scope=fencing profile=kafka-4\n----\n", "unknown profile 'kafka-4'"),
        ("init scope=fencing bugs=no_such_bug\n----\n", "unknown seeded bug 'no_such_bug'"),
        ("init scope=fencing\n----\n\nfly away\n----\n", "unknown command 'fly'"),
        ("init scope=fencing\n----\n\nstep ElectController brokr=1\n----\n", "ElectController"),
        ("init scope=fencing\n----\n\nshow brokers[7]\n----\n", "the state has no 'brokers[7]'"),
        ("init scope=handover stage=later\n----\n", "unknown stage 'later'"),
        ("init scope=fencing stage=quorum\n----\n", "scope fencing has no KRaft side to stage"),
        ("init scope=handover metadata_version=IBP_9_9\n----\n", "unknown metadata_version 'IBP_9_9'"),
        ("# nothing but a comment\n", "no command"),
        ("init scope=fencing\n----\n\n# said after the last command\n", "a comment after the last command"),
    ],
)
def test_scenario_bad_file_is_one_line_and_exit_2(tmp_path, capsys, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    before = path.read_text()
    with pytest.raises(ScenarioError, match="bad.txt"):
        run_file(path)
    assert main(["scenario", "--rewrite", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].startswith("kraftcheck scenario: error:")
    assert path.read_text() == before  # nothing half-written


def test_scenario_missing_file_exits_2(tmp_path, capsys):
    assert main(["scenario", str(tmp_path / "absent.txt")]) == 2
    assert "absent.txt" in capsys.readouterr().err


def test_scenario_against_the_implementation_agrees_and_catches_its_seeded_bug(tmp_path, capsys):
    """``--impl``: the implementation performs every step too, checked against the model after each.
    The correct one agrees on every file; with a broker that skips the controller-epoch check
    (KIP-380), the zombie's stale LeaderAndIsr is applied and the step disagrees."""
    for path in SCENARIOS:
        result = run_file(path, against_impl=True)
        assert result.passed, "\n\n".join(result.diffs)
        assert bool(result.impl_skipped) == ("bugs=" in path.read_text())
    buggy = _copy(tmp_path, "zombie-controller.txt")
    text = buggy.read_text().replace(
        "init scope=fencing profile=kafka-3.9\n----\nscope fencing (warm), profile kafka-3.9,",
        "init scope=fencing profile=kafka-3.9 impl_bugs=impl_accept_stale_controller_epoch\n----\n"
        "scope fencing (warm), profile kafka-3.9, implementation bugs impl_accept_stale_controller_epoch,",
    )
    buggy.write_text(text)
    assert run_file(buggy).passed  # the model alone knows nothing of the implementation's bug
    assert main(["scenario", "--impl", str(buggy)]) == 1
    out = capsys.readouterr().out
    assert "the implementation disagrees" in out
    assert 'controller_id": 0, "controller_epoch": 1' in out  # the zombie's request is the step


def test_scenario_rewrite_with_impl_is_refused(tmp_path, capsys):
    path = _copy(tmp_path, "kraft-claim.txt")
    before = path.read_text()
    assert main(["scenario", "--rewrite", "--impl", str(path)]) == 2
    assert "--rewrite writes the model's outputs" in capsys.readouterr().err
    assert path.read_text() == before
