"""Grading exercise 5.1: bucket assignment, against PyTorch's, the simulator's and the real DDP.

Run with ``make grade CH=05`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch05
tests/exercises`` (the reference answer).
"""

import pytest
import torch
import torch.distributed as dist
from hypothesis import given
from hypothesis import strategies as st

from backends.launch import spawn
from simulator.ddp import assign_buckets as lab_assign_buckets
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch05, pytest.mark.ex05_1]

TODO = ("assign_buckets is not implemented yet: write it in exercises/ch05_buckets.py "
        "(EXERCISE 5.1), then run `make grade CH=05` again")


def buckets(sizes, cap, first):
    return call_or_fail("ch05_buckets", "assign_buckets", TODO, sizes, cap, first)


def test_textbook_example():
    mib = 2**20
    assert buckets([mib] * 4, 2 * mib, mib) == [[3], [2, 1], [0]]


@given(numels=st.lists(st.integers(1, 300_000), min_size=1, max_size=30),
       cap=st.integers(4, 2**21), first=st.integers(4, 2**21))
def test_equal_to_pytorchs_assignment(numels, cap, first):
    tensors = [torch.empty(n) for n in numels]
    sizes = [4 * n for n in numels]
    # DDP's bucket rebuild: gradients in arrival order (reverse registration), with indices
    expected, _ = dist._compute_bucket_assignment_by_size(
        tensors[::-1], [first, cap], [False] * len(tensors), list(reversed(range(len(numels)))))
    got = buckets(sizes, cap, first)
    assert got == [list(b) for b in expected], (
        f"sizes {sizes}, cap {cap}, first {first}: PyTorch makes {expected}, you made {got}")


@given(sizes=st.lists(st.integers(0, 10**7), max_size=40), cap=st.integers(1, 10**7),
       first=st.integers(1, 10**7))
def test_equal_to_the_simulators_assignment(sizes, cap, first):
    assert buckets(sizes, cap, first) == lab_assign_buckets(sizes, cap, first)


@pytest.mark.parametrize("caps", [(0, 10), (10, 0), (-1, 5)])
def test_a_cap_of_zero_or_less_raises(caps):
    with pytest.raises(ValueError):
        buckets([4, 4], *caps)


def count_all_reduces(cap_mb):
    """Rank function: all-reduces one step of the real DDP launches (traced)."""
    from backends.ddp import DistributedDataParallel
    from backends.trace import Tracer

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32),
                              torch.nn.ReLU(), torch.nn.Linear(32, 8))
    sizes = [p.numel() * 4 for p in net.parameters()]
    tracer = Tracer()
    model = DistributedDataParallel(net, bucket_cap_mb=cap_mb, tracer=tracer)
    model(torch.randn(4, 64)).sum().backward()
    return sizes, sum(s.kind == "allreduce" for s in tracer.trace)


def test_the_real_ddp_launches_one_all_reduce_per_bucket():
    cap_mb = 0.005  # 5 KiB: a few buckets for this 25 KiB model
    buckets([4], 1, 1)  # a stub fails here, before the launch
    sizes, launched = spawn(count_all_reduces, 1, cap_mb, timeout=30, deadline=60)[0]
    cap = int(cap_mb * 2**20)
    assert launched == len(buckets(sizes, cap, cap)) > 1
