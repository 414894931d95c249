"""Gray and Lamport's TwoPhase commit, written in the model API: the calibration model for TLC.

The specification is ``TwoPhase.tla`` from tlaplus/Examples (specifications/transaction_commit),
the model used in the published TLC and Stateright comparisons. Each TLA+ variable is one field
of ``TwoPhaseState`` and each TLA+ action one record below, with the same name and the same
enabling conditions, so the reachable state graph is TLC's: for N resource managers (RMs) the
distinct states are 288 (N=3), 8,832 (N=5), 50,816 (N=6) and 296,448 (N=7).

Rules, as in ``model/``:
- State and actions are ``@record``s (frozen, slotted, hashable); ``step(state, action)`` is the
  one transition function and returns None when the action is not enabled; ``actions(state)``
  lists the actions worth trying, in a fixed order, and ``step`` decides.
- ``TCConsistent`` (from TCommit.tla: no RM has committed while another has aborted) is the
  invariant; ``Variant(early_commit=True)`` is the seeded bug that breaks it.

The representation is chosen for the exploration's hot path, and differs from the TLA+ one
where a plain Python value is faster to build, hash and compare:
- an RM's state, the TM's state: small ints named by the constants below, not Enum members
  (``Enum.__hash__`` is Python code, and every successor is hashed);
- ``rm_state``: a tuple of those ints, indexed by RM (RMs are 0..N-1);
- ``tm_prepared`` and ``msgs``: bitmasks. ``msgs`` holds ``COMMIT_MSG``, ``ABORT_MSG`` and one
  ``prepared_msg(rm)`` bit per RM; like the TLA+ set, messages are only ever added.

``bench.twophase`` explores the records with the engine every scope runs on
(``properties.explore.search``, through ``broken_always``), and on request ``Packed``, with the
same engine: the same state graph with each state packed into one int and each step an addition,
so that generating a successor allocates at most one int and the seen-set holds ints. ``Packed``
is a model in the model API too (an int is frozen and hashable; ``step``, ``successors``,
``broken_always``), and the records stay the specification: ``Packed`` is checked against them
state by state, action by action (tests/test_twophase.py), and its steps carry the records' own
actions, so traces are told in them.
"""

from __future__ import annotations

import functools
from typing import assert_never

from model.record import record

# ---- values -------------------------------------------------------------------------------------

# rmState[rm]
WORKING, PREPARED, COMMITTED, ABORTED = 0, 1, 2, 3

# tmState
TM_INIT, TM_COMMITTED, TM_ABORTED = 0, 1, 2

# msgs: [type |-> "Commit"], [type |-> "Abort"], and [type |-> "Prepared", rm |-> rm] at bit 2 + rm
COMMIT_MSG = 1
ABORT_MSG = 2


def prepared_msg(rm: int) -> int:
    """The bit of ``[type |-> "Prepared", rm |-> rm]`` in ``msgs``."""
    return 4 << rm


@record
class TwoPhaseState:
    """The four TLA+ variables: rmState, tmState, tmPrepared, msgs."""

    rm_state: tuple[int, ...]
    tm_state: int
    tm_prepared: int  # bitmask over RMs
    msgs: int  # bitmask, see prepared_msg


@record
class Variant:
    """The correct model, or one with the seeded bug switched on."""

    # Seeded bug: TMCommit is enabled before every RM has prepared (drops ``tmPrepared = RM``).
    # An RM that is still working may then abort on its own while another receives Commit,
    # which breaks TCConsistent.
    early_commit: bool = False


CORRECT = Variant()
EARLY_COMMIT = Variant(early_commit=True)


def init_state(rms: int) -> TwoPhaseState:
    """TPInit: every RM working, the TM in init, nothing prepared, no message sent."""
    return TwoPhaseState((WORKING,) * rms, TM_INIT, 0, 0)


# ---- actions ------------------------------------------------------------------------------------


@record
class TMRcvPrepared:
    """The TM receives a Prepared message from ``rm``."""

    rm: int


@record
class TMCommit:
    """The TM commits; enabled when it is in init and every RM has sent Prepared."""


@record
class TMAbort:
    """The TM spontaneously aborts."""


@record
class RMPrepare:
    """``rm`` prepares and sends Prepared to the TM."""

    rm: int


@record
class RMChooseToAbort:
    """``rm`` spontaneously aborts (the spec sends no message for this)."""

    rm: int


