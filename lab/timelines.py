"""One step of a strategy twin as two timelines: predicted (the simulator's trace) and measured
(the real twin's :class:`backends.trace.Tracer` spans).

Each function here is a :data:`lab.strategies.Timeline` — ``(world, point, calibration,
model) -> (predicted, measured)`` — that a chapter's ``lab/strategies_*.py`` hands to
:func:`lab.strategies.register`. The predicted trace is the simulated twin's run of one step
at ``point`` in tier ``model``, on the very cluster (and from the same one-process profiles)
the twin's own ``predict`` uses, with trace recording on. The measured trace is one real step
of the real twin on spawned processes, its spans gathered on rank 0 (or, for DataParallel's
threads, recorded in the one process), shifted to start at 0. Span names follow the
simulator's where the real code allows, so :func:`lab.plots.plot_timelines` can put the two
side by side. Seconds throughout.

Nothing here calls ``torch.distributed``: the rank programs of the traced steps live in
:mod:`backends.timelines` (or in the chapter's lab module where one already records a step).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lab.strategies import Timeline
    from simulator.core.calibration import Calibration
    from simulator.core.engine import Trace

PS_ITERATIONS = 3
"""Iterations of a parameter-server timeline: the first two show the workers falling into
step, the third the steady state (a run of one iteration would show the start-up only)."""


def _records(records: list[dict[str, Any]]) -> Trace:
    """Span records as a trace shifted to start at 0."""
    from simulator.core.engine import Trace

    return Trace.from_records(records).shifted()


def ps_timeline(consistency: str) -> Timeline:
    """The parameter server's timeline under ``consistency`` (``ps.bsp``/``ssp``/``async``):
    ``world`` workers, ``point`` servers, :data:`PS_ITERATIONS` iterations. Ranks: 0 the
    scheduler (no spans), then the servers (``handle``), then the workers (``pull``,
    ``compute``, ``push``, ``wait``)."""
    def timeline(world: int, servers: Any, calibration: Calibration, model: str
                 ) -> tuple[Trace, Trace | None]:
        from lab.parameter_server import profile_compute, profile_costs, spec_for
        from lab.parameter_server.van import measure_anysource
        from lab.strategies_ps import calibration_entry, config, measure
        from simulator.host.effects import BUSY_HOST
        from simulator.host.factory import local_cluster
        from simulator.parameter_server import simulate

        cfg = replace(config(consistency, int(servers), world), iterations=PS_ITERATIONS,
                      trace=True)
        processes = 1 + cfg.servers + cfg.workers
        entry = calibration_entry(processes, calibration)
        costs = replace(profile_costs(), anysource_s=measure_anysource(processes))
        # the cluster and spec of lab.parameter_server.predict, traced
        cluster = local_cluster(entry, processes, model, effects=BUSY_HOST)
        spec = spec_for(cfg, costs, profile_compute(cfg), entry.cores)
        predicted = simulate(cluster, spec, trace=True)[1].trace
        return predicted, _records(measure(cfg, 1)[0].spans)

    return timeline


def data_parallel_timeline(world: int, batch: Any, calibration: Calibration, model: str
                           ) -> tuple[Trace, Trace | None]:
    """DataParallel's iteration at ``batch`` on ``world`` replicas (threads of one process,
    a row per device): calibration-free, every tier alike."""
    from lab.data_parallel import measure_primitives, measure_step, predict_step
    from lab.strategies_data_parallel import PRIMITIVE_REPEATS, WIDTHS

    prims = measure_primitives(WIDTHS, int(batch), (world,), PRIMITIVE_REPEATS)
    predicted = predict_step(prims, WIDTHS, int(batch), world).trace
    _, measured = measure_step(WIDTHS, int(batch), world, repeats=1, trace=True)
    return predicted, None if measured is None else measured.shifted()


def ddp_timeline(world: int, bucket_mb: Any, calibration: Calibration, model: str
                 ) -> tuple[Trace, Trace | None]:
    """Our DDP's step with buckets of ``bucket_mb`` MiB: forward, backward with the buckets'
    all-reduces overlapped, optimizer."""
    from lab.ddp import (
        DEFAULT_BATCH,
        gloo_ring_cluster,
        interference,
        predict,
        profile_layers,
        timeline,
    )
    from lab.strategies_ddp import WIDTHS

    entry = calibration.entry(world, "gloo")
    workload = profile_layers(WIDTHS, DEFAULT_BATCH)
    predicted = predict(entry, workload, world, float(bucket_mb), True, interference(world),
                        gloo_ring_cluster(entry, world, model)).trace
    return predicted, timeline(world, WIDTHS, DEFAULT_BATCH, float(bucket_mb))


def horovod_timeline(world: int, fusion_mb: Any, calibration: Calibration, model: str
                     ) -> tuple[Trace, Trace | None]:
    """Horovod's step at a fusion threshold of ``fusion_mb`` MiB: the main thread's forward,
    backward, synchronize and optimizer, the background thread's cycles."""
    from lab.horovod_measure import timeline
    from lab.horovod_predict import DEFAULT_BATCH, DEFAULT_WIDTHS, predict
    from lab.horovod_primitives import measure_primitives
    from lab.strategies_horovod import CYCLE_TIME_MS, PRIMITIVE_REPEATS

    entry = calibration.entry(world, "gloo")
    primitives = measure_primitives(DEFAULT_WIDTHS, DEFAULT_BATCH, world, entry.cores,
                                    repeats=PRIMITIVE_REPEATS, rounds=10 * PRIMITIVE_REPEATS,
                                    idle_s=0.06 * PRIMITIVE_REPEATS)
    predicted = predict(entry, primitives, world, float(fusion_mb), CYCLE_TIME_MS, model).trace
    return predicted, timeline(world, DEFAULT_WIDTHS, DEFAULT_BATCH, float(fusion_mb),
                               CYCLE_TIME_MS)


