"""Grading exercise 20.2: the bytes one FSDP rank sends per step, with and without resharding
after forward and in mixed precision, against the simulated twin (:mod:`simulator.fsdp`) and
ZeRO's closed form (Rajbhandari et al., SC 2020, §7.2.2).

Run with ``make grade EX=20.2`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex20_2
tests/exercises`` (the reference answer).
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.fsdp import FsdpConfig, communication_volume
from simulator.fsdp import traffic_bytes as simulated
from simulator.zero import UnitCost
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch20, pytest.mark.ex20_2]

TODO = ("traffic_bytes is not implemented yet: write it in exercises/ch20_fsdp_traffic.py "
        "(EXERCISE 20.2), then run `make grade EX=20.2` again")


def traffic(*args):
    return call_or_fail("ch20_fsdp_traffic", "traffic_bytes", TODO, *args)


@pytest.mark.parametrize("reshard", [True, False])
def test_zeros_closed_form_when_the_world_divides_every_unit(reshard):
    # 3Ψ (ZeRO-3, 1.5× data parallelism) resharding after forward, 2Ψ without
    units, world = [800, 1_200, 4_000], 8
    got = traffic(units, world, reshard)
    want = communication_volume(sum(units), world, reshard)
    assert got == pytest.approx(want, rel=1e-12), (reshard, got, want)


def test_one_rank_sends_nothing():
    assert traffic([123, 45], 1, True, 2, 4) == 0


def test_padding_is_sent_too():
    # 7 parameters on 4 ranks: a buffer of 8, each rank sends 3/4 of it per collective
    assert traffic([7], 4, True, 4, 4) == pytest.approx(3 / 4 * 8 * 12)


@settings(max_examples=80, deadline=None)
@given(numels=st.lists(st.integers(1, 10**7), min_size=1, max_size=8),
       world=st.integers(1, 64), reshard=st.booleans(),
       itemsizes=st.sampled_from([(4, 4), (2, 4), (2, 2), (4, 2), (1, 4)]))
def test_equals_the_simulated_twin(numels, world, reshard, itemsizes):
    got = traffic(numels, world, reshard, *itemsizes)
    units = [UnitCost(n, 0.0, 0.0, 0.0) for n in numels]
    want = simulated(units, world, FsdpConfig(reshard, param_itemsize=itemsizes[0],
                                              reduce_itemsize=itemsizes[1]))
    assert got == pytest.approx(want, rel=1e-9), (
        f"traffic_bytes({numels}, {world}, {reshard}, {itemsizes[0]}, {itemsizes[1]}) = {got},"
        f" simulator {want}")


def test_bf16_gathers_with_fp32_reduction_send_two_thirds():
    # two bf16 gathers and one fp32 reduce-scatter: (2·2 + 4)/(3·4) = 2/3 of fp32's bytes
    units, world = [1024, 4096], 4
    assert traffic(units, world, True, 2, 4) == pytest.approx(
        traffic(units, world, True, 4, 4) * 8 / 12)


@pytest.mark.parametrize("bad", [([10], 0), ([0], 2), ([10], 2, True, 0, 4)])
def test_bad_input_raises_value_error(bad):
    with pytest.raises(ValueError):
        traffic(*bad)
