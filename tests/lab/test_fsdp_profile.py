"""The FSDP twin's unit costs (:func:`lab.fsdp.profile_units`): profiled through our wrapper in
one process, then at ``world`` ranks less ``(1 − 1/world)`` of the local work that shrinks
with the world (:func:`lab.fsdp.at_world`) — exactly that, nothing else."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from lab.fsdp import at_world, profile_units
from lab.models import mlp
from lab.zero import unit_shapes

pytestmark = pytest.mark.timeout(120)


def _cost(forward_s, backward_s, copy_s, reduce_s, fg, bg):
    return {"numel": 1, "forward_s": forward_s, "backward_s": backward_s,
            "gather_copy_s": copy_s, "reduce_local_s": reduce_s,
            "forward_gathers": fg, "backward_gathers": bg}


COSTS = [_cost(10.0, 20.0, 1.0, 0.5, [0, 1], []), _cost(30.0, 40.0, 2.0, 0.25, [2], [0]),
         _cost(50.0, 60.0, 4.0, 0.125, [], [2, 1])]


def test_at_world_one_the_profile_is_the_step():
    assert at_world(COSTS, 1) == [(10.0, 20.0), (30.0, 40.0), (50.0, 60.0)]


@given(st.integers(2, 64))
def test_at_world_n_the_remote_share_of_each_spans_copies_and_reduce_goes(world):
    r = 1 - 1 / world
    want = [(10 - r * (1 + 2), 20 - r * 0.5), (30 - r * 4, 40 - r * (1 + 0.25)),
            (50.0, 60 - r * (4 + 2 + 0.125))]
    for got, expected in zip(at_world(COSTS, world), want, strict=True):
        assert got == pytest.approx(expected, rel=1e-12)


def test_profile_units_are_the_models_units_with_their_sizes():
    model = mlp((8, 16, 16, 4))
    units = profile_units(model, 3, 2, repeats=2)
    shapes = unit_shapes(model, 3)
    assert [(u.numel, u.output_bytes) for u in units] == [(u.numel, u.output_bytes)
                                                          for u in shapes]
    assert all(u.update_s > 0 for u in units)


def test_profile_units_needs_a_model_that_starts_with_a_linear():
    with pytest.raises(ValueError, match=r"nn\.Linear"):
        profile_units(nn.Sequential(nn.ReLU(), nn.Linear(4, 4)), 3, 2)
