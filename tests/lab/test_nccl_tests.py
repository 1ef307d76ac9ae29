"""busbw factors as nccl-tests define them."""

import pytest

from lab.nccl_tests import algbw_GBps, busbw_GBps


def test_all_reduce_busbw_is_two_p_minus_one_over_p_times_algbw():
    assert algbw_GBps(8 * 10**9, 2.0) == 4.0
    assert busbw_GBps("all_reduce", 8, 8 * 10**9, 2.0) == pytest.approx(4.0 * 2 * 7 / 8)


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter", "all_to_all"])
def test_gather_like_busbw_is_p_minus_one_over_p(op):
    assert busbw_GBps(op, 4, 10**9, 1.0) == pytest.approx(0.75)


def test_broadcast_and_unknown_operations_use_algbw():
    assert busbw_GBps("broadcast", 16, 10**9, 1.0) == 1.0
    assert busbw_GBps("ping_pong", 2, 10**9, 1.0) == 1.0
