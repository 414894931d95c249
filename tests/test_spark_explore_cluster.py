"""The search on a Spark standalone cluster gives the serial engine's counts, verdicts and traces.

The cluster is a standalone master and one one-core worker on 127.0.0.1 (``spark_cluster``,
tests/spark_cluster.py). Its executors import the project from the zip the driver ships, and
rebuild the scope's ``Spec`` from its description; the run directory is a path the driver and the
worker share (one machine here; on several, a shared filesystem).
"""

from __future__ import annotations

import pytest

from properties.spark_explore import SpecRef, spark_search
from tests.spark_cluster import cluster_session
from tests.test_parallel_explore import answers
from tests.test_spark_explore import serial

# Under the slow marker: about 32 s of a test worker (a cluster of its own to start, then the search); the default run
# has the standalone cluster in tests/test_campaign_cluster.py and the same search on local[2] in
# tests/test_spark_explore.py.
pytestmark = [pytest.mark.spark_cluster, pytest.mark.slow]


@pytest.fixture(scope="module")
def session(spark_cluster):
    with cluster_session(spark_cluster, "kraftcheck explore cluster test") as s:
        yield s


def test_spark_search_on_a_standalone_cluster_answers_as_the_serial_engine(session, tmp_path):
    """kraft-metadata-version, complete (10 levels), on the cluster's executors: the serial engine's answers."""
    imports_from = session.sparkContext.parallelize([0], 1).map(
        lambda _: __import__("properties.spark_explore").spark_explore.__file__).collect()[0]
    assert "kraftcheck.zip" in imports_from, imports_from
    ref = SpecRef("kraft-metadata-version")
    on_cluster = spark_search(session, ref, tmp_path / "run", partitions=2)
    assert answers(on_cluster) == answers(serial(ref))
    assert on_cluster.complete and on_cluster.distinct_states == 226
