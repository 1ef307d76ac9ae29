"""The host effects: a registry of named corrections, each one switchable, none of them the
textbook tier, all of them the collectives' model."""

import dataclasses
import importlib
import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.collectives.all_reduce import ring_all_reduce
from simulator.collectives.broadcast import binomial_broadcast
from simulator.collectives.point_to_point import ping_pong
from simulator.core.calibration import CalibrationEntry
from simulator.core.comm import run_spmd
from simulator.core.hardware import Cluster, Device
from simulator.core.host_hooks import ClusterEffects
from simulator.core.network import Link, LinkEffects, Topology
from simulator.host import cluster_from_entry
from simulator.host.effects import HOST_EFFECTS, HOST_TIER, resolve, switch_effects, without
from simulator.host.factory import local_cluster, textbook_cluster
from tests.simulator.test_pingpong import entry as ping_pong_entry
from tests.simulator.test_pingpong import send_return, stream_measured

EXCHANGE_SIZES = [2**18, 2**20, 2**22]
SHIFT = [2.0e-4, 6.0e-4, 4.0e-3]  # s per step of the ring's shift


def entry(world: int) -> CalibrationEntry:
    """Every primitive measured: the ping-pong of :mod:`test_pingpong` (a rate that bends,
    send returns, a stream a third slower from 1 MiB), a swap and a plain exchange slower than
    the ring's shift, reductions among messages dearer than γ."""
    return replace(
        ping_pong_entry(), world_size=world, exchange_sizes=EXCHANGE_SIZES,
        exchange_times_s=[1.6 * t for t in SHIFT], shift_ahead_times_s=SHIFT,
        swap_ahead_times_s=[1.3 * t for t in SHIFT] if world > 2 else [],
        reduce_ahead_times_s=[1.5 * t for t in SHIFT],
        stream_times_s=[stream_measured(n) for n in EXCHANGE_SIZES],
        send_return_times_s=[send_return(n) for n in ping_pong_entry().p2p_sizes],
        chain_latency_s=[1e-4, 1.1e-4, 1.3e-4][:world - 1],
        chain_ahead_latency_s=[9e-5, 1e-4, 1.2e-4][:world - 1])


def resolves(dotted: str) -> bool:
    """Does ``dotted`` name a module attribute, or a field of a dataclass in a module?"""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for i, name in enumerate(parts[cut:]):
            last = cut + i == len(parts) - 1
            if last and dataclasses.is_dataclass(obj) and name in {
                    f.name for f in dataclasses.fields(obj)}:
                return True
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


MODEL_CLASSES = {"Cluster": Cluster, "Device": Device, "Link": Link, "Topology": Topology}
HOST_RECORDS = {"Cluster": ClusterEffects, "Link": LinkEffects}
"""The record each model class's ``host`` holds: where ``Class.host.field`` points."""


def model_field(spec: str) -> tuple[str, str, bool]:
    """``Class.field`` or ``Class.host.field`` → (class, field, whether in the host record)."""
    cls, _, name = spec.partition(".")
    host, _, field = name.partition(".")
    return (cls, field, True) if host == "host" and field else (cls, name, False)


# ---- the registry ------------------------------------------------------------------------

def test_every_effect_is_registered_under_its_snake_case_name_with_one_sentence():
    assert len(HOST_EFFECTS) >= 10
    for name, effect in HOST_EFFECTS.items():
        assert effect.name == name and re.fullmatch(r"[a-z]+(_[a-z]+)*", name)
        assert effect.summary.endswith(".") and ". " not in effect.summary[:-1]


def test_every_primitive_is_real_rank_code_and_every_program_a_simulator_name():
    for effect in HOST_EFFECTS.values():
        assert effect.primitive.startswith("backends.") and resolves(effect.primitive), effect
        assert effect.program.startswith("simulator.") and resolves(effect.program), effect


def test_every_field_read_is_a_calibration_field_and_every_field_set_a_model_field():
    calibrated = {f.name for f in dataclasses.fields(CalibrationEntry)}
    for effect in HOST_EFFECTS.values():
        assert effect.fields and set(effect.fields) <= calibrated, effect.name
        for spec in effect.applies:
            cls, name, in_host = model_field(spec)
            record = HOST_RECORDS[cls] if in_host else MODEL_CLASSES[cls]
            assert name in {f.name for f in dataclasses.fields(record)}, spec
            assert name != "host", spec  # a field of the record, not the whole record


def test_requirements_are_registered_and_come_first_so_they_have_no_cycle():
    order = list(HOST_EFFECTS)
    for i, effect in enumerate(HOST_EFFECTS.values()):
        for required in effect.requires:
            assert required in HOST_EFFECTS and order.index(required) < i, effect.name


