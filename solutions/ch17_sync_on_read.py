"""Chapter 17, reference answer: a sync-on-read variable's read, and a mean metric from two
SUM variables (exercise in ``exercises/ch17_sync_on_read.py``; the lab's own reduction is
:func:`backends.tf_distribute.values.combine`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from backends.tf_distribute.values import SyncOnReadVariable, VariableAggregation


def aggregate(aggregation: VariableAggregation, copies: Sequence[Tensor]) -> Tensor:
    """Every copy brought to the first one's device, then combined."""
    device = copies[0].device
    if aggregation is VariableAggregation.ONLY_FIRST_REPLICA:
        return copies[0].to(device, copy=True)
    total = torch.stack([c.to(device, copy=True) for c in copies]).sum(0)
    return total / len(copies) if aggregation is VariableAggregation.MEAN else total


def update_state(total: SyncOnReadVariable, count: SyncOnReadVariable,
                 per_example_loss: Tensor) -> None:
    """Each replica adds to its own copies: no communication."""
    total.assign_add(per_example_loss.detach().sum())
    count.assign_add(torch.tensor(float(per_example_loss.numel())))


def result(total: SyncOnReadVariable, count: SyncOnReadVariable) -> Tensor:
    """Two SUM reads, one division: right however unevenly the batches were cut."""
    return total.read_value() / count.read_value()
