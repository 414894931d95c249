"""TwoPhase commit, the TLC calibration model: TLC's state counts, TCConsistent, a seeded bug, the CLI.

The figures are TLC's for TwoPhase.tla (tlaplus/Examples, specifications/transaction_commit):
288 distinct states and 1,146 generated at depth 11 for 3 RMs (its manifest.json), 8,832 for 5
(Stateright's 2pc example reports the same), 50,816 for 6 (the spec's closing comment) and
296,448 for 7 (the issue's TLC run). Depth is 3N + 2: N prepares, N Prepared received, the
commit and N commits received, counted in states as TLC does.
"""

import json

import pytest

from bench import twophase
from bench.twophase import explore
from bench.twophase_model import (
    ABORTED,
    COMMITTED,
    CORRECT,
    EARLY_COMMIT,
    Packed,
    RMChooseToAbort,
    RMPrepare,
    RMRcvAbortMsg,
    RMRcvCommitMsg,
    TMAbort,
    TMCommit,
    TMRcvPrepared,
    actions,
    broken_always,
    init_state,
    reachable_states,
    step,
    successors,
    tc_consistent,
)


def every_action(rms):
    per_rm = (TMRcvPrepared, RMPrepare, RMChooseToAbort, RMRcvCommitMsg, RMRcvAbortMsg)
    return [TMCommit(), TMAbort()] + [kind(rm) for rm in range(rms) for kind in per_rm]


def reachable(rms, variant=CORRECT):
    seen = {init_state(rms)}
    frontier = list(seen)
    while frontier:
        fresh = {nxt for state in frontier for _, nxt in successors(state, variant)} - seen
        seen |= fresh
        frontier = list(fresh)
    return seen


def run(state, *steps, variant=CORRECT):
    for action in steps:
        after = step(state, action, variant)
        assert after is not None, f"not enabled: {action}"
        state = after
    return state


ENCODINGS = pytest.mark.parametrize("encoding", twophase.ENCODINGS)


@ENCODINGS
def test_twophase_three_rms_match_tlc_exactly(encoding):
    """TLC on TwoPhase.cfg (3 RMs): 288 distinct states, 1,146 states generated, depth 11."""
    result = explore(3, encoding=encoding)
    assert (result.distinct_states, result.generated, result.depth) == (288, 1_146, 11)
    assert result.complete and result.violation is None


@ENCODINGS
@pytest.mark.parametrize("rms, distinct", [(5, 8_832), (6, 50_816)])
def test_twophase_five_and_six_rms_match_the_published_counts(rms, distinct, encoding):
    """Stateright's 2pc example (5 RMs) and the comment closing TwoPhase.tla (6 RMs)."""
    result = explore(rms, encoding=encoding)
    assert result.distinct_states == distinct
    assert result.depth == 3 * rms + 2
    assert result.complete and result.violation is None


@pytest.mark.parametrize("rms", range(1, 7))
def test_twophase_counts_follow_the_closed_form(rms):
    """2^N + 4^N + 6^N states (TM in init, aborted, committed), the check for N beyond TLC's figures."""
    assert explore(rms).distinct_states == reachable_states(rms)


def test_twophase_tc_consistent_holds_and_is_not_vacuous():
    """TCConsistent on every reachable state, and both outcomes it relates do happen."""
    states = reachable(4)
    assert all(tc_consistent(s) for s in states)
    assert any(COMMITTED in s.rm_state for s in states), "no state with a committed RM: the check is vacuous"
    assert any(ABORTED in s.rm_state for s in states), "no state with an aborted RM: the check is vacuous"


def test_twophase_actions_lists_every_enabled_action():
    """``actions`` filters on the cheap guards; it must never leave out an action ``step`` enables."""
    for variant in (CORRECT, EARLY_COMMIT):
        for state in reachable(3, variant):
            enabled = [a for a in every_action(3) if step(state, a, variant) is not None]
            listed = [a for a in actions(state) if step(state, a, variant) is not None]
            assert sorted(map(repr, listed)) == sorted(map(repr, enabled))


@pytest.mark.parametrize("variant", [CORRECT, EARLY_COMMIT], ids=["correct", "early_commit"])
@pytest.mark.parametrize("rms", range(1, 5))
def test_twophase_packed_states_step_exactly_as_the_records(rms, variant):
    """From every reachable state, ``Packed``'s steps are the records' steps packed: the same actions,
    stutters included (handed back as the state itself) and in the same order; ``Packed.step`` is
    ``step`` packed for every action, enabled or not; TCConsistent agrees."""
    packed = Packed(rms, variant)
    for state in reachable(rms, variant):
        code = packed.pack(state)
        assert packed.unpack(code) == state
        steps = successors(state, variant)
        assert packed.successors(code) == [(action, packed.pack(after)) for action, after in steps]
        stutters = [after is state for _, after in steps]
        assert [after is code for _, after in packed.successors(code)] == stutters
        assert packed.consistent(code) == tc_consistent(state)
        assert packed.broken_always(code) == broken_always(state)
        for action in every_action(rms):
            after = step(state, action, variant)
            assert packed.step(code, action) == (None if after is None else packed.pack(after)), action


