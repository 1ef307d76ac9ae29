"""Chapter 6 exercise: predict the best bucket size for a model on a network.

Small buckets start communicating early but pay the latency α many times; one huge bucket
pays α once but cannot start before backward has ended. In between lies the best cap — the
bottom of the U-shaped curve of step time against bucket size (textbook chapter 6).

Model one backward pass plus DDP's all-reduces (Li et al., VLDB 2020, §3.2.3):

* backward runs the layers from last to first; layer ``i`` takes ``backward_s[i]`` seconds
  and then its gradient of ``param_bytes[i]`` bytes is ready;
* buckets: :func:`simulator.ddp.assign_buckets` with the cap as both the cap and the first
  bucket's cap (what PyTorch does when ``bucket_cap_mb`` is given);
* a bucket is ready when its last gradient is; its all-reduce of ``n`` bytes takes the ring's
  closed form ``T(n) = 2(p−1)·α + 2·n·(p−1)/p·β`` (``simulator.collectives.all_reduce.
  ring_all_reduce_cost`` with γ = 0), starts when the bucket is ready *and* the previous
  bucket's all-reduce has finished (one communication thread, bucket order);
* the step's backward-plus-communication time is when the last all-reduce ends.

Grade your answer::

    make grade CH=06

and read ``solutions/ch06_bucket_size.py`` afterwards. Then measure your choice on this
machine in ``notebooks/05_ddp.ipynb``.
"""

from __future__ import annotations

from collections.abc import Sequence


def predict_best_bucket_cap(backward_s: Sequence[float], param_bytes: Sequence[int],
                            caps: Sequence[int], world: int, alpha_s: float,
                            beta_s_per_B: float) -> int:
    """The cap among ``caps`` (bytes) with the shortest backward-plus-all-reduce time.

    Args:
        backward_s: backward time of each layer, s, in registration (forward) order.
        param_bytes: gradient bytes of each layer, same order (one parameter per layer).
        caps: candidate bucket caps, bytes.
        world: ranks p ≥ 2.
        alpha_s: α, s per message.
        beta_s_per_B: β, s per byte.

    Returns:
        The best cap (the first of equals).
    """
    # ===== EXERCISE 6.2: the best bucket size ================================================
    #
    # Points: 8 (in proportion to the tests of ex06_2 that pass; `make grade EX=6.2`)
    #
    # For each cap:
    #   1. buckets = assign_buckets(param_bytes, cap, cap)   (from simulator.ddp)
    #   2. ready time of each layer: backward runs i = L−1 … 0, so layer i is ready at
    #      sum(backward_s[i:]). A bucket is ready at the latest ready time of its layers.
    #   3. end = 0; for each bucket in order:
    #          end = max(ready, end) + ring_all_reduce_cost(world, bytes, alpha_s, beta_s_per_B)
    #   4. keep the cap with the smallest end.
    #
    # What is graded (tests/exercises/test_ch06_bucket_size.py, `make grade CH=06`):
    #   - on random models and networks, the simulator (simulator.ddp.predict_step, with the
    #     ring's closed form as its all-reduce) finds your cap within 1 % of its best cap's
    #     step time;
    #   - on a latency-bound network your cap is not the smallest, on a free network it is not
    #     the largest where overlap pays.
    # The measurement (notebook 05) is not graded: on a 2-core VM the step times of nearby
    # caps lie within each other's p10–p90 bands.
    # =====================================================================================
    raise NotImplementedError("EXERCISE 6.2: implement predict_best_bucket_cap in "
                              "exercises/ch06_bucket_size.py")
