"""The clusters the simulator runs: model scopes, built cold, with the simulator's own bounds; and the
configurations a campaign draws for them, one a seed (swarm testing of the cluster itself).

``MIGRATION`` is the issue's whole migration: 3 KRaft controllers with the migration flag and 3 ZooKeeper
brokers already configured for it (KIP-866 §Migration Trigger), 2 partitions of 3 replicas,
from a cold start: ZooKeeper elects a controller, the quorum elects a leader, the driver
migrates, and the simulator's operator rolls the brokers into KRaft and finalizes.

Drawn configurations (``draw``): real clusters do not all look like ``MIGRATION``. A campaign whose plan
draws configurations (``Plan.configs == "drawn"``, the default) runs each seed of ``sim-migration`` on a
cluster drawn from that seed alone (its own stream, not the simulation's): a quorum of 1 or 3
controllers, the metadata.version the quorum is formatted with (3.4-IV0 .. 3.9-IV0, every level the
implementation's ``kip`` rules can migrate from), ZooKeeper brokers at mixed IBPs (one a level off, as
in the middle of a rolling IBP upgrade), one controller of three started without the migration flag,
which admin requests the run's admin sends (``ADMIN``: metadata.version updates of every upgrade
type, KIP-584 feature updates to the ZooKeeper controller), the initial migration's batch size
(``zookeeper.metadata.migration.min.batch.size``: its transaction then stays open across the cluster's
steps), and the worlds it lives in (``WORLDS``): each of the freedoms of issue 17 that an opt-in fault mix or
configuration turns on (a partition reassigned, dual writes that fail or lose their reply, ZooKeeper-mode brokers
whose servers lag, driver events queued, registrations or heartbeats answered at commit, a partition created, the
topic deleted, a deletion in ZooKeeper mode stalled into the migration) one run in ten, so that the default
campaign runs each of them, alone or with others, under every fault of its mix. Every other dimension is a field
of the model's ``Scope`` (a world's freedoms are model actions that differential testing performs in any scope),
so the model expresses whatever is drawn and differential testing stays exact. The drawn scope is named by its
configuration (``sim-migration@controllers=1,mv=3.6-IV1,...``), and ``scenario`` builds the same scope from that name: a
trace file, ``kraftcheck replay`` and ``kraftcheck pin`` carry the configuration in the scope's name. The
simulator's operator sets a misconfigured cluster right before the migration (``impl.sim.simulator``: a
broker rolled to the quorum's metadata.version, a controller restarted with the flag), as KIP-866's runbook
has an operator do.

Rules:
- ``draw(seed)`` is a function of the seed alone; ``configured(base, configuration)`` of its arguments;
  ``parse(label)`` inverts ``Configuration.label``: one-line ``ValueError`` for anything else.
- The ``kafka-3.9`` profile is not drawn: the implementation implements the ``kip`` profile's rules only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from impl.codec import IBP_BY_NAME, IBP_NAMES
from model.kraft import DEFAULT_MIGRATION_BATCH_SIZE, ControllerConfig, UpgradeType
from model.scopes import GROUP_COORDINATOR, SAME_RANGE, SCOPES, Scope
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

# The same cluster whose KRaft controllers answer a registration only once its record commits (QuorumController's
# deferred event queue; model Budget.answer_at_commit): what fault mix ``purgatory`` runs instead of ``sim-migration``.
PURGATORY = MIGRATION.replace(
    name="sim-purgatory",
    summary=MIGRATION.summary + "; registrations answered once their records commit",
    budget=MIGRATION.budget.replace(answer_at_commit=True),
)

# ... and whose controllers answer heartbeats too once the log up to them is stable (model Budget.heartbeats_at_commit):
# what fault mix ``heartbeat-commit`` runs. A drawn migration in batches holds a ZK broker's heartbeat while its
# transaction is open.
HEARTBEAT_COMMIT = PURGATORY.replace(
    name="sim-heartbeat-commit",
    summary=MIGRATION.summary + "; registrations and heartbeats answered once the log up to them is stable",
    budget=PURGATORY.budget.replace(heartbeats_at_commit=True),
)

SCENARIOS: dict[str, Scope] = {s.name: s for s in (MIGRATION, PURGATORY, HEARTBEAT_COMMIT)}

# ---- drawn configurations ------------------------------------------------------------------------

# The levels a quorum is formatted with: every metadata.version the kip rules migrate from (3.4-IV0, the
# bridge release, on); 3.3-IV0 refuses the migration, so a run on it would check none of it.
MIGRATION_LEVELS = tuple(level for level in Ibp if level >= Ibp.IBP_3_4_IV0)
KRAFT_LEVELS = tuple(level for level in Ibp if level >= Ibp.IBP_3_3_IV0)  # what an admin may ask for
ADMIN = ("metadata-version", "features", "partitions")  # the admin requests a run may send (AlterConfigs: every run's)
# Drawn under every plan that draws configurations: partition creations only under ``drawn+partitions``, so that the
# configurations (and the runs pinned for them) of the plans before them stay as they were.
DRAWN_ADMIN = ADMIN[:2]
# KIP-584's feature in every scope's supported ranges (1..3): levels to finalize, and deletions (level 0)
FEATURE_UPDATES = ((GROUP_COORDINATOR, 3, False), (GROUP_COORDINATOR, 2, True), (GROUP_COORDINATOR, 0, True))
BATCH_SIZES = (1, 2)  # the initial migration's batch sizes drawn besides Kafka's default
# The worlds a drawn run may live in: each the opt-in fault mix of that name (``impl.sim.faults.MIXES``), which the
# run's fault window joins to the plan's named mixes (``properties.plan.Plan.faults_of``); ``purgatory`` is also the
# scope's mode (``Budget.answer_at_commit``, as ``sim-purgatory`` has it), and ``heartbeat-commit`` the scope's
# heartbeats too (as ``sim-heartbeat-commit``); ``partitions`` is the admin's partition creation (as
# ``drawn+partitions`` draws it one run in two; never beside a world that deletes the topic: ``creates_partition``).
# Each is drawn on its own, one run in ten, in this order, so a world added at the end moves no other's draws (the
# runs that draw it change; ``stalled-deletion``'s did, and the runs with both ``partitions`` and ``delete-topics``,
# which create no partition since); about a third of runs (0.9 ** 11) live in none and run as they ran before worlds
# were drawn (their configurations, labels and runs unchanged), so the bugs every run can meet keep those runs, and
# some runs meet two freedoms at once.
WORLDS = ("reassign", "write-failure", "zk-lagging", "queue", "purgatory", "partitions", "reply-loss", "delete-topics",
          "heartbeat-commit", "held", "stalled-deletion")
WORLD_RATE = 0.1
# ``Plan.configs``: a configuration drawn per seed, the same with an admin's partition creation drawn one run in two
# (a ZK broker's AddPartitions and the KRaft controller's CreatePartitions, each node's admin once), or the scope as
# named.
CONFIGS = ("drawn", "drawn+partitions", "fixed")
NEW_PARTITION = (BrokerId(2), BrokerId(0), BrokerId(1))  # the assignment of a partition the admin creates


@dataclass(frozen=True)
class Configuration:
    """A cluster a seed runs: quorum size, the quorum's metadata.version, each ZK broker's IBP, the controllers
    started without the migration flag (by index), the admin requests sent, and the metadata.version
    updates (level, upgrade type) the admin asks for."""

    controllers: int
    metadata_version: Ibp
    ibps: tuple[Ibp, ...]
    unflagged: tuple[int, ...] = ()
    admin: tuple[str, ...] = ()
    updates: tuple[tuple[Ibp, UpgradeType], ...] = ()
    batch: int = DEFAULT_MIGRATION_BATCH_SIZE  # zookeeper.metadata.migration.min.batch.size of every controller
    worlds: tuple[str, ...] = ()  # of ``WORLDS``, in its order

    @property
    def label(self) -> str:
        """``controllers=3,mv=3.6-IV1,ibps=3.6-IV1/3.4-IV0/3.6-IV1,unflagged=1,admin=metadata-version/features,
        updates=3.7-IV0:upgrade/3.5-IV2:safe/3.5-IV2:unsafe,batch=1,world=reassign/queue`` (empty parts and Kafka's
        default batch size left out)."""
        parts = [f"controllers={self.controllers}", f"mv={IBP_NAMES[self.metadata_version]}",
                 "ibps=" + "/".join(IBP_NAMES[i] for i in self.ibps)]
        if self.unflagged:
            parts.append("unflagged=" + "/".join(map(str, self.unflagged)))
        if self.admin:
            parts.append("admin=" + "/".join(self.admin))
        if self.updates:
            parts.append("updates=" + "/".join(f"{IBP_NAMES[lvl]}:{_UPGRADE_NAMES[kind]}"
                                               for lvl, kind in self.updates))
        if self.batch != DEFAULT_MIGRATION_BATCH_SIZE:
            parts.append(f"batch={self.batch}")
        if self.worlds:
            parts.append("world=" + "/".join(self.worlds))
        return ",".join(parts)


_UPGRADE_NAMES = {UpgradeType.UPGRADE: "upgrade", UpgradeType.SAFE_DOWNGRADE: "safe",
                  UpgradeType.UNSAFE_DOWNGRADE: "unsafe"}
_UPGRADE_BY_NAME = {name: kind for kind, name in _UPGRADE_NAMES.items()}


def draw(seed: int, brokers: int = 3, partitions: bool = False) -> Configuration:
    """The configuration ``seed`` runs (its own stream: the simulation's draws are not moved by it).

    Every dimension is drawn, each with a fixed number of draws, so adding one never moves another's:
    3 controllers two runs in three, 1 otherwise; the quorum's metadata.version uniformly; one ZK broker
    a level off (older or newer) one run in two; one controller of three without the flag one run in four;
    each admin request one run in two, and the metadata.version updates an admin asks for (an upgrade to
    a newer level, a safe and an unsafe downgrade to an older one); the initial migration in batches of 1 or 2
    records (ZooKeeper's 3 in 3 or 2 batches, the transaction open across the cluster's steps between them) one
    run in four, else in one batch (Kafka's default size): a batched migration takes more of a run's events, so
    one run in two left too few runs the time to stall on the bugs of later phases (impl_inactive_ignores_leadership
    first stalled at seed 44 instead of 2); an admin's partition creation one run in two under ``partitions``; a
    each world (``WORLDS``) one run in ten."""
    rng = random.Random(f"configuration:{seed}")
    controllers = 3 if rng.random() < 2 / 3 else 1
    mv = rng.choice(MIGRATION_LEVELS)
    off, odd = rng.random() < 0.5, rng.randrange(brokers)
    neighbours = [lvl for lvl in KRAFT_LEVELS if abs(KRAFT_LEVELS.index(lvl) - KRAFT_LEVELS.index(mv)) == 1]
    other = rng.choice(neighbours)
    ibps = tuple(other if off and b == odd else mv for b in range(brokers))
    unflag, which = rng.random() < 0.25, rng.randrange(3)
    unflagged = (which,) if unflag and controllers == 3 else ()
    admin = tuple(kind for kind in DRAWN_ADMIN if rng.random() < 0.5)
    newer = [lvl for lvl in KRAFT_LEVELS if lvl > mv]
    older = [lvl for lvl in KRAFT_LEVELS if lvl < mv]
    up, down = rng.choice(newer) if newer else None, rng.choice(older)
    updates: tuple[tuple[Ibp, UpgradeType], ...] = ()
    if "metadata-version" in admin:
        updates = ((() if up is None else ((up, UpgradeType.UPGRADE),))
                   + ((down, UpgradeType.SAFE_DOWNGRADE), (down, UpgradeType.UNSAFE_DOWNGRADE)))
    batched, size = rng.random() < 0.25, rng.choice(BATCH_SIZES)
    creates = rng.random() < 0.5  # drawn under every plan, so that the world's draws are the seed's under both
    if partitions and creates:
        admin += ("partitions",)
    worlds = tuple(world for world in WORLDS if rng.random() < WORLD_RATE)  # one draw each, in order
    return Configuration(controllers, mv, ibps, unflagged, admin, updates, size if batched else
                         DEFAULT_MIGRATION_BATCH_SIZE, worlds)


def configured(base: Scope, configuration: Configuration) -> Scope:
    """``base`` as ``configuration`` has it, named by it; a scope the model runs as it runs any."""
    c = configuration
    return base.replace(
        name=f"{base.name}@{c.label}",
        summary=f"{base.summary}; drawn: {c.label}",
        ibps=c.ibps,
        controllers=tuple(ControllerConfig(migration_enabled=i not in c.unflagged, metadata_version=c.metadata_version,
                                           migration_batch_size=c.batch)
                          for i in range(c.controllers)),
        metadata_version_choices=c.updates,
        feature_updates=FEATURE_UPDATES if "features" in c.admin else (),
        created_replicas=NEW_PARTITION if creates_partition(c) else (),
        budget=base.budget.replace(answer_at_commit=base.budget.answer_at_commit or bool(
            {"purgatory", "heartbeat-commit"} & set(c.worlds)), heartbeats_at_commit=base.budget.heartbeats_at_commit
            or "heartbeat-commit" in c.worlds),
    )


def creates_partition(c: Configuration) -> bool:
    """Whether the admin of ``c`` creates a partition: under ``partitions`` (admin or world), but never in a world
    that deletes the topic. The model's one topic stands for every topic, so a partition created after its deletion
    re-creates it, which Kafka refuses; the model's dual write then writes a partition under a topic znode the
    deletion removed, which its ZooKeeper (no parents) takes and the implementation's refuses (docs/not-modeled.md)."""
    return ("partitions" in c.admin or "partitions" in c.worlds) and not {"delete-topics", "stalled-deletion"} & set(
        c.worlds)


def parse(label: str, brokers: int = 3) -> Configuration:
    """The configuration a label names (``Configuration.label``); a one-line ValueError otherwise."""
    fields: dict[str, str] = {}
    for part in label.split(","):
        key, sep, value = part.partition("=")
        if not sep or key in fields or key not in ("controllers", "mv", "ibps", "unflagged", "admin", "updates",
                                                                   "batch", "world"):
            raise ValueError(f"bad configuration part {part!r}; expected controllers=, mv=, ibps=, unflagged=, admin=, "
                             "updates=, batch=, world=, each once")
        fields[key] = value
    try:
        controllers = int(fields["controllers"])
        mv = IBP_BY_NAME[fields["mv"]]
        ibps = tuple(IBP_BY_NAME[name] for name in fields["ibps"].split("/"))
        unflagged = tuple(int(i) for i in fields["unflagged"].split("/")) if "unflagged" in fields else ()
        admin = tuple(fields["admin"].split("/")) if "admin" in fields else ()
        updates = tuple((IBP_BY_NAME[lvl], _UPGRADE_BY_NAME[kind]) for lvl, _, kind in
                        (u.partition(":") for u in fields["updates"].split("/"))) if "updates" in fields else ()
        batch = int(fields["batch"]) if "batch" in fields else DEFAULT_MIGRATION_BATCH_SIZE
        worlds = tuple(fields["world"].split("/")) if "world" in fields else ()
    except (KeyError, ValueError) as e:
        raise ValueError(f"bad configuration {label!r}: {e.args[0] if e.args else e} is missing or not valid") from None
    if controllers not in (1, 3) or len(ibps) != brokers or mv not in MIGRATION_LEVELS \
            or any(i not in KRAFT_LEVELS for i in ibps) or any(not 0 <= i < controllers for i in unflagged) \
            or any(a not in ADMIN for a in admin) or any(lvl not in KRAFT_LEVELS for lvl, _ in updates) or batch < 1 \
            or any(w not in WORLDS for w in worlds) or list(worlds) != sorted(set(worlds), key=WORLDS.index):
        raise ValueError(f"bad configuration {label!r}: expected 1 or 3 controllers, mv one of "
                         f"{'/'.join(IBP_NAMES[i] for i in MIGRATION_LEVELS)}, {brokers} broker IBPs from 3.3-IV0, "
                         f"unflagged controller indexes, admin from {'/'.join(ADMIN)}, a batch size from 1, worlds "
                         f"from {'/'.join(WORLDS)} in that order")
    return Configuration(controllers, mv, ibps, unflagged, admin, updates, batch, worlds)


def is_drawn(scope: Scope) -> bool:
    """Whether ``scope`` is a drawn configuration of a scenario (``configured``: named ``NAME@LABEL``)."""
    base, sep, _ = scope.name.partition("@")
    return bool(sep) and base in SCENARIOS


def drawn_for(name: str, seed: int, configs: str) -> Configuration | None:
    """The configuration a seed of a plan draws: under ``configs == "drawn"`` (``"drawn+partitions"``: with an
    admin's partition creation one run in two) for a scenario (they all draw them); None for any other scope."""
    if configs in ("drawn", "drawn+partitions") and name in SCENARIOS:
        return draw(seed, SCENARIOS[name].brokers, configs == "drawn+partitions")
    return None


def scope_for(name: str, seed: int, configs: str, answer_at_commit: bool = False,
              heartbeats_at_commit: bool = False) -> str:
    """The scope a seed of a plan runs: the configuration drawn for it (``drawn_for``), otherwise ``name`` itself.
    ``answer_at_commit`` (fault mix ``purgatory``): ``sim-purgatory`` for ``sim-migration``, drawn the same way (the
    same seed draws the same configuration); ``heartbeats_at_commit`` (fault mix ``heartbeat-commit``):
    ``sim-heartbeat-commit``."""
    if name == MIGRATION.name and heartbeats_at_commit:
        name = HEARTBEAT_COMMIT.name
    elif answer_at_commit and name == MIGRATION.name:
        name = PURGATORY.name
    configuration = drawn_for(name, seed, configs)
    return name if configuration is None else configured(SCENARIOS[name], configuration).name


def scenario(name: str) -> Scope:
    """A simulator scenario (or a drawn configuration of one, ``NAME@LABEL``) or any model scope by name; a
    one-line ValueError for an unknown one."""
    if name in SCENARIOS:
        return SCENARIOS[name]
    if name in SCOPES:
        return SCOPES[name]
    base, sep, label = name.partition("@")
    if sep and base in SCENARIOS:
        return configured(SCENARIOS[base], parse(label, SCENARIOS[base].brokers))
    raise ValueError(f"unknown scope {name!r}; expected one of {', '.join([*SCENARIOS, *SCOPES])}"
                     + (" (or sim-migration@CONFIGURATION)" if not sep else ""))
