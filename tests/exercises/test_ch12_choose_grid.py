"""Grading exercise 12.2: a (t, p, d, b) that fits, and is nearly as fast as the planner's best.

Run with ``make grade CH=12`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch12
tests/exercises`` (the reference answer).
"""

import pytest

from simulator.core.hardware import preset
from simulator.megatron_plan import plan
from simulator.tensor_parallel import Grid, MegatronConfig, simulate_megatron
from simulator.transformer import preset as model_preset
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch12, pytest.mark.ex12_2]

TODO = ("choose_grid is not implemented yet: write it in exercises/ch12_choose_grid.py "
        "(EXERCISE 12.2), then run `make grade CH=12`")

CASES = [("gpt-7.5b", 32, 64), ("gpt-18b", 64, 128), ("gpt-39b", 128, 256)]


@pytest.mark.parametrize(("name", "gpus", "batch"), CASES)
def test_fits_and_is_within_10_percent_of_the_planners_best(name, gpus, batch):
    model, cluster = model_preset(name), preset("a100", gpus)
    memory = cluster.devices[0].memory_bytes
    t, p, d, b = call_or_fail("ch12_choose_grid", "choose_grid", TODO, model, gpus, batch,
                              memory)
    assert t * p * d == gpus, f"t·p·d = {t}·{p}·{d} is not {gpus} GPUs"
    config = MegatronConfig(model, Grid(t, p, d), batch, b)  # raises on an invalid split
    mine = simulate_megatron(cluster, config)
    assert mine.memory_per_gpu_bytes <= memory, (
        f"({t}, {p}, {d}, b={b}) needs {mine.memory_per_gpu_bytes / 2**30:.1f} GiB per GPU")
    best = next(r for r in plan(model, cluster, batch) if r.fits)
    assert mine.iteration_time_s <= 1.1 * best.iteration_time_s, (
        f"({t}, {p}, {d}, b={b}) takes {mine.iteration_time_s:.2f} s per iteration; the "
        f"planner's best ({best.t}, {best.p}, {best.d}, b={best.micro_batch}) takes "
        f"{best.iteration_time_s:.2f} s")
