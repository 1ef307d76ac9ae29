"""Grading exercise 8.4: a GPipe step predicted from the stages' times and α, β, then measured.

Run with ``make grade EX=8.4`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex08_4
tests/exercises`` (the reference answer).

The measured part profiles each stage on this process (:func:`lab.pipeline.profile_stages`),
then calibrates this machine quickly and runs the lab's real GPipe pipeline in the same launch
(:mod:`tests.exercises.measured`), one launch per number of stages; the tolerance is the lab's
own error in that run (the larger of its simulated twin's on the textbook cluster and its
closed form's, from the same profile and calibration; :func:`tests.exercises.measured.judge`).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.pipeline.simulate import StageCost, gpipe_time
from tests.exercises.grading import call_or_fail
from tests.exercises.measured import judge, primitives, textbook

pytestmark = [pytest.mark.ch08, pytest.mark.ex08_4]

TODO = ("predict_gpipe_step_s is not implemented yet: write it in "
        "exercises/ch08_predict_gpipe.py (EXERCISE 8.4: the first micro-batch's path through "
        "the stages and boundaries, then the slowest stage's pace for the others), then run "
        "`make grade EX=8.4` again")
MODEL = {"width": 128, "hidden": 512, "batch": 32}
"""The lab's 8-block MLP, smaller than the strategy twin's, so that a step takes milliseconds."""
MICROBATCHES = (1, 2, 4)
PROFILE_REPEATS = 3
STEP_REPEATS = 5


def predict(forward_s, backward_s, m, activation_bytes, alpha, beta):
    """The prediction under test (``DISTML_IMPL`` picks yours or the reference)."""
    return call_or_fail("ch08_predict_gpipe", "predict_gpipe_step_s", TODO, forward_s,
                        backward_s, m, activation_bytes, alpha, beta)


def closed_form(forward_s, backward_s, m, activation_bytes, alpha, beta):
    """The simulator's closed form (:func:`simulator.pipeline.simulate.gpipe_time`), s."""
    costs = [StageCost(f, b, 0, int(activation_bytes), int(activation_bytes), 0)
             for f, b in zip(forward_s, backward_s, strict=True)]
    return gpipe_time(costs, m, alpha + activation_bytes * beta)


@given(times=st.lists(st.tuples(st.floats(1e-6, 1.0), st.floats(1e-6, 1.0)), min_size=1,
                      max_size=16),
       m=st.integers(1, 256), activation=st.integers(0, 2**30), alpha=st.floats(0.0, 1e-3),
       bandwidth=st.floats(1e6, 1e12))
def test_derive_your_formula_is_the_simulators_closed_form(times, m, activation, alpha,
                                                           bandwidth):
    fwd, bwd = [t[0] for t in times], [t[1] for t in times]
    got = predict(fwd, bwd, m, activation, alpha, 1 / bandwidth)
    expected = closed_form(fwd, bwd, m, activation, alpha, 1 / bandwidth)
    assert isinstance(got, float)
    assert got == pytest.approx(expected, rel=1e-9), (
        f"p={len(times)}, m={m}, a={activation} B, α={alpha:.3g} s, β={1 / bandwidth:.3g} "
        f"s/B, t_F={fwd}, t_B={bwd}: yours {got:.6g} s, the closed form {expected:.6g} s")


@pytest.mark.parametrize(("p", "m"), [(2, 1), (4, 8), (8, 4), (3, 32)])
def test_derive_equal_stages_and_free_messages_take_m_plus_p_minus_1_ticks(p, m):
    got = predict([0.003] * p, [0.005] * p, m, 4096, 0.0, 0.0)
    assert got == pytest.approx((m + p - 1) * 0.008, rel=1e-9), (
        f"p={p}, m={m}, t_F = 3 ms, t_B = 5 ms, free messages: yours {got:.6g} s")


def measured_rows(p):
    """Each setup of ``p`` stages (balanced by time), its stage profile, and the launch's
    calibration with the real steps' medians (rank 0's, the slowest rank's step)."""
    from backends.pipeline.measure import measure_sweep_rank
    from lab.pipeline import PipelineSetup, host_busy_s, profile, profile_stages

    setups, profiles = [], []
    for m in MICROBATCHES:
        setup = PipelineSetup(stages=p, microbatches=m, **MODEL)
        layers = profile(setup, PROFILE_REPEATS)
        setup = setup.with_balance(layers)
        setups.append(setup)
        profiles.append((layers, profile_stages(setup, PROFILE_REPEATS)))
    then = (measure_sweep_rank, (tuple(setups), STEP_REPEATS, False, host_busy_s))
    return setups, profiles, primitives(p, then=then)


@pytest.mark.parametrize("p", [2, 3])
def test_measure_your_prediction_is_as_close_as_the_labs(p):
    from lab.pipeline import predict as simulate
    from lab.pipeline import stage_profile
    from simulator.pipeline.simulate import stage_costs

    predict([1e-3] * p, [2e-3] * p, 2, 4096, 1e-5, 1e-9)  # a stub fails here, before launching
    setups, profiles, measured = measured_rows(p)
    alpha, beta = measured.alpha_s, measured.beta_s_per_B
    cluster = textbook(measured, p)
    yours, lab, closed, points = [], [], [], []
    for setup, (layers, stages) in zip(setups, profiles, strict=True):
        costs = stage_costs(stage_profile(layers, setup.balance, stages), [1] * p)
        fwd, bwd = [c.forward_s for c in costs], [c.backward_s for c in costs]
        a = costs[0].output_bytes  # every block keeps the width: every boundary sends a
        yours.append(predict(fwd, bwd, setup.microbatches, a, alpha, beta))
        closed.append(closed_form(fwd, bwd, setup.microbatches, a, alpha, beta))
        lab.append(simulate(setup, layers, cluster=cluster, stage_times=stages).step_time_s)
        points.append(f"m={setup.microbatches}")
    steps = [row["timing"]["median_s"] for row in measured.then[0]]
    judge(points, yours, {"the lab's simulated twin": lab, "its closed form": closed}, steps,
          f"GPipe step at p={p} (calibrated {measured.describe()})")
