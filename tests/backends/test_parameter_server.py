"""The real parameter server: parity with single-process SGD, slicing, consistency, faults.

Processes start few times: one world-5 launch runs many configurations in turn
(:func:`backends.parameter_server.train.run_scenarios`), one world-3 launch the 1-server
1-worker case; each fault kills a node, so it has a launch of its own.
"""

import time

import numpy as np
import pytest
import torch

from backends.launch import RankError, spawn
from backends.parameter_server import PSConfig, PSConfigError, sgd_reference
from backends.parameter_server.message import Message, Meta
from backends.parameter_server.train import collect, run_scenarios
from backends.parameter_server.updaters import Adam
from simulator.parameter_server import key_ranges, slice_bounds

STRAGGLER = dict(straggler_mean_s=0.004, slow_workers=1, iterations=16)
WORLD5 = {
    "bsp_lr": PSConfig(servers=2, workers=2, iterations=12),
    "bsp_lr_uneven": PSConfig(servers=2, workers=2, iterations=8, splits=(0, 7), batch_size=63),
    "bsp_mlp_3w": PSConfig(servers=1, workers=3, model="mlp", lr=0.2, iterations=8,
                           batch_size=50),
    "ssp_tau1": PSConfig(servers=2, workers=2, consistency="ssp", tau=1, **STRAGGLER),
    "ssp_tau3": PSConfig(servers=1, workers=3, consistency="ssp", tau=3, **STRAGGLER),
    "async": PSConfig(servers=2, workers=2, consistency="async", **STRAGGLER),
}
WORLD3 = {"bsp_mlp_1x1": PSConfig(servers=1, workers=1, model="mlp", lr=0.2, iterations=8)}


@pytest.fixture(scope="module")
def runs():
    out = {}
    for group in (WORLD5, WORLD3):
        cfgs = list(group.values())
        world = 1 + cfgs[0].servers + cfgs[0].workers
        per_rank = spawn(run_scenarios, world, cfgs, backend="gloo", timeout=30, deadline=120)
        for i, name in enumerate(group):
            out[name] = collect(cfgs[i], [rank[i] for rank in per_rank])
    return out


@pytest.mark.parametrize("name", ["bsp_lr", "bsp_lr_uneven", "bsp_mlp_3w", "bsp_mlp_1x1"])
def test_bsp_training_equals_single_process_sgd(runs, name):
    result = runs[name]
    weights, losses = sgd_reference(result.config)
    torch.testing.assert_close(result.weights, weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.losses, losses, rtol=1e-5, atol=1e-6)
    assert result.max_staleness == 0


def test_uneven_key_ranges_split_the_traffic_unevenly(runs):
    small, big = runs["bsp_lr_uneven"].server_bytes
    assert small < big  # server 0 owns keys 0-6 only, server 1 the other 994


@pytest.mark.parametrize("name,tau", [("ssp_tau1", 1), ("ssp_tau3", 3)])
def test_ssp_staleness_never_exceeds_tau_and_is_used(runs, name, tau):
    staleness = [s for w in runs[name].workers for s in w["staleness"]]
    assert max(staleness) <= tau
    assert max(staleness) >= 1, "a straggler should let the others run ahead"


def test_idle_time_is_recorded_per_iteration_and_async_never_idles(runs):
    for name in ("bsp_lr", "ssp_tau1", "async"):
        for w in runs[name].workers:
            assert len(w["wait_s"]) == runs[name].config.iterations
    assert runs["async"].idle_time_s == 0.0
    assert runs["bsp_lr"].idle_time_s > 0.0
    # the straggler's partner idles waiting for its clock
    assert max(np.mean(w["wait_s"]) for w in runs["ssp_tau1"].workers) > 1e-3


@pytest.mark.parametrize("servers,workers", [(1, 1), (2, 3)])
def test_the_simulated_schedule_replayed_under_bsp_is_single_process_sgd(servers, workers):
    # The simulator decides when servers read and update; the replay redoes the arithmetic.
    from simulator.parameter_server import (
        PSCosts,
        PSSpec,
        SparseLRData,
        simulate,
        sparse_lr_slices,
    )
    from simulator.ps_convergence import replay_sparse_lr
    from tests.simulator.test_parameter_server import cluster

    cfg = PSConfig(servers=servers, workers=workers, iterations=10, lr=0.5)
    data = SparseLRData(cfg.features, cfg.examples, cfg.nnz, cfg.seed)
    spec = PSSpec(servers, workers, "bsp", 0, sparse_lr_slices(data, servers, workers, 10, 64),
                  False, np.full((10, workers), 1e-3), np.zeros((10, workers)),
                  PSCosts(*[0.0] * 8))
    timeline, _ = simulate(cluster(1 + servers + workers), spec, trace=False)
    losses, ends = replay_sparse_lr(timeline, data, servers, workers, 64, 0.5)
    _, reference = sgd_reference(cfg)
    np.testing.assert_allclose(losses, reference, rtol=1e-5)
    assert np.all(np.diff(ends) > 0)


def test_async_runs_ahead_of_the_straggler(runs):
    result = runs["async"]
    fast, slow = (np.diff(w["start_s"]).mean() for w in result.workers[::-1])
    assert fast < slow
    assert result.max_staleness >= 1
    assert np.isfinite(result.losses).all()


# ---- without processes ------------------------------------------------------------------------

