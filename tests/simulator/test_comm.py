"""SimComm semantics: matching, ordering, groups, barrier, local work, deadlock detection."""

import pytest

from simulator.core import Cluster, Device, Link, SimDeadlock, Topology, run_spmd

DEV = Device("test", flops_per_s=1e9, mem_bandwidth_Bps=3e9, memory_bytes=1e9)


def make(p=4, model="none", alpha=1e-6, bw=1e9):
    return Cluster.homogeneous("t", DEV, Topology.fully_connected(p, Link(alpha, bw, model)))


def test_messages_with_one_tag_never_overtake():
    def program(comm):
        if comm.rank == 0:
            big, small = comm.isend(1, 10**6), comm.isend(1, 10)
            yield big.wait()
            yield small.wait()
        elif comm.rank == 1:
            first = yield from comm.recv(0)
            second = yield from comm.recv(0)
            return first, second

    result = run_spmd(make(2, "fair"), program)
    assert result.returns[1] == (10**6, 10)


def test_receive_of_the_wrong_size_is_an_error():
    def program(comm):
        if comm.rank == 0:
            yield from comm.send(1, 8)
        else:
            yield from comm.recv(0, 16)

    with pytest.raises(ValueError, match="expected 16 B from rank 0"):
        run_spmd(make(2), program)


def test_deadlock_names_each_stuck_rank():
    def program(comm):
        yield from comm.recv((comm.rank + 1) % comm.world_size, 4)

    with pytest.raises(SimDeadlock, match=r"rank 2: recv from 3"):
        run_spmd(make(4), program)


def test_barrier_releases_everyone_after_the_slowest():
    def program(comm):
        yield from comm.compute(comm.rank * 1e9)  # rank r computes r seconds
        yield from comm.barrier()

    result = run_spmd(make(5), program)
    assert min(result.finish_s) >= 4.0
    assert max(result.finish_s) <= 4.0 + 3 * 1e-6 + 1e-12


def test_sub_groups_renumber_ranks_and_keep_traffic_apart():
    def program(comm):
        group = comm.new_group([1, 3])
        if group is None:
            return None
        assert group.world_size == 2
        if group.rank == 0:
            yield from group.send(1, 100)
        else:
            yield from group.recv(0, 100)
        return group.rank

    result = run_spmd(make(4), program)
    assert result.returns == [None, 0, None, 1]
    assert result.bytes_per_channel == {(1, 3): 100}


def test_local_work_uses_the_device_rates():
    def program(comm):
        yield from comm.compute(2e9)          # 2 s at 1 GFLOP/s
        yield from comm.reduce(10**9)         # 1 s at mem_bw/3 = 1 GB/s
        yield from comm.memcpy(3 * 10**9)     # 2 s at mem_bw/2 = 1.5 GB/s

    result = run_spmd(make(1), program)
    assert result.makespan_s == pytest.approx(5.0)
    assert [s.kind for s in result.trace] == ["compute", "reduce", "memcpy"]


def test_peak_memory_is_tracked_per_rank():
    def program(comm):
        comm.alloc(100 * (comm.rank + 1))
        comm.alloc(50)
        comm.free(150)
        comm.alloc(10)
        yield comm.env.timeout(0)

    assert run_spmd(make(2), program).peak_memory_bytes == [150, 250]


def test_trace_can_be_switched_off():
    def program(comm):
        yield from comm.compute(1.0)

    assert len(run_spmd(make(2), program, trace=False).trace) == 0


def test_bad_peer_is_a_clear_error():
    def program(comm):
        yield from comm.send(7, 1)

    with pytest.raises(ValueError, match="peer 7 is not in a group of 2"):
        run_spmd(make(2), program)
