"""Grading exercise 22.1: top-k routing with a capacity, against the lab's layer and the
simulator.

Run with ``make grade EX=22.1`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex22_1
tests/exercises`` (the reference answer).
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from backends.moe.layer import route
from simulator.moe import routing_histogram
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch22, pytest.mark.ex22_1]

TODO = ("route_tokens is not implemented yet: write it in exercises/ch22_capacity.py "
        "(EXERCISE 22.1: top k, capacity, first choices counted before second choices), then "
        "run `make grade EX=22.1` again")


def routed(logits, k, cf):
    return call_or_fail("ch22_capacity", "route_tokens", TODO, logits, k, cf)


def layer_routing(logits, k, cf):
    """backends.moe.route on a router that passes the logits through unchanged."""
    experts = logits.shape[1]
    router = nn.Linear(experts, experts, bias=False)
    with torch.no_grad():
        router.weight.copy_(torch.eye(experts))
        return route(logits, router, torch.zeros(experts), k, cf)


def test_first_choices_are_counted_before_second_choices():
    # 4 tokens, 2 experts, top-2, c_f = 0.5: C = ⌈0.5·4·2/2⌉ = 2 per expert. Tokens 0 and 1
    # prefer expert 0, tokens 2 and 3 expert 1: the four first choices fill both experts, so
    # every second choice is dropped (counting token by token would keep token 0's second).
    logits = torch.tensor([[2.0, 1.0], [2.0, 1.0], [1.0, 2.0], [1.0, 2.0]])
    expert, kept, counts = routed(logits, 2, 0.5)
    assert expert.tolist() == [[0, 1], [0, 1], [1, 0], [1, 0]], "the top 2, best first"
    assert kept.tolist() == [[True, False]] * 4, (
        "with C = 2 the first choices fill both experts: every second choice is dropped")
    assert counts.tolist() == [2, 2]


@given(tokens=st.integers(1, 40), experts=st.integers(2, 8), k=st.integers(1, 3),
       cf=st.sampled_from([0.25, 0.5, 1.0, 1.25, 2.0]), seed=st.integers(0, 2**16))
def test_equal_to_the_lab_layer_on_random_logits(tokens, experts, k, cf, seed):
    k = min(k, experts)
    logits = torch.randn(tokens, experts, generator=torch.Generator().manual_seed(seed))
    expert, kept, counts = routed(logits, k, cf)
    want = layer_routing(logits, k, cf)
    case = f"T={tokens}, E={experts}, k={k}, c_f={cf} (capacity {want.capacity})"
    assert torch.equal(torch.as_tensor(expert), want.expert), f"{case}: wrong top-k experts"
    assert torch.equal(torch.as_tensor(kept), want.kept), (
        f"{case}: {int((~want.kept).sum())} assignments should be dropped; you keep "
        f"{torch.as_tensor(kept).tolist()}, the layer {want.kept.tolist()}")
    assert torch.equal(torch.as_tensor(counts), want.counts()), f"{case}: wrong counts"


@pytest.mark.parametrize(("k", "cf"), [(1, 1.25), (1, 2.0), (2, 1.25)])
def test_switch_example_matches_the_simulator(k, cf):
    tokens, experts = 1024, 8
    hist, dropped = routing_histogram(tokens, experts, k, cf, 1, hot_fraction=0.3)
    # logits that realise the histogram's demand: 307 tokens choose expert 0 first, the rest
    # round robin; each expert is the second choice of T/E tokens (never their first)
    hot = round(0.3 * tokens)
    first = [0] * hot + [t % experts for t in range(tokens - hot)]
    quota = [tokens // experts] * experts
    logits = torch.zeros(tokens, experts)
    for t, e in enumerate(first):
        second = max((q, -s) for s, q in enumerate(quota) if s != e)
        quota[-second[1]] -= 1
        logits[t, e], logits[t, -second[1]] = 3.0, 2.0
    _, kept, counts = routed(logits, k, cf)
    assert int((~torch.as_tensor(kept)).sum()) == dropped, (
        f"k={k}, c_f={cf}: the simulator drops {dropped} assignments")
    assert torch.as_tensor(counts).tolist() == hist[0], (
        f"k={k}, c_f={cf}: the simulator's experts keep {hist[0]}")
