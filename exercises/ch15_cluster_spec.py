"""Chapter 15 exercise: a ClusterSpec's tasks, numbered as processes, and their addresses.

A TensorFlow cluster is a ``tf.train.ClusterSpec`` (textbook chapter 15, "The cluster"): named
*jobs*, each a list of task addresses::

    {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"], "ps": ["host3:2222"]}

Task ``i`` of a job is the server at ``jobs[job][i]``. The lab runs every task as one process
of :func:`backends.launch.spawn`, so it numbers the tasks of all jobs with one launcher rank:
jobs in the order the spec lists them, tasks in order within a job — above, ``chief`` task 0
is rank 0, ``worker`` tasks 0 and 1 are ranks 1 and 2, ``ps`` task 0 is rank 3. The lab's
twin is ``backends.tf_runtime.cluster.ClusterSpec`` (its ``rank``, ``device`` and
``task_address``); here you write the same look-ups on a plain dict.

Grade your answer::

    make grade EX=15.2

and read ``solutions/ch15_cluster_spec.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from backends.tf_runtime.cluster import DeviceName  # noqa: F401 (for the hints)

Jobs = Mapping[str, Sequence[str]]
"""A job name → its tasks' addresses, task ``i`` at index ``i`` (a ``ClusterSpec``'s dict)."""


def rank_of(jobs: Jobs, device: str) -> int:
    """The launcher rank of the task that runs ``device`` (a device name such as
    ``/job:worker/replica:0/task:1/device:CPU:0``; read it with ``DeviceName.parse``)."""
    # ===== EXERCISE 15.2: ClusterSpec task numbering and address lookup =====================
    #
    # Points: 4 (in proportion to the tests of ex15_2 that pass; `make grade EX=15.2`)
    #
    # Write three look-ups on a cluster's jobs (dicts keep the order their keys were given):
    #   rank_of(jobs, device)   the rank of the device's task: the tasks of every job listed
    #                           before its job, plus its task index;
    #   task_of(jobs, rank)     the inverse: (job, task) of a rank;
    #   address_of(jobs, device) the "host:port" of the device's task.
    # A device whose job is not in the cluster, or whose task index is beyond its job's
    # tasks, and a rank outside 0 … (all tasks − 1), raise ValueError.
    #
    # Hints:
    #   1. DeviceName.parse(device) gives .job and .task (the device type and index do not
    #      matter: every device of a task lives in the same process).
    #   2. Walk the jobs in order, counting the tasks you pass; for task_of, subtract each
    #      job's task count from the rank until it falls inside one.
    #
    # What is graded (tests/exercises/test_ch15_cluster_spec.py, `make grade EX=15.2`):
    #   - on random clusters (1–4 jobs of 1–5 tasks), rank_of equals ClusterSpec.rank for
    #     every task and device, task_of equals ClusterSpec.device(rank)'s job and task, and
    #     the two are inverse; address_of equals ClusterSpec.task_address;
    #   - unknown jobs, tasks beyond a job's and ranks outside the cluster raise ValueError.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 15.2: implement rank_of in "
                              "exercises/ch15_cluster_spec.py")


def task_of(jobs: Jobs, rank: int) -> tuple[str, int]:
    """``(job, task)`` of launcher rank ``rank`` (EXERCISE 15.2)."""
    raise NotImplementedError("EXERCISE 15.2: implement task_of in "
                              "exercises/ch15_cluster_spec.py")


def address_of(jobs: Jobs, device: str) -> str:
    """The address (``host:port``) of the task that runs ``device`` (EXERCISE 15.2)."""
    raise NotImplementedError("EXERCISE 15.2: implement address_of in "
                              "exercises/ch15_cluster_spec.py")
