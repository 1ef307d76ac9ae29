"""Measure a twin on ranks that ``torchrun`` started — one machine or several.

::

    torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d \\
        --rdzv-endpoint HOST0:29400 -m lab.run all_reduce.ring --sizes 1MiB,16MiB --out DIR
    distml-lab compare all_reduce.ring --measured DIR

Every rank runs this module. It joins torchrun's world (:func:`backends.torchrun.attach`),
after which the lab's measurement code — written for processes it starts itself with
:func:`backends.launch.spawn` — runs its rank functions on torchrun's ranks in place. The sweep
flags are those of ``distml-lab run`` (``--sizes``, ``--quick``, ``--repeats``); the world is
torchrun's (``--nnodes × --nproc-per-node``; for a strategy twin, the world whose processes
that is: a parameter server's ``1 + S + W``). Rank 0 writes ``DIR/TWIN.json``: the measured
records, the cluster they ran on (nodes, ranks per node, host of each rank) and how many of
the measurement's launches ran on torchrun's ranks (``launches_on_ranks``; none: each rank
measured alone). With ``--calibrate`` the ranks first measure the calibration primitives on
the same world and rank 0 writes ``DIR/calibration.json``, which ``compare --measured DIR``
then predicts from — the prediction for the cluster the measurement came from.

A twin's processes are torchrun's ranks, wherever they run. A parameter server's tasks are
ranks too: ``tf.parameter_server`` deals its chief (rank 0), ps tasks and workers over the
nodes (:mod:`backends.tf_distribute.ps_ranks`), and its records say which rank and node ran
each task. A twin whose replicas are devices of *one* process cannot spread over ranks:
``tf.mirrored`` (TF's ``MirroredStrategy``, single-host by definition, book chapter 18) and
``data_parallel`` (PyTorch's ``DataParallel``, chapter 4) run on a world of one rank
(``--nproc-per-node 1``) and are refused on more, naming their counterparts whose replicas are
processes, ``tf.multi_worker_mirrored`` and ``ddp``.

Bad input is refused on every rank, before any rank joins the world: one line, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.units import UsageError

EXIT_USAGE = 2

ONE_PROCESS = {"tf.mirrored": "tf.multi_worker_mirrored", "data_parallel": "ddp"}
"""Twins whose replicas are the devices of one process, each with its counterpart whose
replicas are processes (the one to run on several of torchrun's ranks). On a world of one
rank they run as they are."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lab.run", description=__doc__.split("\n")[0])
    p.add_argument("twin", help="a registered twin (distml-lab list)")
    p.add_argument("--out", required=True, help="folder for TWIN.json (and calibration.json)")
    p.add_argument("--sizes", help="message sizes of a collective twin, as distml-lab run")
    p.add_argument("--quick", action="store_true", help="the twin's short sweep")
    p.add_argument("--repeats", type=int, default=10, help="timed repeats per point (1-1000)")
    p.add_argument("--calibrate", action="store_true", help="also measure the calibration "
                   "primitives on this world (DIR/calibration.json)")
    p.add_argument("--quick-calibration", action="store_true", help="the short calibration")
    p.add_argument("--cluster-file", action="store_true", help="also probe this cluster for "
                   "a cluster file, DIR/cluster.json (simulate/plan --cluster DIR/cluster.json)")
    return p


def _strategy_world(twin: Any, processes: int, points: Sequence[Any]) -> int:
    """The twin's world size whose every point starts ``processes`` processes."""
    worlds = range(twin.min_world, twin.max_world + 1)
    for world in worlds:
        if all(twin.processes(world, p) == processes for p in twin.points_at(world, points)):
            return world
    fits = sorted({twin.processes(w, points[0]) for w in worlds})
    raise UsageError(f"{twin.name} cannot run on {processes} processes: start torchrun with "
                     f"one of {fits} in all")