@record
class RMRcvCommitMsg:
    """``rm`` receives Commit from the TM."""

    rm: int


@record
class RMRcvAbortMsg:
    """``rm`` receives Abort from the TM."""

    rm: int


Action = TMRcvPrepared | TMCommit | TMAbort | RMPrepare | RMChooseToAbort | RMRcvCommitMsg | RMRcvAbortMsg


def step(state: TwoPhaseState, action: Action, variant: Variant = CORRECT) -> TwoPhaseState | None:
    """The state after ``action`` (TLA+ primed variables), or None when it is not enabled.

    Each case is the TLA+ action: its enabling conditions, then its state mutations. A step that
    changes nothing (an RM receiving a decision it already has, the TM a Prepared it already
    counted) returns ``state`` itself rather than an equal copy: TLC counts such stuttering
    successors as generated, and so do we, but building the copy is wasted work. The RM steps
    call the constructor instead of ``replace`` and the cases are ordered by how often the
    exploration takes them: both only for speed (RMRcvAbortMsg is 71% of the steps for 7 RMs).
    """
    match action:
        case RMRcvAbortMsg(rm=rm):
            rms = state.rm_state
            if not state.msgs & ABORT_MSG:
                return None
            if rms[rm] == ABORTED:
                return state
            return TwoPhaseState(rms[:rm] + (ABORTED,) + rms[rm + 1 :], state.tm_state, state.tm_prepared, state.msgs)
        case RMPrepare(rm=rm):
            rms = state.rm_state
            if rms[rm] != WORKING:
                return None
            msgs = state.msgs | prepared_msg(rm)
            return TwoPhaseState(rms[:rm] + (PREPARED,) + rms[rm + 1 :], state.tm_state, state.tm_prepared, msgs)
        case RMChooseToAbort(rm=rm):
            rms = state.rm_state
            if rms[rm] != WORKING:
                return None
            return TwoPhaseState(rms[:rm] + (ABORTED,) + rms[rm + 1 :], state.tm_state, state.tm_prepared, state.msgs)
        case TMRcvPrepared(rm=rm):
            if state.tm_state != TM_INIT or not state.msgs & prepared_msg(rm):
                return None
            if state.tm_prepared & (1 << rm):
                return state
            return state.replace(tm_prepared=state.tm_prepared | (1 << rm))
        case TMAbort():
            if state.tm_state != TM_INIT:
                return None
            return state.replace(tm_state=TM_ABORTED, msgs=state.msgs | ABORT_MSG)
        case RMRcvCommitMsg(rm=rm):
            rms = state.rm_state
            if not state.msgs & COMMIT_MSG:
                return None
            if rms[rm] == COMMITTED:
                return state
            return TwoPhaseState(rms[:rm] + (COMMITTED,) + rms[rm + 1 :], state.tm_state, state.tm_prepared, state.msgs)
        case TMCommit():
            if state.tm_state != TM_INIT:
                return None
            all_prepared = state.tm_prepared == (1 << len(state.rm_state)) - 1
            if not all_prepared and not variant.early_commit:  # the seeded bug skips the second guard
                return None
            return state.replace(tm_state=TM_COMMITTED, msgs=state.msgs | COMMIT_MSG)
        case _:
            assert_never(action)


def actions(state: TwoPhaseState) -> list[Action]:
    """The actions worth trying in ``state``, in a fixed order; ``step`` decides which are enabled.

    Only the cheap guards are tested here (an action that fails them is never enabled), so the
    exploration does not call ``step`` some 30 times per state to hear None; the actions are
    built once per number of RMs and shared, as they are immutable.
    """
    per_rm = _actions_for(len(state.rm_state))
    msgs = state.msgs
    out: list[Action] = []
    if state.tm_state == TM_INIT:
        out += _TM_DECIDE
        out += [rcv for rcv, prepared in per_rm.tm_rcv_prepared if msgs & prepared]
    for rm, rm_state in enumerate(state.rm_state):
        if rm_state == WORKING:
            out += per_rm.rm_working[rm]
    if msgs & COMMIT_MSG:
        out += per_rm.rm_rcv_commit
    if msgs & ABORT_MSG:
        out += per_rm.rm_rcv_abort
    return out


_TM_DECIDE = (TMCommit(), TMAbort())


