"""Grading capstone 14.4: ZeRO stage 3 / FSDP with prefetching, on real processes (gloo, CPU).

* parity — 3 steps of Adam (worlds 2 and 4) or SGD with momentum (world 3) give the
  parameters PyTorch's own ``torch.distributed.fsdp.fully_shard`` gives (units of 35, 40 and
  18 parameters: padding needed at every world);
* traffic — per step each unit is all-gathered twice and reduce-scattered once, buffers of
  the padded unit, and the bytes sent per rank are ZeRO-3's :func:`simulator.zero.
  communication_bytes`;
* prefetch — the event log shows the next unit's all-gather issued before the current unit's
  compute ends and waited for only after it began, in forward and in backward order;
* memory — one step's peak, measured as :mod:`backends.zero_measure` measures the lab's ZeRO:
  without prefetching (one unit gathered at a time) it agrees with :mod:`simulator.zero`'s
  stage-3 prediction; prefetching raises it by one gathered unit at most.

Run with ``make grade EX=14.4`` (your answer) or ``DISTML_IMPL=solutions pytest
tests/exercises/test_ch14_capstone_fsdp.py`` (the reference answer).
"""

import pytest

from backends.launch import RankError, spawn
from lab.models import mlp
from lab.zero import predict_peak_bytes
from simulator.zero import communication_bytes, ring_volume
from tests.exercises import ch14_capstone_ranks as ranks

pytestmark = [pytest.mark.ch14, pytest.mark.ex14_4, pytest.mark.timeout(180)]

TODO = ("FSDP is not implemented yet: write unshard, wait_unsharded, reshard, pre_forward, "
        "post_forward, pre_backward and post_backward in exercises/ch14_capstone_fsdp.py "
        "(EXERCISE 14.4), then run `make grade EX=14.4` again")

PEAK_TOLERANCE = 0.06
"""|predicted − measured| / measured of the peak without prefetching: the tolerance the lab's
own ZeRO twin is held to (``tests/lab/test_zero_twin.py``). The reference answer's peak lies
0.5–0.8 % below the prediction at worlds 2–4, the same every run (the allocator's record of
a step is deterministic). A unit kept a little too long may hide inside the tolerance; the
count of units gathered at once (``most_gathered``) catches it."""

_runs: dict[tuple[str, int], object] = {}


def _spawned(program, world):
    """Each rank's report of ``program`` at ``world`` (launched once, shared by the tests), or
    a failure with the TODO line if the answer is a stub (found once: no launch after that)."""
    key = (program.__name__, world)
    if key not in _runs and "stub" not in _runs:
        try:
            args = (OPTIMIZER[world],) if program is ranks.train else ()
            _runs[key] = spawn(program, world, *args, timeout=30, deadline=120)
        except RankError as exc:
            if "not implemented" not in str(exc):
                raise
            _runs["stub"] = True
    if "stub" in _runs:
        pytest.fail(TODO, pytrace=False)
    return _runs[key]


WORLDS = [2, 3, 4]
OPTIMIZER = {2: "adam", 3: "sgd", 4: "adam"}
"""The optimizer each world trains with (``ranks.OPTIMIZERS``): Adam, and SGD with momentum."""


@pytest.mark.parametrize("world", WORLDS)
def test_parameters_equal_pytorch_fully_shard_after_three_steps(world):
    for rank, run in enumerate(_spawned(ranks.train, world)):
        assert run["max_diff"] < 1e-5, (
            f"world {world} rank {rank} ({OPTIMIZER[world]}): parameters differ from "
            f"fully_shard's by {run['max_diff']:.3g} after {ranks.STEPS} steps")


