"""The search on Spark gives the serial engine's answers: counts, verdicts, witnesses, the same traces.

``properties.spark_explore`` runs the breadth-first search as one Spark job a level, the seen-set
split by fingerprint over partitions kept in a run directory. The serial engine is the reference:
every test runs both and compares everything but the time. One local[2] session serves the module
(starting one costs about 10 s); a level costs about half a second of Spark's overhead, so the
scopes here are small and the bigger ones are marked slow.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from model import SEEDED_BUGS_BY_NAME, Variant
from model.migration import Profile
from model.record import Record, record
from model.types import Ibp
from properties import cli
from properties.explore import explore
from properties.fingerprint import Fingerprinter
from properties.spark_explore import CheckpointError, SpecRef, finished_level, open_run, spark_search
from tests.test_parallel_explore import answers


@pytest.fixture(scope="module")
def spark():
    from properties.campaign import spark as spark_session

    session = spark_session.session("local[2]", app_name="kraftcheck explore test")
    yield session
    session.stop()


def serial(ref: SpecRef, depth: int | None = None):
    variant = Variant(frozenset(SEEDED_BUGS_BY_NAME[b].bug for b in ref.bugs), Profile(ref.profile))
    return explore(ref.scope, variant, max_depth=depth, symmetry=ref.symmetry)


@pytest.mark.parametrize(
    ("ref", "depth", "partitions"),
    [
        (SpecRef("bounce", bugs=("accept_stale_broker_epoch",)), 5, 2),  # a violation at depth 5
        (SpecRef("kraft-quorum", bugs=("vote_twice_in_epoch",), symmetry=True), 6, 3),  # under symmetry
        pytest.param(SpecRef("kraft-born"), None, 2, marks=pytest.mark.slow),  # complete, 17 levels
        pytest.param(SpecRef("kraft-broker-restart", profile="kafka-3.9"), None, 4, marks=pytest.mark.slow),
    ],
)
def test_spark_search_answers_as_the_serial_engine(spark, tmp_path, ref, depth, partitions):
    """Same counts per action type, and for every property the very trace the serial engine keeps."""
    on_spark = spark_search(spark, ref, tmp_path / "run", max_depth=depth, partitions=partitions)
    expected = serial(ref, depth)
    assert answers(on_spark) == answers(expected)
    assert bool(expected.violations) == bool(ref.bugs)


def test_spark_search_resumes_from_its_last_finished_level(spark, tmp_path):
    """A run stopped after level 4, with a half-written level 5 left as a killed run leaves it, resumed:
    the counts and traces of an uninterrupted (serial) search of the whole scope."""
    ref, run = SpecRef("kraft-metadata-version"), tmp_path / "run"
    first = spark_search(spark, ref, run, max_depth=4, partitions=3)
    assert (first.depth, first.complete, finished_level(run)) == (4, False, 4)
    stray = run / "level-000005"
    stray.mkdir()
    shutil.copy(run / "level-000004" / "seen-00000.npy", stray / "seen-00000.npy")  # no done.json: unfinished
    resumed = spark_search(spark, ref, run, partitions=5)  # the run keeps the partitions it began with
    assert answers(resumed) == answers(serial(ref))
    assert resumed.complete and json.loads((run / "run.json").read_text())["partitions"] == 3
    assert not list((run / "level-000004").glob("seen-*"))  # what a finished run no longer needs is gone


@pytest.mark.slow
def test_a_killed_explore_resumes_from_its_last_finished_level(spark, tmp_path):
    """`kraftcheck explore --master local[2] --checkpoint DIR` killed (SIGKILL, the JVM and its Python workers
    with it) once level 3 is finished, then resumed: the serial engine's answers."""
    import os
    import signal
    import subprocess
    import sys
    import time

    run = tmp_path / "run"
    root = Path(__file__).resolve().parent.parent
    child = subprocess.Popen([sys.executable, "-m", "properties.cli", "explore", "--scope", "kraft-born", "--master",
                              "local[2]", "--checkpoint", str(run), "--json"], cwd=root, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (run / "level-000003" / "done.json").exists():
            assert child.poll() is None and time.monotonic() < deadline, "the run ended or stalled before level 3"
            time.sleep(0.05)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    stopped = finished_level(run)
    assert stopped is not None and 3 <= stopped < 17
    resumed = spark_search(spark, SpecRef("kraft-born"), run)
    assert answers(resumed) == answers(serial(SpecRef("kraft-born")))


def test_a_run_directory_of_another_search_is_refused(tmp_path):
    """Resuming with other options would mix two state graphs: refused, one line, before Spark starts."""
    run = tmp_path / "run"
    open_run(run, SpecRef("kraft-born"), 2)
    with pytest.raises(CheckpointError, match="holds another search"):
        open_run(run, SpecRef("kraft-born", symmetry=True), 2)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    with pytest.raises(CheckpointError, match="holds no kraftcheck explore run"):
        open_run(tmp_path / "full", SpecRef("kraft-born"), 2)


def test_explore_cli_on_spark_prints_the_serial_answer(spark, capsys, tmp_path):
    """`kraftcheck explore --master local[2]` and the serial engine print the same JSON but for time and master."""
    printed = []
    base = ["explore", "--scope", "bounce", "--bug", "accept_stale_broker_epoch", "--depth", "5", "--json"]
    for extra in ([], ["--master", "local[2]", "--checkpoint", str(tmp_path / "run")]):
        assert cli.main(base + extra) == 1
        out = json.loads(capsys.readouterr().out)
        for key in ("seconds", "workers", "master"):
            out.pop(key)
        chance = out.pop("collision_chance")
        assert chance is None if not extra else 0 < chance < 1e-30  # exact states, or 128-bit fingerprints
        printed.append(out)
    assert printed[0] == printed[1]
    assert spark.sparkContext._jsc is not None  # the session the caller made is still running


def test_explore_cli_on_spark_interrupted_says_how_to_resume(spark, tmp_path, capsys, monkeypatch):
    """Ctrl-C during the search: exit 130 and one line naming the level the same command resumes from."""
    from properties import spark_explore

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    run = tmp_path / "run"
    open_run(run, SpecRef("bounce"), 2)
    (run / "level-000002").mkdir()
    (run / "level-000002" / "done.json").write_text("{}")
    monkeypatch.setattr(spark_explore, "spark_search", interrupted)
    code = cli.main(["explore", "--scope", "bounce", "--master", "local[2]", "--checkpoint", str(run)])
    err = capsys.readouterr().err
    assert code == cli.INTERRUPTED
    assert err == f"kraftcheck explore: interrupted; the same command resumes from level 2 in {run}\n"


def test_explore_cli_refuses_a_checkpoint_of_another_search(tmp_path, capsys):
    run = tmp_path / "run"
    open_run(run, SpecRef("kraft-born"), 2)
    code = cli.main(["explore", "--scope", "bounce", "--master", "local[1]", "--checkpoint", str(run)])
    err = capsys.readouterr().err
    assert code == cli.USAGE and err.count("\n") == 1 and "holds another search (scope kraft-born" in err


def test_fingerprints_agree_with_equality_and_across_hash_seeds():
    """Equal states (the ghost aside) share a fingerprint; every state of a complete scope has its own; and
    the fingerprints do not move with PYTHONHASHSEED (checked in two fresh processes)."""
    import subprocess
    import sys

    spec = SpecRef("kraft-metadata-version").build()
    seen, frontier = {spec.initial}, [spec.initial]
    while frontier:
        frontier = [n for s in frontier for _, n in spec.successors(s) if n not in seen and not seen.add(n)]
    assert len({Fingerprinter()(s) for s in seen}) == len(seen) == 332
    code = ("from properties.spark_explore import SpecRef; from properties.fingerprint import fingerprint; "
            "print(fingerprint(SpecRef('kraft-metadata-version').build().initial).hex())")
    root = Path(__file__).resolve().parent.parent
    prints = {subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                             env={"PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}).stdout for seed in ("1", "2")}
    assert len(prints) == 1 and prints != {""}


@record
class _A(Record):
    x: object


@record
class _B(Record):
    x: object


def test_fingerprints_read_what_equality_reads():
    """A frozenset's order of building, a record's class, an IntEnum equal to its int, True equal to 1."""
    fp = Fingerprinter()
    built = frozenset(_A(i) for i in range(50))
    assert fp(frozenset(_A(i) for i in reversed(range(50)))) == fp(built) == Fingerprinter()(built)
    assert fp(frozenset({_A(1)})) != fp(frozenset({_B(1)}))  # hash() cannot tell these apart
    assert fp(_A(Ibp.IBP_3_4_IV0)) == fp(_A(34)) and _A(Ibp.IBP_3_4_IV0) == _A(34)
    assert fp(_A(True)) == fp(_A(1)) and fp(_A((1, 2))) != fp(_A((2, 1))) and fp(_A(None)) != fp(_A("None"))
    with pytest.raises(TypeError, match="no fingerprint"):
        fp(_A(1.5))
