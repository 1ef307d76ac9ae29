"""Devices, presets, and the calibrated local cluster."""

import pytest

from simulator.core import CalibrationError, preset
from simulator.core.calibration import CalibrationEntry, find_entry, load_calibration, save_entry
from simulator.host import cluster_from_entry, local_host_cluster


def entry(world=2, host="h"):
    return CalibrationEntry(host=host, backend="gloo", world_size=world, latency_s=5e-5,
                            bandwidth_Bps=4e9, reduce_Bps=1.2e10, memcpy_Bps=1.4e10,
                            flops_per_s=1e11)


def test_dgx_preset_has_nvlink_inside_and_infiniband_between_nodes():
    c = preset("a100", 16)
    assert c.world_size == 16
    assert c.topology.path_bandwidth_Bps(0, 7) == pytest.approx(300e9)
    assert c.topology.path_bandwidth_Bps(0, 8) == pytest.approx(25e9)
    assert preset("h100", 8).devices[0].flops_per_s == 989e12


def test_unknown_preset_and_bad_world_are_clear_errors():
    with pytest.raises(ValueError, match="unknown cluster 'tpu'"):
        preset("tpu", 4)
    with pytest.raises(ValueError, match="at least 1"):
        preset("a100", 0)


def test_local_cluster_is_built_from_the_calibration_file(tmp_path):
    path = tmp_path / "cal.json"
    save_entry(entry(2), path)
    save_entry(entry(4), path)
    assert sorted(load_calibration(path)) == ["h/gloo/2", "h/gloo/4"]
    c = local_host_cluster(4, path=path, host="h")
    assert c.world_size == 4
    assert c.topology.path_latency_s(1, 3) == 5e-5
    assert c.devices[0].reduce_Bps == 1.2e10 and c.devices[0].flops_per_s == 1e11


def test_missing_entry_says_how_to_make_it(tmp_path):
    path = tmp_path / "cal.json"
    save_entry(entry(2), path)
    with pytest.raises(CalibrationError, match=r"distml-lab calibrate --world 3"):
        find_entry(3, host="h", path=path)


def test_unreadable_calibration_file_is_a_clear_error(tmp_path):
    path = tmp_path / "cal.json"
    path.write_text("{not json")
    with pytest.raises(CalibrationError, match="cannot read calibration file"):
        load_calibration(path)


def test_measured_bus_bandwidth_puts_ranks_on_a_shared_bus():
    from dataclasses import replace

    c = cluster_from_entry(replace(entry(4), bus_bandwidth_Bps=3e9))
    assert c.topology.name == "shared_bus"
    # the bus is never slower than one message alone was measured to go (B = 4 GB/s)
    assert c.topology.path_bandwidth_Bps(0, 3) == 4e9
    assert c.topology.path_latency_s(0, 3) == 5e-5


def test_a_calibrated_chain_prices_messages_by_how_many_are_in_flight():
    from dataclasses import replace

    from simulator.host.cluster import chain_latencies

    e = replace(entry(4), bus_bandwidth_Bps=4e9, bus_latency_s=6e-4,
                chain_latency_s=[2e-5, 4e-4, 1.5e-3])
    # never below the idle α (5e-5)
    assert chain_latencies(e) == pytest.approx((5e-5, 4e-4, 1.5e-3))
    c = cluster_from_entry(e)
    bus = c.topology.link(("bus_in", "bus_out"))
    assert bus.host.busy_latency_by_flows == pytest.approx((5e-5, 4e-4, 1.5e-3))
    # an entry without the chain keeps one busy latency for any number in flight
    flat = cluster_from_entry(replace(e, chain_latency_s=[]))
    assert flat.topology.link(("bus_in", "bus_out")).host.busy_latency_by_flows == ()
    assert flat.topology.link(("bus_in", "bus_out")).host.busy_latency_s == 6e-4
    # the exchanges' intercept does not switch the chain off: timed back to back, it can
    # fall below α while the chain still measures each message's wait
    assert chain_latencies(replace(e, bus_latency_s=2e-5)) == pytest.approx((5e-5, 4e-4, 1.5e-3))


def test_the_exchange_bus_is_fitted_to_bandwidth_bound_exchanges_only():
    from dataclasses import replace

    from simulator.host.cluster import exchange_bus_Bps

    # 2 flows; exchanges of 1–16 MiB follow t = 0.1 ms + 2n / 3 GB/s, smaller ones are slow
    sizes = [2**16, 2**18, 2**20, 2**22, 2**24, 2**26]
    times = [2e-3, 3e-3] + [1e-4 + 2 * n / 3e9 for n in sizes[2:5]] + [0.01]
    e = replace(entry(2), bus_bandwidth_Bps=5e9, exchange_sizes=sizes, exchange_times_s=times)
    assert exchange_bus_Bps(e) == pytest.approx(3e9)
    assert exchange_bus_Bps(replace(e, exchange_sizes=sizes[:3], exchange_times_s=times[:3])) \
        is None
    # opt-in: shared messages split 3 GB/s, a message alone keeps the ping-pong's B = 4 GB/s
    shared = cluster_from_entry(e, exchange_bus=True)
    bus = shared.topology.link(("bus_in", "bus_out"))
    assert bus.bandwidth_Bps == pytest.approx(3e9) and bus.host.solo_bandwidth_Bps == 5e9
    plain = cluster_from_entry(e).topology.link(("bus_in", "bus_out"))
    assert plain.bandwidth_Bps == 5e9 and plain.host.solo_bandwidth_Bps is None
