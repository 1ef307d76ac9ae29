"""The collectives' loopback model reproduces the ping-pong it is calibrated from."""

from dataclasses import replace

import pytest

from simulator.core.calibration import CalibrationEntry, fit_alpha_beta
from simulator.host import cluster_from_entry
from simulator.host.pingpong import latency_bound, one_way_s

SIZES = [2**k for k in range(10, 27, 2)]  # 1 KiB … 64 MiB


def measured(n: int) -> float:
    """A ping-pong that no straight line fits: 90 µs of latency, 4 GB/s for cached sizes,
    2.5 GB/s beyond 4 MiB."""
    return 9e-5 + min(n, 2**22) / 4e9 + max(n - 2**22, 0) / 2.5e9


def entry(**changes) -> CalibrationEntry:
    times = [measured(n) for n in SIZES]
    fit = fit_alpha_beta(SIZES, times)
    base = CalibrationEntry(
        host="h", backend="gloo", world_size=2, latency_s=fit.alpha_s,
        bandwidth_Bps=fit.bandwidth_Bps, reduce_Bps=1e10, memcpy_Bps=1e10, flops_per_s=1e11,
        bus_bandwidth_Bps=3e9, bus_latency_s=1e-4, p2p_sizes=SIZES, p2p_times_s=times,
        exchange_sizes=[2**20, 2**22, 2**24], exchange_times_s=[8e-4, 3e-3, 1.2e-2],
        chain_latency_s=[1e-4], chain_ahead_latency_s=[9e-5], ready_notice_s=3e-5,
        post_overhead_s=2.5e-5)
    return replace(base, **changes)


def test_the_simulated_ping_pong_takes_the_measured_time_at_every_size():
    model = cluster_from_entry(entry(), exchange_bus=True, receiver_driven=True)
    bound = latency_bound(SIZES, [measured(n) for n in SIZES], entry().bandwidth_Bps)
    assert any(bound) and not all(bound)
    for n, latency in zip(SIZES, bound, strict=True):
        # one α for all the latency-bound sizes (their median fits); a rate for each other
        assert one_way_s(model, n) == pytest.approx(measured(n), rel=0.05 if latency else 1e-3)


def test_without_the_solve_the_posting_and_the_notice_come_on_top_of_the_fitted_alpha():
    solved = cluster_from_entry(entry(), exchange_bus=True, receiver_driven=True)
    fitted = cluster_from_entry(entry(p2p_sizes=[], p2p_times_s=[]), exchange_bus=True,
                                      receiver_driven=True)
    # no ping-pong to solve from: the fitted α and B, and the small ping-pong pays the
    # posting and the notice besides α — slower than it was measured
    assert one_way_s(fitted, 2**10) > 1.2 * measured(2**10)
    assert one_way_s(solved, 2**10) == pytest.approx(measured(2**10), rel=0.05)
    # every other model keeps the fit: the ports have no rate table, no host effect at all
    plain = cluster_from_entry(entry())
    assert plain.topology.link((0, "bus_in")).host is None


def stream_measured(n: int) -> float:
    """A stream one way: the ping-pong's one-way time up to 512 KiB, a third slower beyond."""
    return measured(n) * (1.0 if n < 2**20 else 4 / 3)


STREAM_SIZES = [2**16, 2**18, 2**20, 2**22, 2**24]


def send_return(n: int) -> float:
    """Rank 0's blocking send returned at 90 % of the one-way time up to 256 KiB, 60 % from
    1 MiB up (the socket buffers holding the rest)."""
    return measured(n) * (0.9 if n <= 2**18 else 0.6)


def test_a_queued_lone_message_is_weighed_so_that_the_simulated_stream_takes_its_time():
    from simulator.host.pingpong import stream_s

    streamed = entry(exchange_sizes=STREAM_SIZES,
                     exchange_times_s=[2 * measured(n) for n in STREAM_SIZES],
                     stream_times_s=[stream_measured(n) for n in STREAM_SIZES],
                     send_return_times_s=[send_return(n) for n in SIZES])
    model = cluster_from_entry(streamed, exchange_bus=True, receiver_driven=True)
    weights = dict(model.host.lone_queued_weight_by_bytes)
    # a send returns with what it had left to go: 1 MiB at 60 % of its one-way time
    assert model.host.buffered_sends
    assert model.host.send_buffer(2**20) == pytest.approx(0.4 * 2**20)
    for n in STREAM_SIZES:
        if n >= 2**20:  # a third slower than the ping-pong: its bytes weigh more than 1
            assert weights[n] > 1.2
            assert stream_s(model, n) == pytest.approx(stream_measured(n), rel=0.01)
        else:  # as fast as the ping-pong's message: a queued byte is a byte
            assert weights[n] == 1.0
        # and the ping-pong, whose sends find their notice, still takes its measured time
        # (within 1 %: its very first send is queued too, and the two are solved in turn)
        assert one_way_s(model, n) == pytest.approx(measured(n), rel=0.01)


def test_without_measured_send_returns_no_lone_message_is_weighed():
    # a send then completes on arrival, the ping-pong's sends are queued as the stream's
    # are, and a weight solved from the stream would slow the ping-pong down too
    unbuffered = entry(exchange_sizes=STREAM_SIZES,
                       exchange_times_s=[2 * measured(n) for n in STREAM_SIZES],
                       stream_times_s=[stream_measured(n) for n in STREAM_SIZES])
    model = cluster_from_entry(unbuffered, exchange_bus=True, receiver_driven=True)
    assert not model.host.buffered_sends and model.host.lone_queued_weight_by_bytes == ()
