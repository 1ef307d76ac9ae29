"""The sustained, interleaved measurement behind benchmarks/collectives_accuracy.py."""

from dataclasses import replace

import pytest

from lab.compare import compare_sustained
from lab.twins import get_twin
from simulator.core.calibration import (
    CalibrationEntry,
    load_calibration,
    save_entry,
    this_host,
)
from simulator.host import cluster_from_entry
from simulator.host.factory import local_cluster


def test_sustained_comparison_measures_every_point_in_one_launch(tmp_path):
    path = tmp_path / "cal.json"
    save_entry(CalibrationEntry(this_host(), "gloo", 2, 5e-5, 4e9, 1.2e10, 1.4e10, 1e11,
                                bus_bandwidth_Bps=4e9, bus_latency_s=1e-4,
                                chain_latency_s=[1e-4]), path)
    names, sizes = ["all_gather.ring", "broadcast.binomial"], [2**12, 2**16]
    rounds = tmp_path / "rounds.json"
    records = compare_sustained(names, [2], sizes, repeats=2, calibration=path,
                                chain_calibration=rounds)
    assert [(r.twin, r.world, r.bytes) for r in records] == [
        (name, 2, n) for name in names for n in sizes]
    machine = local_cluster(load_calibration(rounds)[f"{this_host()}/gloo/2"], 2, "host")
    for r in records:
        assert 0 < r.measured_p10_s <= r.measured_median_s <= r.measured_p90_s
        assert r.calls >= 1  # predicted as measured: that many calls back to back, per call
        assert r.predicted_s == pytest.approx(
            get_twin(r.twin).simulate(machine, r.bytes, calls=r.calls).makespan_s / r.calls)
        assert r.rel_error == pytest.approx((r.predicted_s - r.measured_median_s)
                                            / r.measured_median_s)
    # the chain of dependent exchanges was timed in the same rounds, and predicted from
    (remeasured,) = load_calibration(rounds).values()
    assert len(remeasured.chain_latency_s) == 1 and remeasured.chain_latency_s[0] > 0
    assert remeasured.latency_s == 5e-5  # everything else as calibrated


def test_the_rounds_retime_the_chain_posted_ahead_where_the_predictions_use_it(tmp_path):
    path = tmp_path / "cal.json"
    save_entry(CalibrationEntry(this_host(), "gloo", 2, 5e-5, 4e9, 1.2e10, 1.4e10, 1e11,
                                bus_bandwidth_Bps=4e9, bus_latency_s=1e-4,
                                chain_latency_s=[1e-4], chain_ahead_latency_s=[9e-3]), path)
    rounds = tmp_path / "rounds.json"
    compare_sustained(["broadcast.binomial"], [2], [2**12], repeats=2, calibration=path,
                      chain_calibration=rounds)
    (remeasured,) = load_calibration(rounds).values()
    assert remeasured.chain_latency_s == [1e-4]  # the plain chain is not what is predicted by
    # one step of the chain posted ahead, timed afresh: a small message, far from 9 ms
    assert len(remeasured.chain_ahead_latency_s) == 1
    assert 0 < remeasured.chain_ahead_latency_s[0] < 5e-3


def test_the_rounds_retime_the_exchanges_up_to_the_largest_size_swept(tmp_path):
    path = tmp_path / "cal.json"
    sizes, stale = [2**16, 2**18, 2**20, 2**22], [1.0, 2.0, 3.0, 4.0]  # seconds: far off
    save_entry(CalibrationEntry(this_host(), "gloo", 2, 5e-5, 4e9, 1.2e10, 1.4e10, 1e11,
                                bus_bandwidth_Bps=4e9, bus_latency_s=1e-4,
                                chain_latency_s=[1e-4], exchange_sizes=sizes,
                                exchange_times_s=stale), path)
    rounds = tmp_path / "rounds.json"
    compare_sustained(["all_gather.ring"], [2], [2**12, 2**18], repeats=2, calibration=path,
                      chain_calibration=rounds)
    (remeasured,) = load_calibration(rounds).values()
    assert remeasured.exchange_sizes == sizes
    # timed afresh in the rounds up to 256 KiB (far below a second); the larger ones kept
    assert all(0 < t < 0.05 for t in remeasured.exchange_times_s[:2])
    assert remeasured.exchange_times_s[2:] == [3.0, 4.0]


