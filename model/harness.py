"""Test-harness actions: requests a script injects or sends again, with any epochs. Never explored.

Rules:
- An ``Inject`` stands for a request sent by a sender the model does not track as a process: a
  test's own client (Kafka's BrokerEpochIntegrationTest sends its control requests that way), a
  request sent twice (a retry whose first answer was lost), or one from a process of an older
  generation, with whatever epochs the script gives. Nothing checks that its sender could send it.
- It goes through the handling of real requests, never a copy of it: a control request or a
  controlled shutdown reaches ``model.zk_era.deliver_message``, the code ``Deliver`` runs (or is
  put in flight, ``deliver=False``, for a later ``Deliver``); a BrokerRegistration or a
  BrokerHeartbeat reaches the active controller's side of the exchange
  (``model.kraft_quorum.handle_registration`` / ``handle_heartbeat``), and a ControllerRegistration
  ``handle_controller_registration``. The answer goes to the
  script, in the step's outcome (``model.step.outcome``), not to a broker process: the broker
  whose id the request carries learns nothing from it.
- ``model.step.candidate_actions`` never offers an ``Inject`` and ``Inject`` is not in
  ``model.actions.ACTION_TYPES``, so no exploration, walk, machine or pinned count sees one:
  only scripts do (``properties.script``, the scenario files' ``inject``).
- Operators' requests need no harness: ``UpdateFeatures``, ``UpdateMetadataVersion`` and
  ``AlterConfigs`` are actions that already take any level and upgrade type.
"""

from __future__ import annotations

from typing import TypeGuard, assert_never

from model.bugs import Variant
from model.kraft import FIRST_CONTROLLER_ID
from model.kraft_quorum import (
    handle_controller_registration,
    handle_heartbeat,
    handle_registration,
    heartbeat_unchanged,
)
from model.outcome import IN_FLIGHT_CAP, Refused, Result, Unchanged
from model.record import Record, record
from model.state import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ClusterState,
    ControllerRegistrationRequest,
    KRaftRequest,
    Message,
)
from model.zk_era import deliver_message


@record
class Inject(Record):
    """A script's request, as its sender would send it, with any epochs. (test harness: never explored)

    A control request or a controlled shutdown is delivered at once, as ``Deliver`` would deliver it
    (an equal message in flight stays there: a request sent twice), or with ``deliver=False`` put in
    flight for a later ``Deliver``. A request to a KRaft controller is an exchange, always delivered."""

    request: Message | KRaftRequest
    deliver: bool = True


HarnessAction = Inject
HARNESS_ACTION_TYPES: tuple[type, ...] = (Inject,)


def is_harness_action(action: object) -> TypeGuard[HarnessAction]:
    return type(action) is Inject


def handle(state: ClusterState, action: HarnessAction, variant: Variant) -> Result:
    """The state after an injected request, or why it is refused or changes nothing (``model.outcome``)."""
    request = action.request
    if isinstance(request, BrokerRegistrationRequest | BrokerHeartbeatRequest | ControllerRegistrationRequest):
        if not action.deliver:
            return _EXCHANGE
        if not 0 <= request.controller - FIRST_CONTROLLER_ID < len(state.controllers):
            return Refused(None, "there is no controller {}", (request.controller,))
        return _exchange(state, request, variant)
    if not 0 <= request.dest < len(state.brokers):
        return Refused(None, "there is no broker {}", (request.dest,))
    if not action.deliver:
        if request in state.network:
            return Unchanged("an equal message is in flight")
        network = state.network | {request}
        return IN_FLIGHT_CAP if len(network) > state.budget.max_in_flight else state.replace(network=network)
    return deliver_message(state, request, variant)


_EXCHANGE = Refused(None, "a request to a KRaft controller is an exchange: it is delivered at once")


def _exchange(state: ClusterState, request: KRaftRequest, variant: Variant) -> Result:
    match request:
        case BrokerRegistrationRequest():
            answer = handle_registration(state, request, variant)
            if isinstance(answer, Refused):
                return answer
            after, epoch = answer
            return after if after is not state else Unchanged("the registration stands: broker epoch {}", (epoch,))
        case BrokerHeartbeatRequest():
            heartbeat = handle_heartbeat(state, request, variant)
            if isinstance(heartbeat, Refused):
                return heartbeat
            after, response, wrote = heartbeat
            return after if wrote else heartbeat_unchanged(response)
        case ControllerRegistrationRequest():
            return handle_controller_registration(state, request, variant)
        case _:
            assert_never(request)
