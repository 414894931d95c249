"""A state's fingerprint: 128 bits that are the same in every process, for seen-sets spread over machines.

Rules:
- Equal states (``==``, which is what the serial engine's seen-set uses) get equal fingerprints, in
  any process: the digest reads only what equality reads, in an order that does not depend on the
  process. A record (a dataclass) is its module and class name and its compared fields in order
  (``ClusterState.ghost`` is ``compare=False`` and left out); a frozenset is its members' digests
  sorted; a tuple its items' in order; an ``IntEnum`` member is its int (it equals it), any other
  enum member its class and name; ``bool`` is its int (``True == 1``); ints, strings and ``None``
  are tagged with their type. A value of any other type is a TypeError, never a guess.
- Nothing here calls ``hash()``: a string's hash depends on ``PYTHONHASHSEED``, and on Python 3.11
  ``hash(None)`` and a class's hash are its address, which differs between processes. Nor is it a
  digest of a pickle (docs/design.md §6: a frozenset pickles in iteration order, the ghost is
  pickled, and shared sub-records change the bytes).
- Unequal states get different fingerprints with high probability only: the seen-set of
  ``properties.spark_explore`` compares fingerprints, as TLC does, so two states whose 128-bit
  BLAKE2b digests collide count as one. Over n distinct states the chance of any collision is at
  most n(n-1)/2 / 2**128: under 1.5e-21 for a billion states, 1.5e-15 for a trillion.

How it is computed: a Merkle digest, one BLAKE2b-128 per record, tuple and frozenset, over its
parts' digests. A ``Fingerprinter`` remembers the digest of every container it has digested, by
identity, holding the container so that its id is not reused: a successor shares all but the parts
an action changed with its parent, so only the changed path is digested again (docs/design.md §6
measured about 190 us a state without the memory).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from enum import Enum, IntEnum
from hashlib import blake2b

SIZE = 16  # bytes: 128 bits


class Fingerprinter:
    """Digests states; remembers, by identity, the digests of the containers it met (``limit`` at most)."""

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self.memo: dict[int, tuple[object, bytes]] = {}
        self.layouts: dict[type, tuple[bytes, tuple[str, ...]]] = {}

    def __call__(self, state: object) -> bytes:
        """The state's fingerprint: ``SIZE`` bytes."""
        digest = self.digest(state)
        return digest if len(digest) == SIZE else blake2b(digest, digest_size=SIZE).digest()

    def digest(self, value: object) -> bytes:
        kind = type(value)
        if kind is int or kind is bool:
            return b"i" + str(int(value)).encode()  # type: ignore[call-overload]
        if kind is str:
            return b"s" + value.encode()  # type: ignore[attr-defined]
        if value is None:
            return b"n"
        held = self.memo.get(id(value))
        if held is not None and held[0] is value:
            return held[1]
        if kind is tuple:
            parts = [b"t", *map(self._framed, value)]  # type: ignore[call-overload]
        elif kind is frozenset or kind is set:
            parts = [b"f", *sorted(map(self._framed, value))]  # type: ignore[call-overload]
        elif isinstance(value, IntEnum):
            return b"i" + str(int(value)).encode()
        elif isinstance(value, Enum):
            return b"e" + f"{kind.__module__}.{kind.__qualname__}.{value.name}".encode()
        elif is_dataclass(value):
            name, compared = self._layout(kind)
            parts = [b"r", name, *(self._framed(getattr(value, f)) for f in compared)]
        else:
            raise TypeError(f"no fingerprint for a {kind.__module__}.{kind.__qualname__}: {value!r}")
        digest = blake2b(b"".join(parts), digest_size=SIZE).digest()
        if len(self.memo) >= self.limit:
            self.memo.clear()
        self.memo[id(value)] = (value, digest)
        return digest

    def _framed(self, value: object) -> bytes:
        """The digest of a part, length-prefixed so that a sequence of parts reads back one way only."""
        d = self.digest(value)
        return len(d).to_bytes(4, "big") + d

    def _layout(self, kind: type) -> tuple[bytes, tuple[str, ...]]:
        layout = self.layouts.get(kind)
        if layout is None:
            compared = tuple(f.name for f in fields(kind) if f.compare)
            layout = self.layouts[kind] = (f"{kind.__module__}.{kind.__qualname__}".encode(), compared)
        return layout


def fingerprint(state: object) -> bytes:
    """The 128-bit fingerprint of ``state`` (a fresh ``Fingerprinter``: use one per batch instead)."""
    return Fingerprinter()(state)