def test_the_rounds_retime_the_exchanges_posted_ahead_too_where_the_entry_has_them(
        tmp_path):
    path = tmp_path / "cal.json"
    sizes, stale = [2**16, 2**18, 2**20], [1.0, 2.0, 3.0]  # seconds: far off
    save_entry(CalibrationEntry(this_host(), "gloo", 2, 5e-5, 4e9, 1.2e10, 1.4e10, 1e11,
                                bus_bandwidth_Bps=4e9, bus_latency_s=1e-4,
                                chain_latency_s=[1e-4], exchange_sizes=sizes,
                                exchange_times_s=stale, shift_ahead_times_s=stale,
                                swap_ahead_times_s=stale, reduce_ahead_times_s=stale,
                                ready_notice_s=1.0), path)
    rounds = tmp_path / "rounds.json"
    compare_sustained(["all_gather.ring"], [2], [2**16, 2**18], repeats=2, calibration=path,
                      chain_calibration=rounds)
    (remeasured,) = load_calibration(rounds).values()
    # every kind timed afresh up to 256 KiB (one exchange each); 1 MiB kept as calibrated
    for times in (remeasured.shift_ahead_times_s, remeasured.swap_ahead_times_s,
                  remeasured.reduce_ahead_times_s, remeasured.exchange_times_s):
        assert all(0 < t < 0.05 for t in times[:2]) and times[2:] == [3.0]
    # and the receive-ready notice, a second as calibrated, taken again in the rounds
    assert remeasured.ready_notice_s is not None and 0 <= remeasured.ready_notice_s < 0.05


def test_the_simulated_all_gathers_copy_their_input_first_as_the_real_ones_do():
    c = cluster_from_entry(CalibrationEntry("h", "gloo", 4, 5e-5, 4e9, 1.2e10, 1.4e10,
                                                  1e11))
    for name in ("all_gather.ring", "all_gather.recursive_doubling", "all_gather.bruck"):
        spans = [s for s in get_twin(name).simulate(c, 2**20).trace if s.rank == 0]
        assert spans[0].kind == "memcpy" and spans[0].nbytes == 2**20 // 4
        assert spans[0].end == pytest.approx(2**18 / 1.4e10)


def test_a_sustained_repeat_is_sized_by_the_fastest_single_call():
    from backends.sustained import MAX_CALLS, sustained_calls

    # one probe waited a 4 ms tick: sized by the median it would hold 5 calls, not 80
    assert sustained_calls(0.02, [0.25e-3, 4.3e-3, 0.3e-3, 4.2e-3, 4.4e-3]) == 80
    assert sustained_calls(0.02, [0.05]) == 1  # a call longer than the repeat: once
    assert sustained_calls(0.02, [1e-9]) == MAX_CALLS
    assert sustained_calls(0.02, [0.0]) == MAX_CALLS


def test_an_entry_from_before_the_notice_and_posting_primitives_is_measured_again(
        tmp_path, monkeypatch):
    import lab.calibrate
    from backends.launch import RANK_SCHED_ENV
    from lab.compare import ensure_calibrated

    path = tmp_path / "cal.json"
    old = CalibrationEntry(this_host(), "gloo", 2, 5e-5, 4e9, 1.2e10, 1.4e10, 1e11)
    current = CalibrationEntry(this_host(), "gloo", 3, 5e-5, 4e9, 1.2e10, 1.4e10, 1e11,
                               ready_notice_s=1e-5, post_overhead_s=2e-5,
                               chain_ahead_latency_s=[3e-4, 5e-4], rank_sched="batch",
                               exchange_sizes=[2**16], exchange_times_s=[2e-4],
                               shift_ahead_times_s=[1.5e-4], swap_ahead_times_s=[1.6e-4],
                               p2p_sizes=[2**16], p2p_times_s=[1e-4],
                               send_return_times_s=[6e-5], stream_times_s=[1.1e-4],
                               reduce_ahead_times_s=[1.8e-4])

    def at(world: int, **changes):  # the same measurements, as a world of ``world`` ranks
        return replace(current, world_size=world,
                       chain_ahead_latency_s=[3e-4] * (world - 1), **changes)

    # complete, but measured with the ranks under the kernel's default policy
    other_policy = at(5, rank_sched="normal")
    # complete but for the shift posted ahead; but for the swap posted ahead (three ranks
    # or more); at two ranks no swap is measured, and none is missing
    no_ahead = at(6, shift_ahead_times_s=[])
    no_swap = at(7, swap_ahead_times_s=[])
    two = at(2, swap_ahead_times_s=[])
    # complete but for the stream one way; but for the ping-pong's send returns
    no_stream = at(8, stream_times_s=[])
    no_returns = at(9, send_return_times_s=[])
    # complete but for the reducing shift
    no_reducing = at(10, reduce_ahead_times_s=[])
    for entry in (old, current, other_policy, no_ahead, no_swap, no_stream, no_returns,
                  no_reducing):
        save_entry(entry, path)
    calibrated: list[int] = []
    monkeypatch.setattr(lab.calibrate, "calibrate",
                        lambda world, *args, **kwargs: calibrated.append(world))
    monkeypatch.delenv(RANK_SCHED_ENV, raising=False)
    ensure_calibrated([2, 3, 4, 5, 6, 7, 8, 9, 10], calibration=path)
    # stale, missing, other policy, no shift ahead, no swap ahead, no stream, no send
    # returns, no reducing shift; the current one stays
    assert calibrated == [2, 4, 5, 6, 7, 8, 9, 10]
    save_entry(two, path)
    calibrated.clear()
    ensure_calibrated([2, 3], calibration=path)
    assert calibrated == []
    calibrated.clear()
    monkeypatch.setenv(RANK_SCHED_ENV, "normal")
    ensure_calibrated([3, 5], calibration=path)
    assert calibrated == [3]  # under normal it is the batch entry that is stale
