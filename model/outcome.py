"""A step's outcome: accepted (changed or unchanged) or refused, with why and Kafka's error code.

Rules:
- Every handler returns one of three things: the next state (accepted, and something changed),
  an ``Unchanged`` (accepted, and there was nothing to change) or a ``Refused`` (not done: why,
  and Kafka's error code where Kafka answers with one). ``model.step.step`` maps the last two to
  None, as it always has for "not enabled", so the explorer, walks and machines see exactly what
  they saw before; ``model.step.outcome`` keeps them for scripts.
- A refusal may come with effects: a request delivered and answered with an error (a control
  request with a stale epoch leaves the network, a heartbeat's STALE_BROKER_EPOCH makes the
  broker register again, an operator's refused request is spent). ``Refused.after`` is then the
  state with those effects, and it is what ``step`` returns; otherwise it is None. ``Unchanged``
  has the same field for an accepted request that changed nothing but was spent.
- The reason is built where the decision is made: the ``decide_*`` functions return a
  ``Refused`` (or None: no objection) and the handler passes it on, so no second copy of a rule
  says why. ``why`` is a format string over ``args``, formatted only when read; refusals without
  arguments are module constants, so the explorer's hot path, where most candidate actions are
  refused, allocates nothing for them.
"""

from __future__ import annotations

from enum import Enum

from model.record import Record, record
from model.state import ClusterState
from model.types import Errors


@record
class Refused(Record):
    """Not done: why, and Kafka's error code where Kafka answers with one (None: the action is not enabled)."""

    error: Errors | None
    why: str  # a format string over ``args``
    args: tuple[object, ...] = ()
    after: ClusterState | None = None  # delivered and answered with the error: the state with its effects

    @property
    def reason(self) -> str:
        return _formatted(self.why, self.args)

    def delivered(self, after: ClusterState) -> Refused:
        """This refusal as the answer to a request that was delivered, leaving ``after``."""
        return Refused(self.error, self.why, self.args, after)

    def __str__(self) -> str:
        return self.reason if self.error is None else f"{self.error.name} ({self.reason})"


@record
class Unchanged(Record):
    """Accepted, with nothing to change (a heartbeat that finds the broker where it is)."""

    why: str = ""
    args: tuple[object, ...] = ()
    after: ClusterState | None = None  # the request was spent: the state with that spent

    @property
    def reason(self) -> str:
        return _formatted(self.why, self.args)


def _formatted(why: str, args: tuple[object, ...]) -> str:
    return why.format(*args) if args else why


# What a handler returns (``step`` keeps the first and maps the others to their ``after``).
Result = ClusterState | Refused | Unchanged

# The scope's bounds: in a script's session they are lifted, so only explorations meet these.
BUDGET_SPENT = Refused(None, "the scope's budget for this perturbation is spent")
IN_FLIGHT_CAP = Refused(None, "the scope's cap on messages in flight is reached")
# The ZK controller's reassignment is one step to its target (model.zk_era._api_partition_reassignment): none may
# leave out the leader.
MOVES_LEADER = Refused(None, "the target leaves out the leader: a move off it needs the completion the model"
                             " leaves out")


def error_of(refused: Refused | None) -> Errors:
    """A decision's error code: NONE when it has no objection."""
    return Errors.NONE if refused is None else refused.error or Errors.NONE


class Verdict(Enum):
    """What a step came to, as a scenario file prints it."""

    ACCEPTED = "accepted"  # done, and the state changed
    UNCHANGED = "accepted, unchanged"  # done, nothing to change
    REFUSED = "refused"  # not done
    DELIVERED_REFUSED = "delivered, refused"  # the request was delivered and answered with an error


@record
class Outcome(Record):
    """A step's outcome (``model.step.outcome``): the verdict, and the next state ``step`` gives."""

    verdict: Verdict
    state: ClusterState | None  # what ``step`` returns: the next state, or None
    error: Errors | None = None  # Kafka's error code of a refusal, where there is one
    reason: str = ""

    @property
    def accepted(self) -> bool:
        return self.verdict in (Verdict.ACCEPTED, Verdict.UNCHANGED)

    def __str__(self) -> str:
        """``accepted``, ``accepted, unchanged (why)``, ``refused: CODE (why)``, ``delivered, refused: CODE (why)``."""
        if self.verdict in (Verdict.ACCEPTED, Verdict.UNCHANGED):
            return f"{self.verdict.value} ({self.reason})" if self.reason else self.verdict.value
        detail = self.reason if self.error is None else f"{self.error.name} ({self.reason})"
        return f"{self.verdict.value}: {detail}"
