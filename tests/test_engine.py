"""The exploration engine on models other than the Kafka one, and the records it explores.

``properties.explore.search`` takes any model written in the model API (a ``Spec``); the scopes and
the TwoPhase calibration both run on it. The toy model here is small enough to count by hand: a
counter that moves up by one or two modulo ``size``, with a ``Stay`` action that stutters.
"""

from __future__ import annotations

import dataclasses
import gc
import pickle

import pytest

from model.record import record, remembers_last
from properties.explore import Spec, path_to, search


@record
class Counter:
    value: int
    label: str = "c"


@record
class Add:
    amount: int


@record
class Stay:
    pass


def counter_spec(size: int, bad: int | None = None, flag_stutters: bool = False) -> Spec:
    def successors(state: Counter):
        return [(Add(1), Counter((state.value + 1) % size)), (Add(2), Counter((state.value + 2) % size)),
                (Stay(), state)]

    def broken_always(state: Counter) -> list[str]:
        return ["NeverBad"] if state.value == bad else []

    def broken_transitions(before, action, after, skip=frozenset()) -> list[str]:
        return ["NoStutter"] if after is before else []

    return Spec("counter", Counter(0), successors, broken_always,
                broken_transitions=broken_transitions if flag_stutters else None)


def test_search_counts_states_steps_and_levels():
    """7 values, 3 steps from each (the stutter included), every value within 4 levels of 0."""
    result = search(counter_spec(7))
    assert (result.distinct_states, result.generated, result.depth, result.complete) == (7, 21, 4, True)
    assert result.action_counts == {"Add": 14, "Stay": 7}
    assert result.violations == {}


def test_search_finds_the_shortest_trace_to_a_bad_state():
    result = search(counter_spec(7, bad=5))
    trace = result.violations["NeverBad"].actions
    assert sum(a.amount for a in trace) == 5 and len(trace) == 3  # no two steps reach 5


def test_a_stutter_is_checked_though_it_reaches_nothing_new():
    """A stutter is never looked up in the seen-set, but its step checks still run."""
    result = search(counter_spec(5, flag_stutters=True))
    assert result.violations["NoStutter"].actions == [Stay()]
    assert result.distinct_states == 5


def test_stop_at_max_states_and_max_depth_bound_the_search():
    assert search(counter_spec(50), max_depth=2).depth == 2
    assert not search(counter_spec(50), max_depth=2).complete
    assert search(counter_spec(50), max_states=10).distinct_states <= 12
    stopped = search(counter_spec(50, bad=1), stop_at="NeverBad")
    assert "NeverBad" in stopped.violations and not stopped.complete


def test_canonical_states_count_once():
    """With a symmetry map, states with the same representative are one state."""
    spec = dataclasses.replace(counter_spec(8), canonical=lambda s: s.value % 4)
    assert search(spec).distinct_states == 4


def test_search_leaves_the_garbage_collector_as_it_found_it():
    """The engine freezes each level's states out of the collector's reach, and gives them back."""
    assert gc.get_freeze_count() == 0
    search(counter_spec(20))
    assert gc.get_freeze_count() == 0

    def failing(state):
        if state.value == 3:
            raise RuntimeError("the model broke")
        return [(Add(1), Counter(state.value + 1))]

    with pytest.raises(RuntimeError):
        search(Spec("failing", Counter(0), failing, lambda s: []))
    assert gc.get_freeze_count() == 0 and gc.isenabled()


def test_path_to_walks_back_to_the_root():
    parents = {Counter(0): (None, None), Counter(1): (Counter(0), Add(1)), Counter(3): (Counter(1), Add(2))}
    assert path_to(parents, Counter(3)) == [Add(1), Add(2)]


# ---- records -------------------------------------------------------------------------------------


def test_a_record_is_built_by_position_keyword_and_default():
    assert Counter(3) == Counter(value=3) == Counter(3, "c") == Counter(label="c", value=3)
    assert Counter(3).label == "c" and Counter(3, "d").label == "d"
    assert Counter(3) != Counter(3, "d") and hash(Counter(3)) == hash(Counter(value=3))


@pytest.mark.parametrize("call", [lambda: Counter(), lambda: Counter(1, "a", 2), lambda: Counter(1, valu=2),
                                  lambda: Counter(1, value=1)])
def test_a_record_refuses_wrong_arguments(call):
    with pytest.raises(TypeError):
        call()


def test_a_record_stays_frozen_and_pickles():
    c = Counter(4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.value = 5  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(c)) == c and c.replace(value=5) == Counter(5)
    assert Stay() == Stay() and Stay().replace() == Stay()


def test_records_the_fast_init_cannot_serve_keep_the_dataclass_init():
    """A default factory or a __post_init__ needs dataclass's own __init__, which the record keeps."""

    @record
    class WithFactory:
        items: tuple = dataclasses.field(default_factory=tuple)

    @record
    class WithPostInit:
        value: int

        def __post_init__(self):
            if self.value < 0:
                raise ValueError("negative")

    assert WithFactory().items == ()
    with pytest.raises(ValueError):
        WithPostInit(-1)
    assert Counter.__init__.__qualname__ == "Counter.__init__"


@record
class Noted:
    value: int
    note: str = dataclasses.field(default="", compare=False)  # as a state's ghosts: outside its identity


def test_remembers_last_computes_once_per_record_and_tells_equal_records_apart():
    """A view several properties read on one state is computed once; a state equal to it but with other
    ghosts (equality ignores them) gets its own answer: the record is recognised by identity."""
    calls = []

    @remembers_last
    def note_of(r: Noted) -> str:
        calls.append(r)
        return r.note

    first, twin = Noted(1, "first"), Noted(1, "twin")
    assert first == twin and first is not twin
    assert [note_of(first), note_of(first), note_of(twin), note_of(twin), note_of(first)] == [
        "first", "first", "twin", "twin", "first"]
    assert len(calls) == 3 and note_of.__name__ == "note_of"
