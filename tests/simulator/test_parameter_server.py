"""The simulated parameter server: message flow, consistency, bottleneck, determinism."""

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from simulator.core import Cluster, Device, Link, Topology
from simulator.parameter_server import (
    AnySource,
    PSConfigError,
    PSCosts,
    PSSpec,
    SparseLRData,
    VanLink,
    bottleneck_sweep,
    check_consistency,
    dense_slices,
    key_ranges,
    message_nbytes,
    simulate,
    skewed_splits,
    sparse_lr_slices,
    straggler_delays,
    van_cluster,
)
from simulator.ps_convergence import replay_sparse_lr

ZERO = PSCosts(0, 0, 0, 0, 0, 0, 0, 0)
CPU = Device("cpu", 1e10, 1e10, math.inf)


def cluster(world, bandwidth=1e9, latency=1e-5):
    link = Link(latency, bandwidth, "fair")
    return Cluster.homogeneous("switch", CPU, Topology.switch(world, link))


def spec(S, W, model="bsp", tau=0, iterations=6, keys=10_000, compute=1e-3, delay=None,
         splits=None):
    slices = dense_slices(keys, S, W, iterations, splits)
    return PSSpec(S, W, model, tau, slices, True, np.full((iterations, W), compute),
                  np.zeros((iterations, W)) if delay is None else delay, ZERO)


def test_bsp_iteration_is_pull_compute_push_on_an_idle_network():
    # One server, one worker, no software costs: the values cross twice (pulled, pushed),
    # besides the compute, plus a handful of latencies (headers, "receive posted" notices).
    n, alpha, bw = 10_000, 1e-5, 1e9
    tl, _ = simulate(cluster(3, bw, alpha), spec(1, 1, keys=n))
    bulk = 1e-3 + 2 * (2 * 4 * n / bw)  # compute; 2 transfers, each over 2 links of a switch
    assert bulk < tl.time_per_iteration_s() < bulk + 8 * (2 * alpha) + 1e-6


def test_a_header_to_a_busy_receiving_thread_waits_to_be_taken():
    # gloo's receive from any source: the sender announces its header and may send it only
    # once the receiving thread, free again, takes it; two announced senders go in turn.
    import simpy

    env = simpy.Environment()
    hs, went = AnySource(env), []

    def sender(src):
        yield hs.announce(src, 1, 31)
        went.append((src, env.now))

    def receiving_thread():
        yield env.timeout(3.0)  # busy with an earlier message
        for src in (5, 6):
            yield hs.announced(src, 1, 31)
            hs.go(src, 1, 31)
            yield env.timeout(2.0)  # handling it

    for src in (5, 6):
        env.process(sender(src))
    env.process(receiving_thread())
    env.run()
    assert went == [(5, 3.0), (6, 5.0)]


def test_more_servers_relieve_the_server_nic():
    times = [simulate(cluster(1 + S + 8, bandwidth=1e8),
                      spec(S, 8, keys=1_000_000, compute=1e-4))[0].time_per_iteration_s()
             for S in (1, 2, 4, 8)]
    assert times[0] > 1.2 * times[1]
    assert all(a > b for a, b in itertools.pairwise(times))


def test_a_skewed_key_split_loads_the_hot_server():
    keys = 1_000_000
    balanced = simulate(cluster(11, 1e8), spec(2, 8, keys=keys))[0]
    hot = simulate(cluster(11, 1e8), spec(2, 8, keys=keys, splits=skewed_splits(keys, 2, 0.8)))[0]
    assert hot.server_bytes[0] > 3.5 * hot.server_bytes[1]
    assert hot.time_per_iteration_s() > balanced.time_per_iteration_s()


@pytest.mark.parametrize("model,tau", [("bsp", 0), ("ssp", 1), ("ssp", 3)])
def test_staleness_never_exceeds_tau(model, tau):
    delay = straggler_delays(3, 12, 3, 5e-3)
    tl, _ = simulate(cluster(5), spec(1, 3, model, tau, iterations=12, delay=delay))
    assert tl.staleness.max() <= tau
    if tau:
        assert tl.staleness.max() >= 1


def test_consistency_models_trade_idle_time_for_staleness():
    delay = straggler_delays(0, 20, 3, 4e-3)
    t = {m: simulate(cluster(5), spec(1, 3, m, 2, iterations=20, delay=delay))[0]
         for m in ("bsp", "ssp", "async")}
    fast = {m: np.median(np.diff(t[m].start_s[:, 1])) for m in t}  # worker 1 never straggles
    assert fast["async"] < fast["ssp"] < fast["bsp"]
    assert t["async"].staleness.max() > 2


def test_idle_time_bsp_above_ssp_above_async_which_never_waits():
    delay = straggler_delays(0, 20, 3, 4e-3)
    idle = {m: simulate(cluster(5), spec(1, 3, m, 2, iterations=20, delay=delay))[0]
            .idle_time_s() for m in ("bsp", "ssp", "async")}
    assert idle["async"] == 0.0
    assert idle["bsp"] > idle["ssp"] > 0.0
    # BSP: the fast workers wait out the straggler's mean delay, give or take its spread
    assert idle["bsp"] > 1e-3


