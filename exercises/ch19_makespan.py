"""Chapter 19 exercise: how long K closures take on W workers that pull them from one queue.

ParameterServerStrategy's ``ClusterCoordinator`` keeps the scheduled closures in one queue;
each worker, as soon as it is free, takes the next closure and runs it (textbook chapter 19,
"Scheduling closures"; the lab's twins :mod:`backends.tf_distribute.coordinator` and, simulated,
:mod:`simulator.tf_distribute.ps_strategy`). Nobody waits for anybody: a slow worker simply
runs fewer closures. This is **greedy list scheduling** (Graham 1966): each job goes to the
machine that is free first. With nothing shared and no latency, worker ``w`` takes
``per_closure_s[w]`` seconds per closure, and the run ends when the *last* closure finishes.

Grade your answer::

    make grade EX=19.2

and read ``solutions/ch19_makespan.py`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence


def greedy_makespan(closures: int, per_closure_s: Sequence[float]) -> float:
    """Seconds from the first ``schedule`` to the end of the last of ``closures`` equal
    closures, pulled from one queue by workers taking ``per_closure_s[w]`` s each.

    At time 0 every worker is free. Whenever a worker is free and closures are left, it takes
    the next one; when several are free at the same moment, the lowest index takes first.

    Args:
        closures: how many closures ``K`` ≥ 0 are scheduled.
        per_closure_s: each worker's time for one closure, s (all > 0; at least one worker).
    """
    # ===== EXERCISE 19.2: the makespan of a closure queue =====================================
    #
    # Points: 6 (in proportion to the tests of ex19_2 that pass; `make grade EX=19.2`)
    #
    # Hints:
    #   1. Play the coordinator: for each closure in turn, which worker is free first, and
    #      when? A priority queue (heapq) of (time free, worker index) answers that in
    #      O(log W); its tuples also break ties by index for you.
    #   2. The answer is NOT the time the K-th closure *starts*, nor the last finish of the
    #      fastest worker: a straggler that took a closure early holds it to its end.
    #   3. No closures take no time. Return a float.
    #
    # Question before you code: 3 workers at 1 s per closure run 12 closures in 4 s. Add a
    # fourth worker at 10 s per closure. Faster or slower, and by how much? (Graded.)
    #
    # What is graded (tests/exercises/test_ch19_makespan.py):
    #   - equal to the simulated coordinator (simulator.tf_distribute.ps_strategy.
    #     simulate_closures, with a channel of no latency and infinite bandwidth) over random
    #     closure counts, nominal workers and stragglers;
    #   - equal to the simulator's closed form on worker times with ties;
    #   - the answer to the question above, and that a straggler slows a run down at most by
    #     its own closure time (compared with leaving it out).
    # =========================================================================================
    raise NotImplementedError("EXERCISE 19.2: implement greedy_makespan in "
                              "exercises/ch19_makespan.py, then run `make grade EX=19.2`")
