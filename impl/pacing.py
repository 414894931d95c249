"""When a node tries a step (again): Kafka's timers and retry backoffs, in simulated milliseconds, sans-IO.

Rules:
- A node offers a step it knows is due (a pending watch event, the next state of its migration
  driver, a vote it lacks) at once. A step it cannot know the outcome of (a poll of a znode it
  holds no watch on, a request to a controller that may not lead, a heartbeat) waits behind a
  gate: ``Gates.open(key, now)``. Its handler closes the gate (``close``: the next heartbeat, an
  election timeout, a retry backoff after a refusal) or opens it (``clear``: something told the
  node the step is due, such as a registration's first heartbeat).
- Gates are the process's memory: a new process starts with all of them open unless it sets
  them. They depend only on ``now`` and that memory, never on a clock or a random draw (a
  per-node jitter is a function of the node id), so at a late enough ``now`` every gate is
  open and a node's offers are every step it could take (``tests/test_impl_offers.py`` checks it
  on walks of every scope).
- ``deadline()`` is the earliest time a gate that the last ``offers`` found closed opens; the
  simulator recomputes a node's offers once it has passed (``impl.sim.simulator``).
- ``committed(handler, done)`` runs a handler and tells ``done`` whether it yielded a ``Trace``:
  the common case of "back off after a refusal".
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from impl.protocol import Handler, Trace

# Kafka's defaults, where it has one (server.properties names); the others are this
# implementation's polls of what Kafka learns from a ZooKeeper watch the model does not arm.
BROKER_HEARTBEAT_INTERVAL_MS = 2_000  # broker.heartbeat.interval.ms
BROKER_SESSION_TIMEOUT_MS = 9_000  # broker.session.timeout.ms
ELECTION_TIMEOUT_MS = 1_000  # controller.quorum.election.timeout.ms
FETCH_TIMEOUT_MS = 2_000  # controller.quorum.fetch.timeout.ms
RETRY_BACKOFF_MS = 100  # controller.quorum.retry.backoff.ms: a vote or fetch request that failed
FETCH_WAIT_MS = 200  # a follower's or broker's fetch that found nothing new waits (a long poll's wait)
REQUEST_RETRY_MS = 500  # a request to a controller that did not take it (NOT_CONTROLLER, unreachable)
POLL_MS = 1_000  # polls of ZooKeeper standing in for a watch, and the migration driver's poll
RETRY_CAP_MS = BROKER_SESSION_TIMEOUT_MS // 2  # BrokerLifecycleManager's resend backoff grows to this


class Gates:
    def __init__(self) -> None:
        self._until: dict[Hashable, int] = {}
        self._failures: dict[Hashable, int] = {}
        self._deadline: int | None = None

    def begin(self) -> None:
        """Start computing offers: forget the deadline the previous offers found."""
        self._deadline = None

    def open(self, key: Hashable, now: int) -> bool:
        until = self._until.get(key, 0)
        if now >= until:
            return True
        if self._deadline is None or until < self._deadline:
            self._deadline = until
        return False

    def passed(self, key: Hashable, now: int) -> bool:
        """Whether ``key``'s timer has run out, leaving the offers' deadline as it is (a request's check)."""
        return now >= self._until.get(key, 0)

    def close(self, key: Hashable, until: int) -> None:
        self._until[key] = until

    def clear(self, key: Hashable) -> None:
        self._until.pop(key, None)

    def fail(self, key: Hashable, now: int, base: int = REQUEST_RETRY_MS, cap: int = RETRY_CAP_MS) -> None:
        """Another failure in a row: retry after an exponential backoff (Kafka's ExponentialBackoff, no jitter)."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        self.close(key, now + min(cap, base << min(failures, 16)))

    def succeed(self, key: Hashable) -> None:
        self._failures.pop(key, None)
        self.clear(key)

    def clear_all(self) -> None:
        self._until.clear()
        self._failures.clear()
        self._deadline = None

    def deadline(self) -> int | None:
        return self._deadline


def earliest(*deadlines: int | None) -> int | None:
    first = None
    for d in deadlines:
        if d is not None and (first is None or d < first):
            first = d
    return first


def committed(handler: Handler, done: Callable[[bool], None]) -> Handler:
    """Run ``handler`` as it is, then call ``done(True)`` if it yielded a Trace, else ``done(False)``."""
    traced = False
    value, error = None, None
    while True:
        try:
            effect = handler.throw(error) if error is not None else handler.send(value)
        except StopIteration as stop:
            done(traced)
            return stop.value
        traced = traced or isinstance(effect, Trace)
        try:
            value, error = (yield effect), None
        except Exception as e:  # noqa: BLE001 - a ZooKeeper error thrown in by the runner: pass it on
            value, error = None, e
