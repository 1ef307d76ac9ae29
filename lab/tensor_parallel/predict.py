"""Predicting a step: the simulator replays a profile's ops on every rank of this machine's
calibrated cluster — compute on a :class:`~simulator.core.cores.CorePool` of the host's
cores, the collectives as gloo (or the lab's ring) runs them on the tensor or data group —
the structure of :mod:`simulator.tensor_parallel`'s iteration with measured compute."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from backends import tensor_parallel as tp
from backends.tensor_parallel.point import GridPoint, Op, _compute
from backends.tensor_parallel.profile import StageProfile
from simulator.collectives.reduce_scatter import ring_reduce_scatter
from simulator.core.comm import SimComm, SimGen, run_spmd
from simulator.core.cores import CorePool
from simulator.core.hardware import Cluster
from simulator.ddp import waited_gloo_all_reduce
from simulator.tensor_parallel import waited_gloo_all_gather


def _replay(comm: SimComm, ops: Sequence[Op], groups: dict[str, SimComm | None],
            pool: CorePool | None) -> SimGen:
    """Run ``ops`` on this rank: compute on the shared cores, collectives on the groups:
    ``dist.all_reduce`` and ``dist.all_gather`` as gloo runs them, the reduce-scatter as the
    lab's ring (:func:`backends.tensor_parallel.communication._reduce_scatter`)."""
    for kind, group, value in ops:
        if kind == "compute":
            start = comm.now
            if pool is None:
                yield comm.env.timeout(value)
            else:
                yield from pool.run(value)
            comm.span("compute", "compute", start)
            continue
        sub = groups[group]
        assert sub is not None
        if kind == "all_reduce":
            yield from waited_gloo_all_reduce(sub, int(value), 4)
        elif kind == "all_gather":
            yield from waited_gloo_all_gather(sub, int(value), 4)
        else:
            yield from ring_reduce_scatter(sub, int(value), 4)


def _groups(comm: SimComm, point: GridPoint) -> dict[str, SimComm | None]:
    grid = tp.megatron_groups(point.world, point.t, point.p)
    mine = [g for g in grid.embedding if comm.rank in g and len(g) > 1]
    return {"tensor": comm.new_group(grid.of("tensor", comm.rank)),
            "data": comm.new_group(grid.of("data", comm.rank)),
            "embedding": comm.new_group(mine[0]) if mine else None}


def _pool(comm: SimComm, shared: dict[str, Any]) -> CorePool | None:
    if math.isinf(shared["cores"]):
        return None
    pool: CorePool = shared.setdefault("pool", CorePool(comm.env, shared["cores"]))
    return pool


def rank_program(comm: SimComm, ops: Sequence[Op], point: GridPoint,
                  shared: dict[str, Any]) -> SimGen:
    """Replay ``ops`` on this rank: compute on the shared cores, collectives on the groups."""
    yield from _replay(comm, ops, _groups(comm, point), _pool(comm, shared))


def pipeline_rank_program(comm: SimComm, stages: Sequence[StageProfile], point: GridPoint,
                           shared: dict[str, Any]) -> SimGen:
    """This rank's stage of a ``t × p × d`` step, as :class:`backends.pipeline.runtime.Pipeline`
    runs it: every receive posted up front, the 1F1B actions
    (:mod:`simulator.pipeline.schedules`, the runtime's own lists) each waiting for its
    input, replaying the stage's profiled ops and sending its output on; after the flush the
    gradient all-reduces and the optimizer (:class:`backends.megatron.GridGPT`)."""
    from simulator.pipeline.schedules import SCHEDULES

    groups, pool = _groups(comm, point), _pool(comm, shared)
    grid = tp.megatron_groups(point.world, point.t, point.p)
    pipe = grid.of("pipeline", comm.rank)
    k, m = pipe.index(comm.rank), point.microbatches
    me = stages[k]
    prev = pipe[k - 1] if k > 0 else None
    nxt = pipe[k + 1] if k < point.p - 1 else None
    recvs = {}
    for i in range(m):
        if prev is not None:
            recvs[("F", i)] = comm.irecv(prev, stages[k - 1].activation_bytes, 2 * i)
        if nxt is not None:
            recvs[("B", i)] = comm.irecv(nxt, me.activation_bytes, 2 * i + 1)
    sends = []
    for action in SCHEDULES["1f1b"](point.p, m)[k]:
        i = action.microbatch
        if action.kind == "F":
            if prev is not None:
                yield recvs.pop(("F", i)).wait()
            yield from _replay(comm, me.forward, groups, pool)
            if nxt is not None:
                sends.append(comm.isend(nxt, me.activation_bytes, 2 * i))
        else:
            if nxt is not None:
                yield recvs.pop(("B", i)).wait()
            yield from _replay(comm, me.backward, groups, pool)
            if prev is not None:
                sends.append(comm.isend(prev, stages[k - 1].activation_bytes, 2 * i + 1))
    yield from _replay(comm, me.finish, groups, pool)
    for send in sends:
        yield send.wait()


def predict(point: GridPoint, ops: Sequence[Op] | Sequence[StageProfile], cluster: Cluster,
            cores: float = math.inf) -> float:
    """Predicted step time on ``cluster`` (``t·p·d`` ranks), ranks sharing ``cores``, s:
    ``ops`` from :func:`profile_ops` (``p = 1``) or :func:`profile_stages`."""
    if cluster.world_size != point.world:
        raise ValueError(f"the cluster has {cluster.world_size} ranks, the grid {point.world}")
    program = pipeline_rank_program if point.p > 1 else rank_program
    return run_spmd(cluster, program, ops, point, {"cores": cores}, trace=False).makespan_s


def compute_seconds(ops: Sequence[Op] | Sequence[StageProfile], microbatches: int = 1
                    ) -> float:
    """One rank's compute in a step (the profile's sum; with stages, the busiest stage's
    ``m`` forwards and backwards and its finish), s."""
    if ops and isinstance(ops[0], StageProfile):
        return max(microbatches * (_compute(st.forward) + _compute(st.backward))
                   + _compute(st.finish) for st in ops if isinstance(st, StageProfile))
    return _compute(ops)  # type: ignore[arg-type]
