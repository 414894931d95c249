"""Fault mixes: which perturbations the simulator injects, and how often.

A mix is a set of weights relative to one protocol step (a node's offered action or a message
delivery, each weight 1). ``parse`` reads a mix from the command line: a name (``none``, ``network``,
``process``, ``zookeeper``, ``lagging``, ``zk-lagging``, ``all``, ``responses``, ``queue``, ``reassign``,
``delete-topics``, ``write-failure``, ``purgatory``, ``reply-loss``, ``heartbeat-commit``, ``held``,
``stalled-deletion``), names joined
with ``+``, ``swarm`` joined to them, and ``key=weight`` overrides, e.g. ``network+process,drop=0.2``. Anything else
is a one-line ``ValueError`` naming the bad part.

Swarm testing (Groce et al., ISSTA 2012): with ``swarm`` in the mix, each run draws its own mix
from the simulator's random stream before its first event (``FaultMix.drawn``). Each fault that
breaks something is left out with probability 1/2 and otherwise weighed 1/2 to 8 times its
weight in the mix; healing (restarts, recoveries, the expiry of a dead process's session) keeps
its weight. One fixed mix spreads its faults thinly over every run, so a race that needs, say,
session expiries in quick succession and no message loss is rare in all of them; across a
swarm's runs some have exactly that. ``swarm`` alone swarms over ``all``; ``swarm+network`` over the network's faults.

Worlds: the opt-in mixes of issue 17's freedoms (``reassign``, ``write-failure``, ``zk-lagging``, ``queue``,
``purgatory``, ``reply-loss``, ``delete-topics``, ``held``, ``stalled-deletion``) are also the worlds a drawn
configuration may live in (``impl.sim.scenarios.WORLDS``): each joins the mix of one run in ten of the default
campaign, so the default campaign runs every freedom.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class FaultMix:
    # the network
    delay_ms: int = 0  # a message's delivery is delayed by up to this many ms (so messages reorder)
    drop: float = 0.0  # a deliverable message is lost
    duplicate: float = 0.0  # a deliverable message is delivered and stays in flight (a resend)
    partition: float = 0.0  # two nodes stop reaching each other for a while
    # a broker's BrokerRegistration or BrokerHeartbeat is handled by the controller and its response is lost (the
    # broker times out and sends it again): a probability per such request. Often in ``responses``, now and then in
    # ``all``; not reweighed by a swarm, so that a swarm's draws (and the swarm runs pinned) stay as they were.
    lose_response: float = 0.0
    # a broker's BrokerHeartbeat is held in the network (the broker times out and heartbeats again) and reaches the
    # controller later (``HELD_HEARTBEAT_MS``), maybe after the broker's process restarted and registered with a new
    # epoch: a probability per drawn BrokerHeartbeat. Only in mix ``held`` (and its world), not reweighed by a swarm.
    hold_heartbeat: float = 0.0
    # processes
    crash: float = 0.0  # a running node dies without closing anything
    stop: float = 0.0  # the operator stops a running node cleanly
    restart: float = 0.0  # a dead node starts again (weight per dead node)
    # a running node stops taking steps for a while (a GC pause, a stalled VM: ``PAUSE_MS``), long enough,
    # often, for the server to expire its ZooKeeper session and a successor to take over; then it
    # resumes with what it had in memory: a stale controller, which KIP-380 §Motivation says brokers fence by
    # the controller epoch, or a stale broker generation. A probability per event, as a partition's.
    pause: float = 0.0
    # a KRaft controller's migration driver hears of its node's leadership change late: KRaftMigrationDriver runs
    # every event on its single event thread (reference §1.4), so the KRaftLeaderEvent waits behind the events
    # queued before it, while the node's Raft layer, and the driver's other events, go on (``LEADER_EVENT_LAG_MS``).
    # A probability per chance: each time a controller's KRaftLeaderChange becomes due after a leadership change.
    leader_event_lag: float = 0.0
    # a KRaft controller's MetadataChangeEvent waits in its driver's queue: a drawn DualWrite becomes the event's
    # queueing (PublishMetadataChange), and it runs later, maybe stale (KAFKA-16667). A probability per drawn
    # DualWrite of a controller with no queued event waiting. Only in mix ``queue`` (and a drawn run whose world it
    # is: ``impl.sim.scenarios.WORLDS``), not reweighed by a swarm, so that the other mixes' runs stay as they were.
    queue_event: float = 0.0
    # an admin's AlterPartitionReassignments adds a replica to partition 0 (``impl.sim.simulator``): any non-zero
    # weight has every node's admin send it once (to the ZK controller, or to the active KRaft controller). An
    # admin's input, not a fault: only in mix ``reassign`` (and its world), not reweighed by a swarm.
    reassign: float = 0.0
    # an admin's DeleteTopics of the one topic (``impl.sim.simulator``): any non-zero weight has every KRaft
    # controller's admin send it once while it is active. An admin's input, not a fault: only in mix
    # ``delete-topics``, not reweighed by a swarm, so other mixes' runs stay.
    delete_topic: float = 0.0
    # an admin's DeleteTopics of the one topic sent to a ZooKeeper-mode broker, which marks it in
    # /admin/delete_topics, while the ZK controller's deletion stalls (TopicDeletionManager leaves a topic
    # ineligible for deletion while a replica is offline): any non-zero weight has every ZK broker's admin send it
    # once, and no ZK controller completes it, so a mark made before the KRaft claim is pending when the migration
    # reads ZooKeeper (KIP-866 §Topic Deletions, KAFKA-15605). An admin's input: only in mix ``stalled-deletion``
    # (and its world), not reweighed by a swarm.
    stalled_deletion: float = 0.0
    # a KRaft controller's dual write fails: ZooKeeper stalled past the controller's session timeout while the write
    # waited, and the session had expired when it answered. A drawn DualWrite becomes DualWriteSessionExpired: a
    # probability per drawn DualWrite. Only in mix ``write-failure`` (and its world), not reweighed by a swarm.
    fail_write: float = 0.0
    # a KRaft controller's dual write applies in ZooKeeper but its reply is lost (the connection timed out while
    # ZooKeeper stalled), and the client's resent copy fails on /migration's version. A drawn DualWrite becomes
    # DualWriteReplyLost: a probability per drawn DualWrite. Only in mix ``reply-loss`` and not reweighed by a swarm.
    lose_reply: float = 0.0
    # not a fault but the world the faults strike: with it (mix ``purgatory``), ``sim-migration`` runs as
    # ``sim-purgatory``, whose KRaft controllers answer a registration once its record commits
    # (``impl.sim.scenarios.scope_for``); a failover, a crash or a lost response then meets registrations waiting
    answer_at_commit: float = 0.0
    # the same, with heartbeats answered once the log up to them is stable too (mix ``heartbeat-commit``:
    # ``sim-heartbeat-commit``): a failover or a crash then meets heartbeats waiting, a batched migration holds them
    heartbeats_at_commit: float = 0.0
    # ZooKeeper
    expire: float = 0.0  # the server expires a live broker session
    outage: float = 0.0  # ZooKeeper loses its quorum
    recover: float = 0.0  # ... and gets it back (weight while it is down)
    # a KRaft controller's ZooKeeper server falls behind the leader: its reads show the tree as it was (model.zookeeper
    # views) until the server catches up or the controller writes
    stale_read: float = 0.0
    catch_up: float = 0.0  # ... and that server catches up (weight per lagging controller)
    # a ZooKeeper-mode broker's ZooKeeper server falls behind while the broker is not the controller: its election
    # reads (/controller, /controller_epoch), its registration check and its reads of /features come from the past
    broker_stale_read: float = 0.0
    broker_catch_up: float = 0.0  # ... and that server catches up (weight per lagging broker)
    # timers of crashed clients: the server expires a dead process's session after its timeout
    expire_dead: float = 2.0
    # each run draws its own mix from this one (swarm testing, see the module's docstring)
    swarm: bool = False

    def describe(self) -> str:
        on = [f"{f.name}={getattr(self, f.name)}" for f in fields(self) if getattr(self, f.name) and f.name != "swarm"]
        return ",".join(([SWARM] if self.swarm else []) + on) or "none"

    def drawn(self, rng: random.Random) -> FaultMix:
        """A run's own mix under swarm testing: each breaking fault left out or reweighed, by ``rng``."""
        changes: dict[str, float | int | bool] = {"swarm": False}
        for name in BREAKING:
            weight = getattr(self, name)
            keep, scale = rng.random() < 0.5, 2 ** rng.uniform(-1, 3)  # both drawn: a fixed number of draws
            if not keep:
                changes[name] = 0
            elif name == "delay_ms":
                changes[name] = round(weight * scale)
            else:  # three significant digits: the mix reads well in a campaign's tables
                changes[name] = float(f"{min(weight * scale, 1.0) if name in PROBABILITIES else weight * scale:.3g}")
        return replace(self, **changes)


