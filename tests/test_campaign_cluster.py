"""A campaign on a Spark standalone cluster gives the tables a local campaign gives.

The cluster is a Spark standalone master and one worker (one core) on 127.0.0.1 (the ``spark_cluster``
fixture of tests/spark_cluster.py). Its executors import the project from the zip the driver ships
(``properties.campaign.spark.ship_packages``). The same plan also runs
through ``spark-submit properties/campaign/__main__.py`` in local mode, at the same time; the tables must
match, timing columns aside. A seeded bug's campaign shows the shrink tasks run on the executors.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from properties.campaign.driver import run_campaign
from properties.campaign.options import make_plan
from tests.spark_cluster import cluster_session
from tests.test_campaign import tables

pytestmark = pytest.mark.spark_cluster

ROOT = Path(__file__).resolve().parent.parent
PLAN = dict(seeds=4, steps=400, partition_size=1)
BUGGY = dict(seeds=2, steps=200, partition_size=1, mutant="impl_broker_epoch_from_session_id", shrink_seconds=20)


@pytest.fixture(scope="module")
def local_submit(tmp_path_factory):
    """The plan in local mode through spark-submit, started first so that it runs while the cluster starts."""
    out = tmp_path_factory.mktemp("local") / "out"
    submit = Path(sys.executable).with_name("spark-submit")
    entry = ROOT / "properties" / "campaign" / "__main__.py"
    args = [str(submit), "--master", "local[2]", str(entry), "--json", "--out", str(out)]
    for key, value in PLAN.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    child = subprocess.Popen(args, cwd=out.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield child, out
    if child.poll() is None:
        child.kill()
        child.wait()


@pytest.fixture(scope="module")
def session(local_submit, spark_cluster):
    """A session on the cluster; the spark-submit run is started first, so that it runs while the cluster starts."""
    with cluster_session(spark_cluster, "kraftcheck cluster test") as s:
        yield s


def test_campaign_on_a_standalone_cluster_matches_local_mode(session, local_submit, tmp_path):
    """The same plan on the cluster and through spark-submit in local mode: the same tables."""
    executors_import_from = session.sparkContext.parallelize([0], 1).map(
        lambda _: __import__("properties.campaign").campaign.__file__).collect()[0]
    assert "kraftcheck.zip" in executors_import_from, executors_import_from
    summary = run_campaign(make_plan(**PLAN, out=tmp_path), spark=session)
    assert summary["master"].startswith("spark://127.0.0.1:")
    child, local_out = local_submit
    stdout, stderr = child.communicate(timeout=180)
    assert child.returncode == 0, stderr[-3000:]
    assert '"master": "local[2,4]"' in stdout
    assert tables(tmp_path) == tables(local_out)
    assert len(tables(tmp_path)["runs"]) == PLAN["seeds"]


def test_campaign_on_a_cluster_shrinks_on_the_executors(session, tmp_path):
    """A seeded bug's campaign on the cluster: violations grouped and shrunk, as one process does it."""
    run_campaign(make_plan(**BUGGY, out=tmp_path / "cluster"), spark=session)
    run_campaign(make_plan(**BUGGY, out=tmp_path / "serial"), "serial")
    on_cluster = tables(tmp_path / "cluster")
    assert on_cluster == tables(tmp_path / "serial")
    assert [v["seed"] for v in on_cluster["violations"]] == list(range(BUGGY["seeds"]))
    assert all(v["trace_file"] for v in on_cluster["violations"])
    for v in on_cluster["violations"]:
        assert (tmp_path / "cluster" / v["trace_file"]).is_file()
