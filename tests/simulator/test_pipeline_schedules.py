"""Pipeline schedules: literal tables, dependency and memory properties, bubble formulas."""

import inspect

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.pipeline import schedules
from simulator.pipeline.schedules import (
    SCHEDULES,
    Action,
    bubble_fraction,
    clock_cycles,
    draw,
    draw_versions,
    gpipe,
    idle_fraction,
    in_flight,
    interleaved_1f1b,
    makespan,
    one_f_one_b,
    pipedream_2bw,
    pipedream_async,
    pipeline_time,
    timeline,
)


def names(actions):
    return " ".join(str(a) for a in actions)


def docstring_table(fn):
    """The ``rank r: …`` lines drawn in a function's docstring."""
    lines = inspect.getdoc(fn).splitlines()
    return "\n".join(line.strip() for line in lines if line.strip().startswith("rank "))


# -- literal tables ------------------------------------------------------------------------------

def test_gpipe_runs_all_forwards_then_backwards_in_reverse():
    assert [names(r) for r in gpipe(2, 3)] == ["F0 F1 F2 B2 B1 B0"] * 2


def test_one_f_one_b_of_four_stages_and_eight_microbatches():
    s = one_f_one_b(4, 8)
    assert names(s[0]) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7"
    assert names(s[2]) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7"
    assert names(s[3]) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"


def test_one_f_one_b_with_fewer_microbatches_than_stages_warms_up_with_all():
    assert names(one_f_one_b(4, 2)[0]) == "F0 F1 B0 B1"


def test_interleaved_orders_microbatches_in_groups_of_stages():
    s = interleaved_1f1b(2, 4, 2)
    assert names(s[0]) == ("F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3")


@pytest.mark.parametrize("fn, args", [(gpipe, (3, 4)), (one_f_one_b, (3, 4)),
                                      (interleaved_1f1b, (2, 4, 2))])
def test_docstring_tables_are_what_draw_prints(fn, args):
    assert draw(fn(*args)) == docstring_table(fn)


def test_clock_cycles_of_four_microbatches_and_three_partitions():
    assert clock_cycles(4, 3) == [
        [(0, 0)],
        [(1, 0), (0, 1)],
        [(2, 0), (1, 1), (0, 2)],
        [(3, 0), (2, 1), (1, 2)],
        [(3, 1), (2, 2)],
        [(3, 2)],
    ]


@given(m=st.integers(1, 12), n=st.integers(1, 12))
def test_clock_cycles_run_every_pair_once_in_m_plus_n_minus_1_ticks(m, n):
    ticks = clock_cycles(m, n)
    assert len(ticks) == m + n - 1
    pairs = [pair for tick in ticks for pair in tick]
    assert sorted(pairs) == [(i, j) for i in range(m) for j in range(n)]
    when = {pair: k for k, tick in enumerate(ticks) for pair in tick}
    assert all(when[(i, j)] == when[(i, j - 1)] + 1 for i in range(m) for j in range(1, n))


# -- properties ----------------------------------------------------------------------------------

def all_schedules(p, m, v):
    out = {"gpipe": gpipe(p, m), "1f1b": one_f_one_b(p, m)}
    if m % p == 0:
        out["interleaved"] = interleaved_1f1b(p, m, v)
    return out


@given(p=st.integers(1, 6), m=st.integers(1, 16), v=st.integers(1, 3))
def test_every_rank_runs_each_forward_and_backward_once(p, m, v):
    for name, s in all_schedules(p, m, v).items():
        chunks = v if name == "interleaved" else 1
        for actions in s:
            expected = {Action(k, i, c) for k in "FB" for i in range(m) for c in range(chunks)}
            assert len(actions) == len(expected)
            assert set(actions) == expected


@given(p=st.integers(1, 6), m=st.integers(1, 16), v=st.integers(1, 3))
def test_dependencies_can_be_satisfied_and_are_honoured(p, m, v):
    for s in all_schedules(p, m, v).values():
        chunks = 1 + max(a.chunk for a in s[0])
        spans = timeline(s, 1.0, 2.0)  # raises on deadlock
        end = {(a.kind, a.microbatch, a.chunk * p + r): (st_, e)
               for r, row in enumerate(spans) for st_, e, a in row}
        last = p * chunks - 1
        for (kind, i, stage), (start, _) in end.items():
            if kind == "F" and stage > 0:
                assert start >= end[("F", i, stage - 1)][1]
            if kind == "B":
                assert start >= end[("F", i, stage)][1]
                if stage < last:
                    assert start >= end[("B", i, stage + 1)][1]


@given(p=st.integers(1, 8), m=st.integers(1, 24))
def test_one_f_one_b_keeps_at_most_p_minus_r_microbatches_in_flight(p, m):
    for r, actions in enumerate(one_f_one_b(p, m)):
        assert in_flight(actions) == min(p - r, m) <= p
    assert all(in_flight(actions) == m for actions in gpipe(p, m))


