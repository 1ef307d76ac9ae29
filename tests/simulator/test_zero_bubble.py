"""Zero-bubble schedules: literal tables, invariants, ZB-H1's bubble, the simulated twin."""

import inspect
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.core.hardware import Cluster, Device
from simulator.core.network import Link, Topology
from simulator.pipeline.schedules import one_f_one_b, timeline
from simulator.pipeline.schedules.action import Action
from simulator.pipeline.schedules.split_backward import (
    check_split,
    draw_split,
    idle_share,
    in_flight_split,
    peak_activation_bytes,
    stage_of,
    timeline_split,
)
from simulator.pipeline.schedules.zero_bubble import (
    ZERO_BUBBLE,
    dualpipe_v,
    zb_h1,
    zb_h1_bubble_s,
    zb_h1_time_s,
    zb_v,
)
from simulator.pipeline.zero_bubble import SplitStageCost, simulate_zero_bubble


def names(actions):
    return " ".join(str(a) for a in actions)


def docstring_table(fn):
    lines = inspect.getdoc(fn).splitlines()
    return "\n".join(line.strip() for line in lines if re.match(r"rank \d+:", line.strip()))


def makespan(spans):
    return max(s[-1][1] for s in spans if s)


# -- literal tables ------------------------------------------------------------------------------

def test_zb_h1_of_three_stages_defers_r_weight_gradients_on_rank_r():
    s = zb_h1(3, 4)
    assert names(s[0]) == "F0 F1 F2 I0 W0 F3 I1 W1 I2 W2 I3 W3"
    assert names(s[1]) == "F0 F1 I0 F2 I1 W0 F3 I2 W1 I3 W2 W3"
    assert names(s[2]) == "F0 I0 F1 I1 F2 I2 W0 F3 I3 W1 W2 W3"


def test_zb_v_of_two_ranks_runs_the_v_and_defers_ws_in_the_cool_down():
    s = zb_v(2, 4)
    assert names(s[0]) == ("F0 F1 F2 F0.1 I0.1 W0.1 F1.1 I1.1 W1.1 F3 I0 W0 F2.1 I2.1 W2.1 "
                           "I1 W1 F3.1 I3.1 W3.1 I2 W2 I3 W3")
    assert names(s[1]) == ("F0 F0.1 F1 F1.1 I0.1 W0.1 F2 I0 W0 F2.1 I1.1 W1.1 F3 I1 W1 "
                           "F3.1 I2.1 W2.1 I2 I3.1 I3 W2 W3.1 W3")


def test_dualpipe_v_of_two_ranks_pairs_forward_and_fused_backward():
    s = dualpipe_v(2, 4)
    assert names(s[0]) == ("F0 F1 F2 F0.1 I0.1 W0.1 F1.1 F3 B1.1 F2.1 B0 B2.1 F3.1 B1 B3.1 "
                           "I2 W2 I3 W3")
    assert names(s[1]) == "F0 F0.1 F1 F1.1 F2 B0.1 F2.1 B0 F3 B1.1 F3.1 B1 B2.1 B2 I3.1 I3 W3.1 W3"


@pytest.mark.parametrize("fn, args, placement", [(zb_h1, (3, 4), "loop"),
                                                 (zb_v, (2, 4), "v"), (dualpipe_v, (2, 4), "v")])
def test_docstring_tables_are_what_draw_split_prints(fn, args, placement):
    assert draw_split(fn(*args), placement) == docstring_table(fn)


def test_v_placement_puts_first_and_last_stage_on_rank_zero():
    assert [stage_of(r, c, 3, "v") for r in range(3) for c in (0, 1)] == [0, 5, 1, 4, 2, 3]
    assert [stage_of(r, 1, 3, "loop") for r in range(3)] == [3, 4, 5]


# -- invariants ----------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(p=st.integers(1, 5), m=st.integers(1, 12), name=st.sampled_from(sorted(ZERO_BUBBLE)))
def test_every_stage_runs_f_and_its_backward_once_and_never_deadlocks(p, m, name):
    make, placement = ZERO_BUBBLE[name]
    if name == "dualpipev" and m < 2 * p:
        with pytest.raises(ValueError, match="at least"):
            make(p, m)
        return
    s = make(p, m)
    check_split(s)  # F once, B once or I then W once, per (rank, chunk, micro-batch)
    spans = timeline_split(s, placement)  # raises if a dependency can never be met
    work = sum(e - b for rank in spans for b, e, _ in rank)
    assert work == 3 * m * p * (2 if placement == "v" else 1)


@given(p=st.integers(1, 6), m=st.integers(1, 16))
def test_zb_h1_holds_at_most_p_microbatches_like_1f1b(p, m):
    assert max(in_flight_split(a) for a in zb_h1(p, m)) == min(p, m)


@given(p=st.integers(1, 5), extra=st.integers(0, 8))
def test_zb_v_holds_2p_chunk_microbatches_on_every_rank_the_memory_of_1f1b(p, extra):
    assert [in_flight_split(a) for a in zb_v(p, 2 * p - 1 + extra)] == [2 * p] * p


