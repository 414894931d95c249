"""Frozen records: the one way the model declares state, actions and messages.

A record is a frozen, slotted, hashable dataclass with a generated ``replace`` method and a
faster ``__init__``. Both are generated once per class as straight-line code, because the
model's hot path (``step``) builds a few records per action and the exploration builds one per
new state:
- ``dataclasses.replace`` walks the field list and builds a kwargs dict on every call; the
  generated ``replace`` is about twice as fast (measured in bench/);
- a frozen dataclass's ``__init__`` stores each field through ``object.__setattr__``, looked up
  on every store; the generated one calls each slot's own descriptor, which is what
  ``object.__setattr__`` ends up calling (0.32 us instead of 0.52 us for four fields). Frozen
  only forbids ``__setattr__`` on the instance; the records stay as immutable as before.

For the type checker: ``record`` is a ``dataclass_transform``, so mypy knows each record's
fields, its ``__init__`` and that it is frozen; every record class derives from ``Record``, which
declares ``replace`` as returning the record's own type. What ``replace`` cannot say is which
keywords a class takes (a signature per class would need a mypy plugin): a wrong name is a
TypeError when the call runs (the generated ``replace`` takes only the field names), a wrong
type is not caught by either.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, fields
from functools import wraps
from types import FunctionType
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar, dataclass_transform

R = TypeVar("R", bound="Record")
T = TypeVar("T")

# The default of every generated ``replace`` parameter: "keep the field as it is".
_KEEP = object()


class Record:
    """The base of every record class of the model (``@record class X(Record)``); it adds no field.

    Its one slot caches the record's hash (see ``record``); it is not a field, so it takes no part in
    equality, ``repr``, ``replace`` or pickling. ``record`` works on a class without this base too
    (bench/ and tests/ declare such records), but then the hash is not cached and the type checker
    does not know the class's ``replace``."""

    __slots__ = ("_cached_hash",)

    if TYPE_CHECKING:
        # What ``dataclass`` gives every record class; typed as typeshed's DataclassInstance has it.
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

        def replace(self, **changes: object) -> Self:
            """A copy with ``changes`` applied (generated per class by ``record``)."""


@dataclass_transform(frozen_default=True)
def record(cls: type[R]) -> type[R]:
    """Make ``cls`` a frozen, slotted dataclass with a fast ``replace(**changes)`` and ``__init__``."""
    cls = dataclass(frozen=True, slots=True)(cls)
    names = [f.name for f in fields(cls)]
    namespace: dict[str, object] = {"_KEEP": _KEEP, "_cls": cls}
    if names:
        params = ", ".join(f"{n}=_KEEP" for n in names)
        args = ", ".join(f"self.{n} if {n} is _KEEP else {n}" for n in names)
        source = f"def replace(self, *, {params}):\n    return _cls({args})\n"
    else:
        source = "def replace(self):\n    return self\n"
    init = _init_source(cls, namespace)
    if init is not None:
        source += init
    exec(source, namespace)  # noqa: S102 - generated from the class's own field names
    # Installed over what the type checker reads (Record.replace, the dataclass __init__), which they
    # behave as, hence setattr.
    setattr(cls, "replace", namespace["replace"])
    if issubclass(cls, Record) and cls.__dict__.get("__hash__") is not None:
        setattr(cls, "__hash__", _caching_hash(cls))
    if init is not None:
        # Pickled as a call of the class with its fields, which unpickling runs through the generated
        # ``__init__``: dataclass's slotted __getstate__/__setstate__ call ``fields()`` per record, most
        # of what loading a state cost (the parallel engine and campaigns move states between processes).
        reduce_source = f"def __reduce__(self):\n    return _cls, ({''.join(f'self.{n}, ' for n in names)})\n"
        exec(reduce_source, namespace)  # noqa: S102 - generated from the class's own field names
        setattr(cls, "__reduce__", namespace["__reduce__"])
        generated = namespace["__init__"]
        assert isinstance(generated, FunctionType)
        generated.__qualname__ = f"{cls.__qualname__}.__init__"
        setattr(cls, "__init__", generated)
    return cls


