"""kraftcheck's model: a pure state-transition model of Kafka's metadata control plane.

Only the standard library is imported here and below. The public surface:

- ``step(state, action, variant=CORRECT) -> state | None``, ``enabled_actions(state, scope)`` and
  ``successors(state, scope)`` (each enabled action with its next state)
- ``SCOPES`` and ``initial_state(scope)``
- ``PROPERTIES`` (the invariant registry) and ``SEEDED_BUGS``

``model.step`` dispatches each action to the module of its part, and lists what is enabled:

- ``model.zk_era``: ZooKeeper, the network, ZK controller election and epoch fencing, broker
  generations (KIP-380) and feature versioning (KIP-584);
- ``model.kraft_quorum``: the KRaft quorum, brokers on KRaft and admin writes (KIP-500);
- ``model.kraft_migration``: the ZooKeeper-to-KRaft migration's driver and the operator's steps
  of its runbooks, rollback included (KIP-866).

The state changes they share are in ``model.transitions``. The properties are registered in
``model.registry`` by a module per part (``model.zk_invariants``, ``model.kraft_invariants``,
``model.migration_invariants``) and queried through ``model.invariants``.
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
