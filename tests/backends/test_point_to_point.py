"""The real ping-pong, stream and one-to-all: same bytes as PyTorch's built-ins, any world
size."""

import pytest
import torch
import torch.distributed as dist

from backends.collectives.point_to_point import one_to_all, ping_pong, stream
from backends.launch import spawn
from backends.trace import Tracer

SIZES = [0, 1, 3, 1000, 4097, 2**20 + 7]


def check_many(sizes):
    """Rank function: one_to_all against dist.broadcast for many sizes, dtypes and roots."""
    rank, world = dist.get_rank(), dist.get_world_size()
    for i, n in enumerate(sizes):
        for dtype in (torch.float32, torch.float64, torch.int64):
            root = i % world
            gen = torch.Generator().manual_seed(1000 * rank + i)
            ours = (torch.randn(n, generator=gen) * 100).to(dtype)
            builtin = ours.clone()
            one_to_all(ours, root)
            dist.broadcast(builtin, src=root)
            assert torch.equal(ours, builtin), (rank, n, dtype, root)
    if world >= 2:
        # after a ping-pong, ranks 0 and 1 both hold what rank 0 sent; the others are untouched
        buf = torch.arange(1000, dtype=torch.int64) * (rank + 1)
        ping_pong(buf)
        expected = torch.arange(1000, dtype=torch.int64) * (1 if rank <= 1 else rank + 1)
        assert torch.equal(buf, expected), rank
        # a stream of messages one way: rank 1 ends with the last one, nobody else changes
        mine = torch.arange(1000, dtype=torch.int64) * (rank + 1)
        for k in range(3):
            buf = mine + k if rank == 0 else mine.clone()
            stream(buf)
        last = torch.arange(1000, dtype=torch.int64) + 2
        assert torch.equal(buf, last if rank == 1 else mine + 2 * (rank == 0)), rank
    return True


def traced_one_to_all(n):
    tracer = Tracer()
    one_to_all(torch.zeros(n, dtype=torch.uint8), 0, tracer)
    return tracer.gather().to_records()


@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_one_to_all_equals_broadcast(world):
    assert spawn(check_many, world, SIZES, timeout=30) == [True] * world


def test_real_trace_has_the_simulators_schema():
    records = spawn(traced_one_to_all, 3, 4096, timeout=30)[0]
    sends = sorted(r["name"] for r in records if r["kind"] == "send")
    recvs = sorted((r["rank"], r["name"]) for r in records if r["kind"] == "recv")
    assert sends == ["send 0->1", "send 0->2"]
    assert recvs == [(1, "recv 0->1"), (2, "recv 0->2")]
    assert all(r["nbytes"] == 4096 and r["end"] >= r["start"] for r in records)


def comm_posting():
    """Rank function: what :class:`Comm` hands back and whom it reaches, in each kind of team."""
    from backends.collectives.comm import Comm, Work, post_recv, post_send

    rank = dist.get_rank()
    untraced, traced = Comm(), Comm(tracer=Tracer())
    got = {}
    for name, comm in (("untraced", untraced), ("traced", traced)):
        buf = torch.full((4,), float(rank))
        peer = (rank + 1) % 3
        recv = comm.irecv((rank - 1) % 3, torch.empty(4))
        sent = comm.isend(peer, buf)
        got[name] = type(sent) is Work
        recv.wait()
        sent.wait()
    spans = {(s.kind, s.name) for s in traced.tracer.trace}
    # a team of global ranks 1 and 2, as a process group (group ranks 0, 1) and as a list
    pg = dist.new_group([1, 2])
    values = []
    for team in (pg, [1, 2]):
        if rank in (1, 2):
            comm = Comm(team)
            incoming = torch.empty(1)
            works = (comm.irecv(1 - comm.rank, incoming), comm.isend(1 - comm.rank,
                                                                    torch.tensor([rank * 10.])))
            for work in works:
                work.wait()
            values.append(incoming.item())
    # the calibration's posts: ranks of the default group
    token = torch.tensor([float(rank)])
    slot = torch.empty(1)
    works = (post_recv(slot, (rank - 1) % 3), post_send(token, (rank + 1) % 3))
    for work in works:
        work.wait()
    return got, spans, values, slot.item()


def test_comm_posts_on_the_process_group_and_wraps_only_traced_messages():
    out = spawn(comm_posting, 3, backend="gloo", timeout=60)
    for rank, (wrapped, spans, values, left) in enumerate(out):
        # untraced: the group's own work object; traced: a Work that records its span
        assert wrapped == {"untraced": False, "traced": True}
        assert spans == {("send", f"send {rank}->{(rank + 1) % 3}"),
                         ("recv", f"recv {(rank - 1) % 3}->{rank}")}
        # team ranks reach the right global ranks, in a process group and in a list
        assert values == ({1: [20.0, 20.0], 2: [10.0, 10.0]}.get(rank, []))
        assert left == float((rank - 1) % 3)
