"""z3 proofs (``kraftcheck prove``): one engine (``engine``) and the cores written against it.

- ``engine``: the machinery every core shares: actor domains, per-step copies, choices, one named
  obligation per (action, invariant), BMC with replay through the model, induction for N actors
  and for any number of them.
- ``fencing``: the ZooKeeper controller's epoch fencing, with KIP-380's broker epochs.
- ``migration``: the migration's fencing (KIP-866): the claim, the /migration compare-and-set,
  the driver's transition table, KRaft epochs.
- ``heartbeats``: KRaft brokers on one active controller: registrations, broker epochs, fencing,
  heartbeats held in the network and delivered late, and responses lost after their records were
  written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from properties.proofs.engine import Core


def cores() -> tuple[Core, ...]:
    """Every z3 core, in the order ``kraftcheck prove`` reports them (imported on first use: z3 loads with them)."""
    from properties.proofs.fencing import FENCING
    from properties.proofs.heartbeats import HEARTBEAT_CORE
    from properties.proofs.migration import MIGRATION_CORE

    return FENCING, MIGRATION_CORE, HEARTBEAT_CORE


def module_path(core: Core) -> str:
    """The source file that writes ``core``'s encoding, relative to the repository (the module of its projection)."""
    return core.project.__module__.replace(".", "/") + ".py"
