"""Fault mixes: which perturbations the simulator injects, and how often.

A mix is a set of weights relative to one protocol step (a node's offered action or a message
delivery, each weight 1). ``parse`` reads a mix from the command line: a name
(``none``, ``network``, ``process``, ``zookeeper``, ``all``), names joined with ``+``, and
``key=weight`` overrides, e.g. ``network+process,drop=0.2``. Anything else is a one-line
``ValueError`` naming the bad part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class FaultMix:
    # the network
    delay_ms: int = 0  # a message's delivery is delayed by up to this many ms (so messages reorder)
    drop: float = 0.0  # a deliverable message is lost
    duplicate: float = 0.0  # a deliverable message is delivered and stays in flight (a resend)
    partition: float = 0.0  # two nodes stop reaching each other for a while
    # processes
    crash: float = 0.0  # a running node dies without closing anything
    stop: float = 0.0  # the operator stops a running node cleanly
    restart: float = 0.0  # a dead node starts again (weight per dead node)
    # ZooKeeper
    expire: float = 0.0  # the server expires a live broker session
    outage: float = 0.0  # ZooKeeper loses its quorum
    recover: float = 0.0  # ... and gets it back (weight while it is down)
    # timers of crashed clients: the server expires a dead process's session after its timeout
    expire_dead: float = 2.0

    def describe(self) -> str:
        on = [f"{f.name}={getattr(self, f.name)}" for f in fields(self) if getattr(self, f.name)]
        return ",".join(on) or "none"


NONE = FaultMix(restart=0.5, recover=1.0)
NETWORK = FaultMix(delay_ms=50, drop=0.03, duplicate=0.03, partition=0.01, restart=0.5, recover=1.0)
PROCESS = FaultMix(crash=0.01, stop=0.01, restart=0.5, recover=1.0)
ZOOKEEPER = FaultMix(expire=0.01, outage=0.005, restart=0.5, recover=0.3)
MIXES = {"none": NONE, "network": NETWORK, "process": PROCESS, "zookeeper": ZOOKEEPER}


def _combine(a: FaultMix, b: FaultMix) -> FaultMix:
    return FaultMix(**{f.name: max(getattr(a, f.name), getattr(b, f.name)) for f in fields(FaultMix)})


MIXES["all"] = _combine(_combine(NETWORK, PROCESS), ZOOKEEPER)


def parse(spec: str) -> FaultMix:
    """``all``, ``network+process``, ``none,drop=0.1``: a named mix, then overrides."""
    spec = spec.strip()
    if not spec:
        raise ValueError("empty fault mix; expected a name (" + ", ".join(MIXES) + ") or key=weight pairs")
    names, *overrides = spec.split(",")
    if "=" in names:
        overrides.insert(0, names)
        names = "none"
    mix = NONE
    for name in names.split("+"):
        if name not in MIXES:
            raise ValueError(f"unknown fault mix {name!r}; expected one of {', '.join(MIXES)}")
        mix = _combine(mix, MIXES[name])
    known = {f.name: f.type for f in fields(FaultMix)}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in known:
            raise ValueError(f"bad fault setting {item!r}; expected key=weight with key one of {', '.join(known)}")
        try:
            number = int(value) if key == "delay_ms" else float(value)
        except ValueError:
            raise ValueError(f"bad fault setting {item!r}: {value!r} is not a number") from None
        if not math.isfinite(number):  # float() reads "nan" and "inf", which random.choices cannot weigh
            raise ValueError(f"bad fault setting {item!r}: {value!r} is not a number")
        if number < 0:
            raise ValueError(f"bad fault setting {item!r}: weights are not negative")
        mix = replace(mix, **{key: number})
    return mix
