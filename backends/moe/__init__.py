"""Expert parallelism (book chapter 22): a mixture-of-experts layer in one process
(:mod:`backends.moe.layer`), its experts sharded over ranks with tokens dispatched and combined
by an uneven all-to-all written on point-to-point messages (:mod:`backends.moe.exchange`,
:mod:`backends.moe.parallel`), and the rank programs that time one step
(:mod:`backends.moe.measure`).
"""

from backends.moe.exchange import all_to_all_uneven, exchange_counts
from backends.moe.layer import MoE, Routing, capacity, route
from backends.moe.parallel import ExpertParallelMoE

__all__ = ["ExpertParallelMoE", "MoE", "Routing", "all_to_all_uneven", "capacity",
           "exchange_counts", "route"]