# The faults that break something, which a swarm leaves out or reweighs; the rest heal and stay.
BREAKING = ("delay_ms", "drop", "duplicate", "partition", "crash", "stop", "expire", "outage", "pause",
            "leader_event_lag")
# Weights the simulator reads as a probability per chance rather than against the other options.
PROBABILITIES = ("partition", "pause", "leader_event_lag")


NONE = FaultMix(restart=0.5, recover=1.0)
NETWORK = FaultMix(delay_ms=50, drop=0.03, duplicate=0.03, partition=0.01, restart=0.5, recover=1.0)
PROCESS = FaultMix(crash=0.01, stop=0.01, pause=0.002, leader_event_lag=0.5, restart=0.5, recover=1.0)
ZOOKEEPER = FaultMix(expire=0.01, outage=0.005, restart=0.5, recover=0.3)
RESPONSES = FaultMix(lose_response=0.5, restart=0.5, recover=1.0)
# ZooKeeper servers that lag often: ``all+lagging`` makes a lag span a KRaft failover's claim in some runs. Not part
# of ``zookeeper`` nor of swarm's reweighing (there it changed every run's random stream and left the default
# campaign's first 64 seeds without a driver parked INACTIVE for the progress check to see); ``all`` has a tenth of it.
LAGGING = FaultMix(stale_read=0.2, catch_up=0.005, restart=0.5, recover=1.0)
MIXES = {"none": NONE, "network": NETWORK, "process": PROCESS, "zookeeper": ZOOKEEPER, "lagging": LAGGING}


