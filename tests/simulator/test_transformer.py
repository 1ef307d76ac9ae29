"""The GPT workload model against the numbers the Megatron papers print."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.transformer import (
    GPT,
    PRESETS,
    activation_bytes_per_layer,
    attention_elementwise_bytes,
    iteration_flops,
    iteration_flops_formula,
    layer_backward_flops,
    layer_forward_flops,
    mlp_elementwise_bytes,
    parameters,
    parameters_formula,
    pipeline_elements,
    preset,
    recompute_flops,
    tensor_parallel_elements_per_layer,
    training_days,
)

# Narayanan et al. SC 2021, Table 1: parameters (billions) of the weak-scaling models.
TABLE_1_BILLIONS = {"gpt-1.7b": 1.7, "gpt-3.6b": 3.6, "gpt-7.5b": 7.5, "gpt-18b": 18.4,
                    "gpt-39b": 39.1, "gpt-76b": 76.1, "gpt-145b": 145.6, "gpt-310b": 310.1,
                    "gpt-530b": 529.6, "gpt-1t": 1008.0}

shapes = st.builds(lambda n, a, k, s, v: GPT(n, a * k, a, s, v), st.integers(1, 128),
                   st.integers(1, 128), st.integers(1, 256), st.integers(1, 4096),
                   st.integers(1, 100_000))


def test_gpt3_has_175_billion_parameters():
    assert parameters(preset("gpt3-175b")) / 1e9 == pytest.approx(175, rel=0.005)


@pytest.mark.parametrize(("name", "billions"), TABLE_1_BILLIONS.items())
def test_parameters_match_the_papers_table_1(name, billions):
    assert parameters(PRESETS[name]) / 1e9 == pytest.approx(billions, abs=0.051)


@given(shapes)
def test_the_layer_by_layer_count_is_the_papers_closed_form(model):
    assert parameters(model) == pytest.approx(parameters_formula(model), rel=1e-12)


@given(shapes, st.integers(1, 4096))
def test_iteration_flops_with_recomputation_are_the_papers_96_bsl_h2_formula(model, batch):
    assert iteration_flops(model, batch, "full") == pytest.approx(
        iteration_flops_formula(model, batch), rel=1e-12)


def test_backward_is_twice_forward_and_recomputation_adds_one_forward():
    m = preset("gpt-1.7b")
    assert layer_backward_flops(m, 4) == 2 * layer_forward_flops(m, 4)
    assert recompute_flops(m, 4, "full") == layer_forward_flops(m, 4)
    assert recompute_flops(m, 4, "none") == 0
    assert 0 < recompute_flops(m, 4, "selective") < layer_forward_flops(m, 4)
    # model FLOPs (no recomputation) are 3/4 of the layers' hardware FLOPs with it
    layers = m.layers * layer_forward_flops(m, 8)
    assert iteration_flops(m, 8, "full") - iteration_flops(m, 8, "none") == pytest.approx(layers)


@pytest.mark.parametrize(("tokens", "params", "gpus", "tflops", "days"), [
    (300e9, 175e9, 1024, 140e12, 34),   # §5.1: GPT-3 on 1024 A100s, ~34 days
    (450e9, 1e12, 3072, 163e12, 84),    # §5.1: the 1T model on 3072 A100s, ~84 days
])
def test_training_time_estimates_of_narayanan_et_al(tokens, params, gpus, tflops, days):
    assert training_days(tokens, params, gpus, tflops) == pytest.approx(days, rel=0.03)


def test_korthikanti_gpt3_attention_term_is_80_against_34():
    m = preset("gpt3-175b")
    assert 5 * m.heads * m.seq / m.hidden == 80  # "5as/h = 80" for GPT-3 (§4.1)
    sbh = m.seq * m.hidden
    assert activation_bytes_per_layer(m, 1) == sbh * (34 + 80)


@pytest.mark.parametrize("name", ["gpt3-175b", "gpt-530b", "gpt-1t"])
def test_sequence_parallel_and_selective_recompute_cut_activations_about_5x(name):
    # Korthikanti et al. abstract: the two together reduce activation memory by 5×
    m = preset(name)
    baseline = activation_bytes_per_layer(m, 1, 8)
    both = activation_bytes_per_layer(m, 1, 8, sequence_parallel=True, recompute="selective")
    assert 4.5 < baseline / both < 6


@given(shapes, st.integers(1, 8), st.sampled_from([1, 2, 4, 8]))
def test_korthikanti_table_2_rows(model, b, t):
    s, h, a = model.seq, model.hidden, model.heads
    sbh = s * b * h
    act = activation_bytes_per_layer
    assert act(model, b, t) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert act(model, b, t, True) == pytest.approx(sbh * (34 / t + 5 * a * s / (h * t)))
    assert act(model, b, t, False, "selective") == pytest.approx(sbh * (10 + 24 / t))
    assert act(model, b, t, True, "selective") == pytest.approx(sbh * 34 / t)
    assert act(model, b, t, False, "full") == 2 * sbh
    assert act(model, b, t, True) <= act(model, b, t) + 1e-9
    if t == 1:  # no parallelism: sbh(34 + 5as/h), and sequence parallelism changes nothing
        assert act(model, b, 1) == pytest.approx(sbh * (34 + 5 * a * s / h))
        assert act(model, b, 1, True) == pytest.approx(act(model, b, 1))


@given(shapes, st.integers(1, 8), st.integers(1, 16))
def test_tensor_parallel_sends_8bsh_t_minus_1_over_t_per_layer(model, b, t):
    bsh = b * model.seq * model.hidden
    assert tensor_parallel_elements_per_layer(model, b, t) == pytest.approx(
        8 * bsh * (t - 1) / t)
    assert tensor_parallel_elements_per_layer(model, b, t, "full") == pytest.approx(
        12 * bsh * (t - 1) / t)
    assert pipeline_elements(model, b, t) == pytest.approx(bsh / t)
    assert pipeline_elements(model, b, t, scatter_gather=False) == bsh


@pytest.mark.parametrize("bad", [dict(layers=0), dict(hidden=100, heads=3), dict(vocab=-1)])
def test_bad_shapes_raise(bad):
    shape = dict(layers=2, hidden=64, heads=4, seq=16, vocab=100) | bad
    with pytest.raises(ValueError):
        GPT(**shape)


def test_unknown_preset_and_recompute_mode_raise():
    with pytest.raises(ValueError, match="unknown model"):
        preset("gpt-5")
    with pytest.raises(ValueError, match="recompute"):
        activation_bytes_per_layer(preset("gpt-1.7b"), 1, 1, recompute="half")  # type: ignore


@given(shapes, st.integers(1, 8), st.sampled_from([1, 2, 4, 8]))
def test_elementwise_bytes_split_with_sequence_parallelism(model, b, t):
    sbh = model.seq * b * model.hidden
    attention = attention_elementwise_bytes(model, b, t)
    assert attention == pytest.approx(11 * sbh + 9 * model.heads * model.seq ** 2 * b / t)
    assert mlp_elementwise_bytes(model, b, t) == pytest.approx(11 * sbh + 16 * sbh / t)
    # sequence parallelism divides the replicated layer-norm and dropout traffic by t
    assert attention - attention_elementwise_bytes(model, b, t, True) == pytest.approx(
        11 * sbh * (1 - 1 / t))
