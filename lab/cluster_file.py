"""``distml-lab calibrate --cluster-out FILE``: measure this cluster, write it as a cluster file.

Glue between the probe (:func:`backends.cluster_probe.probe_rank`, run on ``world`` ranks with
the chosen backend — gloo on CPUs, NCCL on GPUs — or on torchrun's ranks by ``lab.run``) and
the simulator's format (:mod:`simulator.core.cluster_file`): the point-to-point times are
fitted to α and β per level (:func:`simulator.core.fit.fit_alpha_beta`, relative least
squares), the device's compute rate is the best GEMM throughput measured, its memory bandwidth
the measured copy rate. All the measurements go into the file too, so a reader can see what
the model was built from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.nccl_tests import busbw_GBps
from simulator.core.cluster_file import ClusterFile, save
from simulator.core.fit import fit_alpha_beta
from simulator.core.hardware import Device
from simulator.core.network import Link

KiB, MiB = 2**10, 2**20


def probe_sweep(quick: bool) -> dict[str, Any]:
    """The probe's arguments: sizes, GEMM shapes ``(M, N, K, dtype)``, copy size, repeats."""
    shapes = [(1024, 1024, 1024, "fp16"), (2048, 2048, 2048, "fp16"),
              (4096, 4096, 4096, "fp16"), (4096, 1024, 4096, "fp16"), (2048, 2048, 2048, "fp32")]
    if quick:
        return {"p2p_sizes": [4 * KiB, 256 * KiB, 4 * MiB],
                "all_reduce_sizes": [64 * KiB, 4 * MiB], "gemm_shapes": shapes[:2],
                "copy_bytes": 64 * MiB, "repeats": 5}
    return {"p2p_sizes": [4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB],
            "all_reduce_sizes": [64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB], "gemm_shapes": shapes,
            "copy_bytes": 256 * MiB, "repeats": 10}


def _fit(sizes: list[int], times: list[float]) -> Link | None:
    if not times:
        return None
    fit = fit_alpha_beta(sizes, times)
    return Link(latency_s=fit.alpha_s, bandwidth_Bps=fit.bandwidth_Bps)


def build(result: dict[str, Any], sweep: dict[str, Any], name: str) -> ClusterFile:
    """A cluster file from the probe's rank-0 ``result`` on ``sweep``."""
    sizes = list(sweep["p2p_sizes"])
    intra, inter = _fit(sizes, result["intra"]), _fit(sizes, result["inter"])
    world = int(result["world"])
    gemm = [{"m": m, "n": n, "k": k, "dtype": ran, "flops_per_s": rate}
            for (m, n, k, _), (rate, ran) in zip(sweep["gemm_shapes"], result["gemm"],
                                                 strict=True)]
    reduced = [{"bytes": b, "seconds": t, "busbw_GBps": busbw_GBps("all_reduce", world, b, t)}
               for b, t in zip(sweep["all_reduce_sizes"], result["all_reduce"], strict=True)]
    device = Device(str(result["device"]), max(g["flops_per_s"] for g in gemm),
                    float(result["copy_Bps"]), float(result["memory_bytes"]))
    measured = {"backend": result["backend"], "world": world, "p2p_sizes": sizes,
                "intra_one_way_s": result["intra"], "inter_one_way_s": result["inter"],
                "all_reduce": reduced, "gemm": gemm, "copy_Bps": result["copy_Bps"]}
    link = intra or inter  # one rank per node: no level inside a node was measured
    assert link is not None  # a probe has at least two ranks: one of the levels is measured
    return ClusterFile(name, device, link, inter, int(result["ranks_per_node"]), measured)


def measure_cluster(world: int, backend: str, path: str | Path | None, quick: bool,
                    name: str) -> ClusterFile | None:
    """Probe ``world`` ranks (spawned here, or torchrun's when attached); write ``path``
    (``None``: only return it). ``None`` on torchrun's ranks but 0, which measure only."""
    from backends.cluster_probe import probe_rank
    from backends.launch import spawn

    sweep = probe_sweep(quick)
    result = spawn(probe_rank, world, sweep["p2p_sizes"], sweep["all_reduce_sizes"],
                   sweep["gemm_shapes"], sweep["copy_bytes"], sweep["repeats"],
                   backend=backend, timeout=120)[0]
    if result is None:  # a rank of torchrun's other than 0: rank 0 has the measurements
        return None
    cluster = build(result, sweep, name)
    if path is not None:
        save(cluster, path)
    return cluster


def write_cluster_file(args: Any, world: int, network: str) -> None:
    """``calibrate --cluster-out FILE``: checked first (loopback, a new ``.json`` file), then
    probed on ``world`` ranks of ``--backend``; prints the model the file holds."""
    import socket

    from lab.outputs import check_new_files
    from lab.units import UsageError

    out = Path(args.cluster_out)
    if out.suffix != ".json":
        raise UsageError(f"--cluster-out {out}: name a .json file (--cluster takes it back)")
    if network != "loopback":
        raise UsageError("--cluster-out measures the real network: drop --network")
    if out.exists():
        raise UsageError(f"--cluster-out {out} exists: name a new file (the lab never "
                         "overwrites one)")
    check_new_files(out.parent, [out.name], force=False, flag="--cluster-out")
    name = f"{socket.gethostname()}-{args.backend}"
    cluster = measure_cluster(world, args.backend, out, args.quick, name)
    assert cluster is not None  # spawned here: rank 0's measurements come back
    d, link = cluster.device, cluster.intra
    print(f"{out}: {name}, {cluster.ranks_per_node} ranks per node; device {d.name}: "
          f"{d.flops_per_s / 1e9:.1f} GFLOP/s (best GEMM), {d.mem_bandwidth_Bps / 1e9:.1f} GB/s "
          f"(copy); link α {link.latency_s * 1e6:.1f} us, {link.bandwidth_Bps / 1e9:.2f} GB/s")
