"""Chapter 18 exercise: predict a MultiWorkerMirroredStrategy step.

With ``MultiWorkerMirroredStrategy`` (textbook chapter 18) every worker process holds one
replica; a training step on a global batch of ``N`` rows over ``p`` workers is, on each worker
``w`` with its slice of ``c_w`` rows (exercise 18.1's cut)::

    compute   forward + loss + backward on c_w rows    F(c_w) + L(c_w) + B(c_w)  (0 if c_w = 0)
    pack      the gradients copied into one buffer     P / R_copy
    all-reduce  the ring between the workers           chapter 2's ring on P bytes
    update    SGD on its own copy                      S

The ring all-reduce is a collective: it cannot finish before the *last* worker has packed
its gradients, and — with no contention on the links — it ends one ring after that worker
arrives, whatever the others did meanwhile. The local work (compute, pack, update) runs at
``speed`` times its one-thread profile (the workers share the host's cores and memory).

The simulated twin is ``simulator.tf_distribute.simulate_multi_worker``; its ring is
``simulator.collectives.all_reduce.ring_all_reduce`` (one α and a chunk of ``P/p`` bytes per
step, ``2(p − 1)`` steps, each reduce-scatter step adding the chunk that arrived at the
device's reduction rate). The profile is a ``simulator.data_parallel.TableProfile``: its
``forward_s(rows)``, ``loss_s(rows)``, ``backward_s(rows)`` and ``step_s()`` give ``F``,
``L``, ``B`` and ``S`` in seconds.

Grade your answer::

    make grade EX=18.3

and read ``solutions/ch18_predict_step.py`` afterwards.
"""

from __future__ import annotations

from simulator.data_parallel import TableProfile


def predict_multi_worker_step_s(profile: TableProfile, param_bytes: int, batch: int,
                                workers: int, alpha_s: float, beta_s_per_B: float,
                                memcpy_Bps: float, reduce_Bps: float,
                                speed: float = 1.0) -> float:
    """Predicted seconds of one step of ``workers`` workers on a ``batch``-row global batch,
    ``param_bytes`` of float32 gradients, links of latency ``alpha_s`` and ``beta_s_per_B``
    per byte, copies at ``memcpy_Bps``, additions at ``reduce_Bps`` (bytes/s)."""
    # ===== EXERCISE 18.3: predict a multi-worker step ======================================
    #
    # Points: 6 (in proportion to the tests of ex18_3 that pass; `make grade EX=18.3`)
    #
    # Put the four phases together:
    #   - the slowest worker's compute and pack (the one with the most rows), at `speed`;
    #   - then the ring all-reduce of P bytes between the p workers: 2(p − 1) steps, each
    #     one message of a chunk P/p per worker, plus the additions of the reduce-scatter
    #     (p − 1 chunks of P/p per worker); nothing at all for one worker;
    #   - then the update, at `speed`.
    #
    # Hints:
    #   1. Exercise 18.1's rows: import your replica_rows, or the lab's
    #      simulator.tf_distribute.replica_rows. An empty slice computes nothing — but still
    #      packs and joins the all-reduce.
    #   2. Chapter 2 derived the ring's time (textbook eqs. eq-ring-derivation and
    #      eq-ar-ring): count its latencies, the bytes each worker sends and the bytes it
    #      adds; γ, the time to add a byte, is 1 / reduce_Bps.
    #   3. "speed" slows the local work only: s seconds of one thread take s / speed.
    #
    # What is graded (tests/exercises/test_ch18_predict_step.py, `make grade EX=18.3`):
    #   - your prediction equals simulate_multi_worker's step on a textbook cluster of the
    #     same α, β and device rates (relative 1e-3: the ring's chunks are uneven when p
    #     does not divide the elements) for random profiles, batches (awkward ones
    #     included), 1–6 workers, sizes and speeds;
    #   - with free links and instant copies the step is the slowest slice's compute plus
    #     the update; one worker pays no all-reduce.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 18.3: implement predict_multi_worker_step_s in "
                              "exercises/ch18_predict_step.py")
