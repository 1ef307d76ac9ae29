"""Grading exercise 12.1: the bytes of one layer's tensor parallelism, against the workload
model and against the bytes a simulated tensor-parallel run puts on NVLink.

Run with ``make grade CH=12`` (your answer) or ``DISTML_IMPL=solutions pytest -m ch12
tests/exercises`` (the reference answer).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core.hardware import Cluster
from simulator.tensor_parallel import Grid, MegatronConfig, simulate_megatron_full
from simulator.transformer import GPT, tensor_parallel_elements_per_layer
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch12, pytest.mark.ex12_1]

TODO = ("tensor_parallel_bytes is not implemented yet: write it in "
        "exercises/ch12_tensor_parallel_bytes.py (EXERCISE 12.1), then run `make grade CH=12`")


def sent(*args):
    return call_or_fail("ch12_tensor_parallel_bytes", "tensor_parallel_bytes", TODO, *args)


def test_gpt3_layer_on_8_gpus():
    got = sent(1, 2048, 12288, 8, 2, False)
    assert got == pytest.approx(8 * 2048 * 12288 * 7 / 8 * 2), (
        f"GPT-3's layer, b = 1, t = 8, fp16: each GPU sends 8·b·s·h·(t−1)/t elements "
        f"≈ 352 MB; you said {got / 1e6:.1f} MB")


@given(b=st.integers(1, 16), s=st.integers(1, 4096), h=st.integers(1, 16384),
       t=st.integers(1, 64), itemsize=st.sampled_from([2, 4]), recompute=st.booleans())
def test_every_shape_equals_the_workload_model(b, s, h, t, itemsize, recompute):
    model = GPT(1, h, 1, s, 1)
    want = itemsize * tensor_parallel_elements_per_layer(model, b, t,
                                                         "full" if recompute else "none")
    assert sent(b, s, h, t, itemsize, recompute) == pytest.approx(want), (
        f"b={b}, s={s}, h={h}, t={t}, itemsize={itemsize}, recompute={recompute}")


@pytest.mark.parametrize(("t", "recompute"), [(2, False), (4, True), (3, False)])
def test_equals_the_bytes_a_simulated_run_puts_on_nvlink(t, recompute):
    # one node, one stage, no data parallelism: rank 0's NVLink port carries only its
    # tensor group's all-reduces — per layer, plus the embedding's and the output layer's
    layers, m, b = 4, 2, 1
    model = GPT(layers, 64 * t, t, 32, 100)
    config = MegatronConfig(model, Grid(t, 1, 1), m * b, b,
                            recompute="full" if recompute else "none")
    sim = simulate_megatron_full(Cluster.dgx(t), config)
    on_wire = sim.bytes_per_channel[(0, "node0")]
    bsh = 2 * b * model.seq * model.hidden
    edges = 2 * (2 * (t - 1) / t * bsh)  # embedding and output layer: one all-reduce each
    mine = sent(b, model.seq, model.hidden, t, 2, recompute)
    assert m * (layers * mine + edges) == pytest.approx(on_wire), (
        f"t = {t}: the simulated GPU sent {on_wire} B for {m} micro-batches of {layers} "
        f"layers; your count gives {m * (layers * mine + edges)} B")
