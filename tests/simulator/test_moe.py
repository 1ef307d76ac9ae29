"""Expert parallelism simulated: capacity and drops from the routing histogram, the uneven
all-to-all equal to the balanced closed form under uniform routing, and skew raising the
busiest rank's bytes and the step's time."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core import run_spmd
from simulator.moe import (
    RankCost,
    balanced_all_to_all_cost,
    busiest_bytes,
    capacity,
    exchange_bytes,
    memory_per_rank,
    routing_histogram,
    simulate_moe_step,
    skewed_all_to_all_bound,
    uneven_all_to_all,
)
from tests.simulator.collective_helpers import fully_connected, per_rank

ALPHA, BW = 1e-4, 1e9


def _exchange(comm, out):
    r, p = comm.rank, comm.world_size
    yield from uneven_all_to_all(comm, out[r], [out[s][r] for s in range(p)])


def _costs(counts, world, per_row_s=1e-6):
    """Costs proportional to the rows each rank's experts get (a rank's own work fixed)."""
    m = len(counts[0]) // world
    rows = [sum(row[e] for row in counts for e in range(j * m, (j + 1) * m))
            for j in range(world)]
    return [RankCost(1e-4, 1e-4, n * per_row_s, 2 * n * per_row_s) for n in rows]


def test_capacity_and_drops_of_a_hot_expert():
    assert capacity(100, 8, 2, 1.25) == 32
    counts, dropped = routing_histogram(100, 8, 1, 1.0, world=2, hot_fraction=0.5)
    # expert 0 wants 50 + 7 first choices, keeps C = 13; the others want 6 or 7 each
    assert counts[0][0] == 13 and counts[1] == counts[0]
    assert dropped == 57 - 13
    assert routing_histogram(96, 8, 2, 1.0, world=4)[1] == 0  # uniform: nothing dropped


@pytest.mark.parametrize("p", [2, 3, 4])
def test_uniform_routing_takes_the_balanced_closed_form(p):
    tokens, d = 96, 16
    counts, _ = routing_histogram(tokens, 4 * p, 2, 1.25, world=p)
    out = exchange_bytes(counts, d)
    piece = out[0][1]
    assert all(out[s][j] == piece for s in range(p) for j in range(p))
    result = run_spmd(fully_connected(p, ALPHA, BW), _exchange, out)
    assert result.makespan_s == pytest.approx(balanced_all_to_all_cost(p, piece, ALPHA, 1 / BW))
    assert per_rank(result, "send", p) == [piece * (p - 1)] * p


@given(p=st.integers(2, 5), rows=st.lists(st.integers(0, 50), min_size=25, max_size=25))
def test_every_nonempty_piece_moves_once_and_nothing_beats_the_bound(p, rows):
    counts = [rows[s * 5:(s + 1) * 5] * p for s in range(p)]  # 5p experts, 5 rows each rank
    out = exchange_bytes(counts, 4)
    result = run_spmd(fully_connected(p, ALPHA, BW), _exchange, out)
    moved = sum(out[s][j] for s in range(p) for j in range(p) if s != j)
    assert result.total_bytes == moved
    assert result.makespan_s >= skewed_all_to_all_bound(out, ALPHA, 1 / BW) * (1 - 1e-9)


@pytest.mark.parametrize("p", [2, 4])
def test_skew_raises_the_busiest_ranks_bytes_and_the_step_time(p):
    tokens, experts, d = 256, 8, 64
    cluster = fully_connected(p, ALPHA, BW)
    seen = []
    for hot in (0.0, 0.3, 0.6):
        # capacity factor 4: room for the hot expert, so nothing is dropped to hide the skew
        counts, dropped = routing_histogram(tokens, experts, 2, 4.0, world=p, hot_fraction=hot)
        assert dropped == 0
        step = simulate_moe_step(cluster, counts, _costs(counts, p), d, trace=False)
        seen.append((busiest_bytes(exchange_bytes(counts, d)), step.makespan_s))
    assert [b for b, _ in seen] == sorted(b for b, _ in seen) and seen[0][0] < seen[-1][0]
    assert [t for _, t in seen] == sorted(t for _, t in seen) and seen[0][1] < seen[-1][1]


def test_a_step_is_four_exchanges_and_a_count_exchange():
    p, d = 2, 8
    counts, _ = routing_histogram(64, 4, 1, 1.25, world=p)
    out = exchange_bytes(counts, d)
    result = simulate_moe_step(fully_connected(p, ALPHA, BW), counts, _costs(counts, p), d)
    names = [s.name for s in result.trace.for_rank(0) if s.kind == "step"]
    assert names == ["dispatch", "combine", "combine backward", "dispatch backward"]
    assert result.total_bytes == 4 * sum(out[0][1:]) * p + p * (p - 1) * 2 * 8


def test_sharding_experts_shrinks_a_ranks_parameters_not_its_group():
    one = memory_per_rank(64, 128, 8, 1, 256, 2, received_rows=512)
    four = memory_per_rank(64, 128, 8, 4, 256, 2, received_rows=128)
    expert = 2 * 64 * 128 + 128 + 64
    assert one["parameters"] - four["parameters"] == 4 * (8 - 2) * expert
    assert one["gradients"] == one["parameters"]
    assert one["total"] == sum(v for k, v in one.items() if k != "total")
    assert math.isclose(four["activations"] - one["activations"],
                        4 * (128 - 512) * (2 * 64 + 2 * 128))
