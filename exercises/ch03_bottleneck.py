"""Chapter 3 exercise 3.3: how many servers until the bottleneck moves to the workers?

Every iteration each of ``W`` workers pushes its gradient (``M`` bytes) and pulls the weights
(``M`` bytes), sliced evenly over ``S`` servers. A server's NIC then carries ``W·M/S`` bytes in
each direction, a worker's NIC ``M``. With server NICs of ``B_s`` bytes/s and worker NICs of
``B_w`` bytes/s, the servers are the bottleneck while ``W·M/(S·B_s) > M/B_w``. Adding servers
helps until the two are equal; after that the workers' own links set the pace.

This is PS-Lite's situation: its ZeroMQ van queues what it sends, so every port can be busy at
once, and the simulator grades your answer that way — with that queued van, the simulated time
per iteration falls as servers are added and stops falling exactly at your ``S*``.

This lab's own van does *not* stop at ``S*``, and the simulator (``rendezvous=True``) says so
too: gloo's sends wait for the receiver and each node has one receiving thread, so a server
moves one message at a time at the slower end's rate. More servers then keep helping past
``S*``, and server bandwidth above a worker's buys nothing (notebook 03; the real van's
structure, ``backends/parameter_server/van.py``).

Grade your answer::

    make grade CH=03
"""

from __future__ import annotations


def servers_where_bottleneck_moves(workers: int, server_Bps: float, worker_Bps: float) -> int:
    """The smallest ``S`` for which a server's NIC is no slower than a worker's per iteration.

    Args:
        workers: ``W`` ≥ 1.
        server_Bps: ``B_s``, a server NIC's bandwidth, bytes/s (> 0).
        worker_Bps: ``B_w``, a worker NIC's bandwidth, bytes/s (> 0).

    Returns:
        ``S* ≥ 1``, an int.
    """
    # ===== EXERCISE 3.3: where the bottleneck moves ========================================
    #
    # Points: 4 (in proportion to the tests of ex03_3 that pass; `make grade EX=3.3`)
    #
    # 1. Write both times per iteration: servers W·M/(S·B_s), workers M/B_w. M cancels.
    # 2. Solve W/(S·B_s) <= 1/B_w for the smallest integer S (math.ceil), at least 1.
    #    Careful with floating point: W·B_w/B_s may come out as 3.0000000000000004.
    #
    # What is graded (tests/exercises/test_ch03_bottleneck.py):
    #   - the inequality holds at your S* and fails at S* − 1, for many W, B_s, B_w;
    #   - the simulator (PS-Lite's queued van): at S* the time per iteration is at its floor,
    #     at S* − 1 it is not, for seven (W, B_s, B_w).
    # =======================================================================================
    raise NotImplementedError("EXERCISE 3.3: implement servers_where_bottleneck_moves in "
                              "exercises/ch03_bottleneck.py")
