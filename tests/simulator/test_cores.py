"""simulator.core.cores: the CPU cores shared by the ranks' computations."""

import pytest
import simpy

from simulator.core.cores import CorePool


@pytest.mark.timeout(10)
def test_pieces_below_the_clocks_resolution_finish():
    """Four 0.19 µs pieces on two cores at t ≈ 0.044 s: the remainder after one share of the
    work needs less time than the float clock can add to ``now`` — the pool must finish the
    jobs rather than wake at the same instant forever."""
    env = simpy.Environment()
    pool = CorePool(env, 2)
    start, piece = 0.04442452398067192, 1.8626161940645442e-07

    def job():
        yield env.timeout(start)
        yield from pool.run(piece)

    for _ in range(4):
        env.process(job())
    env.run()
    assert env.now == pytest.approx(start + 2 * piece, abs=1e-15)


def test_processor_sharing_on_two_cores():
    """Three one-second computations on two cores each get 2/3 of a core: all end at 1.5 s;
    a fourth started at 1.5 s then runs alone at full speed."""
    env = simpy.Environment()
    pool = CorePool(env, 2)
    ends: list[float] = []

    def job(at: float, seconds: float):
        yield env.timeout(at)
        yield from pool.run(seconds)
        ends.append(env.now)

    for _ in range(3):
        env.process(job(0.0, 1.0))
    env.process(job(1.5, 1.0))
    env.run()
    assert ends == [pytest.approx(1.5)] * 3 + [pytest.approx(2.5)]
