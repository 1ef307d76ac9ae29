"""Chapter 3 exercise 3.1: the bounded-delay (SSP) wait in the worker.

Under *bounded delay* τ (Li et al. 2014, §3.4; Ho et al. 2013's stale synchronous parallel) a
worker may run ahead of the slowest worker by at most τ iterations: before iteration ``t`` it
waits until **every** worker has pushed ``t − τ`` iterations. Then the weights it pulls miss at
most the last τ iterations of any worker, and staleness ``t − (slowest clock)`` never exceeds τ.

The lab's servers keep each worker's clock (iterations pushed). ``kv.clock(c)`` sends every
server a request that it answers only once its slowest worker clock is at least ``c``; it returns
a timestamp, and ``kv.wait(ts)`` blocks until all servers answered
(``backends/parameter_server/kv_app.py``).

Grade your answer::

    make grade CH=03
"""

from __future__ import annotations

from typing import Any


def bounded_delay_wait(kv: Any, iteration: int, tau: int) -> None:
    """Block until every worker has pushed ``iteration − tau`` iterations (no wait if ≤ 0).

    Args:
        kv: this worker's ``KVWorker`` (``kv.clock(c) -> ts``, ``kv.wait(ts)``).
        iteration: ``t``, the iteration about to start (0, 1, …).
        tau: τ ≥ 0, the bounded delay.
    """
    # ===== EXERCISE 3.1: the bounded-delay wait =============================================
    #
    # Points: 4 (in proportion to the tests of ex03_1 that pass; `make grade EX=3.1`)
    #
    # 1. The clock to wait for is t − τ. At the start (t − τ ≤ 0) there is nothing to wait for:
    #    return without sending anything (an extra request would cost a round trip).
    # 2. Otherwise ask the servers for that clock and wait for the answer:
    #        kv.wait(kv.clock(t - tau))
    #
    # What is graded (tests/exercises/test_ch03_bounded_delay.py, `make grade CH=03`):
    #   - which clocks you ask for, for many t and τ (a recording stand-in for kv);
    #   - a real SSP run on 4 processes (1 scheduler, 1 server, 2 workers, one a seeded
    #     straggler) with your wait: staleness never exceeds τ, and reaches τ at some point
    #     (so you do not wait longer than needed).
    # =======================================================================================
    raise NotImplementedError("EXERCISE 3.1: implement bounded_delay_wait in "
                              "exercises/ch03_bounded_delay.py")
