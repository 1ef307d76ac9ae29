"""The pipeline twin's parts that need no process group: micro-batches, partition, metadata,
the saved-tensor memory count and the one-process profiler."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backends.pipeline.comm import TensorMeta, decode, encode
from backends.pipeline.memory import ActivationCounter, saved_bytes
from backends.pipeline.microbatch import loss_weights, merge, micro_batch_sizes, split
from backends.pipeline.models import block, mlp
from backends.pipeline.partition import layer_ranges, owned_stages, partition
from backends.pipeline.profiler import profile_layers


@given(st.integers(1, 200), st.integers(1, 50))
def test_micro_batches_cover_the_batch_and_differ_by_at_most_one(batch: int, m: int) -> None:
    if batch < m:
        with pytest.raises(ValueError, match="every micro-batch needs at least one example"):
            micro_batch_sizes(batch, m)
        return
    sizes = micro_batch_sizes(batch, m)
    assert len(sizes) == m and sum(sizes) == batch and max(sizes) - min(sizes) <= 1
    assert sum(loss_weights(batch, m)) == pytest.approx(1.0)
    x = torch.arange(batch * 2).reshape(batch, 2)
    assert [len(p) for p in split(x, m)] == sizes
    assert torch.equal(merge(split(x, m)), x)


def test_partition_cuts_consecutive_layers_and_shares_them() -> None:
    model = mlp(5, 4, 8)
    stages = partition(model, [2, 1, 2])
    assert [len(s) for s in stages] == [2, 1, 2]
    assert stages[1][0] is model[2]
    assert [list(r) for r in layer_ranges([2, 1, 2])] == [[0, 1], [2], [3, 4]]
    assert owned_stages(1, 3, chunks=2) == [1, 4]


def test_metadata_round_trips() -> None:
    metas = [TensorMeta((3, 4), torch.float32), TensorMeta((2,), torch.int64),
             TensorMeta((1, 2, 3, 4, 5, 6), torch.float64)]
    assert decode(encode(metas)) == metas
    assert metas[0].nbytes == 48
    with pytest.raises(ValueError, match="at most 6 dimensions"):
        encode([TensorMeta((1,) * 7, torch.float32)])


def test_activation_counter_counts_each_saved_tensor_once_and_no_parameters() -> None:
    width, hidden, rows = 4, 16, 5
    layer = block(width, hidden)
    # Linear saves its input, GELU its input (the hidden pre-activation), Linear its input
    # (the GELU output): (width + 2·hidden) floats per row; weights are not activations
    expected = (width + 2 * hidden) * rows * 4
    assert saved_bytes(layer, torch.randn(rows, width)) == expected
    counter = ActivationCounter(layer.parameters())
    x = torch.randn(rows, width, requires_grad=True)
    with counter.count():
        y = layer(x)
    assert counter.live_bytes == expected
    y.sum().backward()
    del y
    assert counter.live_bytes == 0 and counter.peak_bytes == expected


def test_a_micro_batch_view_counts_its_own_bytes_not_the_whole_batch() -> None:
    layer = block(4, 8)
    batch = torch.randn(12, 4)
    assert saved_bytes(layer, split(batch, 3)[0], requires_grad=False) == (4 + 16) * 4 * 4


def test_profile_measures_every_layer_on_one_process() -> None:
    model = mlp(3, 8, 32)
    before = [p.detach().clone() for p in model.parameters()]
    profile = profile_layers(model, torch.randn(6, 8), repeats=3, warmup=1)
    assert [p.name for p in profile] == ["0", "1", "2"]
    for layer in profile:
        assert layer.forward_s > 0 and layer.backward_s > 0
        assert layer.activation_bytes == (8 + 2 * 32) * 6 * 4
        assert layer.output_bytes == 8 * 6 * 4
        assert layer.parameter_bytes == (8 * 32 + 32 + 32 * 8 + 8) * 4
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), before, strict=True))
    assert all(p.grad is None for p in model.parameters())
