"""kraftcheck's model: a pure state-transition model of Kafka's metadata control plane.

Only the standard library is imported here and below. The public surface:

- ``step(state, action, variant=CORRECT) -> state | None``, ``enabled_actions(state, scope)`` and
  ``successors(state, scope)`` (each enabled action with its next state)
- ``SCOPES`` and ``initial_state(scope)``
- ``PROPERTIES`` (the invariant registry) and ``SEEDED_BUGS``

The ZooKeeper era (``model.step``): ZooKeeper, ZK controller election and epoch fencing, broker
generations (KIP-380) and feature versioning (KIP-584). The KRaft side (``model.kraft_step``): the
KRaft quorum, brokers on KRaft (KIP-500) and the whole ZooKeeper-to-KRaft migration with its
rollback (KIP-866). The state changes both share are in ``model.transitions``.
"""

from model.bugs import CORRECT, SEEDED_BUGS, SEEDED_BUGS_BY_NAME, Bug, SeededBug, Variant
from model.invariants import PROPERTIES, Kind, Property
from model.scopes import SCOPES, Scope, initial_state
from model.step import enabled_actions, step, successors

__all__ = [
    "CORRECT",
    "PROPERTIES",
    "SCOPES",
    "SEEDED_BUGS",
    "SEEDED_BUGS_BY_NAME",
    "Bug",
    "Kind",
    "Property",
    "Scope",
    "SeededBug",
    "Variant",
    "enabled_actions",
    "initial_state",
    "step",
    "successors",
]