def plan(argv: Sequence[str], processes: int) -> dict[str, Any]:
    """Check the request (no work): the twin, its world and sweep, the files to write."""
    from lab.checks import check_repeats
    from lab.outputs import check_new_files
    from lab.strategies import get_strategy
    from lab.twins import get_twin
    from lab.units import parse_sizes

    args = _parser().parse_args(list(argv))
    check_repeats(args.repeats)
    out = Path(args.out)
    names = ([f"{args.twin}.json"] + (["calibration.json"] if args.calibrate else [])
             + (["cluster.json"] if args.cluster_file else []))
    check_new_files(out, names, force=False)
    if args.twin in ONE_PROCESS and processes > 1:
        raise UsageError(f"{args.twin} is one process driving all its replicas (single-host): "
                         f"run {ONE_PROCESS[args.twin]} on {processes} ranks, or {args.twin} "
                         f"on one rank (--nproc-per-node 1)")
    strategy = get_strategy(args.twin)
    if strategy is not None:
        if args.sizes is not None:
            raise UsageError(f"{strategy.name} sweeps {strategy.parameter}, not sizes")
        points = list(strategy.quick_points if args.quick else strategy.points)
        world = _strategy_world(strategy, processes, points)
        return {"args": args, "strategy": strategy, "world": world, "points": points}
    try:
        twin = get_twin(args.twin)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    if processes < twin.min_world:
        raise UsageError(f"{twin.name} needs at least {twin.min_world} ranks; torchrun "
                         f"started {processes}")
    sizes = parse_sizes(args.sizes) if args.sizes else list(
        twin.quick_sizes if args.quick else twin.sizes)
    return {"args": args, "twin": twin, "world": processes, "sizes": sizes}


def measure(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The measured records (every rank computes them; they are the same on every rank)."""
    from lab.compare import run_real
    from lab.strategies import measurement_rows

    args, world = request["args"], request["world"]
    if "strategy" in request:
        return measurement_rows(request["strategy"], world, request["points"], args.repeats)
    twin = request["twin"]
    return [{"twin": twin.name, "world": world, "bytes": n, "measured_median_s": t["median_s"],
             "measured_p10_s": t["p10_s"], "measured_p90_s": t["p90_s"],
             **({"calls": t["calls"]} if "calls" in t else {})}
            for n, t in zip(request["sizes"], run_real(twin, world, request["sizes"],
                                                       args.repeats), strict=True)]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of every rank; returns the exit status."""
    from backends.torchrun import attach, cluster_layout, detach, launches

    argv = list(sys.argv[1:] if argv is None else argv)
    rank = int(os.environ.get("RANK", "0"))
    processes = int(os.environ.get("WORLD_SIZE", "0"))
    try:
        if processes < 1:
            raise UsageError("not started by torchrun (WORLD_SIZE is not set): run "
                             "torchrun ... -m lab.run TWIN --out DIR")
        request = plan(argv, processes)
    except (UsageError, ValueError) as exc:
        if rank == 0:
            print(f"lab.run: error: {exc}".splitlines()[0], file=sys.stderr)
        return EXIT_USAGE
    args, out = request["args"], Path(request["args"].out)
    attach()
    try:
        layout = cluster_layout()
        if args.calibrate:
            _calibrate(processes, out, rank, args.quick_calibration)
        if args.cluster_file:
            _probe_cluster(processes, out, rank, args.quick_calibration, layout)
        before = launches()
        records = measure(request)
        on_ranks = launches() - before
    finally:
        detach()
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        doc = {"records": records, "cluster": layout, "launches_on_ranks": on_ranks}
        (out / f"{args.twin}.json").write_text(json.dumps(doc, indent=2))
        print(f"lab.run: {len(records)} records of {args.twin} on {layout['nodes']} node(s), "
              f"{processes} ranks -> {out / (args.twin + '.json')}", file=sys.stderr)
    return 0


def _calibrate(world: int, out: Path, rank: int, quick: bool) -> None:
    """The calibration primitives on torchrun's world; rank 0 keeps the file."""
    from lab.calibrate import calibrate, calibration_sweep

    sweep = calibration_sweep(quick)
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        calibrate(world, "gloo", sizes=sweep["sizes"], repeats=sweep["repeats"],
                  path=out / "calibration.json")
        return
    with tempfile.TemporaryDirectory() as tmp:  # the other ranks' copies are thrown away
        calibrate(world, "gloo", sizes=sweep["sizes"], repeats=sweep["repeats"],
                  path=Path(tmp) / "calibration.json")


def _probe_cluster(world: int, out: Path, rank: int, quick: bool, layout: dict[str, Any]
                   ) -> None:
    """The cluster-file probe on torchrun's world (one node, or several: the levels inside and
    between nodes measured apart); rank 0 writes ``DIR/cluster.json``."""
    from lab.cluster_file import measure_cluster

    host = layout["ranks"][0]["host"]
    name = f"{host}-{layout['backend']}-{layout['nodes']}x{layout['ranks_per_node']}"
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
    measure_cluster(world, layout["backend"], out / "cluster.json" if rank == 0 else None,
                    quick, name)


if __name__ == "__main__":
    sys.exit(main())