@record
class _PerRm:
    tm_rcv_prepared: tuple[tuple[TMRcvPrepared, int], ...]  # with the Prepared bit it needs
    rm_working: tuple[tuple[RMPrepare, RMChooseToAbort], ...]
    rm_rcv_commit: tuple[RMRcvCommitMsg, ...]
    rm_rcv_abort: tuple[RMRcvAbortMsg, ...]


@functools.cache
def _actions_for(rms: int) -> _PerRm:
    return _PerRm(
        tuple((TMRcvPrepared(rm), prepared_msg(rm)) for rm in range(rms)),
        tuple((RMPrepare(rm), RMChooseToAbort(rm)) for rm in range(rms)),
        tuple(RMRcvCommitMsg(rm) for rm in range(rms)),
        tuple(RMRcvAbortMsg(rm) for rm in range(rms)),
    )


def successors(state: TwoPhaseState, variant: Variant = CORRECT) -> list[tuple[Action, TwoPhaseState]]:
    """Every enabled action with its successor, in a fixed order (as ``model.step.successors``)."""
    out = []
    for action in actions(state):
        nxt = step(state, action, variant)
        if nxt is not None:
            out.append((action, nxt))
    return out


# ---- the invariant ------------------------------------------------------------------------------


TC_CONSISTENT = "TCConsistent"


def tc_consistent(state: TwoPhaseState) -> bool:
    """TCConsistent: no RM has committed while another has aborted."""
    return not (COMMITTED in state.rm_state and ABORTED in state.rm_state)


def broken_always(state: TwoPhaseState) -> list[str]:
    """The state invariants ``state`` breaks, as the engine asks (``properties.explore.Spec``)."""
    return [] if tc_consistent(state) else [TC_CONSISTENT]


def reachable_states(rms: int) -> int:
    """How many states are reachable with ``rms`` RMs: 2^N + 4^N + 6^N, counted by the TM's state.

    - TM in init: no Commit or Abort was sent, so an RM is working, aborted on its own, or
      prepared (then its Prepared is in msgs) and counted by the TM or not: 4^N.
    - TM aborted: tmPrepared froze at the abort. An RM whose Prepared was sent is prepared or
      aborted, counted or not (4 ways); one whose Prepared was not is working or aborted (2): 6^N.
    - TM committed: every RM prepared and was counted, and is prepared or committed: 2^N.
    An independent check on the exploration, for N where TLC published no figure (N=8: 1,745,408).
    """
    return 2**rms + 4**rms + 6**rms


# ---- the packed encoding: the same model with a state in one int ---------------------------------


