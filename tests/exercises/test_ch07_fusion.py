"""Grading exercise 7.1: fusion packing (Horovod's FuseResponses).

Literal cases, seeded random cycles against the real engine's rule
(``backends.horovod.fusion.fuse_responses``), and the plan run on 2 real processes through the
engine's fusion buffer. Run with ``make grade CH=07`` (your answer) or
``DISTML_IMPL=solutions pytest -m ch07 tests/exercises`` (the reference answer).
"""

import random

import pytest

from backends.horovod.fusion import fuse_responses as engine_rule
from backends.launch import spawn
from tests.exercises import ch07_ranks
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch07, pytest.mark.ex07_1, pytest.mark.timeout(120)]

TODO = ("fuse_responses is not implemented yet: write it in exercises/ch07_fusion.py "
        "(EXERCISE 7.1), then run `make grade CH=07` again")
MiB = 2**20


def plan(ready, threshold):
    return call_or_fail("ch07_fusion", "fuse_responses", TODO, ready, threshold)


@pytest.mark.parametrize(("ready", "threshold", "expected", "what"), [
    ([("a", "float32", 40), ("b", "float64", 30), ("c", "float32", 50), ("d", "float32", 20),
      ("e", "float64", 10)], 100, [["a", "c"], ["b", "e"], ["d"]],
     "the exercise's example: look ahead past b, stop once the skipped bytes overflow"),
    ([(f"t{i}", "float32", 4 * MiB) for i in range(4)], 10 * MiB,
     [["t0", "t1"], ["t2", "t3"]], "one dtype: greedy, in order, up to the threshold"),
    ([("a", "float32", 4 * MiB), ("h", "float16", 2 * MiB), ("b", "float32", 4 * MiB)],
     10 * MiB, [["a", "b"], ["h"]], "mixed precision: fp32 fuses across an fp16 tensor"),
    ([("a", "float32", 8), ("b", "float32", 8), ("c", "float32", 8)], 0,
     [["a"], ["b"], ["c"]], "threshold 0 turns fusion off"),
    ([("big", "float32", 300), ("s", "float32", 10), ("t", "float32", 10)], 100,
     [["big"], ["s", "t"]], "a tensor over the threshold is reduced alone"),
    ([("a", "float32", 60), ("b", "float32", 40), ("c", "float32", 1)], 100,
     [["a", "b"], ["c"]], "an exact fit (total == threshold) joins"),
    ([], 100, [], "no ready tensor, no all-reduce"),
])
def test_literal_cases(ready, threshold, expected, what):
    got = plan(ready, threshold)
    assert [list(g) for g in got] == expected, f"{what}: expected {expected}, got {got}"


def _random_cycle(rng):
    dtypes = rng.choice([["float32"], ["float32", "float16"], ["float32", "float16", "int64"]])
    ready = [(f"allreduce.p{i}", rng.choice(dtypes), rng.choice([4, 64, 4096, 2**18, 2**22])
              * rng.randint(1, 8)) for i in range(rng.randint(0, 40))]
    threshold = rng.choice([0, 1, 2**12, 2**16, 2**20, 2**22, 2**24, 64 * MiB])
    return ready, threshold


def test_random_cycles_match_the_engine():
    rng = random.Random(7)
    for case in range(400):
        ready, threshold = _random_cycle(rng)
        got, want = plan(ready, threshold), engine_rule(ready, threshold)
        assert [list(g) for g in got] == want, (
            f"case {case}, threshold {threshold} B, ready {ready}: the engine fuses {want}, "
            f"you {got}")


def test_the_plan_runs_on_two_processes():
    plan([("x", "float32", 4)], 4)  # a stub fails here, before any process starts
    cases = [(seed, 24, threshold) for seed, threshold in
             ((1, 0), (2, 1024), (3, 4096), (4, 64 * 1024), (5, MiB))]
    per_rank = spawn(ch07_ranks.grade_plan, 2, cases, timeout=20, deadline=90)
    if any("todo" in r for r in per_rank):
        pytest.fail(TODO, pytrace=False)
    problems = [f"rank {r}: {p}" for r, got in enumerate(per_rank) for p in got["problems"]]
    assert not problems, "; ".join(problems)
