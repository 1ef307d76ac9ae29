"""A dataflow graph as plain data, the way TensorFlow's runtime sees one step: ops placed on
device names, pruned to the fetches, partitioned by task with Send/Recv pairs, played on the
simulator.

The model of TensorFlow's step (Abadi et al., *TensorFlow: A system for large-scale machine
learning*, OSDI 2016, §3.3; the 2015 white paper, §3.2–3.3) that the figures of chapters 15–16
(:mod:`lab.figures.tensorflow`) draw from: :class:`Op` s carry full device names such as
``/job:worker/replica:0/task:1/device:CPU:0``; :func:`prune` keeps what the fetches need;
:func:`partition` makes one program per task with a Send/Recv pair on every edge between
devices (one pair per tensor and destination device, named by its rendezvous key);
:func:`simulate` plays the programs with :func:`simulator.core.run_spmd`: one rank per task,
compute as fixed seconds, each Send an eager message of ``α + n·β``, each Recv a blocking
receive, a task running its partition in order. Transfers between devices of one task are local
and free here. Seconds and bytes throughout; no calibration, no measurement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simulator.core import SimComm, preset, run_spmd
from simulator.core.comm import SimGen

INCARNATION = 0x5EED
"""A fixed stand-in for a task's incarnation number (a random 64-bit id per server start)."""


def device(job: str, task: int, kind: str = "CPU", index: int = 0) -> str:
    """The full name of a device: ``/job:worker/replica:0/task:1/device:CPU:0``."""
    return f"/job:{job}/replica:0/task:{task}/device:{kind}:{index}"


def task_of(name: str) -> tuple[str, int]:
    """(job, task index) of a full device name."""
    fields = dict(part.split(":", 1) for part in name.strip("/").split("/"))
    return fields["job"], int(fields["task"])


def ranks(cluster_spec: dict[str, list[str]]) -> dict[tuple[str, int], int]:
    """Every task of a ClusterSpec (job → addresses) numbered in job order: one rank each."""
    tasks = [(job, i) for job, addresses in cluster_spec.items() for i in range(len(addresses))]
    return {t: r for r, t in enumerate(tasks)}


@dataclass(frozen=True)
class Op:
    """One node of the graph: its inputs (names), the bytes of its output tensor, its compute
    time (s) and the device it is placed on."""

    name: str
    inputs: tuple[str, ...]
    nbytes: int
    seconds: float
    device: str


@dataclass(frozen=True)
class Pair:
    """One Send/Recv pair: its rendezvous key, the tasks (ranks) at its ends, bytes, and the
    tag that matches the two in the simulation."""

    key: str
    src: int
    dst: int
    nbytes: int
    tag: int


Step = tuple[str, str, int, int, int, float]
"""One entry of a partition in run order: (kind, name, peer rank, bytes, tag, seconds), kind
one of ``compute``, ``send``, ``recv``."""


def prune(graph: Sequence[Op], fetches: Sequence[str]) -> list[Op]:
    """The ops the fetches need, transitively, in the graph's order."""
    by_name = {op.name: op for op in graph}
    needed, todo = set(), list(fetches)
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo.extend(by_name[name].inputs)
    return [op for op in graph if op.name in needed]


def partition(graph: Sequence[Op], rank_of: dict[tuple[str, int], int]
              ) -> tuple[dict[int, list[Step]], list[Pair]]:
    """Cut a placed, topologically ordered graph into one program per task.

    Every edge between devices becomes one Send (after its producer, on the producer's task)
    and one Recv (before the first consumer on the destination device); a tensor needed by
    several ops of one device crosses once. Returns the programs and the pairs.
    """
    by_name = {op.name: op for op in graph}
    pairs: dict[tuple[str, str], Pair] = {}
    for op in graph:
        for name in op.inputs:
            src = by_name[name]
            if src.device != op.device and (name, op.device) not in pairs:
                key = f"{src.device};{INCARNATION:016x};{op.device};{name}:0;0:0"
                pairs[(name, op.device)] = Pair(key, rank_of[task_of(src.device)],
                                                rank_of[task_of(op.device)], src.nbytes,
                                                len(pairs) + 1)
    programs: dict[int, list[Step]] = {r: [] for r in rank_of.values()}
    received: set[tuple[str, str]] = set()
    for op in graph:
        rank = rank_of[task_of(op.device)]
        for name in op.inputs:
            pair = pairs.get((name, op.device))
            if pair is not None and (name, op.device) not in received:
                received.add((name, op.device))
                programs[rank].append(("recv", name, pair.src, pair.nbytes, pair.tag, 0.0))
        programs[rank].append(("compute", op.name, rank, op.nbytes, 0, op.seconds))
        programs[rank] += [("send", name, p.dst, p.nbytes, p.tag, 0.0)
                           for (name, _), p in pairs.items() if name == op.name]
    return programs, list(pairs.values())


def run_partitions(comm: SimComm, programs: dict[int, list[Step]]) -> SimGen:
    """Rank program: run this task's partition in order; Sends are eager, Recvs block."""
    sends = []
    for kind, name, peer, nbytes, tag, seconds in programs[comm.rank]:
        if kind == "compute" and seconds > 0:
            start = comm.now
            yield comm.env.timeout(seconds)
            comm.span("compute", name, start)
        elif kind == "send" and peer != comm.rank:
            sends.append(comm.isend(peer, nbytes, tag))
        elif kind == "recv" and peer != comm.rank:
            yield from comm.recv(peer, nbytes, tag)
    for work in sends:
        yield work.wait()


def alpha_beta(preset_name: str = "ethernet-10g") -> tuple[float, float]:
    """(α in s, β in s/B) of one link of the preset."""
    topology = preset(preset_name, 2).topology
    return topology.path_latency_s(0, 1), 1 / topology.path_bandwidth_Bps(0, 1)


def simulate(graph: Sequence[Op], cluster_spec: dict[str, list[str]], preset_name: str) -> float:
    """Step time (s) of the placed graph on ``preset_name`` with one rank per task."""
    rank_of = ranks(cluster_spec)
    programs, _ = partition(graph, rank_of)
    return run_spmd(preset(preset_name, len(rank_of)), run_partitions, programs,
                    trace=False).makespan_s
