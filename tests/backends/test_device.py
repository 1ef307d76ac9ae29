"""The backend chooses the device (:mod:`backends.device`): the CPU without a process group and
under gloo, the rank's GPU under NCCL; no real twin names the CPU itself."""

import ast
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn

from backends.device import (
    device,
    local_devices,
    on_device,
    peak_memory_bytes,
    reset_peak_memory,
    synchronize,
    synchronizer,
    to_device,
)
from backends.launch import spawn

BACKENDS = Path(__file__).resolve().parents[2] / "backends"

CPU_BY_NATURE = {
    "device.py": "the rule itself: the CPU when the backend is gloo or there is no group",
    "tf_distribute/values.py": "MirroredVariable.in_sync compares copies held on different "
                               "devices, so it brings them to one place, the host, to compare",
}
"""Modules under ``backends/`` that may name the CPU, and why. The parameter server's van is
CPU-side by nature too, but it never names the device: its tensors are made with the default
one."""


def test_device_is_the_cpu_without_a_process_group():
    assert not dist.is_initialized()
    assert device() == torch.device("cpu")
    assert peak_memory_bytes() is None  # the CPU allocator keeps no peak
    reset_peak_memory()
    synchronize()  # nothing to wait for
    assert synchronizer() is not torch.cuda.synchronize


def test_on_the_cpu_moving_to_the_device_keeps_the_very_same_tensors():
    x, y = torch.randn(3), torch.randn(2)
    moved = to_device({"a": [x, (y, 1)], "b": "text"})
    assert moved["a"][0] is x and moved["a"][1][0] is y and moved["a"][1][1] == 1
    assert moved["b"] == "text"
    net = nn.Linear(2, 2)
    weight = net.weight
    assert on_device(net) is net and net.weight is weight


@pytest.mark.skipif(torch.cuda.is_available(), reason="GPUs visible: DataParallel uses them")
def test_data_parallel_replicates_over_the_cpu_when_no_gpu_is_visible():
    assert local_devices() == [torch.device("cpu")]


def where_tensors_go() -> tuple[str, str, str]:
    """Rank function: the device, a collective twin's buffer's and a DDP bucket's."""
    from backends.collectives import twin_ranks
    from backends.ddp import DistributedDataParallel

    torch.manual_seed(0)
    ddp = DistributedDataParallel(nn.Linear(4, 2))
    return (str(device()), str(twin_ranks._zeros(4).device),
            str(ddp.reducer.buckets[0].buffer.device))


def test_device_is_the_cpu_under_gloo():
    for rank_devices in spawn(where_tensors_go, 2, backend="gloo"):
        assert rank_devices == ("cpu", "cpu", "cpu")


def _names_the_cpu(node: ast.AST) -> bool:
    """``x.cpu()``, or ``"cpu"`` / ``"cpu:N"`` passed to a call (``torch.device("cpu")``,
    ``device="cpu"``, ``.to("cpu")``)."""
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute) and node.func.attr == "cpu":
        return True
    return any(isinstance(a, ast.Constant) and isinstance(a.value, str)
               and (a.value == "cpu" or a.value.startswith("cpu:"))
               for a in [*node.args, *(k.value for k in node.keywords)])


def test_no_real_twin_names_the_cpu_outside_the_modules_that_are_cpu_by_nature():
    naming = {}
    for path in sorted(BACKENDS.rglob("*.py")):
        lines = [n.lineno for n in ast.walk(ast.parse(path.read_text())) if _names_the_cpu(n)]
        if lines:
            naming[path.relative_to(BACKENDS).as_posix()] = lines
    unexpected = {name: lines for name, lines in naming.items() if name not in CPU_BY_NATURE}
    assert not unexpected, f"use backends.device.device() instead of the CPU: {unexpected}"
    stale = sorted(set(CPU_BY_NATURE) - set(naming))
    assert not stale, f"allow-listed but no longer naming the CPU: {stale}"


def nccl_smoke() -> tuple[str, bool, bool]:
    """Rank function: our ring all-reduce and our DDP on the rank's GPU, each against
    PyTorch's."""
    from backends.collectives.all_reduce import ring_all_reduce
    from backends.ddp import DistributedDataParallel

    on = device()
    gen = torch.Generator().manual_seed(dist.get_rank())
    ours = torch.randint(-100, 100, (1000,), generator=gen).float().to(on)
    theirs = ours.clone()
    ring_all_reduce(ours)
    dist.all_reduce(theirs)
    same_sum = torch.equal(ours, theirs)
    torch.manual_seed(0)
    net = nn.Linear(8, 4)
    ddp = DistributedDataParallel(net, bucket_cap_mb=0.0001)
    x = torch.randn(6, 8, generator=gen)
    ddp(x).square().sum().backward()
    grads = [p.grad.clone() for p in ddp.parameters()]
    for g in [p.grad.clone() for p in ddp.parameters()]:
        dist.all_reduce(g)  # every rank's averaged gradient is the same: sum = world × it
        grads.append(g / dist.get_world_size())
    half = len(grads) // 2
    same_grads = all(torch.allclose(a, b) for a, b in zip(grads[:half], grads[half:],
                                                           strict=True))
    return str(net.weight.device), same_sum, same_grads


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="needs 2 CUDA GPUs")
def test_under_nccl_a_collective_twin_and_ddp_run_on_each_ranks_gpu():
    for rank, (where, same_sum, same_grads) in enumerate(spawn(nccl_smoke, 2, backend="nccl")):
        assert where == f"cuda:{rank}"
        assert same_sum and same_grads
