"""The two models the lab trains on the parameter server, as flat key spaces.

* :class:`SparseLRModel` — logistic regression on sparse binary features
  (:class:`simulator.parameter_server.SparseLRData`): a worker pulls and pushes only the keys
  its batch touches, the workload parameter servers were built for (Li et al. 2014, §5.1).
* :class:`MLPModel` — a small multi-layer perceptron on seeded Gaussian data; its parameters,
  flattened, are keys ``0 … P−1`` and every worker pulls and pushes all of them (a range).

``grad(w, keys, rows, batch_size)`` returns this shard's part of the global batch's mean loss
and its gradient for ``keys``: summed over the rows and divided by the *global* batch size, so
the gradients that ``W`` workers push add up to exactly the single-process mini-batch gradient.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from simulator.parameter_server import SparseLRData, mlp_num_params, worker_keys


class SparseLRModel:
    """Sparse logistic regression; key ``num_features`` is the bias."""

    def __init__(self, data: SparseLRData) -> None:
        self.data = data
        feats, labels = data.arrays()
        self.feats_np = feats
        self.feats, self.labels = torch.from_numpy(feats), torch.from_numpy(labels)
        self.num_keys = data.num_keys
        self.num_examples = data.num_examples

    def init(self) -> torch.Tensor:
        return torch.zeros(self.num_keys)

    def keys(self, rows: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(worker_keys(self.feats_np, rows, self.data.num_features))

    def grad(self, w: torch.Tensor, keys: torch.Tensor, rows: np.ndarray,
             batch_size: int) -> tuple[float, torch.Tensor]:
        idx = torch.from_numpy(rows)
        pos = torch.searchsorted(keys, self.feats[idx])  # [rows, nnz] positions in keys
        logits = w[pos].sum(dim=1) + w[-1]
        y = self.labels[idx]
        loss = nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="sum")
        err = (torch.sigmoid(logits) - y) / batch_size
        g = torch.zeros_like(w)
        g.index_add_(0, pos.flatten(), err.repeat_interleave(pos.shape[1]))
        g[-1] = err.sum()
        return float(loss) / batch_size, g

    def reference_loss(self, w: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        """Mean loss of dense weights ``w`` on ``rows``, with autograd (the reference)."""
        idx = torch.from_numpy(rows)
        logits = w[self.feats[idx]].sum(dim=1) + w[-1]
        return nn.functional.binary_cross_entropy_with_logits(logits, self.labels[idx])


class MLPModel:
    """A ReLU MLP with layer widths ``sizes`` classifying seeded Gaussian points."""

    def __init__(self, sizes: Sequence[int] = (32, 64, 10), num_examples: int = 2048,
                 seed: int = 0) -> None:
        self.sizes = tuple(sizes)
        gen = torch.Generator().manual_seed(seed)
        self.x = torch.randn(num_examples, sizes[0], generator=gen)
        teacher = torch.randn(sizes[0], sizes[-1], generator=gen)
        self.y = (self.x @ teacher).argmax(dim=1)
        torch.manual_seed(seed)
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(sizes):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.net = nn.Sequential(*layers[:-1])
        self.num_keys = mlp_num_params(sizes)
        self.num_examples = num_examples

    def init(self) -> torch.Tensor:
        return nn.utils.parameters_to_vector(self.net.parameters()).detach().clone()

    def keys(self, rows: np.ndarray) -> torch.Tensor:
        return torch.arange(self.num_keys)

    def grad(self, w: torch.Tensor, keys: torch.Tensor, rows: np.ndarray,
             batch_size: int) -> tuple[float, torch.Tensor]:
        nn.utils.vector_to_parameters(w, self.net.parameters())
        self.net.zero_grad(set_to_none=False)
        idx = torch.from_numpy(rows)
        loss = nn.functional.cross_entropy(self.net(self.x[idx]), self.y[idx],
                                           reduction="sum") / batch_size
        loss.backward()  # type: ignore[no-untyped-call]
        g = torch.cat([p.grad.flatten() for p in self.net.parameters()  # type: ignore[union-attr]
                       ])
        return float(loss.detach()), g


Model = SparseLRModel | MLPModel
