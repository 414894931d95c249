"""What a simulation is checked by, as the simulator sees it: a port the checks (``properties``) fill.

Rules:
- The simulator is handed its checker, or none, by whoever starts it; nothing in ``impl/``
  knows what checks it (``properties.differential.Differential`` is the one checker there is).
- A checker owns the cluster the simulation runs (it built it, and may have stepped it through a
  warm-up), performs each event on it (``apply``: the actions the implementation says it took),
  and raises ``CheckFailed`` when the implementation breaks what it checks; the simulator stops
  the run there and reports the failure's text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from impl.cluster import Cluster
    from model.actions import Action


class CheckFailed(AssertionError):
    """The implementation broke what its checker checks (``properties.differential.Disagreement``)."""


class Checker(Protocol):
    @property
    def cluster(self) -> Cluster: ...

    @property
    def findings_seen(self) -> set[str]: ...  # documented findings about the seeds the run showed

    def apply(self, action: Action) -> list[Action]: ...
