"""The clusters the simulator runs: model scopes, built cold, with the simulator's own bounds.

``MIGRATION`` is the issue's whole migration: 3 KRaft controllers with the migration flag and 3 ZooKeeper
brokers already configured for it (KIP-866 §Migration Trigger), 2 partitions of 3 replicas,
from a cold start: ZooKeeper elects a controller, the quorum elects a leader, the driver
migrates, and the simulator's operator rolls the brokers into KRaft and finalizes.
"""

from __future__ import annotations

from model.kraft import ControllerConfig
from model.scopes import SAME_RANGE, SCOPES, Scope
from model.state import Budget
from model.types import BrokerId, Ibp

MIGRATION = Scope(
    name="sim-migration",
    summary="3 migrating KRaft controllers, 3 ZK brokers with the migration configs, 2 partitions; cold",
    ibps=(Ibp.IBP_3_4_IV0,) * 3,
    supported=(SAME_RANGE,) * 3,
    partitions=((BrokerId(0), BrokerId(1), BrokerId(2)), (BrokerId(1), BrokerId(2), BrokerId(0))),
    broker_flags=((True, True),) * 3,
    controllers=(ControllerConfig(migration_enabled=True),) * 3,
    zk_config=1,
    warm=False,
    budget=Budget(max_lag=4),
)

SCENARIOS: dict[str, Scope] = {MIGRATION.name: MIGRATION}


def scenario(name: str) -> Scope:
    """A simulator scenario or any model scope by name; a one-line ValueError for an unknown one."""
    if name in SCENARIOS:
        return SCENARIOS[name]
    if name in SCOPES:
        return SCOPES[name]
    raise ValueError(f"unknown scope {name!r}; expected one of {', '.join([*SCENARIOS, *SCOPES])}")
