"""Grading exercise 4.1: scatter cuts a batch as torch.chunk does, and DataParallel works on it.

Run with ``make grade CH=04`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch04
tests/exercises`` (the reference answer).
"""

import copy
from contextlib import contextmanager

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from backends.data_parallel import gather, parallel_apply, replicate
from simulator.data_parallel import chunk_sizes
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch04, pytest.mark.ex04_1]

TODO = ("scatter is not implemented yet: write it in exercises/ch04_scatter.py (EXERCISE 4.1: "
        "⌈n/k⌉ rows per chunk, the last one shorter), then run `make grade CH=04` again")
SPLITTERS = [(torch, "chunk"), (torch, "split"), (torch, "tensor_split"),
             (torch.Tensor, "chunk"), (torch.Tensor, "split"), (torch.Tensor, "tensor_split")]


@contextmanager
def no_builtin_split(monkeypatch):
    with monkeypatch.context() as m:
        for owner, name in SPLITTERS:
            def refuse(*args, _name=name, **kwargs):
                raise AssertionError(f"scatter called {_name}: cut the chunks yourself")
            m.setattr(owner, name, refuse)
        yield


def student_scatter(monkeypatch, tensor, parts, dim=0):
    with no_builtin_split(monkeypatch):
        return call_or_fail("ch04_scatter", "scatter", TODO, tensor, parts, dim)


@given(rows=st.integers(1, 40), parts=st.integers(1, 9), width=st.integers(1, 3),
       dim=st.sampled_from([0, 1, -1]))
def test_chunks_equal_torch_chunk(rows, parts, width, dim):
    with pytest.MonkeyPatch.context() as monkeypatch:
        shape = (rows, width) if dim == 0 else (width, rows)
        x = torch.arange(rows * width, dtype=torch.float32).reshape(shape)
        expected = x.chunk(parts, dim)
        got = student_scatter(monkeypatch, x, parts, dim)
    assert len(got) == len(expected), (
        f"{rows} rows into {parts} parts: torch.chunk makes {len(expected)} chunks, "
        f"you made {len(got)}")
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
        assert g.untyped_storage().data_ptr() == x.untyped_storage().data_ptr(), (
            "a chunk is a copy: return views (tensor.narrow)")


@pytest.mark.parametrize("rows, parts", [(8, 3), (5, 4), (2, 4), (1, 1), (100, 7)])
def test_chunk_sizes_are_the_simulated_twins(rows, parts, monkeypatch):
    got = student_scatter(monkeypatch, torch.zeros(rows, 2), parts)
    assert [len(c) for c in got] == chunk_sizes(rows, parts)


@pytest.mark.parametrize("rows, parts", [(0, 2), (3, 0)])
def test_bad_input_raises_value_error(rows, parts, monkeypatch):
    with pytest.raises(ValueError):
        student_scatter(monkeypatch, torch.zeros(rows, 2), parts)


@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
def test_data_parallel_on_your_scatter_matches_one_device(replicas, monkeypatch):
    torch.manual_seed(replicas)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
    reference = copy.deepcopy(model)
    x, y = torch.randn(7, 5), torch.randint(0, 3, (7,))
    chunks = student_scatter(monkeypatch, x, replicas)
    devices = ["cpu"] * len(chunks)
    inputs = [(c if i == 0 else c.clone(),) for i, c in enumerate(chunks)]  # the copies
    outputs = parallel_apply(replicate(model, devices), inputs, devices)
    nn.functional.cross_entropy(gather(outputs, "cpu"), y).backward()
    nn.functional.cross_entropy(reference(x), y).backward()
    for p, r in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, r.grad)
