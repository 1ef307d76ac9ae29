"""Chapter 15, reference answer: a cluster's tasks numbered as launcher ranks (exercise in
``exercises/ch15_cluster_spec.py``; the lab's own is
:class:`backends.tf_runtime.cluster.ClusterSpec`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from backends.tf_runtime.cluster import DeviceName

Jobs = Mapping[str, Sequence[str]]


def _task(jobs: Jobs, device: str) -> DeviceName:
    d = DeviceName.parse(device)
    if d.job not in jobs or not 0 <= d.task < len(jobs[d.job]):
        raise ValueError(f"{device} is not a task of the cluster {dict(jobs)}")
    return d


def rank_of(jobs: Jobs, device: str) -> int:
    """The tasks of the jobs before, plus the task index."""
    d = _task(jobs, device)
    before = 0
    for job, tasks in jobs.items():
        if job == d.job:
            break
        before += len(tasks)
    return before + d.task


def task_of(jobs: Jobs, rank: int) -> tuple[str, int]:
    """Subtract each job's tasks until the rank falls inside one."""
    if rank < 0:
        raise ValueError(f"rank {rank} is negative")
    left = rank
    for job, tasks in jobs.items():
        if left < len(tasks):
            return job, left
        left -= len(tasks)
    raise ValueError(f"rank {rank} is beyond the cluster's {rank - left} tasks")


def address_of(jobs: Jobs, device: str) -> str:
    """``jobs[job][task]``."""
    d = _task(jobs, device)
    return jobs[d.job][d.task]
