"""Grading capstone 10.4: a 1F1B (PipeDream-Flush) pipeline runtime on real processes.

The student's ``OneFOneB`` trains an MLP cut into 2, 3 and 4 stages (one launch per world
size, every micro-batch count in it: :mod:`tests.exercises.ch10_capstone_ranks`) and is held
to four promises:

* parity — after 2 SGD steps the losses, gradients and parameters equal
  ``torch.distributed.pipelining``'s on the same split, for ``m < p``, ``m`` not a multiple
  of ``p`` and ``m`` a multiple;
* order — each stage executes exactly :func:`simulator.pipeline.schedules.one_f_one_b`'s
  actions for it;
* memory — a stage's peak bytes saved for backward are ``min(p − s, m)`` micro-batches';
* bubble — a stage sends each output as soon as it is computed and waits only for the
  input of its next action, so it idles only where 1F1B's dependencies make it, as
  :func:`simulator.pipeline.schedules.timeline` assumes (checked on the order of events: on
  a busy host a clock would measure the load, not the runtime).

Run with ``make grade EX=10.4`` (your answer) or ``DISTML_IMPL=solutions pytest
tests/exercises/test_ch10_capstone_1f1b.py`` (the reference answer).
"""

import pytest

from simulator.pipeline.schedules import one_f_one_b
from tests.exercises import ch10_capstone_ranks as ranks
from tests.exercises.grading import graded, is_todo, launch

pytestmark = [pytest.mark.ch10, pytest.mark.ex10_4, pytest.mark.timeout(180)]

TODO = ("the 1F1B runtime is not implemented yet: write schedule, forward_step, backward_step "
        "and train_step in exercises/ch10_capstone_1f1b.py (EXERCISE 10.4), then run "
        "`make grade EX=10.4` again")
WORLDS = (2, 3, 4)


@pytest.fixture(scope="module")
def reports():
    """``reports(world)``: every rank's report at that world size, one launch each."""
    outcomes = {}

    def get(world):
        if world not in outcomes:
            todo = [o for o in outcomes.values() if is_todo(o)]
            outcomes[world] = todo[0] if todo else launch(ranks.grade, world)
        return graded(outcomes[world], world, TODO)

    return get


def cases(reports, world):
    """(stage, case report) for every stage and micro-batch count at ``world``."""
    return [(stage, case) for stage, report in enumerate(reports(world))
            for case in report["cases"]]


@pytest.mark.parametrize("world", WORLDS)
def test_losses_gradients_and_parameters_equal_pytorch_pipelinings(reports, world):
    for stage, case in cases(reports, world):
        where = f"{world} stages, m = {case['m']}, stage {stage}"
        if stage == world - 1:
            for step, (ours, theirs) in enumerate(zip(case["losses"], case["their_losses"],
                                                      strict=True)):
                assert ours is not None and abs(ours - theirs) <= 1e-6 * max(1, abs(theirs)), (
                    f"{where}, step {step}: loss {ours}, PyTorch's {theirs} (the mean of the "
                    "micro-batches' mean losses)")
        assert case["grad_diff"] is not None, (
            f"{where}: a parameter has no gradient after train_step")
        assert case["grad_diff"] <= 1e-5, (
            f"{where}: after {ranks.STEPS} steps the gradients differ from PyTorch's by "
            f"{case['grad_diff']:.3g} (accumulated over the micro-batches, each loss / m?)")
        assert case["param_diff"] <= 1e-5, (
            f"{where}: after {ranks.STEPS} SGD steps the parameters differ from PyTorch's by "
            f"{case['param_diff']:.3g} (one optimizer step per mini-batch, after the flush?)")


@pytest.mark.parametrize("world", WORLDS)
def test_each_stage_executes_the_simulators_1f1b_actions(reports, world):
    for stage, case in cases(reports, world):
        expected = [(a.kind, a.microbatch) for a in one_f_one_b(world, case["m"])[stage]]
        for step, got in enumerate(case["actions"]):
            assert [tuple(a) for a in got] == expected, (
                f"{world} stages, m = {case['m']}, stage {stage}, step {step}: executed "
                f"{' '.join(k + str(i) for k, i in got)}; 1F1B runs "
                f"{' '.join(k + str(i) for k, i in expected)}")


@pytest.mark.parametrize("world", WORLDS)
def test_peak_activations_are_min_p_minus_s_and_m_microbatches(reports, world):
    for stage, case in cases(reports, world):
        one, expected = case["microbatch_bytes"], min(world - stage, case["m"])
        for step, peak in enumerate(case["peaks"]):
            assert peak == expected * one, (
                f"{world} stages, m = {case['m']}, stage {stage}, step {step}: "
                f"{peak} B saved for backward at the peak, {peak / one:.2f} micro-batches of "
                f"{one} B; 1F1B keeps at most min(p − s, m) = {expected} in flight")


def segments(events):
    """The compute kinds in order (``F``/``B``), the events between consecutive computes
    (``gaps[k]`` before compute ``k``; the last one after the last compute), and the
    events that happened inside a compute."""
    kinds, gaps, inside, current, computing = [], [], [], [], False
    for event in events:
        if event in ("F<", "B<"):
            kinds.append(event[0])
            gaps.append(current)
            current, computing = [], True
        elif event in ("F>", "B>"):
            computing = False
        else:
            (inside if computing else current).append(event)
    return kinds, [*gaps, current], inside


def expected_gap(before, after, stage, world):
    """What a stage does between action ``before`` and action ``after`` (``None`` at the
    ends): first send what ``before`` produced, then wait for what ``after`` consumes."""
    first, last = stage == 0, stage == world - 1
    sends = [] if before is None else (
        ["send next"] if before == "F" and not last else
        ["send prev"] if before == "B" and not first else [])
    recvs = [] if after is None else (
        ["recv prev"] if after == "F" and not first else
        ["recv next"] if after == "B" and not last else [])
    return sends + recvs


@pytest.mark.parametrize("world", WORLDS)
def test_a_stage_sends_at_once_and_waits_only_for_its_next_actions_input(reports, world):
    """The bubble, structurally: with the order of the test above, a stage that sends each
    output as soon as it is computed and waits only for the input of the action it runs
    next idles exactly where 1F1B's dependencies make it — the rules by which
    simulator.pipeline.schedules.timeline predicts the bubble, (p − 1)/(m + p − 1) with
    equal stages. Checked on the order of events, not on a clock: the host's load cannot
    change it."""
    for stage, case in cases(reports, world):
        kinds = [a.kind for a in one_f_one_b(world, case["m"])[stage]]
        for step, events in enumerate(case["events"]):
            where = f"{world} stages, m = {case['m']}, stage {stage}, step {step}"
            got, gaps, inside = segments(events)
            assert got == kinds, (
                f"{where}: computed {''.join(got)}; 1F1B computes {''.join(kinds)} (run the "
                "stage as self.module(x), and autograd's backward once per micro-batch)")
            assert not inside, f"{where}: {inside} while the stage computed"
            for k, gap in enumerate(gaps):
                before = kinds[k - 1] if k else None
                after = kinds[k] if k < len(kinds) else None
                expected = expected_gap(before, after, stage, world)
                assert gap == expected, (
                    f"{where}: between {before or 'the start'} and {after or 'the end'} the "
                    f"stage did {gap}; expected {expected} — send each output as soon as it "
                    "is computed, before waiting for anything, and receive an input only "
                    "for the action that needs it next")
