"""MoE presets' parameter counts against the papers; memory per GPU falling with ep, cp and
FSDP as the formulas say; the all-to-all bytes against the MoE twin; FSDP's 3Ψ traffic."""

import pytest

from simulator.core.hardware import preset
from simulator.moe import exchange_bytes, routing_histogram
from simulator.moe_model import (
    PRESETS,
    all_to_all_bytes_per_layer,
    expert_parameters,
    parameters,
)
from simulator.tensor_parallel import Grid, MegatronConfig, chunks, memory_per_stage
from simulator.tensor_parallel import simulate_megatron as simulate

MIXTRAL = PRESETS["mixtral-8x7b"]


@pytest.mark.parametrize(("name", "total", "active"), [
    ("mixtral-8x7b", 46.7e9, 12.9e9),  # Jiang et al. 2024
    ("deepseek-v3", 671e9, 37e9),  # DeepSeek-AI 2024, main model without the MTP module
])
def test_presets_match_the_papers_parameter_counts_within_2_percent(name, total, active):
    # Not exact: the papers round to 3 digits, and DeepSeek-V3's 37B seems to leave out
    # what we count as active (both embeddings, 1.85B): ours is 37.55B.
    assert parameters(PRESETS[name]) == pytest.approx(total, rel=0.02)
    assert parameters(PRESETS[name], active=True) == pytest.approx(active, rel=0.02)


def _memory(d=8, cp=1, ep=1, fsdp=False):
    c = MegatronConfig(MIXTRAL, Grid(2, 2, d, cp, ep), 64, 1, fsdp=fsdp)
    return memory_per_stage(c, chunks(c, 1e15))[0]


def test_expert_parallelism_divides_the_experts_states_by_ep():
    experts_per_stage = 16 * MIXTRAL.experts * expert_parameters(MIXTRAL) // 2  # t = 2
    for ep in (2, 8):
        saved = _memory()["parameters"] - _memory(ep=ep)["parameters"]
        assert saved == pytest.approx(2 * experts_per_stage * (1 - 1 / ep), rel=1e-6)
    assert _memory(ep=8)["total"] < _memory(ep=2)["total"] < _memory()["total"]


def test_fsdp_divides_the_states_by_the_data_parallel_group():
    for part in ("parameters", "gradients", "optimizer_state"):
        assert _memory(fsdp=True)[part] == pytest.approx(_memory()[part] / 8)
    assert _memory(fsdp=True)["activations"] == _memory()["activations"]


def test_context_parallelism_halves_the_activations_at_cp_2():
    assert _memory(d=4, cp=2)["activations"] == pytest.approx(_memory()["activations"] / 2)
    assert _memory(d=4, cp=2)["parameters"] == _memory()["parameters"]


def test_all_to_all_bytes_match_the_moe_twin_for_one_layer():
    ep, tokens = 4, 1024
    counts, _ = routing_histogram(tokens, MIXTRAL.experts, MIXTRAL.top_k, 1.0, ep)
    out = exchange_bytes(counts, MIXTRAL.hidden, 2)
    sent = sum(out[0][j] for j in range(1, ep))  # four exchanges: dispatch, combine, ×2
    assert all_to_all_bytes_per_layer(MIXTRAL, tokens, ep) == pytest.approx(4 * sent)


def test_fsdp_synchronises_gradients_with_3_psi_instead_of_2_psi():
    grid = Grid(2, 1, 8, 1, 2)
    plain, sharded = (simulate(preset("h100", 16), MegatronConfig(MIXTRAL, grid, 16, 1,
                                                                    fsdp=z))
                      for z in (False, True))
    assert sharded.data_parallel_s[0] == pytest.approx(1.5 * plain.data_parallel_s[0])


def test_each_moe_layer_has_two_all_to_alls_and_each_layer_one_ring_pass_forward():
    ops = [k for c in chunks(MegatronConfig(MIXTRAL, Grid(2, 1, 4, 2, 8), 16, 1), 1e15)
           for k, _ in c.forward]
    assert ops.count("all_to_all") == 2 * 32 and ops.count("cp_ring") == 32


def test_a_dense_gpt_read_as_moe_keeps_its_parameter_count_to_half_a_percent():
    from simulator.moe_model import as_moe
    from simulator.transformer import parameters as dense_parameters
    from simulator.transformer import preset as dense_preset

    for name in ("gpt-1.7b", "gpt3-175b"):
        gpt = dense_preset(name)  # as_moe drops the biases and the position embedding
        assert parameters(as_moe(gpt)) == pytest.approx(dense_parameters(gpt), rel=0.005)
        assert parameters(gpt) == dense_parameters(gpt)
