"""The lean event kernel (:mod:`simulator.core.kernel`) and the direct messages of SimComm give
the same simulation as stock SimPy with a process per message: same order of events, same
times, same trace."""

import math

import pytest
import simpy

from simulator.collectives import ALGORITHMS
from simulator.core import Cluster, Link, Topology
from simulator.core.comm import _run
from simulator.core.hardware import preset
from simulator.core.kernel import Kernel
from tests.simulator.collective_helpers import cluster

EVERY = [(op, name) for op, algs in ALGORITHMS.items() for name in algs]
WORLDS = (2, 5, 16)


def _clusters(p: int, model: str) -> dict[str, Cluster]:
    host, spine = Link(2e-6, 1e10, model), Link(5e-6, 2.5e9, model)
    return {"switch": cluster(Topology.switch(p, host)),
            "ring": cluster(Topology.ring(p, host)),
            "fat_tree": cluster(Topology.fat_tree(p, 4, 2, host, spine))}


def _every_cluster(p: int) -> dict[str, Cluster]:
    out = {f"{kind}/{model}": c for model in ("none", "fair")
           for kind, c in _clusters(p, model).items()}
    out.update({name: preset(name, p) for name in ("a100", "h100", "ethernet-10g")})
    return out


def _kwargs(op: str, p: int) -> dict[str, int]:
    if op in ("broadcast", "scatter"):
        return {"src": p // 2}
    if op in ("gather", "reduce"):
        return {"dst": p - 1}
    return {}


def _spans(result):
    return sorted((s.rank, s.kind, s.name, s.start, s.end, s.nbytes) for s in result.trace)


@pytest.mark.parametrize(("op", "name"), EVERY)
def test_lean_run_equals_processes_on_stock_simpy(op, name):
    program, _ = ALGORITHMS[op][name]
    for p in WORLDS:
        nbytes = 4 * p * 37 + 8  # chunks of unequal sizes
        for label, c in _every_cluster(p).items():
            args, kwargs = (nbytes,), _kwargs(op, p)
            lean = _run(c, program, args, kwargs, trace=True, calls=2, lean=True)
            reference = _run(c, program, args, kwargs, trace=True, calls=2, lean=False)
            where = f"{op}.{name} p={p} {label}"
            assert lean.makespan_s == pytest.approx(reference.makespan_s, rel=1e-12), where
            assert lean.finish_s == pytest.approx(reference.finish_s, rel=1e-12), where
            assert lean.bytes_per_channel == reference.bytes_per_channel, where
            assert lean.peak_memory_bytes == reference.peak_memory_bytes, where
            assert lean.returns == reference.returns, where
            got, want = _spans(lean), _spans(reference)
            assert [s[:3] + s[5:] for s in got] == [s[:3] + s[5:] for s in want], where
            assert all(math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-18)
                       for g, w in zip(got, want, strict=True)
                       for a, b in zip(g[3:5], w[3:5], strict=True)), where


def _story(env: simpy.Environment) -> list[tuple[float, str]]:
    """Processes and callbacks that crowd instants: zero timers, equal times, processes
    started from others (their start is urgent), events succeeded for several waiters."""
    log: list[tuple[float, str]] = []
    gate = env.event()

    def waiter(name: str):
        value = yield gate
        log.append((env.now, f"{name} got {value}"))
        yield env.timeout(0)
        log.append((env.now, f"{name} after zero"))

    def worker(name: str, delays: list[float]):
        for d in delays:
            yield env.timeout(d)
            log.append((env.now, f"{name} at"))
            if name == "a" and env.now == 1.0 and not gate.triggered:
                env.process(waiter("late"))
                gate.succeed(7)
        return name

    procs = [env.process(worker("a", [0.5, 0.5, 0.0, 1.0])),
             env.process(worker("b", [1.0, 0.0, 0.25])),
             env.process(waiter("w"))]
    env.timeout(1.0).callbacks.append(lambda _: log.append((env.now, "callback")))
    env.run()
    log.append((env.now, f"returns {[p.value for p in procs]}"))
    return log


def test_kernel_runs_events_in_simpys_order():
    assert _story(Kernel()) == _story(simpy.Environment())


def test_kernel_runs_until_a_time_and_peeks_like_simpy():
    def story(env: simpy.Environment) -> list[float]:
        env.timeout(2.0)
        env.run(until=1.0)
        seen = [env.now, env.peek()]
        env.run()
        return [*seen, env.now, env.peek()]

    assert story(Kernel()) == story(simpy.Environment()) == [1.0, 1.0, 2.0, math.inf]


def test_plain_callbacks_run_in_order_with_events_due_at_the_same_instant():
    env, log = Kernel(), []
    env.timeout(1.0).callbacks.append(lambda _: log.append("event"))
    env.call_later(1.0, log.append, "callback")
    env.call_later(0.5, log.append, "earlier")
    env.run()
    assert (log, env.now) == (["earlier", "event", "callback"], 1.0)
