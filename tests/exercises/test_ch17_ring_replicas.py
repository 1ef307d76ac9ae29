"""Grading exercise 17.1: the ring all-reduce between the replica buffers of one process.

Run with ``make grade EX=17.1`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex17_1
tests/exercises`` (the reference answer).
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backends.tf_distribute import (
    SGD,
    CrossDeviceOps,
    MirroredStrategy,
    ReduceOp,
    RingAllReduce,
    train_step,
)
from exercises import load
from simulator.collectives.chunks import chunk_bounds
from simulator.tf_distribute import mirrored as sim
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch17, pytest.mark.ex17_1]

TODO = ("ring_all_reduce is not implemented yet: write it in exercises/ch17_ring_replicas.py "
        "(EXERCISE 17.1), then run `make grade EX=17.1` again")


def buffers_of(k, n, seed):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(-100, 100, (n,), generator=gen).float() for _ in range(k)]


class Counting:
    """Wraps the module's ``transfer``: remembers ``(source replica, lo, hi)`` of each call."""

    def __init__(self, module, buffers):
        self.module, self.real = module, module.transfer
        self.owner = {b.data_ptr(): i for i, b in enumerate(buffers)}
        self.sent = []

    def __call__(self, src, lo, hi, device):
        self.sent.append((self.owner.get(src.data_ptr(), -1), lo, hi))
        return self.real(src, lo, hi, device)


class RecordingHost:
    """The simulated twin's host, recording the bytes of each copy instead of timing it."""

    def __init__(self):
        self.copies = []

    def copy(self, nbytes):
        self.copies.append(nbytes)
        yield from ()

    def add(self, nbytes):
        yield from ()


@given(st.integers(1, 6), st.integers(0, 200), st.integers(0, 2**16))
def test_every_buffer_holds_the_exact_sum(k, n, seed):
    buffers = buffers_of(k, n, seed)
    total = torch.stack(buffers).sum(0) if n else torch.zeros(0)
    reference = [b.clone() for b in buffers]
    RingAllReduce().all_reduce(ReduceOp.SUM, reference)
    call_or_fail("ch17_ring_replicas", "ring_all_reduce", TODO, buffers)
    for r, (b, ref) in enumerate(zip(buffers, reference, strict=True)):
        assert torch.equal(b, total), f"replica {r} of {k}, {n} elements: not the sum"
        assert torch.equal(b, ref), f"replica {r}: differs from RingAllReduce's"


@given(st.integers(2, 6), st.integers(1, 200))
def test_each_replica_sends_the_rings_chunks_and_nothing_else(k, n):
    module = load("ch17_ring_replicas")
    buffers = buffers_of(k, n, 0)
    counting = Counting(module, buffers)
    module.transfer = counting
    try:
        call_or_fail("ch17_ring_replicas", "ring_all_reduce", TODO, buffers)
    finally:
        module.transfer = counting.real
    assert all(src >= 0 for src, _, _ in counting.sent), (
        "transfer() was given a tensor that is not a replica's whole buffer: pass "
        "buffers[r] and the chunk's bounds")
    bounds = chunk_bounds(n, k)
    for r in range(k):
        expected = sorted([bounds[(r - s - 1) % k] for s in range(k - 1)]
                          + [bounds[(r - s) % k] for s in range(k - 1)])
        got = sorted((lo, hi) for src, lo, hi in counting.sent if src == r)
        assert got == expected, f"replica {r} of {k} sent chunks {got}, the ring {expected}"
    host = RecordingHost()
    list(sim.ring_all_reduce(host, 4 * n, k))
    assert sorted(4 * (hi - lo) for _, lo, hi in counting.sent) == sorted(host.copies)


class YourRing(CrossDeviceOps):
    """Your ring as a MirroredStrategy's cross-device op."""

    def all_reduce(self, op, buffers):
        load("ch17_ring_replicas").ring_all_reduce(buffers)
        if op is ReduceOp.MEAN:
            for b in buffers:
                b.div_(len(buffers))


def train(cross_device_ops):
    torch.manual_seed(0)
    strategy = MirroredStrategy(["cpu"] * 3, cross_device_ops)
    model = strategy.mirror(torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(),
                                                torch.nn.Linear(7, 2)))
    gen = torch.Generator().manual_seed(1)
    optimizer = SGD(0.1)
    for _ in range(3):
        x, y = torch.randn(8, 5, generator=gen), torch.randn(8, 2, generator=gen)
        strategy.run(train_step, (model, strategy.distribute_batch(x),
                                  strategy.distribute_batch(y), 8, optimizer))
    assert model.in_sync(), "the replicas' weights drifted apart"
    return [v.read_value().detach().clone() for v in model.variables]


def test_as_a_mirrored_strategys_op_it_trains_as_the_labs_ring():
    call_or_fail("ch17_ring_replicas", "ring_all_reduce", TODO, buffers_of(2, 3, 0))
    for yours, lab in zip(train(YourRing()), train(RingAllReduce()), strict=True):
        assert torch.allclose(yours, lab, atol=1e-6)
