"""Every chapter's local cluster comes from one factory
(:func:`simulator.host.factory.local_cluster`), in both tiers, and prices the collectives
exactly as the chapters' own builders did before it: the literals below are the simulated
times of those builders (a regression pin, computed before the chapters moved to the factory)."""

import ast
from pathlib import Path

import pytest

from lab.ddp import gloo_ring_cluster
from lab.horovod_predict import latency_cluster
from lab.horovod_predict import predict as horovod_predict
from lab.horovod_primitives import Primitives
from lab.pipeline import local_cluster as pipeline_cluster
from lab.tensor_parallel import waiting_cluster
from simulator.collectives.all_reduce import ring_all_reduce
from simulator.collectives.point_to_point import ping_pong
from simulator.core.calibration import Calibration, CalibrationError, entry_key, this_host
from simulator.core.comm import run_spmd
from simulator.core.hardware import Cluster
from simulator.ddp.workload import mlp_workload
from simulator.host.effects import BUSY_HOST, switch_effects
from simulator.host.factory import local_cluster
from tests.simulator.test_host_effects import entry

SIZES = (4096, 2**20, 2**22)
"""Ring all-reduces of these sizes, then ping-pongs of the first two."""
EXCHANGE_S = 5e-4
"""The waiting primitive's ring step for tensor parallelism's cluster."""
LATENCY_S = 3e-4
"""The measured wait of Horovod's small all-reduces' cluster."""

OLD = {
    2: {"textbook": [0.0001770219292521848, 0.0008482882895902333, 0.002869984621902473,
                     0.00017681712925218479, 0.0007958594895902333],
        "ring": [0.0002026324170993649, 0.0008738987774374134, 0.0028955951097496537,
                 0.00020242761709936489, 0.0008214699774374134],
        "busy": [0.00020141860854968246, 0.0008482882895902332, 0.002869984621902473,
                 0.00017681712925218479, 0.0007958594895902333],
        "latency": [0.0006026324170993649, 0.0012738987774374134, 0.003295595109749653,
                    0.0006024276170993649, 0.0012214699774374133],
        "waiting": [0.0010002048, 0.0016714711603380487, 0.0036931674926502884, 0.001,
                    0.0016190423603380487]},
    3: {"textbook": [0.0003539031024246342, 0.0016616198231007313, 0.0056001548877252115,
                     0.00017681712925218479, 0.0007958594895902333],
        "ring": [0.0004051240781189944, 0.0017128407987950915, 0.005651375863419572,
                 0.00020242761709936489, 0.0008214699774374134],
        "busy": [0.0004418939869994296, 0.001659427437744145, 0.005597962502368626,
                 0.00017681712925218479, 0.0007958594895902333],
        "latency": [0.0012051240781189943, 0.0025128407987950914, 0.006451375863419572,
                    0.0006024276170993649, 0.0012214699774374133],
        "waiting": [0.0020002688439202648, 0.003307985564596362, 0.007246520629220842, 0.001,
                    0.0016190423603380487]},
    4: {"textbook": [0.0005307585877565545, 0.0024662216687706996, 0.008295381065707421,
                     0.00017681712925218479, 0.0007958594895902333],
        "ring": [0.0006075900512980948, 0.00254305313231224, 0.008372212529248961,
                 0.00020242761709936489, 0.0008214699774374134],
        "busy": [0.0007821279128245236, 0.0024118321566178797, 0.0082409915535546,
                 0.00017681712925218479, 0.0007958594895902333],
        "latency": [0.0018075900512980942, 0.0037430531323122402, 0.00957221252924896,
                    0.0006024276170993649, 0.0012214699774374133],
        "waiting": [0.0030003072000000003, 0.004935770281014146, 0.010764929677950869, 0.001,
                    0.0016190423603380487]},
}
"""Seconds, per world and cluster, from the chapters' builders before the factory:
``textbook`` — ``textbook_cluster(entry, world)`` (every chapter's textbook tier); ``ring`` —
DDP's ``gloo_ring_cluster``; ``busy`` — ``cluster_from_entry(entry, world)`` (ZeRO, the
parameter server, Horovod, the pipelines); ``latency`` — Horovod's cluster of a measured
wait; ``waiting`` — tensor parallelism's ``waiting_cluster``."""