_CACHED_HASH = Record.__dict__["_cached_hash"]  # the slot's member descriptor


def _caching_hash(cls: type) -> Any:
    """A ``__hash__`` for ``cls``: its compared fields with a salt for the class, computed once per record.

    Why kept: a state is a tree of records, and the exploration hashes every successor to look it up
    in its seen-set. A successor shares all but a few sub-records with its parent; with each record's
    hash kept, hashing it recomputes only the new records on the path to the root, where dataclass's
    hash walks the whole tree (hashing was a third of the migration scope's search time). The slot
    is not pickled (a record pickles as its class and fields), so a record unpickled in another
    process, whose strings hash differently, computes its own.

    Why salted: dataclass hashes the fields' tuple alone, so records of two classes with equal
    fields (``A(1)``, ``B(1)``) hash alike, and so do sets of them. With the class's name mixed in,
    a state's hash is a fingerprint the parallel engine can keep instead of the state
    (``properties.parallel``)."""
    names = [f.name for f in fields(cls) if (f.compare if f.hash is None else f.hash)]
    salt = hash(f"{cls.__module__}.{cls.__qualname__}")
    namespace: dict[str, object] = {"_get": _CACHED_HASH.__get__, "_put": _CACHED_HASH.__set__, "_salt": salt}
    values = "".join(f", self.{n}" for n in names)
    source = (
        "def __hash__(self):\n"
        "    try:\n"
        "        return _get(self)\n"
        "    except AttributeError:\n"
        f"        value = hash((_salt{values}))\n"
        "        _put(self, value)\n"
        "        return value\n"
    )
    exec(source, namespace)  # noqa: S102 - generated from the class's own field names
    return namespace["__hash__"]


def _init_source(cls: type[Record], namespace: dict[str, object]) -> str | None:
    """An ``__init__`` storing each field through its slot, or None to keep dataclass's.

    Only for the plain case: every field a positional parameter with at most a plain default, and
    no ``__post_init__``; anything else keeps the dataclass ``__init__``, which handles it.
    """
    found = fields(cls)
    if not found or hasattr(cls, "__post_init__"):
        return None
    if any(not f.init or f.kw_only or f.default_factory is not MISSING for f in found):
        return None
    params: list[str] = []
    stores: list[str] = []
    for f in found:
        namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__  # the slot's member descriptor
        if f.default is MISSING:
            params.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        stores.append(f"    _set_{f.name}(self, {f.name})\n")
    return f"def __init__(self, {', '.join(params)}):\n" + "".join(stores)


def repr_quiet_when_empty(r: Record, quiet: frozenset[str]) -> str:
    """``r``'s repr with the fields named in ``quiet`` left out while empty: a field added for a scope's new
    freedom (a partition's replicas) leaves every other scope's records printing as before it existed."""
    names: tuple[str, ...] = r.__slots__
    shown = ", ".join(f"{n}={getattr(r, n)!r}" for n in names if n not in quiet or getattr(r, n))
    return f"{type(r).__name__}({shown})"


def remembers_last(fn: Callable[[R], T]) -> Callable[[R], T]:
    """``fn``, a function of a record alone, keeping its answer for the record it was last asked about.

    For a derived view that several properties read on the same state (the explorer checks every property
    of a step on one ``after`` in turn): the first computes it, the others get it back. Sound because a
    record is immutable, ghosts included, and ``fn`` reads nothing else: the same record gives the same
    answer. The record is recognised by identity, never by equality (equal states may differ in their
    ghosts), and the one kept is held, so its identity cannot pass to another record. The pair is
    replaced in one store, so a caller on another thread sees an old pair or the new one, never a mix."""
    last: list[tuple[object, Any]] = [(None, None)]

    @wraps(fn)
    def remembered(r: R) -> T:
        kept, answer = last[0]
        if kept is r:
            return answer  # type: ignore[no-any-return]
        computed = fn(r)
        last[0] = (r, computed)
        return computed

    return remembered