def test_twophase_tm_commits_only_when_every_rm_prepared():
    """TMCommit needs tmPrepared = RM; once the TM has decided it decides nothing else."""
    state = init_state(2)
    assert step(state, TMCommit()) is None
    state = run(state, RMPrepare(0), RMPrepare(1), TMRcvPrepared(0))
    assert step(state, TMCommit()) is None
    state = run(state, TMRcvPrepared(1), TMCommit())
    assert step(state, TMAbort()) is None and step(state, TMCommit()) is None
    assert step(state, RMRcvAbortMsg(0)) is None


def test_twophase_receiving_a_decision_twice_stutters():
    """A repeated receipt changes nothing: ``step`` hands back the same state, which still counts as generated."""
    state = run(init_state(2), TMAbort(), RMRcvAbortMsg(0))
    assert step(state, RMRcvAbortMsg(0)) is state
    assert [a for a, nxt in successors(state) if nxt is state] == [RMRcvAbortMsg(0)]


@ENCODINGS
def test_twophase_early_commit_bug_breaks_tc_consistent(encoding):
    """Seeded bug: the TM commits before every RM prepared; a working RM aborts while another commits.

    The search must find it, with the shortest trace (3 steps), and the trace must replay through
    the buggy model to a state that breaks TCConsistent, and be refused by the correct one.
    """
    result = explore(3, EARLY_COMMIT, encoding=encoding)
    assert result.violation is not None and len(result.violation) == 3
    assert not tc_consistent(run(init_state(3), *result.violation, variant=EARLY_COMMIT))
    assert TMCommit() in result.violation and step(init_state(3), TMCommit(), CORRECT) is None


def test_twophase_cli_json_has_the_figures(capsys):
    code = twophase.main(["--rm", "3", "--repeats", "1", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    keys = {"rm", "distinct_states", "generated", "depth", "seconds", "seconds_all", "peak_rss_mb"}
    keys |= {"tlc_seconds", "ratio_vs_tlc", "target_met"}
    assert keys <= set(result)
    assert (result["rm"], result["distinct_states"], result["generated"], result["depth"]) == (3, 288, 1_146, 11)
    assert result["matches_tlc"] is True and result["tc_consistent"] is True
    assert len(result["seconds_all"]) == 1 and result["peak_rss_mb"] > 0


@pytest.mark.parametrize("encoding", twophase.ENCODINGS)
def test_twophase_on_the_parallel_engine_counts_as_tlc(encoding):
    """``--workers 2``: the parallel engine, fingerprints in its seen-sets, finds TLC's counts and the same
    shortest counterexample for the seeded bug."""
    assert (explore(6, encoding=encoding, workers=2).distinct_states) == 50_816
    serial, parallel = explore(3, EARLY_COMMIT, encoding=encoding), explore(3, EARLY_COMMIT, encoding=encoding,
                                                                              workers=2)
    assert parallel.violation == serial.violation and parallel.successors == serial.successors


def test_twophase_cli_table_names_tlc(capsys):
    assert twophase.main(["--rm", "2", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "2 RMs" in out and "TLC" in out and "peak RSS MB" in out


@pytest.mark.parametrize("bad", ["0", "11", "-3", "seven", "7.5"])
def test_twophase_cli_rejects_a_bad_rm_count(capsys, bad):
    with pytest.raises(SystemExit) as exit_:
        twophase.main(["--rm", bad])
    out, err = capsys.readouterr()
    assert exit_.value.code == 2
    assert out == "" and len(err.strip().splitlines()) == 1 and "--rm" in err


@pytest.mark.slow
@ENCODINGS
def test_twophase_seven_rms_match_tlc_exactly(encoding):
    """The issue's calibration run: TLC finds 296,448 distinct states for 7 RMs."""
    result = explore(7, encoding=encoding)
    assert result.distinct_states == 296_448 == reachable_states(7)
    assert result.depth == 23
    assert result.generated == 2_744_706  # ours, pinned: counted as TLC counts, which 3 RMs confirms
    assert result.complete and result.violation is None


def test_twophase_both_encodings_find_the_same_trace():
    """The engine meets the packed states in the records' order, so the shortest traces are the same."""
    for rms in (2, 3, 4):
        assert explore(rms, EARLY_COMMIT).violation == explore(rms, EARLY_COMMIT, encoding="packed").violation


def test_twophase_cli_rejects_an_unknown_encoding(capsys):
    with pytest.raises(SystemExit) as exit_:
        twophase.main(["--rm", "3", "--encoding", "fingerprints"])
    assert exit_.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
