"""The roles' loops: servers handle requests, workers pull, compute and push; :func:`simulate`.

Twin of :mod:`backends.parameter_server.train`. Rank 0 (the scheduler) idles. A server's van
has one receiving thread (a :class:`simpy.Resource`), shared by its handlers of each worker's
requests: a clock request (SSP) is answered once the slowest worker's clock allows, a pull with
the values, a push after its gradient is applied — in BSP only once all ``W`` workers' pushes of
the iteration are summed. A worker runs the iterations: wait as its consistency model says,
pull, compute (plus its straggler delay), push.
"""

from __future__ import annotations

import numpy as np
import simpy

from simulator.core.comm import SimComm, SimGen, SimResult, run_spmd
from simulator.core.hardware import Cluster
from simulator.parameter_server.consistency import check_consistency, required_clock
from simulator.parameter_server.cpu import CpuPool
from simulator.parameter_server.message import REQUEST_TAG, RESPONSE_TAG, message_nbytes
from simulator.parameter_server.postoffice import check_layout
from simulator.parameter_server.spec import PSSpec
from simulator.parameter_server.timeline import PSTimeline
from simulator.parameter_server.van import AnySource, recv_message, send_message


class _ServerState:
    """What one simulated server shares between its per-worker handlers."""

    def __init__(self, env: simpy.Environment, spec: PSSpec, server: int,
                 events: list[tuple[float, str, int, tuple[tuple[int, int], ...]]],
                 anysource: AnySource) -> None:
        self.env, self.spec, self.server, self.events = env, spec, server, events
        self.anysource = anysource
        self.thread = simpy.Resource(env, capacity=1)  # the van's one receiving thread
        self.clock = [0] * spec.workers
        self.arrived = [0] * spec.iterations  # BSP pushes per iteration
        self.applied = [env.event() for _ in range(spec.iterations)]
        self.advanced = env.event()  # fires whenever the slowest clock may have moved
        self.sent = 0
        self.busy_s = 0.0  # time its receiving thread was held

    @property
    def min_clock(self) -> int:
        return min(self.clock)


def _requests(spec: PSSpec, worker: int, server: int) -> list[tuple[str, int, int]]:
    """The requests a worker sends one server, in order: (kind, iteration, keys)."""
    out = []
    for t in range(spec.iterations):
        if required_clock(spec.consistency, t, spec.tau) is not None:
            out.append(("clock", t, 0))
        n = int(spec.slices[t, worker, server])
        if n:
            out.append(("pull", t, n))
        out.append(("push", t, n))
    return out


def _server_handler(comm: SimComm, cpu: CpuPool, st: _ServerState, worker: int) -> SimGen:
    """The server's receiving thread, as far as one worker's requests go."""
    spec, c = st.spec, st.spec.costs
    node = 1 + spec.servers + worker
    for kind, t, n in _requests(spec, worker, st.server):
        req = message_nbytes(n, n if kind == "push" else 0, spec.dense)
        if spec.rendezvous:
            yield st.anysource.announced(node, comm.rank, REQUEST_TAG)
        else:
            yield comm.irecv(node, req[0], REQUEST_TAG).wait()
        with st.thread.request() as hold:
            yield hold
            start = comm.now
            if spec.rendezvous:  # the receive from any source takes this worker's header
                st.anysource.go(node, comm.rank, REQUEST_TAG)
                yield from comm.recv(node, req[0], REQUEST_TAG)
            yield from recv_message(comm, cpu, node, req, REQUEST_TAG, c, False,
                                    spec.rendezvous)
            if kind == "clock":
                need = required_clock(spec.consistency, t, spec.tau) or 0
            elif kind == "pull":
                yield from cpu.run(c.pull_s + c.pull_per_value_s * n)
                st.events.append((comm.now, "pull", st.server, ((worker, t),)))
            else:
                yield from cpu.run(c.push_s + c.push_per_value_s * n)
                if spec.consistency == "bsp":
                    st.arrived[t] += 1
                    if st.arrived[t] == spec.workers:
                        touched = int(spec.slices[t, :, st.server].sum())  # an upper bound
                        yield from cpu.run(c.apply_per_value_s * touched)
                        st.events.append((comm.now, "apply", st.server,
                                          tuple((w, t) for w in range(spec.workers))))
                        st.clock = [t + 1] * spec.workers
                        st.applied[t].succeed()
                else:
                    st.events.append((comm.now, "apply", st.server, ((worker, t),)))
                    st.clock[worker] = t + 1
                    st.advanced.succeed()
                    st.advanced = comm.env.event()
            comm.span("handle", f"{kind} {t}", start, 4 * n)
            st.busy_s += comm.now - start
        if kind == "clock":
            while st.min_clock < need:
                yield st.advanced
        elif kind == "push" and spec.consistency == "bsp":
            yield st.applied[t]
        vals = n if kind == "pull" else 0
        with st.thread.request() as hold:
            yield hold
            start = comm.now
            parts = message_nbytes(0, vals, spec.dense)
            st.sent += sum(parts)
            yield from send_message(comm, cpu, node, parts, RESPONSE_TAG, c, spec.van,
                                    spec.servers, spec.rendezvous, st.anysource)
            st.busy_s += comm.now - start


