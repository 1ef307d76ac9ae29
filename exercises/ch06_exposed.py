"""Chapter 6 exercise: how much communication is hidden — the exposed time in closed form.

Backward produces ``N`` bytes of gradients at a steady rate over ``T_b`` seconds, in ``K``
buckets of ``b = N/K`` bytes; bucket ``k`` is ready at ``k·T_b/K`` and its all-reduce, one at a
time, takes ``c = a + b·β'``. The all-reduce of bucket ``k`` finishes at
``f_k = max(k·T_b/K, f_{k−1}) + c`` (``f_0 = 0``), and the **exposed communication** is what
sticks out after backward, ``E = f_K − T_b`` (textbook chapter 6, "How much communication is
hidden"). Here you solve that recurrence in closed form.

Grade your answer::

    make grade EX=6.3

and read ``solutions/ch06_exposed.py`` afterwards.
"""

from __future__ import annotations


def exposed_communication(bucket_bytes: float, total_bytes: float, backward_s: float,
                          a_s: float, beta_prime_s_per_B: float) -> float:
    """``E(b)``, s: the communication left after backward ends, without a loop.

    Args:
        bucket_bytes: ``b``, bytes of each bucket; ``total_bytes / bucket_bytes`` is a whole
            number ``K ≥ 1``.
        total_bytes: ``N``, all gradient bytes.
        backward_s: ``T_b``, the backward pass, s.
        a_s: ``a``, the fixed cost of one bucket's all-reduce, s (``2(p−1)α`` for a ring).
        beta_prime_s_per_B: ``β'``, its cost per byte of bucket, s/B (``2(p−1)/p·β``).
    """
    # ===== EXERCISE 6.3: the exposed communication in closed form =============================
    #
    # Points: 6 (in proportion to the tests of ex06_3 that pass; `make grade EX=6.3`)
    #
    # Hints:
    #   1. Run the recurrence by hand for K = 3 in two regimes: c shorter than the gap T_b/K
    #      between ready times, and c longer. Draw both on a time line.
    #   2. In the first regime, which all-reduces finish before the next bucket is ready, and
    #      what is left after backward? In the second, once the all-reduces queue up, do they
    #      ever stop running back to back? When does the first one start?
    #   3. Write E for each regime, then show that one expression — the larger of the two —
    #      covers both (compare them at the boundary c = T_b/K).
    #
    # What is graded (tests/exercises/test_ch06_exposed.py):
    #   - equal to the recurrence (lab.figures.data_parallel.exposed_recurrence, the model
    #     behind the textbook's U-curve figure) for random N, K, T_b, a, β';
    #   - the textbook's ResNet-50 number: E(b*) ≈ 1.48 ms at b* ≈ 0.76 MB.
    # ===========================================================================================
    raise NotImplementedError("EXERCISE 6.3: implement exposed_communication in "
                              "exercises/ch06_exposed.py, then run `make grade EX=6.3`")
