"""Chapter 4 exercise: the time of DataParallel's gather, in the α-β model.

After the forward pass, ``nn.DataParallel`` gathers every replica's output onto the first
device (textbook chapter 4): ``p`` ranks each hold ``n/p`` bytes and the root collects them.
Here you price that gather on links that never contend.

Grade your answer::

    make grade EX=4.3

and read ``solutions/ch04_gather.py`` afterwards.
"""

from __future__ import annotations


def gather_time(p: int, nbytes: float, alpha_s: float, beta_s_per_B: float) -> float:
    """Time of a linear gather of ``nbytes`` in all (``nbytes/p`` from each rank) to one root, s.

    Args:
        p: ranks, root included (≥ 1).
        nbytes: the gathered buffer, bytes; each rank (the root too) holds ``nbytes / p``.
        alpha_s: latency α per message, s.
        beta_s_per_B: time per byte β, s/B.

    Returns:
        The time until the root holds everything, s, when every sender has its own link to the
        root and links never contend (the root can receive from all at once).
    """
    # ===== EXERCISE 4.3: the gather's time ====================================================
    #
    # Points: 4 (in proportion to the tests of ex04_3 that pass; `make grade EX=4.3`)
    #
    # Hints:
    #   1. Unlike a scatter, nothing orders the senders: every rank sends as soon as it starts.
    #      Draw the p − 1 messages on a time line.
    #   2. On links without contention, do messages that travel at the same time slow each
    #      other down? Then what is on the critical path?
    #   3. Do not forget the one rank that sends nothing.
    #   (The textbook's one-port figure, (p − 1)(α + nβ/p), assumes the root takes one message
    #   at a time; it is not what is asked here.)
    #
    # What is graded (tests/exercises/test_ch04_gather.py):
    #   - equal to the simulator's closed form (simulator.collectives.scatter_gather);
    #   - equal to the makespan of the simulated linear gather on a fully connected cluster.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 4.3: implement gather_time in exercises/ch04_gather.py, "
                              "then run `make grade EX=4.3`")