def test_unknown_names_and_missing_requirements_are_refused():
    with pytest.raises(ValueError, match="busy_latency") as unknown:
        resolve(["busy_latency", "warp_drive"])
    assert "warp_drive" in str(unknown.value)
    with pytest.raises(ValueError, match="requires exchange_bus"):
        resolve(["bus_by_load"])
    with pytest.raises(ValueError, match="collection"):
        resolve("busy_latency")
    with pytest.raises(ValueError, match="unknown"):
        cluster_from_entry(entry(2), effects=["warp_drive"])
    with pytest.raises(ValueError, match="not both"):
        cluster_from_entry(entry(2), exchange_bus=True, effects=[])


def test_leaving_an_effect_out_leaves_out_every_effect_that_requires_it():
    assert without("bus_by_load") == frozenset(HOST_EFFECTS) - {
        "bus_by_load", "connections", "queued_weight", "reduction_among_messages"}
    assert "wakeup_chain" not in without("busy_latency")
    assert without("reduction_among_messages") == frozenset(HOST_EFFECTS) - {
        "reduction_among_messages"}


def test_the_switches_stand_for_effects_and_both_for_all():
    assert switch_effects(True, True) == frozenset(HOST_EFFECTS)
    for exchange_bus in (False, True):
        for receiver_driven in (False, True):
            assert resolve(switch_effects(exchange_bus, receiver_driven))


# ---- the tiers ---------------------------------------------------------------------------

def simulated_s(cluster: Cluster, program, nbytes: int) -> float:
    return run_spmd(cluster, program, nbytes, trace=False, calls=2).makespan_s


@settings(max_examples=20, deadline=None)
@given(world=st.integers(2, 4), nbytes=st.integers(1, 2**22).map(lambda n: 4 * n))
def test_with_no_effect_the_loopback_cluster_is_the_textbook_tier(world, nbytes):
    cal = entry(4)
    bare = cluster_from_entry(cal, world, effects=())
    book = textbook_cluster(cal, world)
    for program in (ring_all_reduce, ping_pong):
        assert simulated_s(bare, program, nbytes) == simulated_s(book, program, nbytes)


@pytest.mark.parametrize("world", [2, 4])
def test_every_effect_is_the_collectives_model_as_it_was(world):
    cal = entry(world)
    host = local_cluster(cal, world, "host", effects=HOST_EFFECTS)
    collectives = cluster_from_entry(cal, world, exchange_bus=True, receiver_driven=True)
    for nbytes in (2**16, 2**20, 2**23):
        for program in (ring_all_reduce, binomial_broadcast):
            assert simulated_s(host, program, nbytes) == simulated_s(collectives, program,
                                                                     nbytes)
    # the textbook tier is the entry as measured, whatever host effects a chapter names
    book = local_cluster(cal, world, "textbook", effects=["busy_latency"])
    for program in (ring_all_reduce, ping_pong):
        assert simulated_s(book, program, 2**20) == simulated_s(textbook_cluster(cal, world),
                                                                program, 2**20)
    with pytest.raises(ValueError, match="unknown host effects"):
        local_cluster(cal, world, "textbook", effects=["busy"])
    with pytest.raises(ValueError, match="unknown model"):
        local_cluster(cal, world, "both")


def applied(cluster: Cluster, spec: str) -> list[object]:
    """The values of one ``Class.field`` or ``Class.host.field`` of
    :attr:`HostEffect.applies` in ``cluster`` (a missing host record reads as its defaults)."""
    cls, name, in_host = model_field(spec)
    topology = cluster.topology
    keys = sorted(topology.links, key=lambda key: sorted(map(str, key)))
    objects: list[Any] = {"Cluster": [cluster], "Device": list(cluster.devices),
                          "Link": [topology.links[key] for key in keys]}.get(cls, [])
    if cls == "Topology":
        return [sorted(sorted(map(str, key)) for key in getattr(topology, name))]
    if in_host:
        objects = [obj.host or HOST_RECORDS[cls]() for obj in objects]
    return [getattr(obj, name) for obj in objects]


def test_leaving_out_each_effect_changes_what_it_applies():
    cal = entry(3)  # three ranks: the calibration has the partners' swap too
    full = cluster_from_entry(cal, effects=HOST_EFFECTS)
    for name, effect in HOST_EFFECTS.items():
        less = cluster_from_entry(cal, effects=without(name))
        assert any(applied(full, spec) != applied(less, spec) for spec in effect.applies), name


def test_the_host_tier_applies_the_effects_that_pay():
    assert resolve(HOST_TIER) == HOST_TIER  # closed under its requirements
    assert {"exchange_bus", "receiver_driven"} <= HOST_TIER < frozenset(HOST_EFFECTS)
    cal = entry(4)
    default = local_cluster(cal, 4, "host")
    chosen = cluster_from_entry(cal, 4, effects=HOST_TIER)
    for nbytes in (2**16, 2**22):
        assert simulated_s(default, ring_all_reduce, nbytes) == simulated_s(
            chosen, ring_all_reduce, nbytes)
