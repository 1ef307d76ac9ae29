"""The simulated DDP: bucket assignment, gloo's ring, shared cores, and one overlapped step."""

import itertools
import math

import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from simulator.core import Cluster, Device, Link, Topology, run_spmd
from simulator.ddp import (
    CoreShare,
    Interference,
    Workload,
    assign_buckets,
    bucket_caps,
    gloo_ring_all_reduce,
    gloo_segments,
    mlp_workload,
    predict_step,
)

MiB = 2**20


def cluster(p, latency_s=20e-6, bandwidth_Bps=2e9, contention="fair"):
    device = Device("cpu", 50e9, 30e9, 1e12)
    return Cluster.homogeneous("test", device, Topology.fully_connected(
        p, Link(latency_s, bandwidth_Bps, contention)))


@given(sizes=st.lists(st.integers(0, 5 * MiB), max_size=40),
       cap=st.integers(1, 8 * MiB), first=st.integers(1, 8 * MiB))
def test_buckets_partition_the_parameters_in_reverse_order_and_respect_the_caps(sizes, cap,
                                                                                first):
    buckets = assign_buckets(sizes, cap, first)
    flat = [i for b in buckets for i in b]
    assert flat == list(reversed(range(len(sizes))))
    for k, bucket in enumerate(buckets):
        limit = first if k == 0 else cap
        total = sum(sizes[i] for i in bucket)
        if k < len(buckets) - 1:  # closed: reached its cap, and only with its last parameter
            assert total >= limit > total - sizes[bucket[-1]]
        else:
            assert total - sizes[bucket[-1]] < limit


def test_bucket_caps_follow_pytorch_defaults():
    assert bucket_caps(None) == (25 * MiB, MiB)
    assert bucket_caps(5) == (5 * MiB, 5 * MiB)
    with pytest.raises(ValueError):
        bucket_caps(0)


@given(n=st.integers(1, 64 * MiB).map(lambda n: n // 4 * 4 or 4), p=st.integers(2, 8))
def test_gloo_segments_cover_the_buffer_with_at_least_two_per_rank(n, p):
    sizes = gloo_segments(n, p)
    assert sum(sizes) == n and len(sizes) % p == 0 and len(sizes) >= 2 * p
    assert max(sizes) <= MiB


@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("n", [4096, 3 * MiB + 40, 20 * MiB])
def test_gloo_ring_sends_the_ring_all_reduce_bytes(p, n):
    result = run_spmd(cluster(p), gloo_ring_all_reduce, n)
    sent = sum(s.nbytes for s in result.trace if s.kind == "send")
    assert sent == pytest.approx(2 * n * (p - 1), rel=1e-9)  # 2n(p−1)/p per rank, p ranks


def test_two_threads_on_one_core_take_twice_as_long():
    env = simpy.Environment()
    host = CoreShare(env, cores=1)
    done = []

    def job(seconds):
        yield from host.run(seconds)
        done.append(env.now)

    env.process(job(1.0))
    env.process(job(3.0))
    env.run()
    assert done == pytest.approx([2.0, 4.0])  # shared until the first ends, then alone


def test_one_rank_step_is_its_compute_and_copies():
    work = mlp_workload([256, 256, 10], 16, 10e9)
    result = predict_step(cluster(1), work, MiB)
    dev = cluster(1).devices[0]
    copies = work.param_bytes * (2 / dev.memcpy_Bps + 1 / dev.reduce_Bps)
    assert result.step_s == pytest.approx(work.compute_s + copies)
    assert result.exposed_comm_s == 0.0


def test_overlap_hides_communication_and_bucket_size_has_a_sweet_spot():
    # 16 MiB of 1 MiB layers on a slow-latency network: small buckets pay α per segment
    # (2·k(p−1) messages each), one big bucket waits for the whole backward
    work = mlp_workload([512] * 17, 64, 100e9)
    net = cluster(4, latency_s=1e-3, bandwidth_Bps=1e9)
    caps = [0.25, 1, 4, 16, 64]
    steps = [predict_step(net, work, int(c * MiB)).step_s for c in caps]
    best = min(range(len(caps)), key=steps.__getitem__)
    assert 0 < best < len(caps) - 1, f"no U-shape: {steps}"
    for c in caps:
        on = predict_step(net, work, int(c * MiB))
        off = predict_step(net, work, int(c * MiB), overlap=False)
        assert on.step_s <= off.step_s + 1e-12
        if len(on.buckets) > 1:  # with one bucket there is nothing to overlap
            assert on.exposed_comm_s < off.exposed_comm_s
        else:
            assert on.step_s == pytest.approx(off.step_s)


def test_oversubscribed_cores_slow_the_step_and_are_deterministic():
    work = mlp_workload([512] * 6, 32, 20e9)
    free = predict_step(cluster(4), work, MiB, cores=math.inf)
    shared = predict_step(cluster(4), work, MiB, cores=2)
    assert shared.step_s > free.step_s
    again = predict_step(cluster(4), work, MiB, cores=2)
    assert again.step_s == shared.step_s
    assert [s.start for s in again.trace] == [s.start for s in shared.trace]


def test_empty_workload_is_rejected():
    with pytest.raises(ValueError):
        mlp_workload([8], 4, 1e9)
    assert Workload(()).param_bytes == 0


def test_measured_interference_slows_overlapped_work_only():
    work = mlp_workload([512] * 6, 32, 20e9)
    net = cluster(2)
    plain = predict_step(net, work, MiB, cores=2)
    neutral = predict_step(net, work, MiB, cores=2, interference=Interference(1.0, 1.0))
    slow = predict_step(net, work, MiB, cores=2, interference=Interference(0.5, 0.5))
    serial = predict_step(net, work, MiB, cores=2, overlap=False,
                          interference=Interference(0.5, 0.5))
    assert neutral.step_s <= plain.step_s + 1e-12  # no interference: overlap is free
    assert neutral.step_s < slow.step_s
    # nothing overlaps when the all-reduces wait for backward: interference cannot matter
    assert serial.step_s == pytest.approx(
        predict_step(net, work, MiB, cores=2, overlap=False).step_s)
    with pytest.raises(ValueError):
        Interference(0.0, 1.0)


@pytest.mark.parametrize("n", [4 * MiB, 3 * MiB + 40])
def test_gloo_ring_at_two_ranks_keeps_one_segment_in_flight_each_way(n):
    # the peer's receive-ready notice rides behind its own segment: a rank's segment i leaves
    # only once segment i−1 has arrived from the peer and its own i−1 is through
    result = run_spmd(cluster(2), gloo_ring_all_reduce, n)
    for rank in (0, 1):
        sends = sorted((s for s in result.trace if s.kind == "send" and s.rank == rank),
                       key=lambda s: s.start)
        for before, after in itertools.pairwise(sends):
            assert after.start >= before.end - 1e-12


def test_gloo_ring_at_four_ranks_keeps_two_segments_in_flight():
    result = run_spmd(cluster(4), gloo_ring_all_reduce, 8 * MiB)
    sends = sorted((s for s in result.trace if s.kind == "send" and s.rank == 0),
                   key=lambda s: s.start)
    assert any(after.start < before.end for before, after in itertools.pairwise(sends))
