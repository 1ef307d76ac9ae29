"""The static runtime's names: a cluster of jobs and tasks, and the device names that place ops.

Book chapter 15. TensorFlow describes a cluster as a :class:`ClusterSpec` — ``tf.train.
ClusterSpec({"worker": ["host0:2222", "host1:2222"], "ps": [...]})``: named *jobs*, each a
list of *tasks* (one server process each, ``tf.distribute.Server``). Every op is placed on a
device of a task, named by a string like ``/job:worker/replica:0/task:1/device:CPU:0`` — the
:class:`DeviceName` here, TensorFlow's ``tf.DeviceSpec`` (C++ ``DeviceNameUtils::ParsedName``).

In the lab a task is a process started by :func:`backends.launch.spawn`; :meth:`ClusterSpec.
rank` numbers the tasks of every job in order (job by job, as listed), so task ``k`` of the
first job is rank ``k``. Addresses are kept for show: the lab's processes find one another
through the launcher's store, not through ``host:port``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_FIELD = re.compile(r"^(job|replica|task|device|cpu|gpu):(.*)$", re.IGNORECASE)


@dataclass(frozen=True, order=True)
class DeviceName:
    """A fully specified device: ``/job:{job}/replica:{replica}/task:{task}/device:{type}:{index}``.

    TensorFlow's ``tf.DeviceSpec`` (``DeviceSpec.from_string`` / ``to_string``); the lab fills
    every field, where TensorFlow allows partial names that the Placer completes.
    """

    job: str = "worker"
    replica: int = 0
    task: int = 0
    device_type: str = "CPU"
    index: int = 0

    @classmethod
    def parse(cls, name: str) -> DeviceName:
        """``"/job:worker/replica:0/task:1/device:CPU:0"`` → a :class:`DeviceName`.

        Fields may come in any order and be left out (the defaults fill them); the legacy
        ``/cpu:0`` form is accepted. Raises :class:`ValueError`, naming the bad part, for
        anything else.
        """
        if not name.startswith("/"):
            raise ValueError(f"a device name starts with '/': {name!r}")
        fields: dict[str, object] = {}
        for part in name[1:].split("/"):
            m = _FIELD.match(part)
            if not m:
                raise ValueError(f"{name!r}: {part!r} is not job:, replica:, task: or device:")
            key, value = m.group(1).lower(), m.group(2)
            if key in ("cpu", "gpu"):
                key, value = "device", f"{key.upper()}:{value}"
            if key in fields:
                raise ValueError(f"{name!r} gives {key} twice")
            if key == "job":
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
                    raise ValueError(f"{name!r}: bad job name {value!r}")
                fields["job"] = value
            elif key in ("replica", "task"):
                if not value.isdigit():
                    raise ValueError(f"{name!r}: {key} must be a number, got {value!r}")
                fields[key] = int(value)
            else:
                kind, _, index = value.partition(":")
                if not kind.isalpha() or not index.isdigit():
                    raise ValueError(f"{name!r}: device must be TYPE:INDEX, got {value!r}")
                fields["device_type"], fields["index"] = kind.upper(), int(index)
        return cls(**fields)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return (f"/job:{self.job}/replica:{self.replica}/task:{self.task}"
                f"/device:{self.device_type}:{self.index}")

    @property
    def task_name(self) -> str:
        """The task this device belongs to, ``/job:worker/replica:0/task:1`` (the unit a graph
        is partitioned by, :mod:`backends.tf_runtime.partition`)."""
        return f"/job:{self.job}/replica:{self.replica}/task:{self.task}"


@dataclass(frozen=True)
class ClusterSpec:
    """Jobs and their tasks' addresses: TensorFlow's ``tf.train.ClusterSpec``.

    ``jobs`` maps a job name to its task addresses, task ``i`` at ``jobs[job][i]``.
    """

    jobs: Mapping[str, Sequence[str]]

    def __post_init__(self) -> None:
        if not self.jobs or any(not tasks for tasks in self.jobs.values()):
            raise ValueError("a cluster needs at least one job, each with at least one task")

    @classmethod
    def local(cls, tasks: int, job: str = "worker") -> ClusterSpec:
        """One job of ``tasks`` tasks on this machine (addresses ``localhost:2222+i``)."""
        return cls({job: [f"localhost:{2222 + i}" for i in range(tasks)]})

    @property
    def job_names(self) -> list[str]:
        """The jobs, in the order given."""
        return list(self.jobs)

    def num_tasks(self, job: str) -> int:
        """How many tasks ``job`` has."""
        return len(self.jobs[job])

    def task_address(self, job: str, task: int) -> str:
        """The address of ``/job:{job}/task:{task}``."""
        return self.jobs[job][task]

    @property
    def world_size(self) -> int:
        """Every task of every job: the processes the cluster runs."""
        return sum(len(t) for t in self.jobs.values())

    def rank(self, device: DeviceName | str) -> int:
        """The process (launcher rank) that runs ``device``'s task: jobs in order, tasks in
        order within a job."""
        d = DeviceName.parse(device) if isinstance(device, str) else device
        if d.job not in self.jobs or not 0 <= d.task < len(self.jobs[d.job]):
            raise ValueError(f"{d} is not a task of this cluster ({self.describe()})")
        before = 0
        for job, tasks in self.jobs.items():
            if job == d.job:
                return before + d.task
            before += len(tasks)
        raise AssertionError("unreachable")

    def device(self, rank: int, device_type: str = "CPU", index: int = 0) -> DeviceName:
        """The device ``index`` of the task that launcher rank ``rank`` runs."""
        for job, tasks in self.jobs.items():
            if rank < len(tasks):
                return DeviceName(job, 0, rank, device_type, index)
            rank -= len(tasks)
        raise ValueError(f"rank beyond the cluster's {self.world_size} tasks")

    def describe(self) -> str:
        """``worker: 2 tasks, ps: 1 task``."""
        return ", ".join(f"{j}: {len(t)} task{'s' * (len(t) != 1)}" for j, t in self.jobs.items())
