"""The GEMM time model: roofline, tile and wave quantisation, and its use in Megatron's chunks."""

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.core.gemm import Gemm, GemmModel
from simulator.core.hardware import A100_80GB, GEMM_MODELS, H100_80GB, Device, preset
from simulator.tensor_parallel import Grid, MegatronConfig, chunks, matmul_model, simulate_megatron
from simulator.transformer import (
    GPT,
    attention_forward_flops,
    attention_gemms,
    logit_forward_flops,
    logit_gemm,
    mlp_forward_flops,
    mlp_gemms,
)
from simulator.transformer import preset as model_preset

A100 = replace(GEMM_MODELS[A100_80GB], achievable_fraction=1.0)
"""The A100's tiles and waves with its kernels at full peak: the quantisation tests' model (the
guide's examples count tiles and waves only)."""
SHAPES = st.integers(1, 20000)


def test_presets_have_the_data_sheets_sm_counts():
    assert GEMM_MODELS[A100_80GB].sms == 108
    assert GEMM_MODELS[H100_80GB].sms == 132
    assert GEMM_MODELS[A100_80GB].peak_flops_per_s == A100_80GB.flops_per_s


@pytest.mark.parametrize("device,mamf_tflops,g", [
    (A100_80GB, 267.9, Gemm(6912, 16384, 2048)),  # the A100's best MAMF shape: 32 whole waves
    (H100_80GB, 792.1, Gemm(256 * 12, 128 * 11 * 4, 8192)),  # 4 whole waves of 132 tiles
])
def test_a_gemm_of_whole_waves_runs_at_the_measured_mamf(device, mamf_tflops, g):
    model = GEMM_MODELS[device]
    assert model.tiles(g) == model.waves(g) * model.sms  # no quantisation left
    assert g.flops / model.seconds(g) == pytest.approx(mamf_tflops * 1e12)


def test_a_gemm_of_whole_waves_of_whole_tiles_runs_at_peak():
    g = Gemm(256 * 12, 128 * 9, 4096)  # 108 tiles: one full wave
    assert A100.waves(g) == 1
    assert A100.seconds(g) == pytest.approx(g.flops / A100.peak_flops_per_s)


def test_one_row_past_a_tile_costs_a_row_of_tiles():
    g, over = Gemm(256 * 12, 128 * 9, 4096), Gemm(256 * 12 + 1, 128 * 9, 4096)
    assert A100.tiles(over) == A100.tiles(g) + 9
    assert A100.waves(over) == 2
    assert A100.seconds(over) == pytest.approx(2 * A100.seconds(g))


def test_the_guides_1792_square_example_fills_98_of_108_sms():
    g = Gemm(1792, 1792, 4096)  # 7 × 14 tiles of 256×128
    assert A100.tiles(g) == 98 and A100.waves(g) == 1
    assert A100.efficiency(g) == pytest.approx(98 / 108)


def test_a_small_inner_dimension_is_memory_bound():
    scores = Gemm(2048, 2048, 64, batch=96)  # attention's QKᵀ, head size 64
    assert A100.memory_s(scores, 2) > A100.compute_s(scores)
    assert A100.seconds(scores) == pytest.approx(scores.nbytes(2) / A100.mem_bandwidth_Bps)


@given(SHAPES, SHAPES, SHAPES, st.integers(1, 8))
def test_never_faster_than_peak_or_bandwidth(m, n, k, batch):
    g = Gemm(m, n, k, batch)
    s = A100.seconds(g)
    assert s >= g.flops / A100.peak_flops_per_s * (1 - 1e-12)
    assert s >= g.nbytes(2) / A100.mem_bandwidth_Bps * (1 - 1e-12)
    assert A100.seconds(Gemm(m + 1, n, k, batch)) >= s


@given(SHAPES, SHAPES, SHAPES)
def test_backward_is_two_gemms_of_twice_the_flops(m, n, k):
    g = Gemm(m, n, k)
    assert sum(d.flops for d in g.backward()) == 2 * g.flops


def test_a_lower_achievable_fraction_slows_compute_bound_gemms_in_proportion():
    g = Gemm(8192, 8192, 8192)
    slow = GemmModel(A100.peak_flops_per_s, A100.mem_bandwidth_Bps, 108, 256, 128, 0.8)
    assert slow.seconds(g) == pytest.approx(A100.seconds(g) / 0.8)


def test_bad_models_and_shapes_raise():
    with pytest.raises(ValueError, match="fraction"):
        GemmModel(1e12, 1e12, 1, achievable_fraction=0)
    with pytest.raises(ValueError, match="at least 1"):
        Gemm(0, 1, 1)


@pytest.mark.parametrize("t", [1, 2, 8])
def test_a_layers_gemm_shapes_add_up_to_narayanans_flops(t):
    model, b = model_preset("gpt-18b"), 2
    assert sum(g.flops for g in attention_gemms(model, b, t)) == pytest.approx(
        attention_forward_flops(model, b) / t)
    assert sum(g.flops for g in mlp_gemms(model, b, t)) == pytest.approx(
        mlp_forward_flops(model, b) / t)
    assert logit_gemm(model, b, t).flops == pytest.approx(logit_forward_flops(model, b) / t)


def test_the_default_prices_gemms_by_shape_and_the_override_at_a_flat_fraction():
    device = A100_80GB
    model = MegatronConfig(model_preset("gpt-1.7b"), Grid(1, 1, 1), 8, 8)
    flat = MegatronConfig(model_preset("gpt-1.7b"), Grid(1, 1, 1), 8, 8, matmul_efficiency=0.5)
    assert matmul_model(model, device) == (device.flops_per_s, GEMM_MODELS[device])
    assert matmul_model(flat, device) == (device.flops_per_s * 0.5, None)
    unknown = Device("custom", 1e14, 1e12, 80e9)
    assert matmul_model(model, unknown) == (1e14, None)


def test_the_gemm_model_is_slower_than_peak_and_faster_than_half_of_it():
    cluster = preset("a100", 8)
    config = MegatronConfig(model_preset("gpt-1.7b"), Grid(1, 1, 8), 64, 8)
    default = simulate_megatron(cluster, config).iteration_time_s
    peak = simulate_megatron(cluster, MegatronConfig(
        config.model, config.grid, 64, 8, matmul_efficiency=1.0)).iteration_time_s
    half = simulate_megatron(cluster, MegatronConfig(
        config.model, config.grid, 64, 8, matmul_efficiency=0.5)).iteration_time_s
    assert peak < default < half


def test_tiny_layers_lose_most_of_peak_to_quantisation():
    small = GPT(2, 256, 8, 128, 1000)  # 128 tokens × 768: 3 tiles on 108 SMs
    config = MegatronConfig(small, Grid(1, 1, 1), 1, 1, recompute="none")
    flops_per_s, gemm = matmul_model(config, A100_80GB)
    (shaped,) = chunks(config, flops_per_s, math.inf, gemm)
    (flat,) = chunks(config, flops_per_s)
    assert sum(v for _, v in shaped.forward) > 10 * sum(v for _, v in flat.forward)
