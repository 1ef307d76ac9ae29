"""The Horovod training script of every tutorial, in the lab's API (book ch. 7, "An example").

Run it with the lab's launcher (``np`` processes on this machine)::

    distml-lab horovodrun -np 2 python -m lab.horovod_train --steps 30
    distml-lab horovodrun -np 4 --cycle-time-ms 5 --fusion-threshold-mb 1 \\
        python -m lab.horovod_train

Every rank trains the same MLP (:func:`lab.models.mlp`) on its own shard of a synthetic
classification task (a fixed random "teacher" labels Gaussian inputs; each rank draws its own
batches). The marked lines are the ones Horovod adds to a plain PyTorch script.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import torch
import torch.nn.functional as F

import backends.horovod as hvd
from lab.models import mlp

WIDTHS = (32, 64, 64, 10)


def batch(gen: torch.Generator, teacher: torch.Tensor, size: int
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """``size`` Gaussian inputs and their teacher labels (``argmax(x @ teacher)``)."""
    x = torch.randn(size, teacher.shape[0], generator=gen)
    return x, (x @ teacher).argmax(dim=1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="optimizer steps (default 30)")
    parser.add_argument("--batch", type=int, default=32, help="per-rank batch (default 32)")
    parser.add_argument("--lr", type=float, default=0.1, help="learning rate of one rank")
    parser.add_argument("--log-every", type=int, default=10)
    args = parser.parse_args(argv)

    hvd.init()                                                     # (1) start Horovod
    teacher = torch.randn(WIDTHS[0], WIDTHS[-1], generator=torch.Generator().manual_seed(0))
    data = torch.Generator().manual_seed(1000 + hvd.rank())        # (2) each rank its shard

    model = mlp(WIDTHS, seed=hvd.rank())       # different on purpose: the broadcast fixes it
    sgd = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size())  # (3) scale lr by p
    optimizer = hvd.DistributedOptimizer(                          # (4) average gradients
        sgd, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)      # (5) same start everywhere
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    loss = torch.zeros(())
    for step in range(args.steps):
        x, y = batch(data, teacher, args.batch)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]  # hooks enqueue all-reduces during backward
        optimizer.step()                            # waits for them, then updates
        if hvd.rank() == 0 and (step % args.log_every == 0 or step == args.steps - 1):
            print(f"step {step:4d}  loss {loss.item():.4f}  (rank 0's batch)")  # (6) rank 0 logs

    mean = hvd.allreduce(loss.detach(), name="final_loss")         # metric averaged over ranks
    mine = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum()
    same = bool(torch.isclose(hvd.allreduce(mine, name="checksum"), mine, rtol=0, atol=1e-9))
    if hvd.rank() == 0:
        print(f"final loss averaged over {hvd.size()} ranks: {mean.item():.4f}")
    if not same:  # replicas that start equal and apply equal updates stay equal
        print(f"rank {hvd.rank()}: parameters differ from the other ranks'", file=sys.stderr)
    hvd.shutdown()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
