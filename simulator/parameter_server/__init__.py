"""The parameter server (PS-Lite), simulated: scheduler, servers, workers on the cluster model.

Twin of :mod:`backends.parameter_server` (book ch. 3; Li et al., *Scaling Distributed Machine
Learning with the Parameter Server*, OSDI 2014). The same roles and the same messages: rank 0
is the scheduler, ranks ``1 … S`` the servers, ranks ``S+1 … S+W`` the workers. The key space
``0 … K−1`` is split into one contiguous range per server (:func:`key_ranges`); every iteration
each worker

1. waits as its consistency model says (:func:`required_clock`): BSP and SSP ask the servers
   for the clock ``t − τ`` (every worker has pushed ``t − τ`` iterations), async never waits;
2. **pulls** the keys it needs — a request to each server that owns some of them, answered
   with the values;
3. **computes** its gradient (time from a compute profile measured on one process, plus a
   seeded straggler delay, :func:`straggler_delays`);
4. **pushes** the gradient, sliced by key range; in BSP it waits for the answer, which the
   server sends only once all ``W`` workers' pushes of that iteration are summed and applied.

Each message is what the real van sends: a header of :data:`HEADER_BYTES` bytes, then the keys
(8 B each, unless they form one range) and the values (4 B each) as separate messages
(:func:`message_nbytes`). A server handles one request at a time (its van's receiving thread),
so its NIC and its CPU are where the **bottleneck** forms as workers are added.

Read in this order — the same parts as the real twin where it has them:

* :mod:`.message` — a message's parts and their sizes, the header, the tags;
* :mod:`.postoffice` — the layout checks, key ranges, slicing keys by range;
* :mod:`.consistency` — BSP / SSP / async: the clock a worker waits for;
* :mod:`.models` — the seeded synthetic datasets, the keys each worker moves, straggler draws;
* :mod:`.cpu` — ``CpuPool``: the host's cores shared by all its ranks;
* :mod:`.spec` — ``PSSpec``: what one simulated run is given, with its measured costs
  (``PSCosts``: the real code's software; ``VanLink``: the van's messages);
* :mod:`.van` — ``AnySource`` and how one message is sent and received;
* :mod:`.train` — the servers' and workers' loops and ``simulate(cluster, spec)``;
* :mod:`.timeline` — ``PSTimeline`` and time per iteration, throughput, idle time;
* :mod:`.bottleneck` — where the bottleneck moves as servers are added (exercise 3.3);
* :mod:`.versus_all_reduce` — the parameter server against ring all-reduce.

This package also holds what both twins share — the layout checks, key ranges, the seeded
synthetic datasets and straggler draws, the time-per-iteration measures — so the real twin
imports them from here.
"""

from simulator.parameter_server.bottleneck import bottleneck_sweep, star_cluster
from simulator.parameter_server.consistency import (
    CONSISTENCY_MODELS,
    check_consistency,
    required_clock,
)
from simulator.parameter_server.cpu import CpuPool
from simulator.parameter_server.message import (
    HEADER_BYTES,
    HEADER_FIELDS,
    READY_TAG,
    REQUEST_TAG,
    RESPONSE_TAG,
    message_nbytes,
)
from simulator.parameter_server.models import (
    SparseLRData,
    batch_rows,
    dense_slices,
    mlp_num_params,
    sparse_lr_slices,
    straggler_delays,
    worker_keys,
)
from simulator.parameter_server.postoffice import (
    PSConfigError,
    check_layout,
    key_ranges,
    skewed_splits,
    slice_bounds,
)
from simulator.parameter_server.spec import PSCosts, PSSpec, VanLink
from simulator.parameter_server.timeline import (
    PSTimeline,
    idle_time_s,
    iteration_time_s,
    iteration_times,
    throughput,
)
from simulator.parameter_server.train import Host, parameter_server, simulate
from simulator.parameter_server.van import (
    ZERO_COST_LINK_BPS,
    AnySource,
    recv_message,
    send_message,
    van_cluster,
)
from simulator.parameter_server.versus_all_reduce import ps_vs_all_reduce

__all__ = ["CONSISTENCY_MODELS", "HEADER_BYTES", "HEADER_FIELDS", "READY_TAG", "REQUEST_TAG",
           "RESPONSE_TAG", "ZERO_COST_LINK_BPS", "AnySource", "CpuPool", "Host", "PSConfigError",
           "PSCosts", "PSSpec", "PSTimeline", "SparseLRData", "VanLink", "batch_rows",
           "bottleneck_sweep", "check_consistency", "check_layout", "dense_slices", "idle_time_s",
           "iteration_time_s", "iteration_times", "key_ranges", "message_nbytes",
           "mlp_num_params", "parameter_server", "ps_vs_all_reduce", "recv_message",
           "required_clock", "send_message", "simulate", "skewed_splits", "slice_bounds",
           "sparse_lr_slices", "star_cluster", "straggler_delays", "throughput", "van_cluster",
           "worker_keys"]