@given(p=st.integers(1, 6), m=st.integers(1, 16), tf=st.floats(0.1, 3), tb=st.floats(0.1, 3))
def test_gpipe_and_1f1b_take_m_plus_p_minus_1_ticks(p, m, tf, tb):
    for s in (gpipe(p, m), one_f_one_b(p, m)):
        spans = timeline(s, tf, tb)
        assert makespan(spans) == pytest.approx(pipeline_time(p, m, tf, tb))
        assert idle_fraction(spans) == pytest.approx(bubble_fraction(p, m))


@given(p=st.integers(1, 5), k=st.integers(1, 4), v=st.integers(1, 4))
def test_interleaved_bubble_shrinks_v_fold_when_backward_is_twice_forward(p, k, v):
    m = k * p
    spans = timeline(interleaved_1f1b(p, m, v), 1.0 / v, 2.0 / v)
    assert makespan(spans) == pytest.approx(pipeline_time(p, m, 1.0, 2.0, v))
    assert idle_fraction(spans) == pytest.approx(bubble_fraction(p, m, v))


def test_the_two_bubble_definitions_are_kept_apart():
    assert bubble_fraction(4, 8) == pytest.approx(3 / 11)
    assert bubble_fraction(4, 8, relative_to="ideal") == pytest.approx(3 / 8)
    assert bubble_fraction(4, 8, 2, relative_to="ideal") == pytest.approx(3 / 16)
    b = bubble_fraction(5, 7, 3, relative_to="ideal")
    assert bubble_fraction(5, 7, 3) == pytest.approx(b / (1 + b))


# -- asynchronous PipeDream ----------------------------------------------------------------------

@pytest.mark.parametrize("fn, plan", [
    (pipedream_async, lambda: pipedream_async(3, 6)),
    (pipedream_2bw, lambda: pipedream_2bw(3, 9, 3)),
])
def test_weight_version_tables_are_what_draw_versions_prints(fn, plan):
    assert draw_versions(plan()) == docstring_table(fn)


def test_pipedream_async_versions_of_the_docstring_example():
    w = pipedream_async(3, 6)
    assert w.version[0] == {0: 0, 1: 0, 2: 0, 3: 1, 4: 2, 5: 3}
    assert w.version[2] == {i: i for i in range(6)}
    assert w.stashed == [3, 2, 1]


@given(p=st.integers(1, 7), extra=st.integers(0, 10))
def test_weight_stashing_keeps_one_version_per_microbatch_in_flight(p, extra):
    w = pipedream_async(p, 2 * p - 1 + extra)  # the pipeline fills up
    assert w.stashed == [p - r for r in range(p)]
    assert [names(a) for a in w.schedule] == [names(a) for a in one_f_one_b(p, 2 * p - 1 + extra)]


@given(p=st.integers(1, 7), m=st.integers(1, 20))
def test_weight_stashing_never_keeps_more_than_p_minus_r_versions(p, m):
    w = pipedream_async(p, m)
    assert all(1 <= n <= p - r + 1 for r, n in enumerate(w.stashed))


@given(p=st.integers(1, 6), extra=st.integers(0, 10))
def test_vertical_sync_uses_stage_zeros_version_everywhere(p, extra):
    w = pipedream_async(p, 2 * p - 1 + extra, vertical_sync=True)
    assert all(v == w.version[0] for v in w.version)
    assert w.stashed == [p] * p  # the last stage too keeps versions as old as stage 0's


@given(p=st.integers(1, 6), batch_extra=st.integers(0, 4), batches=st.integers(1, 4))
def test_pipedream_2bw_never_needs_more_than_two_versions(p, batch_extra, batches):
    batch = p + batch_extra
    w = pipedream_2bw(p, batch * batches, batch)
    assert max(w.stashed) <= 2
    assert w.stashed[-1] == 1
    # a micro-batch of batch k runs on version k or k - 1 (the one-step delay)
    for used in w.version:
        assert all(i // batch - 1 <= v <= i // batch for i, v in used.items())


# -- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, words", [
    (lambda: gpipe(0, 4), "at least 1 stage"),
    (lambda: one_f_one_b(2, 0), "at least 1 micro-batch"),
    (lambda: interleaved_1f1b(4, 6, 2), "not a multiple of 4"),
    (lambda: interleaved_1f1b(2, 4, 0), "at least 1 chunk"),
    (lambda: pipedream_2bw(4, 8, 2), "at least the 4 stages"),
    (lambda: bubble_fraction(2, 2, relative_to="busy"), "'total' or 'ideal'"),
    (lambda: timeline([[Action("B", 0), Action("F", 0)]] * 2), "deadlocks"),
    (lambda: timeline([[Action("F", 0)]]), "exactly once"),
])
def test_bad_input_gets_a_clear_error(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_schedules_registry_names_the_synchronous_schedules():
    assert set(SCHEDULES) == {"gpipe", "1f1b", "interleaved"}
    assert SCHEDULES["1f1b"] is one_f_one_b
    assert "torch" not in schedules.__dict__