class Packed:
    """TwoPhase for ``rms`` RMs with a state packed into one int, and a step into one addition.

    Layout, from bit 0 up: rmState (2 bits per RM, RM ``rm`` at bit 2*rm), tmState (2 bits),
    tmPrepared (one bit per RM), msgs (the record's bitmask, ``COMMIT_MSG`` first). Every action
    changes a few fields by a fixed amount given the fields it reads, so a step is ``code + delta``
    (0 for a stuttering step, which hands back ``code`` itself, as ``step`` does). ``steps(code)``
    lists (action, delta) for each enabled action, in the order of ``actions``, so that the
    engine meets states in the same order as over the records and finds the same traces. The
    pairs come from two tables built lazily during a run, each keyed by the fields its actions read:
    - the RM actions (RMPrepare, RMChooseToAbort, RMRcvCommitMsg, RMRcvAbortMsg) read rmState and
      whether Commit or Abort was sent;
    - the TM actions (TMCommit, TMAbort, TMRcvPrepared) are enabled only in tmState init, and then
      read tmPrepared and msgs, the bits above tmState.
    """

    def __init__(self, rms: int, variant: Variant = CORRECT) -> None:
        self.rms = rms
        self.variant = variant
        self.tm_shift = 2 * rms
        self.tm_prepared_shift = self.tm_shift + 2
        self.msgs_shift = self.tm_prepared_shift + rms
        self.rm_mask = (1 << 2 * rms) - 1
        self._low_bits = sum(1 << 2 * rm for rm in range(rms))  # the low bit of each RM's field
        self._rm_steps: dict[int, tuple[tuple[Action, int], ...]] = {}
        self._tm_steps: dict[int, tuple[tuple[Action, int], ...]] = {}
        self._per_rm = _actions_for(rms)
        # Sent decisions (COMMIT_MSG, ABORT_MSG) moved down next to rmState, for the RM table's key.
        self._decisions_shift = self.msgs_shift - 2 * rms
        self._decisions_mask = 3 << 2 * rms

    def pack(self, state: TwoPhaseState) -> int:
        rm_bits = sum(rm_state << 2 * rm for rm, rm_state in enumerate(state.rm_state))
        return (
            rm_bits
            | state.tm_state << self.tm_shift
            | state.tm_prepared << self.tm_prepared_shift
            | state.msgs << self.msgs_shift
        )

    def unpack(self, code: int) -> TwoPhaseState:
        rm_state = tuple((code >> 2 * rm) & 3 for rm in range(self.rms))
        tm_prepared = (code >> self.tm_prepared_shift) & ((1 << self.rms) - 1)
        return TwoPhaseState(rm_state, (code >> self.tm_shift) & 3, tm_prepared, code >> self.msgs_shift)

    def steps(self, code: int) -> tuple[tuple[Action, int], ...]:
        """(action, delta) for each action enabled in ``code``: its successor is ``code + delta``."""
        key = (code & self.rm_mask) | ((code >> self._decisions_shift) & self._decisions_mask)
        found = self._rm_steps.get(key)
        if found is None:
            found = self._rm_steps[key] = self._rm_actions(key)
        if (code >> self.tm_shift) & 3 == TM_INIT:
            key = code >> self.tm_prepared_shift
            tm = self._tm_steps.get(key)
            if tm is None:
                tm = self._tm_steps[key] = self._tm_actions(key)
            found = tm + found  # the TM's actions come first in ``actions``
        return found

    def step(self, code: int, action: Action) -> int | None:
        """The state after ``action``, or None when it is not enabled: the records' ``step``, packed.

        With ``successors`` and ``broken_always`` this makes ``Packed`` a model in the model API
        on its own (a frozen, hashable state; the records' actions; one transition function),
        though the engine only asks for ``successors``.
        """
        for enabled, delta in self.steps(code):
            if enabled == action:
                return code + delta if delta else code
        return None

    def successors(self, code: int) -> list[tuple[Action, int]]:
        """Every enabled action with its successor, as ``successors`` gives them for the records."""
        return [(action, code + delta if delta else code) for action, delta in self.steps(code)]

    def consistent(self, code: int) -> bool:
        """TCConsistent: no RM field is COMMITTED (0b10) while another is ABORTED (0b11)."""
        rms, low = code & self.rm_mask, self._low_bits
        return not ((rms >> 1) & ~rms & low and rms & (rms >> 1) & low)

    def broken_always(self, code: int) -> list[str]:
        return [] if self.consistent(code) else [TC_CONSISTENT]

    def _rm_actions(self, key: int) -> tuple[tuple[Action, int], ...]:
        out: list[tuple[Action, int]] = []
        sent = key >> 2 * self.rms
        per_rm = self._per_rm
        for rm in range(self.rms):
            if (key >> 2 * rm) & 3 == WORKING:
                prepare, abort = per_rm.rm_working[rm]
                out.append((prepare, (PREPARED << 2 * rm) + (prepared_msg(rm) << self.msgs_shift)))
                out.append((abort, ABORTED << 2 * rm))
        for message, outcome, receipts in ((COMMIT_MSG, COMMITTED, per_rm.rm_rcv_commit),
                                           (ABORT_MSG, ABORTED, per_rm.rm_rcv_abort)):
            if sent & message:
                out += [(receipts[rm], (outcome - ((key >> 2 * rm) & 3)) << 2 * rm) for rm in range(self.rms)]
        return tuple(out)

    def _tm_actions(self, key: int) -> tuple[tuple[Action, int], ...]:
        tm_prepared, msgs = key & ((1 << self.rms) - 1), key >> self.rms
        commit, abort = _TM_DECIDE
        out: list[tuple[Action, int]] = []
        if tm_prepared == (1 << self.rms) - 1 or self.variant.early_commit:
            out.append((commit, (TM_COMMITTED << self.tm_shift) + (COMMIT_MSG << self.msgs_shift)))
        out.append((abort, (TM_ABORTED << self.tm_shift) + (ABORT_MSG << self.msgs_shift)))
        for rcv, prepared in self._per_rm.tm_rcv_prepared:
            if msgs & prepared:
                rm = rcv.rm
                out.append((rcv, 0 if tm_prepared >> rm & 1 else 1 << (self.tm_prepared_shift + rm)))
        return tuple(out)
