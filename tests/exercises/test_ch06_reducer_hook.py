"""Grading exercise 6.1: the gradient-ready hook and the in-order bucket launch.

Run with ``make grade CH=06`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch06
tests/exercises`` (the reference answer).
"""

import pytest
import torch
import torch.distributed as dist
from hypothesis import given
from hypothesis import strategies as st

from backends.launch import spawn
from exercises import load
from simulator.core import Cluster, Device, Link, Topology
from simulator.ddp import Layer, Workload, assign_buckets, predict_step

pytestmark = [pytest.mark.ch06, pytest.mark.ex06_1]

TODO = ("HookReducer.mark_ready is not implemented yet: write it in "
        "exercises/ch06_reducer_hook.py (EXERCISE 6.1), then run `make grade CH=06` again")


class Recorder:
    """A fake all-reduce: remembers each launched buffer's contents and returns a work."""

    def __init__(self):
        self.seen = []

    def __call__(self, buffer):
        self.seen.append(buffer.clone())
        return len(self.seen) - 1


def reducer(buckets, shapes, world, all_reduce):
    return load("ch06_reducer_hook").HookReducer(buckets, shapes, world, all_reduce)


def mark(red, i, grad):
    try:
        red.mark_ready(i, grad)
    except NotImplementedError:
        pytest.fail(TODO, pytrace=False)


@given(numels=st.lists(st.integers(1, 50), min_size=1, max_size=12),
       cap=st.integers(4, 400), world=st.integers(1, 8), data=st.data())
def test_buckets_launch_once_in_order_as_soon_as_complete(numels, cap, world, data):
    buckets = assign_buckets([4 * n for n in numels], cap, cap)
    shapes = [torch.Size([n]) for n in numels]
    fake = Recorder()
    red = reducer(buckets, shapes, world, fake)
    order = data.draw(st.permutations(range(len(numels))), label="gradient arrival order")
    grads = {i: torch.randn(numels[i]) for i in order}
    done = set()
    for i in order:
        mark(red, i, grads[i])
        done.add(i)
        complete = 0  # buckets 0 … complete−1 all complete: exactly those are launched
        while complete < len(buckets) and set(buckets[complete]) <= done:
            complete += 1
        assert red.launched == list(range(complete)), (
            f"after gradients {sorted(done)} buckets {buckets}: launched {red.launched}, "
            f"expected {list(range(complete))}")
    assert red.works == list(range(len(buckets)))
    for b, members in enumerate(buckets):
        expected = torch.cat([grads[i] / world for i in members])
        assert torch.allclose(fake.seen[b], expected), f"bucket {b} held the wrong values"


def test_a_backward_launches_buckets_in_the_order_the_simulator_makes_them_ready():
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(6)])
    params = list(net.parameters())
    sizes = [p.numel() * 4 for p in params]
    buckets = assign_buckets(sizes, 5000, 5000)
    fake = Recorder()
    red = reducer(buckets, [p.shape for p in params], 1, fake)
    launched_after = {}
    for i, p in enumerate(params):
        def hook(param, i=i):
            mark(red, i, param.grad)
            launched_after[i] = list(red.launched)
        p.register_post_accumulate_grad_hook(hook)
    net(torch.randn(3, 32)).sum().backward()
    assert red.launched == list(range(len(buckets)))
    # the simulator's "ready" spans for the same model, layer by layer in reverse
    layers = tuple(Layer(f"fc{k}", (sizes[2 * k], sizes[2 * k + 1]), 1e-3, 1e-3)
                   for k in range(6))
    device = Device("cpu", 1e12, 1e12, 1e12)
    sim = predict_step(Cluster.homogeneous("c", device, Topology.fully_connected(
        2, Link(1e-6, 1e9))), Workload(layers), 5000, 5000)
    sim_order = [int(s.name.split()[1]) for s in sorted(sim.trace, key=lambda s: s.start)
                 if s.kind == "ready" and s.rank == 0]
    real_order = []
    for i in sorted(launched_after, key=lambda i: -i):  # backward: last parameter first
        real_order += [b for b in launched_after[i] if b not in real_order]
    assert real_order == sim_order


def ranks_average(seed):
    """Rank function: HookReducer with dist.all_reduce vs PyTorch's DDP, same model and data."""
    import copy

    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.Tanh(), torch.nn.Linear(24, 8))
    ref = DistributedDataParallel(copy.deepcopy(net))
    params = list(net.parameters())
    buckets = assign_buckets([p.numel() * 4 for p in params], 600, 600)
    red = load("ch06_reducer_hook").HookReducer(
        buckets, [p.shape for p in params], dist.get_world_size(),
        lambda buf: dist.all_reduce(buf, async_op=True))
    for i, p in enumerate(params):
        p.register_post_accumulate_grad_hook(lambda param, i=i: red.mark_ready(i, param.grad))
    x = torch.randn(5, 16, generator=torch.Generator().manual_seed(dist.get_rank()))
    net(x).square().sum().backward()
    ref(x).square().sum().backward()
    for work in red.works:
        work.wait()
    return [bool(torch.allclose(red.views[i], q.grad, atol=1e-6))
            for i, q in enumerate(ref.module.parameters())]


def test_on_two_processes_the_averages_equal_pytorch_ddps_gradients():
    mark(reducer([[0]], [torch.Size([1])], 1, Recorder()), 0, torch.zeros(1))  # stub check
    per_rank = spawn(ranks_average, 2, 3, timeout=30, deadline=60)
    assert all(all(r) for r in per_rank), f"gradients equal to PyTorch DDP's: {per_rank}"
