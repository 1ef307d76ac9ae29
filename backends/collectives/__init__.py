"""Real collective communication (book chapter 2), from scratch on point-to-point messages.

The simulated twins live under the same module and function names in
:mod:`simulator.collectives`; each module's docstring states the step structure both follow.

* :mod:`~backends.collectives.point_to_point` — ping-pong, naive one-to-all
* :mod:`~backends.collectives.broadcast` — linear, binomial, pipelined chain, scatter+all-gather
* :mod:`~backends.collectives.scatter_gather` — linear and binomial scatter and gather
* :mod:`~backends.collectives.reduce` — linear, binomial, Rabenseifner
* :mod:`~backends.collectives.all_gather` — ring, recursive doubling, Bruck
* :mod:`~backends.collectives.reduce_scatter` — ring, recursive halving, pairwise exchange
* :mod:`~backends.collectives.all_reduce` — reduce+broadcast, ring, recursive doubling,
  Rabenseifner, binary tree, double binary tree, hierarchical
* :mod:`~backends.collectives.all_to_all` — pairwise exchange, Bruck
* :mod:`~backends.collectives.comm` — :class:`~backends.collectives.comm.Comm`, the per-rank
  messaging all of them are written against.

Who talks to whom (MPICH's fold, NCCL's binary trees) and how buffers are cut are pure specs
shared with the simulated twins: :mod:`simulator.collectives.schedule` and
:mod:`simulator.collectives.chunks`.
"""