def test_ssp_replay_differs_from_bsp_and_async_staleness_shows_in_the_loss():
    data = SparseLRData(200, 512, 8, 0)
    out = {}
    for m in ("bsp", "ssp", "async"):
        slices = sparse_lr_slices(data, 2, 3, 12, 48)
        sp = PSSpec(2, 3, m, 1, slices, False, np.full((12, 3), 1e-3),
                    straggler_delays(0, 12, 3, 4e-3), ZERO)
        tl, _ = simulate(cluster(6), sp, trace=False)
        out[m] = replay_sparse_lr(tl, data, 2, 3, 48, 0.5)
        assert len(tl.events) > 0 and tl.server_busy_s is not None
    assert not np.allclose(out["bsp"][0], out["async"][0])
    assert out["async"][1][-1] < out["bsp"][1][-1]  # async finishes sooner


def test_a_measured_van_link_prices_messages_by_fan_in():
    link = VanLink((1e-4, 2e-4), (5e-5, 1e-4), (1e9, 1e9))
    assert link.time(0, True, 1) == 1e-4 and link.time(0, True, 5) == 2e-4
    assert link.time(1000, False, 2) == pytest.approx(1e-4 + 1e-6)
    cheap = replace(spec(1, 1, keys=1000), van=VanLink((1e-5,), (1e-5,), (1e9,)))
    dear = replace(cheap, van=VanLink((1e-3,), (1e-5,), (1e9,)))
    fast = simulate(van_cluster(cluster(3)), cheap)[0].time_per_iteration_s()
    slow = simulate(van_cluster(cluster(3)), dear)[0].time_per_iteration_s()
    # one worker's iteration crosses 4 headers: pull, its answer, push, its answer
    assert slow - fast == pytest.approx(4 * (1e-3 - 1e-5), rel=1e-6)
    # on one core shared by busy ranks, the same CPU takes longer than as a delay
    two = replace(spec(1, 2, keys=1000), van=dear.van, cores=1.0)
    as_delay = replace(two, van=replace(dear.van, on_cores=False))
    assert (simulate(van_cluster(cluster(4)), two)[0].time_per_iteration_s()
            > simulate(van_cluster(cluster(4)), as_delay)[0].time_per_iteration_s())


def test_the_lab_van_keeps_helping_past_the_nic_crossover():
    # PS-Lite's queued van: flat from the NIC crossover S* = W·B_w/B_s = 2 on (exercise 3.3);
    # this lab's gloo van (blocking sends, one receiving thread per node): a server moves one
    # message at a time at the slower end's rate, so its extra bandwidth buys nothing and more
    # servers keep helping.
    queued = bottleneck_sweep(8, 40e9, 10e9, 40e6, [1, 2, 4, 8])
    assert queued[1] == pytest.approx(queued[3], rel=1e-3) and queued[0] > 1.5 * queued[1]
    van = bottleneck_sweep(8, 40e9, 10e9, 40e6, [1, 2, 4, 8], rendezvous=True)
    assert all(a > 1.2 * b for a, b in itertools.pairwise(van))
    assert van == pytest.approx(bottleneck_sweep(8, 10e9, 10e9, 40e6, [1, 2, 4, 8],
                                                 rendezvous=True), rel=1e-3)


def test_deterministic():
    delay = straggler_delays(1, 8, 2, 1e-3)
    a = simulate(cluster(4), spec(1, 2, "ssp", 1, iterations=8, delay=delay))[0]
    b = simulate(cluster(4), spec(1, 2, "ssp", 1, iterations=8, delay=delay))[0]
    assert np.array_equal(a.start_s, b.start_s) and np.array_equal(a.end_s, b.end_s)


def test_sparse_slices_match_the_keys_each_worker_touches():
    data = SparseLRData(num_features=50, num_examples=64, nnz=4, seed=1)
    sl = sparse_lr_slices(data, 2, 2, 3, 16)
    assert sl.shape == (3, 2, 2) and (sl.sum(axis=2) <= 8 * 4 + 1).all()
    assert (sl[:, :, 1] >= 1).all()  # the bias key lives on the last server


def test_message_parts():
    assert message_nbytes(5, 5, keys_range=False) == [112, 40, 20]
    assert message_nbytes(5, 5, keys_range=True) == [112, 20]
    assert message_nbytes(0, 0, keys_range=True) == [112]


@pytest.mark.parametrize("call,words", [
    (lambda: key_ranges(3, 4), "more servers (4) than keys (3)"),
    (lambda: key_ranges(10, 0), "at least 1 server"),
    (lambda: check_consistency("ssp", -1), "τ must be >= 0"),
    (lambda: simulate(cluster(4), spec(1, 1)), "need a world of 3"),
])
def test_bad_configuration(call, words):
    with pytest.raises(PSConfigError) as err:
        call()
    assert words in str(err.value)


def test_all_reduce_wins_dense_and_the_parameter_server_wins_sparse():
    from simulator.core import preset
    from simulator.parameter_server import ps_vs_all_reduce

    def ethernet(p):
        return preset("ethernet-10g", p)

    ps_dense, ring_dense = ps_vs_all_reduce(ethernet, 8, 2, 2_500_000, 1.0, 5e-3)
    ps_sparse, ring_sparse = ps_vs_all_reduce(ethernet, 8, 2, 2_500_000, 0.01, 5e-3)
    assert ring_dense < ps_dense and ps_sparse < ring_sparse
    assert ring_sparse == ring_dense  # all-reduce moves the dense vector either way
