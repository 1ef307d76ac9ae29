"""Our DistributedDataParallel against PyTorch's: equal parameters after training, at worlds 1–4.

One launch of 4 ranks runs every case (:mod:`tests.backends.ddp_cases`): plain MLPs with many
small buckets and with the default caps, frozen parameters, tied weights, parameters unused on
some ranks or on all (``find_unused_parameters``), ``no_sync()`` gradient accumulation, Join
with uneven inputs, BatchNorm buffers (broadcast before every forward), and a traced run whose
bucket spans are checked.
"""

import pytest
import torch
import torch.distributed as dist

from backends.launch import spawn
from simulator.ddp import assign_buckets
from tests.backends.ddp_cases import FEATURES, WORLD, Case, run_cases

CASES = [Case(feature, world, seed=7 * world + i)
         for i, feature in enumerate(FEATURES) for world in range(1, WORLD + 1)
         if not (feature == "traced" and world == 1)]
CASES += [Case("default_caps", 3, seed=99, bucket_cap_mb=None)]


@pytest.fixture(scope="module")
def failures():
    per_rank = spawn(run_cases, WORLD, CASES, timeout=30, deadline=120)
    return [f for rank in per_rank for f in rank]


@pytest.mark.parametrize("feature", FEATURES)
def test_parameters_equal_pytorch_ddp_at_worlds_1_to_4(feature, failures):
    mine = [f for f in failures if f.startswith(f"{feature}(")]
    assert not mine, "\n".join(mine)


@pytest.mark.parametrize("sizes", [[4096] * 9, [400, 4000, 40, 2**20, 7, 2**21, 3, 5],
                                   [2**20 + 1] * 3, [1] * 50])
@pytest.mark.parametrize("caps", [(2**20, 2**20), (25 * 2**20, 2**20), (1000, 100), (64, 4096)])
def test_bucket_assignment_equals_pytorchs_rebuilt_buckets(sizes, caps):
    cap, first = caps
    tensors = [torch.zeros(n // 4 or 1) for n in sizes]
    nbytes = [t.numel() * 4 for t in tensors]
    # PyTorch's rebuild passes the tensors in the order their gradients arrived, with their
    # indices beside them: here reverse registration order
    expected, _ = dist._compute_bucket_assignment_by_size(
        tensors[::-1], [first, cap], [False] * len(tensors), list(reversed(range(len(tensors)))))
    assert assign_buckets(nbytes, cap, first) == [list(b) for b in expected]


def test_bucket_assignment_groups_dtypes_like_pytorch():
    tensors = [torch.zeros(300, dtype=d) for d in
               (torch.float32, torch.float64, torch.float32, torch.float64, torch.float32)]
    nbytes = [t.numel() * t.element_size() for t in tensors]
    expected, _ = dist._compute_bucket_assignment_by_size(
        tensors[::-1], [1000, 2000], [False] * 5, [4, 3, 2, 1, 0])
    got = assign_buckets(nbytes, 2000, 1000, [str(t.dtype) for t in tensors])
    assert sorted(got) == sorted(list(b) for b in expected)


def test_no_parameters_no_buckets():
    assert assign_buckets([], 1000, 100) == []
