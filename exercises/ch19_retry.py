"""Chapter 19 exercise: exactly once — a worker dies mid-closure, nothing is lost or doubled.

When a worker of ParameterServerStrategy dies, the ``ClusterCoordinator`` puts the closures it
was running back at the front of the queue, and another worker runs them from the start
(textbook chapter 19, "Worker failure and closure retry"; TF retries a closure that met an
``UnavailableError``). But the dead attempt may already have sent some of its updates to the
ps tasks, and the retry sends them again. The lab's twin makes that safe with **tokens**: the
``k``-th update a closure sends carries ``(closure id, k)`` on every attempt, and a ps task
applies a token only once (:class:`backends.tf_distribute.ps_strategy.ParameterServer`; the
coordinator is :mod:`backends.tf_distribute.coordinator`). Together the two rules give
*exactly once*: every scheduled closure's updates land once, however often it is run.

You write both rules; the grader plugs them into the real ps tasks and coordinator and kills a
worker in the middle of a closure.

Grade your answer::

    make grade EX=19.3

and read ``solutions/ch19_retry.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping


def apply_once(applied: set[tuple[int, int]], token: tuple[int, int] | None) -> bool:
    """Whether a ps task applies an update carrying ``token``, remembering it in ``applied``.

    Args:
        applied: the tokens this variable shard has applied so far (updated in place).
        token: ``(closure id, k)`` of the ``k``-th update of a closure, or ``None`` for an
            update sent from outside any closure (the coordinator's own: always applied).

    Returns:
        ``True``: apply it now; ``False``: an attempt of its closure already did, skip it.
    """
    # ===== EXERCISE 19.3: the exactly-once rule ===============================================
    #
    # Points: 5 (in proportion to the tests of ex19_3 that pass; `make grade EX=19.3`)
    #
    # Two small functions: this one (the ps side) and closures_to_retry below (the
    # coordinator's side).
    #
    # Hints:
    #   1. Why does a ps need to remember anything? Draw a closure that sends updates 1 and
    #      2, and a worker killed between them: which updates does the retry send, and which
    #      of them had already landed?
    #   2. The ps calls you under its lock, once per update: check and remember in one go.
    #   3. Which updates cannot be repeated by a retry, so need not be remembered?
    #
    # What is graded (tests/exercises/test_ch19_retry.py):
    #   - over random streams of updates, a ps using your apply_once ends with the same
    #     values and the same answers as the twin's ParameterServer;
    #   - closures_to_retry on recorded coordinator states;
    #   - a real run (2 worker processes, ps tasks using your apply_once, the coordinator
    #     using your closures_to_retry) where a worker is SIGKILLed after its closure's first
    #     update: every closure completes exactly once and every update is applied once.
    # =========================================================================================
    raise NotImplementedError("EXERCISE 19.3: implement apply_once in "
                              "exercises/ch19_retry.py, then run `make grade EX=19.3`")


def closures_to_retry(in_flight: Mapping[int, int], dead_worker: int) -> list[int]:
    """The closures to put back at the front of the queue when ``dead_worker`` is lost.

    Args:
        in_flight: closure id → the worker running it, for every closure sent to a worker and
            not yet finished, in the order they were sent (a dict keeps insertion order).
            Not changed.
        dead_worker: the index of the worker that died.

    Returns:
        The ids of its closures, the one sent first first: the coordinator puts them back at
        the front of the queue in that order.
    """
    # ===== EXERCISE 19.3b: which closures to run again ========================================
    #
    # The lab's coordinator sends a worker one closure at a time, but one that keeps several
    # in flight per worker (to hide the dispatch latency) loses them all when the worker
    # dies. Why must a closure of a *living* worker not be retried, even though retrying it
    # would leave the variables right (tokens)? Think of its RemoteValue and of join().
    # =========================================================================================
    raise NotImplementedError("EXERCISE 19.3: implement closures_to_retry in "
                              "exercises/ch19_retry.py, then run `make grade EX=19.3`")