def combine(a: FaultMix, b: FaultMix) -> FaultMix:
    """Both mixes' faults: each weight the larger of the two."""
    return FaultMix(**{f.name: max(getattr(a, f.name), getattr(b, f.name)) for f in fields(FaultMix)})


# The default mix has some of every fault: a lost response now and then, and now and then a KRaft controller's
# ZooKeeper server that lags (as long as under ``lagging``, ten times less often). ``responses`` and ``lagging``
# turn those up.
MIXES["all"] = combine(combine(NETWORK, PROCESS), combine(ZOOKEEPER, FaultMix(lose_response=0.05, stale_read=0.01,
                                                                                   catch_up=0.005)))
MIXES["responses"] = RESPONSES
# ZooKeeper-mode brokers' servers that lag: ``all+zk-lagging`` has the session expiries (zookeeper) that clear
# /controller while a broker reads an older /controller_epoch. Opt-in, so every other mix's runs stay as they were.
MIXES["zk-lagging"] = FaultMix(broker_stale_read=0.2, broker_catch_up=0.02, restart=0.5, recover=1.0)
# Driver events queued and run later: ``all+queue`` has the leader-event lags (process) that make a queued one stale.
MIXES["queue"] = FaultMix(queue_event=1.0, restart=0.5, recover=1.0)
# A partition reassigned during the migration (KAFKA-16120): ``all+reassign`` moves it under every fault.
MIXES["reassign"] = FaultMix(reassign=1.0, restart=0.5, recover=1.0)
# The topic deleted on KRaft during the migration: ``all+delete-topics`` deletes it under every fault.
MIXES["delete-topics"] = FaultMix(delete_topic=1.0, restart=0.5, recover=1.0)
# Dual writes that fail (their ZooKeeper session expired as they waited): ``all+write-failure``.
MIXES["write-failure"] = FaultMix(fail_write=0.3, restart=0.5, recover=1.0)
# Dual writes that apply but lose their reply, resent and failing on /migration's version: ``all+reply-loss``.
MIXES["reply-loss"] = FaultMix(lose_reply=0.3, restart=0.5, recover=1.0)
# Registrations answered at commit (``answer_at_commit``): ``all+purgatory`` has the crashes and leader changes that
# fail a waiting registration, and the lost responses.
MIXES["purgatory"] = FaultMix(answer_at_commit=1.0, restart=0.5, recover=1.0)
# Heartbeats answered at commit too (``heartbeats_at_commit``): ``all+heartbeat-commit``.
MIXES["heartbeat-commit"] = FaultMix(answer_at_commit=1.0, heartbeats_at_commit=1.0, restart=0.5, recover=1.0)
# Heartbeats held in the network and delivered late (issue 17 §1): ``all+held`` has the crashes and stops that make
# a held one stale by the time it arrives.
MIXES["held"] = FaultMix(hold_heartbeat=0.3, restart=0.5, recover=1.0)
# A deletion asked of a ZooKeeper-mode broker that the ZK controller never completes (a replica offline): pending when
# the migration starts if it was asked before the claim (after it, the broker forwards it to KRaft).
MIXES["stalled-deletion"] = FaultMix(stalled_deletion=1.0, restart=0.5, recover=1.0)
SWARM = "swarm"  # not a mix but a way to run one: ``swarm+network`` swarms over the network's faults


