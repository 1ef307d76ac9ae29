"""Grading exercise 3.4: a BSP parameter-server iteration predicted from α, β and t_c, then
measured.

Run with ``make grade EX=3.4`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex03_4
tests/exercises`` (the reference answer).

The measured part profiles the code's costs and a gradient on this process
(:func:`lab.parameter_server.profile_costs`, :func:`~lab.parameter_server.profile_compute`),
then calibrates this machine quickly and runs the lab's real parameter server in the same
launch (:mod:`tests.exercises.measured`), one launch per number of workers; the tolerance is
the lab's own error in that run (the larger of its simulated twin's on the textbook cluster
and the textbook formula's, from the same calibration; :func:`tests.exercises.measured.judge`).
The any-source receive's extra (a launch of its own in ``distml-lab compare``) is left out of
the lab's prediction here: it is microseconds beside milliseconds.
"""

from dataclasses import replace

import pytest

from tests.exercises.grading import call_or_fail
from tests.exercises.measured import judge, primitives

pytestmark = [pytest.mark.ch03, pytest.mark.ex03_4]

TODO = ("predict_ps_step_s is not implemented yet: write it in exercises/ch03_predict_ps.py "
        "(EXERCISE 3.4: the messages and bytes through the server's link, plus the "
        "computation), then run `make grade EX=3.4` again")
HIDDEN = (64, 256, 1024)
"""Hidden widths of the lab's MLP (32 → hidden → 10): models of 11, 44 and 176 KB."""
ITERATIONS = 12


def predict(w, n, alpha, beta, compute):
    """The prediction under test (``DISTML_IMPL`` picks yours or the reference)."""
    return call_or_fail("ch03_predict_ps", "predict_ps_step_s", TODO, w, n, alpha, beta,
                        compute)


def test_derive_the_textbooks_worked_example():
    # Textbook chapter 3: W = 8, M = 400 MB, B = 1.25 GB/s, T_c = 1 s, S = 1, not overlapped.
    assert predict(8, 400e6, 0.0, 1 / 1.25e9, 1.0) == pytest.approx(6.12, rel=1e-9)


@pytest.mark.parametrize("w", [1, 3, 8])
def test_derive_free_messages_leave_the_computation(w):
    assert predict(w, 2**20, 0.0, 0.0, 0.004) == pytest.approx(0.004, rel=1e-12)


@pytest.mark.parametrize("w", [1, 2, 5])
def test_derive_the_communication_doubles_with_the_workers(w):
    one = predict(w, 2**20, 50e-6, 1 / 1e9, 0.001) - 0.001
    two = predict(2 * w, 2**20, 50e-6, 1 / 1e9, 0.001) - 0.001
    assert two == pytest.approx(2 * one, rel=1e-9), (
        f"communication per iteration: {one:.6g} s with {w} workers, {two:.6g} s with {2 * w}")


def test_derive_empty_messages_cost_one_latency_each():
    # a pull and a push per worker through the server's link, one message at a time
    assert predict(3, 0, 1.0, 1.0, 0.0) == pytest.approx(6.0, rel=1e-12)


@pytest.fixture(scope="module")
def code_costs():
    """The van's and the server's software costs, on this process (:class:`PSCosts`)."""
    from lab.parameter_server import profile_costs

    return profile_costs(repeats=3)


@pytest.mark.parametrize("w", [1, 2])
def test_measure_your_prediction_is_as_close_as_the_labs(w, code_costs):
    import numpy as np

    from backends.parameter_server.train import collect, run_scenarios
    from lab.parameter_server import predict as simulate
    from lab.parameter_server import profile_compute
    from lab.strategies_ps import config

    predict(w, 2**14, 1e-4, 1e-9, 1e-3)  # a stub fails here, before anything launches
    cfgs = tuple(replace(config("bsp", 1, w), mlp_sizes=(32, h, 10), iterations=ITERATIONS)
                 for h in HIDDEN)
    compute = [profile_compute(cfg) for cfg in cfgs]
    measured = primitives(1 + 1 + w, then=(run_scenarios, (cfgs,)))
    alpha, beta = measured.alpha_s, measured.beta_s_per_B
    yours, lab, formula, steps, points = [], [], [], [], []
    for k, (cfg, grads) in enumerate(zip(cfgs, compute, strict=True)):
        n, t_c = 4 * cfg.num_keys(), float(np.median(grads))
        yours.append(predict(w, n, alpha, beta, t_c))
        formula.append(t_c + 2 * w * (alpha + n * beta))
        lab.append(simulate(cfg, measured.entry, code_costs, grads, model="textbook")
                   .time_per_iteration_s())
        steps.append(collect(cfg, [rank[k] for rank in measured.then]).time_per_iteration_s)
        points.append(f"{n / 1e3:.0f} KB")
    judge(points, yours, {"the lab's simulated twin": lab, "the textbook formula": formula},
          steps, f"BSP iteration, 1 server, w={w} (calibrated {measured.describe()})")
