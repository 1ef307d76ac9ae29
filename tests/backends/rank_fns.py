"""Rank functions for the launcher tests (module level, so spawn can pickle them by name)."""

import os
import time

import torch
import torch.distributed as dist


def whoami(scale):
    return dist.get_rank() * scale, dist.get_world_size(), os.getpid()


def raise_on_rank_1():
    if dist.get_rank() == 1:
        raise ValueError("rank one is unhappy")
    t = torch.zeros(3)
    dist.all_reduce(t)  # the others wait here until rank 1's failure reaches them
    return 0


def exit_early_on_last_rank():
    if dist.get_rank() == dist.get_world_size() - 1:
        os._exit(3)
    t = torch.zeros(3)
    dist.all_reduce(t)
    return 0


def sleep_forever_on_rank_0():
    if dist.get_rank() == 0:
        time.sleep(3600)
    return 0


def pids():
    return os.getpid()


def sched_policies():
    """This rank's scheduling policy, and that of every thread the process group started
    (gloo's I/O loop among them), as Linux names them."""
    names = {os.SCHED_OTHER: "normal", os.SCHED_BATCH: "batch"}
    threads = {int(t) for t in os.listdir("/proc/self/task")}
    return (names.get(os.sched_getscheduler(0), "other"),
            sorted({names.get(os.sched_getscheduler(t), "other") for t in threads}))


def environment_seen(names):
    """The values this rank sees of the environment variables ``names``, and torch's
    intra-op thread count."""
    import torch

    return [os.environ.get(name) for name in names], torch.get_num_threads()
