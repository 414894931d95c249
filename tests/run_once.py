"""``run_once(kind, key, compute)``: a result computed once in the whole test run, whichever xdist worker asks first.

Two tests that need the same expensive result (a scope's exploration, a seeded bug's search) may land on different
workers; ``--dist loadgroup`` does not keep them together here (pytest 9.2, xdist 3.8). The first worker to ask holds
the key's lock while it computes and pickles the result into a folder every worker of the run sees; a worker that asks
meanwhile waits on the lock, then reads it. Each worker also keeps what it has read.
"""

from __future__ import annotations

import fcntl
import pickle
from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture(scope="session")
def shared_folder(tmp_path_factory, worker_id):
    """A folder every worker of this test run sees (xdist gives each worker a base temp folder in one parent)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base if worker_id == "master" else base.parent) / "computed-once"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def run_once(shared_folder) -> Callable[[str, str, Callable[[], Any]], Any]:
    cache: dict[tuple[str, str], Any] = {}

    def compute_once(kind: str, key: str, compute: Callable[[], Any]) -> Any:
        if (kind, key) not in cache:
            path = shared_folder / f"{kind}-{key}.pickle"
            with open(path.with_suffix(".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if path.exists():
                    cache[kind, key] = pickle.loads(path.read_bytes())
                else:
                    cache[kind, key] = compute()
                    partial = path.with_suffix(".partial")
                    partial.write_bytes(pickle.dumps(cache[kind, key]))
                    partial.replace(path)
        return cache[kind, key]

    return compute_once


@pytest.fixture(scope="session")
def correct_liveness(run_once):
    """``correct_liveness(scope, profile)``: the correct model's ``check_liveness`` of every EVENTUALLY property in a
    scope, once in the whole run (the seeded liveness bugs of one scope and the liveness tests share it)."""
    from model import Variant
    from properties.liveness import check_liveness

    return lambda scope, profile: run_once("liveness", f"{scope}@{profile.value}",
                                           lambda: check_liveness(scope, Variant(profile=profile)))


@pytest.fixture(scope="session")
def explored(run_once):
    """``explored(key)``: ``properties.manifest.measure(key)``, the correct model's exploration of a manifest key, once
    in the whole run (tests/test_model_clean.py compares it with the pins; other tests read the same search)."""
    from properties import manifest

    return lambda key: run_once("explored", key, lambda: manifest.measure(key))