def parse(spec: str, worlds: tuple[str, ...] = ()) -> FaultMix:
    """``all``, ``network+process``, ``none,drop=0.1``, ``swarm+zookeeper``: named mixes, then overrides. ``worlds``:
    a drawn configuration's (``impl.sim.scenarios.WORLDS``), whose mixes join the named ones, before the overrides
    (so that ``queue_event=0`` still means none)."""
    spec = spec.strip()
    known_names = ", ".join([*MIXES, SWARM])
    if not spec:
        raise ValueError(f"empty fault mix; expected a name ({known_names}) or key=weight pairs")
    names, *overrides = spec.split(",")
    if "=" in names:
        overrides.insert(0, names)
        names = "none"
    mixes = names.split("+")
    if "" in mixes:
        raise ValueError(f"fault mix {names!r} names '', an empty name; expected names ({known_names}) joined by '+'")
    twice = sorted({name for name in mixes if mixes.count(name) > 1})
    if twice:
        raise ValueError(f"fault mix {names!r} names {twice[0]!r} twice")
    swarm = SWARM in mixes
    mixes = [name for name in mixes if name != SWARM] or ["all"]  # ``swarm`` alone swarms over every fault
    mixes += [world for world in worlds if world in MIXES and world not in mixes]  # ``partitions`` is the scope's
    mix = NONE
    for name in mixes:
        if name not in MIXES:
            raise ValueError(f"unknown fault mix {name!r}; expected one of {known_names}")
        mix = combine(mix, MIXES[name])
    mix = replace(mix, swarm=swarm)
    known = {f.name: f.type for f in fields(FaultMix) if f.name != "swarm"}  # swarm is a mix's name
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
