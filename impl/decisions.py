"""Which way each named decision of the implementation went, counted: the decision coverage of a run.

Rules:
- A decision is a pure function of what its node knows (``decide_*`` and its kin), marked with
  ``@decision(...)`` and the outcomes it can have, so that a report can show an outcome no run
  reached ("a rule that no run reached is visible").
- Counting is observation only: nothing in ``impl/`` reads ``TAKEN``, and the marked function
  returns exactly what it did, so a seed replays byte for byte whether anyone counts or not.
  ``properties.runs.run_seed`` clears ``TAKEN`` before a run and reads it after.
"""

from __future__ import annotations

import functools
import importlib
from collections import Counter
from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# The modules whose functions are marked: ``registered`` imports them (a test keeps the list whole).
DECIDING_MODULES = (
    "impl.broker", "impl.zk_controller", "impl.kraft_broker", "impl.kraft_controller", "impl.kraft.driver",
    "impl.kraft.raft",
)
# "module.function" -> the outcomes it can have, in a fixed order
OUTCOMES: dict[str, tuple[str, ...]] = {}
# ("module.function", outcome) -> how many times; cleared by whoever counts a run
TAKEN: Counter[tuple[str, str]] = Counter()


def registered() -> dict[str, tuple[str, ...]]:
    """Every marked decision with its outcomes, whichever modules were imported so far."""
    for module in DECIDING_MODULES:
        importlib.import_module(module)
    return OUTCOMES


def outcome_of(result: Any) -> str:
    """An outcome's name: an error code's, yes or no, none, or the first element's for a pair."""
    if isinstance(result, bool):
        return "yes" if result else "no"
    if isinstance(result, Enum):
        return result.name
    if result is None:
        return "none"
    if isinstance(result, tuple) and result and isinstance(result[0], Enum):
        return result[0].name
    return type(result).__name__


def decision(*outcomes: str, label: Callable[[Any], str] = outcome_of) -> Callable[[F], F]:
    """Marks a decision with its possible outcomes; each call counts the one it had."""

    def mark(fn: F) -> F:
        name = f"{fn.__module__.removeprefix('impl.')}.{fn.__qualname__}"
        OUTCOMES[name] = outcomes

        @functools.wraps(fn)
        def counted(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            TAKEN[name, label(result)] += 1
            return result

        return counted  # type: ignore[return-value]

    return mark
