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

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType


def _task_service() -> ModuleType:
    """``backends.horovod.task_service`` loaded from its file, without the package (whose
    ``__init__`` imports torch): these tasks start in a fraction of a second, so a short start
    timeout tests the launcher, not the speed of ``import torch`` on a busy machine."""
    path = Path(__file__).resolve().parents[2] / "backends" / "horovod" / "task_service.py"
    spec = importlib.util.spec_from_file_location("_task_service", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(mode: str) -> int:
    rank, size = int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"])
    if mode == "allreduce":
        import torch

        import backends.horovod as hvd

        hvd.init()  # registers with horovodrun's driver
        total = hvd.allreduce(torch.full((3,), float(rank + 1)), name="x", op=hvd.Sum)
        settings = hvd.stats()
        print(f"rank {hvd.rank()} of {hvd.size()} local {hvd.local_rank()} "
              f"sum {total.tolist()} cycle {settings['cycle_time_ms']:g} "
              f"env fusion {os.environ.get('HOROVOD_FUSION_THRESHOLD')}")
        print(f"rank {rank} to stderr", file=sys.stderr)
        hvd.shutdown()
        return 0
    notify_driver = _task_service().notify_driver

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
