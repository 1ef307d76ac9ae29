"""The two tiers' fields: the textbook's ``Link``, ``Device`` and ``Cluster`` hold α, B,
contention, γ, copy rate and FLOP/s only; the host tier's corrections hang from one ``host``
record each (:class:`~simulator.core.network.LinkEffects`,
:class:`~simulator.core.host_hooks.ClusterEffects`), and moving them there changed no
simulated time."""

import dataclasses

import pytest

from simulator.collectives.all_reduce import recursive_doubling_all_reduce, ring_all_reduce
from simulator.collectives.broadcast import binomial_broadcast
from simulator.collectives.point_to_point import ping_pong
from simulator.core.calibration import CalibrationEntry
from simulator.core.comm import run_spmd
from simulator.core.hardware import PRESETS, Cluster, Device
from simulator.core.host_hooks import ClusterEffects
from simulator.core.network import Link, LinkEffects, Topology
from simulator.host import cluster_from_entry
from simulator.host.effects import HOST_EFFECTS
from simulator.host.factory import local_cluster
from tests.simulator.test_host_effects import entry

SIZES = (2**10, 2**20, 2**24)  # 1 KiB, 1 MiB, 16 MiB
PROGRAMS = {"ring": ring_all_reduce, "binomial": binomial_broadcast, "ping_pong": ping_pong,
            "doubling": recursive_doubling_all_reduce}


def shaped_entry(world: int) -> CalibrationEntry:
    """A shaped network at 100 Mbit/s whose shift ran 5 % below the ping-pong (ε = 0.05), a
    busy latency of 0.3 ms and a 256 KiB socket send buffer: every host effect the shaped
    switch has."""
    return CalibrationEntry("h", "gloo", world, latency_s=100e-6, bandwidth_Bps=11.9e6,
                            reduce_Bps=2e9, memcpy_Bps=4e9, flops_per_s=1e10,
                            bus_bandwidth_Bps=world * 11.9e6 / 1.05, bus_latency_s=3e-4,
                            send_buffer_bytes=2.0**18, network="shaped:100mbit")


TIERS = {
    "host": lambda w: local_cluster(entry(w), w, "host", effects=HOST_EFFECTS),  # every one
    "textbook": lambda w: local_cluster(entry(w), w, "textbook"),
    "plain": lambda w: cluster_from_entry(entry(w), w),  # the busy latency and its chain
    "shaped": lambda w: cluster_from_entry(shaped_entry(w), w),
}