@given(p=st.integers(1, 5), extra=st.integers(0, 8))
def test_dualpipe_v_holds_one_chunk_microbatch_more_than_zb_v(p, extra):
    assert [in_flight_split(a) for a in dualpipe_v(p, 2 * p + extra)] == [2 * p + 1] * p


def test_deferring_w_delays_the_free():
    actions = [Action("F", 0), Action("F", 1), Action("I", 0), Action("I", 1),
               Action("W", 0), Action("W", 1)]
    assert in_flight_split(actions) == 2
    assert peak_activation_bytes(actions, 0, 1, [100]) == 200


def test_a_w_before_its_i_is_rejected():
    with pytest.raises(ValueError, match="W before I"):
        check_split([[Action("F", 0), Action("W", 0), Action("I", 0)]])


# -- the bubble ----------------------------------------------------------------------------------

@given(p=st.integers(1, 6), extra=st.integers(0, 10), f=st.sampled_from([1.0, 2.0]),
       i=st.sampled_from([1.0, 2.0]), w=st.sampled_from([0.5, 1.0, 2.0, 3.0]))
def test_zb_h1_bubble_is_p_minus_1_times_f_plus_what_i_exceeds_w_by(p, extra, f, i, w):
    """Qi et al. 2024 §3.1: ZB-H1's bubble is (p − 1)(T_F + T_I − T_W) for m ≥ p and
    T_W ≤ T_I; a longer W stops it at the start-up, (p − 1)T_F. Exact where T_I ≤ T_F or
    T_W ≤ T_F, a lower bound otherwise."""
    m = p + extra
    bubble = makespan(timeline_split(zb_h1(p, m), "loop", f, i, w)) - m * (f + i + w)
    assert zb_h1_bubble_s(p, f, i, w) == (p - 1) * (f + max(i - w, 0.0))
    assert zb_h1_time_s(p, m, f, i, w) == m * (f + i + w) + zb_h1_bubble_s(p, f, i, w)
    if i <= f or w <= f:
        assert bubble == pytest.approx(zb_h1_bubble_s(p, f, i, w), abs=1e-12)
    else:
        assert bubble >= zb_h1_bubble_s(p, f, i, w) - 1e-12


@given(p=st.integers(2, 6), extra=st.integers(0, 8))
def test_zb_h1_bubble_is_a_third_of_1f1b_at_equal_times(p, extra):
    m = p + extra
    one_f_one_b_bubble = makespan(timeline(one_f_one_b(p, m), 1.0, 2.0)) - 3 * m
    zb_bubble = makespan(timeline_split(zb_h1(p, m))) - 3 * m
    assert zb_bubble * 3 == one_f_one_b_bubble


@given(p=st.integers(2, 5), extra=st.integers(0, 6))
def test_zb_v_bubble_is_below_zb_h1s_at_the_same_work(p, extra):
    """ZB-V's bubble with T_F = T_I = T_W stays below ZB-H1's at the same work per rank (each
    chunk half a ZB-H1 stage, Qi et al. 2024 §6)."""
    m = 2 * p - 1 + extra
    zbv = timeline_split(zb_v(p, m), "v", 0.5, 0.5, 0.5)
    h1 = timeline_split(zb_h1(p, m))
    assert makespan(zbv) - 3 * m < makespan(h1) - 3 * m
    assert idle_share(zbv) < idle_share(h1)


# -- the simulated twin --------------------------------------------------------------------------

def free_cluster(p):
    cpu = Device("cpu", 1e11, 1e10, math.inf)
    return Cluster.homogeneous("free", cpu, Topology.fully_connected(p, Link(0.0, 1e18, "none")))


@pytest.mark.parametrize("name, p, m", [("zb_h1", 3, 5), ("zbv", 2, 4), ("dualpipev", 3, 7)])
def test_simulation_on_free_links_equals_the_critical_path(name, p, m):
    make, placement = ZERO_BUBBLE[name]
    stages = p * (2 if placement == "v" else 1)
    costs = [SplitStageCost(0.1 + 0.01 * s, 0.2, 0.05 * (s + 1), 1000 * (s + 1), 64)
             for s in range(stages)]
    got = simulate_zero_bubble(free_cluster(p), costs, m, name)
    spans = timeline_split(make(p, m), placement, [c.forward_s for c in costs],
                           [c.input_s for c in costs], [c.weight_s for c in costs])
    assert got.step_time_s == pytest.approx(makespan(spans))
    assert got.peak_activation_bytes == [
        peak_activation_bytes(a, r, p, [c.activation_bytes for c in costs], placement)
        for r, a in enumerate(make(p, m))]


def test_shared_cores_stretch_the_step():
    costs = [SplitStageCost(0.1, 0.1, 0.1, 10, 8)] * 4
    alone = simulate_zero_bubble(free_cluster(4), costs, 8, "zb_h1").step_time_s
    shared = simulate_zero_bubble(free_cluster(4), costs, 8, "zb_h1", cores=2).step_time_s
    assert shared > alone