HOROVOD_OLD = {(2, "textbook"): 0.005068913096740525, (2, "host"): 0.006194537918877061,
               (4, "textbook"): 0.010561023017304657, (4, "host"): 0.014264251180950123}
"""Horovod's predicted step (every cost of :func:`lab.horovod_predict.costs` in play), s."""


def times(cluster: Cluster) -> list[float]:
    return ([run_spmd(cluster, ring_all_reduce, n, trace=False).makespan_s for n in SIZES]
            + [run_spmd(cluster, ping_pong, n, trace=False).makespan_s for n in SIZES[:2]])


def pin(cluster: Cluster, world: int, key: str) -> None:
    assert times(cluster) == pytest.approx(OLD[world][key], rel=1e-12, abs=0), key


@pytest.fixture(scope="module")
def calibration() -> Calibration:
    return Calibration(Path("/nonexistent/calibration.json"),
                       {entry_key(this_host(), "gloo", w): entry(w) for w in (2, 3, 4)})


def test_busy_host_is_the_plain_switches():
    assert BUSY_HOST == switch_effects(False, False) == {"busy_latency", "wakeup_chain"}


@pytest.mark.parametrize("world", [2, 3, 4])
def test_textbook_tier_is_the_entry_as_measured(world, calibration):
    e = entry(world)
    pin(gloo_ring_cluster(e, world, "textbook"), world, "textbook")  # DDP, Horovod's costs
    pin(local_cluster(e, world, "textbook", effects=BUSY_HOST), world, "textbook")  # ZeRO, PS
    pin(waiting_cluster(world, EXCHANGE_S, calibration=calibration, model="textbook")[0],
        world, "textbook")
    pin(pipeline_cluster(world, calibration, model="textbook")[0], world, "textbook")


@pytest.mark.parametrize("world", [2, 3, 4])
def test_host_tier_of_each_chapter(world, calibration):
    e = entry(world)
    pin(gloo_ring_cluster(e, world), world, "ring")
    pin(local_cluster(e, world, effects=BUSY_HOST), world, "busy")
    pin(pipeline_cluster(world, calibration)[0], world, "busy")
    pin(latency_cluster(e, world, LATENCY_S), world, "latency")
    pin(waiting_cluster(world, EXCHANGE_S, calibration=calibration)[0], world, "waiting")


@pytest.mark.parametrize(("world", "model"), sorted(HOROVOD_OLD))
def test_horovod_step_unchanged(world, model):
    e = entry(world)
    primitives = Primitives(mlp_workload((256,) * 5, 32, e.flops_per_s), 1e-3, min(world, 2),
                            2e-4, 4e-4, None, 6e-4, 1e-5)
    got = horovod_predict(e, primitives, world, 1.0, 1.0, model).step_s
    assert got == pytest.approx(HOROVOD_OLD[world, model], rel=1e-12, abs=0)


def test_no_calibration(tmp_path):
    """The host tier falls back to a free network; the textbook tier has nothing to fall back
    on, as before."""
    empty = Calibration(tmp_path / "none.json", {})
    assert pipeline_cluster(2, empty)[0].name == "free"
    assert waiting_cluster(2, EXCHANGE_S, calibration=empty)[0].name == "free"
    with pytest.raises(CalibrationError):
        pipeline_cluster(2, empty, model="textbook")
    with pytest.raises(CalibrationError):
        waiting_cluster(2, EXCHANGE_S, calibration=empty, model="textbook")


BUILDERS = {"textbook_cluster", "cluster_from_entry", "local_host_cluster",
            "shaped_cluster_from_entry"}
"""The builders that only :func:`simulator.host.factory.local_cluster` may call."""


def test_lab_builds_calibrated_clusters_only_through_the_factory():
    lab = Path(__file__).resolve().parents[2] / "lab"
    calls = []
    for path in sorted(lab.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                name = (func.id if isinstance(func, ast.Name)
                        else func.attr if isinstance(func, ast.Attribute) else None)
                if name in BUILDERS:
                    calls.append(f"{path.relative_to(lab.parent)}:{node.lineno} {name}")
    assert calls == []
