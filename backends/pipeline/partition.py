"""Partitioning a sequential model into stages by a ``balance`` list (torchgpipe).

torchgpipe (Kim et al. 2020, §3.3) takes an ``nn.Sequential`` and a *balance*: the number of
consecutive layers in each partition, ``sum(balance) == len(model)``. Partition ``k`` is
``nn.Sequential(*model[start_k : start_k + balance[k]])``. Choosing the balance — by time or by
size from a profile — is the balancer's job (:mod:`simulator.pipeline`); here we only cut.

With interleaved 1F1B (Megatron-LM) there are ``p · v`` partitions for ``p`` ranks: virtual
stage ``k`` lives on rank ``k mod p`` as its chunk ``k // p`` (:func:`owned_stages`).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn


def check_balance(balance: Sequence[int], layers: int) -> None:
    """Raise ``ValueError`` with a one-line reason unless ``balance`` cuts ``layers`` layers."""
    if not balance:
        raise ValueError("balance is empty: give the number of layers of each stage")
    if any(int(b) != b or b < 1 for b in balance):
        raise ValueError(f"every stage needs at least one layer, got balance {list(balance)}")
    if sum(balance) != layers:
        raise ValueError(f"balance {list(balance)} sums to {sum(balance)} layers but the model "
                         f"has {layers}")


def partition(model: nn.Sequential, balance: Sequence[int]) -> list[nn.Sequential]:
    """Cut ``model`` into ``len(balance)`` consecutive ``nn.Sequential`` stages.

    The stages share the layer objects with ``model`` (no copy), so a stage's parameters *are*
    the model's parameters.
    """
    if not isinstance(model, nn.Sequential):
        raise TypeError(f"a pipeline partitions an nn.Sequential, got {type(model).__name__}")
    check_balance(balance, len(model))
    layers = list(model.children())
    stages, start = [], 0
    for size in balance:
        stages.append(nn.Sequential(*layers[start:start + size]))
        start += size
    return stages


def layer_ranges(balance: Sequence[int]) -> list[range]:
    """The layer indices of each stage: ``[range(0, b0), range(b0, b0 + b1), …]``."""
    ranges, start = [], 0
    for size in balance:
        ranges.append(range(start, start + size))
        start += size
    return ranges


def owned_stages(rank: int, ranks: int, chunks: int = 1) -> list[int]:
    """The virtual stages rank ``rank`` of ``ranks`` owns, by chunk: ``[c·p + rank]``."""
    return [c * ranks + rank for c in range(chunks)]