@pytest.mark.parametrize("world", WORLDS)
def test_each_unit_is_gathered_twice_and_reduce_scattered_once_per_step(world):
    run = _spawned(ranks.train, world)[0]
    padded = [k * world for k in run["shard_numel"]]
    for step, records in enumerate(run["records"]):
        for unit, size in enumerate(padded):
            mine = sorted((kind, nbytes) for kind, u, nbytes in records if u == unit)
            assert mine == [("all_gather", 4 * size)] * 2 + [("reduce_scatter", 4 * size)], (
                f"world {world} step {step} unit {unit}: collectives {mine}; expected two "
                f"all-gathers and one reduce-scatter of its {size} padded elements (use "
                "self.comm, not torch.distributed directly)")
        sent = sum(ring_volume(kind, nbytes, world) for kind, _, nbytes in records)
        expected = sum(communication_bytes(size, 3, world, "fp32") for size in padded)
        assert sent == pytest.approx(expected, rel=1e-12), (world, step)


def _last(events, event, before):
    """Position of the last ``event`` before position ``before`` (−1 if none)."""
    hits = [k for k in range(before) if events[k] == event]
    return hits[-1] if hits else -1


@pytest.mark.parametrize("world", WORLDS)
def test_the_next_units_gather_is_in_flight_while_the_current_unit_computes(world):
    run = _spawned(ranks.train, world)[0]
    n = len(run["shard_numel"])
    for events in run["events"]:
        at = {e: k for k, e in enumerate(events)
              if e[0] in ("forward start", "forward end", "backward start", "backward end")}
        assert len(at) == 4 * n, f"every unit's forward and backward, once: {events}"
        for phase, order in (("forward", range(n - 1)), ("backward", range(n - 1, 0, -1))):
            for i in order:
                nxt = i + 1 if phase == "forward" else i - 1
                needed = at[(f"{phase} start", nxt)]
                issued = _last(events, ("issue all_gather", nxt), needed)
                waited = _last(events, ("wait all_gather", nxt), needed)
                assert 0 <= issued < at[(f"{phase} end", i)], (
                    f"{phase}: unit {nxt}'s all-gather was not issued before unit {i}'s "
                    f"{phase} ended: {events}")
                assert waited > at[(f"{phase} start", i)], (
                    f"{phase}: unit {nxt}'s all-gather was waited for before unit {i}'s "
                    f"{phase} began — issued but not overlapped: {events}")


def _largest_unit_bytes(world):
    """Bytes of the largest padded unit of the memory model at ``world``."""
    return max(4 * -(-sum(p.numel() for p in layer.parameters()) // world) * world
               for layer in mlp(ranks.MEMORY_WIDTHS))


@pytest.mark.parametrize("world", [2, 4])
def test_peak_memory_without_prefetch_is_the_zero3_prediction(world):
    reports = [r[False] for r in _spawned(ranks.peak_bytes, world)]
    assert all(r["most_gathered"] == 1 for r in reports), (
        f"world {world}: with prefetch=False, {max(r['most_gathered'] for r in reports)} "
        "units were gathered at once; ZeRO-3 gathers one unit at a time")
    measured = max(r["peak"] for r in reports)
    predicted = predict_peak_bytes(world, 3, mlp(ranks.MEMORY_WIDTHS), ranks.MEMORY_BATCH)
    assert abs(predicted - measured) / measured <= PEAK_TOLERANCE, (
        f"world {world}: a step's peak is {measured} B; ZeRO-3 (simulator.zero) predicts "
        f"{predicted} B (tolerance {PEAK_TOLERANCE:.0%}): are full parameters and gradients "
        "freed as soon as each unit is done with them?")


@pytest.mark.parametrize("world", [2, 4])
def test_prefetching_costs_one_more_gathered_unit_at_most(world):
    reports = _spawned(ranks.peak_bytes, world)
    assert all(r[True]["most_gathered"] == 2 for r in reports), (
        f"world {world}: with prefetching, at most "
        f"{[r[True]['most_gathered'] for r in reports]} units were gathered at once; "
        "expected the current unit and the next")
    plain = max(r[False]["peak"] for r in reports)
    prefetching = max(r[True]["peak"] for r in reports)
    largest = _largest_unit_bytes(world)
    assert 0 < prefetching - plain <= largest, (
        f"world {world}: prefetching moved the peak from {plain} B to {prefetching} B; "
        f"holding the next unit while the current one computes costs one unit, at most "
        f"{largest} B")