# Regression pin: makespans (s) of two back-to-back calls of each program at SIZES, simulated
# by the code *before* the host-effect fields moved off Link, Device and Cluster into their
# host records. The move must change no simulated time (to rounding: the network brings a
# flow's progress up to date lazily, which sums it in another order); a change to the
# model itself (or to test_host_effects.entry, which these clusters are calibrated from)
# changes them on purpose and regenerates them.
PINNED_S: dict[tuple[str, int, str], tuple[float, float, float]] = {
    ("host", 2, "ring"): (0.0006231664744351221, 0.002421859622285299, 0.05839711748781789),
    ("host", 2, "binomial"): (0.00018054460030717494, 0.0009386454070342687, 0.016390838903575768),
    ("host", 2, "ping_pong"): (0.0003610050209772262, 0.0014816810445543432, 0.02598182466310607),
    ("host", 2, "doubling"): (0.00039168791463048554, 0.0024985415111092118, 0.06587966429592157),
    ("host", 3, "ring"): (0.0012674527065043362, 0.002356745175708017, 0.05530787660849414),
    ("host", 3, "binomial"): (0.00027100502097722614, 0.0012883632720586894, 0.02617848753283703),
    ("host", 3, "ping_pong"): (0.0003610050209772262, 0.0014816810445543432, 0.02598182466310607),
    ("host", 3, "doubling"): (0.0009315776073450561, 0.004305623274796717, 0.101849676901487),
    ("host", 4, "ring"): (0.0021105992092320383, 0.003041985882920092, 0.061310137296908165),
    ("host", 4, "binomial"): (0.00032693125328364376, 0.0016434765379599143, 0.032347952909265856),
    ("host", 4, "ping_pong"): (0.0003610050209772262, 0.0014816810445543432, 0.02598182466310607),
    ("host", 4, "doubling"): (0.0009274390395056201, 0.004558546110339001, 0.11993934034331621),
    ("textbook", 2, "ring"): (0.00035009523285532224, 0.0016965765791804666, 0.021913539902302867),
    ("textbook", 2, "binomial"):
        (0.00017499641642766114, 0.0007958594895902333, 0.010117909151151435),
    ("textbook", 2, "ping_pong"):
        (0.00034999283285532223, 0.0015917189791804665, 0.02023581830230287),
    ("textbook", 2, "doubling"):
        (0.00017580812070250236, 0.001627044667027647, 0.02341687199015005),
    ("textbook", 3, "ring"): (0.0007001125681912619, 0.0033232384608415507, 0.04270858910708635),
    ("textbook", 3, "binomial"):
        (0.00034999283285532223, 0.0015917189791804665, 0.02023581830230287),
    ("textbook", 3, "ping_pong"):
        (0.00034999283285532223, 0.0015917189791804665, 0.02023581830230287),
    ("textbook", 3, "doubling"):
        (0.0005260057535578246, 0.0034284788462081136, 0.04700813349245292),
    ("textbook", 4, "ring"): (0.0010501320985659669, 0.004932443337541399, 0.06322403730690859),
    ("textbook", 4, "binomial"): (0.0003505997371301635, 0.00221318895661788, 0.03017933794130148),
    ("textbook", 4, "ping_pong"):
        (0.00034999283285532223, 0.0015917189791804665, 0.02023581830230287),
    ("textbook", 4, "doubling"):
        (0.00035404385850436966, 0.005739969243804948, 0.08660782253629455),
    ("plain", 2, "ring"): (0.00040070930427484123, 0.0016965765791804666, 0.021913539902302867),
    ("plain", 2, "binomial"): (0.00017499641642766114, 0.0007958594895902333, 0.010117909151151435),
    ("plain", 2, "ping_pong"): (0.00034999283285532223, 0.0015917189791804665, 0.02023581830230287),
    ("plain", 2, "doubling"): (0.00020081170427484123, 0.0016270446670276467, 0.023416871990150048),
    ("plain", 3, "ring"): (0.0008809507568994941, 0.0033266589340519683, 0.04271200958029678),
    ("plain", 3, "binomial"): (0.00034999283285532223, 0.0015917189791804665, 0.02023581830230287),
    ("plain", 3, "ping_pong"): (0.00034999283285532223, 0.0015917189791804665, 0.02023581830230287),
    ("plain", 3, "doubling"): (0.0005510093371301635, 0.003415673602284523, 0.046995328248529325),
    ("plain", 4, "ring"): (0.0015610639564122614, 0.0048364695571593485, 0.06312806352652653),
    ("plain", 4, "binomial"): (0.00037560332070250233, 0.00221318895661788, 0.030179337941301478),
    ("plain", 4, "ping_pong"): (0.00034999283285532223, 0.0015917189791804665, 0.02023581830230287),
    ("plain", 4, "doubling"): (0.0005216234085496824, 0.005709969243804947, 0.08657782253629455),
    ("shaped", 2, "ring"): (0.0013726128403361347, 0.18670711152941177, 2.9702037844705886),
    ("shaped", 2, "binomial"): (0.00038605042016806726, 0.17633126050420167, 2.8198001680672267),
    ("shaped", 2, "ping_pong"): (0.0007442016806722689, 0.3528625210084034, 5.639800336134454),
    ("shaped", 2, "doubling"): (0.0007731248403361345, 0.18666139952941177, 2.9780323924705887),
    ("shaped", 3, "ring"): (0.002641657489915966, 0.24982290406517765, 3.9611651346534136),
    ("shaped", 3, "binomial"): (0.0005581512605042018, 0.3525625210084034, 5.639500336134454),
    ("shaped", 3, "ping_pong"): (0.0007442016806722689, 0.3528625210084034, 5.639800336134454),
    ("shaped", 3, "doubling"): (0.0015457376806722691, 0.6432912314621849, 9.97724777062185),
    ("shaped", 4, "ring"): (0.00387182682352941, 0.28195066729411766, 4.457210676705884),
    ("shaped", 4, "binomial"): (0.0008581512605042017, 0.3746607508403362, 5.661598565966386),
    ("shaped", 4, "ping_pong"): (0.0007442016806722689, 0.3528625210084034, 5.639800336134454),
    ("shaped", 4, "doubling"): (0.001562620235294118, 0.37337929905882355, 5.956121284941177),
}


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("tier", sorted(TIERS))
def test_moving_the_host_fields_changed_no_simulated_time(tier, world):
    cluster = TIERS[tier](world)
    for name, program in PROGRAMS.items():
        got = tuple(run_spmd(cluster, program, n, trace=False, calls=2).makespan_s
                    for n in SIZES)
        assert got == pytest.approx(PINNED_S[(tier, world, name)], rel=1e-12), (tier, world,
                                                                                 name)


