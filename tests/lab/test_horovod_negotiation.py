"""lab.horovod_negotiation: the engine's negotiation run in threads and recorded (no processes)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from lab.horovod_negotiation import (
    format_negotiation,
    negotiate,
    plot_negotiation,
    training_steps,
)

LAYERS = [("fc0.weight", 64 * 32), ("fc0.bias", 64), ("fc1.weight", 10 * 64), ("fc1.bias", 10)]


def _reduced(records):
    return [n for rec in records for group in rec.responses for n in group]


def test_first_step_goes_to_rank_0_then_the_cache_answers() -> None:
    scenario = training_steps(LAYERS, 3, steps=2)
    records = negotiate(scenario)
    half = len(scenario) // 2
    first, second = records[:half], records[half:]
    assert all(rec.identical for rec in records)
    names = sorted(n for n, _ in LAYERS)
    assert sorted(_reduced(first)) == names and sorted(_reduced(second)) == names
    assert any(rec.coordinator_round for rec in first)
    assert not any(rec.coordinator_round for rec in second)  # every tensor a cache hit
    assert {n for rec in second for n in rec.common_hits} == set(names)
    # rank 0 was sent each rank's new requests, once
    sent = [n for rec in first if rec.to_coordinator for n in rec.to_coordinator[2]]
    assert sorted(sent) == names


def test_a_straggler_delays_only_its_tensors() -> None:
    records = negotiate(training_steps(LAYERS, 3, steps=2, lag=[0, 0, 2]))
    for step in (records[:5], records[5:]):
        submitted_by_2 = {n: rec.cycle for rec in step for n in rec.submitted[2]}
        done = {n: rec.cycle for rec in step for g in rec.responses for n in g}
        assert set(done) == set(submitted_by_2)
        assert all(done[n] >= submitted_by_2[n] for n in done)
    # in the cached step, ranks 0 and 1 set bits that the AND clears until rank 2 catches up
    waiting = [rec for rec in records[5:] if rec.hit_bits[0] and not rec.common_hits]
    assert waiting and all(not rec.responses for rec in waiting)


def test_ranks_submitting_in_different_orders_execute_the_same_list() -> None:
    scenario = [[[("a", 4), ("b", 4)], [("b", 4), ("a", 4)]], [[], []]]
    records = negotiate(scenario, fusion_threshold_bytes=0)
    assert records[0].identical
    assert sorted(_reduced(records)) == ["a", "b"]


def test_without_a_cache_every_cycle_goes_to_rank_0() -> None:
    records = negotiate(training_steps(LAYERS, 2, steps=2), cache_capacity=0)
    assert all(rec.coordinator_round for rec in records)


def test_drawn_and_printed() -> None:
    records = negotiate(training_steps(LAYERS, 2, steps=1))
    text = format_negotiation(records)
    assert "cycle 0: coordinator (rank 0)" in text and "responses (fused)" in text
    ax = plot_negotiation(records)
    assert len(ax.get_yticks()) == 2
