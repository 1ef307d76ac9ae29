"""Grading exercise 22.3: the auxiliary load-balancing loss, against the lab's layer and the
textbook's bounds.

Run with ``make grade EX=22.3`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex22_3
tests/exercises`` (the reference answer).
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from backends.moe.layer import route
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch22, pytest.mark.ex22_3]

TODO = ("load_balancing_loss is not implemented yet: write it in exercises/ch22_aux_loss.py "
        "(EXERCISE 22.3: N · Σ f_i · P_i), then run `make grade EX=22.3` again")


def loss(probs, expert):
    return call_or_fail("ch22_aux_loss", "load_balancing_loss", TODO, probs, expert)


@given(tokens=st.integers(1, 48), experts=st.integers(2, 8), k=st.integers(1, 3),
       seed=st.integers(0, 2**16))
def test_value_and_gradient_equal_the_lab_layer(tokens, experts, k, seed):
    k = min(k, experts)
    gen = torch.Generator().manual_seed(seed)
    logits = (2 * torch.randn(tokens, experts, generator=gen, dtype=torch.float64))
    router = nn.Linear(experts, experts, bias=False).double()
    with torch.no_grad():
        router.weight.copy_(torch.eye(experts))
    mine_in = logits.clone().requires_grad_()
    theirs_in = logits.clone().requires_grad_()
    want = route(theirs_in, router, torch.zeros(experts, dtype=torch.float64), k, 1.0)
    probs = torch.softmax(mine_in, dim=-1)
    got = loss(probs, want.expert.clone())
    case = f"T={tokens}, N={experts}, k={k}"
    assert float(got) == pytest.approx(float(want.aux_loss), rel=1e-9), (
        f"{case}: the layer's loss is {float(want.aux_loss):.6f}, yours {float(got):.6f}")
    got.backward()
    want.aux_loss.backward()
    assert mine_in.grad is not None, f"{case}: your loss has no gradient to the probabilities"
    assert torch.allclose(mine_in.grad, theirs_in.grad, atol=1e-12), (
        f"{case}: the gradient to the router logits differs from the layer's (is f, a count, "
        "kept out of the graph?)")


@pytest.mark.parametrize("experts", [2, 4, 8, 64])
def test_one_at_uniform_routing_and_n_at_collapse(experts):
    tokens = 4 * experts
    uniform = torch.full((tokens, experts), 1.0 / experts)
    spread = torch.arange(tokens).remainder(experts).unsqueeze(1)
    assert float(loss(uniform, spread)) == pytest.approx(1.0), "uniform routing gives 1"
    collapsed = torch.zeros(tokens, experts)
    collapsed[:, 0] = 1.0
    assert float(loss(collapsed, torch.zeros(tokens, 1, dtype=torch.long))) == pytest.approx(
        experts), f"all tokens on one expert with probability 1 gives N = {experts}"


@given(experts=st.integers(2, 8), seed=st.integers(0, 2**16))
def test_at_least_one_when_dispatch_follows_the_probabilities(experts, seed):
    # every token has the same probabilities P; the dispatch fractions are P exactly
    tokens = 60 * experts
    gen = torch.Generator().manual_seed(seed)
    shares = torch.randint(1, 60, (experts,), generator=gen)
    shares = (shares * tokens // shares.sum()).tolist()
    shares[0] += tokens - sum(shares)
    first = torch.cat([torch.full((n,), e) for e, n in enumerate(shares)]).unsqueeze(1)
    p = torch.tensor(shares, dtype=torch.float64) / tokens
    value = float(loss(p.expand(tokens, experts).clone(), first))
    assert value == pytest.approx(experts * float((p * p).sum())), "N · Σ P_i² when f = P"
    assert value >= 1 - 1e-12, "Cauchy–Schwarz: at least 1 when f = P"
