"""The real twin of pipeline parallelism (book ch. 8–11): GPipe, torchgpipe, PipeDream.

* :mod:`~backends.pipeline.microbatch` — split a mini-batch into micro-batches, merge back;
* :mod:`~backends.pipeline.partition` — cut an ``nn.Sequential`` by a ``balance`` list;
* :mod:`~backends.pipeline.comm` — activations forward, gradients backward (isend/irecv);
* :mod:`~backends.pipeline.checkpointing` — ``always`` / ``except_last`` / ``never``;
* :mod:`~backends.pipeline.memory` — activation bytes counted with saved-tensor hooks;
* :mod:`~backends.pipeline.runtime` — the synchronous runtime (GPipe, 1F1B, interleaved);
* :mod:`~backends.pipeline.pipedream` — asynchronous 1F1B with weight stashing;
* :mod:`~backends.pipeline.profiler` — per-layer times and sizes for the planner;
* :mod:`~backends.pipeline.builtin` — the same split run by ``torch.distributed.pipelining``;
* :mod:`~backends.pipeline.measure` — rank programs that time the runtime, the built-in and each
  stage; :mod:`~backends.pipeline.pipedream_measure` — the one that runs PipeDream.

The schedules themselves are pure functions shared with the simulated twin
(:mod:`simulator.pipeline.schedules`).
"""
