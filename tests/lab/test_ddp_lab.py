"""lab.ddp: the cluster the DDP and Horovod predictions put gloo's ring on."""

from dataclasses import replace

import pytest

from lab.ddp import gloo_ring_cluster
from simulator.core.calibration import CalibrationEntry


def test_gloo_ring_segments_pay_the_concurrent_exchanges_latency_not_the_chain():
    e = CalibrationEntry(host="h", backend="gloo", world_size=4, latency_s=5e-5,
                         bandwidth_Bps=4e9, reduce_Bps=1.2e10, memcpy_Bps=1.4e10,
                         flops_per_s=1e11, bus_bandwidth_Bps=6e9, bus_latency_s=6e-4,
                         chain_latency_s=[2e-5, 4e-4, 1.5e-3])
    c = gloo_ring_cluster(e, 4)
    bus = c.topology.link(("bus_in", "bus_out"))
    assert bus.host.busy_latency_by_flows == ()  # no chain of 4 KiB waits per MiB segment
    assert bus.host.busy_latency_s == pytest.approx(6e-4)
    # the first segment of a step pays the exchanges' latency too, never below the idle α
    assert c.topology.path_latency_s(0, 3) == pytest.approx(6e-4)
    low = gloo_ring_cluster(replace(e, bus_latency_s=1e-5), 4)
    assert low.topology.path_latency_s(0, 3) == pytest.approx(5e-5)
