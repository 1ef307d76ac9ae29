"""The faults of tests/backends/test_faults.py, as each launcher's ranks commit them.

Every rank first *arrives*: it writes its pid to ``<marks>/rank<R>.pid`` and waits for
``<marks>/go``, so the test can record what the job holds (processes, sockets, namespaces)
while every rank is up, then either lets the ranks loose or signals the launcher. Then rank
:data:`BAD` misbehaves and its peers do what a healthy rank does next:

==============  ====================================================  =========================
fault           rank BAD                                              its peers
==============  ====================================================  =========================
raise           raises ``ValueError``                                 wait in a collective
exit            ``sys.exit(3)``                                       wait in a collective
os_exit         ``os._exit(3)`` (no report, no clean-up)              wait in a collective
hang_recv       receives from a peer that never sends                 finish (wait for the end)
hang_compute    computes forever (sleeps)                             wait in a collective
mismatch        all-reduces 8 floats                                  all-reduce 4 floats
sigint, …       sleeps: the test signals the launcher                 sleep
==============  ====================================================  =========================

Per launcher:

* ``spawn`` and the shaped cluster run :func:`spawn_rank`; the collective is ``all_reduce``,
  the final wait ``spawn``'s own barrier;
* ``horovodrun`` runs ``python -m tests.backends.fault_fns FAULT MARKS`` (:func:`horovod_task`);
  the collective is ``hvd.allreduce`` (a rank that never submits it stalls its peers until the
  stall inspector fails them), the receive ``torch.distributed``'s on the group ``hvd.init``
  builds, the final wait ``hvd.shutdown``;
* the parameter server runs :class:`FaultyWait`, its SSP wait — the public hook where a user's
  code runs in every worker before each iteration; its nearest twin of a mismatched collective
  is a push whose values do not match its keys, and its peers "wait in a collective" by
  waiting for that worker's push.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BAD = 1
"""The rank (horovodrun, spawn) or worker (parameter server) that misbehaves."""
FAULTS = ("raise", "exit", "os_exit", "hang_recv", "hang_compute", "mismatch")
SIGNALS = ("sigint", "sigterm", "sigkill")
ARRIVE_TIMEOUT_S = 120.0
"""A rank gives up waiting for ``go`` after this long (the test is gone)."""
RECV_DELAY_S = 0.3
"""The receiving rank starts receiving this late, so its peer is waiting already."""


def arrive(marks: str, rank: int) -> None:
    """Say this rank is up (its pid, written atomically), then wait for the test's ``go``."""
    tmp = Path(marks) / f".rank{rank}.pid"
    tmp.write_text(str(os.getpid()))
    tmp.rename(Path(marks) / f"rank{rank}.pid")
    end = time.monotonic() + ARRIVE_TIMEOUT_S
    while not (Path(marks) / "go").exists():
        if time.monotonic() > end:
            raise TimeoutError(f"rank {rank}: no go from the test within {ARRIVE_TIMEOUT_S:g} s")
        time.sleep(0.02)


def misbehave(kind: str, who: str) -> None:
    """The faults every launcher meets the same way: raise, exit, compute forever (``who``:
    ``rank 1``, ``worker 1``, for the message)."""
    if kind == "raise":
        raise ValueError(f"{who} raises on purpose")
    if kind == "exit":
        sys.exit(3)
    if kind == "os_exit":
        os._exit(3)
    if kind in ("hang_compute", *SIGNALS):
        time.sleep(3600)


def spawn_rank(kind: str, marks: str) -> int:
    """A rank under ``spawn`` (loopback or shaped): arrive, then commit ``kind``."""
    import torch
    import torch.distributed as dist

    rank = dist.get_rank()
    arrive(marks, rank)
    if kind == "mismatch":
        dist.all_reduce(torch.ones(8 if rank == BAD else 4))
    elif kind == "hang_recv":
        if rank == BAD:
            time.sleep(RECV_DELAY_S)
            dist.recv(torch.zeros(1), src=0)  # rank 0 finished: it never sends
    elif rank == BAD or kind in SIGNALS:
        misbehave(kind, f"rank {rank}")
    else:
        dist.all_reduce(torch.ones(4))  # a healthy rank's next collective
    return rank


def horovod_task(kind: str, marks: str) -> None:
    """A task of ``horovodrun``: init, arrive, commit ``kind``, shut down.

    A receive that never completes is ``torch.distributed``'s (``hvd.init`` builds the default
    group from horovodrun's environment); a rank's collective is ``hvd.allreduce``, which the
    stall inspector fails when a rank never submits it."""
    import torch
    import torch.distributed as dist

    import backends.horovod as hvd

    hvd.init(timeout_s=3.0, stall_check_time_s=1.0, stall_shutdown_time_s=4.0)
    rank = hvd.rank()
    arrive(marks, rank)
    if kind == "mismatch":
        hvd.allreduce(torch.ones(8 if rank == BAD else 4), name="x")
    elif kind == "hang_recv":
        if rank == BAD:
            time.sleep(RECV_DELAY_S)
            dist.recv(torch.zeros(1), src=0)
    elif rank == BAD or kind in SIGNALS:
        misbehave(kind, f"rank {rank}")
    else:
        hvd.allreduce(torch.ones(4), name="x")
    hvd.shutdown()


@dataclass(frozen=True)
class FaultyWait:
    """The parameter server's SSP wait (``train(cfg, wait_fn=...)``) with a fault in it.

    Before iteration :data:`AT` every worker arrives; then worker :data:`BAD` commits ``kind``:
    ``hang_recv`` receives from the scheduler (on the launch's process group, whose timeout is
    shorter than the parameter server's), ``mismatch`` pushes a message whose values do not
    match its keys (the parameter server's twin of a mismatched collective)."""

    kind: str
    marks: str

    AT = 1

    def __call__(self, kv: Any, iteration: int, tau: int) -> None:
        import torch
        import torch.distributed as dist

        from backends.parameter_server.train import bounded_delay_wait

        me = kv.postoffice.my_rank
        if iteration == self.AT:
            arrive(self.marks, dist.get_rank())
            if me == BAD and self.kind == "hang_recv":  # from the scheduler, which never sends
                time.sleep(RECV_DELAY_S)
                dist.recv(torch.zeros(1), src=0)
            elif me == BAD and self.kind == "mismatch":
                kv.wait(kv.push(torch.arange(8), torch.ones(4), clock=iteration))
            elif me == BAD or self.kind in SIGNALS:
                misbehave(self.kind, f"worker {me}")
        bounded_delay_wait(kv, iteration, tau)


if __name__ == "__main__":
    horovod_task(sys.argv[1], sys.argv[2])
