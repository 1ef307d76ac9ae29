"""Chapter 18, reference answer: a MultiWorkerMirroredStrategy step predicted in closed form
(exercise in ``exercises/ch18_predict_step.py``; the simulated twin is
:func:`simulator.tf_distribute.simulate_multi_worker`)."""

from __future__ import annotations

from simulator.collectives.all_reduce import ring_all_reduce_cost
from simulator.data_parallel import TableProfile
from simulator.tf_distribute import replica_rows


def predict_multi_worker_step_s(profile: TableProfile, param_bytes: int, batch: int,
                                workers: int, alpha_s: float, beta_s_per_B: float,
                                memcpy_Bps: float, reduce_Bps: float,
                                speed: float = 1.0) -> float:
    """The last worker's compute and pack, one ring after it, then the update."""
    def compute(rows: int) -> float:
        if rows == 0:
            return 0.0
        return profile.forward_s(rows) + profile.loss_s(rows) + profile.backward_s(rows)

    slowest = max(compute(rows) for rows in replica_rows(batch, workers))
    arrive = (slowest + param_bytes / memcpy_Bps) / speed
    ring = (ring_all_reduce_cost(workers, param_bytes, alpha_s, beta_s_per_B, 1 / reduce_Bps)
            if workers > 1 else 0.0)
    return arrive + ring + profile.step_s() / speed
