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


def _driven(p=2, alpha=1e-3, bw=1e9):
    return make(p, "none", alpha, bw).with_host(receiver_driven_sends=True)


def test_receiver_driven_send_waits_for_a_late_receive_and_its_notice():
    def program(comm):
        if comm.rank == 0:
            yield from comm.send(1, 10**6)  # posted at 0, the receive only at 5 ms
        else:
            yield comm.env.timeout(5e-3)
            yield from comm.recv(0, 10**6)

    alpha, wire = 1e-3, 10**6 / 1e9
    eager = run_spmd(make(2, "none", alpha), program)
    driven = run_spmd(_driven(alpha=alpha), program)
    assert eager.finish_s[0] == pytest.approx(alpha + wire)  # the bytes flew at once
    assert eager.finish_s[1] == pytest.approx(5e-3)
    # ready notice leaves at 5 ms, reaches rank 0 an α later; then the message's α + n/B
    assert driven.finish_s[0] == pytest.approx(5e-3 + alpha + alpha + wire)
    assert driven.finish_s[1] == pytest.approx(driven.finish_s[0])
    measured = run_spmd(_driven(alpha=alpha).with_host(ready_notice_s=2e-4), program)
    assert measured.finish_s[0] == pytest.approx(5e-3 + 2e-4 + alpha + wire)  # a calibrated notice


def test_receiver_driven_send_to_a_receive_posted_early_pays_nothing_more():
    def program(comm):
        if comm.rank == 1:
            work = comm.irecv(0, 64)
            yield work.wait()
        else:
            yield comm.env.timeout(5e-3)  # the notice (α = 1 ms) has long arrived
            yield from comm.send(1, 64)

    alpha = 1e-3
    driven = run_spmd(_driven(alpha=alpha), program)
    assert driven.finish_s[1] == pytest.approx(5e-3 + alpha + 64 / 1e9)


def test_barrier_messages_are_not_receiver_driven():
    def program(comm):
        yield from comm.barrier()

    assert run_spmd(_driven(4), program).makespan_s == pytest.approx(
        run_spmd(make(4, "none", 1e-3), program).makespan_s)


def test_calls_run_the_program_back_to_back_on_every_rank():
    def program(comm):
        yield from comm.compute((comm.rank + 1) * 1e9)  # rank r: r + 1 seconds
        return comm.now

    result = run_spmd(make(3), program, calls=4)
    assert result.finish_s == pytest.approx([4.0, 8.0, 12.0])  # no barrier between calls
    assert result.returns == pytest.approx([4.0, 8.0, 12.0])  # the last call's value
    with pytest.raises(ValueError, match="calls must be >= 1"):
        run_spmd(make(3), program, calls=0)


def test_a_ring_of_blocking_sends_deadlocks_when_sends_are_receiver_driven():
    def program(comm):  # the unsafe ring: everyone sends right, then receives from the left
        p = comm.world_size
        yield from comm.send((comm.rank + 1) % p, 4)
        yield from comm.recv((comm.rank - 1) % p, 4)

    run_spmd(make(3), program)  # eager: it runs
    with pytest.raises(SimDeadlock, match=r"3 of 3 ranks never finished.*rank 0: send to 1"):
        run_spmd(_driven(3), program)


def test_posting_costs_the_rank_its_overhead_one_post_after_another():
    o, alpha = 1e-4, 1e-3

    def program(comm):
        if comm.rank == 0:
            incoming = comm.irecv(1, 8)  # posted by o
            outgoing = comm.isend(1, 8)  # posted by 2·o: only then do its bytes leave
            yield outgoing.wait()
            yield incoming.wait()
            yield from comm.compute(0)
        else:
            yield from comm.recv(0, 8)
            yield from comm.send(0, 8)

    result = run_spmd(make(2, "none", alpha).with_host(post_overhead_s=o), program)
    # rank 1 posts its receive at o; rank 0's message leaves at 2·o and lands at 2·o + α;
    # rank 1's send is posted o after that, and lands another α later
    assert result.finish_s[1] == pytest.approx(3 * o + alpha + 8e-9 + alpha + 8e-9)
    assert result.finish_s[0] == pytest.approx(result.finish_s[1])
    assert run_spmd(make(2, "none", alpha), program).finish_s[0] == pytest.approx(
        2 * (alpha + 8e-9))  # free posts: the α-β model


