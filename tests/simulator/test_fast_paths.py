"""The exact fast paths (simulator.collectives.fast) equal the per-rank events, and are offered
only where their reasoning holds."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.collectives import ALGORITHMS
from simulator.collectives.all_reduce import ring_all_reduce
from simulator.collectives.fast import FAST_PATHS, fast_path, ring_phases_fast
from simulator.core import Cluster, Device, Link, Topology, run_spmd
from simulator.core.hardware import preset
from tests.simulator.collective_helpers import DEV, cluster

PROGRAMS = {name: ALGORITHMS[name.split(".")[0]][name.split(".")[1]][0] for name in FAST_PATHS}
FAST = Link(1e-6, 1e10, "fair")


def _link(model):
    return Link(1e-5, 1e9, model)


def _fat_tree(p, model):
    return Topology.fat_tree(p, 4, 2, _link(model), Link(2e-6, 5e8, model))


def _clusters(p):
    """Clusters by name at ``p`` ranks: presets, and each builder under each contention model."""
    out = {"ethernet-10g": preset("ethernet-10g", p)}
    if p <= 8 or p % 8 == 0:  # whole DGX nodes
        out["a100"], out["h100"] = preset("a100", p), preset("h100", p)
    for model in ("none", "fifo", "fair"):
        out[f"ring/{model}"] = cluster(Topology.ring(p, _link(model)))
        out[f"switch/{model}"] = cluster(Topology.switch(p, _link(model)))
        out[f"fat_tree/{model}"] = cluster(_fat_tree(p, model))
        if p <= 12:
            out[f"fully_connected/{model}"] = cluster(Topology.fully_connected(p, _link(model)))
        if p % 4 == 0:
            out[f"two_level/{model}"] = cluster(Topology.two_level(p // 4, 4, FAST, _link(model)))
    return out


def _events(name, c, n):
    return run_spmd(c, PROGRAMS[name], n, itemsize=4, trace=False).makespan_s


def _cases():
    """(algorithm, p, cluster) wherever a fast path is offered; at 100 and 128 ranks a few
    cluster kinds only (the events take seconds there on two cores)."""
    for p in (2, 3, 4, 5, 7, 8, 12, 16, 100, 128):
        clusters = _clusters(p)
        for name in sorted(clusters):
            for algorithm in sorted(FAST_PATHS):
                if algorithm.split(".")[0] in ("reduce_scatter", "all_gather") and p > 8:
                    continue  # one phase of the ring's fast path, tested at every p there
                big = ["a100", "fat_tree/fair"] if algorithm.endswith("ring") else [
                    "a100", "ethernet-10g", "switch/fifo", "switch/none" if algorithm.endswith(
                        "doubling") else "two_level/fair"]  # the fold, a tree on two levels
                if (p <= 16 or name in big) and fast_path(algorithm, clusters[name]):
                    yield algorithm, p, name


@pytest.mark.parametrize(("algorithm", "p", "cluster_name"), list(_cases()))
def test_fast_path_equals_the_per_rank_events(algorithm, p, cluster_name):
    c = _clusters(p)[cluster_name]
    fast = fast_path(algorithm, c)
    # whole chunks; chunks of two sizes (not divisible by p); fewer elements than ranks
    for n in (4 * p * 1000, 4 * p * 1000 + 12, 12, 2**20 + 4):
        assert fast(n, 4) == pytest.approx(_events(algorithm, c, n), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("name", ["a100", "h100", "ethernet-10g", "ring/fair", "switch/fifo",
                                  "fat_tree/fair", "two_level/fair"])
def test_the_ring_is_exact_wherever_no_two_ring_senders_share_a_contended_link(name):
    assert fast_path("all_reduce.ring", _clusters(16)[name]) is not None


@pytest.mark.parametrize("name", ["a100", "h100", "ethernet-10g", "switch/fair", "fat_tree/none",
                                  "two_level/fair"])
def test_recursive_doubling_is_exact_on_clusters_that_keep_it_in_lockstep(name):
    assert fast_path("all_reduce.recursive_doubling", _clusters(16)[name]) is not None


def test_recursive_doubling_is_refused_where_a_step_shares_links_or_folds_onto_a_port():
    assert fast_path("all_reduce.recursive_doubling", _clusters(16)["ring/fair"]) is None
    assert fast_path("all_reduce.recursive_doubling", _clusters(16)["fat_tree/fair"]) is None
    # 12 ranks fold: a late survivor's port takes an early one's next step at once
    assert fast_path("all_reduce.recursive_doubling", preset("ethernet-10g", 12)) is None


@pytest.mark.parametrize("name", ["switch/none", "fully_connected/fair", "fully_connected/fifo"])
def test_the_fold_is_replayed_where_no_two_senders_share_a_contended_channel(name):
    assert fast_path("all_reduce.recursive_doubling", _clusters(12)[name]) is not None


@pytest.mark.parametrize("name", ["a100", "ethernet-10g", "switch/fifo", "switch/fair",
                                  "two_level/fair", "fully_connected/fair"])
def test_the_binary_tree_is_exact_where_only_siblings_share_a_port(name):
    assert fast_path("all_reduce.binary_tree", _clusters(8)[name]) is not None


def test_the_binary_tree_is_refused_where_other_messages_share_a_link():
    assert fast_path("all_reduce.binary_tree", _clusters(16)["ring/fair"]) is None


@pytest.mark.parametrize("name", ["switch/none", "fat_tree/none"])
def test_the_double_binary_tree_is_exact_where_no_two_messages_share_a_contended_link(name):
    assert fast_path("all_reduce.double_binary_tree", _clusters(16)[name]) is not None


@pytest.mark.parametrize("name", ["a100", "switch/fair", "switch/fifo"])
def test_the_double_binary_tree_is_refused_where_its_two_trees_meet_on_a_port(name):
    assert fast_path("all_reduce.double_binary_tree", _clusters(16)[name]) is None


def test_the_binomial_broadcast_is_exact_on_a_switch_and_the_reduce_is_not():
    assert fast_path("broadcast.binomial", preset("ethernet-10g", 12)) is not None
    assert fast_path("reduce.binomial", preset("ethernet-10g", 12)) is None
    assert fast_path("reduce.binomial", _clusters(12)["switch/none"]) is not None


def test_host_effects_leave_only_the_events():
    c = preset("a100", 8)
    assert fast_path("all_reduce.ring", c.with_host(post_overhead_s=1e-6)) is None
    bus = cluster(Topology.shared_bus(4, _link("fair"), 2e9, busy_latency_s=2e-5))
    assert fast_path("all_reduce.ring", bus) is None
    assert fast_path("all_reduce.recursive_doubling", bus) is None


def test_a_shared_bus_is_not_exact_for_the_ring():
    assert fast_path("all_reduce.ring", cluster(Topology.shared_bus(4, _link("fair"), 2e9))) is None


def test_only_named_algorithms_have_fast_paths():
    c = preset("a100", 8)
    assert fast_path("all_reduce.rabenseifner", c) is None
    assert fast_path(ring_all_reduce, c) is not None  # by its rank program too
    assert fast_path("all_reduce.ring", preset("a100", 1))(2**20) == 0.0


def test_the_ring_replays_unequal_links_and_devices_exactly():
    # a ring whose links differ and whose devices reduce at two rates: no closed form applies
    p = 7
    slow = Device("slow", flops_per_s=1e12, mem_bandwidth_Bps=3e9, memory_bytes=1e9)
    links = {frozenset((r, (r + 1) % p)): Link(1e-5 * (1 + r % 3), 1e9 / (1 + r % 2), "fair")
             for r in range(p)}
    c = Cluster("mixed", tuple(slow if r % 2 else DEV for r in range(p)),
                Topology(p, links, "ring"))
    fast = fast_path("all_reduce.ring", c)
    assert fast is not None
    for n in (4 * p * 100, 4 * p * 100 + 8, 20):
        assert fast(n, 4) == pytest.approx(_events("all_reduce.ring", c, n), rel=1e-9)


def test_ring_phases_alone_equal_their_share_of_the_events():
    from simulator.collectives.all_gather import ring_all_gather_chunks
    from simulator.collectives.exchange import chunk_nbytes
    from simulator.collectives.reduce_scatter import ring_reduce_scatter_chunks

    c, n = preset("a100", 16), 4 * 16 * 1000 + 20

    def reduce_scatter(comm, nbytes):
        yield from ring_reduce_scatter_chunks(comm, chunk_nbytes(nbytes, comm.world_size, 4))

    def all_gather(comm, nbytes):
        yield from ring_all_gather_chunks(comm, chunk_nbytes(nbytes, comm.world_size, 4),
                                          comm.rank)

    for program, phases in ((reduce_scatter, {"all_gather": False}),
                            (all_gather, {"reduce_scatter": False})):
        events = run_spmd(c, program, n, trace=False).makespan_s
        assert ring_phases_fast(c, n, 4, **phases) == pytest.approx(events, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(p=st.integers(2, 10), count=st.integers(0, 200), alpha=st.floats(0, 1e-4),
       bw=st.floats(1e8, 1e11), model=st.sampled_from(["none", "fifo", "fair"]))
def test_fast_paths_equal_the_events_for_any_small_world_and_link(p, count, alpha, bw, model):
    c = cluster(Topology.switch(p, Link(alpha, bw, model)))
    for name in FAST_PATHS:
        fast = fast_path(name, c)
        if fast is not None:
            # abs: the events end a fair flow once what is left would take under a picosecond
            # (simulator.core.network.fair), which shows where α = 0 and a message takes 1 ns
            assert fast(4 * count, 4) == pytest.approx(_events(name, c, 4 * count), rel=1e-9,
                                                       abs=1e-12)


def _star(p, model, device_of=lambda r: DEV):
    """A switch whose ports differ (bandwidth by rank) and whose devices may too."""
    ports = {frozenset((r, "sw")): Link(1e-6 * (1 + r % 3), 1e9 / (1 + r % 4), model)
             for r in range(p)}
    return Cluster("star", tuple(device_of(r) for r in range(p)), Topology(p, ports, "star"))


@pytest.mark.parametrize("model", ["fifo", "fair"])
@pytest.mark.parametrize("p", [5, 12, 23])
def test_the_tree_replays_siblings_on_unequal_ports_exactly(p, model):
    # a sibling held back by its own slower port leaves the parent's port to the other
    slow = Device("slow", flops_per_s=1e12, mem_bandwidth_Bps=2e9, memory_bytes=1e9)
    c = _star(p, model, lambda r: slow if r % 3 == 0 else DEV)
    for algorithm in ("all_reduce.binary_tree", "broadcast.binomial"):
        fast = fast_path(algorithm, c)
        assert fast is not None
        for n in (4 * 1000, 4 * 100_000 + 8, 4):
            assert fast(n, 4) == pytest.approx(_events(algorithm, c, n), rel=1e-9)
