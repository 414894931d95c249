"""pytest fixtures for a real ZooKeeper 3.8 server (registered in tests/conftest.py).

- ``real_zk_server``: one server per test session (``impl.zk.server.start_server``: loopback, a
  free port, tickTime 100 ms), stopped at the end of the session.
- ``real_zk``: its connect string, ``127.0.0.1:PORT``.

Without Debian's ``zookeeper`` package the fixtures fail with what to install: a missing server
must not pass for a green run. ``KRAFTCHECK_SKIP_REAL_ZK=1`` skips them instead, on machines
that cannot have it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from impl.zk.server import ZkServer, ZooKeeperNotInstalled, start_server

SKIP_ENV = "KRAFTCHECK_SKIP_REAL_ZK"


def serve() -> Iterator[ZkServer]:
    """Start a server, yield it, stop it; skip on request, fail with what to install when it is missing.
    The body of every real-server fixture (``yield from serve()``)."""
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{SKIP_ENV}=1: the tests against a real ZooKeeper server are skipped")
    missing = None
    try:
        server = start_server()
    except ZooKeeperNotInstalled as exc:
        missing = str(exc)
    if missing is not None:  # failed outside the except block: one clear line, no traceback chain
        pytest.fail(f"{missing}; or set {SKIP_ENV}=1 to skip the real-ZooKeeper tests", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def real_zk_server() -> Iterator[ZkServer]:
    yield from serve()


@pytest.fixture(scope="session")
def real_zk(real_zk_server: ZkServer) -> str:
    return real_zk_server.hosts