def pipeline_timeline(schedule: str) -> Timeline:
    """A synchronous pipeline's step under ``schedule`` (``gpipe``, ``1f1b``, ``interleaved``):
    ``world`` stages, ``point`` micro-batches; compute ``F``/``B`` spans, sends, receives."""
    def timeline(world: int, microbatches: Any, calibration: Calibration, model: str
                 ) -> tuple[Trace, Trace | None]:
        from lab.pipeline import local_cluster, measure, predict, profile, profile_stages_together
        from lab.strategies_pipeline import PROFILE_REPEATS, TOGETHER_S, setups

        setup = setups(schedule, world, [int(microbatches)])[0]
        layers = profile(setup, PROFILE_REPEATS)
        setup = setup.with_balance(layers)
        cluster = local_cluster(world, calibration, model=model)[0]
        predicted = predict(setup, layers, cluster=cluster,
                            stage_times=profile_stages_together(setup, TOGETHER_S)).trace
        return predicted, measure(setup, repeats=1, builtin=False)["trace"]

    return timeline


def pipedream_timeline(world: int, minibatches: Any, calibration: Calibration, model: str
                       ) -> tuple[Trace, Trace | None]:
    """PipeDream's run of ``minibatches`` inputs on ``world`` stages (no flush: the whole run
    is the step)."""
    from lab.pipedream import measure_pipedream, predict_pipedream, profile_pipedream
    from lab.pipeline import host_cores, local_cluster
    from lab.strategies_pipedream import PROFILE_REPEATS, pipedream_setup

    setup = pipedream_setup(world, int(minibatches))
    cluster = local_cluster(world, calibration, model=model)[0]
    predicted = predict_pipedream(setup, profile_pipedream(setup, PROFILE_REPEATS), cluster,
                                  host_cores()).trace
    return predicted, measure_pipedream(setup, timeout=120.0)["trace"]


def megatron_timeline(world: int, grid: Any, calibration: Calibration, model: str
                      ) -> tuple[Trace, Trace | None]:
    """The small GPT's step on the grid named ``grid`` (``t2d1`` …) of ``world`` ranks: the
    profile replayed on the twin's cluster (the compute profile and waiting primitive of
    :func:`lab.strategies_megatron.launch_grids`, :func:`lab.tensor_parallel.waiting_cluster`),
    and one real step (:func:`backends.timelines.megatron_step_rank`)."""
    from backends.launch import spawn
    from backends.timelines import megatron_step_rank
    from lab.pipeline import host_cores
    from lab.strategies_megatron import PROFILE_REPEATS, grid_point, launch_grids
    from lab.tensor_parallel import point_fields, waiting_cluster
    from lab.tensor_parallel.predict import pipeline_rank_program, rank_program
    from simulator.core.comm import run_spmd

    point = grid_point(grid)
    got = launch_grids(world, [point], PROFILE_REPEATS, profile=True)
    cluster = waiting_cluster(world, got["exchange_s"], calibration=calibration,
                              model=model)[0]
    # lab.tensor_parallel.predict's run, traced
    program = pipeline_rank_program if point.p > 1 else rank_program
    predicted = run_spmd(cluster, program, got["profiles"][0], point, {"cores": host_cores()},
                         trace=True).trace
    records = spawn(megatron_step_rank, world, point_fields(point), backend="gloo",
                    timeout=120)[0]
    return predicted, _records(records)


def rpc_timeline(world: int, batch: Any, calibration: Calibration, model: str
                 ) -> tuple[Trace, Trace | None]:
    """The split MLP's training step at ``batch`` rows on ``world`` processes (a driver and
    ``world − 1`` stages) on the RPC transport's fitted cluster (:func:`lab.rpc.rpc_cluster`;
    every tier alike), and one real step
    (:func:`backends.timelines.rpc_split_step_rank`)."""
    from functools import partial

    from backends.launch import spawn
    from backends.timelines import rpc_split_step_rank
    from lab.rpc import calibrate_rpc, profile_stages, rpc_cluster, stage_module
    from lab.strategies_rpc import WIDTHS
    from simulator.rpc import simulate_split_step

    stages = world - 1
    costs = profile_stages(WIDTHS, stages, int(batch))
    predicted = simulate_split_step(rpc_cluster(world, calibrate_rpc(world=world)), costs).trace
    factories = [partial(stage_module, WIDTHS, stages, i) for i in range(stages)]
    records = spawn(rpc_split_step_rank, world, factories, WIDTHS[0], WIDTHS[-1], int(batch),
                    timeout=60)[0]
    return predicted, _records(records)
