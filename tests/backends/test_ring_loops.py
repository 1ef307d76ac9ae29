"""The rings' loops, read without processes: a step sends the very view the step before it
filled (all-gather) or reduced into (reduce-scatter), so no view is cut between a receive's
end and the next send (benchmarks/NOTES.md, "A view a step")."""

import pytest
import torch
from torch.distributed import ReduceOp

from backends.collectives.all_gather import ring_all_gather_chunks
from backends.collectives.reduce_scatter import ring_reduce_scatter_chunks
from simulator.collectives.chunks import chunk_bounds


class Posted:
    def wait(self) -> None:
        pass


class Recorder:
    """A ``Comm`` stand-in that records what each post hands over, in order."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank, self.world_size = rank, world_size
        self.posts: list[tuple[str, int, torch.Tensor]] = []
        self.reduced: list[torch.Tensor] = []

    def isend(self, dst: int, tensor: torch.Tensor) -> Posted:
        self.posts.append(("send", dst, tensor))
        return Posted()

    def irecv(self, src: int, tensor: torch.Tensor) -> Posted:
        self.posts.append(("recv", src, tensor))
        return Posted()

    def reduce(self, acc: torch.Tensor, incoming: torch.Tensor, op: object) -> None:
        self.reduced.append(acc)


def _span(buf: torch.Tensor, view: torch.Tensor) -> tuple[int, int]:
    lo = (view.data_ptr() - buf.data_ptr()) // buf.element_size()
    return lo, lo + view.numel()


@pytest.mark.parametrize(("p", "n"), [(2, 8), (3, 10), (4, 17), (5, 5), (7, 100)])
def test_the_all_gather_sends_the_view_its_last_receive_filled(p, n):
    for r in range(p):
        buf, comm = torch.zeros(n), Recorder(r, p)
        bounds = chunk_bounds(n, p)
        ring_all_gather_chunks(comm, buf, bounds, mine=r)  # type: ignore[arg-type]
        sends = [t for kind, _, t in comm.posts if kind == "send"]
        recvs = [t for kind, _, t in comm.posts if kind == "recv"]
        assert [_span(buf, t) for t in sends] == [bounds[(r - s) % p] for s in range(p - 1)]
        assert [_span(buf, t) for t in recvs] == [bounds[(r - s - 1) % p] for s in range(p - 1)]
        assert all(sends[s + 1] is recvs[s] for s in range(p - 2))
        assert {peer for kind, peer, _ in comm.posts} == {(r + 1) % p, (r - 1) % p}
        assert comm.posts[0][0] == "recv"  # the first receive is posted before the first send


@pytest.mark.parametrize(("p", "n"), [(2, 8), (3, 10), (4, 17), (5, 5), (7, 100)])
def test_the_reduce_scatter_sends_the_view_it_reduced_into_a_step_before(p, n):
    for r in range(p):
        buf, comm = torch.zeros(n), Recorder(r, p)
        bounds = chunk_bounds(n, p)
        ring_reduce_scatter_chunks(comm, buf, bounds, ReduceOp.SUM)  # type: ignore[arg-type]
        sends = [t for kind, _, t in comm.posts if kind == "send"]
        assert [_span(buf, t) for t in sends] == [bounds[(r - s - 1) % p] for s in range(p - 1)]
        assert [_span(buf, t) for t in comm.reduced] == [bounds[(r - s - 2) % p]
                                                         for s in range(p - 1)]
        assert all(sends[s + 1] is comm.reduced[s] for s in range(p - 2))
        assert comm.reduced[-1].numel() == bounds[r][1] - bounds[r][0]  # chunk r, complete


def test_one_rank_posts_nothing():
    comm = Recorder(0, 1)
    ring_all_gather_chunks(comm, torch.zeros(4), chunk_bounds(4, 1), mine=0)  # type: ignore[arg-type]
    ring_reduce_scatter_chunks(comm, torch.zeros(4), chunk_bounds(4, 1), ReduceOp.SUM)  # type: ignore[arg-type]
    assert comm.posts == [] and comm.reduced == []
