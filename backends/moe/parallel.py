"""Expert parallelism: the experts of a :class:`~backends.moe.layer.MoE` sharded over ranks,
tokens dispatched to them and combined back with uneven all-to-alls (book chapter 22).

Every rank holds its own group of tokens (data parallel) and a replica of the router; rank
``r`` of ``p`` holds experts ``r·m … (r+1)·m − 1`` (``m = E/p``; GShard, Lepikhin et al. 2021
§3.2; DeepSpeed-MoE, Rajbhandari et al. 2022 §5). One forward, per rank:

1. **route** its group (:func:`~backends.moe.layer.route`, capacity per group as in GShard),
   lay the kept assignments out by expert (:meth:`~backends.moe.layer.Routing.order`);
2. **count exchange** — tell every rank how many rows it will get for each of its experts
   (:func:`~backends.moe.exchange.exchange_counts`);
3. **dispatch** — the uneven all-to-all of the rows (:func:`~backends.moe.exchange.exchange`);
   what arrives is ordered by source rank, then expert, and is regrouped by expert;
4. **expert compute** on the rows of each local expert;
5. **combine** — the reverse all-to-all brings each output home, where it is weighted by its
   gate and added to its token (:func:`~backends.moe.layer.combine`).

Backward runs the same way reversed, by autograd: the combine's backward is a dispatch, the
dispatch's a combine. The router is replicated, so its gradient is summed over ranks
(:meth:`ExpertParallelMoE.reduce_router_grads`), as data parallelism does; an expert's
gradient is complete on its owner, since every row that used it went there.

With the same weights, every rank's output and auxiliary loss equal the one-process layer's
on that rank's group, and the same assignments are dropped: routing is computed by the same
function on the same rows.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from backends.collectives.all_reduce import ring_all_reduce
from backends.collectives.comm import Comm, Group
from backends.moe.exchange import exchange, exchange_counts
from backends.moe.layer import MoE, Routing, combine, route, run_experts


class ExpertParallelMoE(nn.Module):
    """This rank's part of ``moe`` on a team of ranks: the router, and ``E/p`` experts.

    ``moe`` must be the same layer (same weights) on every rank; this rank copies the router
    and its own experts out of it. ``forward(x)`` of this rank's group ``x`` (``T × d``)
    returns ``(y, aux_loss)`` as :class:`~backends.moe.layer.MoE` does.
    """

    bias: torch.Tensor
    """The router's fixed bias, as ``moe``'s."""

    def __init__(self, moe: MoE, group: Group = None) -> None:
        super().__init__()
        comm = Comm(group)
        p, r = comm.world_size, comm.rank
        if moe.num_experts % p:
            raise ValueError(f"{moe.num_experts} experts cannot be sharded over {p} ranks: "
                             "the number of experts must be a multiple of the world size")
        self.group, self.world_size, self.rank = group, p, r
        self.num_experts, self.k = moe.num_experts, moe.k
        self.capacity_factor = moe.capacity_factor
        self.local = moe.num_experts // p
        self.first = r * self.local
        self.router = copy.deepcopy(moe.router)
        self.register_buffer("bias", moe.bias.detach().clone())
        self.experts = nn.ModuleList(copy.deepcopy(moe.experts[i])
                                     for i in range(self.first, self.first + self.local))

    def route(self, x: torch.Tensor) -> Routing:
        """This rank's group's :class:`~backends.moe.layer.Routing`."""
        return route(x, self.router, self.bias, self.k, self.capacity_factor)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        routing = self.route(x)
        order = routing.order()
        p, m = self.world_size, self.local
        sent = routing.counts().view(p, m)  # rows for rank j's expert e
        got = exchange_counts(sent, self.group)  # rows from rank s for my expert e
        send_splits, recv_splits = sent.sum(dim=1).tolist(), got.sum(dim=1).tolist()
        received = exchange(x[order // self.k], recv_splits, send_splits, self.group)
        by_expert = self._by_expert(got)
        out = run_experts(self.experts, received[by_expert], got.sum(dim=0).tolist())
        back = out[torch.argsort(by_expert)]  # by source again, as the rows came
        returned = exchange(back, send_splits, recv_splits, self.group)
        return combine(returned, order, routing, x.shape[0]), routing.aux_loss

    def _by_expert(self, got: torch.Tensor) -> torch.Tensor:
        """The received rows (ordered by source, then expert) reordered by expert, then
        source: indices into the received buffer."""
        p, m = self.world_size, self.local
        device = got.device
        expert = torch.arange(m, device=device).repeat(p).repeat_interleave(got.flatten())
        source = torch.arange(p, device=device).repeat_interleave(got.sum(dim=1))
        return torch.argsort(expert * p + source, stable=True)

    def reduce_router_grads(self) -> None:
        """Sum the replicated router's gradient over the ranks (after ``backward``)."""
        grad = self.router.weight.grad
        if grad is not None and self.world_size > 1:
            ring_all_reduce(grad.view(-1), group=self.group)
