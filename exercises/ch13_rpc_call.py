"""Chapter 13 exercise: the cost of RPC calls, one after another or all at once.

An RPC is a request, the function's run on the callee, and a response: a ping-pong with
computation in the middle (textbook chapter 13, "The cost of a call", eq. eq-rpc-call).
``rpc_sync`` calls run one after another; ``rpc_async`` calls to different workers overlap.
Here you price a batch of calls both ways.

Grade your answer::

    make grade EX=13.3

and read ``solutions/ch13_rpc_call.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence


def calls_time(calls: Sequence[tuple[int, int, float]], alpha_s: float, beta_s_per_B: float,
               asynchronous: bool) -> float:
    """Time from the first request to the last response, s, on links that never contend.

    Args:
        calls: one ``(request_bytes, response_bytes, exec_s)`` per call, each to a different
            worker, in the order the caller issues them.
        alpha_s: α of one RPC message, s.
        beta_s_per_B: β, s/B.
        asynchronous: ``False``: each call waits for the previous response (``rpc_sync``);
            ``True``: all are issued at once (``rpc_async``) and the caller waits for all.
    """
    # ===== EXERCISE 13.3: the cost of RPC calls ================================================
    #
    # Points: 4 (in proportion to the tests of ex13_3 that pass; `make grade EX=13.3`)
    #
    # Hints:
    #   1. One call: two messages in the α-β model and the callee's run time between them.
    #   2. Synchronous calls do not overlap at all. Asynchronous ones go to different workers
    #      over links that never contend: which call decides when the caller is done?
    #   3. No calls take no time.
    #
    # What is graded (tests/exercises/test_ch13_rpc_call.py):
    #   - equal to a simulated caller and workers (simulator.core.run_spmd) issuing the same
    #     calls, synchronously and asynchronously.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 13.3: implement calls_time in "
                              "exercises/ch13_rpc_call.py, then run `make grade EX=13.3`")