def test_local_work_waits_for_the_ranks_own_posts():
    def program(comm):
        if comm.rank == 0:
            comm.isend(1, 8)
            comm.isend(1, 8)
            start = comm.now
            yield from comm.compute(0)
            return comm.now - start
        yield from comm.recv(0, 8)
        yield from comm.recv(0, 8)

    result = run_spmd(make(2).with_host(post_overhead_s=1e-4), program)
    assert result.returns[0] == pytest.approx(2e-4)


def test_a_send_posted_before_its_notice_came_is_queued_and_weighs_more():
    from simulator.core.network import log_interpolate

    n, alpha, bw = 10**6, 1e-4, 1e9

    def program(comm, early: bool):
        peer = 1 - comm.rank
        recv = comm.irecv(peer, n)
        if early:  # the partner's notice (α) has come before this rank posts its send
            yield comm.env.timeout(1e-3)
        send = comm.isend(peer, n)
        yield recv.wait()
        yield send.wait()
        return comm.now

    # one bus that both messages share (a weight counts only where a channel is shared)
    bus = Cluster.homogeneous("t", DEV, Topology.shared_bus(2, Link(alpha, 1e12, "fair"), bw))
    heavy = bus.with_host(receiver_driven_sends=True, post_overhead_s=1e-5,
                          queued_weight_by_bytes=((1.0, 3.0),))
    # posted right after the receive (10 µs each): the notice leaves as the partner's
    # receive is posted and comes α later, after this rank began to post its send — queued:
    # the two messages share the bus at one rate r, 3r + 3r = B
    plain = run_spmd(heavy, program, early=False)
    assert plain.makespan_s == pytest.approx(1e-5 + alpha + alpha + 6 * n / bw)
    # posted a millisecond in: the notice was there, the bytes weigh 1 (r + r = B)
    late = run_spmd(heavy, program, early=True)
    assert late.makespan_s == pytest.approx(1e-3 + 1e-5 + alpha + 2 * n / bw)
    # the weight is read from the table by message size, log-linearly
    table = ((2.0**20, 1.0), (2.0**24, 1.5))
    weighed = heavy.with_host(queued_weight_by_bytes=table).host
    assert weighed is not None and weighed.queued_weight(2**22) == pytest.approx(
        log_interpolate(table, 2**22)) == pytest.approx(1.25)
    assert _driven().host.queued_weight(n) == 1.0  # no table: a byte is a byte


def test_a_stream_is_queued_and_weighs_alone_while_a_buffered_ping_pong_finds_its_notice():
    from simulator.collectives.point_to_point import ping_pong, stream

    n, alpha, bw, calls = 10**6, 1e-4, 1e9, 4
    bus = Cluster.homogeneous("t", DEV, Topology.shared_bus(2, Link(alpha, 1e12, "fair"), bw))
    driven = bus.with_host(receiver_driven_sends=True, post_overhead_s=1e-5)
    buffered = driven.with_host(buffered_sends=True, send_buffer_bytes=4 * n)
    lone = ((1.0, 2.0),)  # a queued byte alone on the bus weighs 2

    def makespan(cluster, program):
        return run_spmd(cluster, program, n, calls=calls).makespan_s

    # the stream: each send is posted before rank 1 posted its next receive — queued, and
    # alone on the bus each of its bytes takes two bytes' worth of the bus
    plain = makespan(buffered, stream)
    heavy = makespan(buffered.with_host(lone_queued_weight_by_bytes=lone), stream)
    assert heavy - plain == pytest.approx(calls * n / bw, rel=1e-9)
    # the ping-pong: rank 0's send returns once the socket buffer holds the rest (here at
    # once), it posts the receive of the reply, and the notice is there before the reply
    # is posted — no send but the first is queued, and the first only at its start
    pp = makespan(buffered.with_host(lone_queued_weight_by_bytes=lone), ping_pong)
    first_queued = n / bw  # the very first send found no notice either
    assert pp == pytest.approx(makespan(buffered, ping_pong) + first_queued, rel=1e-9)
    # without the socket buffer a send completes on arrival: the reply's notice comes only
    # after the reply was posted, every message is queued and weighs 2
    unbuffered = makespan(driven.with_host(lone_queued_weight_by_bytes=lone), ping_pong)
    assert unbuffered == pytest.approx(makespan(driven, ping_pong) + 2 * calls * n / bw,
                                       rel=1e-9)
    assert driven.host.lone_queued_weight(n) == 1.0  # no table: a byte is a byte
