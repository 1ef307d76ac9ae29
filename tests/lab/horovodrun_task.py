"""A task for tests/lab/test_horovodrun.py, started by ``horovodrun``: ``python horovodrun_task.py
MODE``.

Modes:
    allreduce  init, all-reduce (rank + 1) over the job, print the result and the environment
    fail       register, print, start a grandchild (``sleep``), then rank 1 exits with status 3
               while the others sleep
    noinit     every rank but the last registers; the last never does; all sleep
    sleep      register, print the pids of this task and of a grandchild, sleep
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def main(mode: str) -> int:
    rank, size = int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"])
    if mode == "allreduce":
        import torch
        import torch.distributed as dist

        from backends.horovod.task_service import notify_driver

        notify_driver(rank, size)  # until backends.horovod.init() lands
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=size)
        total = torch.full((3,), float(rank + 1))
        dist.all_reduce(total)
        local = os.environ["HOROVOD_LOCAL_RANK"]
        print(f"rank {rank} of {size} local {local} "
              f"sum {total.tolist()} cycle {os.environ.get('HOROVOD_CYCLE_TIME')} "
              f"fusion {os.environ.get('HOROVOD_FUSION_THRESHOLD')}")
        print(f"rank {rank} to stderr", file=sys.stderr)
        dist.destroy_process_group()
        return 0
    from backends.horovod.task_service import notify_driver

    if mode == "noinit" and rank == size - 1:
        time.sleep(60)
        return 0
    notify_driver(rank, size)
    if mode == "noinit":
        time.sleep(60)
        return 0
    child = subprocess.Popen(["sleep", "60"])
    print(f"up rank {rank} pid {os.getpid()} child {child.pid}", flush=True)
    if mode == "fail" and rank == 1:
        time.sleep(0.5)
        return 3
    time.sleep(60)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