def test_header_round_trip_and_contiguous_keys_travel_as_a_range():
    msg = Message(Meta(recipient=3, push=1, clock=7), keys=torch.arange(5, 9),
                  vals=torch.ones(4)).seal()
    assert msg.meta.keys_range == 1 and (msg.meta.key_begin, msg.meta.key_end) == (5, 9)
    assert Meta.unpack(msg.meta.pack()) == msg.meta
    sparse = Message(Meta(), keys=torch.tensor([1, 4, 9])).seal()
    assert sparse.meta.keys_range == 0 and sparse.meta.nkeys == 3


@pytest.mark.parametrize("splits", [None, (0, 3), (0, 1, 2), (0, 5, 90)])
def test_slicing_gives_each_server_exactly_its_keys(splits):
    servers = 1 if splits is None else len(splits)
    ranges = key_ranges(100, servers, splits)
    keys = np.array([0, 1, 2, 3, 4, 5, 50, 89, 90, 99])
    for (lo, hi), (b, e) in zip(slice_bounds(keys, ranges), ranges, strict=True):
        assert all(b <= k < e for k in keys[lo:hi])
    assert sum(hi - lo for lo, hi in slice_bounds(keys, ranges)) == len(keys)


def test_server_adam_equals_torch_adam():
    w = torch.nn.Parameter(torch.randn(50))
    ours = w.detach().clone()
    opt, rule = torch.optim.Adam([w], lr=0.01), Adam(lr=0.01)
    for step in range(5):
        grad = torch.randn(50, generator=torch.Generator().manual_seed(step))
        w.grad = grad.clone()
        opt.step()
        rule(ours, torch.arange(50), grad)
    torch.testing.assert_close(ours, w.detach())


@pytest.mark.parametrize("kwargs,words", [
    (dict(servers=0), "at least 1 server"),
    (dict(workers=0), "at least 1 worker"),
    (dict(consistency="ssp", tau=-1), "τ must be >= 0"),
    (dict(consistency="eventual"), "unknown consistency"),
    (dict(features=2, servers=4), "more servers (4) than keys (3)"),
    (dict(splits=(0, 0)), "increasing"),
])
def test_bad_configuration_is_a_clear_error(kwargs, words):
    with pytest.raises(PSConfigError, match=None) as err:
        PSConfig(**kwargs).validate()
    assert words in str(err.value)


# ---- faults -----------------------------------------------------------------------------------

@pytest.mark.parametrize("fail,dead", [(("worker", 1, 3), "worker 1 (rank 3)"),
                                       (("server", 0, 3), "server 0 (rank 1)")])
def test_a_dead_node_is_named_by_the_others_within_the_timeout(tmp_path, fail, dead):
    cfg = PSConfig(servers=1, workers=2, iterations=30, fail=fail, fail_dir=str(tmp_path),
                   timeout_s=10)
    start = time.monotonic()
    with pytest.raises(RankError) as err:
        spawn(run_scenarios, 4, [cfg], backend="gloo", timeout=10, deadline=60)
    assert time.monotonic() - start < 30
    rank = int(dead.split("rank ")[1].rstrip(")"))
    assert err.value.rank == rank
    reports = {p.name: p.read_text() for p in tmp_path.glob("rank*.txt")}
    assert reports, "no surviving node reported an error"
    for name, text in reports.items():
        assert dead in text and "died" in text, f"{name}: {text}"


def test_the_van_echo_primitive_gives_a_cost_per_fan_in():
    from lab.parameter_server import measure_van_link

    link = measure_van_link(3, rounds=20)
    assert len(link.header_s) == len(link.payload_s) == len(link.payload_Bps) == 1
    assert all(0 < h < 0.05 for h in link.header_s)  # a header costs some CPU, well below 50 ms
    assert all(a >= 0 for a in link.payload_s) and all(b > 0 for b in link.payload_Bps)
    with pytest.raises(ValueError, match="fan-in"):
        measure_van_link(3, fan_ins=(2,))



def _register(late_s: float, pause_s: float, timeout_s: float) -> bool:
    """Rank function: a 1-server 2-worker postoffice whose worker 1 starts registering
    ``late_s`` after the others, and whose scheduler's main thread pauses ``pause_s`` just after
    its receiving thread starts (so every ADD_NODE may be read before it goes on); each node
    returns whether it got the full node table."""
    import torch.distributed as dist

    from backends.parameter_server.postoffice import Postoffice

    po = Postoffice(1, 2, 8, timeout_s=timeout_s)
    if dist.get_rank() == 0:
        start = po.van.start

        def start_then_pause() -> None:
            start()
            time.sleep(pause_s)

        po.van.start = start_then_pause  # type: ignore[method-assign]
    if dist.get_rank() == 3:
        time.sleep(late_s)  # a process slow to build its model on a loaded host
    po.start()
    po.finalize()
    return po._table_ready and len(po._nodes) == 4 and not po.dead_nodes()


def test_the_scheduler_completes_the_table_when_every_node_registered_first():
    # the scheduler is in its own table before its receiving thread reads any ADD_NODE
    assert spawn(_register, 4, 0.0, 1.0, 3.0, backend="gloo", timeout=30,
                 deadline=60) == [True] * 4


def test_a_node_slow_to_register_is_waited_for_beyond_the_silence_bound():
    # registration waits START_TIMEOUT_S, not the running nodes' silence bound of 1 s
    assert spawn(_register, 4, 3.0, 0.0, 1.0, backend="gloo", timeout=30,
                 deadline=60) == [True] * 4
