"""The simulated pipeline equals the closed forms and the schedule's critical path."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.collectives.all_reduce import ring_all_reduce_cost
from simulator.core import Cluster, Device, Link, Topology
from simulator.pipeline.profile import LayerProfile, uniform_profile
from simulator.pipeline.schedules import bubble_fraction as bubble_formula
from simulator.pipeline.schedules import (
    gpipe,
    in_flight,
    interleaved_1f1b,
    one_f_one_b,
    pipeline_time,
    timeline,
)
from simulator.pipeline.simulate import gpipe_time, simulate_pipeline

DEVICE = Device("test", 1e12, 3e9, 1e12)
SCHEDULES = ["gpipe", "1f1b", "interleaved"]


def cluster(p, latency_s=0.0, bandwidth_Bps=1e30, contention="none"):
    link = Link(latency_s, bandwidth_Bps, contention)
    return Cluster.homogeneous("test", DEVICE, Topology.fully_connected(p, link))


def actions(name, p, m, v):
    return {"gpipe": lambda: gpipe(p, m), "1f1b": lambda: one_f_one_b(p, m),
            "interleaved": lambda: interleaved_1f1b(p, m, v)}[name]()


@given(p=st.integers(1, 5), k=st.integers(1, 4), v=st.integers(1, 3),
       name=st.sampled_from(SCHEDULES))
def test_equal_stages_on_a_free_network_take_the_closed_form(p, k, v, name):
    m, chunks = k * p, (v if name == "interleaved" else 1)
    profile = uniform_profile(p * chunks, 1.0 / chunks, 2.0 / chunks)
    result = simulate_pipeline(cluster(p), profile, [1] * (p * chunks), m, name, chunks=v)
    assert result.step_time_s == pytest.approx(pipeline_time(p, m, 1.0, 2.0, chunks))
    assert result.bubble_fraction == pytest.approx(bubble_formula(p, m, chunks))
    assert result.throughput == pytest.approx(m / result.step_time_s)


layer_costs = st.lists(st.tuples(st.floats(0.1, 2.0), st.floats(0.1, 3.0),
                                 st.integers(0, 4000)), min_size=6, max_size=6)


@given(p=st.sampled_from([1, 2, 3]), k=st.integers(1, 3), costs=layer_costs,
       name=st.sampled_from(SCHEDULES), alpha=st.floats(0, 0.5))
def test_alpha_beta_network_gives_the_schedules_critical_path(p, k, costs, name, alpha):
    m, v = k * p, (2 if name == "interleaved" else 1)
    stages = p * v
    profile = [LayerProfile(str(i), f, b, 0, 0, out) for i, (f, b, out) in enumerate(costs)]
    balance = [6 // stages] * stages
    balance[-1] += 6 - sum(balance)
    bandwidth = 1000.0
    result = simulate_pipeline(cluster(p, alpha, bandwidth), profile, balance, m, name,
                               chunks=v)
    s = result.stages
    p2p = [alpha + c.output_bytes / bandwidth for c in s[:-1]]
    expected = timeline(actions(name, p, m, v), [c.forward_s for c in s],
                        [c.backward_s for c in s], p2p)
    assert result.step_time_s == pytest.approx(max(row[-1][1] for row in expected))
    if name == "gpipe":
        assert result.step_time_s == pytest.approx(gpipe_time(s, m, p2p))


@given(p=st.integers(1, 5), m=st.integers(1, 10), name=st.sampled_from(["gpipe", "1f1b"]),
       checkpoint=st.sampled_from(["never", "always"]))
def test_peak_activation_memory_per_stage(p, m, name, checkpoint):
    act, inp = 1000, 10  # per stage: its activations, and its input (a checkpoint)
    profile = uniform_profile(p, 1.0, 2.0, activation_bytes=act, output_bytes=inp)
    result = simulate_pipeline(cluster(p), profile, [1] * p, m, name, checkpoint,
                               input_bytes=inp)
    for r, actions_r in enumerate(actions(name, p, m, 1)):
        live = in_flight(actions_r)  # GPipe: m; 1F1B: min(p − r, m)
        expected = live * act if checkpoint == "never" else live * inp + act
        assert result.peak_activation_bytes[r] == expected


def test_recomputation_costs_one_forward_per_checkpointed_microbatch():
    p, m = 3, 4
    profile = uniform_profile(p, 1.0, 2.0, activation_bytes=100)
    never = simulate_pipeline(cluster(p), profile, None, m, "gpipe", "never")
    always = simulate_pipeline(cluster(p), profile, None, m, "gpipe", "always")
    except_last = simulate_pipeline(cluster(p), profile, None, m, "gpipe", "except_last")
    assert always.step_time_s == pytest.approx(pipeline_time(p, m, 1.0, 3.0))
    assert never.step_time_s < except_last.step_time_s < always.step_time_s
    recomputes = [s for s in always.trace if s.name.startswith("R")]
    assert len(recomputes) == p * m
    assert sum(s.name.startswith("R") for s in except_last.trace) == p * (m - 1)


def test_replicated_stages_all_reduce_their_gradients_at_the_flush():
    p, m, alpha, bandwidth, params = 2, 4, 1e-3, 1e6, 40_000
    profile = uniform_profile(p, 1.0, 2.0, parameter_bytes=params)
    one = simulate_pipeline(cluster(p, alpha, bandwidth), profile, None, m, "1f1b")
    two = simulate_pipeline(cluster(2 * p, alpha, bandwidth), profile, None, m, "1f1b",
                            replicas=2)
    sync = ring_all_reduce_cost(2, params, alpha, 1 / bandwidth, DEVICE.gamma_s_per_B)
    assert two.step_time_s == pytest.approx(one.step_time_s + sync)
    assert two.throughput == pytest.approx(2 * m / two.step_time_s)


def test_weight_stashing_memory_is_versions_times_parameters():
    p = 4
    profile = uniform_profile(p, 1.0, 2.0, parameter_bytes=500)
    stash = simulate_pipeline(cluster(p), profile, None, 2 * p, "pipedream")
    two_bw = simulate_pipeline(cluster(p), profile, None, 2 * p, "pipedream_2bw")
    flush = simulate_pipeline(cluster(p), profile, None, 2 * p, "1f1b")
    assert stash.weight_versions == [4, 3, 2, 1]
    assert stash.weight_bytes == [2000, 1500, 1000, 500]
    assert two_bw.weight_versions == [2, 2, 2, 1]
    assert flush.weight_bytes == [500] * p


def test_async_pipedream_updates_after_every_backward():
    p, m, update = 2, 4, 0.5
    profile = uniform_profile(p, 1.0, 2.0)
    result = simulate_pipeline(cluster(p), profile, None, m, "pipedream", update_s=update)
    assert sum(s.name.startswith("U") for s in result.trace) == p * m


def test_steady_state_time_per_microbatch_is_the_slowest_stage():
    profile = [LayerProfile(str(i), f, 2 * f, 0, 0) for i, f in enumerate([1.0, 3.0, 2.0])]
    times = [simulate_pipeline(cluster(3), profile, [1, 1, 1], m, "1f1b").step_time_s
             for m in (8, 9)]
    assert times[1] - times[0] == pytest.approx(9.0)


def test_same_inputs_give_identical_results():
    profile = uniform_profile(4, 1.0, 2.0, activation_bytes=300)
    runs = [simulate_pipeline(cluster(2, 1e-3, 1e5, "fair"), profile, None, 6, "1f1b",
                              "except_last") for _ in range(2)]
    assert runs[0].trace.to_records() == runs[1].trace.to_records()
    assert runs[0].peak_activation_bytes == runs[1].peak_activation_bytes


@pytest.mark.parametrize("kwargs, words", [
    ({"schedule": "zigzag"}, "unknown schedule"),
    ({"checkpoint": "sometimes"}, "unknown checkpoint mode"),
    ({"balance": [1, 1, 1]}, "balance has 3 stages"),
    ({"replicas": 3}, "do not split into 3 pipelines"),
    ({"schedule": "interleaved", "chunks": 2, "microbatches": 3}, "not a multiple"),
])
def test_bad_input_gets_a_clear_error(kwargs, words):
    args = {"balance": None, "microbatches": 4, **kwargs}
    with pytest.raises(ValueError, match=words):
        simulate_pipeline(cluster(2), uniform_profile(4, 1.0, 1.0), **args)


def test_one_core_serialises_every_stage_and_enough_cores_change_nothing():
    p, m = 4, 8
    profile = uniform_profile(p, 1.0, 2.0)
    free = simulate_pipeline(cluster(p), profile, None, m, "1f1b")
    assert simulate_pipeline(cluster(p), profile, None, m, "1f1b", cores=p).step_time_s == (
        pytest.approx(free.step_time_s))
    one = simulate_pipeline(cluster(p), profile, None, m, "1f1b", cores=1)
    assert one.step_time_s == pytest.approx(p * m * 3.0)  # all the work, one piece at a time


@given(cores=st.floats(1.0, 4.0), name=st.sampled_from(["gpipe", "1f1b"]))
def test_sharing_cores_lies_between_the_work_bound_and_one_core_each(cores, name):
    p, m = 4, 6
    profile = uniform_profile(p, 1.0, 2.0)
    free = simulate_pipeline(cluster(p), profile, None, m, name).step_time_s
    shared = simulate_pipeline(cluster(p), profile, None, m, name, cores=cores).step_time_s
    assert shared >= max(free, p * m * 3.0 / cores) - 1e-9
    assert shared <= free * p / min(cores, p) + 1e-9


def _finish_times(jobs, cores):
    """When each ``(start, alone_s, together_s)`` job of a CorePool finishes."""
    import simpy

    from simulator.core.cores import CorePool

    env = simpy.Environment()
    pool = CorePool(env, cores)
    done = {}

    def job(k, start, alone, together):
        yield env.timeout(start)
        yield from pool.run(alone, together)
        done[k] = env.now

    for k, spec in enumerate(jobs):
        env.process(job(k, *spec))
    env.run()
    return [done[k] for k in range(len(jobs))]


def test_a_computation_takes_its_together_time_only_while_others_compute():
    assert _finish_times([(0, 1.0, 1.5)], 2) == [pytest.approx(1.0)]  # alone
    assert _finish_times([(0, 1.0, 1.5), (0, 1.0, 1.5)], 2) == [pytest.approx(1.5)] * 2
    # B ends at 1 (its together time); A has done 1/4 of its work, the rest alone: 3/4 · 2
    assert _finish_times([(0, 2.0, 4.0), (0, 1.0, 1.0)], 2) == [pytest.approx(2.5),
                                                               pytest.approx(1.0)]
    # three on two cores: each gets 2/3 of a core and runs at its together speed
    assert _finish_times([(0, 1.0, 1.5)] * 3, 2) == [pytest.approx(2.25)] * 3
    # a core each (math.inf) still shares cache and memory: the together time holds
    assert _finish_times([(0, 1.0, 1.5)] * 2, float("inf")) == [pytest.approx(1.5)] * 2


@given(name=st.sampled_from(["gpipe", "1f1b"]), m=st.integers(1, 6),
       cores=st.sampled_from([2.0, float("inf")]))
def test_together_times_equal_to_alone_change_nothing(name, m, cores):
    from dataclasses import replace

    profile = uniform_profile(3, 1.0, 2.0)
    same = [replace(x, forward_together_s=x.forward_s, backward_together_s=x.backward_s)
            for x in profile]
    plain = simulate_pipeline(cluster(3), profile, None, m, name, cores=cores)
    assert simulate_pipeline(cluster(3), same, None, m, name, cores=cores).step_time_s == (
        pytest.approx(plain.step_time_s))


def test_one_micro_batch_never_overlaps_so_together_times_do_not_count():
    from dataclasses import replace

    profile = [replace(x, forward_together_s=9.0, backward_together_s=9.0)
               for x in uniform_profile(2, 1.0, 2.0)]
    result = simulate_pipeline(cluster(2), profile, None, 1, "gpipe", cores=2)
    assert result.step_time_s == pytest.approx(6.0)  # F0, F1, B1, B0 one after another
    overlapped = simulate_pipeline(cluster(2), profile, None, 4, "gpipe", cores=2)
    alone = simulate_pipeline(cluster(2), uniform_profile(2, 1.0, 2.0), None, 4, "gpipe",
                              cores=2)
    assert overlapped.step_time_s > alone.step_time_s  # stages compute at once from m = 2
