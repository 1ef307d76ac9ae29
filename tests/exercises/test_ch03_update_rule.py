"""Grading exercise 3.2: AdaGrad as a server-side update rule, against torch.optim.Adagrad."""

import pytest
import torch

from exercises import load

pytestmark = [pytest.mark.ch03, pytest.mark.ex03_2]

TODO = ("AdaGrad.__call__ is not implemented yet: write it in exercises/ch03_update_rule.py "
        "(EXERCISE 3.2), then run `make grade CH=03` again")


def rule(lr):
    return load("ch03_update_rule").AdaGrad(lr=lr)


def apply(r, weights, idx, grad):
    try:
        r(weights, idx, grad)
    except NotImplementedError:
        pytest.fail(TODO, pytrace=False)


@pytest.mark.parametrize("sparse", [False, True])
def test_equals_torch_adagrad(sparse):
    n, lr = 40, 0.1
    w = torch.nn.Parameter(torch.randn(n, generator=torch.Generator().manual_seed(0)))
    ours = w.detach().clone()
    opt, r = torch.optim.Adagrad([w], lr=lr), rule(lr)
    touched = torch.zeros(n, dtype=torch.bool)
    for step in range(6):
        gen = torch.Generator().manual_seed(step + 1)
        idx = (torch.randperm(n, generator=gen)[:5].sort().values if sparse
               else torch.arange(n))
        grad = torch.randn(idx.numel(), generator=gen)
        dense = torch.zeros(n)
        dense[idx] = grad
        w.grad = dense
        opt.step()
        apply(r, ours, idx, grad)
        touched[idx] = True
    torch.testing.assert_close(ours, w.detach(), rtol=1e-5, atol=1e-6)
    if sparse:
        start = torch.randn(n, generator=torch.Generator().manual_seed(0))
        assert torch.equal(ours[~touched], start[~touched]), "keys never pushed moved"
