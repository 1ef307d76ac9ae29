"""Grading exercise 17.2: a sync-on-read variable's read, and a mean metric on uneven batches.

Run with ``make grade EX=17.2`` (your answer) or ``DISTML_IMPL=solutions pytest -m ex17_2
tests/exercises`` (the reference answer).
"""

import functools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backends.tf_distribute import MirroredStrategy, SyncOnReadVariable, VariableAggregation
from backends.tf_distribute.values import combine
from exercises import load
from tests.exercises.grading import call_or_fail

pytestmark = [pytest.mark.ch17, pytest.mark.ex17_2]

TODO = ("aggregate / update_state / result are not implemented yet: write them in "
        "exercises/ch17_sync_on_read.py (EXERCISE 17.2), then run `make grade EX=17.2` again")
AGGREGATIONS = list(VariableAggregation)


def aggregate(aggregation, copies):
    return call_or_fail("ch17_sync_on_read", "aggregate", TODO, aggregation, copies)


@given(st.integers(1, 5), st.sampled_from([(), (3,), (2, 4)]), st.sampled_from(AGGREGATIONS),
       st.integers(0, 2**16))
def test_aggregate_reads_what_the_lab_reads_and_leaves_the_copies(k, shape, how, seed):
    gen = torch.Generator().manual_seed(seed)
    copies = [torch.randn(shape, generator=gen) for _ in range(k)]
    saved = [c.clone() for c in copies]
    got = aggregate(how, copies)
    assert torch.allclose(got, combine(how, copies), atol=1e-6), how
    got.add_(1.0)  # a read is a new tensor: changing it changes no copy
    assert all(torch.equal(c, s) for c, s in zip(copies, saved, strict=True)), (
        "the copies changed: return a new tensor, never a copy itself or its sum in place")


def add_replica_number(var):
    """Replica ``i`` adds ``i + 1`` to its own copy."""
    from backends.tf_distribute.values import current_replica_id

    var.assign_add(torch.full((2,), float(current_replica_id() + 1)))


@pytest.mark.parametrize("how", AGGREGATIONS)
def test_as_a_variables_reduction_it_gives_the_labs_reads(how):
    aggregate(how, [torch.zeros(1)])  # a stub fails here
    strategy = MirroredStrategy(["cpu"] * 3)
    yours = SyncOnReadVariable(torch.zeros(2), strategy.devices, how,
                               reduce=load("ch17_sync_on_read").aggregate)
    lab = SyncOnReadVariable(torch.zeros(2), strategy.devices, how)
    for var in (yours, lab):
        strategy.run(functools.partial(add_replica_number, var))  # not an argument: run
        # would hand the replica its own copy instead of the variable
    assert torch.allclose(yours.read_value(), lab.read_value()), how


@pytest.mark.parametrize(("replicas", "batches"), [(1, (5, 2)), (3, (7, 7, 2)), (4, (5, 3, 9)),
                                                   (2, (1, 4))])
def test_the_mean_metric_is_the_mean_of_every_example_on_uneven_batches(replicas, batches):
    module = load("ch17_sync_on_read")
    strategy = MirroredStrategy(["cpu"] * replicas)
    total = strategy.sync_on_read(torch.zeros(()), VariableAggregation.SUM)
    count = strategy.sync_on_read(torch.zeros(()), VariableAggregation.SUM)
    means = strategy.sync_on_read(torch.zeros(()), VariableAggregation.MEAN)
    gen = torch.Generator().manual_seed(replicas)
    seen = []

    def step(losses):
        try:
            module.update_state(total, count, losses)
        except NotImplementedError:
            return "todo"
        if losses.numel():
            means.assign_add(losses.mean())
        return None

    for rows in batches:
        losses = torch.rand(rows, generator=gen) * torch.arange(1, rows + 1)
        seen.append(losses)
        outcome = strategy.run(step, (strategy.distribute_batch(losses),))
        if outcome is not None and "todo" in getattr(outcome, "values", [outcome]):
            pytest.fail(TODO, pytrace=False)
    got = call_or_fail("ch17_sync_on_read", "result", TODO, total, count)
    expected = torch.cat(seen).mean()
    assert float(got) == pytest.approx(float(expected), rel=1e-5)
    if replicas > 1:  # the trap the metric avoids
        assert float(means.read_value()) / len(batches) != pytest.approx(float(expected))
