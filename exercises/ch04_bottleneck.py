"""Chapter 4 exercise: how many GPUs DataParallel can use before the first one chokes.

Every DataParallel iteration the first device copies the ``P`` parameter bytes to each of the
other ``p − 1`` devices (replicate) and receives and adds their ``P`` gradient bytes (reduce),
one copy after another (textbook chapter 4; ``simulator/data_parallel.py``'s table). The
compute, meanwhile, is shared: each replica works on ``⌈b/p⌉`` of the ``b`` samples. Leaving
out the inputs and outputs (small next to the model) and the loss and the step (the same for
every ``p``), one iteration costs::

    T(p) = (p−1)·(α + P·β)                  replicate: P bytes to each other device
         + ⌈b/p⌉·(f + g)                    forward f and backward g per sample, in parallel
         + (p−1)·(α + P·β + P·γ)            reduce: P bytes back from each, and add them

with α the latency (s) and β the time per byte (s/B) of a copy from or to the first device,
γ its time to add one byte (s/B). The copies grow with ``p``, the compute shrinks as ``1/p``:
there is a best ``p``, and past it more GPUs make the iteration *slower*. (Roughly: ignoring the
ceiling, ``dT/dp = 0`` at ``p* = sqrt(b·(f+g) / (2α + 2P·β + P·γ))``.)

Grade your answer::

    make grade CH=04

and read ``solutions/ch04_bottleneck.py`` afterwards.
"""

from __future__ import annotations


def best_replica_count(max_devices: int, batch: int, param_bytes: float,
                       forward_s_per_sample: float, backward_s_per_sample: float,
                       alpha_s: float, beta_s_per_B: float, gamma_s_per_B: float) -> int:
    """The number of replicas ``p`` in ``1 … max_devices`` with the shortest ``T(p)``.

    Args:
        max_devices: how many devices there are, ≥ 1.
        batch: the global batch ``b``, samples, ≥ 1.
        param_bytes: ``P``, bytes of parameters (and of gradients).
        forward_s_per_sample: ``f``, s per sample on one device.
        backward_s_per_sample: ``g``, s per sample on one device.
        alpha_s: α of a copy to or from the first device, s.
        beta_s_per_B: β of such a copy, s/B.
        gamma_s_per_B: γ, the first device's time to add one byte, s/B.

    Returns:
        The best ``p``; on a tie, the smaller one (fewer devices for the same time).

    Raises:
        ValueError: ``max_devices < 1`` or ``batch < 1``.
    """
    # ===== EXERCISE 4.2: the first-device bottleneck ========================================
    #
    # Points: 6 (in proportion to the tests of ex04_2 that pass; `make grade EX=4.2`)
    #
    # 1. Write T(p) from the module docstring as a small function. ⌈b/p⌉ in integers is
    #    -(-b // p). Careful: torch.chunk makes only ⌈b/⌈b/p⌉⌉ chunks — with b = 5 and p = 4
    #    just 3 replicas run (and only they are copied to). Use k = that number of chunks in
    #    place of p in the copy terms.
    # 2. Evaluate it for every p = 1 … max_devices and return the smallest argmin.
    # 3. Check with the rough formula: b = 4096, f + g = 3 µs, P = 4 MB, β = 1/24e9 s/B,
    #    α = 5 µs, γ = 0 gives p* ≈ sqrt(0.0123 / 0.00034) ≈ 6.
    #
    # What is graded (tests/exercises/test_ch04_bottleneck.py, `make grade CH=04`):
    #   - your p equals the argmin of the simulated DataParallel iteration
    #     (simulator.data_parallel.simulate_data_parallel, contention none, on a PCIe-like
    #     switch) for many batches, model sizes and links (hypothesis);
    #   - one device is best when copies are expensive, all devices when they are free;
    #   - bad input raises ValueError.
    # =======================================================================================
    raise NotImplementedError("EXERCISE 4.2: implement best_replica_count in "
                              "exercises/ch04_bottleneck.py")