def field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_link_device_and_cluster_hold_textbook_fields_and_one_host_hook():
    assert field_names(Link) == {"latency_s", "bandwidth_Bps", "contention", "host"}
    assert field_names(Device) == {"name", "flops_per_s", "mem_bandwidth_Bps", "memory_bytes",
                                   "reduce_Bps", "memcpy_Bps"}
    assert field_names(Cluster) == {"name", "devices", "topology", "host"}


@pytest.mark.parametrize("world", [2, 4])
def test_the_textbook_tier_and_the_presets_have_no_host_record(world):
    for cluster in (local_cluster(entry(world), world, "textbook"),
                    *(build(world) for _, build in PRESETS.values())):
        assert cluster.host is None
        assert all(link.host is None for link in cluster.topology.links.values())


def test_the_host_tier_hangs_its_effects_from_the_records():
    cluster = local_cluster(entry(4), 4, "host", effects=HOST_EFFECTS)
    host = cluster.host
    assert host is not None and host.receiver_driven_sends and host.buffered_sends
    assert host.reduce_s_by_bytes and host.queued_weight_by_bytes
    bus = cluster.topology.link(("bus_in", "bus_out")).host
    assert bus is not None and bus.busy_latency_by_flows and bus.count_simultaneous
    assert bus.bandwidth_by_load
    shaped = cluster_from_entry(shaped_entry(3))
    assert shaped.host == ClusterEffects(buffered_sends=True, send_buffer_bytes=2.0**18)
    port = shaped.topology.link((0, "sw")).host
    assert port is not None and port.ack_fraction == pytest.approx(0.05)


def test_with_host_changes_named_fields_and_drops_a_record_back_at_its_defaults():
    link = Link(1e-5, 1e9)
    busy = link.with_host(busy_latency_s=1e-4)
    assert busy.host == LinkEffects(busy_latency_s=1e-4) and busy.latency_s == 1e-5
    assert busy.with_host(busy_latency_s=None).host is None
    cluster = Cluster.homogeneous("t", Device("d", 1e9, 3e9, 1e9),
                                  Topology.fully_connected(2, link))
    driven = cluster.with_host(receiver_driven_sends=True, post_overhead_s=1e-5)
    assert driven.host == ClusterEffects(receiver_driven_sends=True, post_overhead_s=1e-5)
    assert driven.with_host(receiver_driven_sends=False, post_overhead_s=0.0).host is None
    with pytest.raises(ValueError, match="ack_fraction"):
        link.with_host(ack_fraction=1.0)
