"""LayerProfile: validation, defaults and splitting into stages."""

import pytest

from simulator.pipeline.profile import LayerProfile, stage_profiles, uniform_profile


def test_output_bytes_default_to_the_activation_bytes():
    layer = LayerProfile("fc", 1e-3, 2e-3, 4096, 100)
    assert layer.out_bytes == 4096
    assert layer.time_s == pytest.approx(3e-3)
    assert LayerProfile("fc", 1e-3, 2e-3, 4096, 100, output_bytes=512).out_bytes == 512


def test_stage_profiles_split_contiguously_by_balance():
    profile = uniform_profile(5, 1.0, 2.0)
    stages = stage_profiles(profile, [2, 3])
    assert [[layer.name for layer in s] for s in stages] == [["0", "1"], ["2", "3", "4"]]


@pytest.mark.parametrize("call, words", [
    (lambda: LayerProfile("x", -1.0, 0.0, 0, 0), "forward_s must be ≥ 0"),
    (lambda: LayerProfile("x", 0.0, 0.0, 0, 0, output_bytes=-2), "output_bytes"),
    (lambda: uniform_profile(0, 1.0, 1.0), "at least one layer"),
    (lambda: stage_profiles(uniform_profile(3, 1, 1), [1, 1]), "sums to 2 layers"),
    (lambda: stage_profiles(uniform_profile(3, 1, 1), [3, 0]), "at least one layer"),
])
def test_bad_profiles_get_a_clear_error(call, words):
    with pytest.raises(ValueError, match=words):
        call()
