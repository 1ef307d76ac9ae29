"""The timing harness: robust summaries and agreement across ranks."""

import pytest
import torch.distributed as dist

from backends.launch import spawn
from backends.measure import Timing, measure_many


def test_summary_is_median_and_interpolated_percentiles():
    t = Timing.from_samples([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (t.median_s, t.p10_s, t.p90_s) == (3.0, 1.4, 4.6)
    assert t.samples_s == (5.0, 1.0, 4.0, 2.0, 3.0)
    with pytest.raises(ValueError):
        Timing.from_samples([])


def rank_slow_on_rank_1():
    import time

    def op():
        time.sleep(0.002 if dist.get_rank() == 1 else 0.0)

    return measure_many([op, lambda: None], repeats=3, warmup=1)


def test_every_rank_gets_the_slowest_ranks_time():
    a, b = spawn(rank_slow_on_rank_1, 2, timeout=30)
    assert a == b
    assert a[0].median_s >= 0.002 > a[1].median_s
