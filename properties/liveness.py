"""Liveness: EVENTUALLY (leads-to) properties under weak fairness, checked on the explored graph.

A property ``when ~> goal`` (``model.invariants.eventually``) says: on every fair behaviour,
from any reachable state where ``when`` holds (the initial state when ``when`` is None), a state
where ``goal`` holds eventually comes. Safety checks cannot see its failures: nothing bad ever
happens, the good thing just never does ("migration never starts", "driver stuck in INACTIVE").

Fairness, the one rule (``is_fair``): weak fairness of every action instance whose type is not
in ``model.actions.PERTURBATIONS``; an action instance is the action value, so ``Deliver(m)``
for each message ``m`` and ``RegisterBroker(b)`` for each broker are fair one by one. An
instance that stays enabled forever is taken eventually. Perturbations (the environment
breaking things) get no fairness: they may happen, never must. Behaviours may stutter, as in
TLA+: staying forever in a state is fair when no fair action is enabled there. The checks ask
``fair_step(state, action)``, which today is the type rule alone; a rule that needs the state
(an action type that heals in some states and perturbs in others) goes there, and then an
instance counts as enabled, and as taken, only from the states where it is fair.

How it works:
- ``explore_graph`` is a breadth-first search like ``properties.explore`` that numbers the states
  and keeps edges ``(src, dst, action)`` and BFS parents in plain lists. networkx has no place in
  that loop (building the graph while searching cost about 6.6 times the time): the
  ``nx.MultiDiGraph`` (one edge per action, keyed by it) is built once the search is over.
- ``check_eventually`` works on that graph data alone, not on ``ClusterState``, so it runs on a
  hand-made graph too. A counterexample to ``P ~> Q`` is a fair behaviour that reaches a
  ``P and not Q`` state and then stays in ``not Q`` states forever. Let R be the states where Q is
  false that are reachable from a ``P and not Q`` state through such states. The behaviour ends
  either stuttering in a state of R where no fair action is enabled (a deadlock is one), or
  looping forever through a strongly connected component S of R, visiting every state of S
  infinitely often. Such a loop is fair iff every fair action instance A is taken on an edge
  inside S or is disabled in some state of S.
- Why the maximal SCCs suffice: if the maximal SCC S fails the test, some fair A is enabled in
  every state of S and labels no edge inside S. Every strongly connected sub-component S' of S
  has fewer states (A is still enabled in all of them) and fewer edges (A still labels none),
  so S' fails too. Weak fairness needs no Streett-style refinement into sub-components.
- Frontier states of a bounded search have unknown successors: they are left out of the SCCs
  and of the stutter test. A loop or stutter found among expanded states is a real
  counterexample even when the search is incomplete; when none is found, an incomplete search
  says "inconclusive", never "holds".
- The counterexample is a ``Lasso``: the prefix goes from the initial state to the trigger
  state along BFS parents (shortest), then along a shortest path through R into the loop; the
  loop is routed greedily through S (nearest edge taking each fair action that is enabled
  everywhere on the loop so far, or nearest state disabling it) and back. An empty loop means
  "stutters there forever". ``replay_lasso`` replays both parts through ``model.step`` and checks
  the loop closes, the goal is false throughout, and the loop is fair.

How this fits with the rest: docs/design.md §7.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field

import networkx as nx

from model import CORRECT, SCOPES, Scope, Variant, initial_state, step, successors
from model.actions import PERTURBATIONS, Action, SessionTimeout, StartElection
from model.invariants import PROPERTIES, Kind, Property
from model.kraft_quorum import election_heals, timeout_heals

HOLDS, VIOLATED, INCONCLUSIVE = "holds", "violated", "inconclusive"


def is_fair(action: Hashable) -> bool:
    """Weak fairness applies to every action instance that is not a perturbation."""
    return type(action) not in PERTURBATIONS


def fair_step(state, action: Hashable) -> bool:
    """Whether weak fairness covers ``action`` from ``state``.

    The type rule, except for the two KRaft steps that are healing in some states and faults in
    others: an election timeout when the quorum has no live leader and no live candidate that can still win, and
    timing out
    the session of a broker process that is gone (``model.kraft_quorum``).
    """
    if isinstance(action, StartElection):
        return election_heals(state, action.controller)
    if isinstance(action, SessionTimeout):
        return timeout_heals(state, action.broker, action.controller)
    return is_fair(action)


# ---- the explored graph -------------------------------------------------------------------------


@dataclass
class StateGraph:
    """An explored state space as numbered states; state 0 is the initial state.

    ``enabled[i]`` is the set of actions on state i's outgoing edges, or None when i is a frontier
    state (never expanded: its successors are unknown). ``parents[i]`` is (parent, action) on a
    shortest path from state 0, None for state 0.
    """

    states: list
    edges: list[tuple[int, int, Hashable]]
    parents: list[tuple[int, Hashable] | None]
    enabled: list[frozenset | None]
    complete: bool
    graph: nx.MultiDiGraph = field(repr=False)
    seconds: float = 0.0  # the search and the graph building
    depth: int = 0  # the deepest BFS level found
    search_seconds: float = 0.0  # the search alone

    @property
    def expanded(self) -> int:
        return sum(e is not None for e in self.enabled)

    def path_to(self, i: int) -> list:
        """The actions of the BFS-shortest path from state 0 to state i."""
        actions = []
        while self.parents[i] is not None:
            i, action = self.parents[i]
            actions.append(action)
        actions.reverse()
        return actions


def make_graph(
    states: Sequence,
    edges: Iterable[tuple[int, int, Hashable]],
    expanded: Iterable[int] | None = None,
    seconds: float = 0.0,
) -> StateGraph:
    """A ``StateGraph`` from numbered states and edges (for hand-made graphs: parents by BFS).

    ``expanded`` lists the states whose successors are all in ``edges`` (default: all of them).
    """
    edges = list(edges)
    n = len(states)
    done = set(range(n)) if expanded is None else set(expanded)
    out: list[list[tuple[int, Hashable]]] = [[] for _ in range(n)]
    for src, dst, action in edges:
        out[src].append((dst, action))
    parents: list[tuple[int, Hashable] | None] = [None] * n
    depth = [-1] * n
    depth[0] = 0
    queue = deque([0])
    while queue:
        i = queue.popleft()
        for dst, action in out[i]:
            if depth[dst] < 0:
                depth[dst] = depth[i] + 1
                parents[dst] = (i, action)
                queue.append(dst)
    return _finish(list(states), edges, parents, done, seconds, max(depth))


def _finish(
    states: list, edges: list, parents: list, expanded: set[int], seconds: float, depth: int
) -> StateGraph:
    """Per-state enabled actions and the networkx graph, built after the search."""
    enabled_sets: list[set | None] = [set() if i in expanded else None for i in range(len(states))]
    graph = nx.MultiDiGraph()
    graph.add_nodes_from(range(len(states)))
    graph.add_edges_from((src, dst, action, {}) for src, dst, action in edges)
    for src, _, action in edges:
        enabled_sets[src].add(action)
    enabled = [None if e is None else frozenset(e) for e in enabled_sets]
    return StateGraph(states, edges, parents, enabled, len(expanded) == len(states), graph, seconds, depth)


def explore_graph(
    scope: Scope | str,
    variant: Variant = CORRECT,
    max_depth: int | None = None,
    max_states: int | None = None,
) -> StateGraph:
    """Breadth-first search of ``scope``, every state numbered and every edge kept.

    States deeper than ``max_depth`` levels are not expanded, nor any once ``max_states`` are known;
    the graph is ``complete`` when every state found was expanded. No property is checked here.
    """
    if isinstance(scope, str):
        scope = SCOPES[scope]
    start = time.perf_counter()
    init = initial_state(scope)
    index = {init: 0}
    states = [init]
    depth = [0]
    parents: list[tuple[int, Action] | None] = [None]
    edges: list[tuple[int, int, Action]] = []
    i = 0  # states[:i] are expanded; the list is the BFS queue
    while i < len(states):
        if max_depth is not None and depth[i] >= max_depth:
            break
        if max_states is not None and len(states) >= max_states:
            break
        for action, nxt in successors(states[i], scope, variant):
            j = index.get(nxt)
            if j is None:
                j = index[nxt] = len(states)
                states.append(nxt)
                depth.append(depth[i] + 1)
                parents.append((i, action))
            edges.append((i, j, action))
        i += 1
    searched = time.perf_counter() - start
    graph = _finish(states, edges, parents, set(range(i)), 0.0, max(depth))
    graph.seconds = time.perf_counter() - start
    graph.search_seconds = searched
    return graph


# ---- leads-to under weak fairness -----------------------------------------------------------------


@dataclass(frozen=True)
class Lasso:
    """A behaviour: ``prefix`` from the initial state, then ``loop`` repeated forever.

    An empty loop means the behaviour stutters forever in the state the prefix reaches.
    """

    prefix: list
    loop: list


@dataclass
class Verdict:
    name: str
    result: str  # HOLDS, VIOLATED or INCONCLUSIVE
    lasso: Lasso | None = None
    seconds: float = 0.0
    # states where the goal is false that a trigger reaches through such states (R above)
    pending_states: int = 0


def check_eventually(
    g: StateGraph, prop: Property, fair: Callable[[object, Hashable], bool] = fair_step
) -> Verdict:
    """Check ``prop.when ~> prop.predicate`` on ``g`` under weak fairness of the ``fair`` actions."""
    start = time.perf_counter()
    goal, when = prop.predicate, prop.when
    n = len(g.states)
    pending = [not goal(s) for s in g.states]
    if when is None:
        triggers = [0] if pending[0] else []
    else:
        triggers = [i for i in range(n) if pending[i] and when(g.states[i])]
    region = _reach(g, triggers, pending)  # R

    fair_enabled = {
        i: frozenset(a for a in g.enabled[i] if fair(g.states[i], a)) for i in region if g.enabled[i] is not None
    }
    # Ends: stutter states (no fair action enabled, a deadlock among them) and fair SCCs.
    ends: dict[int, frozenset[int]] = {}  # entry state -> the states of its SCC ({i} for stutter)
    for i, acts in fair_enabled.items():
        if not acts:
            ends[i] = frozenset({i})
    inner = g.graph.subgraph(fair_enabled)  # expanded states of R only
    for component in nx.strongly_connected_components(inner):
        scc = frozenset(component)
        if len(scc) == 1:
            (only,) = scc
            if not inner.has_edge(only, only):
                continue  # a trivial component is passed through, not looped in
        if _fair_component(inner, scc, fair_enabled):
            for i in scc:
                ends.setdefault(i, scc)

    verdict = Verdict(prop.name, HOLDS if g.complete else INCONCLUSIVE, pending_states=len(region))
    if ends:
        verdict.result = VIOLATED
        verdict.lasso = _lasso(g, triggers, region, ends, fair_enabled, inner)
    verdict.seconds = time.perf_counter() - start
    return verdict


def _reach(g: StateGraph, sources: list[int], allowed: list[bool]) -> set[int]:
    """States reachable from ``sources`` through ``allowed`` states (the sources included)."""
    seen = set(sources)
    queue = deque(sources)
    succ = g.graph.succ
    while queue:
        i = queue.popleft()
        for j in succ[i]:
            if allowed[j] and j not in seen:
                seen.add(j)
                queue.append(j)
    return seen


def _fair_component(inner: nx.MultiDiGraph, scc: frozenset[int], fair_enabled: dict) -> bool:
    """Every fair action enabled in all states of ``scc`` is taken on some edge inside it."""
    always_enabled = frozenset.intersection(*(fair_enabled[i] for i in scc))
    if not always_enabled:
        return True
    taken = {a for u, v, a in inner.subgraph(scc).edges(keys=True) if a in fair_enabled[u]}
    return always_enabled <= taken


def _lasso(
    g: StateGraph,
    triggers: list[int],
    region: set[int],
    ends: dict[int, frozenset[int]],
    fair_enabled: dict,
    inner: nx.MultiDiGraph,
) -> Lasso:
    """The shortest prefix to a trigger and on into an end, then a fair loop there."""
    # Distance from each state of R to the nearest end, through R (a backward BFS).
    dist = {i: 0 for i in ends}
    nearer: dict[int, int] = {}
    queue = deque(ends)
    pred = g.graph.pred
    while queue:
        j = queue.popleft()
        for i in pred[j]:
            if i in region and i not in dist:
                dist[i] = dist[j] + 1
                nearer[i] = j
                queue.append(i)
    depth = {}
    for t in triggers:
        if t in dist:
            depth[t] = len(g.path_to(t))
    start = min(depth, key=lambda t: (depth[t] + dist[t], t))
    prefix = g.path_to(start)
    i = start
    while i not in ends:
        j = nearer[i]
        prefix.append(_label(g.graph, i, j))
        i = j
    return Lasso(prefix, _fair_loop(inner, ends[i], i, fair_enabled))


def _label(graph: nx.MultiDiGraph, u: int, v: int) -> Hashable:
    """An action on an edge u -> v (the first, in the order successors listed them)."""
    return next(iter(graph[u][v]))


def _fair_loop(inner: nx.MultiDiGraph, scc: frozenset[int], entry: int, fair_enabled: dict) -> list:
    """A cycle through ``entry`` inside ``scc`` that is fair; [] for a stutter state."""
    if not fair_enabled[entry]:
        return []
    sub = inner.subgraph(scc)
    loop: list = []
    visited_enabled = set(fair_enabled[entry])  # fair actions enabled at every state visited so far
    taken: set = set()
    here = entry

    def walk(path: list[int]) -> None:
        nonlocal here
        for u, v in zip(path, path[1:]):
            loop.append(_label(sub, u, v))
            if loop[-1] in fair_enabled[u]:
                taken.add(loop[-1])
            visited_enabled.intersection_update(fair_enabled[v])
        here = path[-1]

    while True:
        owed = sorted(visited_enabled - taken, key=repr)
        if not owed:
            break
        need = owed[0]
        paths = nx.single_source_shortest_path(sub, here)
        # Either take ``need`` on an edge of the component or visit a state that disables it.
        options = []
        for u, v, a in sub.edges(keys=True):
            if a == need and a in fair_enabled[u]:
                options.append((len(paths[u]), 0, u, v))
        for s in scc:
            if need not in fair_enabled[s]:
                options.append((len(paths[s]), 1, s, None))
        _, _, target, then = min(options, key=lambda o: (o[0], o[1], o[2]))
        walk(paths[target])
        if then is not None:
            loop.append(need)
            taken.add(need)
            visited_enabled.intersection_update(fair_enabled[then])
            here = then
    if here != entry or not loop:
        walk(nx.shortest_path(sub, here, entry) if here != entry else _cycle(sub, entry))
    return loop


def _cycle(sub: nx.MultiDiGraph, entry: int) -> list[int]:
    """Some cycle from ``entry`` back to it, as states (an SCC with a cycle always has one)."""
    if sub.has_edge(entry, entry):
        return [entry, entry]
    best = min((nx.shortest_path(sub, v, entry) for v in sub.successors(entry)), key=len)
    return [entry, *best]


# ---- replay through the model ------------------------------------------------------------------


@dataclass
class LassoReplay:
    ok: bool
    problem: str | None = None


def replay_lasso(
    scope: Scope | str, variant: Variant, lasso: Lasso, prop: Property, fair: Callable = fair_step
) -> LassoReplay:
    """Replay ``lasso`` through ``model.step`` and check that it is a counterexample to ``prop``.

    The prefix and the loop must be enabled step by step; the loop must come back to where it
    started; the goal must be false from a trigger state of the prefix on and all around the
    loop; every fair action enabled in all loop states must be taken in the loop (for an empty
    loop: none may be enabled where it stutters).
    """
    if isinstance(scope, str):
        scope = SCOPES[scope]
    states = [initial_state(scope)]
    for k, action in enumerate(lasso.prefix):
        nxt = step(states[-1], action, variant)
        if nxt is None:
            return LassoReplay(False, f"prefix step {k + 1} is not enabled: {action!r}")
        states.append(nxt)
    entry = states[-1]
    loop_states = [entry]
    for k, action in enumerate(lasso.loop):
        nxt = step(loop_states[-1], action, variant)
        if nxt is None:
            return LassoReplay(False, f"loop step {k + 1} is not enabled: {action!r}")
        loop_states.append(nxt)
    if loop_states[-1] != entry:
        return LassoReplay(False, "the loop does not return to the state it starts from")
    goal, when = prop.predicate, prop.when
    for k, s in enumerate(loop_states):
        if goal(s):
            return LassoReplay(False, f"the goal holds in the loop, after loop step {k}")
    trigger = None
    for k in range(len(states) - 1, -1, -1):
        if goal(states[k]):
            break
        if (k == 0) if when is None else when(states[k]):
            trigger = k
    if trigger is None:
        return LassoReplay(False, "no state of the prefix triggers the property with the goal false from there on")
    always_enabled = None
    for s in loop_states:
        acts = {a for a, _ in successors(s, scope, variant) if fair(s, a)}
        always_enabled = acts if always_enabled is None else always_enabled & acts
    taken = {a for s, a in zip(loop_states, lasso.loop) if fair(s, a)}
    unfair = sorted(always_enabled - taken, key=repr)
    if unfair:
        return LassoReplay(False, f"unfair loop: {unfair[0]!r} is enabled throughout and never taken")
    return LassoReplay(True)


# ---- running the registry ---------------------------------------------------------------------


@dataclass
class LivenessResult:
    scope: str
    complete: bool
    distinct_states: int
    edges: int
    depth: int
    seconds: float
    verdicts: list[Verdict]


def eventually_properties(names: Iterable[str] | None = None) -> list[Property]:
    """The registered EVENTUALLY properties, or the named ones (KeyError/ValueError if not one).

    Read from ``PROPERTIES`` at call time, so properties registered after ``model.invariants``
    built its lookup tables (model part 2 registers at its end) are found too.
    """
    if names is None:
        return [p for p in PROPERTIES if p.kind is Kind.EVENTUALLY]
    registry = {p.name: p for p in PROPERTIES}
    props = []
    for name in names:
        p = registry[name]
        if p.kind is not Kind.EVENTUALLY:
            raise ValueError(f"{name} is not an eventually property")
        props.append(p)
    return props


def check_liveness(
    scope: Scope | str,
    variant: Variant = CORRECT,
    max_depth: int | None = None,
    props: Iterable[str] | Iterable[Property] | None = None,
    max_states: int | None = None,
) -> LivenessResult:
    """Explore ``scope`` once and check every EVENTUALLY property (or ``props``, names or properties)."""
    if isinstance(scope, str):
        scope = SCOPES[scope]
    start = time.perf_counter()
    if props is None:
        chosen = eventually_properties()
    else:
        chosen = [p if isinstance(p, Property) else eventually_properties([p])[0] for p in props]
    g = explore_graph(scope, variant, max_depth=max_depth, max_states=max_states)
    verdicts = [check_eventually(g, p) for p in chosen]
    return LivenessResult(
        scope.name, g.complete, len(g.states), len(g.edges), g.depth, time.perf_counter() - start, verdicts
    )


# ---- output ---------------------------------------------------------------------------------------


def render_lasso(lasso: Lasso, indent: str = "  ") -> str:
    lines = [f"{indent}{k:3d}. {a!r}" for k, a in enumerate(lasso.prefix, 1)]
    if lasso.loop:
        lines.append(f"{indent}loop, repeated forever:")
        lines += [f"{indent}{k:3d}. {a!r}" for k, a in enumerate(lasso.loop, 1)]
    else:
        lines.append(f"{indent}then stutters there forever: no fair action is enabled")
    return "\n".join(lines)


def render(result: LivenessResult) -> str:
    extent = "complete" if result.complete else f"to depth {result.depth}, incomplete"
    lines = [
        f"scope {result.scope}: {result.distinct_states} distinct states, {result.edges} steps, {extent},"
        f" {result.seconds:.1f}s"
    ]
    meanings = {p.name: p.meaning for p in PROPERTIES}
    for v in result.verdicts:
        lines.append(f"{v.result.upper():12s} {v.name}: {meanings.get(v.name, '')}")
        if v.lasso is not None:
            lines.append(render_lasso(v.lasso))
    return "\n".join(lines)


def as_json(result: LivenessResult) -> dict:
    """The ``kraftcheck liveness --json`` document; actions in the trace-file encoding."""
    from properties.traces import encode

    def lasso(v: Verdict):
        if v.lasso is None:
            return None
        return {"prefix": [encode(a) for a in v.lasso.prefix], "loop": [encode(a) for a in v.lasso.loop]}

    return {
        "scope": result.scope,
        "complete": result.complete,
        "distinct_states": result.distinct_states,
        "seconds": round(result.seconds, 3),
        "properties": [{"name": v.name, "result": v.result, "lasso": lasso(v)} for v in result.verdicts],
    }
