"""DataParallel from scratch: the same loss and gradients as one device, over 1–4 replicas."""

import copy

import pytest
import torch
from torch import nn

from backends.data_parallel import (
    DataParallel,
    chunk_sizes,
    gather,
    parallel_apply,
    replicate,
    scatter,
)
from simulator.core.engine import Trace

torch.set_num_threads(1)  # the replicas are the threads; no intra-op threads besides


class Tied(nn.Module):
    """An embedding whose weight is also the output projection, plus an unused layer and a
    buffer: the awkward cases of replicate."""

    def __init__(self, vocab=11, dim=6):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.hidden = nn.Linear(dim, dim)
        self.unused = nn.Linear(dim, dim)
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, tokens):
        h = torch.tanh(self.hidden(self.embed(tokens))) * self.scale
        return h @ self.embed.weight.t()


def mlp():
    return nn.Sequential(nn.Linear(7, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, 3))


def loss_and_grads(model, x, y):
    model.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss.detach(), [None if p.grad is None else p.grad.clone()
                           for p in model.parameters()]


@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
@pytest.mark.parametrize("batch", [1, 5, 8, 13])
def test_same_loss_and_gradients_as_one_device(replicas, batch):
    torch.manual_seed(replicas * 100 + batch)
    model = mlp()
    x, y = torch.randn(batch, 7), torch.randint(0, 3, (batch,))
    ref_loss, ref_grads = loss_and_grads(copy.deepcopy(model), x, y)
    loss, grads = loss_and_grads(DataParallel(model, ["cpu"] * replicas), x, y)
    torch.testing.assert_close(loss, ref_loss)
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r)


@pytest.mark.parametrize("replicas", [2, 3])
def test_tied_weights_unused_parameters_and_buffers(replicas):
    torch.manual_seed(replicas)
    model = Tied()
    tokens = torch.randint(0, 11, (7, 4))
    target = torch.randint(0, 11, (7, 4))

    def loss_grads(m):
        m.zero_grad()
        loss = nn.functional.cross_entropy(m(tokens).flatten(0, 1), target.flatten())
        loss.backward()
        return loss.detach(), [p.grad for p in model_params(m)]

    def model_params(m):
        return (m.module if isinstance(m, DataParallel) else m).parameters()

    ref_loss, ref_grads = loss_grads(copy.deepcopy(model))
    loss, grads = loss_grads(DataParallel(model, ["cpu"] * replicas))
    torch.testing.assert_close(loss, ref_loss)
    for g, r in zip(grads, ref_grads, strict=True):
        if r is None:
            assert g is None  # the unused layer gets no gradient, as on one device
        else:
            torch.testing.assert_close(g, r)


def test_frozen_parameters_get_no_gradient():
    torch.manual_seed(2)
    model = mlp()
    model[0].requires_grad_(False)
    x, y = torch.randn(9, 7), torch.randint(0, 3, (9,))
    ref_loss, ref_grads = loss_and_grads(copy.deepcopy(model), x, y)
    loss, grads = loss_and_grads(DataParallel(model, ["cpu"] * 3), x, y)
    torch.testing.assert_close(loss, ref_loss)
    assert grads[0] is None and grads[1] is None
    for g, r in zip(grads[2:], ref_grads[2:], strict=True):
        torch.testing.assert_close(g, r)


@pytest.mark.parametrize("replicas", [2, 4])
def test_training_steps_match_one_device(replicas):
    torch.manual_seed(7)
    model = mlp()
    ref = copy.deepcopy(model)
    dp = DataParallel(model, ["cpu"] * replicas)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        x, y = torch.randn(11, 7), torch.randint(0, 3, (11,))
        for m, o in ((dp, opt), (ref, ref_opt)):
            o.zero_grad()
            nn.functional.cross_entropy(m(x), y).backward()
            o.step()
        for p, r in zip(model.parameters(), ref.parameters(), strict=True):
            torch.testing.assert_close(p, r, msg=f"step {step}")


def test_the_four_steps_by_hand():
    torch.manual_seed(3)
    model, devices = mlp(), ["cpu"] * 3
    x = torch.randn(8, 7)
    chunks = scatter(x, devices)
    assert [len(c) for c in chunks] == chunk_sizes(8, 3) == [3, 3, 2]
    assert chunks[0].data_ptr() == x.data_ptr()  # the first device's chunk is a view
    assert chunks[1].data_ptr() != x[3:].data_ptr()  # every other device gets a copy
    replicas = replicate(model, devices)
    assert all(not any(True for _ in r.parameters()) for r in replicas)  # no leaves inside
    outputs = parallel_apply(replicas, [(c,) for c in chunks], devices)
    torch.testing.assert_close(gather(outputs, "cpu"), model(x))


def test_replicas_without_grad_mode_are_plain_copies():
    model = mlp()
    x = torch.randn(6, 7)
    with torch.no_grad():
        out = DataParallel(model, ["cpu"] * 2)(x)
    assert not out.requires_grad
    torch.testing.assert_close(out, model(x).detach())


def test_a_failing_replica_is_named():
    class Fails(nn.Module):
        def forward(self, x):
            if len(x) == 1:
                raise ValueError("chunk of one")
            return x

    with pytest.raises(RuntimeError, match="replica 2 on cpu failed: chunk of one"):
        DataParallel(Fails(), ["cpu"] * 3)(torch.randn(5, 2))


def test_bad_inputs_give_clear_errors():
    with pytest.raises(ValueError, match="at least one input"):
        DataParallel(mlp(), ["cpu"] * 2)()
    with pytest.raises(ValueError, match="cannot split 0 rows"):
        DataParallel(mlp(), ["cpu"] * 2)(torch.randn(0, 7))


def test_trace_has_a_span_per_step():
    model = DataParallel(mlp(), ["cpu"] * 2)
    model.trace = Trace()
    nn.functional.cross_entropy(model(torch.randn(6, 7)), torch.randint(0, 3, (6,))).backward()
    names = {s.name.split(" ")[0] for s in model.trace}
    assert {"scatter", "replicate", "forward", "gather", "reduce_add"} <= names
    assert {s.rank for s in model.trace if s.kind == "compute"} == {0, 1}


def test_torch_data_parallel_on_cpu_is_the_plain_module():
    """Without CUDA, torch.nn.DataParallel finds no device and just calls the module; ours at
    one device does the same, and at several gives the same numbers."""
    torch.manual_seed(5)
    model = mlp()
    x = torch.randn(9, 7)
    theirs = nn.DataParallel(model)
    if torch.cuda.is_available():
        pytest.skip("CUDA present: torch.nn.DataParallel really replicates here")
    assert theirs.device_ids == []
    torch.testing.assert_close(theirs(x), model(x))
    for replicas in (1, 3):
        torch.testing.assert_close(DataParallel(model, ["cpu"] * replicas)(x), theirs(x))
