"""Grading exercise 18.2: a replica's training step under MirroredStrategy and
MultiWorkerMirroredStrategy, checked against one process training on the whole batch.

Run with ``make grade EX=18.2`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex18_2
tests/exercises`` (the reference answer).
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backends.launch import spawn
from backends.tf_distribute import SGD, MirroredStrategy, ReduceOp, train_step
from exercises import load
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch18, pytest.mark.ex18_2]

TODO = ("compute_average_loss / replica_step are not implemented yet: write them in "
        "exercises/ch18_train_step.py (EXERCISE 18.2), then run `make grade EX=18.2` again")
LR, STEPS = 0.2, 3


def model_and_data(batch, seed=0):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    gen = torch.Generator().manual_seed(seed + 1)
    data = [(torch.randn(batch, 6, generator=gen), torch.randn(batch, 3, generator=gen))
            for _ in range(STEPS)]
    return net, data


def one_process(batch):
    """The reference: plain SGD on the whole batch, mean loss. Weights and losses."""
    net, data = model_and_data(batch)
    losses = []
    for x, y in data:
        loss = (net(x) - y).square().flatten(1).mean(1).mean()
        grads = torch.autograd.grad(loss, list(net.parameters()))
        with torch.no_grad():
            for p, g in zip(net.parameters(), grads, strict=True):
                p.sub_(LR * g)
        losses.append(float(loss))
    return [p.detach() for p in net.parameters()], losses


def stub_check():
    """A stub fails here, in the test process, before any replica runs."""
    net, data = model_and_data(2)
    call_or_fail("ch18_train_step", "replica_step", TODO, net, *data[0], 2, SGD(LR))


def mirrored(batch, replicas, step):
    net, data = model_and_data(batch)
    strategy = MirroredStrategy(["cpu"] * replicas)
    model, optimizer, losses = strategy.mirror(net), SGD(LR), []
    for x, y in data:
        shares = strategy.run(step, (model, strategy.distribute_batch(x),
                                     strategy.distribute_batch(y), batch, optimizer))
        losses.append(float(strategy.reduce(ReduceOp.SUM, shares)))
    assert model.in_sync(atol=1e-6), "the replicas' weights drifted apart"
    return [v.read_value().detach() for v in model.variables], losses


@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 100))
def test_compute_average_loss_divides_by_the_global_batch(rows, extra, seed):
    losses = torch.rand(rows, generator=torch.Generator().manual_seed(seed))
    got = call_or_fail("ch18_train_step", "compute_average_loss", TODO, losses, rows + extra)
    assert float(got) == pytest.approx(float(losses.sum()) / (rows + extra), rel=1e-6)


@pytest.mark.parametrize(("batch", "replicas"), [(6, 1), (7, 3), (5, 4), (8, 2)])
def test_mirrored_training_equals_one_process_on_the_whole_batch(batch, replicas):
    stub_check()
    weights, losses = mirrored(batch, replicas, load("ch18_train_step").replica_step)
    expected_weights, expected_losses = one_process(batch)
    assert losses == pytest.approx(expected_losses, rel=1e-5), (
        "strategy.reduce(SUM) of the shares should be the batch's mean loss")
    for got, want in zip(weights, expected_weights, strict=True):
        assert torch.allclose(got, want, atol=1e-5), (
            f"{batch} rows on {replicas} replicas: the weights differ from one process's")


def test_the_same_weights_as_the_labs_train_step():
    stub_check()
    yours, _ = mirrored(7, 3, load("ch18_train_step").replica_step)
    lab, _ = mirrored(7, 3, train_step)
    for got, want in zip(yours, lab, strict=True):
        assert torch.allclose(got, want, atol=1e-6)


def ranks_train(batch):
    """Rank function: MultiWorkerMirroredStrategy, one CPU replica per worker, your step."""
    from backends.tf_distribute import MultiWorkerMirroredStrategy

    net, data = model_and_data(batch)
    strategy = MultiWorkerMirroredStrategy()
    model, optimizer = strategy.mirror(net), SGD(LR)
    step = load("ch18_train_step").replica_step
    for x, y in data:
        try:
            strategy.run(step, (model, strategy.distribute_batch(x),
                                strategy.distribute_batch(y), batch, optimizer))
        except RuntimeError as exc:
            if isinstance(exc.__cause__, NotImplementedError):
                raise RuntimeError("replica_step is not implemented") from exc
            raise
    return [v.read_value().detach().tolist() for v in model.variables]  # plain lists: a
    # tensor would travel back through shared memory that dies with the rank


def test_two_workers_end_with_the_one_process_weights():
    stub_check()
    per_rank = spawn(ranks_train, 2, 7, timeout=30, deadline=60)
    expected, _ = one_process(7)
    for rank, weights in enumerate(per_rank):
        for got, want in zip(weights, expected, strict=True):
            assert torch.allclose(torch.tensor(got), want, atol=1e-5), f"worker {rank}'s weights"