def _worker(comm: SimComm, cpu: CpuPool, spec: PSSpec, worker: int,
            clocks: list[_ServerState]) -> SimGen:
    c, S, W = spec.costs, spec.servers, spec.workers
    start, end = np.zeros(spec.iterations), np.zeros(spec.iterations)
    staleness = np.zeros(spec.iterations, dtype=np.int64)
    wait = np.zeros(spec.iterations)
    inbox: dict[tuple[str, int, int], simpy.Event] = {}

    thread = simpy.Resource(comm.env, capacity=1)  # the worker van's one receiving thread
    anysource = clocks[0].anysource

    def receiver(server: int) -> SimGen:
        """The worker's receiving thread, as far as one server's responses go: it takes
        whichever header arrives first, then that message's payloads, one message at a
        time."""
        for kind, t, n in _requests(spec, worker, server):
            parts = message_nbytes(0, n if kind == "pull" else 0, spec.dense)
            if spec.rendezvous:
                yield anysource.announced(1 + server, comm.rank, RESPONSE_TAG)
            else:
                yield comm.irecv(1 + server, parts[0], RESPONSE_TAG).wait()
            with thread.request() as hold:
                yield hold
                if spec.rendezvous:
                    anysource.go(1 + server, comm.rank, RESPONSE_TAG)
                    yield from comm.recv(1 + server, parts[0], RESPONSE_TAG)
                yield from recv_message(comm, cpu, 1 + server, parts, RESPONSE_TAG, c,
                                        False, spec.rendezvous)
            inbox.setdefault((kind, t, server), comm.env.event()).succeed(clocks[server].min_clock)

    def answered(kind: str, t: int, servers: list[int]) -> SimGen:
        seen = []
        for s in servers:
            seen.append((yield inbox.setdefault((kind, t, s), comm.env.event())))
        yield from cpu.run(c.wakeup_s)
        return min(seen)

    for s in range(S):
        comm.env.process(receiver(s))
    for t in range(spec.iterations):
        start[t] = comm.now
        need = required_clock(spec.consistency, t, spec.tau)
        if need is not None:
            t0 = comm.now
            for s in range(S):
                yield from send_message(comm, cpu, 1 + s, message_nbytes(0, 0, spec.dense),
                                        REQUEST_TAG, c, spec.van, W, spec.rendezvous,
                                        anysource)
            yield from answered("clock", t, list(range(S)))
            comm.span("wait", f"clock {need}", t0)
            wait[t] += comm.now - t0
        pulled = [s for s in range(S) if spec.slices[t, worker, s]]
        t0 = comm.now
        for s in pulled:
            yield from send_message(comm, cpu, 1 + s,
                                    message_nbytes(int(spec.slices[t, worker, s]), 0, spec.dense),
                                    REQUEST_TAG, c, spec.van, W, spec.rendezvous, anysource)
        clock = yield from answered("pull", t, pulled)
        comm.span("pull", f"pull {t}", t0)
        staleness[t] = t - clock
        t0 = comm.now
        yield from cpu.run(spec.compute_s[t, worker])
        if spec.delay_s[t, worker] > 0:
            yield comm.env.timeout(spec.delay_s[t, worker])
        comm.span("compute", f"grad {t}", t0)
        t0 = comm.now
        for s in range(S):
            n = int(spec.slices[t, worker, s])
            yield from send_message(comm, cpu, 1 + s, message_nbytes(n, n, spec.dense),
                                    REQUEST_TAG, c, spec.van, W, spec.rendezvous, anysource)
        if spec.consistency == "bsp":
            t1 = comm.now
            yield from answered("push", t, list(range(S)))
            wait[t] += comm.now - t1
        comm.span("push", f"push {t}", t0)
        end[t] = comm.now
    return start, end, staleness, wait


class Host:
    """What the ranks of one simulation share: the cores, and the servers' state (made by
    whichever rank runs first)."""

    def __init__(self) -> None:
        self.cpu: CpuPool | None = None
        self.anysource: AnySource | None = None
        self.servers: list[_ServerState] = []
        self.events: list[tuple[float, str, int, tuple[tuple[int, int], ...]]] = []

    def setup(self, env: simpy.Environment, spec: PSSpec) -> tuple[CpuPool, list[_ServerState]]:
        if self.cpu is None:
            self.cpu = CpuPool(env, spec.cores)
            self.anysource = AnySource(env)
            self.servers = [_ServerState(env, spec, s, self.events, self.anysource)
                            for s in range(spec.servers)]
        return self.cpu, self.servers


def parameter_server(comm: SimComm, spec: PSSpec, host: Host) -> SimGen:
    """Rank program: the scheduler (rank 0) idles, servers handle, workers train."""
    if comm.rank == 0:
        return None
    cpu_pool, servers = host.setup(comm.env, spec)
    if comm.rank <= spec.servers:
        st = servers[comm.rank - 1]
        handlers = [comm.env.process(_server_handler(comm, cpu_pool, st, w))
                    for w in range(spec.workers)]
        yield comm.env.all_of(handlers)
        return st.sent, st.busy_s
    return (yield from _worker(comm, cpu_pool, spec, comm.rank - 1 - spec.servers, servers))


def simulate(cluster: Cluster, spec: PSSpec, trace: bool = True) -> tuple[PSTimeline, SimResult]:
    """Run :func:`parameter_server` on ``cluster`` (``1 + S + W`` ranks)."""
    check_layout(spec.servers, spec.workers, cluster.world_size)
    check_consistency(spec.consistency, spec.tau)
    host = Host()
    result = run_spmd(cluster, parameter_server, spec, host, trace=trace)
    workers = result.returns[1 + spec.servers:]
    events = tuple(host.events)
    timeline = PSTimeline(np.stack([w[0] for w in workers], axis=1),
                          np.stack([w[1] for w in workers], axis=1),
                          np.stack([w[2] for w in workers], axis=1),
                          [int(s[0]) for s in result.returns[1:1 + spec.servers]],
                          np.stack([w[3] for w in workers], axis=1), events,
                          [float(s[1]) / spec.iterations
                           for s in result.returns[1:1 + spec.servers]])
    return timeline, result
